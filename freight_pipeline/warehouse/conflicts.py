"""Lake mode's answer to concurrent writers: a write whose commit met another writer's is run again."""

from __future__ import annotations

import functools
import logging
import random
import time
from collections.abc import Callable
from typing import Any, TypeVar

import duckdb

from freight_pipeline.lake.connect import CONFLICT_ATTEMPTS, LakeCommitConflict, is_commit_conflict

log = logging.getLogger(__name__)
T = TypeVar("T")


def retried_on_conflict(method: Callable[..., T]) -> Callable[..., T]:
    """In lake mode, run a writing method again when its transaction met a concurrent writer's commit
    that DuckLake could not merge (both created a table, say): the transaction rolled back, so
    running it again is safe. Embedded: DuckDB's file lock admits one writer, nothing to retry."""

    @functools.wraps(method)
    def run_retrying(self: Any, *args: Any, **kwargs: Any) -> T:
        if self.lake is None:
            return method(self, *args, **kwargs)
        for attempt in range(1, CONFLICT_ATTEMPTS + 1):
            try:
                return method(self, *args, **kwargs)
            except duckdb.TransactionException as exc:
                if not is_commit_conflict(exc):
                    raise
                reason = " ".join(str(exc).split())[:600]
                if attempt == CONFLICT_ATTEMPTS:
                    raise LakeCommitConflict(
                        f"{method.__name__} met a concurrent writer's commit {attempt} times: {reason}"
                    ) from exc
                log.warning("%s met a concurrent commit (attempt %d): %s", method.__name__, attempt, reason)
                time.sleep(min(5.0, 0.05 * 2**attempt) * (0.5 + random.random()))
        raise AssertionError("unreachable")

    return run_retrying
