"""``freight-pipeline sync``: run the sync job once, headless, against the configured service.

One engine (``freight_pipeline.job.run``), started two ways: in the Dagster job ``freight_sync_job`` (its
one op runs the engine) in the instance of ``$DAGSTER_HOME``, so that the run shows in the Dagster UI (the
default when ``DAGSTER_HOME`` is set, and with ``--job`` or ``--partition``); or without Dagster (no
Dagster import nor event log: the default otherwise, and with ``--no-dagster``). Either way the same
steps print the same lines, each stream's progress shows (a bar on a terminal, a line per 15 s into a pipe:
``commands.progress_bar``), and the run is logged in ``freight_meta.sync_runs``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from freight_pipeline.client.proxies import ProxyError, proxy_for
from freight_pipeline.commands.common import (
    SKIPPED,
    StoppedIn,
    Stopwatch,
    add_data_dir_argument,
    add_wait_argument,
    alerts_sent,
    holding_writer_lock,
    redact,
    resolve_data_dir,
    say,
    say_bad,
    say_unknown,
    stopped_as_such,
    without_pandas,
)
from freight_pipeline.commands.execute import (
    DEFAULT_JOB,
    dagster_home_problem,
    execute_job,
    missing_password,
    new_dagster_run_id,
)
from freight_pipeline.commands.preflight import BadSetup, check_data_dir, check_setup, data_dir_setting
from freight_pipeline.commands.progress_bar import shown_progress
from freight_pipeline.config import DBT_FULL_REFRESH_ENV, REPO_ROOT, BadSettings, ServiceSettings, Settings, environ
from freight_pipeline.defs.names import BESIDE_WRITERS

if TYPE_CHECKING:
    from freight_pipeline.job.run import JobReport
    from freight_pipeline.marts.worker import DbtWorker

PUBLISHED = "freight/published_warehouse"
"""The published warehouse's asset (``defs.freight_job.PUBLISH_KEY``, without importing Dagster)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_data_dir_argument(parser)
    parser.add_argument("--job", default=None,
                        help=f"the Dagster job to run (default {DEFAULT_JOB}; implies --dagster)")
    parser.add_argument("-v", "--verbose", action="store_true", help="also print the steps' log messages")
    parser.add_argument("--full-refresh", action="store_true",
                        help="rebuild every dbt mart from scratch (default: only the shipments that changed)")
    parser.add_argument("--partition", metavar="KEY",
                        help="run this partition of a partitioned job (e.g. --job freight_backfill_job "
                        "--partition 0-99999 in lake mode: one backfill writer; implies --dagster)")
    parser.add_argument("--dagster", action=argparse.BooleanOptionalAction, default=None,
                        help="run the Dagster job, recorded in the instance of $DAGSTER_HOME (it shows in "
                        "`make ui`; DAGSTER_HOME not set: in a throw-away instance, said); --no-dagster: the same "
                        "job without Dagster, a few seconds faster. "
                        "Default: --dagster when DAGSTER_HOME is set, else --no-dagster")
    add_wait_argument(parser)
    parser.epilog = (
        "The service comes from FREIGHT_BASE_URL, FREIGHT_USERNAME and FREIGHT_PASSWORD (required). "
        "Either way the run is logged in freight_meta.sync_runs (`freight-pipeline status`)."
    )


def run(args: argparse.Namespace) -> int:
    dagster = args.dagster
    if dagster is None:
        dagster = bool(os.environ.get("DAGSTER_HOME")) or args.job is not None or args.partition is not None
    if not dagster and (args.job is not None or args.partition is not None):
        say("sync: --job and --partition name a Dagster job's run: drop --no-dagster")
        return 2
    without_pandas()
    try:
        data_dir = resolve_data_dir(args.data_dir)
    except BadSettings as exc:
        say_bad("sync", exc)
        return 2
    # without Dagster the dbt worker is made first in a data directory that holds a working database (a
    # run after the first: nothing is written in a new one before the setup is checked): started at once
    # (after a run that built: marts.worker.Start), it imports dbt on the other core while this process
    # imports the rest (the client, DuckDB, the job)
    worker = None if dagster else _early_worker(data_dir, data_dir_setting(args.data_dir))
    with worker if worker is not None else contextlib.nullcontext():
        flags = {"data_dir": args.data_dir, "dbt_full_refresh": True if args.full_refresh else None}
        try:
            settings = check_setup(data_dir, data_dir_setting(args.data_dir), overrides=flags)
        except BadSetup as exc:
            say_bad("sync", exc)
            return 2
        say_unknown("sync", settings)
        if not settings.service.secret:
            say(f"sync: {missing_password()}")
            return 2
        problem = dagster_home_problem() if dagster else None
        if problem is None and (args.job is not None or args.partition is not None):
            problem = _job_problem(args.job or DEFAULT_JOB, args.partition)
        if problem:  # a bad setup too: before the lock is taken and the run launched
            say(f"sync: {problem}")
            return 2
        # a Dagster run reads its settings itself (its resources): the flag reaches it through the environment
        with environ({DBT_FULL_REFRESH_ENV: "1"} if args.full_refresh and dagster else {}):
            if dagster:
                if not os.environ.get("DAGSTER_HOME"):
                    say(f"sync: DAGSTER_HOME is not set: this Dagster run is recorded in no instance and shows in no "
                        f"UI (`make ui` shows the runs of DAGSTER_HOME={REPO_ROOT / '.dagster_home'})")
                return run_in_dagster(args, settings.service, data_dir)
            return run_without_dagster(args, settings, data_dir, worker)


def _early_worker(data_dir: Path, named_by: str) -> DbtWorker | None:
    """The dbt worker of a run without Dagster, made (and started, when it starts at once) before the rest is
    imported when ``data_dir`` holds a working database already; None when it holds none (it is made after the
    setup's check), or the data directory or a setting the worker reads is not right (``check_setup`` then says
    what)."""
    from freight_pipeline.lake.settings import dbt_target_from_env
    from freight_pipeline.marts.worker import DbtWorker
    from freight_pipeline.warehouse.paths import working_db_path

    if not working_db_path(data_dir).is_file():
        return None
    try:
        check_data_dir(data_dir, named_by)
        return DbtWorker.for_run(data_dir, dbt_target_from_env())
    except (BadSetup, OSError, ValueError):
        return None


def _job_problem(job_name: str, partition: str | None) -> str | None:
    """What is wrong with ``--job`` and ``--partition`` (no such job; a partition of a job without partitions, or
    one it does not have), in one line; None when they name a job and a partition of it."""
    from freight_pipeline.commands.execute import UnknownJob, load_job

    try:
        job = load_job(job_name)
    except UnknownJob as exc:
        return f"--job {job_name}: {exc}"
    if partition is None:
        return None
    if job.partitions_def is None:
        return f"--partition {partition}: the job {job_name} has no partitions (in lake mode freight_backfill_job has)"
    keys = job.partitions_def.get_partition_keys()
    if partition not in keys:
        shown = ", ".join(keys[:8]) + (f", ... ({len(keys)} in all)" if len(keys) > 8 else "")
        return f"--partition {partition}: not a partition of {job_name} (its partitions: {shown or 'none'})"
    return None


def service_said(service: ServiceSettings) -> str:
    """The service a sync reads as its first line says it: the URL, the user, and the proxy on the way (if any)."""
    try:
        proxy = proxy_for(service.base_url)
    except ProxyError:
        proxy = None  # the run says why it cannot go through it
    return f"{service.base_url} as {service.username!r}" + ("" if proxy is None else f" through {proxy}")


def run_in_dagster(args: argparse.Namespace, service: ServiceSettings, data_dir: Path) -> int:
    job = args.job or DEFAULT_JOB
    partition = f" partition {args.partition}" if args.partition else ""
    run_id = new_dagster_run_id()
    with contextlib.ExitStack() as held:
        if job not in BESIDE_WRITERS and not holding_writer_lock(held, "sync", data_dir, run_id, args.wait):
            return SKIPPED
        say(f"sync: {job}{partition}: {service_said(service)} -> {data_dir}")
        try:
            with shown_progress(service.secret):  # the op runs the engine in this process: its meters reach the bars
                outcome = execute_job(job, data_dir, verbose=args.verbose, partition_key=args.partition,
                                      run_id=run_id, echo=lambda line: say(redact(line, service.secret)))
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM (the lock let go as the block ends)
            raise StoppedIn(f"in Dagster run {run_id}") from None
    if outcome.success:
        say(f"sync succeeded in {outcome.seconds:.1f} s (run {outcome.run_id}); see `freight-pipeline status`")
        return 0
    say(outcome.failure_line("sync", service.secret))
    if PUBLISHED in outcome.materialized:
        say(published_anyway(outcome.run_id, outcome.seconds, outcome.failed_streams))
    return 1


def published_anyway(run_id: str, seconds: float, failed_streams: Sequence[str]) -> str:
    """What a failed run that published says of its publish: of the streams that failed, when any did (a run can
    fail after its publish for another reason: Dagster's storage full as it records the run's end)."""
    if not failed_streams:
        return (f"published by run {run_id} before it failed ({seconds:.1f} s): every stream's data and the marts "
                "built on it; see `freight-pipeline status`")
    return (f"published anyway by run {run_id} ({seconds:.1f} s): every other stream's data and the marts built on "
            f"it; the {', '.join(failed_streams)} tables hold their last successful sync and the batches the failed "
            "run committed before it failed (freight_meta.table_freshness); see `freight-pipeline status`")


def run_without_dagster(args: argparse.Namespace, configured: Settings, data_dir: Path,
                        started: DbtWorker | None = None) -> int:
    """The job without Dagster, with the ``configured`` settings, its build in the worker ``started`` for it
    (None: started here), under the data directory's writer lock (when another run holds it: skipped, or waited
    for, ``--wait``)."""
    from freight_pipeline.lake.backend import storage_of
    from freight_pipeline.marts.worker import DbtWorker
    from freight_pipeline.sync.runner import new_run_id

    service = configured.service
    backend = storage_of(configured)
    run_id = new_run_id()
    with contextlib.ExitStack() as held:
        if not holding_writer_lock(held, "sync", data_dir, run_id, args.wait):
            return SKIPPED
        watch = Stopwatch()
        worker = held.enter_context(started if started is not None else
                                    DbtWorker.for_run(data_dir, backend.dbt_target, configured.marts,
                                                      target_env=backend.dbt_environment()))
        worker.marts = configured.marts  # an early worker's, with the flags (--full-refresh)
        from freight_pipeline.job.run import CHECKS_STEP, MARTS_STEP, PUBLISH_STEP, Alerting, Step, run_job
        from freight_pipeline.sync.settings import SyncSettings
        from freight_pipeline.sync.streams import STREAM_NAMES, stream_step

        settings = SyncSettings.of(configured.sync)  # checked before anything ran (commands.preflight)
        say(f"sync: {service_said(service)} -> {data_dir} (without Dagster)")
        said: list[str] = []

        def ended(step: Step) -> None:
            said.append(step.name)
            for line in step.lines():
                say(redact(line, service.secret))

        progress = (lambda line: say(redact(f"    {line}", service.secret))) if args.verbose else None
        plan = [*map(stream_step, STREAM_NAMES), CHECKS_STEP, MARTS_STEP, PUBLISH_STEP]
        with shown_progress(service.secret):
            report = stopped_as_such(plan, said, lambda: run_job(
                service, data_dir, settings, backend, worker, run_id=run_id, progress=progress, on_step=ended,
                alerting=Alerting.of(configured)))
    with alerts_sent(report.alerted):
        return _said_outcome(report, watch, service)


def _said_outcome(report: JobReport, watch: Stopwatch, service: ServiceSettings) -> int:
    """The run's outcome said; its exit code."""
    if report.success:
        say(f"sync succeeded in {watch.seconds:.1f} s (run {report.run_id}); see `freight-pipeline status`")
        return 0
    steps_of: dict[str, list[str]] = {}  # a reason shared by several steps (refused credentials) is said once,
    for step in report.failed:  # naming each of them
        steps_of.setdefault(step.line, []).append(step.name)
    for line, names in steps_of.items():
        where = f"step {names[0]}" if len(names) == 1 else f"steps {', '.join(names)}"
        say(redact(f"sync failed in {where}: {line}", service.secret))
    if report.publication is not None:
        say(published_anyway(report.run_id, watch.seconds, report.failed_streams))
    return 1
