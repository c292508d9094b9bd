"""The stream registry: every table has exactly one stream and one source of records, the run order
honours what each stream reads first, and a stream that is switched off reads and writes nothing."""

from __future__ import annotations

import dataclasses
import re
import sys
from collections import Counter
from pathlib import Path

import pytest

from freight_pipeline.client import endpoints as ep
from freight_pipeline.datetimes import ServiceZone
from freight_pipeline.lake.backend import storage_from_env
from freight_pipeline.normalize import flatten
from freight_pipeline.normalize.flatten import LAST_MODIFIED, normalize_shipment
from freight_pipeline.normalize.plain_fields import Field, compile_fields
from freight_pipeline.normalize.problems import Problems
from freight_pipeline.normalize.specs.shipments import SHIPMENT_FIELDS, SHIPMENT_TIMESTAMP_FIELDS, SHIPMENTS
from freight_pipeline.normalize.tables import FREIGHT_TABLES
from freight_pipeline.simulator.server import running_simulator
from freight_pipeline.sync.assemble import last_modified
from freight_pipeline.sync.cursor import CursorError, ShipmentKey
from freight_pipeline.sync.parts import DETAIL_PARTS, DOCUMENT_PART, PARTS, Ref
from freight_pipeline.sync.rebuild import REBUILD_STATE, rebuild
from freight_pipeline.sync.reconcile import latest_listed_stamp, listed_stamp
from freight_pipeline.sync.streams import (
    CODE_CONVERSIONS,
    RECORD_SOURCES,
    STREAM_NAMES,
    STREAMS,
    TABLE_SOURCE,
    TABLE_WRITER,
    UnknownStream,
    stream_named,
)
from freight_pipeline.warehouse import ddl, meta
from freight_pipeline.warehouse.ddl import qualified
from freight_pipeline.warehouse.store import open_warehouse
from freight_pipeline.warehouse.writes import Writes
from freight_pipeline_tests.sync.conftest import query, syncer, work_db
from freight_pipeline_tests.sync.settings import RECONCILE_SETTINGS, TEST_SETTINGS


def test_every_freight_table_is_written_by_exactly_one_stream_and_filled_by_one_source() -> None:
    written = Counter(table for stream in STREAMS for table in stream.tables)
    assert written == Counter(spec.name for spec in FREIGHT_TABLES)
    filled = Counter(table for tables in RECORD_SOURCES.values() for table in tables)
    assert filled == written
    assert set(TABLE_WRITER) == set(TABLE_SOURCE) == set(written)
    # the shipments stream writes every part's tables, the document's first
    shipments = stream_named("shipments")
    assert shipments.tables == tuple(t for part in PARTS for t in part.tables)
    assert shipments.tables[0] == "shipments" and shipments.parts[0] is DOCUMENT_PART


def test_each_stream_runs_after_the_streams_it_reads_first() -> None:
    for position, stream in enumerate(STREAMS):
        assert set(stream.reads_first) <= set(STREAM_NAMES[:position]), stream.name
    assert stream_named("documents").reads_first == ("shipments",)
    assert STREAM_NAMES[-1] == "documents"  # its failure (a missing permission) leaves the others' work done


def test_streams_and_parts_name_declared_endpoints_only() -> None:
    declared = set(ep.ALL_ENDPOINTS)
    for stream in STREAMS:
        assert stream.endpoints and set(stream.endpoints) <= declared, stream.name
    assert {part.endpoint for part in PARTS} <= set(stream_named("shipments").endpoints)


def test_a_part_names_the_request_behind_its_answer_and_which_shipments_have_it() -> None:
    air = Ref(7, "C1", "S-7", "AIR")
    events, air_legs, sea_legs, memos = DETAIL_PARTS
    assert events.request(air) == "GET /service/shipment/7/events"
    assert memos.request(air) == "POST /service/shipment/memo/lookup (CLIENT C1, SHIPMENT_NUMBER S-7)"
    assert air_legs.applies(air) and not sea_legs.applies(air) and events.applies(air)
    sea = dataclasses.replace(air, mode_of_transport="SEA")
    assert air_legs.with_mode_change(air, sea) and sea_legs.with_mode_change(air, sea)
    assert not events.with_mode_change(air, sea) and not memos.with_mode_change(air, sea)
    assert memos.with_mode_change(air, dataclasses.replace(air, shipment_number="S-8"))
    assert air_legs.description() == "from GET /service/shipment/{id}/airmaincarriage of each changed AIR shipment"


@pytest.mark.parametrize("sent", ["HAMSE26000002", 26000005, 26000005.5, True, " S-7 ", {"no": 1}, ["S"], None])
def test_a_part_reads_the_shipment_s_client_number_and_mode_as_their_columns_read_them(sent: object) -> None:
    """What a part is asked for by (the memo lookup's CLIENT and SHIPMENT_NUMBER, the legs' mode) is the value the
    shipment's columns (and the marts) hold, whatever JSON kind it came in: a shipment number sent as a number
    (``26000005``) was taken for unknown, its memo lines not asked for and those held deleted, while the column read
    it as its digits and the lookup answered for them. A value no column reads is unknown to both."""
    document = {"id": 7, "client": sent, "shipment_number": sent, "mode_of_transport": sent}
    (row,) = normalize_shipment(document, Problems())[SHIPMENTS.name]  # a value no column reads: null, a problem
    ref = Ref.of(document, 7)
    assert (ref.client, ref.shipment_number, ref.mode_of_transport) == (
        row.get("client"), row.get("shipment_number"), row.get("mode_of_transport"))


DECIDED_BY = (*(f.name for f in dataclasses.fields(Ref)[1:]), LAST_MODIFIED)
"""The shipment's fields the sync decides by: what its parts are asked for by (``Ref``), and its version (the
cursor's and every stamp's ``last_modified_date_time``)."""


@pytest.mark.parametrize("field", DECIDED_BY)
def test_what_the_sync_decides_by_follows_a_rename_the_mapping_gives_the_column(
    field: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A release renamed ``mode_of_transport`` and the mapping was given the new name, as the docs say: its column
    read it again, but the parts were asked for by the literal old key, so the changed shipments' legs and memo lines
    were deleted unsaid (the cursor, by ``last_modified_date_time``: a CursorError). Each field the sync decides by,
    sent under its new name only, decides as under its own."""
    renamed = f"{field}_v2"
    monkeypatch.setattr(flatten, "_SHIPMENT", compile_fields(
        Field(f.column, f.type, f.description, (f.key, renamed)) if f.key == field else f
        for f in (*SHIPMENT_FIELDS, *SHIPMENT_TIMESTAMP_FIELDS)))
    zone = ServiceZone()
    document = {"id": 7, "client": "HAM", "shipment_number": "S-7", "mode_of_transport": "SEA",
                "last_modified_date_time": "2026-11-03T10:15:00+01:00"}
    sent = {renamed if key == field else key: value for key, value in document.items()}
    assert Ref.of(sent, 7) == Ref.of(document, 7) == Ref(7, "HAM", "S-7", "SEA")
    assert ShipmentKey.of_shipment(sent, zone) == ShipmentKey.of_shipment(document, zone)
    assert last_modified(sent, zone) == last_modified(document, zone) != (None, None)
    assert listed_stamp(sent, zone) == latest_listed_stamp(sent, zone) == listed_stamp(document, zone) is not None
    (row,) = normalize_shipment(sent, Problems())[SHIPMENTS.name]
    (expected,) = normalize_shipment(document, Problems())[SHIPMENTS.name]
    assert row == expected


@pytest.mark.parametrize(("item", "said"), [
    ({"shipmentId": 7, "last_modified_date_time": "2026-11-03T10:15:00"}, "with no id (its keys: last_modified"),
    ({"id": "S-7", "last_modified_date_time": "2026-11-03T10:15:00"}, "with the id 'S-7', no whole number"),
])
def test_a_listed_shipment_without_a_usable_id_is_a_cursor_error_naming_what_came(item: dict, said: str) -> None:
    """Was ``KeyError: 'id'``: the run's one line named nothing of the lookup."""
    with pytest.raises(CursorError, match=re.escape(said)):
        ShipmentKey.of_shipment(item, ServiceZone())


def test_an_unknown_stream_is_refused_naming_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(UnknownStream, match="streams are shipments, code_conversions, documents"):
        stream_named("shipment")
    with running_simulator(shipments=3, seed=7) as sim, pytest.raises(UnknownStream, match="'shipment'"):
        syncer(sim, tmp_path)(streams=["shipments", "shipment"])
    assert sim.request_count() == 0  # refused before anything ran


def test_a_stream_switched_off_reads_and_writes_nothing(tmp_path: Path) -> None:
    with running_simulator(shipments=3, seed=7) as sim:
        settings = TEST_SETTINGS.replaced(code_conversions=False, documents=False)
        by_name = syncer(sim, tmp_path, publish_after=False)(settings)
        assert sim.request_count(path=CODE_CONVERSIONS.endpoints[0].path) == 0
        assert by_name["code_conversions"].extra["skipped"] == (
            "the code_conversions stream is off (FREIGHT_SYNC_CODE_CONVERSIONS=0)")
        assert by_name["code_conversions"].requests == 0 and by_name["shipments"].rows_written > 0
        assert query(work_db(tmp_path), "SELECT count(*) FROM freight.code_conversions") == [(0,)]
        assert query(work_db(tmp_path), "SELECT table_name, last_status FROM freight_meta.table_freshness "
                     "WHERE table_name IN ('code_conversions', 'shipment_documents') ORDER BY 1") == [
            ("code_conversions", "switched off"), ("shipment_documents", "switched off")]


def test_every_cursor_written_in_runs_of_every_stream_and_a_rebuild_goes_through_its_one_writer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``Reads.get_cursor`` keeps what it read until ``Writes._set_cursor`` writes a cursor: every statement that
    changes ``sync_state`` in runs of every stream (reconciled, the events sampled, deletions among them) and in
    a rebuild comes from it, and after them each stream's cursor kept is the one the table holds."""
    written: list[tuple[str, bool]] = []
    real_executed = ddl._executed

    def executed(con: object, statement: str, sql: str, params: object) -> object:
        if sql.lstrip().split(None, 1)[0].upper() in WRITING and meta.SYNC_STATE.name in sql:
            frame, through_the_writer = sys._getframe(1), False
            while frame is not None and not through_the_writer:
                through_the_writer = frame.f_code is Writes._set_cursor.__code__
                frame = frame.f_back
            written.append((sql, through_the_writer))
        return real_executed(con, statement, sql, params)

    monkeypatch.setattr(ddl, "_executed", executed)
    settings = RECONCILE_SETTINGS.replaced(freshness_sample=5)
    with running_simulator(shipments=30, seed=3) as sim:
        sync = syncer(sim, tmp_path)
        sync(settings)
        sim.advance_clock(600)
        sim.modify_shipments(8)
        sim.delete_shipments(2)
        assert set(sync(settings)) == set(STREAM_NAMES)
    with open_warehouse(tmp_path, storage_from_env()) as warehouse:
        rebuild(warehouse, "rebuild", settings, everything=True)
        held = dict(warehouse.con.execute(f"SELECT stream, cursor_value FROM {qualified(meta.SYNC_STATE)} "
                                          f"{meta.LATEST_STATE}").fetchall())
        assert {stream: warehouse.reads.get_cursor(stream) for stream in held} == held
    assert {*STREAM_NAMES, REBUILD_STATE} <= set(held)
    assert written and [sql for sql, through_the_writer in written if not through_the_writer] == []


WRITING = frozenset({"INSERT", "DELETE", "UPDATE", "MERGE", "TRUNCATE"})
"""The statements that change a table's rows."""
