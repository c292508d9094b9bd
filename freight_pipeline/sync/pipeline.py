"""A streaming pipeline with back-pressure: work items -> concurrent fetches -> batches of finished ones ->
one writer.

``stream_as_finished`` takes work items in order from an async iterator (the change walk), starts a
fetch for each as soon as fewer than ``window`` are being fetched or finished and not yet in a batch,
and makes batches of the items whose fetches have *finished*, in the order they finished (each batch
sorted in walk order), so one slow fetch (a request in a latency tail) never holds back the finished
items after it. Each batch is turned by ``prepare`` (in a thread of its own: normalizing) into what
``write`` takes (writing one DuckDB transaction, in a thread of its own), and a batch is prepared
while the one before it is written: DuckDB's work, which releases the GIL, overlaps the
normalization's Python. Batches are prepared and written in order, one write at a time; at most
``depth - 1`` finished batches (at least one) wait for the preparer, and when the writer falls behind,
fetching pauses, so memory is bounded by ``window`` and a few batches, never by the number of items.

What it gives ``prepare`` is a :class:`Finished`: the results, and ``covered``: the last item of the
longest prefix of the walk that this batch and the batches before it hold whole (None when that prefix
did not grow). Once a batch is written every item up to ``covered`` is: a cursor written with the
batch, never past ``covered``, never skips an item still being fetched (a crash re-reads it), and the
straggler is written, in a later batch, when it lands. A batch also goes to the writer, short, when
nothing finished for ``idle_s`` while some did (the walk waits for a lookup page, or only stragglers
are left).

The first error (a fetch failing for a reason that is not one record's, a prepare or a write
failing) cancels the fetches in flight and stops the pipeline; batches written before it stay
written (each is one transaction with the cursor that covers it), the batch in hand is not written.
A write already running in the worker thread is waited for before the error propagates, so the
warehouse connection is never used by two threads at once; when that write fails too, its error
(an earlier batch's) is the one that surfaces.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from freight_pipeline.sync.tasks import first_failure

W = TypeVar("W")
B = TypeVar("B")
T = TypeVar("T")

_DONE = object()
IDLE_S = 0.5
"""``stream_as_finished``: finished items wait at most this long for more before they are written."""


@dataclass
class Finished(Generic[W, B]):
    """A batch of ``stream_as_finished``: results of finished fetches (in walk order), and the last
    item of the walk's prefix written whole once this batch is (None: that prefix did not grow)."""

    results: list[B]
    covered: W | None


async def read_ahead(items: AsyncIterator[T]) -> AsyncIterator[T]:
    """``items``, with the next one already asked for while the caller works on this one (the next
    lookup page of the change walk travels while this page's shipments are fetched)."""
    pending: asyncio.Future[object] = asyncio.ensure_future(anext(items, _DONE))
    try:
        while (item := await pending) is not _DONE:
            pending = asyncio.ensure_future(anext(items, _DONE))
            yield item  # type: ignore[misc]
    finally:
        if not pending.done():
            pending.cancel()
            await asyncio.wait([pending])


async def stream_as_finished(
    items: AsyncIterable[W],
    fetch: Callable[[W], Awaitable[B]],
    write: Callable[[Any], None],
    *,
    batch_size: int,
    window: int,
    depth: int = 2,
    prepare: Callable[[Finished[W, B]], Any],
    idle_s: float = IDLE_S,
    hold: Callable[[B], bool] | None = None,
) -> int:
    """Fetch every item, write them in batches of finished ones (see the module doc), each through
    ``prepare`` (overlapping the previous batch's write); returns how many batches were written.

    At most ``window`` items are fetched or finished and not yet in a batch at once, but those ``hold``
    says to keep back (a failed record, before the breaker has seen every failure of the run): they go
    in the last batch, so nothing after them in the walk is covered by the cursor before it."""
    if batch_size < 1 or window < 1 or depth < 1:
        raise ValueError("batch_size, window and depth must be at least 1")
    ready: asyncio.Queue[Finished[W, B] | object] = asyncio.Queue(maxsize=max(depth - 1, 1))
    slots = asyncio.Semaphore(window)
    landed: asyncio.Queue[tuple[int, B] | object] = asyncio.Queue()

    async def fetch_one(seq: int, item: W) -> None:
        landed.put_nowait((seq, await fetch(item)))  # its slot is freed once it is in a batch

    async def feed(group: asyncio.TaskGroup) -> None:
        seq = 0
        async for item in items:
            await slots.acquire()
            walked[seq] = item
            group.create_task(fetch_one(seq, item))
            seq += 1
        landed.put_nowait(_DONE)

    walked: dict[int, W] = {}
    """Items started and not yet passed by the written prefix, by their place in the walk."""

    async def produce(group: asyncio.TaskGroup) -> None:
        group.create_task(feed(group))
        batch: list[tuple[int, B]] = []
        held: list[tuple[int, B]] = []
        placed: set[int] = set()
        frontier = 0  # the first place of the walk not yet in a batch
        fed_all = False

        async def hand_over() -> None:
            nonlocal batch, frontier
            batch.sort(key=lambda pair: pair[0])
            placed.update(seq for seq, _ in batch)
            covered: W | None = None
            while frontier in placed:
                placed.discard(frontier)
                covered = walked.pop(frontier)
                frontier += 1
            finished = Finished([result for _, result in batch], covered)
            batch = []
            await ready.put(finished)

        while not (fed_all and not walked):
            try:
                # Not asyncio.wait_for: on 3.11 it returns a result that landed as the task was cancelled
                # and drops the cancellation, and this loop then waited forever for fetches cancelled too.
                async with asyncio.timeout(idle_s if batch else None):
                    got = await landed.get()
            except TimeoutError:
                await hand_over()  # nothing more finished for a while: write what did
                continue
            if got is _DONE:
                fed_all = True
            else:
                assert isinstance(got, tuple)
                (held if hold is not None and hold(got[1]) else batch).append(got)
                slots.release()
            if fed_all and (batch or held) and len(batch) + len(held) + len(placed) >= len(walked):
                batch.extend(held)  # the last batch: everything else has landed
                held.clear()
                await hand_over()
            elif len(batch) >= batch_size:
                await hand_over()
        await ready.put(_DONE)

    return await _run(produce, ready, write, prepare)


async def _run(
    produce: Callable[[asyncio.TaskGroup], Awaitable[None]],
    ready: asyncio.Queue[Any],
    write: Callable[[Any], None],
    prepare: Callable[[Any], Any],
) -> int:
    """Run ``produce`` (which puts batches on ``ready``, then ``_DONE``) and the writer taking them:
    each batch prepared (``prepare``, overlapping the write of the one before) and written, in order."""
    written = 0
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="freight-writer") as writer, \
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="freight-preparer") as preparer:

        async def prepare_and_consume() -> None:
            nonlocal written
            loop = asyncio.get_running_loop()
            writing: asyncio.Future[None] | None = None
            try:
                while (batch := await ready.get()) is not _DONE:
                    try:
                        prepared = await _to_the_end(loop.run_in_executor(preparer, prepare, batch))
                    except BaseException:
                        if writing is not None:  # the write in flight ends first; its failure comes first
                            done, writing = writing, None
                            await _to_the_end(done)
                        raise
                    del batch  # the fetched items: only what was prepared from them is held
                    if writing is not None:
                        await _to_the_end(writing)
                        written += 1
                    writing = loop.run_in_executor(writer, write, prepared)
                    del prepared
                if writing is not None:
                    await _to_the_end(writing)
                    written += 1
                    writing = None
            finally:
                if writing is not None:  # stopped meanwhile (a fetch failed): the write in flight ends first
                    await asyncio.wait([writing])

        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(produce(group))
                group.create_task(prepare_and_consume())
        except BaseExceptionGroup as failed:
            raise first_failure(failed) from None
    return written


async def _to_the_end(future: asyncio.Future[T]) -> T:
    """Await work running in a worker thread; if cancelled meanwhile, still wait for it to end."""
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        await asyncio.wait([future])
        raise
