"""Work spread over threads, each on a cursor of its own: on DuckDB."""

from __future__ import annotations

import duckdb

from freight_pipeline.cursors import each_closed, on_cursors


def test_each_item_is_done_on_a_threads_own_cursor_in_order_and_every_cursor_is_closed() -> None:
    opened: list[duckdb.DuckDBPyConnection] = []
    closed: list[duckdb.DuckDBPyConnection] = []
    with duckdb.connect() as con:
        con.execute("create table t as select range as x from range(50)")

        def connect() -> tuple[duckdb.DuckDBPyConnection, object]:
            cursor = con.cursor()
            opened.append(cursor)
            return cursor, lambda: (closed.append(cursor), cursor.close())

        found = on_cursors(connect, lambda cursor, n: cursor.execute("select sum(x) from t where x < ?", [n])
                           .fetchone()[0], range(1, 40), 3, "test")
    assert found == [sum(range(n)) for n in range(1, 40)]
    assert 1 <= len(opened) <= 3 and closed == opened


def test_cursors_made_elsewhere_are_each_closed_by_their_own_close() -> None:
    made: list[duckdb.DuckDBPyConnection] = []
    with duckdb.connect() as con:

        def make() -> duckdb.DuckDBPyConnection:
            made.append(con.cursor())
            return made[-1]

        found = on_cursors(each_closed(make), lambda cursor, n: cursor.execute("select ?", [n]).fetchone()[0],
                           range(20), 2, "test")
        assert found == list(range(20)) and 1 <= len(made) <= 2
        for cursor in made:
            try:
                cursor.execute("select 1")
            except duckdb.ConnectionException:
                continue
            raise AssertionError("a cursor was left open")
