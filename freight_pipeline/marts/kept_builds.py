"""What a dbt build of a batch key ran, kept for the next builds of the key, and how they run it without dbt.

A build of the embedded warehouse has a key (``marts.plan.batch_key``: the project's fingerprint, its tests,
the build's arguments and environment). Two things of a successful build are kept under it, in the shared
parse folder of its profile target, database file name and ``--vars`` (``marts.worker.parse_dir``), in the
folder :data:`KEPT_BUILDS`, one file each:

* its **data tests** as dbt compiled and ran them (each test's statement as dbt's test materialization runs
  it, its severity and thresholds): the next builds of the key run them batched after their models, each
  judged as dbt judges a test (:func:`run_tests`; ``marts.worker``, "Batched tests");
* its **models' statements**: every statement dbt sent to DuckDB on each model's connection (its
  materialization: pre-hooks, the temporary relation, the insert or the swap), in the order the models
  ran, with the **catalog** the build began on (:func:`catalog_digest`: every relation's columns, types and comments),
  a file per key and catalog (data directories of other settings, or a database migrated, build the same key
  on another catalog: each keeps its own). The next build of the key whose database has that same catalog
  replays them on the run's own connection,
  in one transaction (:func:`replay_models`), without starting dbt at all. The statements name relations,
  never rows (an incremental build reads ``freight_meta.changed_shipments``), and nothing in them depends
  on the time of the build (the worker keeps none that holds its invocation's id or start time): the same
  key on the same catalog gives the same statements, which is what dbt would have sent. A statement that
  fails rolls the replay back, and dbt runs the build (it reports what failed, and keeps the statements
  again).

Each file is checked for the database's file name (the statements name the database by it), dbt's version
and :data:`KEPT_FORMAT`. The :data:`FILES_KEPT` last used files are kept (a build reads only its own two).
Nothing here imports dbt.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any

from freight_pipeline.cursors import Connect, on_cursors
from freight_pipeline.process_end import on_stop, query_interrupted, unless_stop_asked
from freight_pipeline.text import error_in_one_line

KEPT_BUILDS = "kept-builds"
"""The folder of the kept builds, in the shared parse folder (see the module doc)."""
FILES_KEPT = 64
"""Files kept (a key's tests, a key's statements on one catalog), the last used (every data directory's of the
parse folder, each kind of build's)."""
KEPT_FORMAT = 4
"""The form of a kept entry (tests: statement, severity, thresholds; setup: statements; models: statements,
relation): a change of it makes every kept one stale."""
BATCH_THREADS = 4
"""How many batched tests run at once (the ``dev`` profile's threads: dbt would run them on as many; lake
mode, one thread, batches none)."""
TRANSACTION_STATEMENTS = frozenset({"BEGIN", "COMMIT", "ROLLBACK"})
"""dbt's own transaction statements, left out of a replay (which is one transaction)."""
CATALOG_QUERY = """
    select schema_name, table_name, column_index, column_name, data_type, comment
    from duckdb_columns()
    where database_name = current_database()
    union all
    select schema_name, table_name, -1, null, null, comment
    from duckdb_tables()
    where database_name = current_database()
    order by all
"""
"""Every relation's columns, their types and the comments (``persist_docs`` writes only the comments the
catalog lacks, so the statements a build sends depend on them)."""


def dbt_version() -> str:
    """The installed dbt's and its DuckDB adapter's versions (what a kept entry was made with: the adapter
    writes the materializations' statements), read without importing dbt."""
    return f"{version('dbt-core')}+duckdb{version('dbt-duckdb')}"


@dataclass(frozen=True)
class KeptBuild:
    """What is kept for a key: its data tests and its models' statements, each None when not kept."""

    tests: list[dict[str, Any]] | None
    models: list[dict[str, Any]] | None
    catalog: str | None
    """The catalog the models' statements were sent on (:func:`catalog_digest`)."""
    setup: list[str] = field(default_factory=list)
    """What dbt sent before the models: the schemas' creation."""

    @property
    def whole(self) -> bool:
        """Both its tests and its models' statements are kept."""
        return self.tests is not None and self.models is not None

    def replayable_on(self, catalog: str | None) -> bool:
        """Whether the whole build can run without dbt on a database of this ``catalog``."""
        return self.whole and catalog is not None and catalog == self.catalog


def kept_build(shared: Path, key: str, database: str, catalog: str | None = None) -> KeptBuild | None:
    """What is kept for ``key`` in the parse folder ``shared`` for a database of file name ``database`` with
    this dbt: its tests, and its models' statements sent on ``catalog`` (None: not looked for); None when
    neither is kept."""
    tests = _read(_tests_file(shared, key), database, "tests")
    models = _read(_models_file(shared, key, catalog), database, "models") if catalog is not None else None
    if tests is None and models is None:
        return None
    return KeptBuild(None if tests is None else list(tests["tests"]),
                     None if models is None else list(models["models"]),
                     None if models is None else catalog, list(models["setup"]) if models else [])


def keep(shared: Path, key: str, database: str, *, tests: Sequence[dict[str, Any]] | None = None,
         setup: Sequence[str] | None = None, models: Sequence[dict[str, Any]] | None = None,
         catalog: str | None = None) -> None:
    """Keep ``tests`` and/or ``models`` (after ``setup``, sent on ``catalog``) for ``key``, each in a file of its
    own; the files beyond the :data:`FILES_KEPT` last used go."""
    folder = shared / KEPT_BUILDS
    folder.mkdir(exist_ok=True)
    header = {"database": database, "dbt": dbt_version(), "format": KEPT_FORMAT}
    with open(folder / ".lock", "a+") as lock:  # other data directories' workers keep theirs
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        if tests is not None:
            _write(_tests_file(shared, key), {**header, "tests": list(tests)})
        if models is not None and catalog is not None:
            _write(_models_file(shared, key, catalog), {**header, "setup": list(setup or []), "models": list(models)})
        files = sorted(folder.glob("*.json"), key=_used_at, reverse=True)
        for stale in files[FILES_KEPT:]:
            stale.unlink(missing_ok=True)


def _tests_file(shared: Path, key: str) -> Path:
    return shared / KEPT_BUILDS / f"{_name(key)}.tests.json"


def _models_file(shared: Path, key: str, catalog: str) -> Path:
    return shared / KEPT_BUILDS / f"{_name(key)}.{_name(catalog)}.models.json"


def _name(text: str) -> str:
    """A file name's part for ``text`` (a key or a catalog digest): the text itself when it is one already."""
    if text.replace("-", "").replace("_", "").isalnum() and len(text) <= 64:
        return text
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _read(path: Path, database: str, part: str) -> dict[str, Any] | None:
    """The kept file at ``path`` when it was made for ``database`` with this dbt in this format (its use
    noted: the last used are kept), else None."""
    try:
        entry = json.loads(path.read_text())
        if (entry["database"], entry["dbt"], entry["format"]) != (database, dbt_version(), KEPT_FORMAT):
            return None
        if not isinstance(entry[part], list):
            return None
        with contextlib.suppress(OSError):
            os.utime(path)
        return entry  # a dict: indexing anything else by name raised above
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write(path: Path, entry: dict[str, Any]) -> None:
    written = path.with_name(path.name + ".tmp")  # one writer at a time: the lock
    written.write_text(json.dumps(entry))
    written.replace(path)


def _used_at(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def catalog_digest(con: Any) -> str:
    """A digest of every relation of the connection's database: its schema, name, columns, their types and the
    comments."""
    rows = con.execute(CATALOG_QUERY).fetchall()
    return hashlib.sha256(json.dumps(rows, default=str).encode()).hexdigest()[:16]


def replay_models(con: Any, models: Sequence[dict[str, Any]],
                  setup: Sequence[str] = ()) -> list[dict[str, Any]] | None:
    """Send the kept ``setup`` then ``models``' statements on ``con`` in one transaction; each model's result
    as dbt's ``run_results.json`` has it, or None when a statement failed (the transaction is rolled back:
    nothing of the replay stays)."""
    def send(statements: Sequence[str]) -> None:
        for statement in statements:
            unless_stop_asked()  # of the thread this runs in (another than the main one), between two statements
            if statement.strip().upper() not in TRANSACTION_STATEMENTS:
                con.execute(statement)

    results = []
    with on_stop(con.interrupt):  # a stop of a run in a thread other than the main one, which no signal reaches
        con.execute("BEGIN TRANSACTION")
        try:
            send(setup)
            for model in models:
                started = time.monotonic()
                send(model["statements"])
                results.append(_node_result(model["unique_id"], "success", "OK", None, started,
                                            thread="replayed", adapter_response={"_message": "OK"},
                                            relation=model.get("relation_name")))
            con.execute("COMMIT")
        except BaseException as exc:  # the database's error (dbt runs the build instead, and says it), or a stop
            with contextlib.suppress(Exception):
                con.execute("ROLLBACK")
            if query_interrupted(exc):  # a stop met in a statement: the run stops, no build instead
                raise KeyboardInterrupt from exc
            if not isinstance(exc, Exception):  # a stop
                raise
            return None
    return results


def run_tests(connect: Connect, tests: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Run the kept ``tests``, :data:`BATCH_THREADS` at a time, each thread on the cursor ``connect`` gives it;
    each result, in the order of ``tests``, as dbt's ``run_results.json`` has it."""
    return on_cursors(connect, judged, tests, BATCH_THREADS, "batched-tests")


def any_failed(results: Sequence[dict[str, Any]]) -> bool:
    """Whether a test of ``results`` (:func:`run_tests`') failed or errored: what fails the build, as in dbt."""
    return any(result["status"] in ("fail", "error") for result in results)


def judged(cursor: Any, test: dict[str, Any]) -> dict[str, Any]:
    """One kept test's result on ``cursor``, judged as dbt judges a test (``TestRunner.build_test_run_result``)."""
    started = time.monotonic()
    try:
        row = cursor.execute(test["sql"]).fetchone()
    except Exception as exc:  # the database's error, as dbt would report it: this test errored
        if query_interrupted(exc):  # a stop met in the query: no verdict of the test's
            raise KeyboardInterrupt from exc
        return _node_result(test["unique_id"], "error", error_in_one_line(exc), None, started)
    failures, should_warn, should_error = row if row is not None else (0, False, False)
    said = f"Got {failures} result{'' if failures == 1 else 's'}, configured to"
    if test["severity"] == "ERROR" and should_error:
        return _node_result(test["unique_id"], "fail", f"{said} fail if {test['error_if']}", failures, started)
    if should_warn:
        return _node_result(test["unique_id"], "warn", f"{said} warn if {test['warn_if']}", failures, started)
    return _node_result(test["unique_id"], "pass", None, 0, started)


def _node_result(unique_id: str, status: str, message: str | None, failures: int | None, started: float, *,
                 thread: str = "batched-tests", adapter_response: dict[str, Any] | None = None,
                 relation: str | None = None) -> dict[str, Any]:
    return {"unique_id": unique_id, "status": status, "message": message, "failures": failures,
            "execution_time": time.monotonic() - started, "timing": [], "thread_id": thread,
            "adapter_response": adapter_response or {}, "compiled": True, "relation_name": relation,
            "batch_results": None}


def add_results(path: Path, results: Sequence[dict[str, Any]], seconds: float) -> None:
    """Add ``results`` to the build's ``run_results.json`` at ``path``."""
    written = json.loads(path.read_text())
    written["results"].extend(results)
    written["elapsed_time"] = float(written.get("elapsed_time") or 0) + seconds
    path.write_text(json.dumps(written))


def write_results(path: Path, results: Sequence[dict[str, Any]], seconds: float) -> None:
    """A replayed build's ``run_results.json`` at ``path``: dbt's form, its nodes' ``results``."""
    metadata = {"dbt_version": dbt_version(), "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "invocation_id": None, "replayed": True}
    path.write_text(json.dumps({"metadata": metadata, "results": list(results), "elapsed_time": seconds,
                                "args": {}}))
