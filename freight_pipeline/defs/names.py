"""The Dagster jobs' names, in a module that does not import Dagster: the commands name a job, and decide
whether its run takes the warehouse's writer lock, before they load Dagster."""

from __future__ import annotations

FREIGHT_SYNC_JOB = "freight_sync_job"
CODE_CONVERSIONS_JOB = "code_conversions_job"
REBUILD_JOB = "freight_rebuild_job"
BACKFILL_JOB = "freight_backfill_job"
MAINTENANCE_JOB = "lake_maintenance_job"
BESIDE_WRITERS = frozenset({BACKFILL_JOB, MAINTENANCE_JOB})
"""The jobs whose runs take no writer lock (``warehouse.writer_lock``): the lake's backfill partitions write
at once by design, and its maintenance runs beside writers (each step its own transaction)."""
ASSET_GRAPH_JOB = "__ASSET_JOB"
"""The job of a run launched from Dagster's asset graph (its Materialize button; Dagster's own name, a test compares):
untagged, it writes the warehouse as the sync job's runs do."""
RUN_HISTORY_JOB = "dagster_history_job"
"""The job that deletes the Dagster runs older than the retention (``defs.run_history``)."""
