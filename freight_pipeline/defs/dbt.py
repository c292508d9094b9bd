"""The dbt project as Dagster assets: ``dbt build`` into the private working database.

dbt sources carry ``meta.dagster.asset_key: [freight, <table>]`` (``_sources.yml``), so the staging
models depend on the sync assets: one lineage graph. dbt tests attached to models become asset
checks (dagster-dbt's default). The manifest is made at load time when it is missing or older than
a project file (``dbt parse``: no database needed, a few seconds); otherwise loading just reads it.
"""

import datetime as dt
import fcntl
import json
import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import dagster as dg
from dagster_dbt import DagsterDbtTranslator, DbtCliResource, DbtProject, dbt_assets

from freight_pipeline.config import ON_TIME_TOLERANCE_ENV, REPO_ROOT, environ, minutes_from_env
from freight_pipeline.defs.resources import WarehouseResource
from freight_pipeline.sync.runner import one_line_error, open_warehouse
from freight_pipeline.warehouse import RunRecord

DBT_PROJECT_DIR = REPO_ROOT / "dbt_models"
DATABASE_ENV = "FREIGHT_DBT_DATABASE"
"""The variable ``profiles.yml`` reads the DuckDB path from."""
DBT_BUILD_STREAM = "dbt_build"
"""The ``sync_runs`` stream name under which each dbt build is logged."""
ON_TIME_TOLERANCE_VAR = "on_time_tolerance_minutes"
"""The dbt var the tolerance sets (its default is in ``dbt_project.yml``)."""
TARGET_DIR = "dbt-target"
"""dbt's target/log directory of a build, under ``<data_dir>/work/`` (one per data dir, reused: partial parse)."""
PROJECT_FILES = ("dbt_project.yml", "profiles.yml", "packages.yml", "dependencies.yml", "selectors.yml")
PROJECT_DIRS = ("models", "macros", "tests", "seeds", "snapshots", "analyses")


def dbt_executable() -> str:
    """The venv's ``dbt`` next to this interpreter (not whatever ``dbt``/``dbtf`` is first on PATH)."""
    sibling = Path(sys.executable).with_name("dbt")
    return str(sibling) if sibling.exists() else "dbt"


dbt_project = DbtProject(project_dir=DBT_PROJECT_DIR, profiles_dir=DBT_PROJECT_DIR)


def _newest_source_mtime(project_dir: Path) -> float:
    paths = [project_dir / name for name in PROJECT_FILES]
    for directory in PROJECT_DIRS:
        if (project_dir / directory).is_dir():
            paths.extend(p for p in (project_dir / directory).rglob("*") if p.is_file())
    return max((p.stat().st_mtime for p in paths if p.exists()), default=0.0)


def manifest_is_current(project: DbtProject) -> bool:
    manifest = project.manifest_path
    return (
        manifest.is_file()
        and manifest.stat().st_size > 0
        and manifest.stat().st_mtime >= _newest_source_mtime(project.project_dir)
    )


def ensure_manifest(project: DbtProject = dbt_project) -> Path:
    """``target/manifest.json`` of ``project``, parsed first when missing or stale (serialized by a file lock)."""
    if manifest_is_current(project):
        return project.manifest_path
    target = project.project_dir / project.target_path
    target.mkdir(parents=True, exist_ok=True)
    with open(target / ".parse.lock", "a+") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            if not manifest_is_current(project):  # another process may have parsed meanwhile
                dbt = DbtCliResource(project_dir=project, dbt_executable=dbt_executable())
                dbt.cli(["parse", "--quiet"], target_path=project.target_path).wait()
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)
    if not project.manifest_path.is_file():
        raise FileNotFoundError(f"dbt parse did not write {project.manifest_path}")
    return project.manifest_path


class FreightDbtTranslator(DagsterDbtTranslator):
    """Groups dbt models by their schema (``dbt_staging``, ``dbt_intermediate``, ``dbt_analytics``).

    Asset keys stay dagster-dbt's defaults: ``[<schema>, <model>]`` for models, the configured
    ``meta.dagster.asset_key`` (``[freight, <table>]``) for sources.
    """

    def get_group_name(self, dbt_resource_props: Mapping[str, Any]) -> str | None:
        schema = dbt_resource_props.get("config", {}).get("schema")
        return f"dbt_{schema}" if schema else "dbt"


def dbt_build_args() -> list[str]:
    """``dbt build``, with ``--vars`` for what the environment sets (else ``dbt_project.yml``'s defaults)."""
    if not os.environ.get(ON_TIME_TOLERANCE_ENV, "").strip():
        return ["build"]
    tolerance = minutes_from_env(ON_TIME_TOLERANCE_ENV, default=0)  # set: the default is never used
    return ["build", "--vars", json.dumps({ON_TIME_TOLERANCE_VAR: tolerance})]


@contextmanager
def logged_build(data_dir: Path, run_id: str, *, whole: bool) -> Iterator[None]:
    """Log the build in ``freight_meta.sync_runs`` (stream ``dbt_build``): running, then success or failed.

    The publish refuses a working database whose latest build did not succeed (marts half rebuilt).
    A build of a selection (``whole`` False: some models picked in the UI) ends as ``partial``, not
    ``success``: it does not vouch for the marts it skipped, so only a whole build settles them.
    """
    record = RunRecord(run_id, DBT_BUILD_STREAM, dt.datetime.now(dt.UTC))
    with open_warehouse(data_dir) as warehouse:
        warehouse.record_run(record)
    try:
        yield
    except BaseException as exc:
        record.status, record.error = "failed", one_line_error(exc)
        raise
    else:
        record.status = "success" if whole else "partial"
    finally:
        record.finished_at = dt.datetime.now(dt.UTC)
        with open_warehouse(data_dir) as warehouse:
            warehouse.record_run(record)


@dbt_assets(
    manifest=ensure_manifest(dbt_project),
    project=dbt_project,
    dagster_dbt_translator=FreightDbtTranslator(),
    name="freight_dbt_models",
)
def freight_dbt_models(
    context: dg.AssetExecutionContext, dbt: DbtCliResource, warehouse: WarehouseResource
) -> Iterator[Any]:
    """``dbt build`` (models, tests, unit tests) into the working database, which no one else holds now."""
    database = warehouse.working_db
    if not database.exists():
        raise FileNotFoundError(f"no working database at {database}: run the freight sync first")
    target = database.parent / TARGET_DIR
    args = dbt_build_args()
    context.log.info(f"dbt {' '.join(args)} into {database}")
    whole = not context.is_subset
    with logged_build(warehouse.path, context.run_id, whole=whole), environ({DATABASE_ENV: str(database)}):
        yield from dbt.cli(args, context=context, target_path=target).stream()
