"""``freight-pipeline rebuild``: re-derive the ``freight`` tables from the raw records held, with no request to the
service, then build the marts in full and publish.

For after a change of the mapping (a source alias added to a column when the service renamed a field:
docs/real-services.md, "When the service changes shape"). The job's engine (``job.run.run_rebuild``) with
the rebuild in place of the streams: the same checks, build and publish as a sync's, without Dagster.
An interrupted rebuild is resumed by the next one (``--restart``: from the first shipment again).
"""

from __future__ import annotations

import argparse
import contextlib

from freight_pipeline.commands.common import (
    SKIPPED,
    Stopwatch,
    add_data_dir_argument,
    add_wait_argument,
    alerts_sent,
    holding_writer_lock,
    resolve_data_dir,
    say,
    say_bad,
    say_unknown,
    stopped_as_such,
)
from freight_pipeline.commands.preflight import BadSetup, check_setup, data_dir_setting
from freight_pipeline.config import MAX_WORKERS, BadSettings
from freight_pipeline.sync.rebuild import DEFAULT_BATCH
from freight_pipeline.sync.workers import IN_PROCESS_UP_TO


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_data_dir_argument(parser)
    parser.add_argument("--batch-size", type=int, default=None, metavar="N",
                        help=f"shipments per transaction (default {DEFAULT_BATCH:,})")
    parser.add_argument("--workers", type=int, default=None, metavar="N",
                        help="processes normalizing the raw records (default: one per core once more than "
                        f"{IN_PROCESS_UP_TO} shipments are to be re-derived; 0: this process)")
    parser.add_argument("--restart", action="store_true",
                        help="start from the first shipment even when an interrupted rebuild left off later")
    parser.add_argument("--all", dest="everything", action="store_true",
                        help="re-derive every shipment, not only those whose raw names a source key the mapping's "
                             "change touched (freight_meta.sync_state 'derived_by')")
    parser.add_argument("--rezone", action="store_true",
                        help="read the held date-times without a UTC offset in this run's FREIGHT_SERVICE_TIMEZONE "
                             "though the runs that held them read them in another (refused otherwise)")
    parser.add_argument("-v", "--verbose", action="store_true", help="also print a line per batch")
    add_wait_argument(parser)
    parser.epilog = ("Reads only the working database's raw records (freight_meta.raw_shipments, raw_parts): "
                     "no setting of the service's address or account is needed, but FREIGHT_SERVICE_TIMEZONE is "
                     "read, as by the syncs. Logged in freight_meta.sync_runs as stream 'rebuild'.")


def run(args: argparse.Namespace) -> int:
    if args.batch_size is not None and args.batch_size < 1:
        say("rebuild: --batch-size must be at least 1")
        return 2
    if args.workers is not None and not 0 <= args.workers <= MAX_WORKERS:
        say(f"rebuild: --workers must be from 0 to {MAX_WORKERS}")
        return 2
    try:
        data_dir = resolve_data_dir(args.data_dir)
        configured = check_setup(data_dir, data_dir_setting(args.data_dir), overrides={"data_dir": args.data_dir})
    except (BadSetup, BadSettings) as exc:
        say_bad("rebuild", exc)
        return 2
    say_unknown("rebuild", configured)
    from freight_pipeline.lake.backend import storage_of
    from freight_pipeline.marts.worker import DbtWorker
    from freight_pipeline.sync.runner import new_run_id

    backend = storage_of(configured)
    if backend.working_database_missing(data_dir):  # a mistyped directory, or a working database lost
        say(f"rebuild: {data_dir} holds no working database: nothing was synced there to rebuild from "
            "(--data-dir, FREIGHT_DATA_DIR); nothing made there and nothing published")
        return 2
    run_id = new_run_id()
    with contextlib.ExitStack() as held:
        if not holding_writer_lock(held, "rebuild", data_dir, run_id, args.wait):
            return SKIPPED
        watch = Stopwatch()
        worker = held.enter_context(DbtWorker.for_run(data_dir, backend.dbt_target, configured.marts,
                                                                     target_env=backend.dbt_environment()))
        from freight_pipeline.job.run import (
            CHECKS_STEP,
            MARTS_STEP,
            PUBLISH_STEP,
            REBUILD_STEP,
            Alerting,
            Step,
            run_rebuild,
        )
        from freight_pipeline.sync.settings import SyncSettings

        say(f"rebuild: {data_dir} from its raw records (no request to the service)")
        said: list[str] = []

        def ended(step: Step) -> None:
            said.append(step.name)
            for line in step.lines():
                say(line)

        progress = (lambda line: say(f"    {line}")) if args.verbose else None
        plan = [REBUILD_STEP, CHECKS_STEP, MARTS_STEP, PUBLISH_STEP]
        report = stopped_as_such(plan, said, lambda: run_rebuild(
            data_dir, SyncSettings.of(configured.sync), backend, worker, batch_size=args.batch_size or DEFAULT_BATCH,
            restart=args.restart, workers=args.workers, everything=args.everything, rezone=args.rezone,
            progress=progress,
            on_step=ended, run_id=run_id, alerting=Alerting.of(configured)))
    with alerts_sent(report.alerted):
        if report.success:
            say(f"rebuild succeeded in {watch.seconds:.1f} s (run {report.run_id}); see `freight-pipeline status`")
            return 0
        for step in report.failed:
            say(f"rebuild failed in step {step.name}: {step.line}")
        return 1
