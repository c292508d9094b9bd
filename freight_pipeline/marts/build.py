"""Building the marts of a data directory: the build's entry in the run log, and a build without
Dagster in a dbt worker process that was made ready while the sync ran (:class:`DbtWorker`).

The Dagster job builds through dagster-dbt (``defs.dbt``); both follow the same plan
(:func:`freight_pipeline.marts.plan.plan_build`), log the build the same way (:func:`logged_build`) and
record what it covered with the same fingerprint, so one data directory can be built by either.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Self

from freight_pipeline.marts.plan import BuildPlan, plan_build, project_fingerprint, record_build
from freight_pipeline.marts.project import (
    DBT_PROJECT_DIR,
    RUN_RESULTS,
    build_target,
    database_env,
    dbt_build_args,
    vars_args,
)
from freight_pipeline.marts.results import DbtBuildFailed, build_summary, build_warnings, read_run_results
from freight_pipeline.marts.worker import LOG, REPLY
from freight_pipeline.sync.runner import one_line_error
from freight_pipeline.text import one_line
from freight_pipeline.warehouse import meta
from freight_pipeline.warehouse.backend import StorageBackend
from freight_pipeline.warehouse.records import RunRecord
from freight_pipeline.warehouse.store import Warehouse, open_warehouse

WORKER_EXIT_WAIT_S = 10.0
"""How long a worker that was told no build is needed may take to end before it is killed."""


def build_started(warehouse: Warehouse, run_id: str) -> RunRecord:
    """Log a build of run ``run_id`` as running (stream ``dbt_build`` of ``freight_meta.sync_runs``)."""
    record = RunRecord(run_id, meta.BUILD_STREAM, dt.datetime.now(dt.UTC))
    warehouse.run_log.record_run(record)
    return record


def build_finished(warehouse: Warehouse, record: RunRecord, error: BaseException | None, *, whole: bool) -> None:
    """Log the build ``record`` as ended: failed with ``error``, else a success (``partial`` when it was
    not ``whole``)."""
    if error is not None:
        record.status, record.error = "failed", one_line_error(error)
    else:
        record.status = "success" if whole else "partial"
    record.finished_at = dt.datetime.now(dt.UTC)
    warehouse.run_log.record_run(record)


@contextmanager
def logged_build(data_dir: Path, backend: StorageBackend, run_id: str, *, whole: bool) -> Iterator[None]:
    """Log the build in ``freight_meta.sync_runs`` (stream ``dbt_build``): running, then success or failed.

    The publish refuses a working database whose latest build did not succeed (marts half rebuilt).
    A build of a selection (``whole`` False: some models picked in the UI) ends as ``partial``, not
    ``success``: it does not vouch for the marts it skipped, so only a whole build settles them.
    """
    with open_warehouse(data_dir, backend) as warehouse:
        record = build_started(warehouse, run_id)
    error: BaseException | None = None
    try:
        yield
    except BaseException as exc:
        error = exc
        raise
    finally:
        with open_warehouse(data_dir, backend) as warehouse:
            build_finished(warehouse, record, error, whole=whole)


@dataclass(frozen=True)
class WorkerReply:
    """What the worker said of the command it ran (``marts.worker``)."""

    success: bool
    exit_code: int
    error: str | None


class DbtWorker:
    """A dbt worker process (:mod:`freight_pipeline.marts.worker`) for one run on one data directory:
    started when the run begins, so that dbt is imported and the project loaded by the time the run
    knows whether it needs a build; then asked for at most one command, or told none is needed.

    A context manager: leaving it ends the worker (told no command is needed, killed if it does not go).
    """

    def __init__(self, process: subprocess.Popen[str], target: Path) -> None:
        self.process = process
        self.target = target

    @classmethod
    def start(cls, data_dir: Path, backend: StorageBackend) -> Self:
        """Start the worker for ``data_dir``'s working database in ``backend`` (the parse uses the
        ``--vars`` the build will pass, so the build finds it valid)."""
        target = build_target(data_dir)
        target.mkdir(parents=True, exist_ok=True)
        chosen_vars = vars_args()
        command = [sys.executable, "-m", "freight_pipeline.marts.worker", "--project-dir", str(DBT_PROJECT_DIR),
                   "--target", str(target), *(["--vars", chosen_vars[1]] if chosen_vars else [])]
        env = {**os.environ, **database_env(data_dir, backend), "DBT_SEND_ANONYMOUS_USAGE_STATS": "false"}
        with open(target / LOG, "w") as log:
            # its own session: a Ctrl-C of the run reaches the run, which ends the worker by closing its input
            process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
                                       env=env, text=True, start_new_session=True)
        return cls(process, target)

    def run(self, args: Sequence[str], env: Mapping[str, str]) -> WorkerReply:
        """Have the worker run ``dbt <args>`` with ``env`` added to its environment; wait for its reply."""
        assert self.process.stdin is not None
        (self.target / REPLY).unlink(missing_ok=True)
        try:
            self.process.stdin.write(json.dumps({"args": list(args), "env": dict(env)}) + "\n")
            self.process.stdin.flush()
        except BrokenPipeError:
            pass  # it ended already: said below
        exit_code = self.process.wait()  # its input stays open meanwhile: closing it would end the worker
        try:
            reply = json.loads((self.target / REPLY).read_text())
            return WorkerReply(bool(reply["success"]), int(reply["exit_code"]), reply.get("error"))
        except (OSError, ValueError, KeyError, TypeError):
            return WorkerReply(False, exit_code, f"the dbt worker ended without a reply (exit code {exit_code})"
                               + self._log_tail())

    def _log_tail(self, lines: int = 5) -> str:
        try:
            tail = (self.target / LOG).read_text(errors="replace").strip().splitlines()[-lines:]
        except OSError:
            return ""
        return f"; its log ({self.target / LOG}) ends: " + " | ".join(tail) if tail else ""

    def close(self) -> None:
        """End the worker: close its input (it ends at once), kill it if it does not."""
        if self.process.stdin is not None and not self.process.stdin.closed:
            with contextlib.suppress(BrokenPipeError):
                self.process.stdin.close()
        try:
            self.process.wait(timeout=WORKER_EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


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

    def line(self) -> str:
        """One line for the run's output."""
        if self.summary is None:
            return f"not run: {self.plan.reason}"
        return f"{self.plan.reason}: {self.summary} ({self.covered:,} changed shipments now covered)"


@dataclass
class PendingBuild:
    """The build a run's plan asks for, logged as running (``record``) when it runs."""

    plan: BuildPlan
    fingerprint: str
    args: list[str]
    started: dt.datetime
    record: RunRecord | None

    def run(self, worker: DbtWorker, data_dir: Path, backend: StorageBackend) -> MartsBuild:
        """Run the build in ``worker`` (told no command is needed when the plan asks for none); log how
        it ended and, after a success, what it covered. DbtBuildFailed when it fails: the run log says
        so, and the publish refuses until a build succeeds."""
        if self.record is None:
            worker.close()
            return MartsBuild(self.plan)
        (worker.target / RUN_RESULTS).unlink(missing_ok=True)  # never read a previous build's results
        try:
            reply = worker.run(self.args, self.plan.env)
        except BaseException as exc:  # interrupted: logged as failed, then on its way
            self._finish(data_dir, backend, exc)
            raise
        results = read_run_results(worker.target)
        error = None
        if not reply.success:
            first = one_line(reply.error) if reply.error else None
            error = DbtBuildFailed.from_target(worker.target, reply.exit_code, reply.error or "", first_error=first)
        covered = self._finish(data_dir, backend, error)
        if error is not None:
            raise error
        seconds = (dt.datetime.now(dt.UTC) - self.started).total_seconds()
        return MartsBuild(self.plan, build_summary(results), build_warnings(results), covered, seconds)

    def _finish(self, data_dir: Path, backend: StorageBackend, error: BaseException | None) -> int:
        """Log how the build ended; after a success, record what it covered (how many changed shipments)."""
        assert self.record is not None
        with open_warehouse(data_dir, backend) as warehouse:
            build_finished(warehouse, self.record, error, whole=True)
            return 0 if error is not None else record_build(warehouse, self.fingerprint, self.started,
                                                            self.record.run_id)


def begin_build(warehouse: Warehouse, run_id: str) -> PendingBuild:
    """Plan the whole build of run ``run_id`` on ``warehouse`` and, when it must run, log it as running."""
    started = dt.datetime.now(dt.UTC)
    args = dbt_build_args()
    fingerprint = project_fingerprint(DBT_PROJECT_DIR, args)
    plan = plan_build(warehouse, fingerprint, whole=True)
    record = build_started(warehouse, run_id) if plan.run else None
    return PendingBuild(plan, fingerprint, [*args, *plan.args], started, record)
