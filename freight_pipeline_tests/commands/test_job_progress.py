"""``JobProgress`` listening to real in-process Dagster runs, its clock driven by the ops.

(No ``from __future__ import annotations``: Dagster reads the op's ``context`` annotation.)
"""

import uuid

import dagster as dg
import pytest

from freight_pipeline.commands.job_progress import JobOutcome, JobProgress
from freight_pipeline.sync.progress import Tally, tally_line
from freight_pipeline.sync.streams import STREAM_NAMES


class Clock:
    """A monotonic clock the test sets; JobProgress reads it (the listener runs inside the op's call)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _run(job: dg.JobDefinition, progress: JobProgress) -> dg.ExecuteInProcessResult:
    with dg.DagsterInstance.ephemeral() as instance:
        instance.add_event_listener(progress.outcome.run_id, progress.on_event)
        return job.execute_in_process(
            instance=instance, run_id=progress.outcome.run_id, raise_on_error=False,
            run_config={"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}},
        )


def _progress(verbose: bool, clock: Clock) -> tuple[JobProgress, list[str]]:
    lines: list[str] = []
    return JobProgress(JobOutcome("j", str(uuid.uuid4())), lines.append, verbose, clock=clock), lines


@pytest.mark.parametrize("verbose", [False, True])
def test_the_engines_lines_are_said_as_they_are_its_progress_only_when_verbose(verbose: bool) -> None:
    """The op logs the engine's step lines at INFO (ERROR for a failed step) and its progress at DEBUG:
    the lines are said as the op logged them, the progress only when verbose; the step is timed and
    what it materialized is kept."""
    clock = Clock()

    @dg.op
    def freight_job(context: dg.OpExecutionContext) -> None:
        clock.now = 3
        context.log.debug("shipments: 40 of 100 read")
        context.log.info("  sync_shipments             2.00 s  read 100 rows")
        context.log.error("  sync_documents             1.00 s  failed (see below)")
        context.log_event(dg.AssetMaterialization(dg.AssetKey(["freight", "published_warehouse"])))
        clock.now = 12

    progress, lines = _progress(verbose=verbose, clock=clock)
    result = _run(dg.GraphDefinition(name="j", node_defs=[freight_job]).to_job(), progress)

    assert result.success
    said = ["  sync_shipments             2.00 s  read 100 rows",
            "  sync_documents             1.00 s  failed (see below)"]
    assert lines == (["    shipments: 40 of 100 read", *said] if verbose else said)
    step = progress.outcome.steps["freight_job"]
    assert (step.status, step.seconds) == ("success", 12.0)
    assert progress.outcome.materialized == {"freight/published_warehouse"}
@pytest.mark.parametrize("verbose", [False, True])
def test_run_level_messages_only_when_verbose(verbose: bool) -> None:
    """The run's failure message has no step: printed as ``run: ...`` when verbose, else left out
    (the step's FAILED line still says which step failed)."""

    @dg.op
    def broken() -> None:
        raise RuntimeError("boom")

    progress, lines = _progress(verbose=verbose, clock=Clock())
    result = _run(dg.GraphDefinition(name="j", node_defs=[broken]).to_job(), progress)

    assert not result.success
    assert progress.outcome.steps["broken"].status == "failed"
    run_lines = [line for line in lines if line.startswith("    run: ")]
    if verbose:
        assert any('Execution of run for "j" failed' in line for line in run_lines), lines
    else:
        assert run_lines == [], lines


def every_kind_of_tally_line() -> list[str]:
    """A tally line of each stream in each of its forms: no total yet, a total that can grow, a final one (with the
    time left), none done, its last; one request and one retry, and thousands."""
    lines = []
    for stream in STREAM_NAMES:
        for total, final in ((None, False), (120, False), (120, True), (0, True)):
            for done, seconds, ended in ((0, 0.0, False), (40, 2.5, False), (1_200, 3_700.0, True)):
                for requests, retries in ((1, 1), (12_345, 0)):
                    lines.append(tally_line(Tally(stream, "shipments", done, total, final, requests, retries,
                                                  seconds, ended)))
    return lines


def test_a_verbose_run_leaves_out_the_tallies_the_command_shows_itself() -> None:
    """The op logs each stream's tally line for the Dagster UI; the command shows the tallies itself (bars, or the
    same lines), so a verbose run said each one twice. Every form of a tally line is left out; the other progress
    lines the op logs at DEBUG are said, even one that mentions requests."""
    tallies = every_kind_of_tally_line()
    others = ["shipments: reading changes stamped after 1970-01-01 00:00:00 up to 2026-11-01 03:00:00",
              "documents: 3 requests, 0 retries so far, still reading", "shipments: 40 of 100 read"]

    @dg.op
    def freight_job(context: dg.OpExecutionContext) -> None:
        for line in (*tallies, *others):
            context.log.debug(line)

    progress, lines = _progress(verbose=True, clock=Clock())
    assert _run(dg.GraphDefinition(name="j", node_defs=[freight_job]).to_job(), progress).success
    assert {line.split(':')[0] for line in tallies} == set(STREAM_NAMES) and len(set(tallies)) > 15 * len(STREAM_NAMES)
    assert lines == [f"    {line}" for line in others]
