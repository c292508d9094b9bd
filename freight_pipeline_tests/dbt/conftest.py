"""Fixtures of the dbt tests: one ``freight`` database built from the simulator, one ``dbt build``
on it as the pipeline builds (both once a session, for every xdist worker), and one publish of the
result (as the pipeline publishes it); each worker reads a copy of the built warehouse."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from freight_pipeline.marts.project import RUN_RESULTS
from freight_pipeline_tests.built_once import built_once
from freight_pipeline_tests.dbt.dbt_cli import run_dbt_in_worker
from freight_pipeline_tests.dbt.freight_db import build_freight_database

SHIPMENTS = 200


def _build(folder: Path) -> None:
    """``warehouse.duckdb`` from the simulator, then ``dbt build`` (unit tests included) on it through
    the pipeline's dbt worker (``target/``, with the project's ``manifest.json`` beside its results);
    what it returned in ``built.json``."""
    from freight_pipeline.defs.dbt import ensure_manifest

    # the file name matters: a DuckDB file named like a schema ("freight.duckdb") makes
    # "freight.<table>" ambiguous
    path = folder / "warehouse.duckdb"
    info = build_freight_database(path, shipments=SHIPMENTS)
    result, target = run_dbt_in_worker(["build"], folder, path)
    shutil.copy(ensure_manifest(), target / "manifest.json")
    built = {"info": info, "successful": result.returncode == 0,
             "run_results": json.loads((target / RUN_RESULTS).read_text())}
    (folder / "built.json").write_text(json.dumps(built, default=str))


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The built folder (:func:`_build`), once a session for every worker (``built_once``): read, never written."""
    return built_once(tmp_path_factory, "dbt", _build)


@pytest.fixture(scope="session")
def warehouse(built: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """This worker's copy of the built warehouse (its marts built by ``dbt build``)."""
    path = tmp_path_factory.mktemp("dbt") / "warehouse.duckdb"
    shutil.copy(built / "warehouse.duckdb", path)
    info = json.loads((built / "built.json").read_text())["info"]
    return {"path": path, "shipments": SHIPMENTS, **info}


@pytest.fixture(scope="session")
def dbt_build(
    built: Path, warehouse: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """``dbt build`` in the pipeline's dbt worker, as the job runs it: its outcome,
    run results and target folder (a copy); ``FREIGHT_DBT_DATABASE`` names this worker's warehouse meanwhile."""
    target = tmp_path_factory.mktemp("dbt_target")
    shutil.copytree(built / "target", target, dirs_exist_ok=True)
    done = json.loads((built / "built.json").read_text())
    previous = os.environ.get("FREIGHT_DBT_DATABASE")
    os.environ["FREIGHT_DBT_DATABASE"] = str(warehouse["path"])
    try:
        yield {"successful": done["successful"], "run_results": done["run_results"], "target": target}
    finally:
        if previous is None:
            os.environ.pop("FREIGHT_DBT_DATABASE", None)
        else:
            os.environ["FREIGHT_DBT_DATABASE"] = previous


@pytest.fixture(scope="session")
def published(dbt_build: dict[str, Any], warehouse: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding ``data/`` as the pipeline publishes it (``data/warehouse.duckdb`` and
    ``data/parquet/<schema>/<table>/``) from the built warehouse; README paths resolve from it."""
    from freight_pipeline.config import StorageSettings
    from freight_pipeline.warehouse.paths import working_db_path
    from freight_pipeline.warehouse.publish import publish

    root = tmp_path_factory.mktemp("published")
    data_dir = root / "data"
    work = working_db_path(data_dir)
    work.parent.mkdir(parents=True)
    shutil.copy(warehouse["path"], work)
    publish(data_dir, settings=StorageSettings())
    return root
