"""The dbt project of the marts and how the pipeline invokes it: where it is, where a data directory's
build writes its artifacts, the build's arguments and environment. Plain Python, no dbt import."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from freight_pipeline.config import DBT_DATABASE_ENV, DBT_MEMORY_LIMIT_ENV, REPO_ROOT, MartsSettings
from freight_pipeline.warehouse.paths import working_db_path

DBT_PROJECT_DIR = REPO_ROOT / "dbt_models"
TARGET_ENV = "DBT_TARGET"
"""dbt's own variable naming the profile's target."""
ON_TIME_TOLERANCE_VAR = "on_time_tolerance_minutes"
"""The dbt var the tolerance sets (its default is in ``dbt_project.yml``)."""
TARGET_DIR = "dbt-target"
"""dbt's target/log directory of a build, under ``<data_dir>/work/`` (one per data dir, reused: partial parse)."""
RUN_RESULTS = "run_results.json"

LOG_FILE_LEVEL = ["--log-level-file", "info"]
"""dbt's log file keeps info and above (its default, debug, took a quarter of a build's time)."""
BUILD = ["build", "--exclude-resource-type", "unit_test", *LOG_FILE_LEVEL]
"""The pipeline's build: models and data tests. dbt unit tests check the SQL's logic, not the data, so
they run in the test suite (``freight_pipeline_tests/dbt``), not in every scheduled run."""
WAREHOUSE_CHECKED_TAG = "warehouse_checked"
"""The tag of a staging test that checks what a warehouse check (``freight_pipeline.checks``) checks,
with the same severity: a key, an orphan (``dbt_models/scripts/staging_yml.py`` derives the tags from
the checks). The job without Dagster, whose checks of ERROR severity hold back its build and publish,
leaves those tests out of its builds: each invariant is checked once a run."""


def dbt_executable() -> str:
    """The venv's ``dbt`` next to this interpreter (not whatever ``dbt``/``dbtf`` is first on PATH)."""
    sibling = Path(sys.executable).with_name("dbt")
    return str(sibling) if sibling.exists() else "dbt"


def project_args(project_dir: Path, target: Path) -> list[str]:
    """Where the project is (its profile beside it), and where a command's artifacts and log go."""
    return ["--project-dir", str(project_dir), "--profiles-dir", str(project_dir),
            "--target-path", str(target), "--log-path", str(target)]


def vars_args(marts: MartsSettings | None = None) -> list[str]:
    """``--vars`` for what ``marts`` (None: as configured) set (none: ``dbt_project.yml``'s defaults apply)."""
    tolerance = (marts or MartsSettings.configured()).on_time_tolerance
    if tolerance is None:
        return []
    return ["--vars", json.dumps({ON_TIME_TOLERANCE_VAR: int(tolerance.total_seconds() // 60)})]


def dbt_build_args(marts: MartsSettings | None = None) -> list[str]:
    """``dbt build``, with ``--vars`` for what ``marts`` set (else ``dbt_project.yml``'s defaults)."""
    return [*BUILD, *vars_args(marts)]


def build_target(data_dir: Path) -> Path:
    """dbt's target and log directory for the builds of ``data_dir``."""
    return working_db_path(data_dir).parent / TARGET_DIR


def target_env(dbt_target: str | None) -> dict[str, str]:
    """dbt's target by environment: the storage's (``StorageBackend.dbt_target``: ``lake`` in lake
    mode, one thread, see the profile), else (None) the profile's default."""
    return {} if dbt_target is None else {TARGET_ENV: dbt_target}


def database_env(data_dir: Path, dbt_target: str | None, marts: MartsSettings | None = None) -> dict[str, str]:
    """The environment every dbt command on ``data_dir`` needs: its database, its memory limit (``marts``'; None:
    as configured; the profile reads it) and the storage's target."""
    limit = (marts or MartsSettings.configured()).dbt_memory_limit
    return {DBT_DATABASE_ENV: str(working_db_path(data_dir)), DBT_MEMORY_LIMIT_ENV: limit, **target_env(dbt_target)}
