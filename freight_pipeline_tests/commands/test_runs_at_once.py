"""Runs of one data directory that start while another writes it (cron's overlapping ticks): one syncs, the
other is skipped with exit 75 and one line naming the run that writes; ``--wait`` runs after it; a SIGKILLed
run's lock is taken over by the next; ``sync --dagster`` and ``rebuild`` are skipped the same way. A run
stopped by Ctrl-C, SIGTERM or its terminal's going away (SIGHUP) says so in one line and lets go of the lock for
the next; one started to outlive its terminal (``nohup``) does."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import pytest

from freight_pipeline.cli import HUNG_UP, INTERRUPTED, TERMINATED
from freight_pipeline.commands.common import SKIPPED
from freight_pipeline.config import REPO_ROOT
from freight_pipeline.simulator.server import RunningSimulator
from freight_pipeline.sync.runner import STOPPED
from freight_pipeline.warehouse.publish import published_db_path
from freight_pipeline.warehouse.writer_lock import Holder, lock_path, writer_lock
from freight_pipeline_tests.commands.conftest import cli_env, run_cli

SKIP_LINE = re.compile(
    r"sync: skipped: another run writes (?P<dir>\S+): run (?P<run>\S+), process (?P<pid>\d+) on \S+, "
    r"since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC; --wait SECONDS waits for it \(exit 75: not a failure\)\n"
)


def service(sim: RunningSimulator, **more: str) -> dict[str, str]:
    return cli_env(FREIGHT_BASE_URL=sim.base_url, FREIGHT_USERNAME=sim.username, FREIGHT_PASSWORD=sim.password,
                   **more)


STOPPED_LINE = re.compile(
    r"freight-pipeline (?P<command>\w+): (?P<how>interrupted \(Ctrl-C\)|terminated \(SIGTERM\)|hung up \(SIGHUP\)) "
    r"in (?P<where>step \w+|Dagster run [\w-]+): every batch it committed before is kept, the next run goes on "
    r"from the last; exit (?P<code>\d+)"
)


def start_sync(env: dict[str, str], data_dir: Path, *more: str) -> subprocess.Popen[str]:
    """A sync in a process group of its own, which Ctrl-C (SIGINT) interrupts even where this one ignores it (a
    background job of a shell)."""
    return start_command(env, ["sync", "--no-dagster", "--data-dir", str(data_dir), *more], stdout=subprocess.PIPE)


def start_command(env: dict[str, str], argv: list[str], stdout: int = subprocess.DEVNULL,
                  hangup: signal.Handlers = signal.SIG_DFL) -> subprocess.Popen[str]:
    """``freight-pipeline <argv>`` in a process group of its own, with Ctrl-C's default handling (see
    :func:`start_sync`) and SIGHUP's ``hangup``, its stderr a pipe (:class:`Said` reads it as it comes)."""

    def handled() -> None:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGHUP, hangup)

    return subprocess.Popen([sys.executable, "-m", "freight_pipeline.cli", *argv], env=env, cwd=REPO_ROOT, text=True,
                            start_new_session=True, stdout=stdout, stderr=subprocess.PIPE, preexec_fn=handled)


class Said:
    """A child's stderr, read line by line as it comes (in a thread), to act once it said something."""

    def __init__(self, child: subprocess.Popen[str]) -> None:
        assert child.stderr is not None
        self.child = child
        self.lines: list[str] = []
        self.changed = threading.Condition()
        self.reader = threading.Thread(target=self._read, args=(child.stderr,), daemon=True)
        self.reader.start()

    def _read(self, stream: Iterator[str]) -> None:
        for line in stream:
            with self.changed:
                self.lines.append(line.rstrip("\n"))
                self.changed.notify_all()
        with self.changed:
            self.lines.append("")  # the end of the stream
            self.changed.notify_all()

    def wait_for(self, text: str, timeout: float = 120) -> None:
        """Until a line said contains ``text``; AssertionError with what was said if it ends or takes longer."""
        with self.changed:
            if not self.changed.wait_for(lambda: any(text in line for line in self.lines) or
                                         self.lines[-1:] == [""], timeout):
                raise AssertionError(f"not said in {timeout} s: {text!r}; said: {self.text[-3000:]}")
            if not any(text in line for line in self.lines):
                raise AssertionError(f"ended without saying {text!r}: {self.text[-3000:]}")

    def ended(self, timeout: float = 60) -> tuple[int, str]:
        """The child's exit code and all it said, once it ended."""
        code = self.child.wait(timeout)
        self.reader.join(timeout)
        return code, self.text

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


@contextmanager
def started(env: dict[str, str], argv: list[str], stdout: int = subprocess.DEVNULL,
            hangup: signal.Handlers = signal.SIG_DFL) -> Iterator[Said]:
    """:func:`start_command`, its stderr read as it comes; the child's process group killed at the block's end if it
    runs still (the test failed), whatever happens."""
    child = start_command(env, argv, stdout, hangup)
    try:
        yield Said(child)
    finally:
        if child.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
            child.wait(30)
        with contextlib.suppress(ProcessLookupError):  # what it started and left, in its group
            os.killpg(child.pid, signal.SIGKILL)


def holder_pid(data_dir: Path, timeout: float = 120) -> int:
    """The process the data directory's lock file names, once one names it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        holder = Holder.read(lock_path(data_dir))
        if holder.pid is not None:
            return int(holder.pid)
        time.sleep(0.05)
    raise AssertionError(f"no run took the lock of {data_dir} in {timeout} s")


def _logged_shipments_runs(data_dir: Path) -> list[tuple[str, str | None]]:
    """The shipments stream's logged runs, status and error, in the order they were recorded."""
    with duckdb.connect(str(published_db_path(data_dir)), read_only=True) as con:
        return con.execute("SELECT status, error FROM freight_meta.sync_runs WHERE stream = 'shipments' "
                           "ORDER BY rowid").fetchall()


def runs(data_dir: Path) -> list[tuple[str, object, object, str]]:
    """Each run the published warehouse logged: its id, start, end and worst status, in order."""
    with duckdb.connect(str(published_db_path(data_dir)), read_only=True) as con:
        return con.execute(
            "SELECT run_id, min(started_at), max(finished_at), max(status) FROM freight_meta.sync_runs "
            "GROUP BY run_id ORDER BY 2").fetchall()


def shipments(data_dir: Path) -> int:
    with duckdb.connect(str(published_db_path(data_dir)), read_only=True) as con:
        return con.execute("SELECT count(*) FROM freight.shipments").fetchone()[0]


def test_two_syncs_started_together_one_syncs_the_other_is_skipped_and_a_third_waits(
    sim: RunningSimulator, tmp_path: Path
) -> None:
    data_dir, env = tmp_path / "data", service(sim)
    together = [start_sync(env, data_dir), start_sync(env, data_dir)]
    writer_pid = holder_pid(data_dir)
    waiting = start_sync(env, data_dir, "--wait", "300")
    ended = [proc.communicate(timeout=300) for proc in together]
    codes = sorted(proc.returncode for proc in together)
    assert codes == [0, SKIPPED], ended
    winner, skipped = (0, 1) if together[0].returncode == 0 else (1, 0)
    assert together[winner].pid == writer_pid
    said = ended[skipped][1]
    line = SKIP_LINE.fullmatch(said)
    assert line, said  # exactly one line on stderr, nothing on stdout
    assert ended[skipped][0] == "" and Path(line["dir"]) == data_dir.resolve() and int(line["pid"]) == writer_pid
    err = waiting.communicate(timeout=300)[1]
    assert waiting.returncode == 0, err[-3000:]

    logged = runs(data_dir)
    assert logged[0][0] == line["run"]  # the skipped run names the one that synced
    assert len(logged) == 2 and {status for *_, status in logged} == {"success"}  # the skipped run logged nothing
    (_, _, first_end, _), (_, second_start, _, _) = logged
    assert second_start >= first_end  # the waiting run started when the first had ended
    assert shipments(data_dir) == len(sim.store.reader.live_shipment_ids())


def test_the_lock_of_a_killed_sync_is_taken_over_by_the_next(sim: RunningSimulator, tmp_path: Path) -> None:
    data_dir, env = tmp_path / "data", service(sim)
    first = start_sync(env, data_dir)
    assert holder_pid(data_dir) == first.pid
    os.killpg(first.pid, signal.SIGKILL)  # the run and its dbt worker
    first.communicate(timeout=60)
    assert json.loads(lock_path(data_dir).read_text())["pid"] == first.pid  # the dead run's file stays

    done = run_cli(["sync", "--no-dagster", "--data-dir", str(data_dir)], env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert shipments(data_dir) == len(sim.store.reader.live_shipment_ids())


def test_a_sync_stopped_by_ctrl_c_says_so_in_one_line_and_the_next_run_goes_on(
    sim: RunningSimulator, tmp_path: Path
) -> None:
    data_dir, env = tmp_path / "data", service(sim)
    first = start_sync(env, data_dir)
    assert holder_pid(data_dir) == first.pid
    os.killpg(first.pid, signal.SIGINT)  # a terminal's Ctrl-C: the run's process group, its dbt worker too
    _, err = first.communicate(timeout=60)
    assert first.returncode == INTERRUPTED, err[-3000:]
    assert "Traceback" not in err and err.splitlines()[-1].startswith("freight-pipeline sync: interrupted (Ctrl-C)")
    assert err.splitlines()[-1].endswith("; exit 130"), err[-3000:]

    done = run_cli(["sync", "--no-dagster", "--data-dir", str(data_dir)], env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert shipments(data_dir) == len(sim.store.reader.live_shipment_ids())


@pytest.mark.parametrize("group", [False, True], ids=["the-run", "its-group"])
def test_a_sync_stopped_by_sigterm_says_where_in_one_line_exits_143_and_the_next_run_goes_on(
    sim: RunningSimulator, tmp_path: Path, group: bool
) -> None:
    """SIGTERM, as ``kill``, ``timeout`` and Kubernetes send it to the run, or systemd to its whole group (its
    normalizing worker, forked at once, and its dbt worker too): stopped as by Ctrl-C, said in one line."""
    data_dir = tmp_path / "data"
    env = service(sim, FREIGHT_NORMALIZE_WORKERS="1")
    with started(env, ["sync", "--no-dagster", "--data-dir", str(data_dir)]) as said:
        said.wait_for("shipments: 0 of 100 shipments")  # the stream's first tally: a second of it to go
        (os.killpg if group else os.kill)(said.child.pid, signal.SIGTERM)
        code, err = said.ended()
    assert code == TERMINATED, err
    assert "Traceback" not in err and "exception" not in err, err
    assert STOPPED_LINE.fullmatch(err.splitlines()[-1]), err
    assert err.splitlines()[-1].startswith("freight-pipeline sync: terminated (SIGTERM) in step sync_shipments: ")
    assert Holder.read(lock_path(data_dir)) == Holder()  # let go: the next run is not skipped

    done = run_cli(["sync", "--no-dagster", "--data-dir", str(data_dir)], env)
    assert done.returncode == 0, done.stderr[-3000:]
    # the stopped run: not done, and why (not "Cancel...")
    assert _logged_shipments_runs(data_dir) == [("failed", STOPPED), ("success", None)]
    assert shipments(data_dir) == len(sim.store.reader.live_shipment_ids())


def _in_a_terminal() -> None:
    """In the child before it runs: a session of its own whose controlling terminal is its stdin (a pty), as a
    shell in a terminal window or an SSH session starts it; Ctrl-C's and SIGHUP's default handling (whatever this
    process ignores: a CI runner's, ``nohup``'s)."""
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def test_a_sync_whose_terminal_goes_away_stops_as_by_ctrl_c_exits_129_and_the_next_run_goes_on(
    sim: RunningSimulator, tmp_path: Path
) -> None:
    """The terminal a sync runs in goes away (its window closed, the SSH session dropped): the kernel sends SIGHUP
    to its process group, and every write to the terminal fails (EIO). The run stops as by Ctrl-C, to its end:
    its writer lock let go, its stream logged as stopped, exit 129 (it was ended where it stood, saying nothing,
    its run logged as running until the next took its lock over); the next run goes on."""
    data_dir = tmp_path / "data"
    env = service(sim, FREIGHT_NORMALIZE_WORKERS="1", TERM="xterm")  # a terminal that draws bars
    sim.set_faults(latency_ms=100)  # a few seconds of the stream to go once its bar shows
    terminal, its_end = pty.openpty()
    child = subprocess.Popen([sys.executable, "-m", "freight_pipeline.cli", "sync", "--no-dagster", "--data-dir",
                              str(data_dir)], env=env, cwd=REPO_ROOT, stdin=its_end, stdout=its_end, stderr=its_end,
                             preexec_fn=_in_a_terminal)
    os.close(its_end)
    try:
        said, deadline = b"", time.monotonic() + 120
        while b"shipments " not in said:  # the stream's progress bar, drawn on the terminal
            assert child.poll() is None and time.monotonic() < deadline, said.decode(errors="replace")[-3000:]
            if select.select([terminal], [], [], 0.5)[0]:
                said += os.read(terminal, 65536)
        os.close(terminal)  # the window closed: SIGHUP, and the terminal gone
        terminal = -1
        assert child.wait(60) == HUNG_UP
    finally:
        sim.reset_faults()
        if terminal >= 0:
            os.close(terminal)
        if child.poll() is None:
            child.kill()
            child.wait(30)
    assert Holder.read(lock_path(data_dir)) == Holder()  # let go: the next run is not skipped
    done = run_cli(["sync", "--no-dagster", "--data-dir", str(data_dir)], env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert _logged_shipments_runs(data_dir) == [("failed", STOPPED), ("success", None)]
    assert shipments(data_dir) == len(sim.store.reader.live_shipment_ids())


def test_a_sync_started_with_nohup_outlives_its_terminal(sim: RunningSimulator, tmp_path: Path) -> None:
    """SIGHUP ignored (``nohup``: started to outlive the terminal) stays ignored: the run goes on to its end."""
    data_dir = tmp_path / "data"
    with started(service(sim), ["sync", "--no-dagster", "--data-dir", str(data_dir)], hangup=signal.SIG_IGN) as said:
        said.wait_for("shipments: 0 of 100 shipments")
        os.killpg(said.child.pid, signal.SIGHUP)
        code, err = said.ended()
    assert code == 0, err
    assert _logged_shipments_runs(data_dir) == [("success", None)]
    assert shipments(data_dir) == len(sim.store.reader.live_shipment_ids())


def test_a_dagster_sync_stopped_by_sigterm_says_so_in_one_line_and_exits_143(
    sim: RunningSimulator, tmp_path: Path
) -> None:
    """A Dagster run takes SIGTERM as Ctrl-C (``DagsterExecutionInterruptedError``, a failed run): the command still
    says it was SIGTERM, where, and ends as a stopped run does, not as a failed one (exit 1)."""
    data_dir = tmp_path / "data"
    env = service(sim, DAGSTER_HOME=str(tmp_path / "dagster"))
    with started(env, ["sync", "--dagster", "--data-dir", str(data_dir)]) as said:
        said.wait_for("the build, the publish: ")  # the engine's first line, from the run's op
        os.kill(said.child.pid, signal.SIGTERM)
        code, err = said.ended()
    assert code == TERMINATED, err
    assert "Traceback" not in err and "failed" not in err, err
    stopped = STOPPED_LINE.fullmatch(err.splitlines()[-1])
    assert stopped and stopped["how"] == "terminated (SIGTERM)" and stopped["where"].startswith("Dagster run "), err
    assert Holder.read(lock_path(data_dir)) == Holder()


def test_a_dagster_sync_and_a_rebuild_are_skipped_while_another_run_writes(
    sim: RunningSimulator, published: Path, tmp_path: Path
) -> None:
    data_dir = published
    env = service(sim, DAGSTER_HOME=str(tmp_path / "dagster"))
    with writer_lock(data_dir, "the-run-that-writes"):
        for command in (["sync", "--dagster"], ["rebuild"]):
            done = run_cli([*command, "--data-dir", str(data_dir)], env)
            assert done.returncode == SKIPPED, done.stderr
            assert done.stderr.count("\n") == 1 and done.stderr.startswith(f"{command[0]}: skipped: another run "), \
                done.stderr
            assert f"run the-run-that-writes, process {os.getpid()} on " in done.stderr
    assert not (tmp_path / "dagster" / "history").exists()  # skipped before any Dagster run was launched
    with writer_lock(data_dir, "the-run-that-writes"):  # without DAGSTER_HOME: said, the run in no instance
        unset = {name: value for name, value in service(sim).items() if name != "DAGSTER_HOME"}
        done = run_cli(["sync", "--dagster", "--data-dir", str(data_dir)], unset)
    assert done.returncode == SKIPPED, done.stderr
    assert done.stderr.splitlines()[0] == (
        "sync: DAGSTER_HOME is not set: this Dagster run is recorded in no instance and shows in no UI (`make ui` "
        f"shows the runs of DAGSTER_HOME={REPO_ROOT / '.dagster_home'})")
