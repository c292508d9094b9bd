"""The dbt worker: a process that gets dbt ready while the sync runs, then runs at most one command.

Both sides of it are here: :class:`DbtWorker`, the run's handle, and :func:`main`, the process
(``python -m freight_pipeline.marts.worker --project-dir P --target DIR [--vars JSON]``). A run
starts it first thing (``freight-pipeline sync``), so that dbt's fixed cost (importing it and
loading the project: about 3 s of CPU, more than an incremental build's models and tests) is paid on
the machine's other core while the run imports and syncs on this one:

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
keeps its data tests as dbt compiled and ran them (:data:`BATCHED_TESTS`: each test's statement as dbt's
test materialization runs it, its severity and thresholds). The next builds of the same KEY run only the
models through dbt (``--resource-type model``) and then those same statements, each judged as dbt judges a
test (pass, warn, fail, error); their results are added to ``run_results.json`` as dbt's would be. The
statements name relations, never rows (an incremental build's read ``freight_meta.changed_shipments``), so
they hold for every build of the same project, arguments and environment (the KEY) on a database of the
same file name with the same dbt: the same tests on the same rows, without dbt's cost of a node per test.
They are kept in the shared parse folder (:func:`parse_dir`, one per profile target, database file name and
``--vars``), so a new data directory's first full build batches the tests another one kept.
A build that tests every row (a full refresh, a full check) may carry ``"prepare_tests": {"key", "args",
"env"}``: after its success the worker compiles, with ``dbt compile`` selecting ``resource_type:test`` less
the incremental build's exclusions, the tests of the usual next build (``marts.plan.next_incremental``) and
keeps them under that build's key, so that the first incremental build after a full one batches its tests too.

The end of its input ends it at once, wherever it is: before a request, the run needs no build (a
parse cut short is redone by the next one: dbt parses again when its partial-parse file does not
load); during the command, the run that asked for it is gone (killed), and the worker does not
write the working database behind the back of the next run (DuckDB rolls the unfinished
transaction back). Its own output (dbt prints only errors with ``--quiet``) goes to :data:`LOG` in
``DIR``.

Jinja's compiled templates are kept for the next worker in the shared parse folder
(:mod:`freight_pipeline.marts.jinja_cache`): a new process no longer compiles every macro again.

Nothing of the pipeline's is imported here but :mod:`freight_pipeline.marts.project`,
:mod:`~freight_pipeline.marts.jinja_cache`, :mod:`~freight_pipeline.marts.worker_server` and
:mod:`~freight_pipeline.warehouse.paths` (no heavy imports): the run can start the worker before it
imports the rest, and the worker pays for dbt alone (dbt-duckdb imports the lake's plugin itself when the
profile's target names it).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import logging
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, Self

from freight_pipeline.marts.jinja_cache import CompiledTemplates
from freight_pipeline.marts.project import (
    DATABASE_ENV,
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
from freight_pipeline.warehouse.paths import DB_NAME

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
BATCHED_TESTS = "batched-tests.json"
"""The data tests of the last builds' batch keys, as dbt ran them, in the shared parse folder (see the module
doc)."""
BATCH_KEYS_KEPT = 16
"""Batch keys kept, the last kept (every data directory's of the parse folder, each kind of build's)."""
KEPT_FORMAT = 1
"""The form of a kept test (its statement, severity, thresholds): a change of it makes every kept one stale."""
BATCH_THREADS = 4
"""How many batched tests run at once (the ``dev`` profile's threads: dbt would run them on as many; lake
mode, one thread, batches none)."""
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


class DbtWorker:
    """The dbt worker process of one run on one data directory: started when the run begins, so that
    dbt is imported and the project loaded by the time the run knows whether it needs a build; then
    asked for at most one command, or told none is needed.

    A context manager: leaving it ends the worker (told no command is needed, killed if it does not go).
    """

    def __init__(self, process: subprocess.Popen[str] | ForkedWorker, target: Path) -> None:
        self.process = process
        self.target = target

    @classmethod
    def start(cls, data_dir: Path, dbt_target: str | None) -> Self:
        """Start the worker for ``data_dir``'s working database, built with the profile's ``dbt_target``
        (the storage's: ``StorageBackend.dbt_target``); the parse uses the ``--vars`` the build will
        pass, so that the build finds it valid. Forked by the fork server of dbt workers when
        ``FREIGHT_DBT_WORKER_SERVER`` names one (:mod:`~freight_pipeline.marts.worker_server`), else a new
        process."""
        target = build_target(data_dir)
        target.mkdir(parents=True, exist_ok=True)
        chosen_vars = vars_args()
        argv = ["--project-dir", str(DBT_PROJECT_DIR), "--target", str(target),
                *(["--vars", chosen_vars[1]] if chosen_vars else [])]
        env = {**os.environ, **database_env(data_dir, dbt_target), "DBT_SEND_ANONYMOUS_USAGE_STATS": "false"}
        with open(target / LOG, "w") as log:
            forked = forked_worker(argv, env, log)
            if forked is not None:
                return cls(forked, target)
            command = [sys.executable, "-m", "freight_pipeline.marts.worker", *argv]
            # its own session: a Ctrl-C of the run reaches the run, which ends the worker by closing its input
            process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
                                       env=env, text=True, start_new_session=True)
        return cls(process, target)

    def run(self, args: Sequence[str], env: Mapping[str, str], batch_tests: str | None = None,
            prepare: Prepare | None = None) -> WorkerReply:
        """Have the worker run ``dbt <args>`` with ``env`` added to its environment; wait for its reply.
        ``batch_tests``: the build's batch key, when its data tests may run batched; ``prepare``: tests to
        compile and keep after the command's success, under their key (see the module doc)."""
        assert self.process.stdin is not None
        (self.target / REPLY).unlink(missing_ok=True)
        request: dict[str, Any] = {"args": list(args), "env": dict(env)}
        if batch_tests:
            request["batch_tests"] = batch_tests
        if prepare is not None:
            request["prepare_tests"] = {"key": prepare.key, "args": list(prepare.args), "env": dict(prepare.env)}
        try:
            self.process.stdin.write(json.dumps(request) + "\n")
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


def _read_requests(requests: queue.Queue[str]) -> None:
    """Hand the first line of stdin to the main thread, then read to the end of input and end the
    process there: the parent no longer wants a build (no request came), or is gone (one is running)."""
    requests.put(sys.stdin.readline())
    sys.stdin.read()
    os._exit(0)


def _database_name() -> str:
    """The working database's file name: what the compiled statements name it by (dbt-duckdb's catalog is
    the file's stem)."""
    return Path(os.environ.get(DATABASE_ENV, DB_NAME)).name


def parse_dir(project_dir: Path, build_target: Path, vars_args: Sequence[str]) -> Path:
    """Where the worker parses: one folder per profile target, database file name and ``--vars`` in
    the project's ``target/`` (:data:`PARSE_DIRS`), shared by every data directory, so that a data
    directory's first build finds dbt's partial-parse file valid (a full parse costs about 8 s of CPU
    more); the build's own target when the project's cannot be written (an installed, read-only copy)."""
    key = json.dumps([os.environ.get(TARGET_ENV, ""), _database_name(), list(vars_args)])
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

    The parse reads the working database's file name, not its folder (``DATABASE_ENV`` holds the name
    alone meanwhile; :data:`DB_NAME` when the environment names no database, as :func:`parse_dir` keys it):
    dbt makes a full parse whenever the profile's path changes, and the manifest depends on the name only
    (dbt-duckdb names the database by the file's stem); the command that follows connects to the real path."""
    target.mkdir(parents=True, exist_ok=True)
    real_path = os.environ.get(DATABASE_ENV)
    with open(target / LOCK, "a+") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            os.environ[DATABASE_ENV] = _database_name()
            parsed = runner.invoke(["parse", *LOG_FILE_LEVEL, *QUIET, *flags, *project_args(project_dir, target),
                                    *vars_args])
        finally:
            if real_path is None:
                del os.environ[DATABASE_ENV]
            else:
                os.environ[DATABASE_ENV] = real_path
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


def _batched_tests(shared: Path, key: str, dbt_version: str) -> list[dict[str, Any]] | None:
    """The tests kept for ``key`` on a database of this file name with this dbt, or None (none kept: dbt
    runs them)."""
    try:
        entry = json.loads((shared / BATCHED_TESTS).read_text())[key]
        if (entry["database"], entry["dbt"], entry["format"]) == (_database_name(), dbt_version, KEPT_FORMAT):
            return list(entry["tests"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return None


def _keep_tests(shared: Path, key: str, dbt_version: str, results: Sequence[Any]) -> None:
    """Keep the data tests of a successful build (dbt's results of its nodes) for ``key``: each test's
    statement as dbt's test materialization runs it (``default__get_test_sql``), and how it is judged."""
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
    with open(shared / (BATCHED_TESTS + ".lock"), "a+") as lock:  # other data directories' workers keep theirs
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            kept = json.loads((shared / BATCHED_TESTS).read_text())
            kept = kept if isinstance(kept, dict) else {}
        except (OSError, ValueError):
            kept = {}
        kept.pop(key, None)
        kept[key] = {"database": _database_name(), "dbt": dbt_version, "format": KEPT_FORMAT, "tests": tests}
        kept = dict(list(kept.items())[-BATCH_KEYS_KEPT:])
        written = shared / (BATCHED_TESTS + ".tmp")  # one writer at a time: the lock
        written.write_text(json.dumps(kept))
        written.replace(shared / BATCHED_TESTS)


def _prepare_tests(manifest: Any, options: argparse.Namespace, shared: Path, vars_args: Sequence[str],
                   prepare: dict[str, Any], dbt_version: str) -> None:
    """Compile the tests of ``prepare`` (a later build's: its key, ``dbt compile`` and environment) and keep
    them under its key, unless kept already; a failure leaves them to that build (dbt runs them then)."""
    from dbt.cli.main import dbtRunner

    key, args = prepare["key"], list(prepare["args"])
    if _batched_tests(shared, key, dbt_version) is not None:
        return
    os.environ.update(prepare.get("env") or {})
    runner = dbtRunner(manifest=manifest if _vars_of(args) == _vars_of(vars_args) else None)
    with contextlib.suppress(Exception):
        compiled = runner.invoke([*args, *QUIET, *project_args(options.project_dir, options.target)])
        if compiled.success and hasattr(compiled.result, "results"):
            _keep_tests(shared, key, dbt_version, compiled.result.results)


def _run_tests(tests: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Run the kept ``tests`` on the build's database, :data:`BATCH_THREADS` at a time, each thread on a
    handle of dbt's connection (the adapter's, with the profile's settings); each result, in the order of
    ``tests``, as dbt's ``run_results.json`` has it, judged as dbt judges a test
    (``TestRunner.build_test_run_result``)."""
    from dbt.adapters.duckdb.connections import DuckDBConnectionManager

    environment = DuckDBConnectionManager.env()
    opened: list[Any] = []
    held = threading.local()
    lock = threading.Lock()

    def judged(test: dict[str, Any]) -> dict[str, Any]:
        if not hasattr(held, "handle"):
            with lock:
                held.handle = environment.handle()
                opened.append(held.handle)
        return _judged(held.handle.cursor(), test)

    try:
        with ThreadPoolExecutor(BATCH_THREADS, thread_name_prefix="batched-tests") as pool:
            return list(pool.map(judged, tests))
    finally:
        for handle in opened:
            with contextlib.suppress(Exception):
                handle.close()


def _judged(cursor: Any, test: dict[str, Any]) -> dict[str, Any]:
    """One kept test's result on ``cursor``."""
    started = time.monotonic()
    try:
        row = cursor.execute(test["sql"]).fetchone()
    except Exception as exc:  # the database's error, as dbt would report it: this test errored
        return _test_result(test, "error", " ".join(str(exc).split()), None, started)
    failures, should_warn, should_error = row if row is not None else (0, False, False)
    said = f"Got {failures} result{'' if failures == 1 else 's'}, configured to"
    if test["severity"] == "ERROR" and should_error:
        return _test_result(test, "fail", f"{said} fail if {test['error_if']}", failures, started)
    if should_warn:
        return _test_result(test, "warn", f"{said} warn if {test['warn_if']}", failures, started)
    return _test_result(test, "pass", None, 0, started)


def _test_result(test: dict[str, Any], status: str, message: str | None, failures: int | None,
                 started: float) -> dict[str, Any]:
    return {"unique_id": test["unique_id"], "status": status, "message": message, "failures": failures,
            "execution_time": time.monotonic() - started, "timing": [], "thread_id": "batched-tests",
            "adapter_response": {}, "compiled": True, "relation_name": None, "batch_results": None}


def _with_tests(path: Path, tests: Sequence[dict[str, Any]], seconds: float) -> None:
    """Add the batched ``tests``' results to the build's ``run_results.json`` at ``path``."""
    results = json.loads(path.read_text())
    results["results"].extend(tests)
    results["elapsed_time"] = float(results.get("elapsed_time") or 0) + seconds
    path.write_text(json.dumps(results))


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
    from dbt.version import __version__ as dbt_version

    key = request.get("batch_tests")
    batched = _batched_tests(shared, key, dbt_version) if key else None
    args = [*request["args"], *(MODELS_ONLY if batched is not None else []), *QUIET,
            *project_args(options.project_dir, options.target)]
    # the command starts from the parsed manifest, unless it passes other vars (they may change the project)
    runner = dbtRunner(manifest=manifest if _vars_of(request["args"]) == _vars_of(vars_args) else None)
    try:
        result = runner.invoke(args)
        success, failed_tests = bool(result.success), False
        if hasattr(result.result, "write"):  # the results of the nodes: dbt's own run_results.json
            result.result.write(str(options.target / RUN_RESULTS))
            if success and batched is not None:
                started = time.monotonic()
                tests = _run_tests(batched)
                _with_tests(options.target / RUN_RESULTS, tests, time.monotonic() - started)
                failed_tests = any(test["status"] in ("fail", "error") for test in tests)
            elif success and key:
                _keep_tests(shared, key, dbt_version, result.result.results)
        if result.success and request.get("prepare_tests"):
            _prepare_tests(manifest, options, shared, vars_args, request["prepare_tests"], dbt_version)
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
