"""Jobs and schedules: selections of the one multi-asset ``freight_job`` (``defs.freight_job``), run in
one process (DuckDB: one writer).

A schedule skips its tick while a run of either job is queued or running, or a run outside Dagster (a
headless sync from cron) holds the warehouse's writer lock: they write the same working database, and an
overlapping run would only fail, skipped. When the run queue starts one run at a time (``make ui``'s instance), a
tick is skipped only by a run of its own job: its run waits in the queue behind another job's, so that the two
schedules due at 03:00 (whichever Dagster evaluates first) both run, each day.

A run whose process is gone (killed, out of memory) is marked failed by the next tick, which then runs: Dagster alone
would show it running for ever, and every later tick would skip. Gone: the lock's file names it while nothing holds
the lock (it died writing); or it took the lock (it tags itself so: ``writer_claim``) and another run took it since,
or it let go and its process ended, however long ago (not a lake's backfill partition's run: it holds its
partition's lock, not this one). A run that never said it took the lock (killed before, an older version's) is gone
when another run took the lock :data:`TAKEN_OVER_AFTER` after it began, and let go.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import TYPE_CHECKING

import dagster as dg

from freight_pipeline.config import ScheduleSettings
from freight_pipeline.defs.freight_job import DBT, PUBLISH_KEY, freight_job
from freight_pipeline.defs.names import ASSET_GRAPH_JOB, CODE_CONVERSIONS_JOB, FREIGHT_SYNC_JOB
from freight_pipeline.defs.resources import WarehouseResource
from freight_pipeline.defs.run_history import dagster_history_job
from freight_pipeline.defs.sync_assets import stream_keys
from freight_pipeline.defs.writer_claim import claim_of, process_gone
from freight_pipeline.sync.streams import CODE_CONVERSIONS
from freight_pipeline.warehouse.writer_lock import Holder, last_taker, lock_state

if TYPE_CHECKING:  # what define_asset_job returns; not exported by dagster
    from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition

WRITER_TAG = {"freight/warehouse_writer": "true"}
"""Tag of every run that writes the working database (what the schedules look for)."""
ACTIVE_STATUSES = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]


def _job(name: str, selection: dg.AssetSelection, description: str) -> UnresolvedAssetJobDefinition:
    return dg.define_asset_job(
        name, selection=selection, description=description, executor_def=dg.in_process_executor, tags=WRITER_TAG
    )


freight_sync_job = _job(
    FREIGHT_SYNC_JOB,
    dg.AssetSelection.assets(freight_job),
    "Incremental sync of every stream, the warehouse checks, the dbt build, then publish.",
)
code_conversions_job = _job(
    CODE_CONVERSIONS_JOB,
    dg.AssetSelection.assets(*stream_keys(CODE_CONVERSIONS.name), *DBT.keys.values(), PUBLISH_KEY),
    # the whole dbt build, not only the models on code conversions: a publish must only ever ship
    # marts of one complete, successful build
    "Full refresh of the code conversions, the warehouse checks, the whole dbt build, then publish.",
)


def automation_running() -> bool:
    """Schedules and sensors start switched on when the setting ``schedules_running`` says so (``make ui``)."""
    return ScheduleSettings.configured().schedules_running


def default_schedule_status() -> dg.DefaultScheduleStatus:
    return dg.DefaultScheduleStatus.RUNNING if automation_running() else dg.DefaultScheduleStatus.STOPPED


def default_sensor_status() -> dg.DefaultSensorStatus:
    return dg.DefaultSensorStatus.RUNNING if automation_running() else dg.DefaultSensorStatus.STOPPED


TAKEN_OVER_AFTER = dt.timedelta(minutes=5)
"""A run Dagster holds running that never said it took the writer lock (no claim: ``writer_claim``) is dead when
another run took the lock this long after the run started (or was made, when Dagster has no start), and let go: a
live run takes the lock within seconds of its start (or ends, skipped, when another holds it). Not a lake's backfill
partition's run: it holds a lock of its partition's, and others take the writer lock meanwhile."""
PARTITION_TAG = "dagster/partition"
"""Dagster's tag of a partitioned run (a lake's backfill partition's): the partition it runs."""


def writer_runs_in_progress(instance: dg.DagsterInstance, data_dir: Path | None = None) -> list[dg.DagsterRun]:
    """The runs writing the warehouse that are queued or running (the writer jobs', and the asset graph's); one that
    Dagster holds running but whose process is gone (:func:`_gone`, by ``data_dir``'s writer lock) is reported failed,
    and is not one of them."""
    records = [*instance.get_run_records(filters=dg.RunsFilter(tags=WRITER_TAG, statuses=ACTIVE_STATUSES), limit=5),
               *instance.get_run_records(filters=dg.RunsFilter(job_name=ASSET_GRAPH_JOB, statuses=ACTIVE_STATUSES),
                                         limit=5)]
    held, holder = lock_state(data_dir) if data_dir is not None and records else (True, Holder())
    taker = holder if held or data_dir is None or holder.run_id else last_taker(data_dir)
    busy = []
    for record in records:
        run = record.dagster_run
        started = data_dir is not None and run.status == dg.DagsterRunStatus.STARTED
        gone = _gone(record, held, holder, taker) if started else None
        if gone is not None:
            instance.report_run_failed(run, f"{gone}: killed, or out of memory; the next run goes on from its last "
                                            "batch")
        else:
            busy.append(run)
    return busy


def _gone(record: dg.RunRecord, held: bool, holder: Holder, taker: Holder) -> str | None:
    """Why the run of ``record``, which Dagster holds running, is dead (None: nothing says so), by the writer lock:
    whether a live process holds it (``held``), the run its file names as holding it (``holder``) and the run that
    took it last (``taker``: the holder, else the one that let go of it last)."""
    run = record.dagster_run
    if run.run_id == holder.run_id:
        return None if held else f"its process died while it wrote the warehouse ({holder.describe()})"
    if PARTITION_TAG in run.tags:  # it holds a lock of its partition's: what others took says nothing of it
        return None
    claim = claim_of(run)
    if claim is not None:  # it took the lock, and holds it no more
        if taker.run_id is not None and taker.run_id != run.run_id:  # the file names the last to take it: after it
            return (f"its process is gone: it held the warehouse's writer lock ({claim.describe()}), and another run "
                    f"took it since ({taker.describe()}{'' if held else ', and let go'})")
        if taker.run_id == run.run_id and not held and process_gone(claim):  # it let go: ending, or died since
            return f"its process is gone: it let go of the warehouse's writer lock ({claim.describe()}), and ended"
        return None
    if held:  # a run that never told it took the lock: judged only once the lock is free
        return None
    try:
        taken = dt.datetime.fromisoformat(taker.since) if taker.since else None
    except ValueError:
        return None
    # since it started (a queued run is made long before): since it was made when Dagster has no start
    began = dt.datetime.fromtimestamp(record.start_time, dt.UTC) if record.start_time else record.create_timestamp
    if taken is not None and taken.replace(tzinfo=taken.tzinfo or dt.UTC) > began + TAKEN_OVER_AFTER:
        return ("its process is gone: another run took the warehouse's writer lock since, and let go "
                f"({taker.describe()})")
    return None


def runs_one_at_a_time(instance: dg.DagsterInstance) -> bool:
    """Whether the instance's run queue starts one run at a time (a ``QueuedRunCoordinator`` with
    ``max_concurrent_runs: 1``, as ``make ui``'s): a run requested while another writes the warehouse waits in the
    queue behind it rather than colliding on the writer lock."""
    coordinator = instance.run_coordinator
    return isinstance(coordinator, dg.QueuedRunCoordinator) and \
        coordinator.get_run_queue_config().max_concurrent_runs == 1


def build_schedule(name: str, cron: str, job_name: str, description: str) -> dg.ScheduleDefinition:
    """A schedule of ``job_name`` that skips its tick while a run writes the warehouse: a run of ``job_name`` always,
    another job's run only when the run queue does not start one run at a time (else its run waits behind it)."""
    @dg.schedule(
        name=name,
        cron_schedule=cron,
        job_name=job_name,
        execution_timezone="UTC",
        default_status=default_schedule_status(),
        description=description,
    )
    def _schedule(context: dg.ScheduleEvaluationContext, warehouse: WarehouseResource) -> dg.RunRequest | dg.SkipReason:
        busy = writer_runs_in_progress(context.instance, warehouse.path)
        queued = runs_one_at_a_time(context.instance)
        if queued:
            busy = [run for run in busy if run.job_name == job_name]
        if busy:
            return dg.SkipReason("a run writing the warehouse is still in progress: "
                                 f"{', '.join(run.run_id for run in busy)}")
        held, holder = lock_state(warehouse.path)
        if held and not holder.brief and not (queued and runs_in_dagster(context.instance, holder)):
            # a run outside Dagster (a headless sync from cron); a brief look is waited for
            return dg.SkipReason(f"another run writes {warehouse.path}: {holder.describe()}")
        return dg.RunRequest()

    return _schedule


def runs_in_dagster(instance: dg.DagsterInstance, holder: Holder) -> bool:
    """Whether the writer lock's ``holder`` is a run of this Dagster instance (which the run queue waits for)."""
    return holder.run_id is not None and instance.get_run_by_id(holder.run_id) is not None


schedules: list[dg.ScheduleDefinition] = [
    build_schedule(
        "freight_sync_every_15_minutes",
        "*/15 * * * *",
        FREIGHT_SYNC_JOB,
        "Incremental freight sync, dbt build and publish every 15 minutes.",
    ),
    build_schedule(
        "code_conversions_daily",
        "0 3 * * *",
        CODE_CONVERSIONS_JOB,
        "Daily at 03:00 UTC: full refresh of the code conversions, the whole dbt build, then publish.",
    ),
    dg.ScheduleDefinition(
        name="dagster_history_daily",
        cron_schedule="0 4 * * *",
        job=dagster_history_job,
        execution_timezone="UTC",
        default_status=default_schedule_status(),
        description="Daily at 04:00 UTC: the Dagster runs older than run_history_retention_minutes (30 days) deleted, "
                    "but for those holding an asset's or a check's latest event.",
    ),
]
