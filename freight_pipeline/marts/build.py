"""Building the marts of a data directory: the build's entry in the run log, and the build: the statements
dbt sent for a build of the same key on the same catalog, replayed on the run's own connection
(:mod:`~freight_pipeline.marts.kept_builds`), else dbt in the worker process made ready while the sync ran
(:class:`~freight_pipeline.marts.worker.DbtWorker`).
The one dbt build flow: the job runs it however it is started (``job.run``; in Dagster, ``defs.freight_job``).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

from freight_pipeline.config import MartsSettings
from freight_pipeline.cursors import each_closed
from freight_pipeline.marts.kept_builds import (
    KeptBuild,
    any_failed,
    catalog_digest,
    kept_build,
    replay_models,
    run_tests,
    write_results,
)
from freight_pipeline.marts.plan import (
    BuildPlan,
    batch_key,
    full_check_due,
    last_full_check,
    next_incremental,
    plan_build,
    project_fingerprint,
    record_build,
)
from freight_pipeline.marts.project import (
    DBT_PROJECT_DIR,
    LOG_FILE_LEVEL,
    RUN_RESULTS,
    dbt_build_args,
    vars_args,
)
from freight_pipeline.marts.results import (
    DbtBuildFailed,
    NodeResult,
    build_summary,
    build_warnings,
    first_error_line,
    node_results,
    read_run_results,
)
from freight_pipeline.marts.worker import DbtWorker, WorkerReply
from freight_pipeline.sync.runner import one_line_error
from freight_pipeline.warehouse import meta
from freight_pipeline.warehouse.backend import StorageBackend
from freight_pipeline.warehouse.ddl import catalog_cursors
from freight_pipeline.warehouse.records import RunRecord
from freight_pipeline.warehouse.store import Warehouse, open_warehouse


def build_started(warehouse: Warehouse, record: RunRecord) -> None:
    """Log the build ``record`` (of stream ``dbt_build`` of ``freight_meta.sync_runs``) as running from now."""
    record.started_at = dt.datetime.now(dt.UTC)
    warehouse.run_log.record_run(record)


def build_finished(warehouse: Warehouse, record: RunRecord, error: BaseException | None) -> None:
    """Log the build ``record`` as ended: failed with ``error``, else a success."""
    if error is not None:
        record.status, record.error = "failed", one_line_error(error)
    else:
        record.status = "success"
    record.finished_at = dt.datetime.now(dt.UTC)
    warehouse.run_log.record_run(record)


@dataclass
class MartsBuild:
    """What the marts' build of a run did."""

    plan: BuildPlan
    summary: str | None = None
    """``37 models, 114 data tests: 114 passed``; None when no build ran."""
    warnings: list[str] = field(default_factory=list)
    covered: int = 0
    """Changed shipments the build covered (they are no longer pending)."""
    seconds: float = 0.0
    nodes: list[NodeResult] = field(default_factory=list)
    """dbt's result of each node the build ran (empty when none ran)."""

    def line(self) -> str:
        """One line for the run's output."""
        if self.summary is None:
            return f"not run: {self.plan.reason}"
        return f"{self.plan.reason}: {self.summary} ({self.covered:,} changed shipments now covered)"


@dataclass(frozen=True)
class PreparedTests:
    """The data tests of an incremental build to compile ahead: its batch key, the ``dbt compile`` that
    selects the same tests (``resource_type:test`` less the build's exclusions) and its environment."""

    key: str
    args: list[str]
    env: dict[str, str]

    @classmethod
    def of(cls, fingerprint: str, base_args: Sequence[str], left_out: Sequence[str],
           marts: MartsSettings | None = None) -> Self:
        plan = next_incremental()
        build_args = [*base_args, *plan.args, *left_out]
        excluded = [arg for i, arg in enumerate(build_args) if build_args[i - 1:i] == ["--exclude"]]
        args = ["compile", "--select", "resource_type:test", *LOG_FILE_LEVEL, *vars_args(marts),
                *(arg for selector in excluded for arg in ("--exclude", selector))]
        return cls(batch_key(DBT_PROJECT_DIR, fingerprint, build_args, plan.env), args, plan.env)


@dataclass
class PendingBuild:
    """The build a run's plan asks for, logged as running (``record``) when it runs."""

    plan: BuildPlan
    fingerprint: str
    args: list[str]
    started: dt.datetime
    record: RunRecord | None
    """What the build is logged as in ``sync_runs`` (None: no build runs): as running once it runs, in the block that
    logs how it ended, a stop included (logged as running when planned, a stop before it ran left it running for
    ever, which ``status`` read as a build whose process is gone)."""
    full_check: bool = True
    """The run is a full check: the build tests every row, and its success records the full check."""
    batch_key: str | None = None
    """The key of the build's data tests, which run batched after its models once a build of the key kept
    them (``marts.worker``, "Batched tests"); None: no build runs."""
    prepare: PreparedTests | None = None
    """For a build of another kind: the tests of the usual next build, for the worker to compile and
    keep after this build's success, so that the first incremental build batches them too."""
    catalog: str | None = None
    """The working database's catalog as the build begins (``kept_builds.catalog_digest``): a build of the
    key kept for this catalog replays, else dbt's statements are kept with it."""

    @property
    def next_key(self) -> str | None:
        """The batch key of the usual next build (an incremental one's is its own)."""
        return self.batch_key if self.plan.changed_rows else self.prepare.key if self.prepare else None

    def run(self, worker: DbtWorker, warehouse: Warehouse, data_dir: Path, backend: StorageBackend) -> MartsBuild:
        """Run the build: the statements kept for its key on this catalog, replayed on the open ``warehouse``
        (``marts.kept_builds``), else dbt in ``worker`` (told no command is needed when the plan asks for
        none), the warehouse closed meanwhile (dbt opens the file); log how it ended and, after a success,
        what it covered. DbtBuildFailed when it fails: the run log says so, and the publish refuses until a
        build succeeds."""
        if self.record is None:
            worker.close()
            if not self.plan.run:  # nothing the marts read changed: the next run's worker waits until it does
                worker.expect_no_change()
            return MartsBuild(self.plan)
        (worker.target / RUN_RESULTS).unlink(missing_ok=True)  # never read a previous build's results
        worker.expect(False, None)  # until this build succeeds
        # batched tests and replays in the embedded warehouse only (the lake's target builds one node at a time)
        embedded = backend.dbt_target is None
        kept = self.replayable(worker) if embedded else None
        try:
            build_started(warehouse, self.record)
            replayed = None
            if kept is not None:
                worker.close()  # its memory and core back for the replay and the publish (started again if it fails)
                replayed = self._replayed(worker, warehouse, kept)
            if replayed is None:
                warehouse.close()
                reply = worker.run(self.args, self.plan.env, self.batch_key if embedded else None,
                                   self.prepare if embedded else None, self.catalog if embedded else None)
        except BaseException as exc:  # interrupted: logged as failed, then on its way
            worker.close()  # its command cut short, its hold on the working database let go (a stop reaches this
            warehouse.close()  # process alone when it is not the terminal's Ctrl-C: a service's SIGTERM, say)
            with open_warehouse(data_dir, backend) as reopened:
                self._finish(reopened, exc)
            raise
        if replayed is not None:
            return self._ended(worker, warehouse, replayed)
        with open_warehouse(data_dir, backend) as reopened:
            return self._ended(worker, reopened, reply, expect=embedded)

    def replayable(self, worker: DbtWorker) -> KeptBuild | None:
        """What is kept for this build's key on its catalog when the build can replay it without dbt (replays
        allowed, both its tests and its models' statements kept), else None."""
        if not self.batch_key or not worker.marts.dbt_replay:
            return None
        kept = kept_build(worker.shared, self.batch_key, worker.database, self.catalog)
        return kept if kept is not None and kept.replayable_on(self.catalog) else None

    def _replayed(self, worker: DbtWorker, warehouse: Warehouse, kept: KeptBuild) -> WorkerReply | None:
        """The build without dbt (``kept`` for its key and catalog): the models' statements replayed in one
        transaction, the tests batched, dbt's results written; None when a statement failed (rolled back:
        dbt runs the build)."""
        assert kept.models is not None and kept.tests is not None
        started = time.monotonic()
        # under the memory limit dbt builds with (the sync's is smaller), for the replay only
        (limit,) = warehouse.con.execute("SELECT current_setting('memory_limit')").fetchone() or ("",)
        warehouse.con.execute(f"SET memory_limit = '{worker.marts.dbt_memory_limit}'")
        try:
            models = replay_models(warehouse.con, kept.models, kept.setup)
        finally:
            warehouse.con.execute(f"SET memory_limit = '{limit}'")
        if models is None:
            return None

        tests = run_tests(each_closed(catalog_cursors(warehouse.con)), kept.tests)
        write_results(worker.target / RUN_RESULTS, [*models, *tests], time.monotonic() - started)
        failed = any_failed(tests)
        return WorkerReply(not failed, 1 if failed else 0, None)

    def _ended(self, worker: DbtWorker, warehouse: Warehouse, reply: WorkerReply, *, expect: bool = True) -> MartsBuild:
        """How the build that gave ``reply`` ended, logged; after a success, the word for the next run's worker
        (``expect``: whether the next build may replay)."""
        results = read_run_results(worker.target)
        error = None
        if not reply.success:
            first = first_error_line(reply.error) if reply.error else None
            error = DbtBuildFailed.from_target(worker.target, reply.exit_code, reply.error or "", first_error=first)
        covered = self._finish(warehouse, error)
        if error is not None:
            raise error
        if expect and self.next_key is not None:
            kept = kept_build(worker.shared, self.next_key, worker.database, catalog_digest(warehouse.con))
            due = last_full_check(warehouse)
            worker.expect(kept is not None and kept.whole,
                          None if due is None else due + worker.marts.full_check_interval)
        seconds = (dt.datetime.now(dt.UTC) - self.started).total_seconds()
        return MartsBuild(self.plan, build_summary(results), build_warnings(results), covered, seconds,
                          node_results(results or {}))

    def _finish(self, warehouse: Warehouse, error: BaseException | None) -> int:
        """Log how the build ended; after a success, record what it covered (how many changed shipments)."""
        assert self.record is not None
        build_finished(warehouse, self.record, error)
        return 0 if error is not None else record_build(warehouse, self.fingerprint, self.started,
                                                        self.record.run_id, full_check=self.full_check,
                                                        conversions_at=self.plan.conversions_at)


def begin_build(warehouse: Warehouse, run_id: str, leave_out: Sequence[str] = (), *, full_refresh: bool = False,
                full_check: bool | None = None, marts: MartsSettings | None = None) -> PendingBuild:
    """Plan the whole build of run ``run_id`` on ``warehouse`` (:func:`planned_build`) and, when it must run, the
    record it is logged under as it runs (:meth:`PendingBuild.run`)."""
    pending = planned_build(warehouse, leave_out, full_refresh=full_refresh, full_check=full_check, marts=marts)
    if pending.plan.run:
        pending.record = RunRecord(run_id, meta.BUILD_STREAM, pending.started)
    return pending


def planned_build(warehouse: Warehouse, leave_out: Sequence[str] = (), *, full_refresh: bool = False,
                  full_check: bool | None = None, marts: MartsSettings | None = None) -> PendingBuild:
    """The whole build the run's plan asks for on ``warehouse`` as it is now, not logged (``record`` None).
    ``leave_out``: dbt selectors of data tests the build does not run, as the run checks their
    invariants otherwise (tests do not decide the marts' content: the project's fingerprint is the same).
    ``full_refresh``: every mart from scratch (a rebuild), whatever the plan would otherwise choose, and
    every row tested. ``full_check``: the run checks every row, and the build is recorded as the last full
    check (None: a full refresh, or when one is due, ``full_check_due``; a rebuild's full refresh tests every
    row but checked the history of the shipments it wrote alone unless a full check was due). ``marts``: the
    run's settings of the marts (None: as configured)."""
    started = dt.datetime.now(dt.UTC)
    marts = marts or MartsSettings.configured()
    args = dbt_build_args(marts)
    fingerprint = project_fingerprint(DBT_PROJECT_DIR, args)
    full = (full_refresh or full_check_due(warehouse, started, marts)) if full_check is None else full_check
    plan = plan_build(warehouse, fingerprint, full_refresh=full_refresh, full_check=full, marts=marts)
    left_out = [arg for selector in leave_out for arg in ("--exclude", selector)]
    build_args = [*args, *plan.args, *left_out]
    key = batch_key(DBT_PROJECT_DIR, fingerprint, build_args, plan.env) if plan.run else None
    prepare = PreparedTests.of(fingerprint, args, left_out, marts) if plan.run and not plan.changed_rows else None
    catalog = catalog_digest(warehouse.con) if plan.run else None
    return PendingBuild(plan, fingerprint, build_args, started, None, full, key, prepare, catalog)
