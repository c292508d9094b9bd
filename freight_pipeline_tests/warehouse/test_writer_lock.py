"""The data directory's writer lock: who holds it is said, a wait ends when it is released, the same run takes it
again, and the lock of a SIGKILLed process is taken over by the next run."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from freight_pipeline.config import REPO_ROOT
from freight_pipeline.warehouse.writer_lock import (
    Holder,
    WarehouseBusy,
    last_taker,
    lock_path,
    wait_seconds,
    writer_lock,
)

HOLD_IN_A_CHILD = """
import sys, time
from pathlib import Path
from freight_pipeline.warehouse.writer_lock import writer_lock
with writer_lock(Path(sys.argv[1]), "run-of-the-child"):
    print("held", flush=True)
    time.sleep(600)
"""


def test_a_second_run_is_told_which_run_holds_the_warehouse(tmp_path: Path) -> None:
    with writer_lock(tmp_path, "run-a"):
        with pytest.raises(WarehouseBusy) as busy, writer_lock(tmp_path, "run-b"):
            pass
        assert busy.value.holder.run_id == "run-a" and busy.value.holder.pid == os.getpid()
        said = str(busy.value)
        assert said.startswith(f"another run writes {tmp_path}: run run-a, process {os.getpid()} on "
                               f"{socket.gethostname()}, since ")
        assert said.endswith(" UTC")
    assert Holder.read(lock_path(tmp_path)) == Holder()  # released: it names no holder,
    assert last_taker(tmp_path).run_id == "run-a"  # only who took it last
    with writer_lock(tmp_path, "run-b"):  # and the next run takes it
        pass


def test_the_same_run_takes_it_again_inside_its_block(tmp_path: Path) -> None:
    with writer_lock(tmp_path, "run-a"), writer_lock(tmp_path, "run-a"):
        assert '"run-a"' in lock_path(tmp_path).read_text()
    with writer_lock(tmp_path, "run-c"):
        pass


def test_a_wait_ends_when_the_holder_releases_it_and_runs_out_when_it_does_not(tmp_path: Path) -> None:
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with writer_lock(tmp_path, "run-a"):
            held.set()
            release.wait(30)

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert held.wait(30)
        # 0.3 s, said in whole seconds
        with pytest.raises(WarehouseBusy, match=r"after waiting 0 s: run run-a"), \
                writer_lock(tmp_path, "run-b", wait=0.3):
            pass
        threading.Timer(0.5, release.set).start()
        started = time.monotonic()
        with writer_lock(tmp_path, "run-b", wait=30):
            assert '"run-b"' in lock_path(tmp_path).read_text()
        assert time.monotonic() - started >= 0.4
    finally:
        release.set()
        thread.join()


def test_a_run_waits_for_a_brief_holder_instead_of_being_skipped(tmp_path: Path) -> None:
    """A look at the freshness (``status --alert``) holds the lock for a moment: a cron sync started in the same
    minute runs after it (without a wait of its own), where another run's lock would skip it."""
    held, release = threading.Event(), threading.Event()

    def look() -> None:
        with writer_lock(tmp_path, "status --alert", brief=True):
            held.set()
            release.wait(30)

    thread = threading.Thread(target=look)
    thread.start()
    try:
        assert held.wait(30)
        assert '"brief": true' in lock_path(tmp_path).read_text()
        threading.Timer(0.5, release.set).start()
        with writer_lock(tmp_path, "run-b"):  # wait 0, as a plain sync
            assert release.is_set()
    finally:
        release.set()
        thread.join()


def test_the_lock_of_a_killed_run_is_taken_over(tmp_path: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", HOLD_IN_A_CHILD, str(tmp_path)], cwd=REPO_ROOT,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "held\n"
        with pytest.raises(WarehouseBusy, match=rf"run run-of-the-child, process {child.pid} "), \
                writer_lock(tmp_path, "run-b"):
            pass
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    assert '"run-of-the-child"' in lock_path(tmp_path).read_text()  # the dead run's file is left as it was
    with writer_lock(tmp_path, "run-b"):
        assert '"run-b"' in lock_path(tmp_path).read_text()


@pytest.mark.parametrize("text", ["-1", "nan", "soon", ""])
def test_a_wait_that_is_not_seconds_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        wait_seconds(text)


def test_a_wait_in_seconds_is_read() -> None:
    assert (wait_seconds("0"), wait_seconds("90"), wait_seconds("2.5")) == (0.0, 90.0, 2.5)
