"""The streaming pipeline: batches in order, fetching overlapping writing, bounded, stopping whole on an error."""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import AsyncIterator

import pytest

from freight_pipeline.sync.pipeline import Finished, stream_as_finished, stream_in_batches


async def numbers(count: int, seen: list[int] | None = None) -> AsyncIterator[int]:
    for n in range(count):
        if seen is not None:
            seen.append(n)
        yield n


def test_batches_are_written_in_order_whatever_order_the_fetches_end() -> None:
    written: list[list[int]] = []

    async def fetch(n: int) -> int:
        await asyncio.sleep(random.Random(n).uniform(0, 0.01))
        return n * 10

    count = asyncio.run(stream_in_batches(numbers(23), fetch, written.append, batch_size=5, window=8))
    assert count == 5
    assert written == [[n * 10 for n in range(start, min(start + 5, 23))] for start in range(0, 23, 5)]


def test_fetching_overlaps_writing_and_a_slow_writer_holds_the_fetching_back() -> None:
    fetched: list[int] = []
    held_most = [0]
    written = [0]
    writing_while_fetching = threading.Event()
    in_write = threading.Event()

    async def fetch(n: int) -> int:
        fetched.append(n)
        if in_write.is_set():
            writing_while_fetching.set()
        held_most[0] = max(held_most[0], len(fetched) - written[0])
        return n

    def write(batch: list[int]) -> None:
        in_write.set()
        time.sleep(0.02)
        written[0] += len(batch)
        in_write.clear()

    asyncio.run(stream_in_batches(numbers(200), fetch, write, batch_size=10, window=5, depth=2))
    assert written[0] == 200
    assert writing_while_fetching.is_set()
    # in fetch (window) + waiting (depth batches) + the batch being filled + the one being written
    assert held_most[0] <= 5 + 2 * 10 + 10 + 10


def test_a_failed_fetch_stops_everything_and_writes_nothing_after_it() -> None:
    written: list[list[int]] = []
    seen: list[int] = []

    async def fetch(n: int) -> int:
        if n == 12:
            raise LookupError("not a record's fault")
        await asyncio.sleep(0.001)
        return n

    with pytest.raises(LookupError, match="not a record's fault"):
        asyncio.run(stream_in_batches(numbers(1000, seen), fetch, written.append, batch_size=5, window=4))
    assert all(max(batch) < 12 for batch in written)  # the batch holding 12, and all after it, unwritten
    assert len(seen) < 100  # the source was not drained


def test_a_write_in_progress_ends_before_the_error_surfaces() -> None:
    state = {"writing": False, "finished_writes": 0}

    async def fetch(n: int) -> int:
        if n == 7:
            await asyncio.sleep(0.01)  # fails while batch 0 is being written
            raise RuntimeError("boom")
        return n

    def write(batch: list[int]) -> None:
        state["writing"] = True
        time.sleep(0.1)
        state["writing"] = False
        state["finished_writes"] += 1

    with pytest.raises(RuntimeError, match="boom"):
        asyncio.run(stream_in_batches(numbers(20), fetch, write, batch_size=5, window=10))
    assert state == {"writing": False, "finished_writes": 1}


def test_a_failed_write_stops_the_fetching() -> None:
    fetched: list[int] = []

    async def fetch(n: int) -> int:
        fetched.append(n)
        await asyncio.sleep(0.001)
        return n

    def write(batch: list[int]) -> None:
        raise ValueError("the breaker tripped")

    with pytest.raises(ValueError, match="the breaker tripped"):
        asyncio.run(stream_in_batches(numbers(10_000), fetch, write, batch_size=5, window=5))
    assert len(fetched) < 100


def test_with_prepare_each_batch_is_prepared_while_the_one_before_it_is_written_and_both_in_order() -> None:
    prepared: list[list[int]] = []
    written: list[list[int]] = []
    overlapped = threading.Event()
    writing = threading.Event()

    async def fetch(n: int) -> int:
        await asyncio.sleep(random.Random(n).uniform(0, 0.002))
        return n

    def prepare(batch: list[int]) -> list[int]:
        if writing.is_set():
            overlapped.set()
        prepared.append(batch)
        return [n * 10 for n in batch]

    def write(batch: list[int]) -> None:
        writing.set()
        time.sleep(0.02)
        written.append(batch)
        writing.clear()

    count = asyncio.run(stream_in_batches(numbers(23), fetch, write, batch_size=5, window=8, prepare=prepare))
    assert count == 5
    assert prepared == [list(range(start, min(start + 5, 23))) for start in range(0, 23, 5)]
    assert written == [[n * 10 for n in batch] for batch in prepared]
    assert overlapped.is_set()


def test_a_failed_prepare_waits_for_the_write_in_flight_whose_own_failure_surfaces_first() -> None:
    finished: list[int] = []

    def prepare(batch: list[int]) -> list[int]:
        if batch[0] == 5:
            time.sleep(0.01)  # while batch 0 is being written
            raise RuntimeError("the breaker tripped")
        return batch

    def write_ok(batch: list[int]) -> None:
        time.sleep(0.1)
        finished.append(batch[0])

    async def fetch(n: int) -> int:
        return n

    with pytest.raises(RuntimeError, match="the breaker tripped"):
        asyncio.run(stream_in_batches(numbers(20), fetch, write_ok, batch_size=5, window=10, prepare=prepare))
    assert finished == [0]  # the batch before the failed one is written whole, none after it

    def write_failing(batch: list[int]) -> None:
        time.sleep(0.1)
        raise ValueError("the warehouse refused batch 0")

    with pytest.raises(ValueError, match="refused batch 0"):
        asyncio.run(stream_in_batches(numbers(20), fetch, write_failing, batch_size=5, window=10, prepare=prepare))


def test_as_finished_a_straggler_holds_back_neither_the_batches_nor_its_own_write() -> None:
    """Item 3 takes long: the items after it are written before it lands, each batch's ``covered``
    is the end of the walk's prefix written whole (never past 3 before 3 is written), and every item
    is written exactly once."""
    batches: list[tuple[list[int], int | None]] = []
    straggler_landed = threading.Event()

    async def fetch(n: int) -> int:
        await asyncio.sleep(0.6 if n == 3 else 0.001)
        if n == 3:
            straggler_landed.set()
        return n

    def prepare(finished: Finished[int, int]) -> tuple[list[int], int | None, bool]:
        return finished.results, finished.covered, straggler_landed.is_set()

    def write(prepared: tuple[list[int], int | None, bool]) -> None:
        results, covered, landed = prepared
        batches.append((results, covered))
        if not landed:
            assert 3 not in results and (covered is None or covered < 3)

    count = asyncio.run(stream_as_finished(numbers(40), fetch, write, batch_size=5, window=8, prepare=prepare,
                                           idle_s=0.05))
    assert count == len(batches)
    written = [n for results, _ in batches for n in results]
    assert sorted(written) == list(range(40))
    assert written.index(3) > written.index(10)  # later items went first
    for results, _ in batches:
        assert results == sorted(results)  # walk order within a batch
    covered = [c for _, c in batches if c is not None]
    assert covered == sorted(covered) and covered[-1] == 39
    done: set[int] = set()
    for results, cover in batches:  # covered never passes an item not written by then
        done.update(results)
        if cover is not None:
            assert set(range(cover + 1)) <= done


def test_as_finished_a_failing_fetch_stops_everything() -> None:
    async def fetch(n: int) -> int:
        if n == 7:
            raise RuntimeError("not a record's fault")
        await asyncio.sleep(0.001)
        return n

    written: list[int] = []
    with pytest.raises(RuntimeError, match="not a record's fault"):
        asyncio.run(stream_as_finished(numbers(50), fetch, lambda f: written.extend(f.results), batch_size=5,
                                       window=4, prepare=lambda f: f))
    assert 7 not in written


def test_as_finished_held_results_go_in_the_last_batch_and_the_cursor_waits_for_them() -> None:
    batches: list[tuple[list[int], int | None]] = []

    async def fetch(n: int) -> int:
        await asyncio.sleep(0.001)
        return n

    count = asyncio.run(stream_as_finished(
        numbers(30), fetch, batches.append, batch_size=5, window=8,
        prepare=lambda f: (f.results, f.covered), hold=lambda n: n in (4, 17),
    ))
    assert count == len(batches)
    *before, last = batches
    assert all(4 not in results and 17 not in results for results, _ in before)
    assert {4, 17} <= set(last[0]) and last[1] == 29
    assert all(cover is None or cover < 4 for _, cover in before)  # never past a held one before it is written
    assert sorted(n for results, _ in batches for n in results) == list(range(30))
