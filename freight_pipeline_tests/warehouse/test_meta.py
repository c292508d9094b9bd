"""``meta.latest_runs``: each stream's latest ``sync_runs`` row, the one recorded last, the same as a window over every
row would give, for any rows: ``started_at`` in any order (a clock stepped back), ties, runs that never recorded a
start. (What it saves on a long history: ``bench/compare.py --scenarios past-runs``.) ``meta.LATEST_STATE``: each
stream's ``sync_state`` row written last, whatever its ``updated_at``."""

from __future__ import annotations

import datetime as dt

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from freight_pipeline.warehouse import meta

TABLE = meta.SYNC_RUNS.qualified_name
WINDOW = (f"SELECT * FROM {TABLE} "
          "QUALIFY row_number() OVER (PARTITION BY stream ORDER BY rowid DESC) = 1")
"""The definition: the row per stream recorded last, by a window over every row."""
T0 = dt.datetime(2026, 3, 29, 0, 30, tzinfo=dt.UTC)

runs = st.dictionaries(
    st.tuples(st.sampled_from(["r1", "r2", "r3", "r10"]), st.sampled_from(["shipments", "code_conversions", "dbt"])),
    st.tuples(st.none() | st.integers(0, 3).map(lambda m: T0 + dt.timedelta(minutes=m)),
              st.sampled_from(["running", "success", "failed"])),
    max_size=12,
)
"""Rows by their key (run_id, stream): few starts, so that they tie."""


@pytest.fixture(scope="module")
def con() -> duckdb.DuckDBPyConnection:
    with duckdb.connect() as connection:
        connection.execute("SET TimeZone = 'UTC'")
        connection.execute(f"CREATE SCHEMA {meta.SYNC_RUNS.schema}")
        connection.execute(meta.SYNC_RUNS.ddl())
        yield connection


def holding(con: duckdb.DuckDBPyConnection, rows: dict[tuple[str, str], tuple[dt.datetime | None, str]]) -> None:
    con.execute(f"DELETE FROM {TABLE}")
    if rows:
        con.executemany(f"INSERT INTO {TABLE} (run_id, stream, started_at, status) VALUES (?, ?, ?, ?)",
                        [[*key, *value] for key, value in rows.items()])


def latest(con: duckdb.DuckDBPyConnection, source: str) -> list[tuple[object, ...]]:
    return con.execute(f"SELECT run_id, stream, started_at, status FROM ({source}) ORDER BY stream").fetchall()


@settings(max_examples=150, deadline=None)
@given(rows=runs)
def test_the_latest_run_of_each_stream_is_the_window_s_for_any_rows(
    con: duckdb.DuckDBPyConnection, rows: dict[tuple[str, str], tuple[dt.datetime | None, str]]
) -> None:
    holding(con, rows)
    assert latest(con, f"SELECT * FROM {meta.latest_runs(TABLE)}") == latest(con, WINDOW)


def test_the_row_recorded_last_whatever_its_start_said(con: duckdb.DuckDBPyConnection) -> None:
    """In the order recorded: a stream's start dated a day before the one recorded before it (a clock stepped back)
    is its latest all the same; a start never recorded, a tie in ``started_at``: the row recorded last."""
    holding(con, {("r1", "dbt"): (None, "failed"),  # its only row: no start
                  ("r1", "shipments"): (T0, "success"), ("r2", "shipments"): (T0, "running"),  # a tie: r2's
                  ("r3", "code_conversions"): (T0, "success"),
                  ("r0", "code_conversions"): (T0 - dt.timedelta(days=1), "failed")})  # recorded after r3
    assert [(run_id, stream, status) for run_id, stream, _, status in latest(
        con, f"SELECT * FROM {meta.latest_runs(TABLE)}")] == [
        ("r0", "code_conversions", "failed"), ("r1", "dbt", "failed"), ("r2", "shipments", "running")]


def test_the_latest_state_is_the_row_written_last_whatever_its_updated_at_said(con: duckdb.DuckDBPyConnection) -> None:
    """A lake appends a ``sync_state`` row per cursor written: the one written last is the stream's cursor, though
    the clock stepped back between the two writes (and one written as null, an entry cleared, stays cleared)."""
    state = meta.SYNC_STATE.qualified_name
    con.execute(meta.SYNC_STATE.ddl(key_constraint=False))
    con.executemany(f"INSERT INTO {state} (stream, cursor_value, updated_at) VALUES (?, ?, ?)",
                    [["shipments", '{"id": 100}', T0 + dt.timedelta(hours=2)], ["behind", "since", T0],
                     ["shipments", '{"id": 200}', T0], ["behind", None, T0 - dt.timedelta(hours=1)]])
    assert con.execute(f"SELECT stream, cursor_value FROM {state} {meta.LATEST_STATE} ORDER BY stream").fetchall() == [
        ("behind", None), ("shipments", '{"id": 200}')]

