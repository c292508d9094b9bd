"""Lake mode's Dagster definitions: the partitioned backfill of the first full sync, and maintenance.

Present only when the settings name a lake (``definitions.py``). The backfill asset has one
partition per shipment id range (the setting ``backfill_id_boundaries``); each partition is its own run,
so a Dagster backfill of all of them runs as many writers at once as the run coordinator allows
(``max_concurrent_runs``), on one machine or, with a Kubernetes or Celery launcher, on many.
"""

import dataclasses
from typing import TYPE_CHECKING

import dagster as dg

from freight_pipeline.config import LAKE_CATALOG_URI_ENV, LAKE_DATA_URI_ENV, LakeConfig
from freight_pipeline.defs.jobs import WRITER_TAG, default_schedule_status
from freight_pipeline.defs.names import BACKFILL_JOB, MAINTENANCE_JOB
from freight_pipeline.defs.resources import FreightServiceResource, WarehouseResource
from freight_pipeline.defs.sync_assets import metadata_value, stream_metadata
from freight_pipeline.lake.backend import LakeBackend
from freight_pipeline.sync.backfill import IdRange, backfill_plan
from freight_pipeline.sync.progress import Throttled
from freight_pipeline.sync.runner import run_stream
from freight_pipeline.sync.shipments import STREAM as SHIPMENTS
from freight_pipeline.warehouse.backend import StorageBackend
from freight_pipeline.warehouse.writer_lock import WarehouseBusy, partition_lock, writer_lock

if TYPE_CHECKING:  # what define_asset_job returns; not exported by dagster
    from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition

LAKE_GROUP = "lake"


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
        backend = lake_backend(warehouse, "the backfill writes a lake")
        id_range = IdRange.parse(context.partition_key)
        settings = freight_service.sync_settings().replaced(
            id_range=id_range, backfill_plan=plan, fetch_batch_size=warehouse.settings().lake.backfill_batch_size)
        try:
            with writer_lock(warehouse.path, context.run_id, name=partition_lock(id_range.key)):
                result = run_stream(SHIPMENTS, freight_service.service_settings(), warehouse.path, settings,
                                    run_id=context.run_id, progress=Throttled(context.log.info, 15.0),
                                    backend=backend)
        except WarehouseBusy as busy:  # both would append the partition's shipments, neither seeing the other's
            raise dg.Failure(description=f"partition {id_range.key} is being written by another run "
                                         f"({busy.holder.describe()}): a partition runs once at a time",
                             allow_retries=False) from None
        context.log.info(f"partition {id_range.key}: read {result.rows_read}, wrote {result.rows_written} rows "
                         f"in {result.requests} requests")
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


@dg.op(description="DuckLake compaction and snapshot expiry (never the published snapshot).")
def lake_maintenance(context: dg.OpExecutionContext, warehouse: WarehouseResource) -> None:
    retention = warehouse.settings().lake.lake_retention
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


@dataclasses.dataclass(frozen=True)
class LakeDefinitions:
    """What lake mode adds to the ``Definitions``; empty in the embedded default."""

    assets: tuple[dg.AssetsDefinition, ...] = ()
    jobs: "tuple[dg.JobDefinition | UnresolvedAssetJobDefinition, ...]" = ()
    schedules: tuple[dg.ScheduleDefinition, ...] = ()


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
    return LakeDefinitions((backfill_asset,), (backfill_job, lake_maintenance_job), (lake_maintenance_schedule,))
