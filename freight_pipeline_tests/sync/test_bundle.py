"""One pass per shipment: its document, events, legs and memos fetched together and written together."""

from __future__ import annotations

import datetime as dt
import pickle
from pathlib import Path
from typing import Any

from freight_pipeline.client import endpoints as ep
from freight_pipeline.client._core import HeldBody
from freight_pipeline.client.endpoints import Endpoint
from freight_pipeline.simulator.server import RunningSimulator
from freight_pipeline.sync.assemble import gone_reason
from freight_pipeline.sync.client_source import ClientSource
from freight_pipeline.sync.parts import DETAIL_PARTS, DOCUMENT_PART, by_id
from freight_pipeline.sync.source import ShipmentGone
from freight_pipeline_tests.sync.conftest import SyncFn, query, work_db
from freight_pipeline_tests.sync.expected import assert_converged
from freight_pipeline_tests.sync.faulty_sources import DeletedWhileRead, LookupSaysAnotherMode, factory
from freight_pipeline_tests.sync.settings import RECONCILE_SETTINGS, TEST_SETTINGS


def requests_to(sim: RunningSimulator, template: str) -> int:
    return sim.stats.count(path=template)


def test_each_changed_shipment_takes_one_request_per_part_and_no_other(
    small_sim: RunningSimulator, work_sync: SyncFn, tmp_path: Path
) -> None:
    docs = list(small_sim.store.reader.expected_documents())
    batches = work_sync()["shipments"].extra["memo_batches"]
    # the memo lines: one lookup per client on each walk page, taken by every shipment whose document agrees
    # (all of them here), and one lookup of its own for each shipment alone of its client on its page
    assert batches["failed"] == batches["alone"] == 0 and len(docs) / 2 < batches["taken"] < len(docs)
    expected = {
        "/service/shipment/{id}": len(docs),
        "/service/shipment/{id}/events": len(docs),
        "/service/shipment/{id}/airmaincarriage": sum(d["mode_of_transport"] == "AIR" for d in docs),
        "/service/shipment/{id}/seamaincarriage": sum(d["mode_of_transport"] == "SEA" for d in docs),
        "/service/shipment/memo/lookup": batches["lookups"] + len(docs) - batches["taken"],
    }
    assert {path: requests_to(small_sim, path) for path in expected} == expected
    assert_converged(small_sim.store, work_db(tmp_path))


class Keeping(ClientSource):
    """Keeps every answer of a per-shipment endpoint as the sync's process holds it, by endpoint path."""

    def __init__(self, client: Any) -> None:
        super().__init__(client)
        self.kept: list[tuple[str, int, Any]] = []

    async def get_shipment(self, shipment_id: int) -> dict[str, Any] | HeldBody:
        answer = await super().get_shipment(shipment_id)
        self.kept.append((DOCUMENT_PART.endpoint.path, shipment_id, answer))
        return answer

    async def get_shipment_records(self, endpoint: Endpoint, shipment_id: int) -> list[dict[str, Any]] | HeldBody:
        answer = await super().get_shipment_records(endpoint, shipment_id)
        self.kept.append((endpoint.path, shipment_id, answer))
        return answer


def test_the_sync_holds_each_answer_as_its_body_and_its_worker_reads_the_json_received(
    small_sim: RunningSimulator, work_sync: SyncFn, tmp_path: Path
) -> None:
    reader = small_sim.store.reader
    truth = {ep.SHIPMENT_RETRIEVE.path: reader.get_shipment, ep.SHIPMENT_EVENTS.path: reader.get_events,
             ep.SHIPMENT_AIR_MAIN_CARRIAGE.path: reader.get_air_main_carriage,
             ep.SHIPMENT_SEA_MAIN_CARRIAGE.path: reader.get_sea_main_carriage}
    assert set(truth) == {DOCUMENT_PART.endpoint.path} | {p.endpoint.path for p in DETAIL_PARTS if p.fetch is by_id}
    make, built = factory(Keeping)
    work_sync(source_factory=make)
    kept = built[0].kept
    assert {path for path, _, _ in kept} == set(truth)  # every part read by id: the document, events, both legs
    for path, shipment_id, answer in kept:
        assert type(answer) is HeldBody, path  # not the decoded JSON: nothing in the sync's process walks it
        json = truth[path](shipment_id)
        travelled = pickle.loads(pickle.dumps(answer))  # as the worker gets it: still held, decoded when read
        assert type(travelled) is HeldBody and travelled.decoded() == answer.decoded() == json, (path, shipment_id)
        scalars = {k: v for k, v in json.items() if not isinstance(v, dict | list)} if isinstance(json, dict) else {}
        if path == DOCUMENT_PART.endpoint.path:  # and the memo lines it lists (a batched memo lookup's check)
            assert scalars["mode_of_transport"] and isinstance(json["memos"], list)
            scalars["memos"] = json["memos"]
        assert answer.top == scalars
    assert_converged(small_sim.store, work_db(tmp_path))


def test_a_shipment_deleted_while_its_parts_are_read_loses_them_and_leaves_with_the_reconcile(
    small_sim: RunningSimulator, work_sync: SyncFn, tmp_path: Path
) -> None:
    work_sync()
    victim = next(doc for doc in small_sim.store.reader.expected_documents() if doc.get("mode_of_transport") == "AIR")
    small_sim.advance_clock(60)
    small_sim.touch_shipments([victim["id"]])
    make, _ = factory(DeletedWhileRead, small_sim, victim["id"])
    result = work_sync(source_factory=make)["shipments"]

    work = work_db(tmp_path)
    rejected = query(work, "SELECT stream, source_key, payload, reason FROM freight_meta.rejected_records "
                           "ORDER BY stream")
    gone = ["air_main_carriage_legs", "shipment_events"]  # the memo lookup finds nothing rather than 404
    assert rejected == [(stream, str(victim["id"]), None, gone_reason(stream)) for stream in gone]
    assert result.rejected == 2 and result.quarantined == 0
    for table in ("shipment_events", "air_main_carriage_legs", "shipment_memos"):
        assert query(work, f"SELECT count(*) FROM freight.{table} WHERE shipment_id = ?", [victim["id"]]) == [(0,)]
    # The shipment row itself goes with the next reconcile pass.
    assert work_sync(RECONCILE_SETTINGS)["shipments"].extra["reconcile_deleted"] == 1
    assert_converged(small_sim.store, work_db(tmp_path))


def test_when_the_document_tells_another_mode_than_the_lookup_its_legs_are_asked_again(
    small_sim: RunningSimulator, work_sync: SyncFn, tmp_path: Path
) -> None:
    victim = next(doc for doc in small_sim.store.reader.expected_documents() if doc.get("mode_of_transport") == "AIR"
                  and small_sim.store.reader.get_air_main_carriage(doc["id"]))
    make, built = factory(LookupSaysAnotherMode, victim["id"], "SEA")
    work_sync(source_factory=make)
    assert built[0].legs_asked == ["sea", "air"]  # asked as the lookup said, then as the document says
    assert query(work_db(tmp_path), "SELECT count(*) FROM freight.air_main_carriage_legs WHERE shipment_id = ?",
                 [victim["id"]]) == [(len(small_sim.store.reader.get_air_main_carriage(victim["id"])),)]
    assert_converged(small_sim.store, work_db(tmp_path))


def test_an_overlap_shipment_whose_held_copy_is_provably_current_is_not_fetched_again(
    small_sim: RunningSimulator, work_sync: SyncFn, tmp_path: Path
) -> None:
    settings = TEST_SETTINGS.replaced(overlap=dt.timedelta(days=5000))  # every shipment overlaps
    work_sync(settings)
    newest = max(doc["last_modified_date_time"] for doc in small_sim.store.reader.expected_documents())
    at_the_ceiling = sum(doc["last_modified_date_time"] == newest
                         for doc in small_sim.store.reader.expected_documents())
    small_sim.stats.reset()

    quiet = work_sync(settings)["shipments"]  # nothing changed; the overlap covers every shipment
    assert quiet.rows_read == len(list(small_sim.store.reader.expected_documents()))
    # only the shipments stamped in the ceiling's own second could have changed unseen after their fetch
    assert quiet.extra["overlap_current_skipped"] == quiet.rows_read - at_the_ceiling
    assert requests_to(small_sim, "/service/shipment/{id}") == at_the_ceiling

    changed = small_sim.store.reader.live_shipment_ids()[3]
    small_sim.advance_clock(60)
    small_sim.touch_shipments([changed])
    small_sim.stats.reset()
    again = work_sync(settings)["shipments"]
    assert requests_to(small_sim, "/service/shipment/{id}") == again.rows_read - again.extra["overlap_current_skipped"]
    assert again.extra["parts"]["shipments"]["loaded"] >= 1
    assert_converged(small_sim.store, work_db(tmp_path))


class RetrieveRefused(ClientSource):
    """Answers 404 to the retrieve of ``victim`` while the lookup still lists it (a permission missing on that one
    record, a node that has not got it yet): not a deletion."""

    def __init__(self, client: Any, victim: int) -> None:
        super().__init__(client)
        self.victim = victim

    async def get_shipment(self, shipment_id: int) -> dict[str, Any] | HeldBody:
        if shipment_id == self.victim:
            raise ShipmentGone(shipment_id)
        return await super().get_shipment(shipment_id)


def test_a_retrieve_404_of_a_shipment_the_lookup_still_lists_is_quarantined_not_deleted(
    small_sim: RunningSimulator, work_sync: SyncFn, tmp_path: Path
) -> None:
    work_sync()
    victim = small_sim.store.reader.live_shipment_ids()[5]
    small_sim.advance_clock(60)
    small_sim.touch_shipments([victim])
    result = work_sync(source_factory=lambda client: RetrieveRefused(client, victim))["shipments"]

    work = work_db(tmp_path)
    assert result.quarantined == 1
    assert query(work, "SELECT count(*) FROM freight.shipments WHERE shipment_id = ?", [victim]) == [(1,)]
    assert query(work, "SELECT stream, status_code FROM freight_meta.quarantine WHERE record_key = ?",
                 [str(victim)]) == [("shipments", 404)]
    assert query(work, "SELECT count(*) FROM freight_history.shipment_versions WHERE shipment_id = ? AND deleted",
                 [victim]) == [(0,)]
    small_sim.advance_clock(20 * 60)  # past the overlap: only the retry queue brings it back
    work_sync()
    assert query(work, "SELECT count(*) FROM freight_meta.quarantine") == [(0,)]
    assert_converged(small_sim.store, work)


class PartsRefused(ClientSource):
    """Answers 404 to the events and main-carriage legs of ``victim`` while its document loads and the lookup still
    lists it (a permission on those parts; or, for a shipment with none, the spec's "unless no data exists")."""

    def __init__(self, client: Any, victim: int) -> None:
        super().__init__(client)
        self.victim = victim

    async def get_shipment_records(self, endpoint: Endpoint, shipment_id: int) -> HeldBody:
        if shipment_id == self.victim and endpoint in (ep.SHIPMENT_EVENTS, ep.SHIPMENT_AIR_MAIN_CARRIAGE,
                                                      ep.SHIPMENT_SEA_MAIN_CARRIAGE):
            raise ShipmentGone(shipment_id)
        return await super().get_shipment_records(endpoint, shipment_id)


def test_a_part_404_of_a_listed_shipment_whose_document_holds_that_part_keeps_its_rows_and_is_read_again(
    small_sim: RunningSimulator, work_sync: SyncFn, tmp_path: Path
) -> None:
    """Was: its events and legs deleted (a ``deleted`` version each), a false 'deleted in the source' reject, and no
    retry, so the legs stayed empty until the shipment changed again. Its document, read with them, holds both."""
    work_sync()
    work = work_db(tmp_path)
    tables = ("shipment_events", "air_main_carriage_legs", "sea_main_carriage_legs")

    def rows_of(shipment: int) -> dict[str, int]:
        return {table: query(work, f"SELECT count(*) FROM freight.{table} WHERE shipment_id = ?", [shipment])[0][0]
                for table in tables}

    victim = next(i for i in small_sim.store.reader.live_shipment_ids()
                  if (held := rows_of(i))["shipment_events"] and held["air_main_carriage_legs"] + held[
                      "sea_main_carriage_legs"])
    held = rows_of(victim)
    small_sim.advance_clock(60)
    small_sim.touch_shipments([victim])
    result = work_sync(source_factory=lambda client: PartsRefused(client, victim))["shipments"]

    assert result.quarantined == 2  # its events and its mode's legs: read again, not deleted
    reasons = query(work, "SELECT reason FROM freight_meta.rejected_records WHERE source_key = ?", [str(victim)])
    assert len(reasons) == 2 and not any("deleted in the source" in reason for (reason,) in reasons), reasons
    assert rows_of(victim) == held
    assert query(work, "SELECT DISTINCT status_code FROM freight_meta.quarantine WHERE record_key = ?",
                 [str(victim)]) == [(404,)]
    assert query(work, "SELECT count(*) FROM freight_history.event_versions WHERE shipment_id = ? AND deleted",
                 [victim]) == [(0,)]
    small_sim.advance_clock(20 * 60)  # past the overlap: the retry queue reads them again
    work_sync()
    assert query(work, "SELECT count(*) FROM freight_meta.quarantine") == [(0,)]
    assert_converged(small_sim.store, work)


def test_what_a_document_holds_of_a_part_is_counted_where_the_part_declares_it() -> None:
    """A part's 404 while its shipment's document loads is the spec's "no data exists" when the document holds none
    of it (an empty answer, nothing rejected), a part the service would not give now otherwise."""
    events, air, _, memos = DETAIL_PARTS
    document = {"events": [{}, {}], "main_carriage": {"carriage_legs": [{}]}}
    assert (events.held_by(document), air.held_by(document), memos.held_by(document)) == (2, 1, 0)
    assert (events.held_by({"events": None}), air.held_by({"main_carriage": []}), events.held_by({})) == (0, 0, 0)
