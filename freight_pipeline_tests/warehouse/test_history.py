"""The version logic of ``freight_history`` against a plain DuckDB connection, with hand-computed rows:
new subjects, an unchanged re-read, a change, a vanished event, a deleted shipment, an older copy
arriving late, a rerun; the air/sea leg mapping; the point-in-time macros; the schema's declaration
against the agreed columns and the contract."""

from __future__ import annotations

import datetime as dt
import json
import re
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest

from freight_pipeline.config import REPO_ROOT, StorageSettings
from freight_pipeline.normalize.schema import TableSpec
from freight_pipeline.normalize.specs.events_memos import SHIPMENT_EVENTS
from freight_pipeline.normalize.specs.legs import AIR_MAIN_CARRIAGE_LEGS, SEA_MAIN_CARRIAGE_LEGS
from freight_pipeline.normalize.specs.shipments import SHIPMENTS
from freight_pipeline.normalize.tables import FREIGHT_TABLES
from freight_pipeline.warehouse.embedded import EmbeddedDuckDB
from freight_pipeline.warehouse.history import (
    EVENT_VERSIONS,
    HISTORY_TABLES,
    LEG_VERSIONS,
    SHIPMENT_VERSIONS,
    SUBJECTS,
    VersionBatch,
    VersionCounts,
    disagreeing_sql,
    ensure_history,
    record_versions,
)
from freight_pipeline.warehouse.publish import parquet_root, publish, published_db_path
from freight_pipeline.warehouse.records import RawDocument, RunRecord
from freight_pipeline.warehouse.store import Warehouse
from freight_pipeline.warehouse.writes import RepeatedKey
from freight_pipeline_tests.warehouse.helpers import apply_shipment_batch
from freight_pipeline_tests.warehouse.history_checks import assert_contiguous
from freight_pipeline_tests.warehouse.older import OLDEST_READER, older_python, version_of

UTC = dt.UTC
CONTRACT = REPO_ROOT / "docs" / "warehouse-contract.md"
SHIPMENT_SUBJECT, EVENT_SUBJECT = SUBJECTS[0], SUBJECTS[1]


def at(day: int, hour: int = 0, minute: int = 0) -> dt.datetime:
    return dt.datetime(2026, 11, day, hour, minute, tzinfo=UTC)


@pytest.fixture
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    connection = duckdb.connect()
    connection.execute("SET TimeZone = 'UTC'")
    connection.begin()
    ensure_history(connection)
    connection.commit()
    yield connection
    connection.close()


def event(shipment_id: int, code: str, type_: str, event_at: dt.datetime | None, **more: Any) -> dict[str, Any]:
    return {"shipment_id": shipment_id, "event": code, "type": type_, "event_at": event_at, **more}


def header(shipment_id: int, **more: Any) -> dict[str, Any]:
    return {"shipment_id": shipment_id, "client": "C1", "mode_of_transport": "AIR", **more}


def write(
    con: duckdb.DuckDBPyConnection,
    run_id: str,
    recorded_at: dt.datetime,
    stamps: Mapping[int, dt.datetime | None],
    *,
    shipments: Sequence[dict[str, Any]] | None = None,
    events: Sequence[dict[str, Any]] | None = None,
    air: Sequence[dict[str, Any]] | None = None,
    sea: Sequence[dict[str, Any]] | None = None,
    deleted: Sequence[int] = (),
    deleted_at: dt.datetime | None = None,
    held: Mapping[int, dt.datetime] | None = None,
) -> VersionCounts:
    """One batch in one transaction: each table given replaces the rows of every shipment in ``stamps``; ``held``:
    the instants of the documents held before it (``VersionBatch``'s ``held_from``; None: not known)."""
    given = {SHIPMENTS: shipments, SHIPMENT_EVENTS: events, AIR_MAIN_CARRIAGE_LEGS: air, SEA_MAIN_CARRIAGE_LEGS: sea}
    rows = {spec.qualified_name: spec.to_arrow(list(values)) for spec, values in given.items() if values is not None}
    batch = VersionBatch(
        rows=rows,
        replaced={name: list(stamps) for name in rows},
        stamps=pa.table({"shipment_id": pa.array(list(stamps), pa.int64()),
                         "valid_from": pa.array(list(stamps.values()), pa.timestamp("us", tz="UTC")),
                         **({} if held is None else {"held_from": pa.array([held.get(i) for i in stamps],
                                                                           pa.timestamp("us", tz="UTC"))})}),
        deleted_ids=deleted,
        deleted_at=deleted_at,
    )
    con.begin()
    try:
        counts = record_versions(con, batch, run_id, recorded_at)
    except BaseException:
        con.rollback()
        raise
    con.commit()
    return counts


EVENT_COLUMNS = "shipment_id, event, type, event_at, valid_from, valid_to, deleted, run_id"


def events_held(con: duckdb.DuckDBPyConnection) -> list[tuple[Any, ...]]:
    return con.execute(f"SELECT {EVENT_COLUMNS} FROM freight_history.event_versions ORDER BY ALL").fetchall()


def all_rows(con: duckdb.DuckDBPyConnection) -> dict[str, list[tuple[Any, ...]]]:
    return {spec.name: con.execute(f"SELECT * FROM {spec.qualified_name} ORDER BY ALL").fetchall()
            for spec in HISTORY_TABLES}


# --- versions of events ----------------------------------------------------------------------------


def test_new_events_are_first_versions(con: duckdb.DuckDBPyConnection) -> None:
    counts = write(con, "r1", at(1, 9), {7: at(1, 8)},
                   events=[event(7, "POD_ARRIVAL", "ESTIMATED", at(20, 6), unloc="DEHAM"),
                           event(7, "PICKUP", "ACTUAL", at(1, 7))])
    assert counts.added == {"event_versions": 2}
    assert events_held(con) == [
        (7, "PICKUP", "ACTUAL", at(1, 7), at(1, 8), None, False, "r1"),
        (7, "POD_ARRIVAL", "ESTIMATED", at(20, 6), at(1, 8), None, False, "r1"),
    ]
    assert con.execute("SELECT DISTINCT unloc, recorded_at FROM freight_history.event_versions "
                       "WHERE event = 'POD_ARRIVAL'").fetchall() == [("DEHAM", at(1, 9))]


def test_an_unchanged_reread_adds_nothing_even_under_a_newer_stamp(con: duckdb.DuckDBPyConnection) -> None:
    events = [event(7, "POD_ARRIVAL", "ESTIMATED", at(20, 6)), event(7, "PICKUP", "ACTUAL", at(1, 7))]
    write(con, "r1", at(1, 9), {7: at(1, 8)}, shipments=[header(7, office="HAM")], events=events)
    before = all_rows(con)
    again = write(con, "r2", at(2, 9), {7: at(1, 8)}, shipments=[header(7, office="HAM")], events=events)
    assert again.rows_added == 0
    # the shipment changed for another reason (its office): the events did not move, only the header is new
    moved = write(con, "r3", at(3, 9), {7: at(3, 8)}, shipments=[header(7, office="BRE")], events=events)
    assert moved.added == {"shipment_versions": 1, "event_versions": 0}
    assert all_rows(con)["event_versions"] == before["event_versions"]
    assert con.execute("SELECT office, valid_from, valid_to, run_id FROM freight_history.shipment_versions "
                       "ORDER BY valid_from").fetchall() == [("HAM", at(1, 8), at(3, 8), "r1"),
                                                             ("BRE", at(3, 8), None, "r3")]


def test_a_moved_estimate_closes_the_version_it_follows(con: duckdb.DuckDBPyConnection) -> None:
    write(con, "r1", at(1, 9), {7: at(1, 8)}, events=[event(7, "POD_ARRIVAL", "ESTIMATED", at(20, 6))])
    write(con, "r2", at(4, 9), {7: at(4, 8)}, events=[event(7, "POD_ARRIVAL", "ESTIMATED", at(21, 18))])
    write(con, "r3", at(9, 9), {7: at(9, 8)}, events=[event(7, "POD_ARRIVAL", "ESTIMATED", at(21, 18)),
                                                      event(7, "POD_ARRIVAL", "ACTUAL", at(21, 20))])
    assert events_held(con) == [
        (7, "POD_ARRIVAL", "ACTUAL", at(21, 20), at(9, 8), None, False, "r3"),
        (7, "POD_ARRIVAL", "ESTIMATED", at(20, 6), at(1, 8), at(4, 8), False, "r1"),
        (7, "POD_ARRIVAL", "ESTIMATED", at(21, 18), at(4, 8), None, False, "r2"),
    ]
    assert_contiguous(con)


def test_a_vanished_event_gets_a_deleted_version_and_may_come_back(con: duckdb.DuckDBPyConnection) -> None:
    both = [event(7, "POD_ARRIVAL", "ESTIMATED", at(20, 6)), event(7, "CUSTOMS", "ESTIMATED", at(19))]
    write(con, "r1", at(1, 9), {7: at(1, 8)}, events=both)
    counts = write(con, "r2", at(4, 9), {7: at(4, 8)}, events=both[:1])
    assert counts.added == {"event_versions": 1}
    write(con, "r3", at(6, 9), {7: at(6, 8)}, events=[])  # every event gone
    write(con, "r4", at(8, 9), {7: at(8, 8)}, events=both[1:])  # one is back, as it was
    assert events_held(con) == [
        (7, "CUSTOMS", "ESTIMATED", at(19), at(1, 8), at(4, 8), False, "r1"),
        (7, "CUSTOMS", "ESTIMATED", at(19), at(8, 8), None, False, "r4"),
        (7, "CUSTOMS", "ESTIMATED", None, at(4, 8), at(8, 8), True, "r2"),
        (7, "POD_ARRIVAL", "ESTIMATED", at(20, 6), at(1, 8), at(6, 8), False, "r1"),
        (7, "POD_ARRIVAL", "ESTIMATED", None, at(6, 8), None, True, "r3"),
    ]
    assert_contiguous(con)


def test_only_the_tables_replaced_can_lose_subjects(con: duckdb.DuckDBPyConnection) -> None:
    """A batch that replaces a shipment's header but not its events (their part failed, they stay as held)
    leaves its events' versions alone."""
    write(con, "r1", at(1, 9), {7: at(1, 8)}, shipments=[header(7)], events=[event(7, "PICKUP", "ACTUAL", at(1))])
    counts = write(con, "r2", at(4, 9), {7: at(4, 8)}, shipments=[header(7, office="BRE")])
    assert counts.added == {"shipment_versions": 1}
    assert events_held(con) == [(7, "PICKUP", "ACTUAL", at(1), at(1, 8), None, False, "r1")]


def test_a_deleted_shipment_ends_every_subject_at_the_runs_start(con: duckdb.DuckDBPyConnection) -> None:
    write(con, "r1", at(1, 9), {7: at(1, 8), 8: at(1, 8)}, shipments=[header(7), header(8)],
          events=[event(7, "PICKUP", "ACTUAL", at(1)), event(8, "PICKUP", "ACTUAL", at(1))],
          air=[{"shipment_id": 7, "position": 1, "flight_no": "LH400"}])
    write(con, "r1", at(2, 9), {7: at(2, 8)}, events=[])  # shipment 7's event already vanished
    counts = write(con, "r2", at(5, 10), {}, deleted=[7], deleted_at=at(5, 9))
    assert counts.added == {"shipment_versions": 1, "event_versions": 0, "leg_versions": 1}
    assert con.execute("SELECT shipment_id, valid_from, valid_to, deleted, client, run_id, recorded_at "
                       "FROM freight_history.shipment_versions ORDER BY ALL").fetchall() == [
        (7, at(1, 8), at(5, 9), False, "C1", "r1", at(1, 9)),
        (7, at(5, 9), None, True, None, "r2", at(5, 10)),
        (8, at(1, 8), None, False, "C1", "r1", at(1, 9)),
    ]
    assert con.execute("SELECT mode, position, voyage, valid_from, valid_to, deleted "
                       "FROM freight_history.leg_versions ORDER BY valid_from").fetchall() == [
        ("AIR", 1, "LH400", at(1, 8), at(5, 9), False), ("AIR", 1, None, at(5, 9), None, True),
    ]
    assert write(con, "r3", at(6), {}, deleted=[7], deleted_at=at(6)).rows_added == 0  # noticed again: nothing
    assert_contiguous(con)


def test_a_deletion_noticed_by_a_clock_behind_the_service_follows_the_last_version(
    con: duckdb.DuckDBPyConnection,
) -> None:
    write(con, "r1", at(10, 9), {7: at(10, 8)}, shipments=[header(7)])
    write(con, "r2", at(3), {}, deleted=[7], deleted_at=at(3))  # the pipeline's clock is a week behind
    assert con.execute("SELECT valid_from, valid_to, deleted FROM freight_history.shipment_versions "
                       "ORDER BY valid_from").fetchall() == [
        (at(10, 8), at(10, 8) + dt.timedelta(microseconds=1), False),
        (at(10, 8) + dt.timedelta(microseconds=1), None, True),
    ]


def test_an_older_copy_is_a_revert_dated_when_noticed(con: duckdb.DuckDBPyConnection) -> None:
    """The service went back (a restore): its older copy becomes the current version, dated at the start of the
    run that noticed, so the history's current view follows the rows held."""
    write(con, "r1", at(4, 9), {7: at(4, 8)}, shipments=[header(7, office="BRE")],
          events=[event(7, "POD_ARRIVAL", "ESTIMATED", at(21))])
    # the version of the 2nd, read after the one of the 4th by a run that began on the 5th at 8:30
    counts = write(con, "r2", at(5, 9), {7: at(2, 8)}, shipments=[header(7, office="HAM")],
                   events=[event(7, "POD_ARRIVAL", "ESTIMATED", at(20)), event(7, "PICKUP", "ACTUAL", at(1))],
                   deleted_at=at(5, 8, 30))
    assert counts.stale == [7] and counts.added == {"shipment_versions": 1, "event_versions": 2}
    assert events_held(con) == [
        (7, "PICKUP", "ACTUAL", at(1), at(5, 8, 30), None, False, "r2"),
        (7, "POD_ARRIVAL", "ESTIMATED", at(20), at(5, 8, 30), None, False, "r2"),
        (7, "POD_ARRIVAL", "ESTIMATED", at(21), at(4, 8), at(5, 8, 30), False, "r1"),
    ]
    assert con.execute("SELECT office, valid_from, valid_to FROM freight_history.shipment_versions "
                       "ORDER BY valid_from").fetchall() == [
        ("BRE", at(4, 8), at(5, 8, 30)), ("HAM", at(5, 8, 30), None)]
    # a service clock ahead of ours: the revert is placed just after the version it replaces
    ahead = write(con, "r3", at(5, 10), {7: at(1, 8)}, shipments=[header(7, office="KIE")], deleted_at=at(3))
    assert ahead.stale == [7]
    assert con.execute("SELECT office, valid_from FROM freight_history.shipment_versions WHERE valid_to IS NULL"
                       ).fetchall() == [("KIE", at(5, 8, 30) + dt.timedelta(microseconds=1))]
    assert_contiguous(con)


def test_an_older_copy_as_held_adds_nothing_and_says_nothing_of_the_service(
    con: duckdb.DuckDBPyConnection, caplog: pytest.LogCaptureFixture,
) -> None:
    """After a revert (versioned as of when noticed), the same copy written again (a rebuild's batch, whose
    current versions took its content; a rerun) is older than the version recorded but adds no version: it is
    neither counted nor logged as the service going back."""
    write(con, "r1", at(4, 9), {7: at(4, 8)}, shipments=[header(7, office="BRE")])
    assert write(con, "r2", at(5, 9), {7: at(2, 8)}, shipments=[header(7, office="HAM")]).stale == [7]
    caplog.clear()
    again = write(con, "rebuild", at(6, 9), {7: at(2, 8)}, shipments=[header(7, office="HAM")])
    assert (again.stale, again.rows_added) == ([], 0)
    assert "went back" not in caplog.text


def test_a_rerun_of_every_batch_adds_nothing(con: duckdb.DuckDBPyConnection) -> None:
    """A batch written again (a crash's rerun, a lake writer's retry) or the current copy read again (an
    overlap re-read, which fetches what the service holds now) adds nothing."""
    batches = [
        ({7: at(1, 8)}, [event(7, "POD_ARRIVAL", "ESTIMATED", at(20)), event(7, "CUSTOMS", "ACTUAL", at(1))]),
        ({7: at(3, 8)}, [event(7, "POD_ARRIVAL", "ESTIMATED", at(21))]),
        ({7: at(5, 8)}, [event(7, "POD_ARRIVAL", "ESTIMATED", at(22)), event(7, "POD_ARRIVAL", "ACTUAL", at(22))]),
    ]
    for stamps, events in batches:
        write(con, "first", at(6), stamps, shipments=[header(7)], events=events)
        before = all_rows(con)
        assert write(con, "rerun", at(7), stamps, shipments=[header(7)], events=events).rows_added == 0
        assert all_rows(con) == before
    write(con, "first", at(6), {}, deleted=[8])  # a shipment never seen: nothing to end
    once = all_rows(con)
    stamps, events = batches[-1]  # the current copy, read again by the next run's overlap
    assert write(con, "overlap", at(8), stamps, shipments=[header(7)], events=events).rows_added == 0
    assert all_rows(con) == once
    assert len(once["event_versions"]) == 6 and len(once["shipment_versions"]) == 1
    assert_contiguous(con)


def test_unreadable_stamps_and_same_instant_changes_are_counted_and_dated_when_noticed(
    con: duckdb.DuckDBPyConnection,
) -> None:
    write(con, "r1", at(1, 9), {7: at(1, 8)}, events=[event(7, "PICKUP", "ACTUAL", at(1))])
    unstamped = write(con, "r2", at(2, 9), {7: None, 9: None}, events=[event(7, "PICKUP", "ACTUAL", at(2))],
                      deleted_at=at(2, 8, 30))
    assert unstamped.unstamped == [7, 9] and unstamped.rows_added == 1
    changed = write(con, "r3", at(3, 9), {7: at(1, 8)}, events=[event(7, "PICKUP", "ACTUAL", at(3))],
                    deleted_at=at(3, 8, 30))
    # at(1, 8) is older than the version of the 2nd: a revert's rule (dated when noticed) applies
    assert changed.stale == [7] and changed.rows_added == 1
    same = write(con, "r4", at(4, 9), {7: at(3, 8, 30)}, events=[event(7, "PICKUP", "ACTUAL", at(4))],
                 deleted_at=at(4, 8, 30))
    assert same.same_instant == 1 and same.rows_added == 1
    assert events_held(con) == [
        (7, "PICKUP", "ACTUAL", at(1), at(1, 8), at(2, 8, 30), False, "r1"),
        (7, "PICKUP", "ACTUAL", at(2), at(2, 8, 30), at(3, 8, 30), False, "r2"),
        (7, "PICKUP", "ACTUAL", at(3), at(3, 8, 30), at(4, 8, 30), False, "r3"),
        (7, "PICKUP", "ACTUAL", at(4), at(4, 8, 30), None, False, "r4"),
    ]
    assert_contiguous(con)


def test_a_part_changed_again_under_the_stamp_held_is_no_service_going_back(
    con: duckdb.DuckDBPyConnection, caplog: pytest.LogCaptureFixture,
) -> None:
    """Events changed without the shipment's stamp, twice: the first change is versioned as of when noticed (its
    instant is the current version's); the second comes with the same stamp, now older than that version, but
    as old as the document held: content changed under the stamp again, counted so, not as the service going
    back. A copy older than the document held is one."""
    write(con, "r1", at(1, 9), {7: at(1, 8)}, events=[event(7, "POD_ARRIVAL", "ESTIMATED", at(20))])
    first = write(con, "r2", at(2, 9), {7: at(1, 8)}, events=[event(7, "POD_ARRIVAL", "ESTIMATED", at(21))],
                  deleted_at=at(2, 8, 30), held={7: at(1, 8)})
    assert (first.stale, first.same_instant) == ([], 1)
    caplog.clear()
    again = write(con, "r3", at(3, 9), {7: at(1, 8)}, events=[event(7, "POD_ARRIVAL", "ESTIMATED", at(22))],
                  deleted_at=at(3, 8, 30), held={7: at(1, 8)})
    assert (again.stale, again.same_instant, again.rows_added) == ([], 1, 1)
    assert "history: 0 copies older than the version recorded (the service went back: [])" in caplog.text
    back = write(con, "r4", at(4, 9), {7: at(1, 7)}, events=[event(7, "POD_ARRIVAL", "ESTIMATED", at(20))],
                 deleted_at=at(4, 8, 30), held={7: at(1, 8)})
    assert (back.stale, back.same_instant) == ([7], 0)
    assert sorted(row[4] for row in events_held(con)) == [at(1, 8), at(2, 8, 30), at(3, 8, 30), at(4, 8, 30)]
    assert_contiguous(con)


# --- legs ------------------------------------------------------------------------------------------


def test_air_and_sea_legs_map_to_the_shared_columns_and_are_replaced_apart(con: duckdb.DuckDBPyConnection) -> None:
    air = {"shipment_id": 7, "position": 1, "leg_no": 1, "flight_no": "LH400", "airline_awb_code": "020",
           "airline_name": "Lufthansa", "origin_iata": "FRA", "destination_iata": "JFK",
           "destination_estimated_at": at(20, 14), "destination_actual_at": None}
    sea = {"shipment_id": 7, "position": 1, "leg_no": 1, "voyage_no": "0W12", "imo_code": "9321483",
           "vessel_name": "Emma Maersk", "origin_unloc": "DEHAM", "destination_unloc": "CNSHA",
           "origin_actual_at": at(2, 5)}
    write(con, "r1", at(2, 9), {7: at(2, 8)}, air=[air], sea=[sea])
    assert con.execute(
        "SELECT mode, position, leg_no, carrier_code, carrier_name, voyage, origin_unloc, origin_iata, "
        "destination_unloc, destination_iata, origin_actual_at, destination_estimated_at "
        "FROM freight_history.leg_versions ORDER BY mode").fetchall() == [
        ("AIR", 1, 1, "020", "Lufthansa", "LH400", None, "FRA", None, "JFK", None, at(20, 14)),
        ("SEA", 1, 1, "9321483", "Emma Maersk", "0W12", "DEHAM", None, "CNSHA", None, at(2, 5), None),
    ]
    # the air legs replaced alone, the first one's arrival estimate moved: the sea leg keeps its version
    counts = write(con, "r2", at(3, 9), {7: at(3, 8)}, air=[{**air, "destination_estimated_at": at(21, 2)}])
    assert counts.added == {"leg_versions": 1}
    assert con.execute("SELECT mode, destination_estimated_at, valid_from, valid_to FROM freight_history.leg_versions "
                       "ORDER BY mode, valid_from").fetchall() == [
        ("AIR", at(20, 14), at(2, 8), at(3, 8)), ("AIR", at(21, 2), at(3, 8), None), ("SEA", None, at(2, 8), None),
    ]


# --- point in time ---------------------------------------------------------------------------------


def test_the_as_of_macros_give_what_was_in_force(con: duckdb.DuckDBPyConnection) -> None:
    write(con, "r1", at(1, 9), {7: at(1, 8)}, shipments=[header(7, office="HAM")],
          events=[event(7, "POD_ARRIVAL", "ESTIMATED", at(20)), event(7, "CUSTOMS", "ESTIMATED", at(19))],
          sea=[{"shipment_id": 7, "position": 1, "vessel_name": "Emma Maersk"}])
    write(con, "r2", at(4, 9), {7: at(4, 8)}, shipments=[header(7, office="BRE")],
          events=[event(7, "POD_ARRIVAL", "ESTIMATED", at(21))], sea=[])
    write(con, "r3", at(6), {}, deleted=[7], deleted_at=at(6))

    def events_as_of(instant: str) -> list[tuple[Any, ...]]:
        return con.execute("SELECT event, type, event_at, valid_from FROM freight_history.events_as_of(?) "
                           "ORDER BY ALL", [instant]).fetchall()

    assert events_as_of("2026-11-01 07:59:59+00") == []  # before the first version
    assert events_as_of("2026-11-01 08:00:00+00") == [("CUSTOMS", "ESTIMATED", at(19), at(1, 8)),
                                                      ("POD_ARRIVAL", "ESTIMATED", at(20), at(1, 8))]
    assert events_as_of("2026-11-04 08:59:59+01") == [("CUSTOMS", "ESTIMATED", at(19), at(1, 8)),  # 07:59:59 UTC
                                                      ("POD_ARRIVAL", "ESTIMATED", at(20), at(1, 8))]
    assert events_as_of("2026-11-04 08:00:00+00") == [("POD_ARRIVAL", "ESTIMATED", at(21), at(4, 8))]
    assert events_as_of("2026-11-06 00:00:00+00") == []
    shipments = con.execute("SELECT shipment_id, office, valid_from FROM freight_history.shipments_as_of("
                            "TIMESTAMPTZ '2026-11-05 00:00:00+00')").fetchall()
    assert shipments == [(7, "BRE", at(4, 8))]
    legs = "SELECT mode, position, carrier_name FROM freight_history.legs_as_of(CAST(? AS TIMESTAMPTZ))"
    assert con.execute(legs, [at(2)]).fetchall() == [("SEA", 1, "Emma Maersk")]
    assert con.execute(legs, [at(5)]).fetchall() == []
    described = con.execute("DESCRIBE SELECT * FROM freight_history.legs_as_of(TIMESTAMPTZ '2026-11-05 00:00:00+00')")
    assert [r[0] for r in described.fetchall()] == [*SUBJECTS[2].key, *SUBJECTS[2].content, "valid_from"]


# --- schema ----------------------------------------------------------------------------------------

AGREED = {
    "event_versions": "shipment_id event type event_at event_until location_name unloc iata un_country",
    "leg_versions": "shipment_id mode position leg_no carrier_code carrier_name voyage origin_unloc origin_iata "
                    "destination_unloc destination_iata origin_estimated_at origin_actual_at origin_revised_at "
                    "destination_estimated_at destination_actual_at destination_revised_at",
}
VERSION_COLUMNS = [("valid_from", "TIMESTAMPTZ", False), ("valid_to", "TIMESTAMPTZ", True),
                   ("deleted", "BOOLEAN", False), ("run_id", "VARCHAR", False), ("recorded_at", "TIMESTAMPTZ", False)]
NOT_IN_A_HEADER_VERSION = {"_synced_at", "_run_id", "last_modified_at", "last_modified_date", "last_modified_time",
                           "last_modified_offset", "last_modified_employee_matchcode"}


def test_the_tables_are_the_agreed_schema() -> None:
    assert [c.name for c in SHIPMENT_VERSIONS.columns][:-5] == [
        c.name for c in SHIPMENTS.all_columns if c.name not in NOT_IN_A_HEADER_VERSION]
    for spec in (EVENT_VERSIONS, LEG_VERSIONS):
        assert [c.name for c in spec.columns][:-5] == AGREED[spec.name].split()
    for spec in HISTORY_TABLES:
        assert spec.schema == "freight_history"
        assert [(c.name, c.type, c.nullable) for c in spec.columns][-5:] == VERSION_COLUMNS
        assert spec.primary_key[-1] == "valid_from" and not spec.audit
    assert LEG_VERSIONS.primary_key == ("shipment_id", "mode", "position", "valid_from")
    assert {c.name: c.type for c in LEG_VERSIONS.columns if c.name in ("position", "leg_no")} == {
        "position": "BIGINT", "leg_no": "BIGINT"}


def contract_history_tables() -> dict[str, tuple[str, ...]]:
    """table -> key, from the contract's ``freight_history`` section."""
    section = CONTRACT.read_text(encoding="utf-8").split("## Schema `freight_history`:", 1)[1].split("\n## ", 1)[0]
    tables = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and cells[0].startswith("`") and not cells[0].endswith(")`"):
            tables[cells[0].strip("`")] = tuple(k.strip() for k in re.sub(r"[`()]", "", cells[1]).split(","))
    return tables


def test_the_contract_lists_the_tables_and_macros() -> None:
    assert contract_history_tables() == {spec.name: spec.primary_key for spec in HISTORY_TABLES}
    text = CONTRACT.read_text(encoding="utf-8")
    for subject in SUBJECTS:
        assert f"`freight_history.{subject.macro}(at)`" in text


def test_ensuring_again_changes_nothing_and_a_changed_macro_is_replaced(con: duckdb.DuckDBPyConnection) -> None:
    con.begin()
    assert ensure_history(con) == []
    con.execute("CREATE OR REPLACE MACRO freight_history.events_as_of(\"at\") AS TABLE SELECT 1 AS one")
    assert ensure_history(con) == ["freight_history.events_as_of: created"]
    con.commit()


def test_a_warehouse_from_before_the_history_starts_from_its_rows() -> None:
    """History tables created beside freight rows: each shipment's rows as of its last-modified instant, one
    without (its instant unreadable) as of when its row was written: the current versions equal the rows held."""
    synced = at(3, 12)
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute("CREATE SCHEMA freight")
    for spec, rows in (
        (SHIPMENTS, [header(7, last_modified_at=at(2, 8)), header(8)]),  # 8: no last-modified instant
        (SHIPMENT_EVENTS, [event(7, "PICKUP", "ACTUAL", at(1)), event(8, "PICKUP", "ACTUAL", at(1))]),
        (SEA_MAIN_CARRIAGE_LEGS, [{"shipment_id": 7, "position": 2, "imo_code": "9321483"}]),
    ):
        con.execute(spec.ddl())
        insert(con, spec, rows, synced)
    con.begin()
    steps = ensure_history(con)
    con.commit()
    assert "freight_history: first versions from the rows held (5 rows)" in steps
    assert con.execute(f"SELECT {EVENT_COLUMNS}, recorded_at FROM freight_history.event_versions "
                       "ORDER BY shipment_id").fetchall() == [
        (7, "PICKUP", "ACTUAL", at(1), at(2, 8), None, False, "old-run", synced),
        (8, "PICKUP", "ACTUAL", at(1), synced, None, False, "old-run", synced)]
    assert con.execute("SELECT shipment_id, mode, position, carrier_code, valid_from "
                       "FROM freight_history.leg_versions").fetchall() == [(7, "SEA", 2, "9321483", at(2, 8))]
    assert con.execute("SELECT shipment_id, valid_from FROM freight_history.shipment_versions "
                       "ORDER BY shipment_id").fetchall() == [(7, at(2, 8)), (8, synced)]
    assert con.execute(f"SELECT count(*) FROM ({disagreeing_sql(SHIPMENT_SUBJECT)})").fetchall() == [(0,)]
    assert con.execute(f"SELECT count(*) FROM ({disagreeing_sql(EVENT_SUBJECT)})").fetchall() == [(0,)]


def insert(con: duckdb.DuckDBPyConnection, spec: TableSpec, rows: list[dict[str, Any]], synced: dt.datetime) -> None:
    table = spec.to_arrow(rows)
    table = table.append_column("_synced_at", pa.array([synced] * len(rows), pa.timestamp("us", tz="UTC")))
    table = table.append_column("_run_id", pa.array(["old-run"] * len(rows)))
    con.register("seed_rows", table)
    con.execute(f"INSERT INTO {spec.qualified_name} BY NAME SELECT * FROM seed_rows")
    con.unregister("seed_rows")


# --- written by the warehouse's batch write, published -------------------------------------------------


def freight_batch(warehouse: Warehouse, run_id: str, stamp: dt.datetime | None, *, shipments: Any = None,
                  events: Any = None, raw: bool = True, deleted: Sequence[int] = ()) -> Any:
    """One ``apply_batch`` of shipment 7 (its header and/or events replaced) and shipments ``deleted``."""
    tables = {}
    if shipments is not None:
        tables["shipments"] = SHIPMENTS.to_arrow([{**row, "last_modified_at": stamp} for row in shipments])
    if events is not None:
        tables["shipment_events"] = SHIPMENT_EVENTS.to_arrow(events)
    documents = [RawDocument(7, "{}", at(20), stamp)] if raw and tables else []
    return apply_shipment_batch(warehouse, run_id, tables, [7] if tables else [], raw_documents=documents,
                                deleted_ids=deleted)


def test_the_batch_write_records_versions_with_its_rows_or_not_at_all(tmp_path: Path) -> None:
    with Warehouse(tmp_path, FREIGHT_TABLES) as wh:
        stats = freight_batch(wh, "r1", at(1, 8), shipments=[header(7)])  # its events failed: not replaced
        assert stats.versions == {"shipment_versions": 1}
        # the events read again alone: dated by the document held
        stats = freight_batch(wh, "r2", None, events=[event(7, "POD_ARRIVAL", "ESTIMATED", at(20))], raw=False)
        assert stats.versions == {"event_versions": 1}
        with pytest.raises(RepeatedKey):  # a batch refused whole: its versions go with its rows
            freight_batch(wh, "r3", at(3, 8), shipments=[header(7, office="BRE")],
                          events=[event(7, "POD_ARRIVAL", "ESTIMATED", at(21))] * 2)
        assert events_held(wh.con) == [(7, "POD_ARRIVAL", "ESTIMATED", at(20), at(1, 8), None, False, "r2")]
        wh.run_log.record_run(RunRecord("r4", "shipments", at(9)))  # the run that notices the deletion began then
        stats = freight_batch(wh, "r4", None, deleted=[7])
        assert stats.versions == {"shipment_versions": 1, "event_versions": 1, "leg_versions": 0}
        assert wh.con.execute("SELECT DISTINCT valid_from, deleted FROM freight_history.shipment_versions "
                              "WHERE run_id = 'r4' UNION SELECT DISTINCT valid_from, deleted "
                              "FROM freight_history.event_versions WHERE run_id = 'r4'").fetchall() == [(at(9), True)]
        assert wh.reads.row_counts()["freight_history.event_versions"] == 2
        assert_contiguous(wh.con)


def test_the_published_file_and_parquet_hold_the_history_and_duckdb_1_5_reads_its_macros(tmp_path: Path) -> None:
    """A byte copy of a working database in the published format, and the conversion of one in another."""
    converted = tmp_path / "converted"
    with Warehouse(converted, FREIGHT_TABLES, backend=EmbeddedDuckDB(StorageSettings(storage_version="latest"))):
        pass  # created in duckdb 2.0's own format: its publish converts it
    arrival = ("SELECT shipment_id, event_at, valid_from FROM freight_history.events_as_of("
               "TIMESTAMPTZ '2026-11-02 00:00:00+00')")
    for data_dir in (tmp_path / "copied", converted):
        with Warehouse(data_dir, FREIGHT_TABLES) as wh:
            freight_batch(wh, "r1", at(1, 8), shipments=[header(7)],
                          events=[event(7, "POD_ARRIVAL", "ESTIMATED", at(20))])
            result = publish(data_dir, settings=StorageSettings(), connection=wh.con)
        assert result.converted == (data_dir == converted)
        assert {name: result.tables[name] for name in result.tables if name.startswith("freight_history.")} == {
            "freight_history.shipment_versions": 1, "freight_history.event_versions": 1,
            "freight_history.leg_versions": 0}
        parquet = parquet_root(data_dir) / "freight_history" / "event_versions" / "data.parquet"
        assert duckdb.sql(f"SELECT event, valid_from FROM '{parquet}'").fetchall() == [("POD_ARRIVAL", at(1, 8))]
        with duckdb.connect(str(published_db_path(data_dir)), read_only=True) as con:
            assert con.execute(arrival).fetchall() == [(7, at(20), at(1, 8))]
        older = subprocess.run(
            [str(older_python()), "-c", "import duckdb, json, sys; con = duckdb.connect(sys.argv[1], read_only=True); "
             "con.execute(\"SET TimeZone = 'UTC'\"); "
             "print(json.dumps([duckdb.__version__, con.execute(sys.argv[2]).fetchall()], default=str))",
             str(published_db_path(data_dir)), arrival], capture_output=True, text=True, timeout=120)
        assert older.returncode == 0, older.stderr[-2000:]
        version, rows = json.loads(older.stdout)
        assert version_of(version)[:2] == OLDEST_READER[:2]
        assert rows == [[7, "2026-11-20 00:00:00+00:00", "2026-11-01 08:00:00+00:00"]]
