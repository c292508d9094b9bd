"""A stream is a failure domain: an account without the E-File permission fails the documents stream,
red in Dagster, while a build run after it publishes every other stream's data and the marts.

Real simulator (an account whose operator did not grant the documents role), real sync, real dbt,
real Dagster runs: the sync job as the schedule launches it, the run-failure sensor's decision on it,
then the build job it requests.
"""

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from freight_pipeline.definitions import defs
from freight_pipeline.defs.jobs import FREIGHT_BUILD_JOB
from freight_pipeline.defs.publish import PUBLISH_KEY
from freight_pipeline.defs.recovery import (
    AFTER_FAILED_RUN_TAG,
    FAILED_STREAMS_TAG,
    build_after_failed_streams,
    step_statuses,
    streams_to_build_after,
)
from freight_pipeline.defs.sync_assets import table_key
from freight_pipeline.simulator.config import PERMISSIONS, SimulatorConfig, UserConfig
from freight_pipeline.simulator.server import running_simulator
from freight_pipeline.warehouse.publish import published_db_path

SHIPMENTS = 60


@dataclass
class Runs:
    failed: dg.ExecuteInProcessResult
    request: dg.RunRequest | dg.SkipReason
    build: dg.ExecuteInProcessResult
    instance: dg.DagsterInstance
    data_dir: Path


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    root = tmp_path_factory.mktemp("stream_failure")
    data_dir = root / "data"
    password = "pw-" + secrets.token_hex(12)
    without_efiles = frozenset(p for p in PERMISSIONS if not p.startswith("efile"))
    config = SimulatorConfig(users=(UserConfig("no-documents-role", password, without_efiles),))
    with running_simulator(config, shipments=SHIPMENTS, seed=7) as sim, pytest.MonkeyPatch.context() as env:
        env.setenv("FREIGHT_BASE_URL", sim.base_url)
        env.setenv("FREIGHT_USERNAME", "no-documents-role")
        env.setenv("FREIGHT_PASSWORD", password)
        env.setenv("FREIGHT_DATA_DIR", str(data_dir))
        env.setenv("DAGSTER_HOME", str(root / "dagster_home"))
        env.delenv("FREIGHT_DBT_DATABASE", raising=False)
        with dg.DagsterInstance.ephemeral() as instance:
            failed = defs.resolve_job_def("freight_sync_job").execute_in_process(instance=instance,
                                                                                 raise_on_error=False)
            run = instance.get_run_by_id(failed.run_id)
            assert run is not None
            failure = next(e for e in failed.all_events if e.is_run_failure)
            context = dg.build_run_status_sensor_context(
                sensor_name=build_after_failed_streams.name, dagster_event=failure, dagster_instance=instance,
                dagster_run=run,
            ).for_run_failure()
            request = build_after_failed_streams(context)
            tags = request.tags if isinstance(request, dg.RunRequest) else {}
            build = defs.resolve_job_def(FREIGHT_BUILD_JOB).execute_in_process(
                instance=instance, raise_on_error=False, tags=tags)
            yield Runs(failed, request, build, instance, data_dir)


def test_the_documents_stream_fails_red_naming_the_permission_and_the_switch(runs: Runs) -> None:
    assert not runs.failed.success
    failures = [e for e in runs.failed.all_events if e.is_step_failure]
    assert [e.step_key for e in failures] == ["sync_documents"]
    message = failures[0].step_failure_data.error.cause.message  # the stream's own error under Dagster's
    assert "StreamUnreachable" in message and "403" in message and "FREIGHT_SYNC_DOCUMENTS=0" in message
    assert runs.instance.get_latest_materialization_event(table_key("shipment_documents")) is None
    shipments = runs.instance.get_latest_materialization_event(table_key("shipments"))
    assert shipments is not None and shipments.run_id == runs.failed.run_id
    started = {e.step_key for e in runs.failed.all_events if e.event_type_value == "STEP_START"}
    assert "sync_shipments" in started and "freight_dbt_models" not in started  # Dagster does not go on past a
    assert "freight__published_warehouse" not in started  # failed step within its run


def test_the_sensor_requests_a_build_run_naming_the_failed_run_and_stream(runs: Runs) -> None:
    assert isinstance(runs.request, dg.RunRequest), runs.request
    assert runs.request.tags == {AFTER_FAILED_RUN_TAG: runs.failed.run_id, FAILED_STREAMS_TAG: "documents"}
    assert runs.request.run_key == f"build-after-{runs.failed.run_id}"
    assert streams_to_build_after(step_statuses(runs.instance, runs.failed.run_id)) == ["documents"]


def test_the_build_run_publishes_every_other_stream_and_the_marts(runs: Runs) -> None:
    assert runs.build.success, [e.message for e in runs.build.all_events if e.is_failure]
    assert runs.instance.get_latest_materialization_event(PUBLISH_KEY).run_id == runs.build.run_id
    with duckdb.connect(str(published_db_path(runs.data_dir)), read_only=True) as con:
        counts = dict(con.sql("SELECT 'shipments', count(*) FROM freight.shipments UNION ALL "
                              "SELECT 'events', count(*) FROM freight.shipment_events UNION ALL "
                              "SELECT 'documents', count(*) FROM freight.shipment_documents UNION ALL "
                              "SELECT 'mart', count(*) FROM analytics.fct_shipments UNION ALL "
                              "SELECT 'documents mart', count(*) FROM analytics.fct_shipment_documents").fetchall())
        freshness = dict(con.sql("SELECT table_name, last_status FROM freight_meta.table_freshness").fetchall())
    assert counts["shipments"] == counts["mart"] == SHIPMENTS and counts["events"] > 0
    assert counts["documents"] == counts["documents mart"] == 0  # as last published: never read
    assert freshness["shipment_documents"] == "failed" and freshness["shipments"] == "success"


def test_the_sensor_leaves_runs_alone_that_failed_in_more_than_their_streams() -> None:
    assert streams_to_build_after({"sync_shipments": "success", "sync_documents": "failed"}) == ["documents"]
    assert streams_to_build_after({"sync_shipments": "failed", "sync_code_conversions": "success"}) == ["shipments"]
    assert streams_to_build_after({"sync_shipments": "success", "freight_dbt_models": "failed"}) == []
    assert streams_to_build_after({"sync_shipments": "failed", "sync_documents": "failed"}) == []  # none succeeded
    assert streams_to_build_after({"sync_shipments": "success"}) == []
