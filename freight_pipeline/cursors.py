"""Work spread over a few threads, each on a database cursor of its own (DuckDB runs a query without
the GIL, so small independent queries overlap). No imports of the pipeline's or DuckDB's: the dbt worker
uses it too."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")
Connect = Callable[[], tuple[Any, Callable[[], None]]]
"""What gives a thread its cursor, and what closes that cursor."""


def each_closed(make: Callable[[], Any]) -> Connect:
    """A :data:`Connect` giving the cursors ``make`` makes, each closed by its own ``close``."""
    def connect() -> tuple[Any, Callable[[], None]]:
        cursor = make()
        return cursor, cursor.close

    return connect


def on_cursors(connect: Connect, work: Callable[[Any, Item], Result], items: Iterable[Item], threads: int,
               name: str) -> list[Result]:
    """``work(cursor, item)`` for each of ``items``, ``threads`` at a time (threads named ``name``), each
    thread on the cursor ``connect`` gives it when it first needs one; the results in the order of ``items``;
    every cursor closed at the end."""
    closers: list[Callable[[], None]] = []
    held = threading.local()
    lock = threading.Lock()

    def done(item: Item) -> Result:
        if not hasattr(held, "cursor"):
            with lock:
                held.cursor, close = connect()
                closers.append(close)
        return work(held.cursor, item)

    try:
        with ThreadPoolExecutor(threads, thread_name_prefix=name) as pool:
            return list(pool.map(done, items))
    finally:
        for close in closers:
            with contextlib.suppress(Exception):
                close()
