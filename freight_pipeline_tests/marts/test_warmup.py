"""dbt's parse for a new data directory runs in the background and hands its result to the build."""

from __future__ import annotations

import fcntl
import time
from pathlib import Path

from freight_pipeline.marts.project import DATABASE_ENV, DBT_PROJECT_DIR
from freight_pipeline.marts.warmup import PARTIAL_PARSE, start_parse, wait_for_parse
from freight_pipeline.marts.worker import LOCK


def test_a_new_data_directory_is_parsed_once_in_the_background(tmp_path: Path) -> None:
    target, database = tmp_path / "work" / "dbt-target", tmp_path / "work" / "warehouse.duckdb"
    started = time.monotonic()
    assert start_parse(DBT_PROJECT_DIR, target, database, DATABASE_ENV, []) is True
    assert time.monotonic() - started < 2  # it does not wait for the parse
    assert start_parse(DBT_PROJECT_DIR, target, database, DATABASE_ENV, []) is False  # one at a time
    wait_for_parse(target)  # the build waits for it ...
    assert (target / PARTIAL_PARSE).is_file()  # ... and finds the parse in place
    with open(target / LOCK) as lock:  # nothing holds the lock any more
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    assert start_parse(DBT_PROJECT_DIR, target, database, DATABASE_ENV, []) is False  # already parsed


def test_waiting_without_a_parse_returns_at_once(tmp_path: Path) -> None:
    started = time.monotonic()
    wait_for_parse(tmp_path / "never-parsed")
    assert time.monotonic() - started < 1
