"""The dbt worker: a process that gets dbt ready while the sync runs, then runs at most one command.

Both sides of it are here: :class:`DbtWorker`, the run's handle, and :func:`main`, the process
(``python -m freight_pipeline.marts.worker --project-dir P --target DIR [--vars JSON]``). A run
starts it as soon as it knows that its build will need dbt (:class:`Start`, :meth:`DbtWorker.get_ready`),
so that dbt's fixed cost (importing it and loading the project: about 3 s of CPU, more than an incremental
build's models and tests) is paid on the machine's other core while the run syncs on this one, and not
at all by a run after a quiet one whose streams change nothing either (:attr:`Start.WHEN_NEEDED`):

1. it imports dbt and parses the project into a folder that every data directory shares
   (:func:`parse_dir`; partial parse: the manifest is read, not made; serialized with any other parse
   there by :data:`LOCK`), and keeps the manifest for the command, whose artifacts go to ``DIR``;
   the parse opens no database, so the sync keeps its write lock on the working file;
2. it waits for one request on stdin, a JSON line ``{"args": [...], "env": {...}}``: ``dbt <args>``,
   with ``env`` added to its environment;
3. it runs the command in this process (``dbtRunner``), writes the nodes' results (dbt's
   ``run_results.json``) and :data:`REPLY` into ``DIR``: ``{"success": bool, "exit_code": int,
   "error": str | null, "templates": {"from_cache": int, "compiled": int}}`` (dbt's exit codes: 1 for
   failed nodes, 2 for an error before or around them; ``templates``: Jinja's, see below).

**Batched tests.** A request may carry ``"batch_tests": KEY`` (a build of the embedded warehouse:
``marts.plan.batch_key``). The first such build of a KEY runs as asked, and after its success the worker
keeps its data tests as dbt compiled and ran them (:mod:`~freight_pipeline.marts.kept_builds`: each test's
statement as dbt's test materialization runs it, its severity and thresholds). The next builds of the same
KEY run only the models through dbt (``--resource-type model``) and then those same statements, each judged
as dbt judges a test (pass, warn, fail, error); their results are added to ``run_results.json`` as dbt's would be. The
statements name relations, never rows (an incremental build's read ``freight_meta.changed_shipments``), so
they hold for every build of the same project, arguments and environment (the KEY) on a database of the
same file name with the same dbt: the same tests on the same rows, without dbt's cost of a node per test.
They are kept in the shared parse folder (:func:`parse_dir`, one per profile target, database file name and
``--vars``), so a new data directory's first full build batches the tests another one kept.
A build that tests every row (a full refresh, a full check) may carry ``"prepare_tests": {"key", "args",
"env"}``: after its success the worker compiles, with ``dbt compile`` selecting ``resource_type:test`` less
the incremental build's exclusions, the tests of the usual next build (``marts.plan.next_incremental``) and
keeps them under that build's key, so that the first incremental build after a full one batches its tests too.

**Recorded statements.** A request with a KEY may also carry ``"catalog"``: the working database's catalog as
the build begins (``kept_builds.catalog_digest``). The worker then records every statement dbt sends on each
model's connection and, when every model succeeded, keeps them under the KEY with that catalog: the next
build of the KEY on that catalog replays them in the run's own process, without this worker
(``marts.build.PendingBuild``). A run whose last build expects that (:data:`NEXT_BUILD`) starts no worker
until it asks for a command (:attr:`Start.WHEN_ASKED`).

The end of its input ends it at once, wherever it is: before a request, the run needs no build (a
parse cut short is redone by the next one: dbt parses again when its partial-parse file does not
load); during the command, the run that asked for it is gone (killed), and the worker does not
write the working database behind the back of the next run (DuckDB rolls the unfinished
transaction back). Its own output (dbt prints only errors with ``--quiet``) goes to :data:`LOG` in
``DIR``.

Jinja's compiled templates are kept for the next worker in the shared parse folder
(:mod:`freight_pipeline.marts.jinja_cache`): a new process no longer compiles every macro again.

Nothing of the pipeline's is imported here but :mod:`freight_pipeline.marts.project`,
:mod:`~freight_pipeline.marts.jinja_cache`, :mod:`~freight_pipeline.marts.kept_builds` (with
:mod:`freight_pipeline.cursors`), :mod:`~freight_pipeline.marts.worker_server`,
:mod:`~freight_pipeline.warehouse.paths` and :mod:`freight_pipeline.process_end` (no heavy imports): the run can
start the worker before it imports the rest, and the worker pays for dbt alone (dbt-duckdb imports the lake's plugin
itself when the profile's target names it).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import enum
import fcntl
import hashlib
import json
import logging
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, Self

from freight_pipeline.config import DBT_DATABASE_ENV, MartsSettings
from freight_pipeline.marts.jinja_cache import CompiledTemplates
from freight_pipeline.marts.kept_builds import add_results, any_failed, keep, kept_build, run_tests
from freight_pipeline.marts.project import (
    DBT_PROJECT_DIR,
    LOG_FILE_LEVEL,
    RUN_RESULTS,
    TARGET_ENV,
    build_target,
    database_env,
    project_args,
    vars_args,
)
from freight_pipeline.marts.worker_server import ForkedWorker, forked_worker
from freight_pipeline.process_end import STOP_SIGNALS, on_stop
from freight_pipeline.warehouse.paths import DB_NAME, working_db_path

log = logging.getLogger(__name__)

LOCK = ".freight-parse.lock"
"""The lock of every parse into a target directory."""
PARSE_DIRS = Path("target") / "worker-parse"
"""The workers' shared parse folders, under the dbt project (:func:`parse_dir`)."""
WORKER_EXIT_WAIT_S = 10.0
"""How long a worker that was told no command is needed may take to end before it is killed."""
REPLY = "worker-reply.json"
LOG = "worker.log"
QUIET = ["--quiet", "--no-use-colors", "--no-write-json"]
"""Flags of every command the worker runs: dbt logs to its file, the terminal gets errors only, and no
JSON artifact is written but the command's results, by the worker (dbt's other one, ``manifest.json``,
took a tenth of an incremental build's time to write, and no one reads it)."""
NEXT_BUILD = "next-build.json"
"""In a data directory's build target: what its last run expects of the next (:meth:`DbtWorker.expect`,
:meth:`DbtWorker.expect_no_change`): ``{"replayable": bool, "until": ISO instant | null, "built": bool}``
(``built``: whether that run built, as its streams changed what the marts read)."""
MODELS_ONLY = ["--resource-type", "model"]
"""What a build with batched tests asks of dbt: its models (its data tests run after, batched)."""


class Prepare(Protocol):
    """Tests to compile ahead (``marts.build.PreparedTests``): their key, the ``dbt compile`` and its
    environment."""

    @property
    def key(self) -> str: ...
    @property
    def args(self) -> Sequence[str]: ...
    @property
    def env(self) -> Mapping[str, str]: ...


@dataclass(frozen=True)
class WorkerReply:
    """What the worker said of the command it ran."""

    success: bool
    exit_code: int
    error: str | None


class Start(enum.Enum):
    """When a run's dbt worker process starts (:meth:`DbtWorker.for_run` chooses; the job says when the moment has
    come: :meth:`DbtWorker.get_ready`). A command asked for (:meth:`DbtWorker.run`) starts it whatever this says."""

    AT_ONCE = "at once"
    """A later sync after one whose streams changed what the marts read (a busy service), or with no word of the last
    run: dbt loads on the other core while the run imports and syncs on this one."""
    AFTER_THE_FIRST_STREAM = "after the first stream"
    """A first sync of the embedded warehouse (no working database yet): the longest stream of the longest run has
    the machine's memory and other core to itself; dbt loads while the streams after it, the checks and the build's
    plan run; not even then when the build the run would plan at that point can replay statements another data
    directory's build kept. Asked once."""
    WHEN_NEEDED = "when needed"
    """A later sync after one whose streams changed nothing the marts read (a quiet service: a scheduled run's
    usual case at night): as soon as the run knows its build will run without a replay: before the streams when a
    build is due already (the last failed, the project changed), at the first batch that changes a shipment, at
    the end of a stream that changed something else (the code conversions); never when nothing changed, which
    saves dbt's load (1.5-2 s of CPU, about two fifths of such a run's)."""
    WHEN_ASKED = "when asked"
    """The last build of the data directory expected the next to replay its kept statements (:data:`NEXT_BUILD`,
    :meth:`DbtWorker.expect`), or the run builds nothing (``DbtWorker.for_run``'s ``builds``): only for a
    command."""


class DbtWorker:
    """The dbt worker process of one run on one data directory: started when the run knows its build needs dbt
    (:class:`Start`), so that dbt is imported and the project loaded by the time the build begins; then asked
    for at most one command, or told none is needed.

    A context manager: leaving it ends the worker (told no command is needed, killed if it does not go).
    """

    def __init__(self, launch: Callable[[], subprocess.Popen[str] | ForkedWorker], target: Path, shared: Path,
                 database: str, *, starts: Start = Start.WHEN_NEEDED, marts: MartsSettings | None = None) -> None:
        self._launch = launch
        self.marts = marts or MartsSettings()
        """The run's settings of the marts (its builds read them from here)."""
        self.target = target
        self.shared = shared
        """The shared parse folder of its builds (:func:`parse_dir`), where the kept builds are."""
        self.database = database
        """The working database's file name (what the kept builds are checked for)."""
        self.starts = starts
        self.held = starts in (Start.AFTER_THE_FIRST_STREAM, Start.WHEN_NEEDED)
        """Waiting for the run to say its build needs dbt (:meth:`get_ready`)."""
        self.process: subprocess.Popen[str] | ForkedWorker | None = launch() if starts is Start.AT_ONCE else None
        self.closed = False
        """Whether :meth:`close` ended the process (one that died is reported by :meth:`run`, not replaced)."""
        self._lock = threading.Lock()
        """:meth:`get_ready` may be called from the writer's thread (a batch that changed a shipment)."""

    @classmethod
    def for_run(cls, data_dir: Path, dbt_target: str | None, marts: MartsSettings | None = None, *,
                builds: bool = True, target_env: Mapping[str, str] | None = None) -> Self:
        """The worker of a run on ``data_dir``'s working database, built with the profile's ``dbt_target``
        (the storage's: ``StorageBackend.dbt_target``), held until the run says its build needs dbt, or asks
        for a command, as :class:`Start` says: when :data:`NEXT_BUILD` says the build will likely need no dbt,
        until asked; after the first stream when the embedded warehouse has no working database yet (a first
        sync); else when needed. The parse uses the ``--vars`` the build will pass, so that the build finds it
        valid. Forked by the fork server of dbt workers when ``FREIGHT_DBT_WORKER_SERVER`` names one
        (:mod:`~freight_pipeline.marts.worker_server`), else a new process. ``marts``: the run's settings of the
        marts (None: as configured). ``builds`` False: the run builds nothing (a Dagster selection without the
        marts), so its worker starts only for a command (:attr:`Start.WHEN_ASKED`), never to load dbt for a build
        that does not come. ``target_env``: what the target's process reads to find the storage
        (``StorageBackend.dbt_environment``: a lake named by a Dagster resource's fields, which no variable holds)."""
        marts = marts or MartsSettings.configured()
        target = build_target(data_dir)
        target.mkdir(parents=True, exist_ok=True)
        chosen_vars = vars_args(marts)
        argv = ["--project-dir", str(DBT_PROJECT_DIR), "--target", str(target),
                *(["--vars", chosen_vars[1]] if chosen_vars else [])]
        dbt_env = database_env(data_dir, dbt_target, marts)
        env = {**os.environ, **dbt_env, **(target_env or {}), "DBT_SEND_ANONYMOUS_USAGE_STATS": "false"}

        def launch() -> subprocess.Popen[str] | ForkedWorker:
            with open(target / LOG, "w") as log:
                forked = forked_worker(argv, env, log, marts.dbt_worker_server)
                if forked is not None:
                    return forked
                command = [sys.executable, "-m", "freight_pipeline.marts.worker", *argv]
                # its own session: a Ctrl-C of the run reaches the run, which ends the worker by closing its input
                return subprocess.Popen(command, stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
                                        env=env, text=True, start_new_session=True)

        shared = parse_dir(DBT_PROJECT_DIR, target, chosen_vars, dbt_env)
        first_sync = dbt_target is None and not working_db_path(data_dir).exists()
        word = _next_build_word(target)
        starts = (Start.WHEN_ASKED if not builds or _no_dbt_expected(word, marts)
                  else Start.AFTER_THE_FIRST_STREAM if first_sync
                  else Start.WHEN_NEEDED if word.get("built") is False else Start.AT_ONCE)
        return cls(launch, target, shared, _database_name(dbt_env), starts=starts, marts=marts)

    def get_ready(self, needed: bool = True) -> None:
        """The run knows whether its build needs dbt (``needed``; not when nothing changed, nor when its
        statements replay): a held worker starts loading dbt now when it does. A first sync asks once (its hold
        ends either way: only a command starts it then); a later sync's hold lasts until a later moment finds
        the build needs dbt (:class:`Start`). Safe from any thread (the writer's, at a batch that changed a
        shipment), and never raises for the process: one that cannot start now is said in the log and started by
        the build (:meth:`run`), whose failure is the marts step's."""
        with self._lock:
            if not self.held or self.closed:
                return
            if needed or self.starts is Start.AFTER_THE_FIRST_STREAM:
                self.held = False
            if needed:
                try:
                    self.process = self._launch()
                except OSError as exc:
                    log.warning("the dbt worker could not be started yet (%s); the build starts it", exc)

    def expect(self, replayable: bool, until: dt.datetime | None) -> None:
        """Leave word for the next run's worker (:data:`NEXT_BUILD`) from this run's build: whether the next build
        will likely replay its kept statements (``replayable``), at the latest ``until`` (when a full check falls
        due)."""
        self._leave_word({"replayable": replayable, "until": None if until is None else until.isoformat(),
                          "built": True})

    def expect_no_change(self) -> None:
        """Leave word for the next run's worker (:data:`NEXT_BUILD`) from a run that built nothing, as nothing the
        marts read changed: the next run's waits until its own streams change something (:attr:`Start.WHEN_NEEDED`);
        what the last build said of its replay stays."""
        self._leave_word({**_next_build_word(self.target), "built": False})

    def _leave_word(self, word: Mapping[str, Any]) -> None:
        with contextlib.suppress(OSError):
            (self.target / NEXT_BUILD).write_text(json.dumps(word))

    def run(self, args: Sequence[str], env: Mapping[str, str], batch_tests: str | None = None,
            prepare: Prepare | None = None, catalog: str | None = None) -> WorkerReply:
        """Have the worker run ``dbt <args>`` with ``env`` added to its environment; wait for its reply.
        ``batch_tests``: the build's batch key, when its data tests may run batched; ``prepare``: tests to
        compile and keep after the command's success, under their key; ``catalog``: the one the build begins
        on, to keep its models' statements with under its key (see the module doc). A worker that was ended
        (:meth:`close`) is started again."""
        with self._lock:
            if self.process is None or self.closed:
                self.process, self.closed, self.held = self._launch(), False, False
        assert self.process.stdin is not None
        (self.target / REPLY).unlink(missing_ok=True)
        request: dict[str, Any] = {"args": list(args), "env": dict(env)}
        if batch_tests:
            request["batch_tests"] = batch_tests
        if batch_tests and catalog:
            request["catalog"] = catalog
        if prepare is not None:
            request["prepare_tests"] = {"key": prepare.key, "args": list(prepare.args), "env": dict(prepare.env)}
        process, stopped = self.process, threading.Event()

        def stop() -> None:  # from the thread that stops the run's: the worker killed, as Ctrl-C kills it
            stopped.set()
            if process.returncode is None:  # not ``kill()``: a forked worker's would read the answer the wait reads
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.pid, signal.SIGKILL)

        with on_stop(stop):  # a stop of a run in a thread other than the main one, which no signal reaches
            try:
                process.stdin.write(json.dumps(request) + "\n")
                process.stdin.flush()
            except BrokenPipeError:
                pass  # it ended already: said below
            exit_code = process.wait()  # its input stays open meanwhile: closing it would end the worker
        if stopped.is_set() or (-exit_code in STOP_SIGNALS and not (self.target / REPLY).exists()):
            raise KeyboardInterrupt  # the command cut short by a stop: the run's, or one sent to the worker too (a
            # service manager's SIGTERM to each process of the service): DuckDB rolls the unfinished transaction back
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
        with self._lock:
            self.closed = True
        if self.process is None:
            return
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


def _next_build_word(target: Path) -> dict[str, Any]:
    """The last run's word in ``target`` (:data:`NEXT_BUILD`); empty when there is none or it cannot be read."""
    try:
        word = json.loads((target / NEXT_BUILD).read_text())
    except (OSError, ValueError):
        return {}
    return word if isinstance(word, dict) else {}


def _no_dbt_expected(word: Mapping[str, Any], marts: MartsSettings) -> bool:
    """Whether the last build's ``word`` (:data:`NEXT_BUILD`) expects the next to replay its kept statements, and
    no full check falls due before then."""
    try:
        if not marts.dbt_replay:
            return False
        until = dt.datetime.fromisoformat(word["until"]) if word.get("until") else None
        return word["replayable"] is True and (until is None or dt.datetime.now(dt.UTC) < until)
    except (ValueError, KeyError, TypeError):  # a word of another shape (``_next_build_word`` gives a dict)
        return False


def _read_requests(requests: queue.Queue[str]) -> None:
    """Hand the first line of stdin to the main thread, then read to the end of input and end the
    process there: the parent no longer wants a build (no request came), or is gone (one is running)."""
    requests.put(sys.stdin.readline())
    sys.stdin.read()
    os._exit(0)


def _database_name(env: Mapping[str, str] | None = None) -> str:
    """The working database's file name in the worker's environment (``env`` added to this process's): what
    the compiled statements name it by (dbt-duckdb's catalog is the file's stem)."""
    return Path({**os.environ, **(env or {})}.get(DBT_DATABASE_ENV, DB_NAME)).name


def parse_dir(project_dir: Path, build_target: Path, vars_args: Sequence[str],
              env: Mapping[str, str] | None = None) -> Path:
    """Where the worker parses: one folder per profile target, database file name and ``--vars`` (of the
    worker's environment: ``env`` added to this process's) in the project's ``target/`` (:data:`PARSE_DIRS`),
    shared by every data directory, so that a data directory's first build finds dbt's partial-parse file
    valid (a full parse costs about 8 s of CPU more); the build's own target when the project's cannot be
    written (an installed, read-only copy)."""
    target_name = {**os.environ, **(env or {})}.get(TARGET_ENV, "")
    key = json.dumps([target_name, _database_name(env), list(vars_args)])
    folder = project_dir / PARSE_DIRS / hashlib.sha256(key.encode()).hexdigest()[:16]
    try:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / LOCK).touch()
    except OSError:
        return build_target
    return folder


def _parsed_manifest(runner: Any, project_dir: Path, target: Path, vars_args: Sequence[str],
                     flags: Sequence[str] = ()) -> Any:
    """The project's manifest, parsed into ``target`` (a partial parse: fast when nothing changed) under
    the parse lock, with more of dbt's ``flags``; None when the parse failed (the command parses again, and
    says why).

    The parse reads the working database's file name, not its folder (``DBT_DATABASE_ENV`` holds the name
    alone meanwhile; :data:`DB_NAME` when the environment names no database, as :func:`parse_dir` keys it):
    dbt makes a full parse whenever the profile's path changes, and the manifest depends on the name only
    (dbt-duckdb names the database by the file's stem); the command that follows connects to the real path."""
    target.mkdir(parents=True, exist_ok=True)
    real_path = os.environ.get(DBT_DATABASE_ENV)
    with open(target / LOCK, "a+") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            os.environ[DBT_DATABASE_ENV] = _database_name()
            parsed = runner.invoke(["parse", *LOG_FILE_LEVEL, *QUIET, *flags, *project_args(project_dir, target),
                                    *vars_args])
        finally:
            if real_path is None:
                del os.environ[DBT_DATABASE_ENV]
            else:
                os.environ[DBT_DATABASE_ENV] = real_path
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)
    return parsed.result if parsed.success else None


def warm_up(project_dir: Path = DBT_PROJECT_DIR) -> bool:
    """What every worker does first, done once in a process that workers are forked from
    (:mod:`~freight_pipeline.marts.worker_server`): the project parsed into its shared parse folder
    (:func:`parse_dir`, for this environment's target, database name and ``--vars``; a partial parse
    when a worker parsed there before), so that what dbt builds lazily on first use (its classes'
    serializers and JSON schemas, the adapter's plugin) is built once for all the forked workers. Without
    dbt's static parser: its native thread pool would not survive a fork (a worker that parses a changed
    model with it after the fork waits forever). Whether the parse succeeded."""
    from dbt.cli.main import dbtRunner

    with tempfile.TemporaryDirectory(prefix="dbt-warm-up-") as unwritable_project:
        shared = parse_dir(project_dir, Path(unwritable_project), vars_args())
        return _parsed_manifest(dbtRunner(), project_dir, shared, vars_args(), ["--no-static-parser"]) is not None


def _vars_of(args: Sequence[str]) -> str | None:
    """The value of ``--vars`` in ``args``, if any."""
    return next((args[i + 1] for i, arg in enumerate(args[:-1]) if arg == "--vars"), None)


def _tests_of(results: Sequence[Any]) -> list[dict[str, Any]]:
    """The data tests of a build (dbt's results of its nodes) as kept: each test's statement as dbt's test
    materialization runs it (``default__get_test_sql``), and how it is judged."""
    tests = []
    for result in results:
        node = result.node
        if node.resource_type != "test":
            continue
        config = node.config
        limit = f"\n      limit {config.limit}" if config.limit is not None else ""
        sql = (f"select\n      {config.fail_calc} as failures,\n      {config.fail_calc} {config.warn_if} as "
               f"should_warn,\n      {config.fail_calc} {config.error_if} as should_error\n    from (\n"
               f"{node.compiled_code}{limit}\n    ) dbt_internal_test")
        tests.append({"unique_id": node.unique_id, "sql": sql, "severity": str(config.severity).upper(),
                      "warn_if": config.warn_if, "error_if": config.error_if})
    return tests


READS = ("select", "with", "begin", "commit", "rollback")
"""How a statement that changes nothing begins (past dbt's query comment)."""


class _Statements:
    """What dbt sends to the database while installed: on each model's connection (named by the model's id)
    every statement, in the order sent (None for one sent with bindings: its text alone would not replay
    it); on the connections that create the schemas (``create_<database>_<schema>``, before any model
    runs), every statement; and elsewhere (dbt's ``master`` and ``list_`` connections), each statement that
    is not a read (a project hook's): a build that sent one is not kept."""

    def __init__(self) -> None:
        self.by_node: dict[str, list[str | None]] = {}
        self.setup: list[str | None] = []
        self.elsewhere: list[str] = []
        self._lock = threading.Lock()

    def install(self) -> Self:
        from dbt.adapters.duckdb.connections import DuckDBConnectionManager

        original = DuckDBConnectionManager.add_query
        statements = self

        def add_query(manager: Any, sql: str, auto_begin: bool = True, bindings: Any = None, *args: Any,
                      **kwargs: Any) -> Any:
            answer = original(manager, sql, auto_begin, bindings, *args, **kwargs)  # its BEGIN is recorded first
            statements.sent(str(getattr(manager.get_if_exists(), "name", "")), sql if bindings is None else None)
            return answer

        DuckDBConnectionManager.add_query = add_query  # type: ignore[method-assign]
        return self

    def sent(self, connection: str, sql: str | None) -> None:
        """Record ``sql`` (None: sent with bindings) as sent on ``connection``."""
        with self._lock:
            if connection.startswith("model."):
                self.by_node.setdefault(connection, []).append(sql)
            elif connection.startswith("create_"):
                self.setup.append(sql)
            elif not connection.startswith("test.") and (sql is None or not _reads(sql)):
                self.elsewhere.append(sql or "(with bindings)")

    def kept(self, results: Sequence[Any], said: Sequence[str]) -> tuple[list[str], list[dict[str, Any]]] | None:
        """What to keep of a build whose every model succeeded (dbt's ``results``): the schemas' statements, and
        the models, each with its statements, in the order they began (a model begins after every model it
        reads ended); None when a model did not succeed, a statement was sent elsewhere that is not a read, or
        one was sent with bindings or holds one of ``said`` (the invocation's id or start time: a statement
        that depends on the time of the build is not the next build's)."""
        order = {name: at for at, name in enumerate(self.by_node)}

        def replayable(statements: Sequence[str | None]) -> bool:
            return all(statement is not None and not any(text in statement for text in said)
                       for statement in statements)

        if self.elsewhere or not replayable(self.setup):
            return None
        models = []
        for result in results:
            node = result.node
            if node.resource_type != "model":
                continue
            statements = self.by_node.get(node.unique_id, [])
            if str(result.status) != "success" or not replayable(statements):
                return None
            models.append({"unique_id": node.unique_id, "relation_name": getattr(node, "relation_name", None),
                           "statements": statements})
        return ([statement for statement in self.setup if statement is not None],
                sorted(models, key=lambda model: order.get(model["unique_id"], len(order))))


def _reads(sql: str) -> bool:
    """Whether ``sql`` changes nothing: a query, or a transaction's start or end."""
    text = sql.strip()
    while text.startswith("/*") and "*/" in text:
        text = text[text.index("*/") + 2:].strip()
    return text.lower().startswith(READS)


def _invocation_marks(run_results: Path) -> list[str]:
    """What of the build's invocation a statement could hold: its id, its start time as dbt renders it."""
    try:
        metadata = json.loads(run_results.read_text())["metadata"]
        started = str(metadata["invocation_started_at"])[:19]
        return [str(metadata["invocation_id"]), started, started.replace("T", " ")]
    except (OSError, ValueError, KeyError, TypeError):
        return []


def _prepare_tests(manifest: Any, options: argparse.Namespace, shared: Path, vars_args: Sequence[str],
                   prepare: dict[str, Any]) -> None:
    """Compile the tests of ``prepare`` (a later build's: its key, ``dbt compile`` and environment) and keep
    them under its key, unless kept already; a failure leaves them to that build (dbt runs them then)."""
    from dbt.cli.main import dbtRunner

    key, args = prepare["key"], list(prepare["args"])
    held = kept_build(shared, key, _database_name())
    if held is not None and held.tests is not None:
        return
    os.environ.update(prepare.get("env") or {})
    runner = dbtRunner(manifest=manifest if _vars_of(args) == _vars_of(vars_args) else None)
    with contextlib.suppress(Exception):
        compiled = runner.invoke([*args, *QUIET, *project_args(options.project_dir, options.target)])
        if compiled.success and hasattr(compiled.result, "results"):
            keep(shared, key, _database_name(), tests=_tests_of(compiled.result.results))


def _dbt_cursor() -> tuple[Any, Callable[[], None]]:
    """A cursor on dbt's connection to the build's database (the adapter's, with the profile's settings)."""
    from dbt.adapters.duckdb.connections import DuckDBConnectionManager

    handle = DuckDBConnectionManager.env().handle()
    return handle.cursor(), handle.close


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--project-dir", type=Path, required=True)
    parser.add_argument("--target", type=Path, required=True)
    parser.add_argument("--vars", default=None, help="the --vars the build will pass (the parse must match)")
    options = parser.parse_args(argv)
    vars_args = ["--vars", options.vars] if options.vars else []

    requests: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_read_requests, args=(requests,), daemon=True).start()

    shared = parse_dir(options.project_dir, options.target, vars_args)
    templates = CompiledTemplates(shared)
    templates.install()
    from dbt.cli.main import dbtRunner

    manifest = _parsed_manifest(dbtRunner(), options.project_dir, shared, vars_args)
    line = requests.get()
    if not line.strip():
        return 0  # no build asked for (the reader ends the process meanwhile)
    request = json.loads(line)
    os.environ.update(request.get("env") or {})
    reply = options.target / REPLY
    reply.unlink(missing_ok=True)
    key = request.get("batch_tests")
    held = kept_build(shared, key, _database_name()) if key else None
    batched = held.tests if held is not None else None
    # the models' statements are kept for a build that tells the catalog it begins on
    statements = _Statements().install() if key and request.get("catalog") else None
    args = [*request["args"], *(MODELS_ONLY if batched is not None else []), *QUIET,
            *project_args(options.project_dir, options.target)]
    # the command starts from the parsed manifest, unless it passes other vars (they may change the project)
    runner = dbtRunner(manifest=manifest if _vars_of(request["args"]) == _vars_of(vars_args) else None)
    try:
        result = runner.invoke(args)
        success, failed_tests = bool(result.success), False
        if hasattr(result.result, "write"):  # the results of the nodes: dbt's own run_results.json
            run_results = options.target / RUN_RESULTS
            result.result.write(str(run_results))
            tests = None
            if success and batched is not None:
                started = time.monotonic()
                verdicts = run_tests(_dbt_cursor, batched)
                add_results(run_results, verdicts, time.monotonic() - started)
                failed_tests = any_failed(verdicts)
            elif success and key:
                tests = _tests_of(result.result.results)
            kept = statements.kept(result.result.results, _invocation_marks(run_results)) if statements else None
            if key and (tests is not None or kept is not None):
                setup, models = kept if kept is not None else (None, None)
                keep(shared, key, _database_name(), tests=tests, setup=setup, models=models,
                     catalog=request.get("catalog"))
        if result.success and request.get("prepare_tests"):
            _prepare_tests(manifest, options, shared, vars_args, request["prepare_tests"])
        error = result.exception
        success = success and not failed_tests
        answer = {"success": success, "exit_code": 0 if success else 2 if error else 1,
                  "error": None if error is None else f"{type(error).__name__}: {error}"}
    except Exception as exc:  # dbt raised instead of reporting: said in the reply all the same
        answer = {"success": False, "exit_code": 2, "error": f"{type(exc).__name__}: {exc}"}
    _release_database()
    answer["templates"] = {"from_cache": templates.hits, "compiled": len(templates.new)}
    templates.save(shared / LOCK)
    reply.write_text(json.dumps(answer))
    # what is left is tearing down the interpreter with dbt loaded (a few tenths of a second the run would
    # wait for): the database is closed, the reply written, the log flushed
    logging.shutdown()
    os._exit(0)


def _release_database() -> None:
    """Close dbt's DuckDB database, if it holds it open still (the run opens the file next)."""
    from dbt.adapters.duckdb.connections import DuckDBConnectionManager

    with contextlib.suppress(Exception):
        if DuckDBConnectionManager._ENV is not None:
            DuckDBConnectionManager._ENV.close()


if __name__ == "__main__":
    sys.exit(main())
