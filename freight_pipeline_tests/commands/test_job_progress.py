"""``JobProgress`` listening to real in-process Dagster runs, its clock driven by the ops.

(No ``from __future__ import annotations``: Dagster reads the op's ``context`` annotation.)
"""

import uuid

import dagster as dg
import pytest

from freight_pipeline.commands.job_progress import JobOutcome, JobProgress


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
    return JobProgress(JobOutcome("j", str(uuid.uuid4())), lines.append, verbose, every=5.0, clock=clock), lines


def test_done_so_far_lines_are_throttled_per_step() -> None:
    """Materializations at t = 1, 2, 6, 7, 12 s after the step started: a "done so far" line at 6
    (5 s after the start) and at 12 (5 s after the last line), none in between."""
    clock = Clock()

    @dg.op
    def count(context: dg.OpExecutionContext) -> None:
        for t in (1, 2, 6, 7, 12):
            clock.now = t
            context.log_event(dg.AssetMaterialization(f"table_{t}"))

    progress, lines = _progress(verbose=False, clock=clock)
    result = _run(dg.GraphDefinition(name="j", node_defs=[count]).to_job(), progress)

    assert result.success
    assert lines == [
        "  started   count",
        "    count: 3 assets done so far",
        "    count: 5 assets done so far",
        f"  finished  {'count':<30} {12.0:7.2f} s  (5 assets)",
    ]
    assert progress.outcome.steps["count"].seconds == 12.0


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
    assert any(line.startswith("  FAILED    broken") for line in lines), lines
    run_lines = [line for line in lines if line.startswith("    run: ")]
    if verbose:
        assert any('Execution of run for "j" failed' in line for line in run_lines), lines
    else:
        assert run_lines == [], lines


def test_a_steps_warnings_are_always_shown() -> None:
    """A WARNING of a step (a dbt test that warned) is shown at once, not throttled like its INFO
    messages, also when not verbose."""
    clock = Clock()

    @dg.op
    def build(context: dg.OpExecutionContext) -> None:
        clock.now = 1
        context.log.info("progress")  # throttled: 1 s after the start
        context.log.warning("dbt test accepted_values_x warned (severity warn, the build goes on)")
        context.log.warning("dbt test accepted_values_y warned (severity warn, the build goes on)")

    progress, lines = _progress(verbose=False, clock=clock)
    result = _run(dg.GraphDefinition(name="j", node_defs=[build]).to_job(), progress)

    assert result.success
    assert lines[1:3] == [
        "    build: dbt test accepted_values_x warned (severity warn, the build goes on)",
        "    build: dbt test accepted_values_y warned (severity warn, the build goes on)",
    ]
    assert not any("progress" in line for line in lines)
