"""After a run whose only failures were sync streams: build and publish what the other streams wrote.

A stream is a failure domain of its own: one that fails (an account without the E-File permission,
an endpoint that is down, its breaker opening) must not withhold the other streams' data. Its asset
fails, red, and so does its run. But within a run Dagster skips every step downstream of a failed
one, with no way to let a step go on past a failed upstream (dagster-io/dagster issue 15761), and
the dbt build and the publish are downstream of every stream. So a second run follows:
``freight_build_job`` (the dbt build, the warehouse checks, the publish), tagged with the failed run
and its failed streams. It builds the marts from the working database, where the failed stream's
tables hold the rows of its last successful run (``freight_meta.table_freshness`` says since when),
and publishes; a failed stream holds back no publish (``warehouse.publish``). The failed run stays
FAILURE in Dagster and the failed stream's asset stays red until a run of it succeeds.

Who starts the build run: :data:`build_after_failed_streams`, a run-failure sensor, for runs the
daemon launched (schedules, the UI); ``freight-pipeline sync`` itself for its own runs
(``commands.execute.execute_with_build``), which the sensor leaves alone.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import dagster as dg

from freight_pipeline.defs.jobs import (
    BUILD_AFTER_JOBS,
    code_conversions_job,
    default_sensor_status,
    freight_build_job,
    freight_sync_job,
    writer_runs_in_progress,
)
from freight_pipeline.defs.sync_assets import stream_asset_name
from freight_pipeline.sync.streams import STREAM_NAMES

STREAM_STEPS: dict[str, str] = {stream_asset_name(stream): stream for stream in STREAM_NAMES}
"""Step key of each stream's asset -> the stream."""
AFTER_FAILED_RUN_TAG = "freight/after_failed_run"
FAILED_STREAMS_TAG = "freight/failed_streams"
LAUNCHED_BY_TAG = "freight/launched_by"
CLI_LAUNCHER = "freight-pipeline cli"
"""The ``LAUNCHED_BY_TAG`` of runs ``freight-pipeline`` launches: the command builds after them itself."""


def streams_to_build_after(steps: Mapping[str, str]) -> list[str]:
    """The streams that failed, when a build run should follow: every failed step of the run is a
    stream's and at least one stream succeeded (else there is nothing new to publish). ``steps``:
    step key -> ``success``, ``failed`` or ``skipped``. Empty when no build run should follow."""
    failed = [step for step, status in steps.items() if status == "failed"]
    if not failed or any(step not in STREAM_STEPS for step in failed):
        return []
    if not any(status == "success" for step, status in steps.items() if step in STREAM_STEPS):
        return []
    return sorted(STREAM_STEPS[step] for step in failed)


def build_tags(run_id: str, streams: Collection[str]) -> dict[str, str]:
    """The tags of the build run that follows run ``run_id``, whose ``streams`` failed."""
    return {AFTER_FAILED_RUN_TAG: run_id, FAILED_STREAMS_TAG: ",".join(sorted(streams))}


def step_statuses(instance: dg.DagsterInstance, run_id: str) -> dict[str, str]:
    """Step key -> ``success`` or ``failed``, from the run's event log."""
    kinds = {dg.DagsterEventType.STEP_SUCCESS: "success", dg.DagsterEventType.STEP_FAILURE: "failed"}
    statuses: dict[str, str] = {}
    for kind, status in kinds.items():
        for record in instance.get_records_for_run(run_id, of_type=kind).records:
            step = record.event_log_entry.step_key
            if step is not None:
                statuses[step] = status
    return statuses


@dg.run_failure_sensor(
    name="build_after_failed_streams",
    monitored_jobs=[freight_sync_job, code_conversions_job],
    request_job=freight_build_job,
    default_status=default_sensor_status(),
    description="When a run's only failures are sync streams, a freight_build_job run builds the marts and "
    "publishes what the other streams wrote (a stream is a failure domain; Dagster skips what follows a "
    "failed step within its run).",
)
def build_after_failed_streams(context: dg.RunFailureSensorContext) -> dg.RunRequest | dg.SkipReason:
    run = context.dagster_run
    if run.job_name not in BUILD_AFTER_JOBS:
        return dg.SkipReason(f"run {run.run_id} is of {run.job_name}")
    if run.tags.get(LAUNCHED_BY_TAG) == CLI_LAUNCHER:
        return dg.SkipReason(f"run {run.run_id} was launched by freight-pipeline, which builds after it itself")
    streams = streams_to_build_after(step_statuses(context.instance, run.run_id))
    if not streams:
        return dg.SkipReason(f"run {run.run_id} failed in more than its streams: nothing to build after it")
    busy = writer_runs_in_progress(context.instance)
    if busy:
        return dg.SkipReason(f"a run writing the warehouse is in progress ({', '.join(busy)}); the next "
                             "successful sync builds and publishes")
    return dg.RunRequest(run_key=f"build-after-{run.run_id}", tags=build_tags(run.run_id, streams))
