"""``freight_rebuild_job``: the rebuild as a Dagster run (the engine's ``run_rebuild`` in one op), with no
service resource: the tables re-derived (every shipment, asked in the run's config), the marts built in full, the
publish recorded as a materialization."""

from pathlib import Path

import dagster as dg
import duckdb
import pytest

from freight_pipeline.config import ServiceSettings
from freight_pipeline.definitions import defs
from freight_pipeline.defs.freight_job import PUBLISH_KEY
from freight_pipeline.defs.names import REBUILD_JOB
from freight_pipeline.lake.backend import storage_from_env
from freight_pipeline.simulator.server import running_simulator
from freight_pipeline.sync.runner import sync_all
from freight_pipeline.sync.streams import SHIPMENTS
from freight_pipeline.warehouse.publish import published_db_path


def test_the_rebuild_job_rebuilds_builds_and_publishes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with running_simulator(shipments=12, seed=4) as sim:
        sync_all(ServiceSettings(sim.base_url, sim.username, sim.password), tmp_path, backend=storage_from_env(),
                 streams=(SHIPMENTS.name,))
        served = sim.request_count()
        for name in ("FREIGHT_BASE_URL", "FREIGHT_USERNAME", "FREIGHT_PASSWORD", "FREIGHT_DBT_DATABASE"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("FREIGHT_DATA_DIR", str(tmp_path))
        with dg.DagsterInstance.ephemeral() as instance:
            result = defs.resolve_job_def(REBUILD_JOB).execute_in_process(
                instance=instance, raise_on_error=False,
                run_config={"ops": {"freight_rebuild": {"config": {"everything": True}}}})
        assert sim.request_count() == served
    assert result.success
    assert {event.asset_key for event in result.get_asset_materialization_events()} == {PUBLISH_KEY}
    with duckdb.connect(str(published_db_path(tmp_path)), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM analytics.fct_shipments").fetchone() == (12,)
        assert con.execute("SELECT status, rows_read FROM freight_meta.sync_runs WHERE stream = 'rebuild' "
                           "AND run_id = ?", [result.run_id]).fetchall() == [("success", 12)]


def test_the_rebuild_job_fails_without_a_working_database_and_publishes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A data directory with no working database (mistyped, or lost): nothing to rebuild from; no empty
    warehouse is made there, nor published."""
    monkeypatch.setenv("FREIGHT_DATA_DIR", str(tmp_path))
    with dg.DagsterInstance.ephemeral() as instance:
        result = defs.resolve_job_def(REBUILD_JOB).execute_in_process(instance=instance, raise_on_error=False)
    assert not result.success
    assert not published_db_path(tmp_path).exists()
    assert not (tmp_path / "work" / "warehouse.duckdb").exists()
