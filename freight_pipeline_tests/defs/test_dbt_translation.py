"""What dagster-dbt makes of the project: ``DbtCli`` runs dbt commands without dagster-dbt's in-process
adapter (only that differs), and the specs the definitions load from the cache are dagster-dbt's."""

from __future__ import annotations

import importlib.metadata
import json
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import dagster as dg
import pytest
from dagster_dbt import DbtCliResource
from dagster_dbt.asset_utils import build_dbt_specs

from freight_pipeline.config import REPO_ROOT
from freight_pipeline.defs.dbt import SPECS_CACHE, TARGET, dbt_assets_of, ensure_manifest, manifest_path
from freight_pipeline.defs.dbt_translation import DBT_TRANSLATOR, RUNTIME_METADATA, DbtCli, dbt_project
from freight_pipeline.marts.project import DBT_PROJECT_DIR


@pytest.mark.parametrize(("resource", "builds_adapter"), [(DbtCli, False), (DbtCliResource, True)])
def test_dbt_cli_builds_no_adapter(resource: type[DbtCliResource], builds_adapter: bool, tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # the plain resource shows the hook still decides: were it renamed upstream, both would build one
    monkeypatch.setenv("FREIGHT_DBT_DATABASE", str(tmp_path / "warehouse.duckdb"))
    # the adapter is built in this process: dbt's own process does not matter, so a script that says dbt's
    # version stands in for it (a real one is two processes that import dbt, about 6 s of CPU)
    fake_dbt = tmp_path / "dbt"
    fake_dbt.write_text(f"#!/bin/sh\necho 'Core:'\necho '  - installed: {importlib.metadata.version('dbt-core')}'\n")
    fake_dbt.chmod(0o755)
    dbt = resource(project_dir=dbt_project(DBT_PROJECT_DIR), dbt_executable=str(fake_dbt))
    invocation = dbt.cli(["--version"], target_path=tmp_path / "target")  # the hook runs for any command
    invocation.wait()
    assert invocation.is_successful()
    assert (invocation.adapter is not None) is builds_adapter


def in_order(specs: Sequence[dg.AssetSpec]) -> list[dg.AssetSpec]:
    """``specs`` by key, each with its deps by key (dagster-dbt's order of both varies from run to run)."""
    return sorted((spec.replace_attributes(deps=sorted(spec.deps, key=str)) for spec in specs), key=str)


def test_cached_specs_are_dagster_dbts(tmp_path: Path) -> None:
    """The specs the definitions load (from the cache) are the ones dagster-dbt makes from the manifest,
    but for its runtime objects; a cache made from another manifest is made again."""
    manifest = json.loads(ensure_manifest().read_text())
    theirs, _ = build_dbt_specs(translator=DBT_TRANSLATOR, manifest=manifest, select="fqn:*", exclude="",
                                selector="", io_manager_key=None, project=dbt_project(DBT_PROJECT_DIR))
    expected = [spec.replace_attributes(metadata={k: v for k, v in spec.metadata.items()
                                                  if k not in RUNTIME_METADATA}) for spec in theirs]
    loaded = dbt_assets_of()
    assert in_order(loaded.specs) == in_order(expected)
    cache = manifest_path().with_name(SPECS_CACHE)
    assert dbt_assets_of().specs == loaded.specs  # read back from the cache: the same
    made = json.loads(cache.read_text())
    cache.write_text(json.dumps({**made, "made_from": {**made["made_from"], "translation": "older"}, "specs": "[]"}))
    assert in_order(dbt_assets_of().specs) == in_order(loaded.specs)  # made by another translation: made again
    assert json.loads(cache.read_text())["made_from"] == made["made_from"]


def test_loading_the_definitions_imports_no_dbt() -> None:
    dbt_assets_of()  # the cache is made
    code = ("import sys, freight_pipeline.definitions; "
            "print(sorted(m for m in ('dbt', 'dagster_dbt') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[]", done.stderr[-2000:]
    operations = " ".join((REPO_ROOT / "docs" / "operations.md").read_text().split())
    assert "loading the definitions imports neither dagster-dbt nor dbt" in operations  # what the docs say of it


def test_an_unreadable_specs_cache_is_made_again(tmp_path: Path) -> None:
    """The cache emptied (a crash after its rename) or not JSON: the definitions still load, and the cache is
    made again. On a copy of the project, its manifest current."""
    ensure_manifest()
    project = tmp_path / "dbt_models"
    shutil.copytree(DBT_PROJECT_DIR, project, ignore=shutil.ignore_patterns("logs", "worker-parse", "dbt_packages"))
    loaded = dbt_assets_of(project)
    cache = project / TARGET / SPECS_CACHE
    for text in ("", "{not json", "[]"):
        cache.write_text(text)
        assert in_order(dbt_assets_of(project).specs) == in_order(loaded.specs), text
        assert json.loads(cache.read_text())["made_from"]
