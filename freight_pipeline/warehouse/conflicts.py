"""Lake mode's answer to concurrent writers: a write whose commit met another writer's is run again."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import TypeVar

import duckdb

from freight_pipeline.lake.connect import CONFLICT_ATTEMPTS, LakeCommitConflict, is_commit_conflict

log = logging.getLogger(__name__)
T = TypeVar("T")


def retried_on_conflict(what: str, attempt: Callable[[], T], *, retry: bool) -> T:
    """``attempt()`` (one writing transaction, ``what`` in messages), with ``retry`` (lake mode) run again
    when its transaction met a concurrent writer's commit that DuckLake could not merge (both created
    a table, say): the transaction rolled back, so running it again is safe. Embedded: DuckDB's file
    lock admits one writer, nothing to retry."""
    if not retry:
        return attempt()
    for number in range(1, CONFLICT_ATTEMPTS + 1):
        try:
            return attempt()
        except duckdb.TransactionException as exc:
            if not is_commit_conflict(exc):
                raise
            reason = " ".join(str(exc).split())[:600]
            if number == CONFLICT_ATTEMPTS:
                raise LakeCommitConflict(f"{what} met a concurrent writer's commit {number} times: {reason}") from exc
            log.warning("%s met a concurrent commit (attempt %d): %s", what, number, reason)
            time.sleep(min(5.0, 0.05 * 2**number) * (0.5 + random.random()))
    raise AssertionError("unreachable")
