"""The dbt project as Dagster assets: ``dbt build`` into the private working database.

dbt sources carry ``meta.dagster.asset_key: [freight, <table>]`` (``_sources.yml``), so the staging
models depend on the sync assets: one lineage graph. dbt tests attached to models become asset
checks (dagster-dbt's default). The manifest is made at load time when it is missing or older than
a project file (``dbt parse``: no database needed, a few seconds); otherwise loading just reads it.

A failed build raises ``DbtBuildFailed``, whose first line names the failed and skipped nodes (read
from ``run_results.json``); tests of severity warn that found rows are logged as Dagster warnings
and do not fail the build (dbt_models/README.md, "Test severity").
"""

import datetime as dt
import fcntl
from collections.abc import Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from graphlib import TopologicalSorter
from pathlib import Path
from typing import Any

import dagster as dg
from dagster_dbt import DagsterDbtTranslator, DagsterDbtTranslatorSettings, DbtCliResource, DbtProject, dbt_assets
from dagster_dbt.metadata_set import DbtMetadataSet

from freight_pipeline.config import environ
from freight_pipeline.defs.resources import WarehouseResource
from freight_pipeline.marts.build import logged_build
from freight_pipeline.marts.plan import plan_build, project_fingerprint, record_build
from freight_pipeline.marts.project import (
    DATABASE_ENV,
    DBT_PROJECT_DIR,
    RUN_RESULTS,
    build_target,
    database_env,
    dbt_build_args,
    dbt_executable,
    target_env,
    vars_args,
)
from freight_pipeline.marts.results import DbtBuildFailed, build_summary, build_warnings, read_run_results
from freight_pipeline.marts.warmup import start_parse, wait_for_parse
from freight_pipeline.warehouse.store import open_warehouse

PROJECT_FILES = ("dbt_project.yml", "profiles.yml", "packages.yml", "dependencies.yml", "selectors.yml")
PROJECT_DIRS = ("models", "macros", "tests", "seeds", "snapshots", "analyses")


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
                dbt = DbtCli(project_dir=project, dbt_executable=dbt_executable())
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


class DbtCli(DbtCliResource):
    """``DbtCliResource`` without the dbt adapter that dagster-dbt otherwise builds in this process
    for every dbt command (1.6 s and about 30 MB per build, measured): it serves only
    ``fetch_row_counts()`` and ``fetch_column_metadata()``, which this project does not call (row
    counts come from the warehouse). dagster-dbt runs without one when the hook gives none, as it
    does for dbt Fusion; ``test_dbt_cli_builds_no_adapter`` fails if the hook ever changes."""

    def _initialize_dbt_core_adapter(self, args: Sequence[str]) -> Any:  # dagster-dbt's own hook
        return None


def warm_up(warehouse: WarehouseResource) -> bool:
    """Start parsing the dbt project for this data directory in the background (``marts.warmup``)."""
    with environ(target_env(warehouse.backend.dbt_target)):
        return start_parse(DBT_PROJECT_DIR, build_target(warehouse.path), warehouse.working_db, DATABASE_ENV,
                           vars_args())


def is_view(spec: dg.AssetSpec) -> bool:
    """A dbt model materialized as a view (dagster-dbt puts the materialization in each spec's metadata)."""
    return DbtMetadataSet.extract(spec.metadata).materialization_type == "view"


VIEW_NOT_REBUILT = "view not re-created: its SQL is the last whole build's (incremental build); its tests ran"


def passed_test_observation(event: object) -> bool:
    """dagster-dbt's observation of a data test that passed (one per test and tested model: 264
    stored Dagster events in a build, a quarter of the step's time in an incremental run). The
    build's summary line counts them; tests that warn, fail or error are still observed."""
    if not isinstance(event, dg.AssetObservation):
        return False
    status = event.metadata.get("status")
    return getattr(status, "value", status) == "pass"


def _dependencies_first(assets_def: dg.AssetsDefinition, keys: AbstractSet[dg.AssetKey]) -> list[dg.AssetKey]:
    """``keys`` in an order that yields every asset after those of ``assets_def`` it depends on."""
    graph = {key: {dep for dep in assets_def.asset_deps.get(key, ()) if dep in keys} for key in keys}
    return list(TopologicalSorter(graph).static_order())


@dbt_assets(
    manifest=ensure_manifest(dbt_project),
    project=dbt_project,
    dagster_dbt_translator=FreightDbtTranslator(settings=DagsterDbtTranslatorSettings(enable_asset_checks=False)),
    name="freight_dbt_models",
)
def freight_dbt_models(
    context: dg.AssetExecutionContext, dbt: DbtCli, warehouse: WarehouseResource
) -> Iterator[Any]:
    """``dbt build`` (models and data tests) into the working database, which no one else holds now."""
    database = warehouse.working_db
    backend = warehouse.backend
    if backend.working_database_missing(warehouse.path):
        raise FileNotFoundError(f"no working database at {database}: run the freight sync first")
    target = build_target(warehouse.path)
    args = dbt_build_args()
    whole = not context.is_subset
    fingerprint = project_fingerprint(DBT_PROJECT_DIR, args)
    with open_warehouse(warehouse.path, backend) as held:
        plan = plan_build(held, fingerprint, whole=whole)
    if not plan.run:
        context.log.info(f"dbt build not run: {plan.reason}; the marts are current")
        for key in _dependencies_first(context.assets_def, context.selected_asset_keys):
            yield dg.MaterializeResult(asset_key=key, metadata={"dbt_build": f"not run: {plan.reason}"})
        return
    args = [*args, *plan.args]
    context.log.info(f"{plan.reason}: dbt {' '.join(args)} into {backend.describe(warehouse.path)}")
    if plan.views_current:
        selected = context.selected_asset_keys
        views = {spec.key for spec in context.assets_def.specs if spec.key in selected and is_view(spec)}
        for key in _dependencies_first(context.assets_def, views):
            yield dg.MaterializeResult(asset_key=key, metadata={"dbt_build": VIEW_NOT_REBUILT})
    began = dt.datetime.now(dt.UTC)
    wait_for_parse(target)  # started by the sync when this data directory was new to dbt
    with logged_build(warehouse.path, backend, context.run_id, whole=whole), \
            environ({**database_env(warehouse.path, backend.dbt_target), **plan.env}):
        (target / RUN_RESULTS).unlink(missing_ok=True)  # never read a previous build's results
        invocation = dbt.cli(args, context=context, target_path=target, raise_on_error=False)
        yield from (event for event in invocation.stream() if not passed_test_observation(event))
        results = read_run_results(target)
        context.log.info(f"dbt build: {build_summary(results)}")
        for warning in build_warnings(results):
            context.log.warning(warning)
        if not invocation.is_successful():
            error = invocation.get_error()
            raise DbtBuildFailed.from_target(target, invocation.process.returncode, str(error or ""))
    if whole:
        with open_warehouse(warehouse.path, backend) as held:
            covered = record_build(held, fingerprint, began, context.run_id)
        context.log.info(f"the marts now cover every change: {covered} changed shipments rebuilt")
