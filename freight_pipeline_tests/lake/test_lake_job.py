"""The sync job without Dagster in lake mode: the same steps into a DuckLake (a SQLite catalog, Parquet in
a folder), the dbt worker building with the profile's ``lake`` target, and the publish recording the
snapshot of the whole build."""

from __future__ import annotations

from pathlib import Path

import pytest

from freight_pipeline.config import ServiceSettings, environ
from freight_pipeline.job.run import PUBLISH_STEP, run_job
from freight_pipeline.lake.backend import storage_from_env
from freight_pipeline.lake.connect import connect_lake
from freight_pipeline.lake.settings import CATALOG_URI_ENV, DATA_URI_ENV, LAKE_DBT_TARGET, LakeSettings
from freight_pipeline.marts.worker import DbtWorker
from freight_pipeline.simulator.server import running_simulator
from freight_pipeline.sync.settings import SyncSettings

pytestmark = pytest.mark.timeout(300)


def test_the_job_builds_and_publishes_a_lake(tmp_path: Path) -> None:
    lake = {CATALOG_URI_ENV: f"sqlite:///{tmp_path / 'catalog.sqlite'}", DATA_URI_ENV: str(tmp_path / "lake")}
    with running_simulator(shipments=15, seed=4) as sim, environ(lake):
        backend = storage_from_env()
        assert backend.dbt_target == LAKE_DBT_TARGET
        service = ServiceSettings(sim.base_url, sim.username, sim.password)
        with DbtWorker.start(tmp_path / "data", backend.dbt_target) as worker:
            report = run_job(service, tmp_path / "data", SyncSettings(reconcile_interval=None), backend, worker)
        sim.modify_shipments(2)
        sim.advance_clock(60)
        with DbtWorker.start(tmp_path / "data", backend.dbt_target) as worker:  # its tests on the changed rows
            again = run_job(service, tmp_path / "data", SyncSettings(reconcile_interval=None), backend, worker)
        settings = LakeSettings.from_env()
    assert report.success, report.steps
    assert report.marts is not None and report.marts.summary is not None and report.marts.plan.full_refresh
    assert again.success, again.steps
    assert again.marts is not None and again.marts.plan.changed_rows and again.marts.summary is not None
    publish = next(step for step in report.steps if step.name == PUBLISH_STEP)
    assert publish.line.startswith("published snapshot ")
    assert settings is not None
    with connect_lake(settings, tmp_path / "scratch", "256MB", read_only=True) as con:
        assert con.execute("SELECT count(*) FROM analytics.fct_shipments").fetchone() == (15,)

