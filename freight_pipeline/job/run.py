"""The sync job without Dagster: every stream, the warehouse checks, the marts and the publish.

The same work as the Dagster job ``freight_sync_job``, by the same cores in the same order, with the
same run log, cursors, build plan, checks and publish rule: a data directory can be run by either.
What it leaves out is Dagster's run machinery: importing Dagster and the definitions, and an event
log entry for each asset, check and step (about 400 stored events a run). With little to do, that
was most of a run's time (docs/performance.md). And two things are done differently:

* dbt is made ready in a worker process (:class:`~freight_pipeline.marts.worker.DbtWorker`) on the
  other core while the streams run, so that the build, when one is needed, starts with dbt loaded;
* a stream is a failure domain within the run: one that fails is logged and reported, the streams
  that do not read it go on, and the checks, the build and the publish follow with what the others
  wrote (in Dagster, where a failed step stops what depends on it, that takes a second run:
  ``defs.recovery``). The run then reports failure all the same.

Each invariant is checked once a run: the warehouse checks (keys, orphans: ``freight_pipeline.checks``)
run before the build, and one of ERROR severity that does not pass holds back the build and the
publish (readers keep the last publish), as a failed dbt test does; so the build leaves out the staging
tests of the same invariants (tagged ``warehouse_checked``: ``marts.project.WAREHOUSE_CHECKED_TAG``).
The Dagster job runs them (its asset checks report, its dbt tests hold back). The steps are reported
as they end (:class:`Step`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from freight_pipeline.checks.warehouse import Severity, describe_failure, warehouse_checks
from freight_pipeline.config import ServiceSettings
from freight_pipeline.marts.build import MartsBuild, PendingBuild, begin_build
from freight_pipeline.marts.project import WAREHOUSE_CHECKED_TAG
from freight_pipeline.marts.results import DbtBuildFailed
from freight_pipeline.marts.worker import DbtWorker
from freight_pipeline.sync.client_source import ClientSource
from freight_pipeline.sync.runner import fewer_collections, new_run_id, one_line_error, open_client, run_stream_async
from freight_pipeline.sync.settings import SyncSettings
from freight_pipeline.sync.streams import STREAMS, Progress, Stream
from freight_pipeline.warehouse.backend import Publication, StorageBackend
from freight_pipeline.warehouse.ddl import explained_out_of_memory
from freight_pipeline.warehouse.store import Warehouse, open_warehouse

CHECKS_STEP = "checks"
MARTS_STEP = "marts"
PUBLISH_STEP = "publish"


def stream_step(stream: str) -> str:
    """The step of a stream (also its Dagster asset's name and step key)."""
    return f"sync_{stream}"


@dataclass
class Step:
    """One step of a run, as it ended."""

    name: str
    status: str
    """``success``, ``failed`` or ``skipped``."""
    seconds: float
    line: str
    """What it did, or why it failed or did not run."""
    notes: list[str] = field(default_factory=list)
    """More to say, a line each: bad records, checks that did not pass, dbt's warnings, and what the run
    met of the service's behaviour (``StreamResult.notices``, each said once a run)."""


@dataclass
class JobReport:
    run_id: str
    steps: list[Step] = field(default_factory=list)
    marts: MartsBuild | None = None
    publication: Publication | None = None

    @property
    def failed(self) -> list[Step]:
        return [step for step in self.steps if step.status == "failed"]

    @property
    def failed_streams(self) -> list[str]:
        streams = {stream_step(stream.name): stream.name for stream in STREAMS}
        return [streams[step.name] for step in self.failed if step.name in streams]

    @property
    def success(self) -> bool:
        return not self.failed and self.publication is not None


StepListener = Callable[[Step], None]


class _Clock:
    """Seconds since it was made, or since the last lap."""

    def __init__(self) -> None:
        self.started = time.monotonic()

    def lap(self) -> float:
        now = time.monotonic()
        seconds, self.started = now - self.started, now
        return seconds


def run_job(
    service: ServiceSettings,
    data_dir: Path,
    settings: SyncSettings,
    backend: StorageBackend,
    worker: DbtWorker,
    *,
    run_id: str | None = None,
    progress: Progress | None = None,
    on_step: StepListener | None = None,
) -> JobReport:
    """Run the whole job on ``data_dir`` in ``backend``, the build in ``worker`` (started for this run and
    data directory, as early as possible; ended here); never raises for a failure of its own (see the
    report), only for an interruption. ``on_step`` hears of each step as it ends."""
    report = JobReport(run_id or new_run_id())

    def ended(step: Step) -> None:
        report.steps.append(step)
        if on_step is not None:
            on_step(step)

    with worker:
        clock = _Clock()
        try:
            with fewer_collections():
                pending = asyncio.run(_sync_and_check(service, data_dir, settings, backend, report.run_id,
                                                      progress, ended))
        except Exception as exc:  # the client or the working database could not be opened
            ended(Step("sync", "failed", clock.lap(), one_line_error(exc)))
            return report
        if pending is None:  # no stream wrote anything, or a check of ERROR severity failed
            if any(step.name == CHECKS_STEP for step in report.failed):
                for step in (MARTS_STEP, PUBLISH_STEP):
                    ended(Step(step, "skipped", 0.0, "not run: a check of ERROR severity did not pass; readers keep "
                               "the last publish"))
            return report
        clock.lap()
        try:
            report.marts = pending.run(worker, data_dir, backend)
        except Exception as exc:
            first, *details = (str(exc) if isinstance(exc, DbtBuildFailed) else one_line_error(exc)).splitlines()
            ended(Step(MARTS_STEP, "failed", clock.lap(), first, details))
            return report
        ended(Step(MARTS_STEP, "success", clock.lap(), report.marts.line(), list(report.marts.warnings)))
    try:
        report.publication = backend.publish(Path(data_dir), report.run_id)
    except Exception as exc:
        ended(Step(PUBLISH_STEP, "failed", clock.lap(), one_line_error(exc)))
        return report
    ended(Step(PUBLISH_STEP, "success", clock.lap(), report.publication.summary()))
    return report


async def _sync_and_check(
    service: ServiceSettings,
    data_dir: Path,
    settings: SyncSettings,
    backend: StorageBackend,
    run_id: str,
    progress: Progress | None,
    ended: StepListener,
) -> PendingBuild | None:
    """Every stream in order, then, when one of them wrote, the checks and the build's plan (on the
    same connection). None when none wrote (nothing new to build or publish), or when a check of ERROR
    severity did not pass (nothing is built on a broken guarantee, nor published)."""
    async with open_client(service, settings) as client:
        source = ClientSource(client)
        with explained_out_of_memory("the sync", backend.duckdb_settings), \
                open_warehouse(data_dir, backend) as warehouse:
            not_run: set[str] = set()
            said: set[str] = set()
            wrote = False
            for stream in STREAMS:
                waits_for = [name for name in stream.reads_first if name in not_run]
                if waits_for:
                    ended(Step(stream_step(stream.name), "skipped", 0.0,
                               f"not run: it reads the {', '.join(waits_for)} stream first, which did not run"))
                    not_run.add(stream.name)
                    continue
                step = await _run_stream(stream, source, warehouse, settings, run_id, progress, said)
                ended(step)
                if step.status == "failed":
                    not_run.add(stream.name)
                wrote = wrote or step.status == "success"
            if not wrote:
                return None
            checks = _checks(warehouse)
            ended(checks)
            if checks.status == "failed":
                return None  # a broken guarantee: nothing is built on it, nor published
            return begin_build(warehouse, run_id, leave_out=[f"tag:{WAREHOUSE_CHECKED_TAG}"])


async def _run_stream(
    stream: Stream,
    source: ClientSource,
    warehouse: Warehouse,
    settings: SyncSettings,
    run_id: str,
    progress: Progress | None,
    said: set[str],
) -> Step:
    """The step of one stream: ``skipped`` when it is switched off, ``failed`` when it raised (logged in
    ``sync_runs`` as failed; the other streams go on). Its notices not yet in ``said`` are its notes too."""
    clock = _Clock()
    try:
        result = await run_stream_async(stream.name, source, warehouse, settings, run_id, progress)
    except Exception as exc:
        return Step(stream_step(stream.name), "failed", clock.lap(), one_line_error(exc))
    bad = result.bad_records()
    status = "skipped" if "skipped" in result.extra else "success"
    notices = [notice for notice in result.notices if notice not in said]
    said.update(notices)
    notes = [*([bad] if bad else []), *result.shape_changes(), *notices]
    return Step(stream_step(stream.name), status, clock.lap(), result.summary(), notes)


def _checks(warehouse: Warehouse) -> Step:
    """Every warehouse check on the working database: failed when one of ERROR severity does not pass."""
    clock = _Clock()
    checks = warehouse_checks()
    found = [(check, check.evaluate(warehouse.con)) for check in checks]
    failed = [(check, result) for check, result in found if not result.passed]
    errors = sum(check.severity is Severity.ERROR for check, _ in failed)
    line = (f"{len(checks)} passed" if not failed
            else f"{len(failed)} of {len(checks)} did not pass ({errors} of ERROR severity)")
    return Step(CHECKS_STEP, "failed" if errors else "success", clock.lap(), line,
                [describe_failure(check, result) for check, result in failed])
