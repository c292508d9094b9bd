"""Run a Dagster job of the project in this process, with one short stderr line per step event."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from freight_pipeline.commands.common import say
from freight_pipeline.commands.dagster_home import dagster_home, prepare_instance
from freight_pipeline.commands.job_progress import Echo, JobOutcome, JobProgress
from freight_pipeline.config import BASE_URL_ENV, DATA_DIR_ENV, PASSWORD_ENV, USERNAME_ENV, environ
from freight_pipeline.defs.names import FREIGHT_SYNC_JOB
from freight_pipeline.process_end import signals_noted
from freight_pipeline.text import one_line

if TYPE_CHECKING:
    from dagster import DagsterInstance, EventLogEntry, JobDefinition
    from dagster._utils.error import SerializableErrorInfo

DEFAULT_JOB = FREIGHT_SYNC_JOB


class UnknownJob(LookupError):
    pass


def dagster_home_problem() -> str | None:
    """What is wrong with ``$DAGSTER_HOME`` (a file, a directory that cannot be made), in one line naming it; None
    when it is unset or a directory (made when missing; its instance is opened by the run, without a cost here to
    a run skipped because another writes its warehouse)."""
    home = os.environ.get("DAGSTER_HOME")
    if not home:
        return None
    try:
        dagster_home(Path(home))
    except OSError as exc:
        what = "is a file, not a directory" if Path(home).expanduser().is_file() else \
            f"is not a directory this process can use: {exc.strerror or exc}"
        return f"DAGSTER_HOME={home} {what}"
    return None


def missing_password() -> str:
    """What a sync without the service's password says."""
    return (f"{PASSWORD_ENV} is not set: export the freight service password (and {BASE_URL_ENV}, {USERNAME_ENV}), "
            "or set them in the settings file, before running a sync")


@contextmanager
def dagster_instance() -> Iterator[DagsterInstance]:
    """``$DAGSTER_HOME``'s instance (given ``ui``'s dagster.yaml when it has none; its storage made by one
    process at a time: ``prepare_instance``) if set, else an ephemeral one."""
    from dagster import DagsterInstance

    home = os.environ.get("DAGSTER_HOME")
    if home:
        resolved = dagster_home(Path(home))  # absolute, as Dagster requires (a relative one: from this directory)
        prepare_instance(resolved)
        with environ({"DAGSTER_HOME": str(resolved)}), DagsterInstance.get() as instance:
            yield instance
    else:
        with DagsterInstance.ephemeral() as instance:
            yield instance


def load_job(job_name: str) -> JobDefinition:
    """``job_name`` from the project's Definitions; UnknownJob names the jobs there are."""
    from freight_pipeline.definitions import defs

    names = sorted(j.name for j in defs.resolve_all_job_defs() if not j.name.startswith("__"))
    if job_name not in names:
        raise UnknownJob(f"no job {job_name!r} in freight_pipeline.definitions (jobs: {', '.join(names) or 'none'})")
    return defs.resolve_job_def(job_name)


def new_dagster_run_id() -> str:
    """A run id in Dagster's format (a UUID), known before the run starts (the writer lock names it)."""
    return str(uuid.uuid4())


def execute_job(
    job_name: str,
    data_dir: Path,
    *,
    verbose: bool = False,
    echo: Echo = say,
    partition_key: str | None = None,
    tags: Mapping[str, str] | None = None,
    run_id: str | None = None,
    resources: Mapping[str, Mapping[str, Any]] | None = None,
) -> JobOutcome:
    """Execute ``job_name`` (for ``partition_key`` of a partitioned job) against ``data_dir`` as run ``run_id``
    (default: a new one, :func:`new_dagster_run_id`), its ``resources`` configured (resource key -> field ->
    value, over the settings); never raises for a failed run (see the outcome), only KeyboardInterrupt for one
    that Ctrl-C or SIGTERM stopped (Dagster ends it as a failure, ``DagsterExecutionInterruptedError``), once its
    instance is closed: the command stops as it would have outside the run."""
    os.environ[DATA_DIR_ENV] = str(data_dir)
    outcome = JobOutcome(job_name, run_id or new_dagster_run_id())
    started = time.monotonic()
    stopped: list[int] = []
    try:
        job = load_job(job_name)
        from freight_pipeline.defs.freight_job import stopped_engine_threads  # loaded with the job
        # dagster-dbt echoes dbt's log on stdout: to stderr when verbose, else nowhere (stdout stays clean)
        sink = sys.stderr if verbose else io.StringIO()
        with dagster_instance() as instance, contextlib.redirect_stdout(sink):
            progress = JobProgress(outcome, echo, verbose)
            instance.add_event_listener(outcome.run_id, progress.on_event)
            # Dagster's handlers take SIGINT and SIGTERM alike for the run
            with signals_noted() as stopped, _ctrl_c_held_from_log_mirrors(instance, outcome.run_id):
                try:
                    result = job.execute_in_process(
                        run_config={**_quiet_run_config(job),
                                    **({"resources": {key: {"config": dict(fields)}
                                                      for key, fields in resources.items()}} if resources else {})},
                        instance=instance,
                        raise_on_error=False,
                        run_id=outcome.run_id,
                        tags=dict(tags or {}),
                        partition_key=partition_key,
                    )
                finally:  # a stop's interruption leaves the engine's thread running: stopped too, and awaited
                    stopped_engine_threads()
            outcome.success = result.success
            if not result.success and not stopped:
                _explain_failure(outcome, result.all_events)
    except Exception as exc:  # loading or starting the run failed: report it as one line
        outcome.success = False
        outcome.reason = f"{type(exc).__name__}: {one_line(str(exc))}".rstrip(": ")
    if stopped:
        raise KeyboardInterrupt
    outcome.seconds = time.monotonic() - started
    return outcome


_MIRRORS_STARTED = frozenset({"LOGS_CAPTURED", "STEP_START"})
"""Events of a run that come once its capture of the process's output has started (or could not start)."""


@contextmanager
def _ctrl_c_held_from_log_mirrors(instance: DagsterInstance, run_id: str) -> Iterator[None]:
    """SIGINT blocked in this thread from the run's start until its capture of the output has started, so that the
    processes an instance's compute log manager starts then (``LocalComputeLogManager``: ``tail`` and Dagster's
    ``watch_orphans.py``, which mirror the run's output to this one's) inherit it blocked: a terminal's Ctrl-C
    reaches every process of its group, and each watcher would print a ``KeyboardInterrupt`` traceback of its own.
    The run ends them itself (SIGTERM), or they end when this process does. A Ctrl-C in the meantime waits for the
    block's end (not lost: pending)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT}):
        yield  # blocked already (Ctrl-C kept out of a process started with it ignored): left so
        return

    def release() -> None:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})

    def on_event(entry: EventLogEntry) -> None:
        if entry.dagster_event is not None and entry.dagster_event.event_type_value in _MIRRORS_STARTED:
            release()

    instance.add_event_listener(run_id, on_event)
    try:
        yield
    finally:
        release()


def _quiet_run_config(job: JobDefinition) -> Mapping[str, Any]:
    """Silence Dagster's console logger (the progress lines replace it)."""
    loggers = job.loggers or {}
    if loggers and "console" not in loggers:
        return {}
    return {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


def _explain_failure(outcome: JobOutcome, events: Sequence[Any]) -> None:
    for event in events:
        if event.is_step_failure and event.step_failure_data is not None:
            failure = event.step_failure_data.user_failure_data
            from freight_pipeline.job.run import FAILED_STEP, FAILED_STEPS  # the job's modules: only when a run failed
            from freight_pipeline.sync.streams import STREAM_OF_STEP

            step = failure.metadata.get(FAILED_STEP) if failure is not None else None
            if failure is not None and step is not None:  # the engine's failure: its step and reason
                outcome.failed_step, outcome.reason = str(step.value), one_line(failure.description or "")
                steps = failure.metadata.get(FAILED_STEPS)
                outcome.failed_streams = [STREAM_OF_STEP[name] for name in (steps.value if steps else [])
                                          if name in STREAM_OF_STEP]
                return
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
    """``ErrorClass: first line`` of the user's exception under Dagster's wrappers.

    The first line is the exception's own (a failed dbt build names its failed tests and skipped
    models there: ``DbtBuildFailed: dbt build failed: 1 test failed (...), 3 models skipped (...)``),
    shortened after Dagster's ``module.Class: `` prefix is taken off.
    """
    if error is None:
        return "unknown error"
    while error.cause is not None and (error.cls_name in _WRAPPERS or error.cls_name is None):
        error = error.cause
    line = one_line(error.message or "", limit=len(error.message or ""))
    name = error.cls_name or ""
    head, sep, rest = line.partition(": ")
    if sep and name and head.split(".")[-1] == name:
        line = rest
    line = one_line(line)
    return f"{name}: {line}" if name and line else (name or line or "unknown error")
