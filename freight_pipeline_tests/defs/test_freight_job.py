"""The job's one op in Dagster, a test per concern: a selection runs only what it selects. A failed
stream failing one run that publishes every other stream (its check red, the op's failure naming the
step) and a data directory publishing the same either way the job is started are tested on the CLI's
runs, in ``freight_pipeline_tests/commands/test_sync_command.py`` (the same runs, not once more here).
The scenarios themselves (incremental builds, a broken guarantee) are the engine's, tested once in
``freight_pipeline_tests/job``.

Real simulator over HTTP, real DuckDB, dbt and Dagster. (No ``from __future__ import annotations``:
Dagster reads annotations.)
"""

import datetime as dt
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb
import pytest

from freight_pipeline.definitions import defs
from freight_pipeline.defs import freight_job
from freight_pipeline.defs.freight_job import DBT, NOT_SYNCED, PUBLISH_KEY, step_results, stream_check_key
from freight_pipeline.defs.names import FREIGHT_SYNC_JOB
from freight_pipeline.defs.sync_assets import stream_keys
from freight_pipeline.job.run import CHECKS_STEP, Step, StreamFigures
from freight_pipeline.marts.project import build_target
from freight_pipeline.marts.worker import NEXT_BUILD, DbtWorker, Start
from freight_pipeline.simulator.config import FaultConfig
from freight_pipeline.simulator.server import RunningSimulator, running_simulator
from freight_pipeline.sync.result import StreamResult
from freight_pipeline.sync.streams import DOCUMENTS, stream_step
from freight_pipeline.warehouse.embedded import EmbeddedDuckDB
from freight_pipeline.warehouse.meta import BUILD_STREAM
from freight_pipeline.warehouse.paths import run_log_path, working_db_path
from freight_pipeline.warehouse.publish import published_db_path
from freight_pipeline.warehouse.writer_lock import writer_lock


@contextmanager
def job_env(sim: RunningSimulator, data_dir: Path, username: str, password: str) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as env:
        env.setenv("FREIGHT_BASE_URL", sim.base_url)
        env.setenv("FREIGHT_USERNAME", username)
        env.setenv("FREIGHT_PASSWORD", password)
        env.setenv("FREIGHT_DATA_DIR", str(data_dir))
        env.delenv("FREIGHT_DBT_DATABASE", raising=False)
        yield


def materialized(result: dg.ExecuteInProcessResult) -> set[dg.AssetKey]:
    return {event.asset_key for event in result.get_asset_materialization_events()}


def logged_streams(data_dir: Path, run_id: str) -> set[str]:
    with duckdb.connect(str(working_db_path(data_dir)), read_only=True) as con:
        return {s for (s,) in con.execute("SELECT stream FROM freight_meta.sync_runs WHERE run_id = ?",
                                          [run_id]).fetchall()}


def test_a_selection_runs_only_what_it_selects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the code conversions: that stream alone, no build, no publish, and no dbt worker loading dbt for a
    build that does not come (a word from the last run that starts one at once is left for both). Only the
    marts: no stream, the checks and the build on what the working database holds, no publish."""
    job = defs.resolve_job_def(FREIGHT_SYNC_JOB)
    workers: list[DbtWorker] = []
    for_run = DbtWorker.for_run.__func__  # type: ignore[attr-defined]

    def recorded(cls: type[DbtWorker], *args: object, **kwargs: object) -> DbtWorker:
        workers.append(for_run(cls, *args, **kwargs))
        return workers[-1]

    monkeypatch.setattr(DbtWorker, "for_run", classmethod(recorded))
    word = build_target(tmp_path) / NEXT_BUILD
    with running_simulator(shipments=12, seed=4) as sim, job_env(sim, tmp_path, sim.username, sim.password), \
            dg.DagsterInstance.ephemeral() as instance:
        codes = job.execute_in_process(instance=instance, raise_on_error=False,
                                       asset_selection=stream_keys("code_conversions"))  # a first sync
        word.write_text("{not json")  # no word it can read: a later run that builds starts its worker at once
        again = job.execute_in_process(instance=instance, raise_on_error=False,
                                       asset_selection=stream_keys("code_conversions"))
        word.write_text("{not json")
        marts = job.execute_in_process(instance=instance, raise_on_error=False,
                                       asset_selection=list(DBT.keys.values()))
        judged = {stream_check_key("code_conversions"), stream_check_key("shipments")}  # the checks alone
        checked = job.get_subset(asset_selection=set(), asset_check_selection=judged).execute_in_process(
            instance=instance, raise_on_error=False)
    assert codes.success and again.success and marts.success
    evaluated = {c.asset_check_key: c for c in checked.get_asset_check_evaluations()}
    assert set(evaluated) == judged and logged_streams(tmp_path, checked.run_id) == set()  # judged, nothing run
    assert evaluated[stream_check_key("code_conversions")].passed
    assert evaluated[stream_check_key("code_conversions")].metadata["run_id"].value == again.run_id
    assert not evaluated[stream_check_key("shipments")].passed  # never run
    assert evaluated[stream_check_key("shipments")].description == "shipments was never run (this run did not run it)"
    assert [(worker.starts, worker.process is not None) for worker in workers] == [  # the checks alone: none
        (Start.WHEN_ASKED, False), (Start.WHEN_ASKED, False), (Start.AT_ONCE, True)]
    assert materialized(codes) == set(stream_keys("code_conversions"))
    assert {(c.asset_key, c.check_name) for c in codes.get_asset_check_evaluations()} >= {
        (stream_check_key("code_conversions").asset_key, "stream_synced"),
        (dg.AssetKey(["freight", "code_conversions"]), "primary_key_unique")}
    assert logged_streams(tmp_path, codes.run_id) == {"code_conversions"}
    assert materialized(marts) == set(DBT.keys.values())
    assert logged_streams(tmp_path, marts.run_id) == {BUILD_STREAM}
    assert not published_db_path(tmp_path).exists()  # neither selected the publish


def test_a_stop_raised_in_the_op_s_own_code_still_says_what_its_engine_finished_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Dagster raises a run's stop in the main thread wherever it is: in the op's own code too (here as it handles
    the checks' step), not only in its wait on the engine's thread, which had gone on meanwhile past the publish's
    point of no return. The run stopped (its failure is the stop), and Dagster says what the engine finished before
    it stopped: the build's models and the publish (was: readers had the run's publish, Dagster never said it
    published, the run shown canceled without its materialization)."""
    published = threading.Event()
    publish, results_of = EmbeddedDuckDB.publish, freight_job.step_results

    def publish_then_say(self: EmbeddedDuckDB, *args: Any, **kwargs: Any) -> Any:
        done = publish(self, *args, **kwargs)
        published.set()
        return done

    def stopped_in(step: Step, *args: Any) -> Iterator[dg.MaterializeResult | dg.AssetCheckResult]:
        if step.name == CHECKS_STEP:  # the engine goes on to its end meanwhile; then Dagster's handler raises here
            assert published.wait(300)
            raise dg.DagsterExecutionInterruptedError()
        return results_of(step, *args)

    monkeypatch.setattr(EmbeddedDuckDB, "publish", publish_then_say)
    monkeypatch.setattr(freight_job, "step_results", stopped_in)
    job = defs.resolve_job_def(FREIGHT_SYNC_JOB)
    with running_simulator(shipments=12, seed=4) as sim, job_env(sim, tmp_path, sim.username, sim.password), \
            dg.DagsterInstance.ephemeral() as instance:
        stopped = job.execute_in_process(instance=instance, raise_on_error=False)
        run = instance.get_run_by_id(stopped.run_id)
        records = instance.get_records_for_run(run.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION).records
        said = {record.event_log_entry.dagster_event.asset_key for record in records
                if record.event_log_entry.dagster_event is not None}
    assert published_db_path(tmp_path).exists()  # the engine published before the stop came
    assert PUBLISH_KEY in said and set(DBT.keys.values()) <= said, sorted(key.to_user_string() for key in said)
    assert not stopped.success and run is not None and run.status == dg.DagsterRunStatus.FAILURE


def test_a_stream_that_did_not_run_is_red_and_one_switched_off_is_not_materialized() -> None:
    """The stream check is red when the stream failed or did not run (the documents stream after a failed
    shipments stream), green when it ran or is switched off; a stream switched off wrote nothing, so its
    tables are not materialized."""
    step = stream_step(DOCUMENTS.name)
    figures = StreamFigures(StreamResult("r", DOCUMENTS.name, dt.datetime.now(dt.UTC)))
    steps = {
        "failed": Step(step, "failed", 1.0, "PermissionDeniedError: ..."),
        "not run": Step(step, "skipped", 0.0, "not run: it reads the shipments stream first, which did not run"),
        "off": Step(step, "skipped", 0.0, "read 0", stream=figures, off=True),
        "ran": Step(step, "success", 1.0, "read 3", stream=figures),
    }
    seen = {}
    for name, told in steps.items():
        results = list(step_results(told))
        (check,) = [r for r in results if isinstance(r, dg.AssetCheckResult)]
        assert (check.asset_key, check.check_name) == (stream_check_key(DOCUMENTS.name).asset_key, "stream_synced")
        seen[name] = (check.passed, sorted(r.asset_key.to_user_string() for r in results
                                           if isinstance(r, dg.MaterializeResult)))
    assert seen == {"failed": (False, []), "not run": (False, []), "off": (True, []),
                    "ran": (True, ["freight/shipment_documents"])}


@pytest.mark.parametrize(("resource", "setting", "value", "said"), [
    ("freight_service", "page_size", -5, "page_size (Dagster resource)=-5"),  # the settings' models
    # and what they leave to the code using them, as the commands check it up front (job.settings); was: a run
    # whose every alert failed ("not a notification URL Apprise knows"), a publish that failed at its end
    ("warehouse", "alert_urls", "jsn://127.0.0.1:9/", "alert_urls (Dagster resource): jsn://"),
    ("warehouse", "publish_storage_version", "v9.9.9", "is not a storage version duckdb"),
])
def test_a_bad_resource_setting_fails_the_run_naming_it_without_a_traceback(
    tmp_path: Path, resource: str, setting: str, value: object, said: str
) -> None:
    job = defs.resolve_job_def(FREIGHT_SYNC_JOB)
    config = {"resources": {resource: {"config": {setting: value}}}}
    config["resources"].setdefault("freight_service", {"config": {}})["config"]["password"] = "pw-never-shown"
    with pytest.MonkeyPatch.context() as env, dg.DagsterInstance.ephemeral() as instance:
        env.setenv("FREIGHT_DATA_DIR", str(tmp_path))
        result = job.execute_in_process(instance=instance, raise_on_error=False, run_config=config,
                                        asset_selection=stream_keys("code_conversions"))
        texts = [repr(entry) for entry in instance.all_logs(result.run_id)]
    (failure,) = [event for event in result.all_events if event.is_step_failure]
    error = failure.step_failure_data.error
    assert failure.step_failure_data.user_failure_data is not None  # a Failure of the op, not an exception
    assert error is not None and error.cause is None
    assert said in error.message
    assert not [t for t in texts if "pw-never-shown" in t]


def test_a_model_built_while_a_stream_it_reads_failed_says_so(tmp_path: Path) -> None:
    """The documents stream refused (403): the run builds and publishes the rest; the documents mart, built on
    the documents' last successful sync, says that stream was not synced; the shipments marts do not."""
    job = defs.resolve_job_def(FREIGHT_SYNC_JOB)
    faults = FaultConfig(forbidden_prefixes={"/service/efile"})
    with running_simulator(shipments=12, seed=4, faults=faults) as sim, \
            job_env(sim, tmp_path, sim.username, sim.password), dg.DagsterInstance.ephemeral() as instance:
        result = job.execute_in_process(instance=instance, raise_on_error=False)
    assert not result.success
    said = {event.asset_key.to_user_string(): event.materialization.metadata.get(NOT_SYNCED)
            for event in result.get_asset_materialization_events()}
    assert "freight/shipment_documents" not in said and "freight/published_warehouse" in said
    documents = said["analytics/fct_shipment_documents"]
    assert documents is not None and str(documents.value).startswith("documents: failed or not run")
    assert said["analytics/fct_shipments"] is None


def test_the_streams_checks_alone_read_the_run_log_while_another_run_writes_and_a_running_stream_is_not_red(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The UI's "Execute" of a stream's check while a headless sync writes: judged from the run log, without the
    writer lock (was: the run failed "skipped"), and the stream that run is syncing is a WARN that says it is running,
    not a red ERROR ("it failed or did not run": neither)."""
    run_log_path(tmp_path).parent.mkdir(parents=True)
    run_log_path(tmp_path).write_text(json.dumps([
        {"stream": "shipments", "run_id": "cli-run", "status": "running", "started_at": "2026-12-07T13:00:00+00:00"},
        {"stream": "code_conversions", "run_id": "cli-before", "status": "success"}]))
    monkeypatch.setenv("FREIGHT_DATA_DIR", str(tmp_path))
    judged = {stream_check_key("shipments"), stream_check_key("code_conversions")}
    job = defs.resolve_job_def(FREIGHT_SYNC_JOB).get_subset(asset_selection=set(), asset_check_selection=judged)
    with writer_lock(tmp_path, "cli-run"), dg.DagsterInstance.ephemeral() as instance:
        checked = job.execute_in_process(instance=instance, raise_on_error=False)
    assert checked.success
    evaluated = {c.asset_check_key: c for c in checked.get_asset_check_evaluations()}
    running, synced = evaluated[stream_check_key("shipments")], evaluated[stream_check_key("code_conversions")]
    assert (running.passed, running.severity) == (False, dg.AssetCheckSeverity.WARN)
    assert running.description is not None and running.description.endswith("running (this run did not run it): "
                                                                             "judged once it ends")
    assert synced.passed
