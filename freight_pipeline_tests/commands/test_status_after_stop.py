"""What ``freight-pipeline status`` says of a sync whose process is gone before it recorded its end (``kill -9``, a
crash, the machine stopped) between its streams, in its checks or in its publish, of one still running, and of one a
SIGTERM stopped before its build ran: each step it did not finish, by name, as ``interrupted`` (only of a process
gone), or as stopped, never as a success, nor as killed when it was stopped."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from freight_pipeline.cli import TERMINATED
from freight_pipeline.config import DBT_REPLAY_ENV, DBT_WORKER_SERVER_ENV, REPO_ROOT
from freight_pipeline.defs.freight_job import PUBLISH_KEY
from freight_pipeline.simulator.server import RunningSimulator
from freight_pipeline.sync.runner import STOPPED
from freight_pipeline.sync.streams import STREAM_NAMES
from freight_pipeline.warehouse.meta import BUILD_STREAM
from freight_pipeline.warehouse.paths import last_job_run_path, run_log_path
from freight_pipeline.warehouse.run_log import GONE, INTERRUPTED, NOT_BEGUN, runs_after_publish
from freight_pipeline.warehouse.writer_lock import lock_path, partition_lock, writer_lock
from freight_pipeline_tests.commands.conftest import cli_env, run_cli, shown, unpublished

STOPPED_AT = textwrap.dedent("""
    import os, signal, sys, threading, time
    from freight_pipeline.cli import main
    from freight_pipeline.job import run
    from freight_pipeline.marts.worker import DbtWorker
    from freight_pipeline.process_end import stop_asked
    from freight_pipeline.warehouse.embedded import EmbeddedDuckDB

    where, how = sys.argv[1], sys.argv[2]

    def say():
        sys.stderr.write(f"stopping at {where}\\n")
        sys.stderr.flush()

    def stop(said=False):  # SIGKILL or SIGTERM to this process where the run is; or a pause, until the test kills it
        if not said:
            say()
        if how == "pause":
            time.sleep(600)
        if how.startswith("group-"):  # to each process of its group (a service manager's stop): its dbt worker too
            os.killpg(0, getattr(signal, how.removeprefix("group-")))
        else:
            os.kill(os.getpid(), getattr(signal, how))
        if threading.current_thread().name == "freight-job":  # a Dagster run's engine: on once its stop was
            for _ in range(3000):  # asked, as Dagster's main thread asks it (``process_end.ask_stop``)
                if stop_asked():
                    break
                time.sleep(0.01)

    run_stream, checks, publish, dbt = run._run_stream, run._checks, EmbeddedDuckDB.publish, DbtWorker.run

    async def _run_stream(stream, *args):  # between the streams: the one before ended, this one not begun
        if where == "sync_" + stream.name:
            stop()
        return await run_stream(stream, *args)

    def _checks(*args, **kwargs):
        if where == "checks":
            stop()
        return checks(*args, **kwargs)

    def _publish(self, *args):
        if where == "publish":
            stop()
        return publish(self, *args)

    def _dbt(self, *args):  # in dbt's build: the stop a second after the run asked the worker for it
        if where == "dbt":
            say()  # here, not in the timer's thread, whose lines a Dagster run's capture may take
            threading.Timer(1.0, stop, (True,)).start()
        return dbt(self, *args)

    run._run_stream, run._checks, EmbeddedDuckDB.publish, DbtWorker.run = _run_stream, _checks, _publish, _dbt
    sys.exit(main(sys.argv[3:]))
""")


@contextlib.contextmanager
def sync_stopped_at(sim: RunningSimulator, data_dir: Path, where: str, how: str,
                    dagster_home: Path | None = None) -> Iterator[subprocess.Popen[str]]:
    """``freight-pipeline sync --no-dagster`` of ``data_dir`` (a Dagster run in ``dagster_home``, when given) in a
    process group of its own, stopped ``how`` (a signal's name, or ``pause``) as it comes ``where`` (a stream's step,
    ``checks``, ``dbt`` (a second into dbt's build) or ``publish``): yielded once there (its stderr
    read to that line); its group killed at the block's end, whatever happens. The build runs dbt (no replay of its
    statements)."""
    env = cli_env(FREIGHT_BASE_URL=sim.base_url, FREIGHT_USERNAME=sim.username, FREIGHT_PASSWORD=sim.password,
                  **{DBT_REPLAY_ENV: "0"}, **({"DAGSTER_HOME": str(dagster_home)} if dagster_home else {}))
    way = [] if dagster_home else ["--no-dagster"]
    child = subprocess.Popen([sys.executable, "-c", STOPPED_AT, where, how, "sync", *way, "--data-dir",
                              str(data_dir)], env=env, cwd=REPO_ROOT, text=True, start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert child.stderr is not None
        said = []
        for line in child.stderr:
            said.append(line)
            if line.startswith(f"stopping at {where}"):
                break
        else:
            raise AssertionError(f"the sync ended before {where}: {''.join(said)[-3000:]}")
        yield child
    finally:
        with contextlib.suppress(ProcessLookupError):  # the run, and its dbt worker
            os.killpg(child.pid, signal.SIGKILL)
        child.wait(60)
        if child.stderr is not None:
            child.stderr.close()


def ended_stopped_at(sim: RunningSimulator, data_dir: Path, where: str, how: str,
                     dagster_home: Path | None = None) -> tuple[int, str]:
    """:func:`sync_stopped_at` to its end: the child's exit code and all it said on stderr."""
    with sync_stopped_at(sim, data_dir, where, how, dagster_home=dagster_home) as child:
        assert child.stderr is not None
        err = child.stderr.read()
        child.wait(120)
    return child.returncode, err


@pytest.fixture
def data_dir(published: Path, tmp_path: Path) -> Path:
    """A copy of the published warehouse (``conftest.published``: every stream synced and published, no build)."""
    return Path(shutil.copytree(published, tmp_path / "data", symlinks=True))


def test_a_sync_killed_between_streams_shows_running_then_interrupted_with_each_step_it_never_ran(
    sim: RunningSimulator, data_dir: Path
) -> None:
    """``kill -9`` after the shipments stream ended, before the code conversions began: ``status`` showed the run's
    shipments as a success and nothing else, as if the run had ended well (was: nothing of the code conversions, the
    documents, the checks, the build and the publish never having run). While it runs, the run is running."""
    with sync_stopped_at(sim, data_dir, "sync_code_conversions", "pause") as child:
        running = unpublished(data_dir)
        assert shown(running) == [("shipments", "success", None), ("job", "running", None)], running
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(60)
    runs = unpublished(data_dir)
    assert {run["run_id"] for run in runs} == {running[0]["run_id"]}
    assert shown(runs) == [("shipments", "success", None), ("code_conversions", INTERRUPTED, GONE),
                           ("documents", INTERRUPTED, NOT_BEGUN), ("job checks", INTERRUPTED, NOT_BEGUN),
                           (BUILD_STREAM, INTERRUPTED, NOT_BEGUN), ("job publish", INTERRUPTED, NOT_BEGUN)], runs

    text = run_cli(["status", "--data-dir", str(data_dir)], cli_env())
    assert "job checks" in text.stdout and "job publish" in text.stdout and INTERRUPTED in text.stdout, text.stdout


@pytest.mark.parametrize("where", ["checks", "publish"])
def test_a_sync_killed_in_its_checks_or_its_publish_shows_the_step_it_was_in_interrupted(
    sim: RunningSimulator, data_dir: Path, where: str
) -> None:
    """``kill -9`` in the checks, or in the publish (after the build): ``status`` listed every stream of the run, and
    its build, as a success, and said nothing of the run being killed."""
    with sync_stopped_at(sim, data_dir, where, "SIGKILL") as child:
        child.wait(60)
    assert child.returncode == -signal.SIGKILL
    runs = unpublished(data_dir)
    streams = [("shipments", "success", None), ("code_conversions", "success", None), ("documents", "success", None)]
    if where == "checks":
        job = [("job checks", INTERRUPTED, GONE), (BUILD_STREAM, INTERRUPTED, NOT_BEGUN),
               ("job publish", INTERRUPTED, NOT_BEGUN)]
    else:
        streams.append((BUILD_STREAM, "success", None))
        job = [("job publish", INTERRUPTED, GONE)]
    assert sorted(shown(runs)[:len(streams)]) == sorted(streams) and shown(runs)[len(streams):] == job, runs


def test_a_sync_stopped_by_sigterm_before_its_build_ran_shows_the_build_stopped_not_killed(
    sim: RunningSimulator, data_dir: Path
) -> None:
    """SIGTERM in the checks: the run ends cleanly (``terminated (SIGTERM) in step marts``, exit 143), as its build was
    to begin; ``status`` showed the build ``interrupted``, its process gone (killed or crashed): the build was logged
    as running when planned, and the stop came before the block that logs how it ended. A stop is said as a stream's
    is: ``failed``, stopped."""
    code, err = ended_stopped_at(sim, data_dir, "checks", "SIGTERM")
    assert code == TERMINATED, err
    assert err.splitlines()[-1].startswith("freight-pipeline sync: terminated (SIGTERM) in step marts: "), err
    runs = unpublished(data_dir)
    assert not [run for run in runs if run["status"] == INTERRUPTED or "killed" in (run["error"] or "")], runs
    assert shown(runs)[-2:] == [(BUILD_STREAM, "failed", STOPPED), ("job publish", "skipped", f"not run: {STOPPED}")]


@pytest.mark.parametrize("where", ["sync_shipments", "checks"])
def test_a_dagster_run_stopped_by_sigterm_ends_its_engine_s_thread_as_stopped_not_killed(
    sim: RunningSimulator, data_dir: Path, tmp_path: Path, where: str
) -> None:
    """A Dagster run executes the engine in a thread of the op, which no signal reaches, and Dagster raises the stop
    in the main thread, in its own code as often as in the op's: the thread went on while the process ended (the
    streams after it and the build logged ``interrupted``, its process killed or crashed; a process ending with
    SIGABRT, ``FATAL: exception not rethrown``, when the thread was in a DuckDB call). The thread is stopped as the
    main thread's run is (in a stream, the stream stopped; between steps, the next not run) and awaited: the same
    ending as without Dagster."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    code, err = ended_stopped_at(sim, data_dir, where, "SIGTERM", dagster_home=home)
    assert code == TERMINATED, err  # not -6 (SIGABRT)
    assert err.splitlines()[-1].startswith("freight-pipeline sync: terminated (SIGTERM) in Dagster run "), err
    runs = unpublished(data_dir)
    assert not [run for run in runs if run["status"] == INTERRUPTED or "killed" in (run["error"] or "")], runs
    assert shown(runs)[-1] == ("job publish", "skipped", f"not run: {STOPPED}")
    stopped = [(stream, status) for stream, status, error in shown(runs) if STOPPED in (error or "")]
    if where == "sync_shipments":  # stopped in its stream, before it wrote: the other steps not run
        assert stopped[0] == ("shipments", "failed") and {status for _, status in stopped[1:]} == {"skipped"}, runs
    else:  # the streams done; the build, which the checks came before, not run
        assert ("shipments", "success") in [(stream, status) for stream, status, _ in shown(runs)], runs
        assert stopped == [(BUILD_STREAM, "failed"), ("job publish", "skipped")], runs


def test_a_dagster_run_stopped_as_it_publishes_does_not_publish(
    sim: RunningSimulator, data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Dagster run's publish runs in the engine's thread, which went on past a stop to its end: readers got the
    run's publish, while Dagster showed the run stopped and never said it published. A stop asked before the
    publish lets readers see anything ends it there, as without Dagster: nothing published, nothing said so."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    code, err = ended_stopped_at(sim, data_dir, "publish", "SIGTERM", dagster_home=home)
    assert code == TERMINATED, err
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    with dg.DagsterInstance.get() as instance:
        assert instance.get_latest_materialization_event(PUBLISH_KEY) is None
    runs = unpublished(data_dir)  # the run's steps wait for the next publish
    assert shown(runs)[-1] == ("job publish", "failed", STOPPED), runs


@pytest.mark.parametrize("to", ["process", "group"])
@pytest.mark.parametrize("dagster", [True, False], ids=["dagster", "no-dagster"])
def test_a_run_stopped_by_sigterm_in_dbt_s_build_stops_the_build_not_after_it(
    sim: RunningSimulator, data_dir: Path, tmp_path: Path, dagster: bool, to: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM while dbt builds: a Dagster run's op closed the dbt worker under the engine's thread, which waits for
    it (the build logged ``DbtBuildFailed: ... the dbt worker ended without a reply``); without Dagster, the worker
    went on holding the working database, which the build's end could not reopen (the build shown ``interrupted``,
    its process killed or crashed). Both now stop the build where it is (the worker killed, as Ctrl-C kills it in a
    terminal): the build logged stopped, nothing published. SIGTERM to each process of the group (a service
    manager's stop; the worker a process of the group, not the fork server's) may end the worker first."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    if to == "group":
        monkeypatch.delenv(DBT_WORKER_SERVER_ENV, raising=False)
    how = "SIGTERM" if to == "process" else "group-SIGTERM"
    code, err = ended_stopped_at(sim, data_dir, "dbt", how, dagster_home=home if dagster else None)
    assert code == TERMINATED, err
    assert "Traceback" not in err, err
    runs = unpublished(data_dir)
    assert not [run for run in runs if run["status"] == INTERRUPTED or "killed" in (run["error"] or "")], runs
    assert sorted(shown(runs)) == sorted([*((stream, "success", None) for stream in STREAM_NAMES),
                                          (BUILD_STREAM, "failed", STOPPED),
                                          ("job publish", "skipped", f"not run: {STOPPED}")]), runs


def test_a_job_run_recorded_running_whose_writer_lock_it_does_not_hold_is_interrupted(tmp_path: Path) -> None:
    """The job's record of its run says it runs until it ends; its process is judged as a stream's run is, by the
    writer lock (``run_log.logged_runs``), not by its process id, which another process may have taken since."""
    (tmp_path / "work").mkdir()
    holder = {"run_id": "r1", "pid": os.getpid(), "host": socket.gethostname()}
    record = {"run_id": "r1", "started_at": "2026-12-01T10:00:00+00:00", "ended": ["checks"], "finished_at": None,
              "planned": [{"step": "checks", "logged_as": None}, {"step": "publish", "logged_as": None}]}
    last_job_run_path(tmp_path).write_text(json.dumps(record))
    with writer_lock(tmp_path, "r1"):  # its process alive, holding the lock: running
        assert shown(runs_after_publish(tmp_path, {})) == [("job", "running", None)]
    # the lock's file naming the run and a process that lives, the lock not held (a pid reused): gone all the same
    lock_path(tmp_path).write_text(json.dumps(holder))
    assert shown(runs_after_publish(tmp_path, {})) == [("job publish", INTERRUPTED, GONE)]


def test_a_run_recorded_running_is_judged_by_whichever_writer_lock_it_holds_a_backfill_partition_s_too(
    tmp_path: Path,
) -> None:
    """A lake's backfill partition runs under a lock of its own, not the warehouse's, beside others: its run is
    running while it holds that lock, and interrupted once it does not (``kill -9``). A lake's runs were never
    judged, so a killed incremental sync showed ``running`` for good."""
    (tmp_path / "work").mkdir()
    run_log_path(tmp_path).write_text(json.dumps([
        {"stream": "code_conversions", "run_id": "job-run", "status": "running", "error": None},
        {"stream": "shipments", "run_id": "partition-run", "status": "running", "error": None},
        {"stream": "documents", "run_id": "earlier-run", "status": "success", "error": None}]))
    partition = partition_lock("0-999")
    with writer_lock(tmp_path, "job-run"), writer_lock(tmp_path, "partition-run", name=partition):
        assert shown(runs_after_publish(tmp_path, {})) == [
            ("code_conversions", "running", None), ("shipments", "running", None), ("documents", "success", None)]
    assert shown(runs_after_publish(tmp_path, {})) == [
        ("code_conversions", INTERRUPTED, GONE), ("shipments", INTERRUPTED, GONE), ("documents", "success", None)]
    # killed holding it: the lock's file still names the run, the kernel let the lock go
    lock_path(tmp_path, partition).write_text(json.dumps({"run_id": "partition-run", "pid": os.getpid(),
                                                          "host": socket.gethostname()}))
    with writer_lock(tmp_path, "job-run"):
        assert shown(runs_after_publish(tmp_path, {})) == [
            ("code_conversions", "running", None), ("shipments", INTERRUPTED, GONE), ("documents", "success", None)]
