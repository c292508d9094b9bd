"""Where the pipeline keeps things in a data directory: the private working database, the run log,
lake mode's spill folder. Shared by the store, the publish and the commands (no imports of theirs)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

WORK_DIR = "work"
DB_NAME = "warehouse.duckdb"
LAKE_SCRATCH = "lake-spill"
"""Beside the run log in lake mode: where DuckDB spills what does not fit its memory limit."""
DASHBOARD_SCRATCH = "dashboard-spill"
"""Beside it: where the dashboard's lake connections spill (a reader's own folder, not the writers')."""
RUN_LOG = "latest_runs.json"
"""Each stream's latest ``sync_runs`` row, rewritten atomically by every :meth:`RunLog.record_run`:
what ``status`` reads without opening the working database (a reader's lock would stop a sync starting)."""


def working_db_path(data_dir: Path) -> Path:
    return Path(data_dir) / WORK_DIR / DB_NAME


def run_log_path(data_dir: Path) -> Path:
    return Path(data_dir) / WORK_DIR / RUN_LOG


def read_run_log(data_dir: Path) -> list[dict[str, Any]]:
    """The latest run of each stream in the working database (empty before the first run)."""
    try:
        return list(json.loads(run_log_path(data_dir).read_text()))
    except FileNotFoundError:
        return []
