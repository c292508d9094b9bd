"""The rebuild in Dagster: ``freight_rebuild_job``, one op that runs the engine's rebuild
(``job.run.run_rebuild``: the ``freight`` tables but the E-Files re-derived from the raw records held, no request to the
service; the checks, a full build of the marts, the publish), as ``freight-pipeline rebuild`` does.

Started by hand (no schedule), after a source alias was added (docs/real-services.md, "When the service
changes shape"). Tagged as a writer of the warehouse, so the schedules skip their ticks while it runs.
Each step is logged as it ends; the publish is recorded as a materialization of the published warehouse.
"""

from collections.abc import Iterator
from contextlib import ExitStack

import dagster as dg

from freight_pipeline.config import CONCERNS
from freight_pipeline.defs.freight_job import PUBLISH_KEY, log_alerted
from freight_pipeline.defs.names import REBUILD_JOB
from freight_pipeline.defs.resources import WarehouseResource
from freight_pipeline.defs.sync_assets import metadata_value
from freight_pipeline.defs.writer_claim import WRITER_TAG, writer_claim
from freight_pipeline.job.run import FAILED_STEP, Alerting, Step, run_rebuild
from freight_pipeline.marts.worker import DbtWorker
from freight_pipeline.sync.settings import SyncSettings
from freight_pipeline.warehouse.writer_lock import WarehouseBusy


class RebuildConfig(dg.Config):
    """What the launchpad may ask of a rebuild."""

    everything: bool = False
    """Re-derive every shipment, not only those whose raw names a source key the mapping's change touched
    (``freight-pipeline rebuild --all``)."""


@dg.op(out={}, description="The freight tables re-derived from the raw records held (no request to the service): "
                   "the shipments the mapping's change since they were derived can touch, or every one "
                   "(config everything); the warehouse checks, a full build of the marts, the publish.")
def freight_rebuild(context: dg.OpExecutionContext, config: RebuildConfig,
                    warehouse: WarehouseResource) -> Iterator[dg.AssetMaterialization]:
    backend = warehouse.backend
    if backend.working_database_missing(warehouse.path):  # a rebuild would publish an empty warehouse
        raise dg.Failure(description=f"{warehouse.path} holds no working database: nothing was synced there to "
                                     "rebuild from (FREIGHT_DATA_DIR); nothing made there and nothing published",
                         allow_retries=False)

    def ended(step: Step) -> None:
        for line in step.lines():
            (context.log.error if step.status == "failed" else context.log.info)(line)

    context.log.info(f"rebuild of {backend.describe(warehouse.path)} from its raw records")
    settings = warehouse.settings(reads=CONCERNS)  # every one it reads (the sync's tuning too): a bad one refused
    with ExitStack() as claimed:
        try:  # told to Dagster once held (a schedule's tick reads it); the engine takes it again for this run at once
            claimed.enter_context(writer_claim(context.instance, context.run_id, warehouse.path))
        except WarehouseBusy as busy:  # a run outside Dagster writes the warehouse (a headless sync from cron)
            raise dg.Failure(description=f"skipped: {busy}", allow_retries=False) from None
        worker = claimed.enter_context(DbtWorker.for_run(warehouse.path, backend.dbt_target, settings.marts,
                                                           target_env=backend.dbt_environment()))
        report = run_rebuild(warehouse.path, SyncSettings.of(settings.sync), backend, worker,
                             run_id=context.run_id, progress=context.log.debug, on_step=ended,
                             everything=config.everything, alerting=Alerting.of(settings, dagster_run=True))
    log_alerted(context.log, report.alerted)
    if report.publication is not None:
        yield dg.AssetMaterialization(asset_key=PUBLISH_KEY, metadata={
            name: metadata_value(value) for name, value in report.publication.metadata().items()})
    if report.skipped:  # a run outside Dagster writes the warehouse (a headless sync from cron)
        raise dg.Failure(description=f"skipped: {report.skipped}", allow_retries=False)
    if report.failed:
        first = report.failed[0]
        raise dg.Failure(description=first.line, metadata={FAILED_STEP: first.name}, allow_retries=False)


@dg.job(name=REBUILD_JOB, tags=WRITER_TAG, executor_def=dg.in_process_executor,
        description="Rebuild the freight tables from the raw records held (after a mapping fix), build the "
                    "marts in full, publish: no request to the service.")
def freight_rebuild_job() -> None:
    freight_rebuild()
