"""Readers never get half-built marts: a failed dbt build blocks every publish until a whole build succeeds.

Real simulator, real sync, real dbt, real Dagster jobs. The working database is made to fail one
dbt test (an event type outside ESTIMATED/ACTUAL), then the daily ``code_conversions_job`` runs.
"""

from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from freight_pipeline.config import ServiceSettings
from freight_pipeline.definitions import defs
from freight_pipeline.defs.dbt import DBT_BUILD_STREAM
from freight_pipeline.defs.jobs import CODE_CONVERSIONS_JOB
from freight_pipeline.defs.publish import PUBLISH_KEY
from freight_pipeline.defs.sync_assets import table_key
from freight_pipeline.simulator.server import running_simulator
from freight_pipeline.sync.runner import sync_all
from freight_pipeline.warehouse import parquet_root, published_db_path, working_db_path

BAD_TYPE = "PLANNED"


def _published_version(data_dir: Path) -> Path:
    return parquet_root(data_dir).resolve()


def _dbt_build_status(data_dir: Path, run_id: str) -> str:
    with duckdb.connect(str(working_db_path(data_dir)), read_only=True) as con:
        row = con.execute(
            "SELECT status FROM freight_meta.sync_runs WHERE run_id = ? AND stream = ?", [run_id, DBT_BUILD_STREAM]
        ).fetchone()
    assert row is not None
    return str(row[0])


def _set_one_event_type(data_dir: Path, old: str, new: str) -> None:
    with duckdb.connect(str(working_db_path(data_dir))) as con:
        con.execute(
            "UPDATE freight.shipment_events SET type = ? WHERE rowid = (SELECT min(rowid) FROM freight.shipment_events "
            "WHERE type = ?)",
            [new, old],
        )


@pytest.fixture
def synced(tmp_path: Path) -> Iterator[Path]:
    """A data dir synced (no dbt) and published, with the service settings in the environment."""
    data_dir = tmp_path / "data"
    with running_simulator(shipments=40, seed=11) as sim, pytest.MonkeyPatch.context() as env:
        service = ServiceSettings(sim.base_url, sim.username, sim.password)
        sync_all(service, data_dir)
        env.setenv("FREIGHT_BASE_URL", sim.base_url)
        env.setenv("FREIGHT_USERNAME", sim.username)
        env.setenv("FREIGHT_PASSWORD", sim.password)
        env.setenv("FREIGHT_DATA_DIR", str(data_dir))
        env.delenv("FREIGHT_DBT_DATABASE", raising=False)
        yield data_dir


def test_a_failed_dbt_build_is_not_published_until_a_whole_build_succeeds(synced: Path) -> None:
    data_dir = synced
    job = defs.resolve_job_def(CODE_CONVERSIONS_JOB)
    with dg.DagsterInstance.ephemeral() as instance:
        good = job.execute_in_process(instance=instance, raise_on_error=False)
        assert good.success
        published = _published_version(data_dir)

        _set_one_event_type(data_dir, "ACTUAL", BAD_TYPE)
        failed = job.execute_in_process(instance=instance, raise_on_error=False)
        assert not failed.success
        assert _dbt_build_status(data_dir, failed.run_id) == "failed"
        assert _published_version(data_dir) == published  # publish was skipped after the failed build

        # even a run that skips dbt (only the sync and the publish) must not publish the half-built marts
        no_dbt = job.execute_in_process(
            instance=instance, raise_on_error=False, asset_selection=[table_key("code_conversions"), PUBLISH_KEY]
        )
        assert not no_dbt.success
        failure = next(e for e in no_dbt.all_events if e.is_step_failure)
        assert failure.step_key is not None and "publish" in failure.step_key
        message = str(failure.event_specific_data)
        assert "UnsettledWarehouse" in message and f"dbt_build failed in run {failed.run_id}" in message
        assert _published_version(data_dir) == published

        _set_one_event_type(data_dir, BAD_TYPE, "ACTUAL")
        healed = job.execute_in_process(instance=instance, raise_on_error=False)
        assert healed.success
        assert _published_version(data_dir) != published
    with duckdb.connect(str(published_db_path(data_dir)), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM analytics.fct_shipments").fetchone() == (40,)
        statuses = con.execute(
            "SELECT status FROM freight_meta.sync_runs WHERE stream = ? ORDER BY started_at", [DBT_BUILD_STREAM]
        ).fetchall()
    assert [s for (s,) in statuses] == ["success", "failed", "success"]
