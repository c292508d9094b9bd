"""Progress of one in-process Dagster run: short stderr lines per step, and what each step took."""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from freight_pipeline.commands.common import redact
from freight_pipeline.text import one_line

if TYPE_CHECKING:
    from dagster._core.events.log import EventLogEntry

Echo = Callable[[str], None]
PROGRESS_EVERY = 5.0
"""Seconds between two progress lines of one running step."""
_COUNTED = {"ASSET_MATERIALIZATION": "asset", "ASSET_CHECK_EVALUATION": "check"}


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

    def failure_line(self, what: str, *secrets: str | None) -> str:
        """One line naming the failed step and the reason, secrets redacted."""
        where = f" in step {self.failed_step}" if self.failed_step else ""
        return redact(f"{what} failed{where}: {self.reason or 'unknown error'}", *secrets)


class JobProgress:
    """Instance event listener: step start/finish lines; within a step a line every ``every`` s at most.

    Verbose, also every INFO-or-above message of a step, and of the run itself (``run: ...``).
    A step's WARNING-or-above message is always shown, unthrottled (e.g. a dbt test of severity warn
    that found a value the spec does not list).
    ``clock`` (seconds, monotonic) times the steps and the throttling.
    """

    def __init__(
        self,
        outcome: JobOutcome,
        echo: Echo,
        verbose: bool,
        every: float = PROGRESS_EVERY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.outcome = outcome
        self.echo = echo
        self.verbose = verbose
        self.every = every
        self.clock = clock
        self.started: dict[str, float] = {}
        self.last_line: dict[str, float] = {}
        self.counts: dict[str, Counter[str]] = {}

    def on_event(self, entry: EventLogEntry) -> None:
        event = entry.dagster_event
        step = entry.step_key
        if step is None:  # the run's own messages (its failure, engine errors): only when verbose
            if self.verbose and entry.user_message and entry.level >= logging.INFO:
                self.echo(f"    run: {one_line(entry.user_message, 160)}")
            return
        if event is None:
            if entry.user_message and entry.level >= logging.INFO:
                text = one_line(entry.user_message, 160)
                text = text.removeprefix(f"{step.removeprefix('sync_')}: ")  # the sync says its stream already
                self._note(step, text, always=self.verbose or entry.level >= logging.WARNING)
            return
        kind = event.event_type_value
        if kind == "STEP_START":
            self.started[step] = self.last_line[step] = self.clock()
            self.counts[step] = Counter()
            self.outcome.steps[step] = StepOutcome(step)
            self.echo(f"  started   {step}")
        elif kind in ("STEP_SUCCESS", "STEP_FAILURE"):
            now = self.clock()
            seconds = now - self.started.get(step, now)
            status = "success" if kind == "STEP_SUCCESS" else "failed"
            self.outcome.steps[step] = StepOutcome(step, status, seconds)
            label = "finished" if status == "success" else "FAILED"
            counts = self._counts(step)
            self.echo(f"  {label:<9} {step:<30} {seconds:7.2f} s" + (f"  ({counts})" if counts else ""))
        elif kind == "STEP_SKIPPED":
            self.outcome.steps[step] = StepOutcome(step, "skipped")
            self.echo(f"  skipped   {step}")
        elif kind in _COUNTED:
            self.counts.setdefault(step, Counter())[_COUNTED[kind]] += 1
            self._note(step, f"{self._counts(step)} done so far", always=False)

    def _note(self, step: str, text: str, always: bool) -> None:
        now = self.clock()
        if always or now - self.last_line.get(step, now) >= self.every:
            self.last_line[step] = now
            self.echo(f"    {step}: {text}")

    def _counts(self, step: str) -> str:
        counts = self.counts.get(step) or Counter()
        return ", ".join(f"{n} {what}{'' if n == 1 else 's'}" for what, n in counts.items())
