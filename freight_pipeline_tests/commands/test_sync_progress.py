"""``freight-pipeline sync`` shows each stream's progress: a bar with the total, the rate and the time left on a
terminal (the command in a pseudo-terminal, read as a user's terminal would show it), and plain lines, at most
one per 15 s per stream, into a pipe; never the password. A full sync of a few hundred shipments served with a
little latency, small batches (a bar moves after each)."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from freight_pipeline.config import REPO_ROOT
from freight_pipeline.simulator.config import FaultConfig, SimulatorConfig, UserConfig
from freight_pipeline.simulator.server import RunningSimulator, running_simulator
from freight_pipeline_tests.commands.conftest import cli_env, run_cli

SHIPMENTS = 120
USER, PASSWORD = "progress-watcher", "pw-progress-4711"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
BAR = re.compile(r"^shipments +\S+ +(\d+)/(\d+) shipments +\d+% +([\d,.]+)/s +(\d+:\d\d) left +([\d,]+) requests?, "
                 r"(\d+) retr(?:y|ies)")


@pytest.fixture(scope="module")
def slow_sim() -> Iterator[RunningSimulator]:
    config = SimulatorConfig(users=(UserConfig(USER, PASSWORD),))
    with running_simulator(config, shipments=SHIPMENTS, seed=5, faults=FaultConfig(latency_ms=5)) as running:
        yield running


def sync_env(sim: RunningSimulator) -> dict[str, str]:
    return cli_env(FREIGHT_BASE_URL=sim.base_url, FREIGHT_USERNAME=USER, FREIGHT_PASSWORD=PASSWORD,
                   FREIGHT_FETCH_BATCH_SIZE="10", FREIGHT_SYNC_DOCUMENTS="0", TERM="xterm", COLUMNS="160")


def in_terminal(args: list[str], env: dict[str, str], timeout: float = 240) -> tuple[int, str]:
    """``freight-pipeline <args>`` with a pseudo-terminal as its stdin, stdout and stderr: its exit code and what
    it wrote there."""
    master, child_end = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "freight_pipeline.cli", *args], env=env, cwd=REPO_ROOT,
                               stdin=child_end, stdout=child_end, stderr=child_end, close_fds=True)
    os.close(child_end)
    written = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if not ready:
                if process.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child's end closed: it ended
                break
            if not chunk:
                break
            written += chunk
        return process.wait(timeout=max(1.0, deadline - time.monotonic())), written.decode(errors="replace")
    finally:
        if process.poll() is None:
            process.kill()
        os.close(master)


def screens(written: str) -> list[str]:
    """Each line the terminal drew (a redrawn bar: one per redraw), without colours and cursor moves."""
    return [line.strip() for line in re.split(r"[\r\n]", ANSI.sub("", written)) if line.strip()]


def test_a_sync_on_a_terminal_shows_a_bar_with_the_total_the_rate_and_the_time_left(
    slow_sim: RunningSimulator, tmp_path: Path
) -> None:
    code, written = in_terminal(["sync", "--no-dagster", "--data-dir", str(tmp_path / "data")], sync_env(slow_sim))
    drawn = screens(written)
    assert code == 0, "\n".join(drawn[-20:])
    bars = [match for line in drawn if (match := BAR.match(line))]
    assert bars, "\n".join(drawn[-20:])
    assert {int(bar[2]) for bar in bars} == {SHIPMENTS}  # the total the walk announced
    moving = [bar for bar in bars if 0 < int(bar[1]) < SHIPMENTS]
    assert moving  # drawn while it ran: a rate and an estimate of the time left
    assert all(float(bar[3].replace(",", "")) > 0 for bar in moving)
    assert [int(bar[1]) for bar in bars] == sorted(int(bar[1]) for bar in bars)
    assert any(re.match(rf"^shipments +\S+ +{SHIPMENTS}/{SHIPMENTS} shipments +100% .* took \d+:\d\d", line)
               for line in drawn)
    assert any(line.startswith("sync_shipments ") for line in drawn)  # the step's line, above the bars
    assert drawn[-1].startswith("sync succeeded in ")
    assert PASSWORD not in written


def test_a_sync_into_a_pipe_says_each_stream_s_progress_at_most_once_per_15_s(
    slow_sim: RunningSimulator, tmp_path: Path
) -> None:
    started = time.monotonic()
    done = run_cli(["sync", "--no-dagster", "--data-dir", str(tmp_path / "data")], sync_env(slow_sim))
    seconds = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert "\x1b[" not in done.stderr and done.stdout == ""  # no bar drawn
    progress = [line.strip() for line in done.stderr.splitlines() if line.startswith("    ")]
    by_stream: dict[str, list[str]] = {}
    for line in progress:
        by_stream.setdefault(line.split(":")[0], []).append(line)
    assert set(by_stream) == {"shipments", "code_conversions"}  # the documents stream is off
    for lines in by_stream.values():  # its first line, then one per 15 s at most, and its last
        assert len(lines) <= 2 + int(seconds // 15), lines
    shipments = by_stream["shipments"]
    assert shipments[0].startswith(f"shipments: 0 of {SHIPMENTS} shipments (0 %); ")
    assert re.fullmatch(rf"shipments: {SHIPMENTS} shipments done in [\d.]+ s, [\d,.]+ shipments/s; "
                        r"[\d,]+ requests, 0 retries", shipments[-1]), shipments[-1]
    steps = [line.split()[0] for line in done.stderr.splitlines() if line.startswith("  ") and line[2] != " "]
    assert steps[:2] == ["sync_shipments", "sync_code_conversions"]
    assert PASSWORD not in done.stderr
