"""``freight-pipeline demo``: bundled simulator, full sync, changes in the service, incremental sync, summary."""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from freight_pipeline.commands.common import (
    SKIPPED,
    Stopwatch,
    add_data_dir_argument,
    resolve_data_dir,
    say,
    say_bad,
    say_unknown,
)
from freight_pipeline.commands.demo_data import DemoBusy, ForeignDataDir, demo_dir_held, prepare_demo_dir
from freight_pipeline.commands.demo_summary import (
    Changes,
    DemoFacts,
    DemoRun,
    DocumentCheck,
    render_summary,
    service_document_pairs,
)
from freight_pipeline.commands.execute import DEFAULT_JOB, dagster_home_problem, execute_job
from freight_pipeline.commands.history_report import read_history_facts
from freight_pipeline.commands.preflight import BadSetup, check_setup, data_dir_setting
from freight_pipeline.commands.progress_bar import shown_progress
from freight_pipeline.commands.report import document_pairs, on_time_by_mode, read_report, shipments_present
from freight_pipeline.config import (
    BASE_URL_ENV,
    DATA_DIR_ENV,
    LAKE_CATALOG_URI_ENV,
    LAKE_DATA_URI_ENV,
    PASSWORD_ENV,
    RECONCILE_ENV,
    USERNAME_ENV,
    BadSettings,
    environ,
)
from freight_pipeline.lake.backend import storage_from_env
from freight_pipeline.simulator.cli import shipment_count
from freight_pipeline.simulator.config import MAX_SHIPMENTS
from freight_pipeline.text import int_between
from freight_pipeline.warehouse.backend import StorageBackend
from freight_pipeline.warehouse.paths import WORK_DIR

NO_ALERTS = {"warehouse": {"alert_urls": ""}}
"""The demo's runs alert nowhere: what they find is of the bundled simulator, not news for the destinations the
settings name (a team's real channel)."""
DAYS_BETWEEN_RUNS = 3
"""The simulator's clock moves on this far between the runs: arrivals come due, estimates are revised."""
ETA_HORIZON_DAYS = 1
"""The horizon of the summary's accuracy figure. The history begins with the first sync, so only the
arrivals that happen between the runs have an estimate on record before them, from up to
DAYS_BETWEEN_RUNS days (plus the time since their last change) before: 1 day out scores the most of them
(7 and 14 days none)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_data_dir_argument(parser)
    parser.add_argument("--shipments", type=shipment_count, default=2000,
                        help=f"shipments in the simulator, 0 to {MAX_SHIPMENTS} (default 2000)")
    parser.add_argument("--seed", type=int, default=42, help="simulator data seed (default 42)")
    parser.add_argument("--changes", type=int_between(0), default=50,
                        help="shipments modified between the runs (default 50)")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every log message of the steps")
    parser.add_argument("--lake", choices=("local", "s3"),
                        help="write a DuckLake instead of the DuckDB file: SQLite catalog in the data directory, "
                        "Parquet in it (local) or on a local S3 server that lives as long as the demo (s3)")
    parser.epilog = (
        "Every demo starts from an empty warehouse: a data directory filled by an earlier demo is emptied "
        "first (only what the pipeline wrote there); one holding a warehouse the demo did not make is refused."
    )


def run(args: argparse.Namespace) -> int:
    try:
        data_dir = resolve_data_dir(args.data_dir)
        configured = check_setup(data_dir, data_dir_setting(args.data_dir))  # the demo brings its service
    except (BadSetup, BadSettings) as exc:
        say_bad("demo", exc)
        return 2
    problem = dagster_home_problem()
    if problem:
        say(f"demo: {problem}")
        return 2
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(demo_dir_held(data_dir))  # until the demo ends: a second one would empty it
            removed = prepare_demo_dir(data_dir, {"shipments": args.shipments, "seed": args.seed})
        except ForeignDataDir as exc:
            say_bad("demo", exc)
            return 2
        except DemoBusy as exc:
            say(f"demo: skipped: {exc} (exit {SKIPPED})")
            return SKIPPED
        say_unknown("demo", configured)
        if removed:
            say(f"demo: emptied the previous demo's warehouse in {data_dir} (the demo always starts with a full sync)")
        return _demo(args, data_dir)


def _demo(args: argparse.Namespace, data_dir: Path) -> int:
    """The demo itself, in ``data_dir`` prepared for it: simulator, two syncs, summary."""
    from freight_pipeline.simulator.server import running_simulator

    clock = Stopwatch()
    say(f"demo: generating {args.shipments} shipments (seed {args.seed}) and starting the simulator ...")
    with running_simulator(shipments=args.shipments, seed=args.seed) as sim:
        say(f"demo: simulator ready at {sim.base_url} in {clock.seconds:.1f} s")
        service = {
            BASE_URL_ENV: sim.base_url, USERNAME_ENV: sim.username, DATA_DIR_ENV: str(data_dir),
            RECONCILE_ENV: "0",  # list every live id each run, so the demo's deletions leave the warehouse
        }
        with demo_lake(args.lake, data_dir) as lake, environ({**service, **lake, PASSWORD_ENV: sim.password}):
            if lake:
                say(f"demo: lake mode: catalog {lake[LAKE_CATALOG_URI_ENV]}, data {lake[LAKE_DATA_URI_ENV]}")
            backend = storage_from_env()
            runs: list[DemoRun] = []
            if not _sync("full sync", data_dir, backend, args.verbose, runs):
                return 1
            sim.advance_clock(DAYS_BETWEEN_RUNS * 86400)
            changes = Changes.make(sim, args.changes)
            say(f"demo: {DAYS_BETWEEN_RUNS} days later, changed the service: {changes.describe()}")
            if not _sync("incremental sync", data_dir, backend, args.verbose, runs):
                return 1
            in_service = service_document_pairs(sim.store.reader.live_shipment_ids(), sim.store.efiles.rows())
            documents = DocumentCheck(in_service, document_pairs(data_dir, backend))
            facts = DemoFacts(
                data_dir, args.shipments, args.seed, changes, shipments_present(data_dir, changes.deleted, backend),
                on_time_by_mode(data_dir, backend), documents, lake,
                read_history_facts(data_dir, backend, horizon_days=ETA_HORIZON_DAYS),
            )
    print(render_summary(runs, facts))
    say(f"demo: done in {clock.seconds:.1f} s")
    return 0


@contextmanager
def demo_lake(kind: str | None, data_dir: Path) -> Iterator[dict[str, str]]:
    """The lake variables of the demo (none without ``--lake``): a SQLite catalog under the data
    directory's ``work/`` (emptied with it by the next demo), Parquet beside it or on moto's S3 server."""
    if kind is None:
        yield {}
        return
    folder = data_dir / WORK_DIR / "lake"
    folder.mkdir(parents=True, exist_ok=True)
    catalog = {LAKE_CATALOG_URI_ENV: f"sqlite:///{folder / 'catalog.sqlite'}"}
    if kind == "local":
        yield {**catalog, LAKE_DATA_URI_ENV: str(folder / "data")}
        return
    from freight_pipeline.lake.local import running_s3

    with running_s3(own_process=True) as s3:
        yield {**catalog, **s3.env(prefix="demo")}


def _sync(label: str, data_dir: Path, backend: StorageBackend, verbose: bool, runs: list[DemoRun]) -> bool:
    """Run the sync job once and record it in ``runs``; False (after one line on stderr) when it failed."""
    say(f"demo: {label} ({DEFAULT_JOB}) ...")
    with shown_progress(os.environ.get(PASSWORD_ENV)):  # as `sync` shows it: a bar per stream, or lines
        outcome = execute_job(DEFAULT_JOB, data_dir, verbose=verbose, resources=NO_ALERTS)
    if not outcome.success:
        say(outcome.failure_line(f"demo: the {label}", os.environ.get(PASSWORD_ENV)))
        return False
    say(f"demo: {label} done in {outcome.seconds:.1f} s")
    runs.append(DemoRun(label, outcome, read_report(data_dir, backend)))
    return True
