"""The streaming pipeline: batches of finished fetches, fetching overlapping writing, bounded, stopping whole on an
error."""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import AsyncIterator, Callable

import pytest

from freight_pipeline.sync.pipeline import Finished, stream_as_finished


async def numbers(count: int, seen: list[int] | None = None) -> AsyncIterator[int]:
    for n in range(count):
        if seen is not None:
            seen.append(n)
        yield n


def results(finished: Finished[int, int]) -> list[int]:
    """A ``prepare`` that hands the writer the batch's results."""
    return finished.results


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

    asyncio.run(stream_as_finished(numbers(200), fetch, write, batch_size=10, window=5, depth=2, prepare=results))
    assert written[0] == 200
    assert writing_while_fetching.is_set()
    # in fetch (window) + the batch being filled + one waiting (depth - 1) + the one prepared + the one written
    assert held_most[0] <= 5 + 10 + 10 + 10 + 10


def test_a_write_in_progress_ends_before_the_error_surfaces() -> None:
    state = {"writing": False, "finished_writes": 0}

    async def fetch(n: int) -> int:
        if n == 7:
            await asyncio.sleep(0.01)  # fails while the first batch is being written
            raise RuntimeError("boom")
        return n

    def write(batch: list[int]) -> None:
        state["writing"] = True
        time.sleep(0.1)
        state["writing"] = False
        state["finished_writes"] += 1

    with pytest.raises(RuntimeError, match="boom"):
        asyncio.run(stream_as_finished(numbers(20), fetch, write, batch_size=5, window=10, prepare=results))
    assert state == {"writing": False, "finished_writes": 1}


def test_a_failed_write_stops_the_fetching_every_time() -> None:
    """Repeated: a fetch landing just as the failed write cancelled the batcher once made the run wait forever
    (CI hung on it; 200 runs met it every time, after 0 to 64)."""
    fetched_per_run: list[int] = []

    def write(batch: list[int]) -> None:
        raise ValueError("the breaker tripped")

    def one_run() -> int:
        fetched: list[int] = []

        async def fetch(n: int) -> int:
            fetched.append(n)
            await asyncio.sleep(0.001)
            return n

        with pytest.raises(ValueError, match="the breaker tripped"):
            asyncio.run(stream_as_finished(numbers(10_000), fetch, write, batch_size=5, window=5, prepare=results))
        return len(fetched)

    def runs() -> None:
        for _ in range(200):
            fetched_per_run.append(one_run())

    running = threading.Thread(target=runs, daemon=True)  # a hung run must not hold the test process
    running.start()
    running.join(timeout=60)
    assert not running.is_alive(), f"a run never ended after {len(fetched_per_run)} ended"
    assert len(fetched_per_run) == 200 and max(fetched_per_run) < 100


def test_each_batch_is_prepared_while_the_one_before_it_is_written_and_both_in_order() -> None:
    prepared: list[list[int]] = []
    written: list[list[int]] = []
    overlapped = threading.Event()
    writing = threading.Event()

    async def fetch(n: int) -> int:
        await asyncio.sleep(random.Random(n).uniform(0, 0.002))
        return n

    def prepare(finished: Finished[int, int]) -> list[int]:
        if writing.is_set():
            overlapped.set()
        prepared.append(finished.results)
        return [n * 10 for n in finished.results]

    def write(batch: list[int]) -> None:
        writing.set()
        time.sleep(0.02)
        written.append(batch)
        writing.clear()

    count = asyncio.run(stream_as_finished(numbers(23), fetch, write, batch_size=5, window=8, prepare=prepare))
    assert count == len(prepared) >= 5
    assert sorted(n for batch in prepared for n in batch) == list(range(23))
    assert written == [[n * 10 for n in batch] for batch in prepared]
    assert overlapped.is_set()


def test_a_failed_prepare_waits_for_the_write_in_flight_whose_own_failure_surfaces_first() -> None:
    def failing_second() -> Callable[[Finished[int, int]], list[int]]:
        """A ``prepare`` that fails on the second batch, while the first is being written."""
        calls: list[Finished[int, int]] = []

        def prepare(finished: Finished[int, int]) -> list[int]:
            calls.append(finished)
            if len(calls) == 2:
                time.sleep(0.01)
                raise RuntimeError("the breaker tripped")
            return finished.results

        return prepare

    finished: list[list[int]] = []

    def write_ok(batch: list[int]) -> None:
        time.sleep(0.1)
        finished.append(batch)

    async def fetch(n: int) -> int:
        return n

    with pytest.raises(RuntimeError, match="the breaker tripped"):
        asyncio.run(stream_as_finished(numbers(20), fetch, write_ok, batch_size=5, window=10,
                                       prepare=failing_second()))
    assert len(finished) == 1 and len(finished[0]) == 5  # the batch before the failed one is written whole

    def write_failing(batch: list[int]) -> None:
        time.sleep(0.1)
        raise ValueError("the warehouse refused the first batch")

    with pytest.raises(ValueError, match="refused the first batch"):
        asyncio.run(stream_as_finished(numbers(20), fetch, write_failing, batch_size=5, window=10,
                                       prepare=failing_second()))


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
    seen: list[int] = []
    with pytest.raises(RuntimeError, match="not a record's fault"):
        asyncio.run(stream_as_finished(numbers(1000, seen), fetch, written.extend, batch_size=5, window=4,
                                       prepare=results))
    assert 7 not in written
    assert len(seen) < 100  # the source was not drained


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
