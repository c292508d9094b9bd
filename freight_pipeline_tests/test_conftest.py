"""The suite's own lists (``conftest.py``) name test files that exist: a renamed file would silently drop
out of the slow marker or of the longest-first order. The session's one fork server of workers is the process's that
runs the session, not one per pytest-xdist worker."""

from __future__ import annotations

import os
from pathlib import Path

import psutil
import pytest

from freight_pipeline.config import DBT_WORKER_SERVER_ENV
from freight_pipeline_tests.conftest import LONGEST_FIRST, SLOW_FILES

TESTS = Path(__file__).parent


@pytest.mark.parametrize("name", sorted({*SLOW_FILES, *LONGEST_FIRST}))
def test_every_listed_test_file_exists(name: str) -> None:
    assert (TESTS / name).is_file()


def processes_with(text: str) -> dict[int, int]:
    """Process id -> its parent's, of every process whose command line holds ``text``."""
    found = {}
    for process in psutil.process_iter(["cmdline", "ppid"]):
        if text in " ".join(process.info["cmdline"] or ()):
            found[process.pid] = process.info["ppid"]
    return found


def test_the_session_s_fork_server_is_one_started_by_the_process_that_runs_the_session() -> None:
    """Its socket is in this process's environment, and the server listening there was started by pytest's process
    (under pytest-xdist, the controller: this worker's parent), not by this worker."""
    socket = os.environ.get(DBT_WORKER_SERVER_ENV, "")
    if "dbt-workers-" not in socket:
        pytest.skip("no fork server of the session's own (--fast, the variable set from outside)")
    serving = processes_with(f"--socket {socket}")  # the server and the workers it forked, which share its arguments
    servers = [parent for child, parent in serving.items() if parent not in serving]
    session = os.getppid() if "PYTEST_XDIST_WORKER" in os.environ else os.getpid()
    assert servers == [session], f"servers of {socket} (their parents): {servers}; the session's process: {session}"
