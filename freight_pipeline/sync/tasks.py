"""Running a batch of requests concurrently, all or nothing.

``asyncio.gather`` lets the siblings of a failed request run on (they keep the client's connection
slots busy and their results are thrown away). :func:`run_all` uses a ``TaskGroup``: the first
failure cancels the rest. The group's ``ExceptionGroup`` is unwrapped so the error that surfaces
(in logs, ``sync_runs.error`` and Dagster) is the original one; failures that happened at the same
moment are added to it as notes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterable
from typing import Any, TypeVar

T = TypeVar("T")


async def run_all(coroutines: Iterable[Coroutine[Any, Any, T]]) -> list[T]:
    """Results of ``coroutines`` run concurrently, in their order; the first failure cancels the others."""
    tasks: list[asyncio.Task[T]] = []
    try:
        async with asyncio.TaskGroup() as group:
            for coroutine in coroutines:
                tasks.append(group.create_task(coroutine))
    except BaseExceptionGroup as failed:
        raise first_failure(failed) from None
    return [task.result() for task in tasks]


def first_failure(group: BaseExceptionGroup) -> BaseException:
    """The first leaf exception of ``group`` (nested groups flattened); the others become its notes."""
    leaves = list(_leaves(group))
    first = leaves[0]
    for other in leaves[1:]:
        first.add_note(f"failed at the same time: {type(other).__name__}: {other}")
    return first


def _leaves(error: BaseException) -> Iterable[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            yield from _leaves(inner)
    else:
        yield error
