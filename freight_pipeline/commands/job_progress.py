"""Progress of one in-process Dagster run: the engine's lines, and what each step took."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from freight_pipeline.commands.common import redact
from freight_pipeline.sync.progress import is_tally_line
from freight_pipeline.text import one_line

if TYPE_CHECKING:
    from dagster._core.events.log import EventLogEntry

Echo = Callable[[str], None]


@dataclass
class StepOutcome:
    key: str
    status: str = "running"
    seconds: float | None = None


@dataclass
class JobOutcome:
    job_name: str
    run_id: str
    success: bool = False
    seconds: float = 0.0
    steps: dict[str, StepOutcome] = field(default_factory=dict)
    failed_step: str | None = None
    reason: str | None = None
    materialized: set[str] = field(default_factory=set)
    """The assets the run materialized (``freight/published_warehouse``: it published)."""
    failed_streams: list[str] = field(default_factory=list)
    """The streams whose steps failed, as the engine's failure names them (none: the run failed elsewhere)."""

    def failure_line(self, what: str, *secrets: str | None) -> str:
        """One line naming the failed step and the reason, secrets redacted."""
        where = f" in step {self.failed_step}" if self.failed_step else ""
        return redact(f"{what} failed{where}: {self.reason or 'unknown error'}", *secrets)


class JobProgress:
    """Instance event listener of a run of the job: the engine's own lines (``job.run.Step.lines``,
    which the op logs as each step of the engine ends: the same lines a run without Dagster prints),
    a line when a Dagster step fails, and what each Dagster step took.

    Verbose, also the engine's progress lines (logged at DEBUG by the op), and the run's own
    messages (``run: ...``); not the streams' tallies the op logs for the Dagster UI: the command that runs the
    job in this process shows them itself (``commands.progress_bar.shown_progress``: bars, or the same lines),
    and they were said twice. ``clock`` (seconds, monotonic) times the steps.
    """

    def __init__(self, outcome: JobOutcome, echo: Echo, verbose: bool,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.outcome = outcome
        self.echo = echo
        self.verbose = verbose
        self.clock = clock
        self.started: dict[str, float] = {}

    def on_event(self, entry: EventLogEntry) -> None:
        event = entry.dagster_event
        step = entry.step_key
        if step is None:  # the run's own messages (its failure, engine errors): only when verbose
            if self.verbose and entry.user_message and entry.level >= logging.INFO:
                self.echo(f"    run: {one_line(entry.user_message, 160)}")
            return
        if event is None:
            if entry.user_message and entry.level >= logging.INFO:
                self.echo(entry.user_message)
            elif entry.user_message and self.verbose and not is_tally_line(entry.user_message):
                self.echo(f"    {entry.user_message}")
            return
        kind = event.event_type_value
        if kind == "STEP_START":
            self.started[step] = self.clock()
            self.outcome.steps[step] = StepOutcome(step)
        elif kind in ("STEP_SUCCESS", "STEP_FAILURE"):
            now = self.clock()
            status = "success" if kind == "STEP_SUCCESS" else "failed"
            self.outcome.steps[step] = StepOutcome(step, status, now - self.started.get(step, now))
        elif kind == "STEP_SKIPPED":
            self.outcome.steps[step] = StepOutcome(step, "skipped")
        elif kind == "ASSET_MATERIALIZATION" and event.asset_key is not None:
            self.outcome.materialized.add(event.asset_key.to_user_string())
