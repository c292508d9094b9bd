"""Dagster's run history kept bounded: ``dagster_history_job`` deletes the finished runs older than the setting
``run_history_retention_minutes`` (30 days; scheduled daily at 04:00 UTC by ``dagster_history_daily``, ``defs.jobs``).

Dagster never deletes a run by itself, and each run of the freight job leaves some 2.3 MB in ``$DAGSTER_HOME``: its
shard of the event log (``history/runs/<run id>.db``), its rows of the index (``history/runs/index.db``) and its
compute logs (``storage/<run id>/``), some 215 MB a day at a run every 15 minutes. A run is deleted with
``DagsterInstance.delete_run`` (its record and its events: with the project's event log storage its shard's file and
its asset check executions as well, ``commands/dagster_storage.py``) and the compute log manager's ``delete_logs``.

Never deleted, whatever their age:

- a run that has not finished (queued, starting, running, canceling): only runs that succeeded, failed or were
  canceled are deleted, and only once they ended before the cutoff;
- a run holding an event the UI shows as an asset's or a check's current state: each asset's latest materialization
  and observation (of each partition too), its latest planned materialization and latest failed one (what shows it
  failed or in progress), and each check's latest execution and latest completed evaluation. ``delete_run`` of such a
  run would not even take the event from Dagster's asset records (they keep a copy): the asset would show a latest
  materialization, with its data version, whose run and events are gone, and an event history that ends earlier.
"""

import datetime as dt
from dataclasses import dataclass

import dagster as dg
from dagster._core.storage.event_log.schema import AssetCheckExecutionsTable
from dagster._core.storage.event_log.sql_event_log import SqlEventLogStorage
from pydantic import Field
from sqlalchemy import select

from freight_pipeline.config import MAX_MINUTES, ScheduleSettings
from freight_pipeline.defs.names import RUN_HISTORY_JOB

FINISHED = (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)
"""The statuses of a run that may be deleted: it ended."""


@dataclass(frozen=True)
class Pruned:
    """What one pruning did: the runs deleted, and the runs as old kept for holding a latest event."""

    cutoff: dt.datetime | None
    """Runs that ended before this were looked at; None: the retention is ``never``, nothing was."""
    deleted: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()

    def summary(self) -> str:
        if self.cutoff is None:
            return "run history: every run kept (run_history_retention_minutes is never)"
        return (f"run history: {len(self.deleted)} finished run(s) that ended before {self.cutoff:%Y-%m-%d %H:%M} UTC "
                f"deleted, {len(self.kept)} as old kept: each holds an asset's or a check's latest event")


def stored_check_keys(instance: dg.DagsterInstance) -> set[dg.AssetCheckKey]:
    """Every check with an execution stored (whether the definitions still hold it or not: the UI shows what the
    storage holds of each)."""
    storage = instance.event_log_storage
    if not isinstance(storage, SqlEventLogStorage) or not storage.has_table(AssetCheckExecutionsTable.name):
        return set()
    table = AssetCheckExecutionsTable
    with storage.index_connection() as conn:
        rows = conn.execute(select(table.c.asset_key, table.c.check_name).distinct()).fetchall()
    return {dg.AssetCheckKey(asset_key, name) for text, name in rows
            if (asset_key := dg.AssetKey.from_db_string(text)) is not None}


def latest_event_runs(instance: dg.DagsterInstance) -> set[str]:
    """The runs holding each asset's latest materialization, observation, planned and failed materialization (each
    partition's too) and each check's latest execution and latest completed evaluation."""
    storage = instance.event_log_storage
    keys = instance.get_asset_keys()
    runs: set[str] = set()
    for record in instance.get_asset_records(keys):
        entry = record.asset_entry
        events = (entry.last_materialization_record, entry.last_observation_record,
                  entry.last_failed_to_materialize_record, entry.last_skipped_materialize_record)
        runs.update(event.run_id for event in events if event is not None)
        runs.update(run_id for run_id in (entry.last_run_id, entry.last_planned_materialization_run_id) if run_id)
    for key in keys:
        for event_type, fetch in ((dg.DagsterEventType.ASSET_MATERIALIZATION, instance.fetch_materializations),
                                  (dg.DagsterEventType.ASSET_OBSERVATION, instance.fetch_observations)):
            by_partition = storage.get_latest_storage_id_by_partition(key, event_type)
            if by_partition:
                latest = fetch(dg.AssetRecordsFilter(asset_key=key, storage_ids=list(by_partition.values())),
                               limit=len(by_partition))
                runs.update(event.run_id for event in latest.records)
        planned = instance.get_latest_planned_materialization_info(key)  # what shows the asset failed or in progress
        if planned is not None:
            runs.add(planned.run_id)
        attempts = storage.get_latest_asset_partition_materialization_attempts_without_materializations(key)
        runs.update(run_id for run_id, _ in attempts.values())
    for summary in storage.get_asset_check_summary_records(list(stored_check_keys(instance))).values():
        executions = (summary.last_check_execution_record, summary.last_completed_check_execution_record)
        runs.update(execution.run_id for execution in executions if execution is not None)
        if summary.last_run_id:
            runs.add(summary.last_run_id)
    return runs


def prune_runs(instance: dg.DagsterInstance, retention: dt.timedelta | None, now: dt.datetime | None = None) -> Pruned:
    """Delete the runs of ``instance`` that finished more than ``retention`` before ``now``, with their events and
    compute logs, but for those holding a latest event (:func:`latest_event_runs`); ``retention`` None: none."""
    if retention is None:
        return Pruned(None)
    cutoff = (now or dt.datetime.now(dt.UTC)) - retention
    records = instance.get_run_records(filters=dg.RunsFilter(statuses=list(FINISHED), created_before=cutoff),
                                       ascending=True)
    old = [record.dagster_run.run_id for record in records
           if (record.end_time if record.end_time is not None else record.update_timestamp.timestamp())
           <= cutoff.timestamp()]
    if not old:
        return Pruned(cutoff)
    holding = latest_event_runs(instance)
    deleted: list[str] = []
    for run_id in old:
        if run_id in holding:
            continue
        # the logs first: a run interrupted here is still listed, and deleted again by the next pruning
        instance.compute_log_manager.delete_logs(prefix=[run_id])
        instance.delete_run(run_id)
        deleted.append(run_id)
    return Pruned(cutoff, tuple(deleted), tuple(run_id for run_id in old if run_id in holding))


class RunHistoryConfig(dg.Config):
    """What the launchpad may ask of a pruning."""

    retention_minutes: int | None = Field(None, ge=0, le=MAX_MINUTES)
    """Delete the finished runs older than this many minutes (``0``: every finished run), but for those holding a
    latest event; unset: the setting ``run_history_retention_minutes``."""


@dg.op(description="Deletes the finished runs older than the retention (run_history_retention_minutes, 30 days; or "
                   "the config's retention_minutes) with their event and compute logs, but for those holding an "
                   "asset's or a check's latest event; never a run in progress or queued.")
def prune_run_history(context: dg.OpExecutionContext, config: RunHistoryConfig) -> None:
    retention = (dt.timedelta(minutes=config.retention_minutes) if config.retention_minutes is not None
                 else ScheduleSettings.configured().run_history_retention)
    pruned = prune_runs(context.instance, retention)
    context.log.info(pruned.summary())


@dg.job(name=RUN_HISTORY_JOB, executor_def=dg.in_process_executor,
        description="Deletes the Dagster runs older than run_history_retention_minutes (30 days), with their event "
                    "and compute logs, but for those holding an asset's or a check's latest event (docs/operations.md, "
                    "Dagster).")
def dagster_history_job() -> None:
    prune_run_history()
