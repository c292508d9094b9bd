"""``warehouse.ddl``: cursors for other threads in the catalog their connection uses; whether any of several
sources has a row; Arrow tables read by name without a view in the catalog."""

from __future__ import annotations

import dataclasses
import datetime as dt
import threading

import duckdb
import pyarrow as pa
import pytest

from freight_pipeline.warehouse import ddl, meta
from freight_pipeline.warehouse.ddl import any_row, arrow_input, arrow_result, catalog_cursors, row_counts, run


def test_cursors_for_other_threads_use_the_catalog_their_connection_uses() -> None:
    """A connection whose catalog is an attached one (a lake's): a bare cursor starts in the instance's default
    catalog, each of ``catalog_cursors``' in the connection's, from any thread."""
    with duckdb.connect() as con:
        con.execute("ATTACH ':memory:' AS lake")
        con.execute("USE lake")
        con.execute("CREATE TABLE held AS SELECT 42 AS answer")
        bare = con.cursor()
        assert bare.execute("SELECT current_database()").fetchone() == ("memory",)
        bare.close()
        new_cursor = catalog_cursors(con)
        seen: list[tuple[str, int]] = []

        def read() -> None:
            cursor = new_cursor()
            (catalog,) = cursor.execute("SELECT current_database()").fetchone() or ("",)
            (answer,) = cursor.execute("SELECT answer FROM held").fetchone() or (0,)
            seen.append((catalog, answer))
            cursor.close()

        threads = [threading.Thread(target=read) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert seen == [("lake", 42)] * 3


def test_any_row_finds_a_row_in_whichever_source_holds_one() -> None:
    """``any_row`` over three tables, each taking the same parameters: a row in any one of them (first, middle,
    last) that its condition admits is found, one it does not admit is not; no source holds nothing."""
    with duckdb.connect() as con:
        names = ("a", "b", "c")
        for name in names:
            con.execute(f"CREATE TABLE {name} (shipment_id BIGINT)")
        sources = [f"FROM {name} WHERE shipment_id >= ? AND shipment_id < ?" for name in names]
        assert not any_row(con, []) and not any_row(con, sources, [0, 10])
        for name in names:
            con.execute(f"INSERT INTO {name} VALUES (5), (7)")
            assert any_row(con, sources, [0, 10]), name
            assert any_row(con, sources, [7, 8]), name
            assert not any_row(con, sources, [10, 20]), name
            assert any_row(con, [f"FROM {name}"]), name
            con.execute(f"DELETE FROM {name}")
        assert not any_row(con, [f"FROM {name}" for name in names])


def test_row_counts_counts_each_table_by_its_qualified_name() -> None:
    """One statement for every table: each count is its own table's (none, two, three rows; a name that needs
    quoting), keyed by qualified name; no table, no statement."""
    specs = [dataclasses.replace(meta.SYNC_STATE, schema="s", name=name) for name in ("empty", "two", "three rows")]
    with duckdb.connect() as con:
        con.execute("CREATE SCHEMA s")
        for spec, rows in zip(specs, (0, 2, 3), strict=True):
            con.execute(f'CREATE TABLE s."{spec.name}" AS SELECT range AS n FROM range({rows})')
        assert row_counts(con, specs) == {"s.empty": 0, "s.two": 2, "s.three rows": 3}
        assert list(row_counts(con, specs[::-1])) == ["s.three rows", "s.two", "s.empty"]
        assert row_counts(con, []) == {}


def test_insert_values_binds_each_row_in_statements_of_at_most_the_declared_rows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Rows bound to a row's placeholders beside its literals, in as many statements as the chunk size needs (a
    full chunk, a partial one; none for no rows); a row with too few or too many values is refused before anything
    is written, naming it."""
    monkeypatch.setattr(ddl, "VALUES_PER_STATEMENT", 3)
    sent: list[str] = []
    with duckdb.connect() as con:
        con.execute("SET TimeZone = 'UTC'")
        con.execute("CREATE TABLE t (id BIGINT, name VARCHAR, seen_at TIMESTAMPTZ, fixed INTEGER, note VARCHAR)")
        real_run = ddl.run
        monkeypatch.setattr(ddl, "run", lambda c, sql, params=None: sent.append(sql) or real_run(c, sql, params))
        ddl.insert_values(con, "INSERT INTO t VALUES", "(?, ?, ?, 7, NULL)", [])
        assert sent == []
        when = dt.datetime(2026, 12, 5, 4, 0, tzinfo=dt.UTC)
        rows = [(i, f"n{i}" if i % 2 else None, when if i % 2 else None) for i in range(5)]
        ddl.insert_values(con, "INSERT INTO t VALUES", "(?, ?, ?, 7, NULL)", rows)
        assert [sql.count("(?, ?, ?, 7, NULL)") for sql in sent] == [3, 2]
        assert con.execute("SELECT id, name, seen_at, fixed, note FROM t ORDER BY id").fetchall() == [
            (i, f"n{i}" if i % 2 else None, when if i % 2 else None, 7, None) for i in range(5)]
        for bad in ([(1, "a")], [(1, "a", None), (2, "b", None, 4)]):
            with pytest.raises(ValueError, match=r"row \d+ has \d values for the 3 placeholders"):
                ddl.insert_values(con, "INSERT INTO t VALUES", "(?, ?, ?, 7, NULL)", bad)
        assert con.execute("SELECT count(*) FROM t").fetchone() == (5,)


def test_an_arrow_input_is_read_by_name_on_its_connection_during_its_block_and_never_enters_the_catalog() -> None:
    """``arrow_input``: ``run`` and ``arrow_result`` on the same connection read the table by its name (in a
    statement with parameters and with others, nested), inside a transaction and out; another connection does not
    see it, nor does the catalog (no view), and after the block the name is unknown again."""
    ids = pa.table({"id": pa.array([1, 2, 3], pa.int64())})
    names = pa.table({"id": pa.array([2, 3, 4], pa.int64()), "name": pa.array(["b", "c", "d"])})
    with duckdb.connect() as con, duckdb.connect() as other:
        run(con, "CREATE TABLE held (id BIGINT, name VARCHAR)")
        with arrow_input(con, ids) as first:
            assert run(con, f"SELECT count(*) FROM {first} WHERE id > ?", [1]) == [(2,)]
            with arrow_input(con, names, "_names") as second:
                assert second.startswith("_names_")
                run(con, "BEGIN TRANSACTION")
                run(con, f"INSERT INTO held SELECT * FROM {second} WHERE id IN (SELECT id FROM {first})")
                run(con, "COMMIT")
                joined = arrow_result(con, f"SELECT n.name FROM {first} i JOIN {second} n USING (id) "
                                           "WHERE n.id >= $low ORDER BY 1", {"low": 3})
                assert joined.column("name").to_pylist() == ["c"]
                with pytest.raises(duckdb.CatalogException):
                    run(other, f"SELECT * FROM {second}")
                assert run(con, "SELECT count(*) FROM duckdb_views() WHERE NOT internal") == [(0,)]
            with pytest.raises(duckdb.CatalogException):
                run(con, f"SELECT * FROM {second}")
            assert run(con, f"SELECT count(*) FROM {first}") == [(3,)]
        with pytest.raises(duckdb.CatalogException):
            run(con, f"SELECT * FROM {first}")
        assert run(con, "SELECT id, name FROM held ORDER BY id") == [(2, "b"), (3, "c")]


@pytest.mark.parametrize("threads", [1, 3])
def test_one_thread_runs_its_block_on_one_thread_and_restores_the_instance_s_setting(threads: int) -> None:
    def setting(c: duckdb.DuckDBPyConnection) -> int:
        return int(run(c, "SELECT current_setting('threads')")[0][0])

    with duckdb.connect(config={"threads": threads}) as con, con.cursor() as other:  # other: the instance's too
        with ddl.one_thread(con):
            assert (setting(con), setting(other)) == (1, 1)
        assert (setting(con), setting(other)) == (threads, threads)
        with pytest.raises(duckdb.CatalogException), ddl.one_thread(con):
            run(con, "SELECT * FROM no_such_table")
        assert setting(con) == threads
