"""The suite's one marker: ``slow``, for a test file that runs a whole job, a sync, dbt, Dagster or a
child process. ``make test-fast`` runs the rest (``-m "not slow"``: the unit tests, under a minute);
``make test`` and CI run everything.

A file is marked by what its source uses (:data:`SLOW_SIGNS`), so a new test file is classified
without anyone remembering to; a file slow for another reason (a large simulator) says so itself with
``pytestmark = pytest.mark.slow``.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

SLOW_SIGNS = re.compile(
    r"dagster|materialize|execute_in_process|\bdbt\b|DbtWorker|subprocess|run_cli|sys\.executable|run_job|Popen"
    r"|start_child|lake_harness|sync_all|syncer|SyncFn|run_stream|sync_stream"
)
"""What in a test file's source makes it slow: Dagster, dbt, a child process, a sync into a warehouse."""


@cache
def runs_slow_things(path: Path) -> bool:
    return path.name != "conftest.py" and bool(SLOW_SIGNS.search(path.read_text()))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: runs a whole job, a sync, dbt, Dagster or a child process "
                            "(left out by make test-fast)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if runs_slow_things(Path(str(item.path))):
            item.add_marker(pytest.mark.slow)
