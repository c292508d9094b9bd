"""The fork server of dbt workers: a worker it forks is the worker a new process would be, and says how it ended.

A server of this module's own (not the session's: these tests end it), on a small ``freight`` database.
"""

from __future__ import annotations

import logging
import os
import re
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import psutil
import pytest

from freight_pipeline.config import DBT_WORKER_SERVER_ENV
from freight_pipeline.marts.worker import DbtWorker
from freight_pipeline.marts.worker_server import SERVER_MODULE, ForkedWorker, start_server
from freight_pipeline.warehouse.paths import working_db_path
from freight_pipeline_tests.dbt.freight_db import build_working_database

ONE_MART = ["build", "--exclude-resource-type", "unit_test", "--select", "+dim_code_conversions"]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("forked")
    build_working_database(root, shipments=5)
    return root


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[subprocess.Popen[str]]:
    """A server, listening (its first line said so), named by :data:`DBT_WORKER_SERVER_ENV`; stopped after the test."""
    socket_path = tmp_path / "s"
    process, said = start_server(socket_path)
    try:
        assert re.fullmatch(r"ready \(project parsed in [0-9.]+ s\)", said), said  # what every worker parses first
        assert len(os.listdir(f"/proc/{process.pid}/task")) == 1  # nothing but the thread that forks
        monkeypatch.setenv(DBT_WORKER_SERVER_ENV, str(socket_path))
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()


def _parent_of(pid: int) -> int:
    return psutil.Process(pid).ppid()


def test_a_forked_worker_runs_the_command_and_says_how_it_ended(server: subprocess.Popen[str],
                                                                 data_dir: Path) -> None:
    with DbtWorker.for_run(data_dir, None) as worker:
        assert isinstance(worker.process, ForkedWorker) and worker.process.poll() is None
        assert _parent_of(worker.process.pid) not in (0, 1, server.pid)  # forked by a waiter the server forked
        reply = worker.run(ONE_MART, {"DBT_INDIRECT_SELECTION": "empty"})
    assert (reply.success, reply.exit_code, reply.error) == (True, 0, None)
    assert worker.process.returncode == 0
    # built into this data directory's database, not the one the server's warm-up parse was configured with
    with duckdb.connect(str(working_db_path(data_dir)), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM analytics.dim_code_conversions").fetchone()[0] > 0

    killed = DbtWorker.for_run(data_dir, None)
    killed.process.kill()
    assert killed.process.wait(timeout=10) == -9
    killed.close()


def test_the_server_ends_with_its_input_and_its_workers_go_on(server: subprocess.Popen[str], data_dir: Path) -> None:
    worker = DbtWorker.for_run(data_dir, None)
    assert server.stdin is not None
    server.stdin.close()
    assert server.wait(timeout=120) == 0  # a bound for a machine under load (10 s ran out in a slow CI)
    reply = worker.run(ONE_MART, {})
    assert reply.success, reply.error
    worker.close()
    with pytest.raises(OSError):  # nothing listens there any more: the next worker is a process of its own
        ForkedWorker.start(str(Path(server.args[-1])), [], {}, sys.stderr)


def test_a_worker_asked_for_while_the_server_warms_up_waits_for_it_and_is_forked(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The server listens before it imports dbt and parses the project: a run that asks for a worker in those
    seconds (the first tests of a session, a run started with its server) gets one forked once the warm-up is done,
    not a process of its own and a warning that nothing listened."""
    socket_path = tmp_path / "s"
    process = subprocess.Popen([sys.executable, "-m", SERVER_MODULE, "--socket", str(socket_path)],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not socket_path.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert process.stdout is not None
        assert socket_path.exists() and not select.select([process.stdout], [], [], 0)[0], "not warmed up yet"
        monkeypatch.setenv(DBT_WORKER_SERVER_ENV, str(socket_path))
        with caplog.at_level(logging.WARNING, logger="freight_pipeline.marts.worker_server"), \
                DbtWorker.for_run(data_dir, None) as worker:
            assert isinstance(worker.process, ForkedWorker)
            assert process.stdout.readline().startswith("ready (project parsed in ")  # said before it forked
            reply = worker.run(ONE_MART, {})
        assert reply.success, reply.error
        assert not [r for r in caplog.records if r.name == "freight_pipeline.marts.worker_server"]
    finally:
        process.kill()
        process.wait()


def test_a_server_that_cannot_be_reached_leaves_each_worker_a_process_of_its_own_and_says_so(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    socket_path = tmp_path / "nothing-listens-here"
    monkeypatch.setenv(DBT_WORKER_SERVER_ENV, str(socket_path))
    with caplog.at_level(logging.WARNING, logger="freight_pipeline.marts.worker_server"), \
            DbtWorker.for_run(data_dir, None) as worker:
        assert isinstance(worker.process, subprocess.Popen)
    assert worker.process.returncode == 0
    (said,) = [r.getMessage() for r in caplog.records if r.name == "freight_pipeline.marts.worker_server"]
    assert str(socket_path) in said and "a process of its own" in said, said


def _started(socket_path: Path, stdin: int) -> subprocess.Popen[str]:
    """A server at ``socket_path`` with its input ``stdin``, once it said it is ready."""
    process = subprocess.Popen([sys.executable, "-m", SERVER_MODULE, "--socket", str(socket_path)], stdin=stdin,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert process.stdout is not None
    said = process.stdout.readline()
    assert said.startswith("ready"), said
    return process


def test_a_server_run_as_a_service_serves_until_sigterm_and_replaces_a_killed_ones_socket(
    tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Started as operations.md says, in the background or by systemd (its input ``/dev/null``): was ended at once,
    silently, its socket left behind, and a server started again failed (``Address already in use``)."""
    socket_path = tmp_path / "service.sock"
    monkeypatch.setenv(DBT_WORKER_SERVER_ENV, str(socket_path))
    first = _started(socket_path, subprocess.DEVNULL)
    try:
        with DbtWorker.for_run(data_dir, None) as worker:  # served: forked, not a process of its own
            assert isinstance(worker.process, ForkedWorker)
        first.kill()  # killed: its socket file stays
        first.wait(timeout=30)
        assert socket_path.exists()
        second = _started(socket_path, subprocess.DEVNULL)  # replaces the leftover
        try:
            assert second.poll() is None
            third = subprocess.run([sys.executable, "-m", SERVER_MODULE, "--socket", str(socket_path)],
                                   stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
            assert third.returncode == 1 and "already listens at" in third.stderr  # one server a socket
            second.terminate()
            assert second.wait(timeout=60) == 0
            assert not socket_path.exists()  # removed as it ended
        finally:
            if second.poll() is None:
                second.kill()
    finally:
        if first.poll() is None:
            first.kill()
