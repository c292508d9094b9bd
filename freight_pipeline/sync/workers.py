"""Normalizing in forked worker processes: a sync's batches (:class:`Assembler`) and a rebuild's
(``rebuild.Derivers``) are normalized on another core than the one that talks HTTP and writes.

A worker is forked from the process that runs the job, so it runs the mapping exactly as that process has it
(nothing is imported again); it leaves when that process is gone (a SIGKILL tells it nothing: it watches), and
the objects it inherited are frozen out of its garbage collector, whose passes would otherwise copy every page
of the parent's heap into the worker (writing their collector headers).

By default workers are forked only once a run has more than :data:`IN_PROCESS_UP_TO` shipments to normalize: a
scheduled run with a few changes normalizes them in its own process, for less CPU than forking a worker and
pickling its batches there and back.
"""

from __future__ import annotations

import datetime as dt
import gc
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from typing import Self

from freight_pipeline.config import NORMALIZE_WORKERS_ENV
from freight_pipeline.datetimes import ServiceZone
from freight_pipeline.sync.assemble import Assembled, assemble
from freight_pipeline.sync.bundle import Bundle


def can_fork() -> bool:
    """Whether worker processes can be forked here (not on every platform)."""
    return "fork" in multiprocessing.get_all_start_methods()


def forked_pool(workers: int) -> ProcessPoolExecutor:
    """``workers`` forked processes, started now, each watching this process (:func:`watch_parent`) with what it
    inherited frozen out of its garbage collector. Other threads may be running (DuckDB's, the event loop, a
    sync's writer in a statement): a worker only runs the mapping's Python over what its pipe brings, and
    CPython (its import lock, ``logging``'s) and the allocators (glibc's, Arrow's jemalloc) hold their locks
    across the fork so that the worker finds them consistent."""
    pool = ProcessPoolExecutor(workers, multiprocessing.get_context("fork"), initializer=_start_worker,
                               initargs=(os.getpid(),))
    for started in [pool.submit(os.getpid) for _ in range(workers)]:
        started.result()
    return pool


def _start_worker(parent: int) -> None:
    gc.freeze()
    watch_parent(parent)


def watch_parent(parent: int) -> None:
    """In a worker: leave when the process that forked it is gone (a SIGKILL ends it with no word to its workers,
    which would wait for work forever); a Ctrl-C is that process's to handle."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection inside the block (reference counting frees what it always does), the
    collector as it was after it. A batch's decoded records stay alive until its Arrow tables are made, and
    every collection their allocations trigger walks them all again with nothing to free: about a third of
    a rebuild's normalization CPU (docs/performance.md)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def sync_workers() -> int:
    """Worker processes that normalize a sync's batches: one where there is a second core to run it on (and
    processes can be forked), else none (normalized in the sync's own process)."""
    return 1 if (os.cpu_count() or 1) > 1 and can_fork() else 0


def _assembled_there(bundles: Sequence[Bundle], fetched_at: dt.datetime, ceiling: str | None,
                     zone: str) -> tuple[Assembled, tuple[int, int]]:
    """In a worker: ``assemble`` of one batch, with the date-times it read without a UTC offset and with one
    (counted by the run's zone, which stays in the sync's process: ``ServiceZone.counts``)."""
    here = ServiceZone(zone)
    with gc_paused():
        return assemble(bundles, fetched_at, ceiling, here), here.counts()


class WorkerGone(RuntimeError):
    """A worker process ended while it normalized a batch: not a record's fault (the stream fails)."""


IN_PROCESS_UP_TO = 100
"""Shipments a sync or a rebuild normalizes in its own process before it forks its default workers
(``normalize_workers`` unset, ``rebuild --workers`` not given): a run that has no more normalizes here, for less
CPU than forking a worker and pickling each batch there and back (a tenth of a sync of 10 or 30 shipments:
docs/performance.md); a full sync's walk lists thousands at its first page and forks before any is fetched."""


class Workers:
    """``workers`` forked processes (:func:`forked_pool`) for the duration of a ``with`` block, none when
    ``workers`` is 0 (the work is then done in this process). With ``in_process_up_to``, they are forked only
    once the work listed (:meth:`foresee`) or handed over (:meth:`_handed`) passes that many shipments
    (:data:`IN_PROCESS_UP_TO`); what comes before is done here."""

    def __init__(self, workers: int, *, in_process_up_to: int = 0) -> None:
        self.workers = workers
        self.in_process_up_to = in_process_up_to
        self.pool: ProcessPoolExecutor | None = None
        self.forked = 0
        """Worker processes forked in the block (0: everything was done in this process)."""
        self.shipments = 0
        """Shipments handed over so far in the block."""
        self._starting = threading.Lock()
        """A sync's walk foresees in its event loop's thread, its batches are handed over in the preparing one."""

    def __enter__(self) -> Self:
        if self.in_process_up_to <= 0:
            self.start()
        return self

    def start(self) -> None:
        """Fork the workers now, unless they run already (or there are none to fork)."""
        with self._starting:
            if self.workers > 0 and self.pool is None:
                self.pool = forked_pool(self.workers)
                self.forked = self.workers

    def foresee(self, listed: int) -> None:
        """The run has listed ``listed`` shipments in all (a sync: the walk's total as announced, and the work
        listed after it): the workers are forked now if that passes ``in_process_up_to``, before a batch of them
        is read: the process holds less then, and so does the worker forked from it."""
        if self.in_process_up_to > 0 and listed > self.in_process_up_to:
            self.start()

    def _handed(self, shipments: int) -> ProcessPoolExecutor | None:
        """``shipments`` more handed over: the workers to give them to (forked now if they pass
        ``in_process_up_to``, whatever was listed), or None: here."""
        self.shipments += shipments
        if self.shipments > self.in_process_up_to:
            self.start()
        return self.pool

    def __exit__(self, *exc: object) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None


class Assembler(Workers):
    """A sync's batches assembled (``assemble``: normalized, raw kept, Arrow tables built) in ``workers`` forked
    processes (:func:`sync_workers`), or in this process when ``workers`` is 0 (or until the run passes
    ``in_process_up_to``). The sync's process then talks HTTP and writes, and the batch is prepared meanwhile on
    the other core; the run's ``zone`` still counts every date-time read."""

    def __init__(self, zone: ServiceZone, workers: int, *, in_process_up_to: int = 0) -> None:
        super().__init__(workers, in_process_up_to=in_process_up_to)
        self.zone = zone

    def __call__(self, bundles: Sequence[Bundle], fetched_at: dt.datetime, ceiling: str | None) -> Assembled:
        """The batch write of ``bundles`` (``assemble``), waiting for the worker that made it."""
        pool = self._handed(len(bundles))
        if pool is None:
            return assemble(bundles, fetched_at, ceiling, self.zone)
        try:
            assembled, counts = pool.submit(_assembled_there, bundles, fetched_at, ceiling, self.zone.name).result()
        except BrokenProcessPool:
            raise WorkerGone("the worker process normalizing the shipments stream's batch ended abruptly (killed, "
                             f"or out of memory); nothing of the batch was written. {NORMALIZE_WORKERS_ENV}=0 "
                             "normalizes in the sync's own process") from None
        self.zone.add_counts(counts)
        return assembled
