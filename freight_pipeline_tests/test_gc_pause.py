"""The garbage collector paused for a batch: off inside, as it was after the outermost block of any thread."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

from freight_pipeline.gc_pause import gc_paused
from freight_pipeline.sync import rebuild


@pytest.fixture(autouse=True)
def collector_restored() -> Iterator[None]:
    enabled = gc.isenabled()
    yield
    (gc.enable if enabled else gc.disable)()


def test_off_inside_on_after_and_after_an_error() -> None:
    gc.enable()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer block still runs
    assert gc.isenabled()
    with pytest.raises(ValueError), gc_paused():
        raise ValueError("a bad record")
    assert gc.isenabled()


def test_a_collector_off_before_stays_off() -> None:
    gc.disable()
    with gc_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_back_on_when_the_last_thread_leaves() -> None:
    gc.enable()
    entered, leave = threading.Event(), threading.Event()

    def other() -> None:
        with gc_paused():
            entered.set()
            leave.wait(10)

    thread = threading.Thread(target=other)
    with gc_paused():
        thread.start()
        assert entered.wait(10)
    assert not gc.isenabled()  # the other thread's batch is still being made
    leave.set()
    thread.join(10)
    assert gc.isenabled()


def test_a_rebuild_derives_its_rows_with_the_collector_paused(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []
    assemble = rebuild.assemble
    monkeypatch.setattr(rebuild, "assemble", lambda *args, **options: seen.append(gc.isenabled())
                        or assemble(*args, **options))
    gc.enable()
    rebuild.derive([])
    assert seen == [False] and gc.isenabled()
