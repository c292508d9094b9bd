"""Readers never get half-built marts: a failed dbt build blocks every publish until a whole build succeeds.

Real simulator, real sync, real dbt, real Dagster jobs; the daily ``code_conversions_job`` runs on
a working database given, in turn, a value the service controls (an event type outside
ESTIMATED/ACTUAL: the build only warns, and publishes) and a broken pipeline guarantee (a goods line
of no shipment: the build fails, naming the failed test and the skipped marts).
"""

import logging
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from freight_pipeline.commands.execute import describe_error
from freight_pipeline.config import ServiceSettings
from freight_pipeline.definitions import defs
from freight_pipeline.defs.jobs import CODE_CONVERSIONS_JOB
from freight_pipeline.defs.publish import PUBLISH_KEY
from freight_pipeline.defs.sync_assets import table_key
from freight_pipeline.lake.backend import storage_from_env
from freight_pipeline.simulator.server import running_simulator
from freight_pipeline.sync.runner import sync_all
from freight_pipeline.warehouse.meta import BUILD_STREAM
from freight_pipeline.warehouse.paths import working_db_path
from freight_pipeline.warehouse.publish import parquet_root, published_db_path
from freight_pipeline_tests.dbt.freight_db import ORPHAN_SHIPMENT_ID, add_orphan_goods_line, record_change

NEW_TYPE = "PLANNED"
ORPHAN_TEST = "relationships_stg_shipment_goods_shipment_id__shipment_id__ref_stg_shipments_"
TYPE_TEST = "accepted_values_stg_shipment_events_event_type___freight_event_types_"


def _published_version(data_dir: Path) -> Path:
    return parquet_root(data_dir).resolve()


def _dbt_build_run(data_dir: Path, run_id: str) -> tuple[str, str | None]:
    """(status, error) of the run's dbt build in ``sync_runs``."""
    with duckdb.connect(str(working_db_path(data_dir)), read_only=True) as con:
        row = con.execute(
            "SELECT status, error FROM freight_meta.sync_runs WHERE run_id = ? AND stream = ?",
            [run_id, BUILD_STREAM],
        ).fetchone()
    assert row is not None
    return str(row[0]), row[1]


def _step_warnings(instance: dg.DagsterInstance, run_id: str) -> list[str]:
    return [
        entry.user_message
        for entry in instance.all_logs(run_id)
        if entry.level == logging.WARNING and entry.step_key and entry.dagster_event is None
    ]


def _set_one_event_type(data_dir: Path, old: str, new: str) -> None:
    """As if the sync had written an event of type ``new``: the row, and its shipment among the changes."""
    with duckdb.connect(str(working_db_path(data_dir))) as con:
        (shipment_id,) = con.execute(
            "UPDATE freight.shipment_events SET type = ? WHERE rowid = (SELECT min(rowid) FROM freight.shipment_events "
            "WHERE type = ?) RETURNING shipment_id",
            [new, old],
        ).fetchone()
        record_change(con, shipment_id)


@pytest.fixture
def synced(tmp_path: Path) -> Iterator[Path]:
    """A data dir synced (no dbt) and published, with the service settings in the environment."""
    data_dir = tmp_path / "data"
    with running_simulator(shipments=40, seed=11) as sim, pytest.MonkeyPatch.context() as env:
        service = ServiceSettings(sim.base_url, sim.username, sim.password)
        sync_all(service, data_dir, backend=storage_from_env())
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

        # a value the service controls: the build warns, names the test in a Dagster warning, publishes
        _set_one_event_type(data_dir, "ACTUAL", NEW_TYPE)
        warned = job.execute_in_process(instance=instance, raise_on_error=False)
        assert warned.success
        assert _dbt_build_run(data_dir, warned.run_id) == ("success", None)
        assert [w for w in _step_warnings(instance, warned.run_id) if TYPE_TEST in w] == [
            f"dbt test {TYPE_TEST} warned (severity warn, the build goes on): Got 1 result, configured to warn if != 0"
        ]
        assert _published_version(data_dir) != published
        published = _published_version(data_dir)
        with duckdb.connect(str(published_db_path(data_dir)), read_only=True) as con:
            assert con.execute(
                "SELECT unknown_event_types FROM analytics.fct_shipment_milestones WHERE unknown_type_events > 0"
            ).fetchall() == [(NEW_TYPE,)]

        # a broken pipeline guarantee: the build fails, naming the failed test and the skipped marts
        add_orphan_goods_line(working_db_path(data_dir))
        failed = job.execute_in_process(instance=instance, raise_on_error=False)
        assert not failed.success
        failure = next(e for e in failed.all_events if e.is_step_failure)
        assert failure.step_failure_data is not None
        reason = describe_error(failure.step_failure_data.error)
        expected = f"DbtBuildFailed: dbt build failed: 1 test failed ({ORPHAN_TEST}), 6 models skipped ("
        assert reason.startswith(expected), reason
        assert all(mart in reason for mart in ("fct_shipments", "fct_eta_accuracy", "and 3 more)"))
        status, error = _dbt_build_run(data_dir, failed.run_id)
        assert status == "failed" and error == reason
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

        with duckdb.connect(str(working_db_path(data_dir))) as con:
            con.execute("DELETE FROM freight.shipment_goods WHERE shipment_id = ?", [ORPHAN_SHIPMENT_ID])
            record_change(con, ORPHAN_SHIPMENT_ID)
        healed = job.execute_in_process(instance=instance, raise_on_error=False)
        assert healed.success
        assert _published_version(data_dir) != published
    with duckdb.connect(str(published_db_path(data_dir)), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM analytics.fct_shipments").fetchone() == (40,)
        statuses = con.execute(
            "SELECT status FROM freight_meta.sync_runs WHERE stream = ? ORDER BY started_at", [BUILD_STREAM]
        ).fetchall()
    assert [s for (s,) in statuses] == ["success", "success", "failed", "success"]
