"""Dagster's run history kept bounded (``defs/run_history.py``): ``dagster_history_job`` deletes, in an instance of the
shipped ``dagster.yaml``, the finished runs older than the retention with their files, and keeps the runs in progress
or queued, the newer ones and those holding an asset's or a check's latest event, whose state it leaves as it was."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from dagster._core.definitions.data_version import CachingStaleStatusResolver
from dagster._core.loader import LoadingContextForTest
from dagster._core.remote_origin import RegisteredCodeLocationOrigin, RemoteJobOrigin, RemoteRepositoryOrigin
from dagster._core.storage.runs.schema import RunsTable
from dagster._core.storage.runs.sql_run_storage import SqlRunStorage
from dagster._core.utils import make_new_run_id

from freight_pipeline.commands.dagster_home import ensure_dagster_yaml
from freight_pipeline.config import MAX_MINUTES, variable
from freight_pipeline.definitions import defs
from freight_pipeline.defs import jobs, run_history
from freight_pipeline.defs.names import RUN_HISTORY_JOB

PARTS = dg.StaticPartitionsDefinition(["x", "y"])
VERSIONS = iter(range(1000))


@dg.asset
def source_table() -> dg.MaterializeResult:
    return dg.MaterializeResult(data_version=dg.DataVersion(str(next(VERSIONS))))


@dg.asset(deps=[source_table])
def mart() -> None:
    return None


@dg.asset(partitions_def=PARTS)
def parts() -> None:
    return None


@dg.asset
def broken() -> None:
    raise RuntimeError("the source was down")


@dg.asset_check(asset=source_table)
def source_ok() -> dg.AssetCheckResult:
    return dg.AssetCheckResult(passed=True)


ASSETS = [source_table, mart, parts, broken]
TOY = dg.Definitions(assets=ASSETS, asset_checks=[source_ok], jobs=[run_history.dagster_history_job])
CHECK = source_ok.check_key
ORIGIN = RemoteJobOrigin(RemoteRepositoryOrigin(RegisteredCodeLocationOrigin("freight_pipeline"), "__repository__"),
                         "freight_sync_job")
"""Where a queued run would be launched (the run queue asks it of one)."""


@pytest.fixture
def instance(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """An instance of the shipped ``dagster.yaml`` in a temp ``DAGSTER_HOME``, with the retention's default."""
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    monkeypatch.delenv(variable("run_history_retention_minutes"), raising=False)
    monkeypatch.delenv("FREIGHT_SETTINGS_FILE", raising=False)
    monkeypatch.chdir(tmp_path)  # no freight.toml
    ensure_dagster_yaml(tmp_path)
    with dg.DagsterInstance.get() as instance:
        yield instance


def _run(instance: dg.DagsterInstance, *selection: Any, partition: str | None = None) -> str:
    result = dg.materialize([*ASSETS, source_ok], selection=list(selection), instance=instance, partition_key=partition,
                            raise_on_error=False)
    return result.run_id


def _age(instance: dg.DagsterInstance, run_ids: list[str], days: int) -> None:
    """Date the runs ``days`` back: made, started, ended and updated then."""
    when = dt.datetime.now(dt.UTC) - dt.timedelta(days=days)
    storage = instance.run_storage
    assert isinstance(storage, SqlRunStorage)
    with storage.connect() as conn:
        for run_id in run_ids:
            ended = RunsTable.c.end_time.is_(None)
            conn.execute(RunsTable.update().where(RunsTable.c.run_id == run_id).values(
                create_timestamp=when.replace(tzinfo=None), update_timestamp=when.replace(tzinfo=None),
                start_time=when.timestamp()))
            conn.execute(RunsTable.update().where(RunsTable.c.run_id == run_id, ~ended)
                         .values(end_time=when.timestamp()))


def _unfinished(instance: dg.DagsterInstance) -> list[str]:
    """A run of each status but the finished ones: not started, queued, starting, running, canceling."""
    run_ids = []
    for status in (dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.STARTING,
                   dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.CANCELING):
        run_id = make_new_run_id()
        instance.add_run(dg.DagsterRun(job_name="freight_sync_job", run_id=run_id, remote_job_origin=ORIGIN))
        event = {dg.DagsterRunStatus.QUEUED: "PIPELINE_ENQUEUED", dg.DagsterRunStatus.STARTING: "PIPELINE_STARTING",
                 dg.DagsterRunStatus.STARTED: "PIPELINE_START", dg.DagsterRunStatus.CANCELING: "PIPELINE_CANCELING",
                 }.get(status)
        if event is not None:  # as the run queue and the launcher move it on (without a code location to launch in)
            instance.run_storage.handle_run_event(run_id, dg.DagsterEvent(event, "freight_sync_job"))
        assert instance.get_run_by_id(run_id).status == status  # type: ignore[union-attr]
        run_ids.append(run_id)
    return run_ids


def _shown(instance: dg.DagsterInstance) -> dict[str, Any]:
    """What the UI shows of each asset and check: its latest materialization and its run, the latest run that planned
    one, its data version, its staleness, each partition's latest materialization; each check's latest execution."""
    graph = TOY.resolve_asset_graph()
    resolver = CachingStaleStatusResolver(instance, graph, LoadingContextForTest(instance))
    shown: dict[str, Any] = {}
    for record in instance.get_asset_records():
        entry = record.asset_entry
        key = entry.asset_key
        latest = instance.fetch_materializations(key, limit=1).records  # the asset's event history
        version = instance.get_latest_data_version_record(key)
        planned = instance.get_latest_planned_materialization_info(key)
        shown[key.to_user_string()] = (
            entry.last_materialization_storage_id, entry.last_run_id, planned.run_id if planned else None,
            [(event.storage_id, event.run_id) for event in latest],
            version.storage_id if version else None,
            resolver.get_status(key) if not graph.get(key).is_partitioned else None,
            dict(instance.event_log_storage.get_latest_storage_id_by_partition(
                key, dg.DagsterEventType.ASSET_MATERIALIZATION)),
        )
    summary = instance.event_log_storage.get_asset_check_summary_records([CHECK])[CHECK]
    execution = summary.last_check_execution_record
    shown["check"] = (execution.id, execution.run_id, execution.status) if execution else None
    shown["materialized partitions"] = sorted(instance.get_materialized_partitions(parts.key))
    return shown


def _files(home: Path, run_id: str) -> list[str]:
    return sorted(str(path.relative_to(home)) for pattern in (f"history/runs/{run_id}.db*", f"storage/{run_id}")
                  for path in home.glob(pattern))


def test_runs_older_than_the_retention_are_deleted_but_the_latest_of_each_asset_and_check(
        instance: dg.DagsterInstance, tmp_path: Path) -> None:
    holds_mart = _run(instance, source_table, mart, source_ok)  # mart's only materialization
    superseded = _run(instance, source_table)
    holds_x = _run(instance, parts, partition="x")
    superseded_y = _run(instance, parts, partition="y")
    holds_y = _run(instance, parts, partition="y")
    holds_broken = _run(instance, broken)  # failed: the UI shows broken failed
    superseded_check = _run(instance, source_ok)
    unfinished = _unfinished(instance)
    old = [holds_mart, superseded, holds_x, superseded_y, holds_y, holds_broken, superseded_check, *unfinished]
    _age(instance, old, days=40)
    recent = _run(instance, source_table)  # superseded, but within the 30 days
    _age(instance, [recent], days=20)
    newest = [_run(instance, source_table, source_ok), _run(instance, source_table)]
    deleted = [superseded, superseded_y, superseded_check]
    for run_id in deleted:  # each finished run has its shard and its compute logs
        assert {f"storage/{run_id}", f"history/runs/{run_id}.db"} <= set(_files(tmp_path, run_id))
    before = _shown(instance)
    assert before["broken"][2] == holds_broken and before["mart"][1] == holds_mart

    result = TOY.resolve_job_def(RUN_HISTORY_JOB).execute_in_process(instance=instance)  # the setting's 30 days

    assert result.success
    assert {run_id: _files(tmp_path, run_id) for run_id in deleted} == {run_id: [] for run_id in deleted}
    assert {run_id: instance.get_run_by_id(run_id) for run_id in deleted} == {run_id: None for run_id in deleted}
    kept = [holds_mart, holds_x, holds_y, holds_broken, *unfinished, recent, *newest, result.run_id]
    assert {record.dagster_run.run_id for record in instance.get_run_records()} == set(kept)
    for run_id in [holds_mart, holds_x, holds_y, recent, *newest]:
        assert f"history/runs/{run_id}.db" in _files(tmp_path, run_id)
    assert _shown(instance) == before
    history = instance.event_log_storage.get_asset_check_execution_history(CHECK, limit=100)
    assert {execution.run_id for execution in history} == {holds_mart, recent, *newest}  # each ran the check
    said = [entry.user_message for entry in instance.all_logs(result.run_id) if "run history:" in entry.user_message]
    assert len(said) == 1 and "3 finished run(s)" in said[0] and "4 as old kept" in said[0], said


def test_a_retention_of_0_keeps_what_is_in_progress_and_never_keeps_every_run(instance: dg.DagsterInstance) -> None:
    first, second = _run(instance, source_table), _run(instance, source_table)
    unfinished = _unfinished(instance)
    assert run_history.prune_runs(instance, None).deleted == ()
    assert len(instance.get_run_records()) == 2 + len(unfinished)
    later = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1)
    pruned = run_history.prune_runs(instance, dt.timedelta(0), now=later)
    assert pruned.deleted == (first,)
    assert {record.dagster_run.run_id for record in instance.get_run_records()} == {second, *unfinished}


def test_the_pruning_is_scheduled_daily_in_the_definitions(monkeypatch: pytest.MonkeyPatch) -> None:
    repo = defs.get_repository_def()
    schedule = repo.get_schedule_def("dagster_history_daily")
    assert (schedule.job_name, schedule.cron_schedule, schedule.execution_timezone) == (
        RUN_HISTORY_JOB, "0 4 * * *", "UTC")
    assert schedule.default_status == jobs.default_schedule_status()
    job = defs.resolve_job_def(RUN_HISTORY_JOB)
    assert job.executor_def.name == dg.in_process_executor.name
    assert not job.tags.get("freight/warehouse_writer")  # it writes no warehouse: no schedule skips for it


@pytest.mark.parametrize("minutes", [-1, MAX_MINUTES + 1, 2**63])
def test_a_retention_the_launchpad_asks_beyond_the_setting_s_bounds_is_refused_by_name(
        instance: dg.DagsterInstance, minutes: int) -> None:
    """The launchpad's ``retention_minutes`` is bounded as the setting is (0 to a hundred years): a larger one failed
    the op with a traceback (``OverflowError: date value out of range``)."""
    job = TOY.resolve_job_def(RUN_HISTORY_JOB)
    config = {"ops": {"prune_run_history": {"config": {"retention_minutes": minutes}}}}
    try:
        result = job.execute_in_process(instance=instance, run_config=config, raise_on_error=False)
    except dg.DagsterInvalidConfigError as refused:  # refused by Dagster's own Int before the run
        said = str(refused)
    else:
        (failure,) = [event for event in result.all_events if event.is_step_failure]
        said = str(failure.step_failure_data.error.message) + str(failure.step_failure_data.error.cause)
    assert "retention_minutes" in said and ("OverflowError" not in said and "too large to convert" not in said), said
