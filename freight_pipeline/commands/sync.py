"""``freight-pipeline sync``: materialize the sync job once, headless, against the configured service."""

from __future__ import annotations

import argparse

from freight_pipeline.commands.common import add_data_dir_argument, resolve_data_dir, say
from freight_pipeline.commands.execute import DEFAULT_JOB, MissingPassword, execute_with_build, service_from_env
from freight_pipeline.config import environ
from freight_pipeline.defs.dbt_plan import FULL_REFRESH_ENV


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_data_dir_argument(parser)
    parser.add_argument("--job", default=DEFAULT_JOB, help=f"the Dagster job to run (default {DEFAULT_JOB})")
    parser.add_argument("-v", "--verbose", action="store_true", help="also print the steps' log messages")
    parser.add_argument("--full-refresh", action="store_true",
                        help="rebuild every dbt mart from scratch (default: only the shipments that changed)")
    parser.add_argument("--partition", metavar="KEY",
                        help="run this partition of a partitioned job (e.g. --job freight_backfill_job "
                        "--partition 0-99999 in lake mode: one backfill writer)")
    parser.epilog = (
        "The service comes from FREIGHT_BASE_URL, FREIGHT_USERNAME and FREIGHT_PASSWORD (required). "
        "With DAGSTER_HOME set the run is recorded in that instance (it shows in `make ui`)."
    )


def run(args: argparse.Namespace) -> int:
    data_dir = resolve_data_dir(args.data_dir)
    try:
        service = service_from_env()
    except MissingPassword as exc:
        say(f"sync: {exc}")
        return 2
    partition = f" partition {args.partition}" if args.partition else ""
    say(f"sync: {args.job}{partition}: {service.base_url} as {service.username!r} -> {data_dir}")
    with environ({FULL_REFRESH_ENV: "1"} if args.full_refresh else {}):
        synced = execute_with_build(args.job, data_dir, verbose=args.verbose, partition_key=args.partition)
    outcome = synced.run
    if outcome.success:
        say(f"sync succeeded in {outcome.seconds:.1f} s (run {outcome.run_id}); see `freight-pipeline status`")
        return 0
    say(outcome.failure_line("sync", service.password))
    if synced.build is not None:
        build = synced.build
        if build.success:
            say(f"published anyway by run {build.run_id} ({build.seconds:.1f} s): every other stream's data and "
                f"the marts built on it; the {', '.join(synced.failed_streams)} tables keep the rows of their last "
                "successful sync (freight_meta.table_freshness); see `freight-pipeline status`")
        else:
            say(build.failure_line("the build after it", service.password) + "; nothing was published")
    return 1
