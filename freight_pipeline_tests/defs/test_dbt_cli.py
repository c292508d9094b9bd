"""``DbtCli``: dbt commands run without dagster-dbt's in-process adapter, and only that differs."""

from __future__ import annotations

from pathlib import Path

import pytest
from dagster_dbt import DbtCliResource

from freight_pipeline.defs.dbt import DbtCli, dbt_project
from freight_pipeline.marts.project import dbt_executable


@pytest.mark.parametrize(("resource", "builds_adapter"), [(DbtCli, False), (DbtCliResource, True)])
def test_dbt_cli_builds_no_adapter(resource: type[DbtCliResource], builds_adapter: bool, tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # the plain resource shows the hook still decides: were it renamed upstream, both would build one
    monkeypatch.setenv("FREIGHT_DBT_DATABASE", str(tmp_path / "warehouse.duckdb"))
    dbt = resource(project_dir=dbt_project, dbt_executable=dbt_executable())
    invocation = dbt.cli(["--version"], target_path=tmp_path / "target")  # the hook runs for any command
    invocation.wait()
    assert invocation.is_successful()
    assert (invocation.adapter is not None) is builds_adapter
