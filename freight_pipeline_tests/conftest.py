"""The suite's one marker: ``slow``, for a test file that runs a whole job, a sync, dbt, Dagster or a
child process. ``make test-fast`` runs the rest (``--fast``: the slow files are not even imported, so
Dagster and dbt are not either; ``-m "not slow"`` selects the same tests after importing everything),
the unit tests, under a minute; ``make test`` and CI run everything.

A file is marked by what its source uses (:data:`SLOW_SIGNS`), so a new test file is classified
without anyone remembering to; a file slow for another reason (large generated data, property-based
examples, a speed measurement) is named in :data:`SLOW_FILES`.

A session that runs slow tests starts a fork server of dbt workers (``marts.worker_server``,
:class:`DbtWorkerServer`): every dbt worker of the session, in its process or a command's, is forked
with dbt imported and the project parsed once already, not a new process that spends about 3 s of CPU
importing dbt and 1.6 s parsing.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from functools import cache
from pathlib import Path

import pytest

from freight_pipeline.config import DBT_WORKER_SERVER_ENV
from freight_pipeline.marts.worker_server import SERVER_MODULE

SLOW_SIGNS = re.compile(
    r"dagster|materialize|execute_in_process|\bdbt\b|DbtWorker|subprocess|run_cli|sys\.executable|run_job|Popen"
    r"|start_child|lake_harness|sync_all|syncer|SyncFn|run_stream|sync_stream"
)
"""What in a test file's source makes it slow: Dagster, dbt, a child process, a sync into a warehouse."""
SLOW_FILES = frozenset({
    "normalize/test_hostile_values.py",  # hypothesis examples over whole shipment documents
    "normalize/test_simulator_documents.py",  # generates and normalizes a simulator's documents
    "simulator/test_http_estimates.py",  # estimate revisions over many simulated days
    "simulator/test_revised_dates.py",
    "simulator/test_generator.py",  # byte-identical generation of whole data sets
    "simulator/test_http_lookup.py",  # every criterion over memo and shipment lookups
    "simulator/test_lookup_engine.py",  # a 100,000-row scan
    "simulator/test_http_corruptions.py",
    "simulator/test_store.py",  # a store of 2,000 shipments modified again and again
    "simulator/test_http_service_modes.py",
    "simulator/test_http_control.py",
    "simulator/test_http_faults.py",
    "client/test_simulator_http.py",  # every endpoint against the store, compared field by field
    "simulator/test_http_in_flight.py",  # waits on the in-flight limit
    "client/test_in_flight_limit.py",  # hundreds of requests at a service's limit
    "sync/test_cursor.py",  # simulated summer-time steps over whole walks
})
"""Test files (under ``freight_pipeline_tests/``) slow for what their source does not show: several
seconds a test on a quiet machine."""


@cache
def runs_slow_things(path: Path) -> bool:
    if path.relative_to(Path(__file__).parent).as_posix() in SLOW_FILES:
        return True
    return path.name != "conftest.py" and bool(SLOW_SIGNS.search(path.read_text()))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--fast", action="store_true", help="only the tests not marked slow (make test-fast)")


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if (config.getoption("fast") and collection_path.suffix == ".py" and collection_path.name.startswith("test_")
            and runs_slow_things(collection_path)):
        return True
    return None


def pytest_configure(config: pytest.Config) -> None:
    # xdist hands out whole files by their number of tests unless told to keep the order: LONGEST_FIRST's
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False
    config.addinivalue_line("markers", "slow: runs a whole job, a sync, dbt, Dagster or a child process "
                            "(left out by make test-fast)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if runs_slow_things(Path(str(item.path))):
            item.add_marker(pytest.mark.slow)
    first = {name: rank for rank, name in enumerate(LONGEST_FIRST)}
    root = Path(__file__).parent
    items.sort(key=lambda item: first.get(Path(str(item.path)).relative_to(root).as_posix(), len(first)))


LONGEST_FIRST = (
    # the lake environment's (freight_pipeline_tests/lake)
    "lake/test_start_together.py", "lake/test_lake_sync.py", "lake/test_lake_dashboard.py",
    "lake/test_lake_maintenance.py", "lake/test_lake_alerts.py", "lake/test_lake_history.py",
    "lake/test_lake_rebuild.py",
    # the default environment's: the longest two, then the files that mostly sleep (a fake browser, latency
    # tails, limits, backoff: 4-24 s each) while the lake's tests keep both cores busy, then the long ones.
    # Not the hedged reads' (client/test_hedge.py): whether a copy wins depends on this process's event loop
    # keeping time, which the lake's first files (sixteen Dagster processes, three at a time) can starve: it
    # runs after these, in its usual order (4 of 18 copies won, 5 asserted, in one CI of three at 8b20def's order)
    "job/test_run.py", "sync/test_crash.py", "commands/test_check_ui.py",
    "client/test_in_flight_limit.py", "simulator/test_http_in_flight.py", "simulator/test_http_faults.py",
    "client/test_simulator_http.py", "client/test_slots_and_tokens.py", "commands/test_status.py",
    "sync/test_shipments.py", "sync/test_bad_data.py", "dashboard/test_dashboard.py", "alerts/test_alerts.py",
    "commands/test_sync_command.py", "commands/test_demo.py", "commands/test_runs_at_once.py",
    "dbt/test_dbt_project.py", "sync/test_rebuild.py",
    "warehouse/test_older_readers.py", "sync/test_reconcile.py", "sync/test_documents.py", "sync/test_memo_batch.py",
    "sync/test_restore.py", "marts/test_worker.py", "dbt/test_eta_marts.py", "sync/test_daylight_saving.py",
    "sync/test_nulls.py", "sync/test_freshness.py", "dbt/test_unknown_values.py", "warehouse/test_crash.py",
)
"""The test files that take longest (each over 14 s of wall in a run of both suites at once, as ``make test`` runs
them; longest first), and those that mostly sleep: they run first, the others after in their usual order (a stable
sort), so that pytest-xdist's workers (a whole file each, ``--dist loadfile``, in this order:
:func:`pytest_configure`) do not end with one of them running alone, or waiting, while the other cores have nothing
left. Out of date, it only balances the workers less well."""


class DbtWorkerServer:
    """The session's fork server of dbt workers (not ``--fast``'s: it runs no dbt), started by the process that
    runs the session (pytest's, or the controller of pytest-xdist's workers, which inherit it: one server for all of
    them, not one each, 2 s of CPU and 140 MB apiece) and named in the environment of every test and command. It
    listens at once: a worker asked for while it imports and warms up (a few seconds) waits for it. None when the
    variable is set already (``FREIGHT_DBT_WORKER_SERVER= make test``: every worker a process of its own, to
    compare)."""

    KEY = pytest.StashKey["DbtWorkerServer"]()

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="dbt-workers-"))  # short: a socket's path has at most 107 bytes
        socket_path = self.folder / "socket"
        with (self.folder / "server.log").open("w") as log:
            self.process = subprocess.Popen([sys.executable, "-m", SERVER_MODULE, "--socket", str(socket_path)],
                                            stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT)
        os.environ[DBT_WORKER_SERVER_ENV] = str(socket_path)

    def stop(self) -> str | None:
        """Stop the server (its input ends); what it said when it had ended before (or ended otherwise than by its
        input's end: an exit code but 0), else None."""
        ended_early = self.process.poll()
        os.environ.pop(DBT_WORKER_SERVER_ENV, None)
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:  # ours, not a failure of the session's
            self.process.kill()
            self.process.wait()
            ended_early = None
        else:
            ended_early = ended_early if ended_early is not None else (self.process.returncode or None)
        said = (self.folder / "server.log").read_text(errors="replace")
        with contextlib.suppress(OSError):
            shutil.rmtree(self.folder)
        return None if ended_early is None else f"ended with {ended_early} during the session: {said}"


def pytest_sessionstart(session: pytest.Session) -> None:
    config = session.config
    if (hasattr(config, "workerinput") or config.getoption("fast") or config.option.collectonly
            or DBT_WORKER_SERVER_ENV in os.environ):
        return  # an xdist worker (the server is its controller's), a session without dbt, or one set already
    config.stash[DbtWorkerServer.KEY] = DbtWorkerServer()


def pytest_sessionfinish(session: pytest.Session) -> None:
    server = session.config.stash.get(DbtWorkerServer.KEY, None)
    if server is None:
        return
    ended_early = server.stop()
    if ended_early is not None:  # the session's workers were processes of their own, silently: the server's failure
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line("")
            reporter.write_line(f"the fork server of dbt workers {ended_early}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
