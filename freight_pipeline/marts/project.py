"""The dbt project of the marts and how the pipeline invokes it: where it is, where a data directory's
build writes its artifacts, the build's arguments and environment. Plain Python, no dbt import."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from freight_pipeline.config import (
    DBT_DATABASE_ENV,
    DBT_MEMORY_LIMIT_ENV,
    DBT_REPLAY_ENV,
    ON_TIME_TOLERANCE_ENV,
    REPO_ROOT,
    flag_from_env,
    minutes_from_env,
)
from freight_pipeline.warehouse.paths import working_db_path

DBT_PROJECT_DIR = REPO_ROOT / "dbt_models"
TARGET_ENV = "DBT_TARGET"
"""dbt's own variable naming the profile's target."""
DEFAULT_DBT_MEMORY_LIMIT = "512MB"
"""The profile's default (``test_docs`` holds them equal)."""
REPLAY_DEFAULT = True
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


def dbt_memory_limit() -> str:
    """The build's DuckDB ``memory_limit`` (:data:`DBT_MEMORY_LIMIT_ENV`, checked before the run)."""
    return os.environ.get(DBT_MEMORY_LIMIT_ENV, "").strip() or DEFAULT_DBT_MEMORY_LIMIT


def replay_on() -> bool:
    """Whether a build may replay the statements kept for its key (:data:`DBT_REPLAY_ENV`, on by default)."""
    return flag_from_env(DBT_REPLAY_ENV, default=REPLAY_DEFAULT)


def dbt_executable() -> str:
    """The venv's ``dbt`` next to this interpreter (not whatever ``dbt``/``dbtf`` is first on PATH)."""
    sibling = Path(sys.executable).with_name("dbt")
    return str(sibling) if sibling.exists() else "dbt"


def project_args(project_dir: Path, target: Path) -> list[str]:
    """Where the project is (its profile beside it), and where a command's artifacts and log go."""
    return ["--project-dir", str(project_dir), "--profiles-dir", str(project_dir),
            "--target-path", str(target), "--log-path", str(target)]


def vars_args() -> list[str]:
    """``--vars`` for what the environment sets (none: ``dbt_project.yml``'s defaults apply)."""
    if not os.environ.get(ON_TIME_TOLERANCE_ENV, "").strip():
        return []
    tolerance = minutes_from_env(ON_TIME_TOLERANCE_ENV, default=0)  # set: the default is never used
    return ["--vars", json.dumps({ON_TIME_TOLERANCE_VAR: tolerance})]


def dbt_build_args() -> list[str]:
    """``dbt build``, with ``--vars`` for what the environment sets (else ``dbt_project.yml``'s defaults)."""
    return [*BUILD, *vars_args()]


def build_target(data_dir: Path) -> Path:
    """dbt's target and log directory for the builds of ``data_dir``."""
    return working_db_path(data_dir).parent / TARGET_DIR


def target_env(dbt_target: str | None) -> dict[str, str]:
    """dbt's target by environment: the storage's (``StorageBackend.dbt_target``: ``lake`` in lake
    mode, one thread, see the profile), else (None) the profile's default."""
    return {} if dbt_target is None else {TARGET_ENV: dbt_target}


def database_env(data_dir: Path, dbt_target: str | None) -> dict[str, str]:
    """The environment every dbt command on ``data_dir`` needs: its database and the storage's target."""
    return {DBT_DATABASE_ENV: str(working_db_path(data_dir)), **target_env(dbt_target)}
