"""Alerts in lake mode (a real PostgreSQL catalog, a real S3-compatible server): the problems' state and the
outbox are lake tables (``freight_meta.alerts``, ``alert_messages``), written in one commit per look; a failed
stream is said once, not again while it fails, and once resolved."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import dagster as dg
import pytest

from freight_pipeline.config import LAKE_CATALOG_URI_ENV, LAKE_DATA_URI_ENV, environ
from freight_pipeline.defs.lake import (
    ALERTS_SENSOR,
    build_backfill,
    build_lake_alerts_sensor,
    lake_maintenance_job,
)
from freight_pipeline.defs.names import BACKFILL_JOB, MAINTENANCE_JOB
from freight_pipeline.defs.resources import FreightServiceResource, WarehouseResource
from freight_pipeline.defs.writer_claim import PARTITION_TAG
from freight_pipeline.lake import backend
from freight_pipeline.lake.connect import connect_lake
from freight_pipeline.lake.settings import LakeSettings
from freight_pipeline.simulator.server import running_simulator
from freight_pipeline.sync.backfill import id_ranges_between
from freight_pipeline.sync.streams import CODE_CONVERSIONS
from freight_pipeline.warehouse.writer_lock import writer_lock
from freight_pipeline_tests.alerts.harness import FORBIDDEN, Runs, destinations_running, titles
from freight_pipeline_tests.alerts.receivers import Webhook, webhook
from freight_pipeline_tests.sync.test_bad_data import corrupt

TITLE = "the code_conversions stream failed"


def test_a_failed_stream_is_said_once_and_resolved_once_from_the_lake(
    lake_env: dict[str, str], tmp_path: Path
) -> None:
    with running_simulator(shipments=8, seed=5) as sim, destinations_running() as destinations, environ(lake_env):
        runs = Runs(sim, tmp_path / "data", destinations.alerting())
        sim.set_faults(forbidden_prefixes=FORBIDDEN)
        for _ in range(3):
            assert runs.run().failed_streams == [CODE_CONVERSIONS.name]
        sim.set_faults(forbidden_prefixes=None)
        assert runs.run().success
    said = [f"[test-deploy] ERROR: {TITLE}", f"[test-deploy] resolved: {TITLE}"]
    assert titles(destinations) == [said, said]
    lake = LakeSettings.configured(lake_env)
    assert lake is not None
    with connect_lake(lake, tmp_path / "scratch", "256MB", read_only=True) as con:
        episodes = con.execute("SELECT problem, opened_run, closed_run, times_seen FROM freight_meta.alerts").fetchall()
        queued = con.execute("SELECT kinds, count(*) FROM freight_meta.alert_messages GROUP BY kinds ORDER BY kinds"
                             ).fetchall()
    first, *_, last = runs.reports
    assert episodes == [(f"step.sync_{CODE_CONVERSIONS.name}:failed", first.run_id, last.run_id, 3)]
    assert queued == [("opened", 2), ("resolved", 2)]


def local_lake(tmp_path: Path) -> dict[str, str]:
    """A lake of a SQLite catalog and local files: the lake jobs' alerts need no PostgreSQL or S3."""
    return {LAKE_CATALOG_URI_ENV: f"sqlite:///{tmp_path}/catalog.sqlite", LAKE_DATA_URI_ENV: str(tmp_path / "lake")}


def hook_titles(hook: Webhook) -> list[str]:
    return [message.title for message in hook.received]


def test_a_backfill_partition_s_failure_alerts_and_its_next_success_resolves_it(tmp_path: Path) -> None:
    """The partition's run fails (the service refuses the shipments): one message, as the main job's failure is
    said; the partition run again, succeeding: resolved."""
    with running_simulator(shipments=8, seed=5) as sim, webhook() as hook, environ(local_lake(tmp_path)):
        asset, job = build_backfill(id_ranges_between([5]))
        warehouse = WarehouseResource(data_dir=str(tmp_path / "data"), alert_urls=hook.url,
                                      alert_deployment="test-deploy")
        service = FreightServiceResource(base_url=sim.base_url, username=sim.username, password=sim.password)
        backfill = dg.Definitions(assets=[asset], jobs=[job], resources={
            "warehouse": warehouse, "freight_service": service}).resolve_job_def(BACKFILL_JOB)
        sim.set_faults(forbidden_prefixes=frozenset({"/service/shipment"}))
        assert not backfill.execute_in_process(partition_key="0-4", raise_on_error=False).success
        [failed] = hook.received
        assert failed.title.startswith("[test-deploy] ERROR: the backfill partition 0-4 step failed")
        assert "not permitted to call POST /service/shipment/lookup" in failed.body
        assert "docs/lake.md#the-first-full-sync-split" in failed.body
        sim.set_faults(forbidden_prefixes=None)
        assert backfill.execute_in_process(partition_key="0-4").success
        [resolved] = hook.received[1:]
        assert resolved.title.startswith("[test-deploy] resolved: ")
        assert "- the backfill partition 0-4 step failed\n" in resolved.body.partition("Resolved:")[2]


def test_a_failed_maintenance_alerts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The maintenance cannot run (a sync holds the data directory all along): one message."""
    monkeypatch.setattr(backend, "MAINTENANCE_WAIT", dt.timedelta(seconds=0.2))
    data_dir = tmp_path / "data"
    with webhook() as hook, environ(local_lake(tmp_path)), dg.DagsterInstance.ephemeral() as instance:
        with writer_lock(data_dir, "sync-run-of-this-directory"):
            result = lake_maintenance_job.execute_in_process(resources={"warehouse": WarehouseResource(
                data_dir=str(data_dir), alert_urls=hook.url, alert_deployment="test-deploy")}, instance=instance,
                raise_on_error=False)
        assert not result.success
        [failed] = hook.received
        assert failed.title.startswith("[test-deploy] ERROR: the lake_maintenance step failed")
        assert "sync-run-of-this-directory" in failed.body and "docs/lake.md#maintenance" in failed.body
        [event] = [entry.dagster_event for entry in instance.all_logs(result.run_id)
                   if entry.dagster_event is not None and entry.dagster_event.event_type_value == "PIPELINE_FAILURE"]
        told = dg.build_run_status_sensor_context(ALERTS_SENSOR, event, instance, result.dagster_run)
        build_lake_alerts_sensor((lake_maintenance_job,))(told.for_run_failure())  # the run said it: not again
        assert len(hook.received) == 1


def failed_run(instance: dg.DagsterInstance, config: dict[str, str], why: str,
               partition: str | None = None) -> dg.RunFailureSensorContext:
    """A run of the maintenance (or of a backfill ``partition``) that ``why`` failed without a step of its own
    (the run monitor's word for a worker that died), as the sensor is told of it."""
    job = dg.Definitions(jobs=[lake_maintenance_job], resources={"warehouse": WarehouseResource()}
                         ).resolve_job_def(MAINTENANCE_JOB)
    run = instance.create_run_for_job(
        job, run_config={"resources": {"warehouse": {"config": config}}},
        tags={PARTITION_TAG: partition} if partition else None)
    instance.report_run_failed(run, why)
    [event] = [entry.dagster_event for entry in instance.all_logs(run.run_id)
               if entry.dagster_event is not None and entry.dagster_event.event_type_value == "PIPELINE_FAILURE"]
    return dg.build_run_status_sensor_context(ALERTS_SENSOR, event, instance, run).for_run_failure()


def test_a_lake_run_whose_process_died_is_alerted_by_the_sensor_once(tmp_path: Path) -> None:
    """A run that could not look at its problems (its worker killed: out of memory) is alerted by the sensor; a run
    of the demo (no destination in its own resource config) is not."""
    sensor = build_lake_alerts_sensor((lake_maintenance_job,))
    with webhook() as hook, environ(local_lake(tmp_path)), dg.DagsterInstance.ephemeral() as instance:
        config = {"data_dir": str(tmp_path / "data"), "alert_urls": hook.url, "alert_deployment": "test-deploy"}
        sensor(failed_run(instance, config, "Run worker process died (exit code -9)", partition="0-4"))
        assert hook_titles(hook) == ["[test-deploy] ERROR: the backfill partition 0-4 step failed and 1 more"]
        assert "Run worker process died" in hook.received[0].body
        sensor(failed_run(instance, {**config, "alert_urls": ""}, "the demo's run failed"))
        assert len(hook.received) == 1


def test_a_backfill_partition_that_quarantined_a_record_is_a_warning(tmp_path: Path) -> None:
    """A partition whose run succeeded with a shipment the service answers broken on every attempt: a warning
    naming it, as the main job's checks say a quarantined record."""
    with running_simulator(shipments=8, seed=5, control=True) as sim, webhook() as hook, environ(local_lake(tmp_path)):
        ids = sorted(doc["id"] for doc in sim.store.reader.expected_documents())
        corrupt(sim, "shipment", ids[3], "status", status=500)
        plan = id_ranges_between([ids[-1] + 1])
        asset, job = build_backfill(plan)
        warehouse = WarehouseResource(data_dir=str(tmp_path / "data"), alert_urls=hook.url, alert_level="warning")
        service = FreightServiceResource(base_url=sim.base_url, username=sim.username, password=sim.password)
        backfill = dg.Definitions(assets=[asset], jobs=[job], resources={
            "warehouse": warehouse, "freight_service": service}).resolve_job_def(BACKFILL_JOB)
        assert backfill.execute_in_process(partition_key=plan[0].key).success
    [said] = hook.received
    assert f"WARNING: backfill partition {plan[0].key}: records rejected or quarantined" in said.title
    assert "1 records quarantined in this run" in said.body


@pytest.mark.parametrize("job", [BACKFILL_JOB, MAINTENANCE_JOB])
def test_a_lake_run_refuses_a_settings_file_problem_of_no_concern_before_it_uses_a_data_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, job: str
) -> None:
    """A misspelt table (``[storgae]``, meant to name the data directory) is set aside by the looks (status, the
    sensors) and refused by every run: a backfill partition's and the maintenance's went on with the default
    ``./data`` of the process's directory."""
    settings_file = tmp_path / "freight.toml"
    settings_file.write_text(f'[storgae]\ndata_dir = "{tmp_path / "meant"}"\n')
    monkeypatch.chdir(tmp_path)
    plan = id_ranges_between([100])
    asset, backfill = build_backfill(plan)
    warehouse = WarehouseResource()  # the data directory from the settings: the file's, had it been read
    service = FreightServiceResource(base_url="http://127.0.0.1:9", username="u", password="p")
    definitions = dg.Definitions(assets=[asset], jobs=[backfill, lake_maintenance_job],
                                 resources={"warehouse": warehouse, "freight_service": service})
    with environ({**local_lake(tmp_path), "FREIGHT_SETTINGS_FILE": str(settings_file)}):
        result = definitions.resolve_job_def(job).execute_in_process(
            raise_on_error=False, partition_key=plan[0].key if job == BACKFILL_JOB else None)
    assert not result.success
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    assert failure.step_failure_data is not None and failure.step_failure_data.user_failure_data is not None
    assert f"{settings_file}: [storgae] is not a table of settings" in (
        failure.step_failure_data.user_failure_data.description or "")
    assert not (tmp_path / "data").exists() and not (tmp_path / "meant").exists()
