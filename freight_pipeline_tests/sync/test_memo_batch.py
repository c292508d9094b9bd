"""The memo lines of a walk page read in one lookup per client, each shipment's share taken only where its own
document lists the same memo ids (``sync.memo_batch``): every way a batched answer or a document can disagree ends
in the shipment's own lookup, and the warehouse holds what the service holds."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from collections import Counter
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import duckdb
import pytest

from freight_pipeline.client import BadRequestError
from freight_pipeline.normalize import records
from freight_pipeline.normalize.plain_fields import Field, compile_fields
from freight_pipeline.normalize.specs.events_memos import MEMO_FIELDS
from freight_pipeline.simulator.config import FaultConfig
from freight_pipeline.simulator.server import RunningSimulator, running_simulator
from freight_pipeline.sync.changes import LookupResult
from freight_pipeline.sync.isolation import RecordFailure
from freight_pipeline.sync.memo_batch import (
    DISAGREEMENTS_BEFORE_GIVING_UP,
    MEMO_BATCH_SIZE,
    RETRY_AFTER,
    STATE,
    BatchingOff,
    MemoBatches,
    document_memo_ids,
    sorted_ids,
    split_by_number,
)
from freight_pipeline.sync.parts import ALL_PARTS, DOCUMENT, EVENTS, MEMOS, Ref
from freight_pipeline.sync.result import NoticeKind, StreamResult
from freight_pipeline_tests.sync.conftest import SMALL_SHIPMENTS, SyncFn, query, syncer, work_db
from freight_pipeline_tests.sync.expected import assert_converged
from freight_pipeline_tests.sync.faulty_sources import (
    BatchedMemosOtherwise,
    DocumentMemos,
    LineAddedBetween,
    LookupSaysAnotherNumber,
    factory,
)


def line(memo_id: Any, number: str = "A", client: str = "001") -> dict[str, Any]:
    return {"id": memo_id, "client": client, "memo": "m", "shipment_number": number, "running_number": 1}


def test_a_document_s_memo_ids_are_read_only_from_an_array_of_lines_with_integer_ids() -> None:
    assert document_memo_ids({"memos": [line(3), line(1)]}) == [1, 3]
    assert document_memo_ids({"memos": []}) == []
    for unreadable in ({}, {"memos": None}, {"memos": {"id": 1}}, {"memos": "1"}, {"memos": [1]},
                       {"memos": [line(1), None]}, {"memos": [line("1")]}, {"memos": [line(True)]},
                       {"memos": [line(1.0)]}, {"memos": [{"memo": "no id"}]}):
        assert document_memo_ids(unreadable) is None, unreadable
    for not_a_document in (None, [line(1)], RecordFailure("failed"), "x"):
        assert document_memo_ids(not_a_document) is None


def test_a_batched_answer_is_split_by_number_and_doubted_whole_for_a_line_it_cannot_place() -> None:
    assert split_by_number([line(1, "A"), line(2, "B"), line(3, "A")], "001", ["A", "B", "C"]) == {
        "A": [line(1, "A"), line(3, "A")], "B": [line(2, "B")], "C": []}
    for stray in (line(4, "A", client="002"), line(4, "D"), {**line(4), "shipment_number": None},
                  {"id": 4, "memo": "neither client nor number"}, [line(4)], None, "A"):
        assert split_by_number([line(1, "A"), stray], "001", ["A", "B"]) is None, stray


@pytest.mark.parametrize("field", ["client", "shipment_number"])
def test_a_batched_answer_s_lines_are_placed_as_their_columns_file_them(
    field: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """By the client and number as the columns read them (a number sent as a JSON number, padded as a fixed-width
    column pads it) and under a name the mapping gives a renamed field: the batch compared the literal keys as sent,
    found no place for the lines and doubted every answer whole."""
    sent = {"client": 1, "shipment_number": 26000005}
    assert split_by_number([{**line(1), field: sent[field]}], "1" if field == "client" else "001",
                           ["26000005" if field == "shipment_number" else "A"]) is not None
    assert split_by_number([{**line(1), field: f" {line(1)[field]} "}], "001", ["A"]) == {
        "A": [{**line(1), field: f" {line(1)[field]} "}]}
    monkeypatch.setattr(records, "_MEMO", compile_fields(
        Field(f.column, f.type, f.description, (f.key, f"{field}_v2")) if f.key == field else f for f in MEMO_FIELDS))
    renamed = {f"{field}_v2" if key == field else key: value for key, value in line(1).items()}
    assert split_by_number([renamed], "001", ["A"]) == {"A": [renamed]}


def test_a_share_matches_a_document_only_with_the_same_integer_ids() -> None:
    assert sorted_ids([line(2), line(1)]) == [1, 2] == document_memo_ids({"memos": [line(1), line(2)]})
    assert sorted_ids([line(1), line(1)]) != document_memo_ids({"memos": [line(1)]})  # a line answered twice
    assert sorted_ids([line("1")]) is None and sorted_ids([line(1), {}]) is None and sorted_ids([]) == []


class Memos:
    """The memo lookup of a source: ``lines`` by (client, number); ``refuse``: several numbers answer 400."""

    def __init__(self, lines: Sequence[dict[str, Any]], refuse: bool = False) -> None:
        self.lines, self.refuse = list(lines), refuse
        self.asked: list[tuple[str, tuple[str, ...]]] = []

    async def memo_pages(
        self, client: str, shipment_numbers: Sequence[str], page_size: int
    ) -> AsyncIterator[LookupResult]:
        self.asked.append((client, tuple(shipment_numbers)))
        if self.refuse and len(shipment_numbers) > 1:
            raise BadRequestError("IN not supported", status_code=400)
        found = [m for m in self.lines if m["client"] == client and m["shipment_number"] in shipment_numbers]
        yield LookupResult(found, len(found))


class Failing(Memos):
    """A memo lookup that fails, whatever it is asked (a 5xx after its retries, say)."""

    async def memo_pages(
        self, client: str, shipment_numbers: Sequence[str], page_size: int
    ) -> AsyncIterator[LookupResult]:
        self.asked.append((client, tuple(shipment_numbers)))
        raise RuntimeError("the lookup failed")
        yield LookupResult([], 0)  # an async generator, as the source's


def refs(count: int, client: str = "001", first: int = 1) -> list[Ref]:
    return [Ref(i, client, f"N{i}", "AIR") for i in range(first, first + count)]


def test_a_page_is_batched_per_client_for_the_shipments_read_whole_with_a_known_client_and_number() -> None:
    async def scenario() -> None:
        source = Memos([])
        batches = MemoBatches(source, 3, 500)  # type: ignore[arg-type]
        many = refs(MEMO_BATCH_SIZE + 3)
        batches.plan([*((r, ALL_PARTS) for r in many),
                      (Ref(900, "002", "X"), ALL_PARTS),  # alone of its client: no batch
                      (Ref(901, "005", "Y"), ALL_PARTS), (Ref(902, "005", "Z"), ALL_PARTS),
                      (Ref(903, "005", "R"), frozenset({EVENTS, MEMOS})),  # no document to check it against
                      (Ref(904, "005", "S"), frozenset({DOCUMENT})),  # no memo lines wanted
                      (Ref(905, "005", None), ALL_PARTS), (Ref(906, None, "T"), ALL_PARTS)])  # unknown: alone
        await asyncio.sleep(0)
        await asyncio.gather(*(batch.share("") for batch in set(batches.planned.values())))
        assert sorted(source.asked) == sorted([
            ("001", tuple(r.shipment_number for r in many[:MEMO_BATCH_SIZE])),
            ("001", tuple(r.shipment_number for r in many[MEMO_BATCH_SIZE:])),
            ("005", ("Y", "Z"))])
        assert set(batches.planned) == {r.shipment_id for r in many} | {901, 902}
        for shipment_id in (900, 903, 904, 905, 906):
            assert batches.batch_of(shipment_id) is None
        taken = [batches.batch_of(shipment_id) for shipment_id in sorted(batches.planned)]
        assert all(taken) and not batches.planned and batches.batch_of(901) is None  # each taken once
        assert batches.figures.lookups == 3 and batches.figures.failed == 0

    asyncio.run(scenario())


def test_a_refused_batch_sends_its_shipments_alone_and_stops_batching_for_the_run() -> None:
    async def scenario() -> None:
        first = refs(3)
        source = Memos([line(1, "N1")], refuse=True)
        batches = MemoBatches(source, 3, 500)  # type: ignore[arg-type]
        batches.plan((r, ALL_PARTS) for r in first)
        batch = batches.batch_of(1)
        assert batch is not None
        assert await batches.lines_for(batch, first[0], first[0], {"memos": [line(1, "N1")]}) is None
        assert batches.figures.off is not None and "refused" in batches.figures.off
        batches.plan((r, ALL_PARTS) for r in refs(3, first=10))
        assert not batches.planned.keys() - {2, 3} and len(source.asked) == 1
        assert (batches.figures.lookups, batches.figures.failed, batches.figures.alone) == (1, 1, 1)

    asyncio.run(scenario())


NOON = dt.datetime(2026, 12, 3, 12, tzinfo=dt.UTC)
STOP = BatchingOff(NOON, "the service refused the batched memo lookup (400)", "run-1")


def test_a_kept_stop_is_read_only_from_an_instant_a_reason_and_a_run() -> None:
    assert BatchingOff.parse(STOP.text()) == STOP and STOP.until == NOON + RETRY_AFTER
    fields = json.loads(STOP.text())
    for unreadable in (None, "", "not json", "null", "[]", '"x"', "1",
                       *(json.dumps({k: v for k, v in fields.items() if k != missing}) for missing in fields),
                       json.dumps({**fields, "since": "2026-12-03T12:00:00"}),  # no offset: not an instant
                       json.dumps({**fields, "since": "yesterday"}), json.dumps({**fields, "since": 1}),
                       json.dumps({**fields, "why": None}), json.dumps({**fields, "run_id": 7})):
        assert BatchingOff.parse(unreadable) is None, unreadable


def test_a_kept_stop_holds_until_a_day_after_it_was_made_then_a_batch_read_ends_it() -> None:
    async def scenario(began: dt.datetime, source: Memos) -> MemoBatches:
        batches = MemoBatches(source, 3, 500, kept=STOP, began=began)  # type: ignore[arg-type]
        batches.plan((r, ALL_PARTS) for r in refs(3))
        await asyncio.gather(*(batch.share("") for batch in set(batches.planned.values())))
        return batches

    held = asyncio.run(scenario(STOP.until - dt.timedelta(seconds=1), Memos([])))
    assert not held.planned and held.figures.held_off is not None and "run-1" in held.figures.held_off
    assert held.kept_after("run-2") == STOP  # kept as it was
    again = asyncio.run(scenario(STOP.until, Memos([])))
    assert again.planned and again.figures.held_off is None and again.kept_after("run-2") is None  # read: on again
    failing = asyncio.run(scenario(STOP.until, Failing([])))  # each batch failed: not known to work yet
    assert failing.figures.failed == failing.figures.lookups == 1 and failing.kept_after("run-2") == STOP
    refused = asyncio.run(scenario(STOP.until, Memos([], refuse=True)))
    assert refused.kept_after("run-2") == BatchingOff(STOP.until, refused.figures.off or "", "run-2")
    assert MemoBatches(Memos([]), 3, 500, began=NOON).kept_after("run-2") is None  # type: ignore[arg-type]


def test_a_share_is_taken_only_where_the_document_lists_the_same_lines_and_names_the_same_shipment() -> None:
    async def scenario() -> None:
        page = refs(5)
        source = Memos([line(1, "N1"), line(2, "N1"), line(3, "N2"), line(4, "N4")])
        batches = MemoBatches(source, 3, 500)  # type: ignore[arg-type]
        batches.plan((r, ALL_PARTS) for r in page)
        documents: dict[int, tuple[Ref, Any]] = {
            1: (page[0], {"memos": [line(2, "N1"), line(1, "N1")]}),  # agrees: taken
            2: (page[1], {"memos": []}),  # a line answered its document does not list: alone
            3: (page[2], {"memos": []}),  # no lines, none listed: taken
            4: (page[3], {"memos": [line(4, "N4"), line(5, "N4")]}),  # a line listed, not answered: alone
            5: (Ref(5, "001", "N4", "AIR"), {"memos": [line(4, "N4")]}),  # the document names another number
        }
        taken = {}
        for shipment_id, (told, document) in documents.items():
            batch = batches.batch_of(shipment_id)
            assert batch is not None
            taken[shipment_id] = await batches.lines_for(batch, page[shipment_id - 1], told, document)
        assert taken == {1: [line(1, "N1"), line(2, "N1")], 2: None, 3: [], 4: None, 5: None}
        figures = batches.figures
        assert (figures.taken, figures.agreed_with_lines, figures.alone, figures.disagreed) == (2, 1, 3, 2)
        assert figures.off is None

    asyncio.run(scenario())


def test_more_disagreements_than_agreements_stop_batching_for_the_run() -> None:
    async def scenario(agreeing: int) -> tuple[str | None, str | None]:
        page = refs(agreeing + DISAGREEMENTS_BEFORE_GIVING_UP)
        source = Memos([line(r.shipment_id, r.shipment_number) for r in page])  # type: ignore[arg-type]
        batches = MemoBatches(source, 3, 500)  # type: ignore[arg-type]
        batches.plan((r, ALL_PARTS) for r in page)
        off_before_last = None
        for place, ref in enumerate(page):
            listed = [line(ref.shipment_id, ref.shipment_number)] if place < agreeing else []
            batch = batches.batch_of(ref.shipment_id)
            assert batch is not None
            if place == len(page) - 1:
                off_before_last = batches.figures.off
            await batches.lines_for(batch, ref, ref, {"memos": listed})
        return off_before_last, batches.figures.off

    before, after = asyncio.run(scenario(0))
    assert before is None and after is not None and f"{DISAGREEMENTS_BEFORE_GIVING_UP} shipments" in after
    assert asyncio.run(scenario(DISAGREEMENTS_BEFORE_GIVING_UP)) == (None, None)  # as many agreed: batching goes on


def memo_lookups(small_sim: RunningSimulator) -> int:
    return small_sim.stats.count(path="/service/shipment/memo/lookup")


@pytest.mark.parametrize("how", BatchedMemosOtherwise.HOWS)
def test_a_batched_lookup_answered_otherwise_costs_requests_never_lines(
    small_sim: RunningSimulator, work_sync: SyncFn, tmp_path: Path, how: str
) -> None:
    docs = list(small_sim.store.reader.expected_documents())
    make, built = factory(BatchedMemosOtherwise, how)
    shipments = work_sync(source_factory=make)["shipments"]
    figures, source = shipments.extra["memo_batches"], built[0]
    assert source.several == figures["lookups"] * (3 if how == "short" else 1) > 0  # a short read is read again
    assert source.one == len(docs) - figures["taken"]  # every shipment that did not take a share: alone
    if how == "first_number":  # the first number's share agrees; the others' documents list lines it lacks
        assert figures["failed"] == 0 and figures["taken"] > 0 and figures["disagreed"] > 0
    else:
        assert figures["failed"] == figures["lookups"] and figures["taken"] == figures["disagreed"] == 0
    assert shipments.quarantined == 0
    assert_converged(small_sim.store, work_db(tmp_path))


@pytest.fixture
def one_at_a_time() -> Iterator[RunningSimulator]:
    """A service whose memo lookup refuses several shipment numbers (400)."""
    with running_simulator(shipments=SMALL_SHIPMENTS, seed=11, faults=FaultConfig(memo_lookup_by_one=True)) as running:
        yield running


def kept_stop(data_dir: Path) -> BatchingOff | None:
    rows = query(work_db(data_dir), "SELECT cursor_value FROM freight_meta.sync_state WHERE stream = ?", [STATE])
    return BatchingOff.parse(rows[0][0]) if rows else None


def age_kept_stop(data_dir: Path) -> None:
    """The kept stop made as long ago as it holds: the next run tries batching again."""
    kept = kept_stop(data_dir)
    assert kept is not None
    aged = BatchingOff(kept.since - RETRY_AFTER, kept.why, kept.run_id)
    with duckdb.connect(str(work_db(data_dir))) as con:
        con.execute("UPDATE freight_meta.sync_state SET cursor_value = ? WHERE stream = ?", [aged.text(), STATE])


def test_a_service_refusing_the_batched_lookup_has_each_shipment_looked_up_alone_said_while_off_and_tried_daily(
    one_at_a_time: RunningSimulator, tmp_path: Path
) -> None:
    docs = list(one_at_a_time.store.reader.expected_documents())
    every = [doc["id"] for doc in docs]
    sync = syncer(one_at_a_time, tmp_path, publish_after=False)

    def said(shipments: StreamResult) -> str | None:
        """The run's memo batching notice (None: it said none)."""
        kinds = shipments.extra.get("notice_kinds", [])
        return shipments.notices[kinds.index(NoticeKind.MEMO_BATCH_OFF)] if NoticeKind.MEMO_BATCH_OFF in kinds else None

    def run_again() -> tuple[dict[str, Any], str | None, int]:
        """Every shipment changed and synced again: the run's memo figures, memo notice and memo lookups."""
        one_at_a_time.touch_shipments(every)
        before = memo_lookups(one_at_a_time)
        shipments = sync()["shipments"]
        assert shipments.quarantined == 0
        return shipments.extra.get("memo_batches", {}), said(shipments), memo_lookups(one_at_a_time) - before

    first = sync()["shipments"]  # refused: each shipment alone, the notice, the stop kept
    figures = first.extra["memo_batches"]
    assert figures["failed"] == figures["lookups"] > 0 and figures["taken"] == 0 and first.quarantined == 0
    # each refused batch asked again unordered while no ordered lookup had been answered (it may be the order)
    assert len(docs) + figures["lookups"] <= memo_lookups(one_at_a_time) <= len(docs) + 2 * figures["lookups"]
    assert "refused the batched memo lookup" in figures["off"]
    stop = kept_stop(tmp_path)
    assert stop is not None and first.started_at <= stop.since <= (first.finished_at or stop.since)
    assert "refused" in stop.why and stop.run_id == first.run_id
    notice = said(first)
    assert notice is not None and notice == stop.notice() and notice.startswith(
        f"memo lines looked up one shipment at a time since {stop.since.isoformat(timespec='seconds')} (run "
        f"{first.run_id}); the first run after {stop.until.isoformat(timespec='seconds')} tries batching again: "
        "the service refused the batched memo lookup (")
    assert_converged(one_at_a_time.store, work_db(tmp_path))

    figures, notice, lookups = run_again()  # the stop holds: no batch asked, said again (the alert stays open)
    assert lookups == len(docs) and figures["lookups"] == 0 and "off" not in figures
    assert stop.run_id in figures["held_off"] and notice == stop.notice()
    assert kept_stop(tmp_path) == stop

    age_kept_stop(tmp_path)  # a day on, still refused: tried once more, the stop renewed and said
    figures, notice, lookups = run_again()
    assert figures["failed"] == figures["lookups"] > 0 and "refused" in figures["off"]
    renewed = kept_stop(tmp_path)
    assert len(docs) + figures["lookups"] <= lookups <= len(docs) + 2 * figures["lookups"]
    assert renewed is not None and renewed.since > stop.since and notice == renewed.notice()

    one_at_a_time.set_faults(memo_lookup_by_one=False)  # a day on, the service takes IN: batching is on again
    age_kept_stop(tmp_path)
    figures, notice, lookups = run_again()
    assert figures["taken"] > 0 and "off" not in figures and "held_off" not in figures and kept_stop(tmp_path) is None
    assert lookups == figures["lookups"] + len(docs) - figures["taken"] and notice is None
    assert_converged(one_at_a_time.store, work_db(tmp_path))


@pytest.mark.parametrize("how", DocumentMemos.HOWS)
def test_a_document_that_cannot_confirm_its_share_has_its_shipment_looked_up_alone(
    small_sim: RunningSimulator, work_sync: SyncFn, tmp_path: Path, how: str
) -> None:
    docs = list(small_sim.store.reader.expected_documents())
    shipments = work_sync(source_factory=factory(DocumentMemos, how)[0])["shipments"]
    figures = shipments.extra["memo_batches"]
    assert figures["lookups"] > 0 and figures["taken"] == 0 and figures["alone"] > 0
    assert memo_lookups(small_sim) == figures["lookups"] + len(docs)
    if how == "extra":  # every document lists a line no lookup answers: more disagreed than agreed
        assert figures["disagreed"] == figures["alone"] and figures["off"]
        assert NoticeKind.MEMO_BATCH_OFF in shipments.extra["notice_kinds"]
    else:  # nothing to compare with: not a disagreement
        assert figures["disagreed"] == 0 and "off" not in figures
    assert shipments.quarantined == 0
    assert_converged(small_sim.store, work_db(tmp_path))


def test_a_line_added_between_the_batch_and_the_document_has_its_shipment_looked_up_alone(
    small_sim: RunningSimulator, work_sync: SyncFn, tmp_path: Path
) -> None:
    client = Counter(d["client"] for d in small_sim.store.reader.expected_documents()).most_common(1)[0][0]
    victim = next(d for d in small_sim.store.reader.expected_documents() if d["client"] == client)
    before = len(victim["memos"])
    figures = work_sync(source_factory=factory(LineAddedBetween, small_sim, victim)[0])["shipments"].extra[
        "memo_batches"]
    assert figures["disagreed"] == 1 and figures["failed"] == 0  # its document listed the line, the batch had not
    held = query(work_db(tmp_path), "SELECT count(*) FROM freight.shipment_memos WHERE shipment_id = ?", [victim["id"]])
    assert held == [(before + 1,)]
    assert_converged(small_sim.store, work_db(tmp_path))


def test_a_shipment_whose_document_names_another_number_takes_the_lines_of_that_number(
    small_sim: RunningSimulator, work_sync: SyncFn, tmp_path: Path
) -> None:
    victim = next(d for d in small_sim.store.reader.expected_documents() if d["memos"])
    make, built = factory(LookupSaysAnotherNumber, victim["id"])
    figures = work_sync(source_factory=make)["shipments"].extra["memo_batches"]
    assert built[0].asked_alone == [(victim["client"], victim["shipment_number"])]
    assert figures["alone"] >= 1
    held = query(work_db(tmp_path), "SELECT memo_id FROM freight.shipment_memos WHERE shipment_id = ?",
                 [victim["id"]])
    assert sorted(memo_id for (memo_id,) in held) == sorted(m["id"] for m in victim["memos"])
    assert_converged(small_sim.store, work_db(tmp_path))


@pytest.mark.parametrize("by_one", [False, True], ids=["batches", "one-at-a-time"])
def test_a_service_refusing_the_memo_lookups_order_is_asked_unordered_after_its_first_refusal(
    tmp_path: Path, by_one: bool
) -> None:
    """The spec shows no memo lookup key: a service refusing ``order_by=ID`` there (400) had every shipment's memo
    lookup fail, the stream cut off. Its first refusal is asked again unordered, and when that is answered, so is
    every memo lookup of the run; a 400 that is about something else (several numbers, to a service reading one
    at a time) is refused unordered too, and leaves the order unknown."""
    faults = FaultConfig(memo_order_refused=True, memo_lookup_by_one=by_one)
    with running_simulator(shipments=SMALL_SHIPMENTS, seed=11, faults=faults) as sim:
        shipments = syncer(sim, tmp_path, publish_after=False)()["shipments"]
        refused = sim.request_count("/service/shipment/memo/lookup", status=400)
        assert shipments.quarantined == 0 and shipments.rejected == 0
        assert_converged(sim.store, work_db(tmp_path))
        figures = shipments.extra["memo_batches"]
        if by_one:  # the batches refused for their numbers, either way; then each shipment alone, unordered
            assert figures["failed"] == figures["lookups"] > 0
            alone_refused = refused - 2 * figures["failed"]  # those in flight before the first answered unordered
            assert 0 < alone_refused <= len(sim.store.reader.live_shipment_ids())
        else:  # each lookup in flight before the first answered unordered refused once, and asked again: a batch's,
            # or one shipment's (the freshness sample's), as the run's timing has it (was bounded by the batches: flaky)
            answered = sim.request_count("/service/shipment/memo/lookup", status=200)
            assert 0 < refused <= answered and figures["taken"] > 0
        assert shipments.extra["memo_lookup_unordered"] == (
            "the memo lookup refused order_by=ID (400) and answered without it: this run asked it unordered")
