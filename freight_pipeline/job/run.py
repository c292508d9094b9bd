"""The job, the one engine: every stream, the warehouse checks, the marts and the publish.

``freight-pipeline sync`` runs it as it is; the Dagster job runs it inside one op
(``defs.freight_job``), which turns each step it reports (:class:`Step`, with its figures) into
materializations and check results. So both ways share one order, run log, build and publish rule.

* dbt is made ready in a worker process (:class:`~freight_pipeline.marts.worker.DbtWorker`) on the
  other core while the streams run, so that the build, when one is needed, starts with dbt loaded;
  a build whose key's statements are kept for this catalog replays them on the run's own connection,
  which stays open from the first stream to the build (``marts.kept_builds``). When the worker starts
  is the worker's :class:`~freight_pipeline.marts.worker.Start`: at once after a run that built; after
  a run that changed nothing, once this run's streams change something (the first batch that changes a
  shipment, through ``Writes.on_change``), never when they change nothing; in a first sync not before
  the first stream has ended, nor then when the build it would plan replays; not at all when the last
  build expected a replay. The worker ends as soon as the run knows dbt has nothing to do (a replay, no
  build), so that its memory is back before the publish;
* a stream is a failure domain within the run: one that fails is logged and reported, the streams
  that do not read it go on, and the checks, the build and the publish follow with what the others
  wrote. The run then reports failure all the same.
* a run can do part of the job (what a Dagster selection picks): some streams (``streams``), with or
  without the build (``marts``) and the publish (``publish``).

Each invariant is checked once a run: the warehouse checks (keys, orphans: ``freight_pipeline.checks``)
run before the build, and one of ERROR severity that does not pass holds back the build and the
publish (readers keep the last publish), as a failed dbt test does; so the build leaves out the staging
tests of the same invariants (tagged ``warehouse_checked``: ``marts.project.WAREHOUSE_CHECKED_TAG``).
The steps are reported as they end (:class:`Step`).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from freight_pipeline.alerts.notify import Alerted, after_run, send_held
from freight_pipeline.alerts.problems import SYNC_STEP
from freight_pipeline.checks import queries
from freight_pipeline.checks.warehouse import (
    CheckResult,
    Severity,
    WarehouseCheck,
    describe_failure,
    evaluate_checks,
    warehouse_checks,
)
from freight_pipeline.client.errors import AuthenticationError, FreightConnectionError
from freight_pipeline.config import AlertSettings, MartsSettings, ServiceSettings, Settings
from freight_pipeline.marts.build import MartsBuild, PendingBuild, begin_build, planned_build
from freight_pipeline.marts.plan import full_check_due
from freight_pipeline.marts.project import WAREHOUSE_CHECKED_TAG
from freight_pipeline.marts.results import DbtBuildFailed
from freight_pipeline.marts.worker import DbtWorker, Start
from freight_pipeline.normalize.tables import TABLES_BY_NAME
from freight_pipeline.process_end import stop_asked, stop_requested
from freight_pipeline.sync.client_source import ClientSource
from freight_pipeline.sync.progress import Progress
from freight_pipeline.sync.rebuild import DEFAULT_BATCH, REBUILD_STATE, rebuild
from freight_pipeline.sync.result import StreamResult
from freight_pipeline.sync.runner import (
    fewer_collections,
    new_run_id,
    one_line_error,
    open_client,
    run_async,
    run_stream_async,
)
from freight_pipeline.sync.settings import SyncSettings
from freight_pipeline.sync.streams import SHIPMENTS, STREAM_OF_STEP, STREAMS, Stream, stream_step
from freight_pipeline.warehouse import meta
from freight_pipeline.warehouse.backend import Publication, StorageBackend
from freight_pipeline.warehouse.ddl import explained_out_of_memory, row_counts
from freight_pipeline.warehouse.history import HISTORY_TABLES
from freight_pipeline.warehouse.paths import write_last_job_run
from freight_pipeline.warehouse.run_log import SKIPPED
from freight_pipeline.warehouse.store import Warehouse, open_warehouse
from freight_pipeline.warehouse.writer_lock import WarehouseBusy, writer_lock

CHECKS_STEP = "checks"
MARTS_STEP = "marts"
PUBLISH_STEP = "publish"
REBUILD_STEP = "rebuild"
FAILED_STEP = "failed_step"
"""In Dagster, the metadata of a failed run's ``Failure`` naming the first failed step (whose line is
the failure's description): what ``freight-pipeline sync --dagster`` says failed."""
FAILED_STEPS = "failed_steps"
"""In Dagster, the metadata of a failed run's ``Failure`` naming every failed step (of which the streams' tables
hold their last successful sync: what ``sync --dagster`` says of a publish despite them)."""
CHECKED_BY_THE_RUN = (f"tag:{WAREHOUSE_CHECKED_TAG}",)
"""The data tests a build leaves out: the warehouse checks run before it hold the same invariants."""


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
    stream: StreamFigures | None = None
    """A stream's step that ran: what it did, and its tables' rows after it."""
    checks: list[tuple[WarehouseCheck, CheckResult]] = field(default_factory=list)
    """The checks' step: every check and its result."""
    off: bool = False
    """A stream's step skipped because the stream is switched off (not because another did not run)."""
    unreachable: bool = False
    """A stream's step that failed because the service refused the credentials or could not be reached
    (:func:`service_unreachable`)."""
    marts: MartsBuild | None = None
    """The build's step that succeeded: what it did (dbt's results of each node)."""
    publication: Publication | None = None
    """The publish's step that succeeded."""

    def lines(self, width: int = 22) -> list[str]:
        """The step as the run's output shows it: a line (name, seconds, what it did), then its notes. A
        failure's reason is said once, at the end of the run (``failed (see below)``)."""
        seconds = "" if self.status == "skipped" else f"{self.seconds:6.2f} s"
        line = "failed (see below)" if self.status == "failed" else self.line
        return [f"  {self.name:<{width}} {seconds:>8}  {line}",
                *(f"  {'':<{width}} {'':>8}  {note}" for note in self.notes)]


@dataclass
class StreamFigures:
    """What a stream's step did, with its tables' rows after it (read on the run's connection, when
    the run was asked to count them)."""

    result: StreamResult
    rows: dict[str, int] = field(default_factory=dict)
    """Rows of each table the stream writes (``freight`` and ``freight_history`` names qualified)."""
    newest_change: dt.datetime | None = None


@dataclass
class JobReport:
    run_id: str
    steps: list[Step] = field(default_factory=list)
    marts: MartsBuild | None = None
    publication: Publication | None = None
    publish: bool = True
    """Whether the run was to publish (a run of part of the job may not be)."""
    skipped: str | None = None
    """Why the run did nothing: another run writes the warehouse (``warehouse.writer_lock``)."""
    alerted: Alerted | None = None
    """What the run did with its problems (None: no alert destination set)."""

    @property
    def failed(self) -> list[Step]:
        return [step for step in self.steps if step.status == "failed"]

    @property
    def failed_streams(self) -> list[str]:
        streams = {stream_step(stream.name): stream.name for stream in STREAMS}
        return [streams[step.name] for step in self.failed if step.name in streams]

    @property
    def success(self) -> bool:
        return self.skipped is None and not self.failed and (self.publication is not None or not self.publish)


StepListener = Callable[[Step], None]


@dataclass(frozen=True)
class Alerting:
    """Where a run's problems go, and how old the last successful sync may be before it is one."""

    settings: AlertSettings
    max_sync_age: dt.timedelta
    dagster_run: bool = False
    """The run is a Dagster run: its messages link to it in the UI (``dagster_url``)."""

    @classmethod
    def of(cls, settings: Settings, *, dagster_run: bool = False) -> Alerting:
        return cls(settings.alerts, settings.schedules.max_sync_age, dagster_run)


def _alert(report: JobReport, data_dir: Path, backend: StorageBackend, alerting: Alerting | None,
           steps: Sequence[Step] | None = None, *, hold: bool = False) -> Alerted | None:
    """The run's problems (of ``steps``; None: every step of the run) recorded and sent, or held
    (``alerts.notify.after_run``); whatever goes wrong there is said in the report's ``alerted`` line, never raised
    into the run."""
    if alerting is None:
        return None
    try:
        return after_run(report.steps if steps is None else steps, report.run_id, data_dir, backend,
                         alerting.settings, alerting.max_sync_age, dagster_run=alerting.dagster_run, hold=hold)
    except Exception as exc:
        return Alerted(f"alerts: the run's problems could not be looked at ({one_line_error(exc)}); the next run "
                       "looks again")


def _publish_and_alert(report: JobReport, data_dir: Path, backend: StorageBackend, clock: _Clock,
                       ended: StepListener, alerting: Alerting | None, built: bool, record: _RunRecord) -> None:
    """The publish (when ``built``) and the run's look at its problems. A run that publishes looks first, its
    messages held, so that the published copy's ``freight_meta.alerts`` is this run's look (was: the run before's);
    then, after the publish, at the publish alone (its failure, or the end of one before), and the messages of both
    go once the data is published."""
    _unless_stopped(report)  # a stop a step took for its own failure (its query interrupted) ends the run as stopped
    before = _alert(report, data_dir, backend, alerting, hold=True) if built and report.publish else None
    if built:
        _publish(report, data_dir, backend, clock, ended)
    record.write(finished=True)
    if before is None or alerting is None:  # no publish, or no destination: one look, after everything
        report.alerted = _alert(report, data_dir, backend, alerting)
        return
    published = [step for step in report.steps if step.name == PUBLISH_STEP]
    after = _alert(report, data_dir, backend, alerting, published, hold=True)
    report.alerted = send_held(before, after, data_dir, alerting.settings)


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
    streams: Collection[str] | None = None,
    marts: bool = True,
    publish: bool = True,
    count_rows: bool = False,
    alerting: Alerting | None = None,
) -> JobReport:
    """Run the job on ``data_dir`` in ``backend``, the build in ``worker`` (started for this run and
    data directory, as early as possible; ended here); never raises for a failure of its own (see the
    report), only for an interruption. ``on_step`` hears of each step as it ends. While another run writes
    the warehouse (holds its writer lock), nothing runs: ``report.skipped`` says which.

    Part of the job: only ``streams`` (None: every stream; empty: none, and the checks, build and
    publish run on what the working database holds), without the build (``marts`` False) or the
    publish (``publish`` False). The checks always run before a build or a publish. ``count_rows``: each
    stream's step also counts the rows of its tables (``StreamFigures.rows``; Dagster shows them). ``alerting``:
    where the run's problems are sent (``alerts.notify.after_run``, at its end, under its writer lock)."""
    report = JobReport(run_id or new_run_id(), publish=publish)
    planned = [stream_step(stream.name) for stream in STREAMS if streams is None or stream.name in streams]

    def steps(warehouse: Warehouse, ended: StepListener) -> tuple[bool, PendingBuild | None]:
        return run_async(_sync_and_check(service, warehouse, settings, report.run_id, progress, ended,
                                         None if streams is None else set(streams), marts, count_rows, worker))

    # an exception of the steps: the client or the working database could not be opened, or the checks raised
    return _run_steps(report, data_dir, backend, worker, [*planned, *_planned_after(marts, publish)], "the sync",
                      steps, lambda: _failed_step(report), on_step=on_step, alerting=alerting, marts=marts)


def run_rebuild(
    data_dir: Path,
    settings: SyncSettings,
    backend: StorageBackend,
    worker: DbtWorker,
    *,
    run_id: str | None = None,
    batch_size: int = DEFAULT_BATCH,
    restart: bool = False,
    progress: Progress | None = None,
    on_step: StepListener | None = None,
    marts: bool = True,
    publish: bool = True,
    workers: int | None = None,
    everything: bool = False,
    rezone: bool = False,
    alerting: Alerting | None = None,
) -> JobReport:
    """The job with a rebuild in place of the streams (``sync.rebuild``: the ``freight`` tables re-derived from
    the raw records held by ``workers`` processes, no request to the service; what the mapping's change since
    the rows were derived can touch, or ``everything``), then the same checks, a full
    build of the marts (``--full-refresh``) and the publish as :func:`run_job`'s, under the same writer lock;
    never raises for a failure of its own."""
    report = JobReport(run_id or new_run_id(), publish=publish)

    def steps(warehouse: Warehouse, ended: StepListener) -> tuple[bool, PendingBuild | None]:
        return _rebuild_and_check(warehouse, settings, report.run_id, batch_size, restart, progress, ended, marts,
                                  worker.marts, workers, everything, rezone)

    # an exception of the steps: the working database could not be opened
    return _run_steps(report, data_dir, backend, worker, [REBUILD_STEP, *_planned_after(marts, publish)],
                      "the rebuild", steps, lambda: REBUILD_STEP, on_step=on_step, alerting=alerting, marts=marts,
                      ready=lambda: worker.get_ready(marts))  # a rebuild's build is a full one


def _run_steps(
    report: JobReport, data_dir: Path, backend: StorageBackend, worker: DbtWorker, planned: Sequence[str], what: str,
    steps: Callable[[Warehouse, StepListener], tuple[bool, PendingBuild | None]], failed_step: Callable[[], str], *,
    on_step: StepListener | None, alerting: Alerting | None, marts: bool, ready: Callable[[], None] = lambda: None,
) -> JobReport:
    """What :func:`run_job` and :func:`run_rebuild` share: under the warehouse's writer lock (held by another run:
    nothing runs, ``report.skipped`` says which), the run's record (:class:`_RunRecord`, its ``planned`` steps),
    ``ready()``, then ``steps`` on the working database (``what`` names them in an out-of-memory error; each step
    told to ``ended``), unless a stop came the build, then the publish and the look at the run's problems; an
    exception of the steps' block fails the step ``failed_step()`` names."""
    with worker, _writing(report, data_dir) as writing:
        if not writing:
            return report
        with _RunRecord(report, data_dir, planned) as record:
            ended = _recorded(report, on_step, record)
            ready()
            clock = _Clock()
            try:
                with fewer_collections(), explained_out_of_memory(what, backend.duckdb_settings), \
                        open_warehouse(data_dir, backend) as warehouse:
                    go_on, pending = steps(warehouse, ended)
                    _unless_stopped(report)
                    built = _build(report, go_on, pending, worker, warehouse, data_dir, backend, clock, ended,
                                   marts=marts)
            except Exception as exc:
                ended(Step(failed_step(), "failed", clock.lap(), one_line_error(exc)))
                built = False
            _publish_and_alert(report, data_dir, backend, clock, ended, alerting, built, record)
    return report


class StopNoticed(KeyboardInterrupt):
    """A stop that did not end the run where it came, noticed between its steps (:func:`_unless_stopped`):
    ``failed``, the steps that failed so far, of which the last is the one it came in when a query took it for its
    own error (none: it came after them)."""

    def __init__(self, failed: Sequence[str]) -> None:
        super().__init__()
        self.failed = list(failed)


def _unless_stopped(report: JobReport) -> None:
    """:class:`StopNoticed` when a stop came that did not end the run where it came (``process_end.stop_requested``:
    its exception lost in a garbage collector's callback, or taken by a query for its own error): no build, no
    publish after a stop (nor after one asked of the thread the run is in: ``process_end.ask_stop``)."""
    if stop_requested() or stop_asked():
        raise StopNoticed([step.name for step in report.failed])


LOGGED_AS = {**STREAM_OF_STEP, MARTS_STEP: meta.BUILD_STREAM, REBUILD_STEP: REBUILD_STATE}
"""The job's steps ``sync_runs`` logs runs of (a stream's, the build's, the rebuild's) -> the stream it logs them as;
the record of the run (:class:`_RunRecord`) says how the others went (the checks, the publish), and how a rebuild
went that failed before its row was logged (its zone refused, its database not opened: :data:`LOGGED_LATE`)."""
LOGGED_LATE = frozenset({REBUILD_STEP})
"""Steps of :data:`LOGGED_AS` that can fail before their ``sync_runs`` row is logged: the record keeps their line
(``status`` leaves it out when the run log holds their row)."""


def _planned_after(marts: bool, publish: bool) -> list[str]:
    """The steps a run plans after its streams or its rebuild: the checks, then the build and the publish, if asked."""
    return [CHECKS_STEP, *([MARTS_STEP] if marts else []), *([PUBLISH_STEP] if publish else [])]


class _RunRecord:
    """The run as ``status`` reads it (``paths.LAST_JOB_RUN``; ``run_log.runs_after_publish``), written as it starts,
    under the writer lock (its id, the steps it plans; its process is the lock's), as each step ends, and as it
    ends: each step of the job's own (not a stream's nor the build's, which ``sync_runs`` logs) that failed or did
    not run, with its line, and, when a stop (or anything else raised) ended it first, why (``stopped``). A run
    whose record says it runs while the writer lock is not held by it is one whose process is gone (killed, crashed)
    before it ended. Nothing of the run fails on it: a full disk, say, was said by the run's own line and log
    already."""

    def __init__(self, report: JobReport, data_dir: Path, planned: Sequence[str]) -> None:
        self.report, self.data_dir = report, data_dir
        self.started_at = dt.datetime.now(dt.UTC).isoformat()
        self.planned = [{"step": step, "logged_as": LOGGED_AS.get(step)} for step in planned]
        self.finished = False

    def __enter__(self) -> _RunRecord:
        self.write()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if exc is not None and not self.finished:  # stopped (Ctrl-C, SIGTERM, SIGHUP), or a failure of its own raised
            self.write(stopped=one_line_error(exc))

    def write(self, *, finished: bool = False, stopped: str | None = None) -> None:
        """The record as the run stands (``finished``: it ended; ``stopped``: a stop ended it, why)."""
        self.finished = self.finished or finished or stopped is not None
        steps = [{"step": step.name, "status": step.status, "line": step.line} for step in self.report.steps
                 if step.status != "success" and (step.name not in LOGGED_AS or step.name in LOGGED_LATE)]
        with suppress(OSError):
            write_last_job_run(self.data_dir, {
                "run_id": self.report.run_id, "started_at": self.started_at, "planned": self.planned,
                "ended": [step.name for step in self.report.steps],
                "finished_at": dt.datetime.now(dt.UTC).isoformat() if self.finished else None,
                "success": False if stopped is not None else self.report.success if self.finished else None,
                "stopped": stopped, "steps": steps})


@contextmanager
def _writing(report: JobReport, data_dir: Path) -> Iterator[bool]:
    """The warehouse's writer lock held for the block by the report's run (yields True; a command that
    waited for it holds it already), or ``report.skipped`` said which run holds it (False)."""
    with ExitStack() as held:
        try:
            held.enter_context(writer_lock(data_dir, report.run_id))
        except WarehouseBusy as busy:
            report.skipped = str(busy)
            yield False
            return
        yield True


def _failed_step(report: JobReport) -> str:
    """The step an exception of the sync's block ended: ``sync`` before any stream's step (nothing could be
    opened), else the first of the checks and the marts not reported yet."""
    said = {step.name for step in report.steps}
    if not said:
        return SYNC_STEP
    return next((name for name in (CHECKS_STEP, MARTS_STEP) if name not in said), SYNC_STEP)


def _recorded(report: JobReport, on_step: StepListener | None, record: _RunRecord) -> StepListener:
    """What hears each step as it ends: the ``report`` keeps it, the run's ``record`` says it ended, then ``on_step``
    is told."""

    def ended(step: Step) -> None:
        report.steps.append(step)
        record.write()
        if on_step is not None:
            on_step(step)

    return ended


def _rebuild_and_check(
    warehouse: Warehouse, settings: SyncSettings, run_id: str, batch_size: int, restart: bool,
    progress: Progress | None, ended: StepListener, marts: bool, mart_settings: MartsSettings,
    workers: int | None = None, everything: bool = False, rezone: bool = False,
) -> tuple[bool, PendingBuild | None]:
    """The rebuild's step, then (when it succeeded) the checks and a full build's plan, as for a sync."""
    clock = _Clock()
    try:
        found = rebuild(warehouse, run_id, settings, batch_size=batch_size, restart=restart, progress=progress,
                        workers=workers, everything=everything, rezone=rezone)
    except Exception as exc:
        ended(Step(REBUILD_STEP, "failed", clock.lap(), one_line_error(exc)))
        return False, None
    ended(Step(REBUILD_STEP, "success", clock.lap(), found.line()))
    # as after a sync: the history compared on the shipments whose rows the rebuild wrote, on every one when
    # a full check is due
    full_check = full_check_due(warehouse, marts=mart_settings)
    checks = _checks(warehouse, changed_only=not full_check)
    ended(checks)
    if checks.status == "failed":
        return False, None
    if not marts:
        return True, None
    return True, begin_build(warehouse, run_id, leave_out=CHECKED_BY_THE_RUN, full_refresh=True,
                             full_check=full_check, marts=mart_settings)


def _build(
    report: JobReport, go_on: bool, pending: PendingBuild | None, worker: DbtWorker, warehouse: Warehouse,
    data_dir: Path, backend: StorageBackend, clock: _Clock, ended: StepListener, *, marts: bool,
) -> bool:
    """The build (when one is pending) after the streams and checks, on the open ``warehouse`` (closed when
    dbt builds); whether the run goes on to the publish."""
    if not go_on:  # no stream wrote anything, or a check of ERROR severity failed
        worker.close()
        if any(step.name == CHECKS_STEP for step in report.failed):
            held_back = [name for name, asked in ((MARTS_STEP, marts), (PUBLISH_STEP, report.publish)) if asked]
            for step in held_back:
                ended(Step(step, "skipped", 0.0, "not run: a check of ERROR severity did not pass; readers keep "
                           "the last publish"))
        return False
    clock.lap()
    if pending is None:  # no build asked for
        worker.close()
        return True
    try:
        report.marts = pending.run(worker, warehouse, data_dir, backend)
    except Exception as exc:
        first, *details = (str(exc) if isinstance(exc, DbtBuildFailed) else one_line_error(exc)).splitlines()
        ended(Step(MARTS_STEP, "failed", clock.lap(), first, details))
        if report.publish:  # said, as after a check that held it back (was: no line at all)
            ended(Step(PUBLISH_STEP, "skipped", 0.0, "not run: the build failed; readers keep the last publish"))
        return False
    ended(Step(MARTS_STEP, "success", clock.lap(), report.marts.line(), list(report.marts.warnings),
               marts=report.marts))
    return True


def _publish(report: JobReport, data_dir: Path, backend: StorageBackend, clock: _Clock,
             ended: StepListener) -> JobReport:
    """The publish, when the run is to publish."""
    if not report.publish:
        return report
    try:
        report.publication = backend.publish(Path(data_dir), report.run_id)
    except Exception as exc:
        ended(Step(PUBLISH_STEP, "failed", clock.lap(), one_line_error(exc)))
        return report
    ended(Step(PUBLISH_STEP, "success", clock.lap(), report.publication.summary(), publication=report.publication))
    return report


async def _sync_and_check(
    service: ServiceSettings,
    warehouse: Warehouse,
    settings: SyncSettings,
    run_id: str,
    progress: Progress | None,
    ended: StepListener,
    selected: set[str] | None,
    marts: bool,
    count_rows: bool,
    worker: DbtWorker,
) -> tuple[bool, PendingBuild | None]:
    """Every stream in order (of ``selected``, when given), then, when one of them wrote or none was
    selected, the checks and the build's plan (on the same connection; no plan when no ``marts``); ``worker``
    told when the first stream has ended (:meth:`DbtWorker.get_ready`).
    Whether the run goes on: not when none wrote (nothing new to build or publish), nor when a check
    of ERROR severity did not pass (nothing is built on a broken guarantee, nor published)."""
    async with open_client(service, settings) as client:
        source = ClientSource(client)
        not_run: set[str] = set()
        said: set[str] = set()
        wrote = not selected and selected is not None  # no stream to run: what the database holds
        with _starting_dbt_when_needed(warehouse, worker, marts):
            for stream in STREAMS:
                if selected is not None and stream.name not in selected:
                    continue
                waits_for = [name for name in stream.reads_first if name in not_run]
                if waits_for:
                    ended(Step(stream_step(stream.name), "skipped", 0.0,
                               f"not run: it reads the {', '.join(waits_for)} stream first, which did not run"))
                    not_run.add(stream.name)
                    continue
                step = await _run_stream(stream, source, warehouse, settings, run_id, progress, said)
                if count_rows and step.stream is not None:
                    step.stream.rows, step.stream.newest_change = _rows(warehouse, stream)
                ended(step)
                if worker.held:  # dbt loads now when the build will need it (a first sync: asked once, here)
                    worker.get_ready(marts and _dbt_needed(warehouse, worker))
                if step.status == "failed":
                    not_run.add(stream.name)
                wrote = wrote or step.status == "success"
        if not wrote:
            return False, None
        full_check = full_check_due(warehouse, marts=worker.marts)
        checks = _checks(warehouse, changed_only=not full_check)
        ended(checks)
        if checks.status == "failed":
            return False, None  # a broken guarantee: nothing is built on it, nor published
        if not marts:
            return True, None
        return True, begin_build(warehouse, run_id, leave_out=CHECKED_BY_THE_RUN, full_check=full_check,
                                 marts=worker.marts)


@contextmanager
def _starting_dbt_when_needed(warehouse: Warehouse, worker: DbtWorker, marts: bool) -> Iterator[None]:
    """For the streams of a run whose worker starts when needed (:attr:`Start.WHEN_NEEDED`): started before them
    when a build is due already, else by the first batch that changes a shipment (from the writer's thread), or
    asked again at each stream's end (as a held worker is, in the loop)."""
    if not (marts and worker.held and worker.starts is Start.WHEN_NEEDED):
        yield
        return
    worker.get_ready(_dbt_needed(warehouse, worker))
    warehouse.writes.on_change = worker.get_ready
    try:
        yield
    finally:
        warehouse.writes.on_change = None


def _dbt_needed(warehouse: Warehouse, worker: DbtWorker) -> bool:
    """Whether the build the run would plan now needs dbt: not when its statements are kept for the working
    database's catalog as it is (another data directory's build of the same key on a new database)."""
    try:
        full_check = full_check_due(warehouse, marts=worker.marts)
        pending = planned_build(warehouse, CHECKED_BY_THE_RUN, full_check=full_check, marts=worker.marts)
    except duckdb.Error:  # the streams after this one run all the same; the build's own plan says what failed
        return True
    return pending.plan.run and pending.replayable(worker) is None


def _rows(warehouse: Warehouse, stream: Stream) -> tuple[dict[str, int], dt.datetime | None]:
    """Rows of each table ``stream`` writes (the shipments stream: the history tables too), and the
    newest source change the warehouse holds for it."""
    specs = [TABLES_BY_NAME[table] for table in stream.tables]
    if stream.name == SHIPMENTS.name:
        specs.extend(HISTORY_TABLES)
    return row_counts(warehouse.con, specs), queries.newest_source_change(warehouse.con, stream.name)


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
        return Step(stream_step(stream.name), "failed", clock.lap(), one_line_error(exc),
                    unreachable=service_unreachable(exc))
    bad = result.bad_records()
    off = SKIPPED in result.extra
    notices = [notice for notice in result.notices if notice not in said]
    said.update(notices)
    notes = [*([bad] if bad else []), *result.shape_changes(), *result.null_jumps(), *notices]
    return Step(stream_step(stream.name), "skipped" if off else "success", clock.lap(), result.summary(), notes,
                stream=StreamFigures(result), off=off)


def service_unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` (or what it was raised from) is the service refusing the credentials or not reached at all."""
    while exc is not None:
        if isinstance(exc, AuthenticationError | FreightConnectionError):
            return True
        exc = exc.__cause__  # type: ignore[assignment]
    return False


def _checks(warehouse: Warehouse, *, changed_only: bool) -> Step:
    """Every warehouse check on the working database: failed when one of ERROR severity does not pass
    (``changed_only``: no full check is due, so the history is compared on the changed shipments)."""
    clock = _Clock()
    checks = warehouse_checks(changed_only=changed_only)
    found = evaluate_checks(warehouse.con, checks)
    failed = [(check, result) for check, result in found if not result.passed]
    errors = sum(check.severity is Severity.ERROR for check, _ in failed)
    line = (f"{len(checks)} passed" if not failed
            else f"{len(failed)} of {len(checks)} did not pass ({errors} of ERROR severity)")
    return Step(CHECKS_STEP, "failed" if errors else "success", clock.lap(), line,
                [describe_failure(check, result) for check, result in failed], checks=found)
