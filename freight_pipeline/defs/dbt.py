"""The dbt project as Dagster sees it: its models as asset specs, and the build's results as their
materializations. The build itself is the job's (``marts.build``, in ``job.run``).

dbt sources carry ``meta.dagster.asset_key: [freight, <table>]`` (``_sources.yml``), so the staging
models depend on the sync assets: one lineage graph. The manifest is made at load time when it is
missing or older than a project file (``dbt parse``: no database needed, a few seconds); otherwise
loading just reads it.
"""

import fcntl
import json
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
from dagster_dbt import DagsterDbtTranslator, DagsterDbtTranslatorSettings, DbtCliResource, DbtProject
from dagster_dbt.asset_utils import build_dbt_specs

from freight_pipeline.marts.project import DBT_PROJECT_DIR, dbt_executable
from freight_pipeline.marts.results import NodeResult

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
    """``DbtCliResource`` (what parses the project at load time) without the dbt adapter that
    dagster-dbt otherwise builds in this process for every dbt command (1.6 s and about 30 MB): it
    serves only ``fetch_row_counts()`` and ``fetch_column_metadata()``, which this project does not
    call. ``test_dbt_cli_builds_no_adapter`` fails if the hook ever changes."""

    def _initialize_dbt_core_adapter(self, args: Sequence[str]) -> Any:  # dagster-dbt's own hook
        return None


UNIQUE_ID = "dagster_dbt/unique_id"
"""Where dagster-dbt's spec of a model names its dbt node."""
DBT_TRANSLATOR = FreightDbtTranslator(settings=DagsterDbtTranslatorSettings(enable_asset_checks=False))
"""dbt's tests run in the build (a failure fails it, named; a warning is logged) but are no asset
checks: each would cost stored events per run; the models' materializations count them instead."""


@dataclass(frozen=True)
class DbtAssets:
    """The dbt project's models as Dagster specs (keys, lineage, descriptions, groups, code from the
    manifest, as dagster-dbt's ``@dbt_assets`` makes them), and what the build's results are to them."""

    specs: tuple[dg.AssetSpec, ...]
    keys: dict[str, dg.AssetKey]
    """Unique id of each model (seed, snapshot) -> its asset key."""
    tests: dict[str, str]
    """Unique id of each data test -> the unique id of the model it tests."""


def dbt_assets_of(project: DbtProject = dbt_project) -> DbtAssets:
    manifest = json.loads(ensure_manifest(project).read_text())
    specs, _ = build_dbt_specs(translator=DBT_TRANSLATOR, manifest=manifest, select="fqn:*", exclude="",
                               selector="", io_manager_key=None, project=project)
    keys = {str(spec.metadata[UNIQUE_ID]): spec.key for spec in specs}
    tests = {unique_id: node["attached_node"] for unique_id, node in manifest.get("nodes", {}).items()
             if node.get("resource_type") == "test" and node.get("attached_node") in keys}
    return DbtAssets(tuple(specs), keys, tests)


def model_results(dbt: DbtAssets, nodes: Sequence[NodeResult]) -> Iterator[dg.MaterializeResult]:
    """A materialization of each model the build ran without error, with dbt's figures and its tests'
    results (every test of it that ran: passed, warned, failed)."""
    tests: dict[str, dict[str, str]] = {}
    for node in nodes:
        if node.unique_id in dbt.tests:
            tests.setdefault(dbt.tests[node.unique_id], {})[node.name] = node.status
    for node in nodes:
        key = dbt.keys.get(node.unique_id)
        if key is None or node.status != "success":
            continue
        metadata: dict[str, Any] = {"unique_id": node.unique_id, "dbt_status": node.status}
        if node.seconds is not None:
            metadata["execution_duration"] = dg.MetadataValue.float(round(node.seconds, 3))
        if node.rows is not None:
            metadata["rows_affected"] = node.rows
        if node.message:
            metadata["dbt_message"] = node.message
        if node.unique_id in tests:
            counts = Counter(tests[node.unique_id].values())
            metadata["tests"] = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
            metadata["test_results"] = dg.MetadataValue.json(dict(sorted(tests[node.unique_id].items())))
        yield dg.MaterializeResult(asset_key=key, metadata=metadata)
