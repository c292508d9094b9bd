"""The dbt project as Dagster assets: ``dbt build`` into the private working database.

dbt sources carry ``meta.dagster.asset_key: [freight, <table>]`` (``_sources.yml``), so the staging
models depend on the sync assets: one lineage graph. dbt tests attached to models become asset
checks (dagster-dbt's default). The manifest is made at load time when it is missing or older than
a project file (``dbt parse``: no database needed, a few seconds); otherwise loading just reads it.
"""

import fcntl
import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import dagster as dg
from dagster_dbt import DagsterDbtTranslator, DbtCliResource, DbtProject, dbt_assets

from freight_pipeline.defs.resources import WarehouseResource

REPO_ROOT = Path(__file__).resolve().parents[2]
DBT_PROJECT_DIR = REPO_ROOT / "dbt_models"
DATABASE_ENV = "FREIGHT_DBT_DATABASE"
"""The variable ``profiles.yml`` reads the DuckDB path from."""
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


@contextmanager
def environment(**values: str) -> Iterator[None]:
    """Set environment variables for the block (the dbt subprocess inherits ``os.environ``), then restore."""
    previous = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


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
    context.log.info(f"dbt build into {database}")
    with environment(**{DATABASE_ENV: str(database)}):
        yield from dbt.cli(["build"], context=context, target_path=target).stream()
