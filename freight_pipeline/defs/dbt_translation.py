"""What dagster-dbt makes of the dbt project: the manifest parsed (``dbt parse``) and its models as
asset specs. Imported only when the manifest or the specs' cache must be made again (``defs.dbt``):
dagster-dbt imports dbt, 3 s that a run of the job need not pay."""

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dagster_dbt import DagsterDbtTranslator, DagsterDbtTranslatorSettings, DbtCliResource, DbtProject
from dagster_dbt.asset_utils import build_dbt_specs

from freight_pipeline.marts.project import dbt_executable

RUNTIME_METADATA = ("dagster_dbt/manifest", "dagster_dbt/dagster_dbt_translator", "dagster_dbt/project")
"""Metadata dagster-dbt gives its specs for its own ``@dbt_assets`` runs (Python objects, not data;
this project's build is the job's): left out of the cached specs."""
SPEC_FIELDS = ("key", "deps", "description", "metadata", "group_name", "code_version", "owners", "tags")
"""The fields of dagster-dbt's specs that the cache keeps (the others are its defaults)."""


class FreightDbtTranslator(DagsterDbtTranslator):
    """Groups dbt models by their schema (``dbt_staging``, ``dbt_intermediate``, ``dbt_analytics``).

    Asset keys stay dagster-dbt's defaults: ``[<schema>, <model>]`` for models, the configured
    ``meta.dagster.asset_key`` (``[freight, <table>]``) for sources.
    """

    def get_group_name(self, dbt_resource_props: Mapping[str, Any]) -> str | None:
        schema = dbt_resource_props.get("config", {}).get("schema")
        return f"dbt_{schema}" if schema else "dbt"


class DbtCli(DbtCliResource):
    """``DbtCliResource`` (what parses the project) without the dbt adapter that dagster-dbt otherwise
    builds in this process for every dbt command (1.6 s and about 30 MB): it serves only
    ``fetch_row_counts()`` and ``fetch_column_metadata()``, which this project does not call.
    ``test_dbt_cli_builds_no_adapter`` fails if the hook ever changes."""

    def _initialize_dbt_core_adapter(self, args: Sequence[str]) -> Any:  # dagster-dbt's own hook
        return None


DBT_TRANSLATOR = FreightDbtTranslator(settings=DagsterDbtTranslatorSettings(enable_asset_checks=False))
"""dbt's tests run in the build (a failure fails it, named; a warning is logged) but are no asset
checks: each would cost stored events per run; the models' materializations count them instead."""


def dbt_project(project_dir: Path) -> DbtProject:
    return DbtProject(project_dir=project_dir, profiles_dir=project_dir)


def parse_project(project_dir: Path, target: str) -> None:
    """``dbt parse`` of the project into ``project_dir/target`` (no database needed)."""
    dbt = DbtCli(project_dir=dbt_project(project_dir), dbt_executable=dbt_executable())
    dbt.cli(["parse", "--quiet"], target_path=Path(target)).wait()


def translate(manifest: Mapping[str, Any], project_dir: Path) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The fields of each model's spec as dagster-dbt's ``@dbt_assets`` makes it (its runtime metadata
    left out), and the unique id of each data test -> that of the model it tests."""
    specs, _ = build_dbt_specs(translator=DBT_TRANSLATOR, manifest=manifest, select="fqn:*", exclude="",
                               selector="", io_manager_key=None, project=dbt_project(project_dir))
    fields = [{name: getattr(spec, name) for name in SPEC_FIELDS} for spec in specs]
    for spec in fields:
        spec["metadata"] = {k: v for k, v in spec["metadata"].items() if k not in RUNTIME_METADATA}
        spec["deps"] = [{"asset": dep.asset_key, "metadata": dep.metadata} for dep in spec["deps"]]
    models = {str(spec["metadata"]["dagster_dbt/unique_id"]) for spec in fields}
    tests = {unique_id: node["attached_node"] for unique_id, node in manifest.get("nodes", {}).items()
             if node.get("resource_type") == "test" and node.get("attached_node") in models}
    return fields, tests
