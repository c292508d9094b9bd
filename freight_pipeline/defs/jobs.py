"""Jobs and schedules: selections of the one multi-asset ``freight_job`` (``defs.freight_job``), run in
one process (DuckDB: one writer).

A schedule skips its tick while a run of either job is queued or running, or a run outside Dagster (a
headless sync from cron) holds the warehouse's writer lock: they write the same working database, and an
overlapping run would only fail, skipped. When the run queue starts one run at a time (``make ui``'s instance), a
tick is skipped only by a run of its own job: its run waits in the queue behind another job's, so that the two
schedules due at 03:00 (whichever Dagster evaluates first) both run, each day. A run whose process is gone is marked
failed first (``writer_claim.writer_runs_in_progress``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import dagster as dg

from freight_pipeline.config import ScheduleSettings, load_settings
from freight_pipeline.defs.freight_job import DBT, PUBLISH_KEY, freight_job
from freight_pipeline.defs.names import CODE_CONVERSIONS_JOB, FREIGHT_SYNC_JOB
from freight_pipeline.defs.resources import WarehouseResource
from freight_pipeline.defs.run_history import dagster_history_job
from freight_pipeline.defs.sync_assets import stream_keys
from freight_pipeline.defs.writer_claim import WRITER_TAG, writer_runs_in_progress
from freight_pipeline.sync.streams import CODE_CONVERSIONS
from freight_pipeline.warehouse.writer_lock import Holder, lock_state

if TYPE_CHECKING:  # what define_asset_job returns; not exported by dagster
    from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition

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
    return load_settings(reads=(ScheduleSettings,)).schedules.schedules_running  # a look: the definitions load


def default_schedule_status() -> dg.DefaultScheduleStatus:
    return dg.DefaultScheduleStatus.RUNNING if automation_running() else dg.DefaultScheduleStatus.STOPPED


def default_sensor_status() -> dg.DefaultSensorStatus:
    return dg.DefaultSensorStatus.RUNNING if automation_running() else dg.DefaultSensorStatus.STOPPED


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
