"""Run a Dagster job of the project in this process, with one short stderr line per step event."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from freight_pipeline.commands.common import DATA_DIR_ENV, PASSWORD_ENV, one_line, redact, say
from freight_pipeline.config import DEFAULT_BASE_URL, DEFAULT_USERNAME, ServiceSettings

if TYPE_CHECKING:
    from dagster import DagsterInstance, JobDefinition
    from dagster._core.errors import SerializableErrorInfo
    from dagster._core.events.log import EventLogEntry

DEFAULT_JOB = "freight_sync_job"
Echo = Callable[[str], None]


class MissingPassword(RuntimeError):
    pass


def service_from_env() -> ServiceSettings:
    """The service settings of this process; fills in the default URL and user, requires the password."""
    os.environ.setdefault("FREIGHT_BASE_URL", DEFAULT_BASE_URL)
    os.environ.setdefault("FREIGHT_USERNAME", DEFAULT_USERNAME)
    service = ServiceSettings.from_env()
    if not service.password:
        raise MissingPassword(
            f"{PASSWORD_ENV} is not set: export the freight service password "
            "(and FREIGHT_BASE_URL, FREIGHT_USERNAME) before running a sync"
        )
    return service


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


@contextmanager
def dagster_instance() -> Iterator[DagsterInstance]:
    """The persistent instance of ``$DAGSTER_HOME`` when set (runs show in the UI), else an ephemeral one."""
    from dagster import DagsterInstance

    home = os.environ.get("DAGSTER_HOME")
    if home:
        Path(home).mkdir(parents=True, exist_ok=True)
        with DagsterInstance.get() as instance:
            yield instance
    else:
        with DagsterInstance.ephemeral() as instance:
            yield instance


def load_job(job_name: str) -> JobDefinition:
    """``job_name`` from the project's Definitions; a KeyError names the jobs there are."""
    from freight_pipeline.definitions import defs

    names = sorted(j.name for j in defs.resolve_all_job_defs() if not j.name.startswith("__"))
    if job_name not in names:
        raise KeyError(f"no job {job_name!r} in freight_pipeline.definitions (jobs: {', '.join(names) or 'none'})")
    return defs.resolve_job_def(job_name)


def execute_job(job_name: str, data_dir: Path, *, verbose: bool = False, echo: Echo = say) -> JobOutcome:
    """Execute ``job_name`` against ``data_dir``; never raises for a failed run (see the outcome)."""
    from dagster import make_new_run_id

    os.environ[DATA_DIR_ENV] = str(data_dir)
    outcome = JobOutcome(job_name, make_new_run_id())
    started = time.monotonic()
    try:
        job = load_job(job_name)
        with dagster_instance() as instance:
            progress = _Progress(outcome, echo, verbose)
            instance.add_event_listener(outcome.run_id, progress.on_event)
            result = job.execute_in_process(
                run_config=_quiet_run_config(job),
                instance=instance,
                raise_on_error=False,
                run_id=outcome.run_id,
                tags={"freight/launched_by": "freight-pipeline cli"},
            )
            outcome.success = result.success
            if not result.success:
                _explain_failure(outcome, result.all_events)
    except Exception as exc:  # loading or starting the run failed: report it as one line
        outcome.success = False
        outcome.reason = f"{type(exc).__name__}: {one_line(str(exc))}".rstrip(": ")
    outcome.seconds = time.monotonic() - started
    return outcome


def _quiet_run_config(job: JobDefinition) -> Mapping[str, Any]:
    """Silence Dagster's console logger (the progress lines replace it)."""
    loggers = job.loggers or {}
    if loggers and "console" not in loggers:
        return {}
    return {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


def _explain_failure(outcome: JobOutcome, events: Sequence[Any]) -> None:
    for event in events:
        if event.is_step_failure and event.step_failure_data is not None:
            outcome.failed_step = event.step_key
            outcome.reason = describe_error(event.step_failure_data.error)
            return
    for event in events:
        if event.is_run_failure:
            outcome.reason = one_line(event.message or "the run failed")
            return
    outcome.reason = "the run failed"


_WRAPPERS = ("DagsterExecutionStepExecutionError", "DagsterUserCodeExecutionError", "DagsterResourceFunctionError")


def describe_error(error: SerializableErrorInfo | None) -> str:
    """``ErrorClass: first line`` of the user's exception under Dagster's wrappers."""
    if error is None:
        return "unknown error"
    while error.cause is not None and (error.cls_name in _WRAPPERS or error.cls_name is None):
        error = error.cause
    line = one_line(error.message or "")
    name = error.cls_name or ""
    head, sep, rest = line.partition(": ")
    if sep and name and head.split(".")[-1] == name:
        line = rest
    return f"{name}: {line}" if name and line else (name or line or "unknown error")


class _Progress:
    """Event listener: step started/finished lines with timings, and the steps' logs when verbose."""

    def __init__(self, outcome: JobOutcome, echo: Echo, verbose: bool) -> None:
        self.outcome = outcome
        self.echo = echo
        self.verbose = verbose
        self.started: dict[str, float] = {}

    def on_event(self, entry: EventLogEntry) -> None:
        event = entry.dagster_event
        step = entry.step_key
        if event is None:
            if self.verbose and entry.user_message and entry.level >= 20:
                self.echo(f"    {step or 'run'}: {one_line(entry.user_message, 200)}")
            return
        if step is None:
            return
        kind = event.event_type_value
        if kind == "STEP_START":
            self.started[step] = time.monotonic()
            self.outcome.steps[step] = StepOutcome(step)
            self.echo(f"  started   {step}")
        elif kind in ("STEP_SUCCESS", "STEP_FAILURE"):
            seconds = time.monotonic() - self.started.get(step, time.monotonic())
            status = "success" if kind == "STEP_SUCCESS" else "failed"
            self.outcome.steps[step] = StepOutcome(step, status, seconds)
            label = "finished" if status == "success" else "FAILED"
            self.echo(f"  {label:<9} {step:<32} {seconds:7.2f} s")
        elif kind == "STEP_SKIPPED":
            self.outcome.steps[step] = StepOutcome(step, "skipped")
            self.echo(f"  skipped   {step}")
