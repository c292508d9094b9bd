"""Fixtures of the dbt tests: one ``freight`` database built from the simulator, one ``dbt build``
on it, and one publish of the result (as the pipeline publishes it), shared by the session."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from freight_pipeline_tests.dbt.dbt_cli import DBT, DBT_DIR
from freight_pipeline_tests.dbt.freight_db import build_freight_database

SHIPMENTS = 200


@pytest.fixture(scope="session")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    # the file name matters: a DuckDB file named like a schema ("freight.duckdb") makes
    # "freight.<table>" ambiguous
    path = tmp_path_factory.mktemp("dbt") / "warehouse.duckdb"
    info = build_freight_database(path, shipments=SHIPMENTS)
    return {"path": path, "shipments": SHIPMENTS, **info}


@pytest.fixture(scope="session")
def dbt_build(warehouse: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """``dbt build`` through ``dagster_dbt.DbtCliResource``, as the Dagster assets run it."""
    from dagster_dbt import DbtCliResource

    target = tmp_path_factory.mktemp("dbt_target")
    previous = os.environ.get("FREIGHT_DBT_DATABASE")
    os.environ["FREIGHT_DBT_DATABASE"] = str(warehouse["path"])
    try:
        dbt = DbtCliResource(project_dir=str(DBT_DIR), profiles_dir=str(DBT_DIR), dbt_executable=DBT)
        # DbtCliResource points DBT_LOG_PATH at the target path too; said explicitly here so the
        # log cannot land in dbt_models/logs whatever the resource does
        invocation = dbt.cli(["build", "--log-path", str(target)], raise_on_error=False, target_path=target).wait()
        run_results = invocation.get_artifact("run_results.json")
        yield {"successful": invocation.is_successful(), "run_results": run_results, "target": target}
    finally:
        if previous is None:
            os.environ.pop("FREIGHT_DBT_DATABASE", None)
        else:
            os.environ["FREIGHT_DBT_DATABASE"] = previous


@pytest.fixture(scope="session")
def published(dbt_build: dict[str, Any], warehouse: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding ``data/`` as the pipeline publishes it (``data/warehouse.duckdb`` and
    ``data/parquet/<schema>/<table>/``) from the built warehouse; README paths resolve from it."""
    from freight_pipeline.config import DuckDBSettings
    from freight_pipeline.warehouse.paths import working_db_path
    from freight_pipeline.warehouse.publish import publish

    root = tmp_path_factory.mktemp("published")
    data_dir = root / "data"
    work = working_db_path(data_dir)
    work.parent.mkdir(parents=True)
    shutil.copy(warehouse["path"], work)
    publish(data_dir, settings=DuckDBSettings())
    return root
