"""Lake mode's Dagster definitions: the partitioned backfill of the first full sync, and maintenance.

Present only when the settings name a lake (``definitions.py``). The backfill asset has one
partition per shipment id range (the setting ``backfill_id_boundaries``); each partition is its own run,
so a Dagster backfill of all of them runs as many writers at once as the run coordinator allows
(``max_concurrent_runs``), on one machine or, with a Kubernetes or Celery launcher, on many.
"""

import dataclasses
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import dagster as dg

from freight_pipeline.alerts.notify import Alerted, after_run
from freight_pipeline.alerts.problems import MAINTENANCE_STEP, Observation, backfill_step, of_bad_records
from freight_pipeline.config import CONCERNS, LAKE_CATALOG_URI_ENV, LAKE_DATA_URI_ENV, BadSettings, LakeConfig, Settings
from freight_pipeline.defs.jobs import default_schedule_status, default_sensor_status
from freight_pipeline.defs.names import BACKFILL_JOB, MAINTENANCE_JOB
from freight_pipeline.defs.resources import FreightServiceResource, WarehouseResource, run_settings
from freight_pipeline.defs.sync_assets import metadata_value, stream_metadata
from freight_pipeline.defs.writer_claim import PARTITION_TAG, WRITER_TAG
from freight_pipeline.lake.backend import LakeBackend
from freight_pipeline.sync.backfill import IdRange, backfill_plan
from freight_pipeline.sync.progress import Throttled
from freight_pipeline.sync.result import StreamResult
from freight_pipeline.sync.runner import one_line_error, run_stream
from freight_pipeline.sync.settings import SyncSettings
from freight_pipeline.sync.shipments import STREAM as SHIPMENTS
from freight_pipeline.warehouse.backend import StorageBackend
from freight_pipeline.warehouse.writer_lock import WarehouseBusy, partition_lock, writer_lock

if TYPE_CHECKING:  # what define_asset_job returns; not exported by dagster
    from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition

LAKE_GROUP = "lake"
ALERTS_SENSOR = "lake_alerts_sensor"
LOOKED = "alerts:"
"""How each line of a lake run's own look at its problems begins (:func:`alerted_run`), in its Dagster log: the
sensor (:func:`build_lake_alerts_sensor`) looks at a failed run only when the run did not (its process died)."""


@dataclasses.dataclass
class LakeStep:
    """A run of a lake job as the alerts read a step of a run (``alerts.problems.RunStep``)."""

    name: str
    status: str
    line: str
    checks: list[Any] = dataclasses.field(default_factory=list)
    off: bool = False
    unreachable: bool = False


def alert(warehouse: WarehouseResource, run_id: str, step: LakeStep, found: Observation | None = None) -> str:
    """The lake run's ``step`` (and what else it ``found``) recorded and sent where the main job's problems go
    (``alerts.notify.after_run``), its sends waited for; the line saying what was done. Never raises."""
    try:
        settings = warehouse.settings(reads=CONCERNS)  # as a run reads them: none set aside (a data directory's)
        alerted = after_run([step], run_id, warehouse.path, warehouse.backend, settings.alerts,
                            settings.schedules.max_sync_age, dagster_run=True, found=found, ensure_schema=True)
    except Exception as exc:  # bad settings, the catalog down: said, never raised over the run's own failure
        alerted = Alerted(f"{LOOKED} the run's problems could not be looked at ({one_line_error(exc)})")
    if alerted is None:
        return f"{LOOKED} none sent: no alert destination is set"
    if alerted.dispatch is not None:
        alerted.dispatch.join()  # each send is bounded by alert_timeout_seconds
    return alerted.line


def checked(settings: Callable[[], Settings]) -> Settings:
    """``settings()``, read as a run reads them (every concern: what the settings file holds of no concern refused,
    not set aside as a look sets it: a data directory left at its default); a bad one fails the run naming it."""
    try:
        return settings()
    except BadSettings as bad:
        raise dg.Failure(description=f"bad settings: {bad}", allow_retries=False) from None


@contextmanager
def alerted_run(log: Callable[[str], None], warehouse: WarehouseResource, run_id: str,
                step: str) -> Iterator[list[Observation]]:
    """The block is the lake run's ``step``: its failure (re-raised) or its success, with what the block appends
    to the list yielded (records it rejected), alerted at its end; the line said to ``log``."""
    found: list[Observation] = []
    try:
        yield found
    except dg.Failure as failure:
        log(alert(warehouse, run_id, LakeStep(step, "failed", failure.description or "failed")))
        raise
    except Exception as exc:  # not an interruption (a BaseException): a run terminated is no problem, as the main job's
        log(alert(warehouse, run_id, LakeStep(step, "failed", one_line_error(exc))))
        raise
    seen = Observation()
    for each in found:
        seen.merge(each)
    log(alert(warehouse, run_id, LakeStep(step, "success", "succeeded"), seen))


def build_backfill(plan: tuple[IdRange, ...]) -> tuple[dg.AssetsDefinition, "UnresolvedAssetJobDefinition"]:
    partitions = dg.StaticPartitionsDefinition([r.key for r in plan])

    @dg.asset(
        key=dg.AssetKey(["freight", "shipments_backfill"]),
        partitions_def=partitions,
        group_name=LAKE_GROUP,
        kinds={"ducklake", "python"},
        description="The first full sync of the shipments stream (with events, legs and memos), one "
        "partition per shipment id range, each under its own cursor; the incremental sync takes over "
        "once every partition has completed, from the lowest ceiling they reached.",
    )
    def shipments_backfill(
        context: dg.AssetExecutionContext, freight_service: FreightServiceResource, warehouse: WarehouseResource
    ) -> dg.MaterializeResult:
        step = backfill_step(context.partition_key)
        configured = checked(lambda: run_settings(freight_service, warehouse))  # before the data directory is used
        try:
            with writer_lock(warehouse.path, context.run_id, name=partition_lock(context.partition_key)), \
                    alerted_run(context.log.info, warehouse, context.run_id, step) as found:
                result = _backfill_partition(context, configured, warehouse, plan)
                bad = result.bad_records() or (f"{result.rejected} records rejected (freight_meta.rejected_records)"
                                               if result.rejected else None)
                if bad:
                    found.append(of_bad_records(step, bad))
        except WarehouseBusy as busy:  # both would append the partition's shipments, neither seeing the other's
            context.log.info(f"{LOOKED} none: the run writing the partition says what it meets")
            raise dg.Failure(description=f"partition {context.partition_key} is being written by another run "
                                         f"({busy.holder.describe()}): a partition runs once at a time",
                             allow_retries=False) from None
        context.log.info(f"partition {context.partition_key}: read {result.rows_read}, wrote "
                         f"{result.rows_written} rows in {result.requests} requests")
        return dg.MaterializeResult(metadata=stream_metadata(result, None))

    job = dg.define_asset_job(
        BACKFILL_JOB,
        selection=dg.AssetSelection.assets(shipments_backfill),
        partitions_def=partitions,
        tags=WRITER_TAG,
        description="One partition of the first full sync into the lake; launch a backfill of all "
        "partitions to run them side by side.",
    )
    return shipments_backfill, job


def _backfill_partition(context: dg.AssetExecutionContext, configured: Settings, warehouse: WarehouseResource,
                        plan: tuple[IdRange, ...]) -> StreamResult:
    """The shipments stream of the run's partition, into the lake, with the run's ``configured`` settings."""
    backend = lake_backend(warehouse, "the backfill writes a lake")
    id_range = IdRange.parse(context.partition_key)
    settings = SyncSettings.of(configured.sync).replaced(
        id_range=id_range, backfill_plan=plan, fetch_batch_size=configured.lake.backfill_batch_size)
    return run_stream(SHIPMENTS, configured.service, warehouse.path, settings,
                      run_id=context.run_id, progress=Throttled(context.log.info, 15.0), backend=backend)


@dg.op(description="DuckLake compaction and snapshot expiry (never the published snapshot).")
def lake_maintenance(context: dg.OpExecutionContext, warehouse: WarehouseResource) -> None:
    configured = checked(lambda: warehouse.settings(reads=CONCERNS))  # before the data directory is used
    with alerted_run(context.log.info, warehouse, context.run_id, MAINTENANCE_STEP):
        retention = configured.lake.lake_retention
        done = lake_backend(warehouse, "lake maintenance needs a lake").maintain(warehouse.path, retention,
                                                                               context.run_id)
    context.log.info(done.summary())
    context.add_output_metadata({name: metadata_value(value) for name, value in done.metadata().items()})


@dg.job(name=MAINTENANCE_JOB, description="Compaction of small files and expiry of old snapshots of the lake.")
def lake_maintenance_job() -> None:
    lake_maintenance()


lake_maintenance_schedule = dg.ScheduleDefinition(
    name="lake_maintenance_daily",
    cron_schedule="30 2 * * *",
    job=lake_maintenance_job,
    execution_timezone="UTC",
    default_status=default_schedule_status(),
    description="Daily at 02:30 UTC: DuckLake compaction and snapshot expiry.",
)


def build_lake_alerts_sensor(jobs: "tuple[dg.JobDefinition | UnresolvedAssetJobDefinition, ...]"
                             ) -> dg.SensorDefinition:
    """A failed run of the lake's ``jobs`` that did not look at its problems itself (its process died: killed, out
    of memory; or it failed before its step began) alerted as its step would have been."""

    @dg.run_failure_sensor(name=ALERTS_SENSOR, monitored_jobs=list(jobs), default_status=default_sensor_status(),
                           description="Alerts a backfill partition's or the lake maintenance's failure that "
                           "the run did not alert itself (its process died) (docs/operations.md, Alerts).")
    def lake_alerts_sensor(context: dg.RunFailureSensorContext) -> None:
        run = context.dagster_run
        if any(entry.user_message.startswith(LOOKED) for entry in context.instance.all_logs(run.run_id)):
            return  # the run said what it did with its problems
        partition = run.tags.get(PARTITION_TAG)
        step = backfill_step(partition) if partition is not None else MAINTENANCE_STEP
        failures = [event.step_failure_data.error.message if event.step_failure_data.error else event.message
                    for event in context.get_step_failure_events()]
        line = _first_line(next((f for f in failures if f), context.failure_event.message or "the run failed"))
        configured = run.run_config.get("resources", {}).get("warehouse", {}).get("config", {})
        try:  # the run's own warehouse config: a run of the demo (no destination) alerts nowhere here either
            warehouse = WarehouseResource(**configured)
        except Exception as exc:  # a value the sensor cannot read as the run did (an EnvVar of another process)
            context.log.warning(f"{LOOKED} run {run.run_id} not looked at: its warehouse config is unreadable "
                                f"here ({type(exc).__name__})")
            return
        context.log.info(alert(warehouse, run.run_id, LakeStep(step, "failed", line)))

    return lake_alerts_sensor


def _first_line(text: str) -> str:
    """A failure's text on one line (its first)."""
    return text.strip().splitlines()[0] if text.strip() else text


@dataclasses.dataclass(frozen=True)
class LakeDefinitions:
    """What lake mode adds to the ``Definitions``; empty in the embedded default."""

    assets: tuple[dg.AssetsDefinition, ...] = ()
    jobs: "tuple[dg.JobDefinition | UnresolvedAssetJobDefinition, ...]" = ()
    schedules: tuple[dg.ScheduleDefinition, ...] = ()
    sensors: tuple[dg.SensorDefinition, ...] = ()


def lake_backend(warehouse: WarehouseResource, needs: str) -> LakeBackend:
    """The resource's storage, which must be a lake (RuntimeError saying what ``needs`` one otherwise)."""
    backend = warehouse.backend
    if not isinstance(backend, LakeBackend):
        raise RuntimeError(f"{needs}: set {LAKE_CATALOG_URI_ENV} and {LAKE_DATA_URI_ENV}")
    return backend


def lake_definitions(backend: StorageBackend, lake: LakeConfig) -> LakeDefinitions:
    """The backfill (partitioned as ``lake`` says) and maintenance when ``backend`` is a lake, nothing otherwise."""
    if not isinstance(backend, LakeBackend):
        return LakeDefinitions()
    backfill_asset, backfill_job = build_backfill(backfill_plan(lake))
    jobs = (backfill_job, lake_maintenance_job)
    return LakeDefinitions((backfill_asset,), jobs, (lake_maintenance_schedule,), (build_lake_alerts_sensor(jobs),))
