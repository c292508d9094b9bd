"""The marts are built incrementally from the shipments that changed, skipped when nothing did, and
always equal what a full rebuild gives."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb
import pytest

from freight_pipeline.config import RECONCILE_ENV
from freight_pipeline.definitions import defs
from freight_pipeline.defs.dbt import VIEW_NOT_REBUILT
from freight_pipeline.marts.project import TARGET_DIR
from freight_pipeline.marts.results import read_run_results
from freight_pipeline.simulator.server import RunningSimulator, running_simulator
from freight_pipeline.warehouse.paths import working_db_path
from freight_pipeline.warehouse.publish import published_db_path
from freight_pipeline_tests.dbt import marts as dbt_marts
from freight_pipeline_tests.dbt.dbt_cli import run_dbt

INCREMENTAL_MARTS = dbt_marts.incremental_marts()
ALL_MARTS = dbt_marts.marts()


@dataclass
class Job:
    instance: dg.DagsterInstance
    data_dir: Path
    sim: RunningSimulator

    def run(self) -> dg.ExecuteInProcessResult:
        result = defs.resolve_job_def("freight_sync_job").execute_in_process(instance=self.instance,
                                                                             raise_on_error=False)
        assert result.success, [e.message for e in result.all_events if e.is_failure]
        return result

    def dbt_logs(self, result: dg.ExecuteInProcessResult) -> list[str]:
        return [e.user_message for e in self.instance.all_logs(result.run_id) if e.step_key == "freight_dbt_models"]


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Job]:
    root = tmp_path_factory.mktemp("incremental_marts")
    with running_simulator(shipments=60, seed=19, control=True) as sim, pytest.MonkeyPatch.context() as env:
        env.setenv("FREIGHT_BASE_URL", sim.base_url)
        env.setenv("FREIGHT_USERNAME", sim.username)
        env.setenv("FREIGHT_PASSWORD", sim.password)
        env.setenv("FREIGHT_DATA_DIR", str(root / "data"))
        env.setenv(RECONCILE_ENV, "0")  # deletions are found on every run
        env.delenv("FREIGHT_DBT_DATABASE", raising=False)
        with dg.DagsterInstance.ephemeral() as instance:
            yield Job(instance, root / "data", sim)


SENTINEL = "not re-created by the incremental build"
ORPHAN_TEST = "relationships_stg_shipment_goods_shipment_id__shipment_id__ref_stg_shipments_"


def view_comment(database: Path, view: str) -> str | None:
    with duckdb.connect(str(database), read_only=True) as con:
        row = con.execute("SELECT comment FROM duckdb_views() WHERE schema_name = 'staging' AND view_name = ?",
                          [view]).fetchone()
    return row[0] if row else None


def marts(database: Path) -> dict[str, list[tuple[Any, ...]]]:
    with duckdb.connect(str(database), read_only=True) as con:
        return {mart: sorted(con.execute(f"SELECT * FROM analytics.{mart}").fetchall(), key=repr) for mart in ALL_MARTS}


def pending_changes(database: Path) -> int:
    with duckdb.connect(str(database), read_only=True) as con:
        return con.execute("SELECT count(*) FROM freight_meta.changed_shipments").fetchone()[0]


def test_first_build_full_then_none_when_nothing_changed_then_incremental_equal_to_a_full_rebuild(
    job: Job, tmp_path: Path
) -> None:
    first = job.run()
    assert any(m.startswith("the marts were never built by this version: dbt build") and "--full-refresh" in m
               for m in job.dbt_logs(first))
    assert pending_changes(working_db_path(job.data_dir)) == 0

    quiet = job.run()  # nothing changed: no dbt build, the marts stay, the run still publishes
    logs = job.dbt_logs(quiet)
    assert any(m.startswith("dbt build not run: nothing changed since the marts were built") for m in logs)
    materialized = {e.asset_key: e.materialization.metadata for e in quiet.get_asset_materialization_events()}
    assert materialized[dg.AssetKey(["analytics", "fct_shipments"])]["dbt_build"].value.startswith("not run")
    assert dg.AssetKey(["freight", "published_warehouse"]) in materialized

    job.sim.advance_clock(120)
    changed = job.sim.modify_shipments(5) + job.sim.create_shipments(2)
    deleted = job.sim.delete_shipments(2)
    before = marts(published_db_path(job.data_dir))
    with duckdb.connect(str(working_db_path(job.data_dir))) as con:  # gone if dbt re-creates the view
        con.execute(f"COMMENT ON VIEW staging.stg_shipment_goods IS '{SENTINEL}'")
    incremental = job.run()
    logs = job.dbt_logs(incremental)
    build = next(m for m in logs if ": dbt build " in m)
    assert build.startswith(f"{len(changed) + len(deleted)} shipments changed: dbt build")
    assert "--full-refresh" not in build
    # the views were left out of the build, and every data test ran, the views' too
    assert view_comment(working_db_path(job.data_dir), "stg_shipment_goods") == SENTINEL
    materialized = {e.asset_key: e.materialization.metadata for e in incremental.get_asset_materialization_events()}
    assert materialized[dg.AssetKey(["staging", "stg_shipment_goods"])]["dbt_build"].value == VIEW_NOT_REBUILT
    assert "dbt_build" not in materialized[dg.AssetKey(["analytics", "fct_shipments"])]
    results = read_run_results(job.data_dir / "work" / TARGET_DIR)
    assert results is not None
    ran = {r["unique_id"].split(".")[2]: r["status"] for r in results["results"]}
    assert ran[ORPHAN_TEST] == "pass" and not any(name.startswith("stg_") for name in ran)
    assert any(name.startswith("not_null_columns_fct_shipments_") for name in ran)
    assert pending_changes(working_db_path(job.data_dir)) == 0
    after = marts(published_db_path(job.data_dir))
    assert after != before
    shipment_ids = {row[0] for row in after["fct_shipments"]}
    assert set(changed) <= shipment_ids and not set(deleted) & shipment_ids
    for mart in INCREMENTAL_MARTS:  # each one rebuilt in part (its first column is the shipment id)
        assert after[mart] != before[mart], mart
        assert not set(deleted) & {row[0] for row in after[mart]}, mart
    assert "fct_shipment_documents" in INCREMENTAL_MARTS

    # the same data rebuilt from scratch gives exactly the same marts
    copy = tmp_path / "copy.duckdb"
    shutil.copy(published_db_path(job.data_dir), copy)
    result, _ = run_dbt(["build", "--full-refresh", "--exclude-resource-type", "unit_test"], tmp_path, copy)
    assert result.returncode == 0, result.stdout[-2000:]
    assert marts(copy) == after
