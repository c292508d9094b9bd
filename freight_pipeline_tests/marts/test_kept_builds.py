"""What a build kept for its key, and running it again without dbt: on DuckDB, no dbt."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from freight_pipeline.marts.kept_builds import (
    FILES_KEPT,
    KEPT_BUILDS,
    catalog_digest,
    keep,
    kept_build,
    replay_models,
    run_tests,
)
from freight_pipeline.process_end import ask_stop, query_interrupted

MODELS = [
    {"unique_id": "model.p.a", "relation_name": '"a"',
     "statements": ["BEGIN", "create table a as select 1 as x", "COMMIT"]},
    {"unique_id": "model.p.b", "relation_name": '"b"',
     "statements": ["create temporary table b_tmp as select x + 1 as x from a", "create table b as from b_tmp"]},
]


def test_a_replay_sends_every_models_statements_in_one_transaction_and_rolls_back_when_one_fails() -> None:
    with duckdb.connect() as con:
        results = replay_models(con, MODELS)
        assert results is not None
        assert [(r["unique_id"], r["status"], r["thread_id"], r["relation_name"]) for r in results] == [
            ("model.p.a", "success", "replayed", '"a"'), ("model.p.b", "success", "replayed", '"b"')]
        assert con.execute("from b").fetchall() == [(2,)]
    failing = [*MODELS, {"unique_id": "model.p.c", "statements": ["insert into a values (7)", "from no_such"]}]
    with duckdb.connect() as con:
        assert replay_models(con, failing) is None
        assert con.execute("select count(*) from duckdb_tables() where not temporary").fetchone() == (0,)
        con.execute("create table after as select 1")  # the connection is usable: no transaction left open


def test_the_catalog_is_every_relations_columns_and_types() -> None:
    with duckdb.connect() as con:
        con.execute("create schema s; create table s.t (a integer, b varchar); create view s.v as from s.t")
        before = catalog_digest(con)
        con.execute("insert into s.t values (1, 'x')")
        assert catalog_digest(con) == before  # rows are not the catalog
        con.execute("alter table s.t add column c date")
        assert catalog_digest(con) != before


def test_a_key_keeps_its_tests_and_its_statements_per_catalog_for_its_database_and_dbt(tmp_path: Path) -> None:
    keep(tmp_path, "k", "warehouse.duckdb", tests=[{"unique_id": "test.p.t"}])
    held = kept_build(tmp_path, "k", "warehouse.duckdb", "c1")
    assert held is not None and held.tests == [{"unique_id": "test.p.t"}] and held.models is None
    assert not held.replayable_on("c1")
    keep(tmp_path, "k", "warehouse.duckdb", setup=["create schema s"], models=MODELS, catalog="c1")
    keep(tmp_path, "k", "warehouse.duckdb", models=MODELS[:1], catalog="c2")  # another catalog's beside it
    held = kept_build(tmp_path, "k", "warehouse.duckdb", "c1")
    assert held is not None and held.tests == [{"unique_id": "test.p.t"}] and held.models == MODELS
    assert held.setup == ["create schema s"]
    assert held.replayable_on("c1") and not held.replayable_on("c2") and not held.replayable_on(None)
    other = kept_build(tmp_path, "k", "warehouse.duckdb", "c2")
    assert other is not None and other.models == MODELS[:1] and other.replayable_on("c2")
    only_tests = kept_build(tmp_path, "k", "warehouse.duckdb")  # no catalog asked: the tests alone
    assert only_tests is not None and only_tests.models is None
    assert kept_build(tmp_path, "k", "other.duckdb", "c1") is None  # the statements name the database by its file
    assert kept_build(tmp_path, "unknown", "warehouse.duckdb", "c1") is None

    tests = next((tmp_path / KEPT_BUILDS).glob("*.tests.json"))
    entry = json.loads(tests.read_text())
    tests.write_text(json.dumps({**entry, "dbt": "0.0.1"}))  # made by another dbt: stale
    held = kept_build(tmp_path, "k", "warehouse.duckdb", "c1")
    assert held is not None and held.tests is None and held.models == MODELS and not held.whole
    keep(tmp_path, "k", "warehouse.duckdb", tests=[])  # a stale file is made anew
    held = kept_build(tmp_path, "k", "warehouse.duckdb", "c1")
    assert held is not None and held.tests == [] and held.whole


def test_the_last_used_files_are_kept(tmp_path: Path) -> None:
    keep(tmp_path, "first", "warehouse.duckdb", tests=[])
    keep(tmp_path, "used", "warehouse.duckdb", tests=[])
    for n in range(FILES_KEPT - 2):
        keep(tmp_path, f"k{n}", "warehouse.duckdb", tests=[])
        if n == 0:
            time.sleep(0.01)
            assert kept_build(tmp_path, "used", "warehouse.duckdb") is not None  # a use counts as new
            time.sleep(0.01)
    assert len(list((tmp_path / KEPT_BUILDS).glob("*.json"))) == FILES_KEPT
    keep(tmp_path, "last", "warehouse.duckdb", tests=[])
    assert len(list((tmp_path / KEPT_BUILDS).glob("*.json"))) == FILES_KEPT
    assert kept_build(tmp_path, "first", "warehouse.duckdb") is None  # the least recently used went
    assert kept_build(tmp_path, "used", "warehouse.duckdb") is not None
    assert kept_build(tmp_path, "last", "warehouse.duckdb") is not None


@pytest.mark.parametrize(("found", "severity", "status", "message"), [
    (0, "ERROR", "pass", None),
    (2, "ERROR", "fail", "Got 2 results, configured to fail if != 0"),
    (1, "WARN", "warn", "Got 1 result, configured to warn if != 0"),
])
def test_a_batched_test_is_judged_as_dbt_judges_it(found: int, severity: str, status: str,
                                                     message: str | None) -> None:
    with duckdb.connect() as con:
        con.execute(f"create table t as select range as x from range({found})")
        test = {"unique_id": "test.p.t.1", "severity": severity, "warn_if": "!= 0", "error_if": "!= 0",
                "sql": "select count(*) as failures, count(*) != 0 as should_warn, count(*) != 0 as should_error "
                       "from t"}
        broken = {**test, "unique_id": "test.p.u.2", "sql": "select * from no_such"}

        def cursor() -> tuple[duckdb.DuckDBPyConnection, object]:
            handle = con.cursor()
            return handle, handle.close

        judged, errored = run_tests(cursor, [test, broken])
    assert (judged["status"], judged["message"], judged["failures"]) == (status, message, found if found else 0)
    assert errored["status"] == "error" and "no_such" in errored["message"]



LONG = "select count(*) from range(100000000000) t(i) where i % 7 = 3"
"""A statement that runs for minutes: a stop always meets it running."""


class CtrlC:
    """A connection whose long statements meet Ctrl-C as DuckDB takes it: ``RuntimeError: Query interrupted``
    (the interpreter's KeyboardInterrupt, which DuckDB reads between its own steps, at a moment no test can set)."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    def execute(self, sql: str) -> duckdb.DuckDBPyConnection:
        if LONG in sql:
            raise RuntimeError("Query interrupted")
        return self.con.execute(sql)

    def interrupt(self) -> None:
        self.con.interrupt()


@contextlib.contextmanager
def stopped(how: str, con: duckdb.DuckDBPyConnection) -> Iterator[Any]:
    """The connection to run on, stopped as ``how`` says: by its ``interrupt()`` after 0.3 s (DuckDB's
    ``InterruptException``), or as by Ctrl-C (:class:`CtrlC`)."""
    if how == "ctrl-c":
        yield CtrlC(con)
        return
    timer = threading.Timer(0.3, con.interrupt)
    timer.start()
    try:
        yield con
    finally:
        timer.cancel()


@pytest.mark.parametrize("how", ["ctrl-c", "interrupt"])
def test_a_stop_met_in_a_replay_or_a_batched_test_stops_it_never_taken_for_the_database_s_error(how: str) -> None:
    """A replay that fails gives way to dbt's build, a test that errors is judged so: a stop met in their queries
    is neither (a run stopped in its replay went on to a whole dbt build and published, then exited as stopped)."""
    model = {"unique_id": "model.p.long", "statements": [f"create table t as {LONG}"]}
    test = {"unique_id": "test.p.long", "severity": "ERROR", "warn_if": "!= 0", "error_if": "!= 0",
            "sql": f"select 0 as failures, false as should_warn, false as should_error from ({LONG})"}
    with duckdb.connect() as con:
        with pytest.raises(KeyboardInterrupt) as raised, stopped(how, con) as on:
            replay_models(on, [model])
        assert query_interrupted(raised.value.__cause__)
        assert con.execute("select count(*) from duckdb_tables() where not temporary").fetchone() == (0,)
        with pytest.raises(KeyboardInterrupt) as raised, stopped(how, con) as on:
            run_tests(lambda: (on, lambda: None), [test])
        assert query_interrupted(raised.value.__cause__)


class Paused:
    """A connection that runs ``then()`` just before its statement that contains ``marker`` (then the statement)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, marker: str, then: Any) -> None:
        self.con, self.marker, self.then = con, marker, then

    def execute(self, sql: str) -> duckdb.DuckDBPyConnection:
        if self.marker in sql:
            self.then()
        return self.con.execute(sql)

    def interrupt(self) -> None:
        self.con.interrupt()


@pytest.mark.parametrize("when", ["before it", "in a statement", "between two statements"])
def test_a_stop_asked_of_the_thread_a_replay_runs_in_ends_it_and_rolls_it_back(when: str) -> None:
    """A Dagster run's build replays in the engine's thread, which no signal reaches: a stop asked of it
    (``process_end.ask_stop``) went unseen until the whole replay ended (DuckDB drops an ``interrupt()`` that
    comes between two statements). It ends the replay before it begins, in its statement, or at the next one."""
    model = {"unique_id": "model.p.long", "statements": [
        "create table a as select 1 as x", "select 'marker'", "create table b as select 2 as x",
        f"create table t as {LONG}"]}
    ended: list[BaseException] = []
    reached = threading.Event()
    with duckdb.connect() as con:

        def replay() -> None:
            try:
                replay_models(on, [model])
            except BaseException as exc:
                ended.append(exc)

        def stop_it_here() -> None:  # from another thread, while this one waits: the replay's own thread asked
            asking = threading.Thread(target=ask_stop, args=(thread,))
            asking.start()
            asking.join()

        on: Any = {"before it": con, "between two statements": Paused(con, "'marker'", stop_it_here),
                   "in a statement": Paused(con, LONG, reached.set)}[when]
        thread = threading.Thread(target=replay)
        if when == "before it":
            ask_stop(thread)
        thread.start()
        if when == "in a statement":
            assert reached.wait(30)
            time.sleep(0.2)  # DuckDB runs it
            ask_stop(thread)
        thread.join(60)
        went_on = thread.is_alive()
        if went_on:  # into the statement that runs for minutes: ended here, the test failed
            con.interrupt()
            thread.join(60)
        assert not went_on
        assert [type(exc) for exc in ended] == [KeyboardInterrupt]
        if when == "in a statement":
            assert query_interrupted(ended[0].__cause__)
        assert con.execute("select count(*) from duckdb_tables() where not temporary").fetchone() == (0,)
        con.execute("create table after as select 1")  # the connection is usable: no transaction left open
