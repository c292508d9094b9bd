"""Where the pipeline keeps things in a data directory: the private working database, the run log,
lake mode's spill folder. Shared by the store, the publish and the commands (no imports of theirs)."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from freight_pipeline.config import DATA_DIR_ENV

WORK_DIR = "work"
DB_NAME = "warehouse.duckdb"
LAKE_SCRATCH = "lake-spill"
"""Beside the run log in lake mode: where DuckDB spills what does not fit its memory limit."""
DASHBOARD_SCRATCH = "dashboard-spill"
"""Beside it: where the dashboard's lake connections spill (a reader's own folder, not the writers')."""
RUN_LOG = "latest_runs.json"
"""Each stream's latest ``sync_runs`` row, rewritten atomically by every :meth:`RunLog.record_run`:
what ``status`` reads without opening the working database (a reader's lock would stop a sync starting)."""


LAST_JOB_RUN = "last_job_run.json"
"""The job's latest run (``job.run``), rewritten atomically as it starts, as each of its steps ends and as it ends:
its id and start, the steps it plans (each with the stream ``sync_runs`` logs it as, if any) and those that
ended, each step of its own that failed or did not run, with why (the checks, the publish; ``sync_runs`` logs the
streams' and the build's runs), then when it ended (``finished_at``; ``stopped``: why a stop ended it first): what
``status`` says of a run that synced and did not publish, or that is still running, or whose process is gone
(``run_log.runs_after_publish``)."""


UNUSABLE_IN_DUCKDB_PATHS = {"?": "the start of options", "\\": "a folder separator"}
"""Characters DuckDB reads otherwise in a database file's path (duckdb 2.0: ``a?b/w.duckdb`` is created, then its
commit fails on ``a.wal?b/w.duckdb``; ``a\\b/w.duckdb`` is looked for in ``a/b/``) -> what it reads them as."""


def working_db_path(data_dir: Path) -> Path:
    return Path(data_dir) / WORK_DIR / DB_NAME


def checked_db_path(path: Path) -> Path:
    """``path`` (a database file in a data directory), or ValueError when DuckDB cannot use it
    (:data:`UNUSABLE_IN_DUCKDB_PATHS`), naming the data directory's setting."""
    found = [f"{char!r} (DuckDB reads it as {what})" for char, what in UNUSABLE_IN_DUCKDB_PATHS.items()
             if char in str(path)]
    if found:
        raise ValueError(f"DuckDB cannot open the database {path}: its path has {' and '.join(found)}; choose a data "
                         f"directory ({DATA_DIR_ENV}) without them")
    return path


def run_log_path(data_dir: Path) -> Path:
    return Path(data_dir) / WORK_DIR / RUN_LOG


def read_run_log(data_dir: Path) -> list[dict[str, Any]]:
    """The latest run of each stream in the working database (empty before the first run, or unreadable: the
    working database holds them too, ``freight_meta.sync_runs``)."""
    try:
        found = json.loads(run_log_path(data_dir).read_text())
    except (OSError, ValueError):
        return []
    return [run for run in found if isinstance(run, dict)] if isinstance(found, list) else []


def last_job_run_path(data_dir: Path) -> Path:
    return Path(data_dir) / WORK_DIR / LAST_JOB_RUN


def read_last_job_run(data_dir: Path) -> dict[str, Any] | None:
    """The job's latest run (:data:`LAST_JOB_RUN`; None before the first, or unreadable)."""
    try:
        found = json.loads(last_job_run_path(data_dir).read_text())
    except (FileNotFoundError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def write_last_job_run(data_dir: Path, outcome: dict[str, Any]) -> None:
    """:data:`LAST_JOB_RUN` replaced by ``outcome`` (:func:`replace_json`)."""
    replace_json(last_job_run_path(data_dir), outcome)


def replace_json(path: Path, data: Any, default: Callable[[Any], Any] | None = None) -> None:
    """``path`` replaced by ``data`` as JSON in one rename (a reader sees the old file or the new one whole), through a
    temporary file of this writer's own (a lake's writers, backfill partitions, share one data directory)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
    try:
        tmp.write_text(json.dumps(data, default=default, indent=2))
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
