"""One bad record never stops the pipeline: every kind of bad data, planted over HTTP in the simulator.

The simulator corrupts chosen records persistently (``/_control/corruptions``: every answer, until
healed) while its store keeps the true data, so the oracle (``expected.differences``) still knows
what every record should hold. Each test syncs and publishes, then checks that the bad record was
quarantined (with reason, request and excerpt) or its bad value nulled and reported, that every
other record is exact, and, once the source heals, that the next run loads what waited.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from freight_pipeline.lake.backend import storage_from_env
from freight_pipeline.simulator.server import RunningSimulator, running_simulator
from freight_pipeline.sync.isolation import CircuitOpen
from freight_pipeline.sync.parts import DETAIL_PARTS
from freight_pipeline.sync.result import StreamResult
from freight_pipeline.sync.runner import sync_all
from freight_pipeline.warehouse.publish import PublishResult
from freight_pipeline_tests.sync.conftest import (
    assert_every_document_counted_read,
    corrupt,
    heal,
    query,
    service_of,
    work_db,
)
from freight_pipeline_tests.sync.expected import assert_converged, differences
from freight_pipeline_tests.sync.settings import TEST_SETTINGS

Doc = dict[str, Any]


@pytest.fixture
def sim() -> Iterator[RunningSimulator]:
    with running_simulator(shipments=60, seed=11, control=True) as running:
        yield running


@dataclass
class Synced:
    results: dict[str, StreamResult]
    published: PublishResult | None


def sync(sim: RunningSimulator, data_dir: Path) -> Synced:
    results, published = sync_all(service_of(sim), data_dir, TEST_SETTINGS, backend=storage_from_env())
    for result in results:
        assert_every_document_counted_read(result)
    return Synced({r.stream: r for r in results}, published)




def changed(sim: RunningSimulator, ids: list[int]) -> None:
    """Make ``ids`` look modified, so the next run's walk reads them again."""
    sim.store.clock.advance(60)
    sim.store.changes.touch_shipments(ids)


def documents(sim: RunningSimulator) -> list[Doc]:
    return sorted(sim.store.reader.expected_documents(), key=lambda d: d["id"])


def quarantined(data_dir: Path) -> dict[tuple[str, str], dict[str, Any]]:
    rows = query(
        work_db(data_dir),
        "SELECT stream, record_key, reason, request, status_code, response_excerpt, attempts "
        "FROM freight_meta.quarantine",
    )
    names = ("reason", "request", "status_code", "excerpt", "attempts")
    return {(stream, key): dict(zip(names, rest, strict=True)) for stream, key, *rest in rows}


def problems(data_dir: Path) -> dict[tuple[str, str, str], tuple[Any, str]]:
    rows = query(
        work_db(data_dir),
        "SELECT stream, record_key, json_path, CAST(raw_value AS VARCHAR), reason FROM freight_meta.data_problems",
    )
    return {(s, k, p): (json.loads(v) if v is not None else None, r) for s, k, p, v, r in rows}


def shipment_ids(data_dir: Path) -> set[int]:
    return {r[0] for r in query(work_db(data_dir), "SELECT shipment_id FROM freight.shipments")}


def assert_published(synced: Synced) -> None:
    assert synced.published is not None, "the run must publish"
    assert all(r.status == "success" for r in synced.results.values())


# --- the six findings of the issue, one test each -------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "fields", "reason", "status"),
    [
        ("truncated", {}, "not valid JSON", 200),
        ("status", {"status": 500}, "HTTP 500", 500),
    ],
    ids=["truncated-body", "500-every-attempt"],
)
def test_a_shipment_that_fails_on_every_attempt_is_quarantined_and_loads_once_healed(
    sim: RunningSimulator, tmp_path: Path, kind: str, fields: dict[str, Any], reason: str, status: int
) -> None:
    victim = documents(sim)[5]["id"]
    corrupt(sim, "shipment", victim, kind, **fields)
    first = sync(sim, tmp_path)
    assert_published(first)
    entry = quarantined(tmp_path)[("shipments", str(victim))]
    assert reason in entry["reason"], entry
    assert entry["request"] == f"GET /service/shipment/{victim}"
    assert entry["status_code"] == status and entry["attempts"] == 1
    if kind == "truncated":
        assert entry["excerpt"] and entry["excerpt"].startswith("{")
    assert victim not in shipment_ids(tmp_path)
    assert first.results["shipments"].quarantined == 1
    assert differences(sim.store, work_db(tmp_path), except_shipments=[victim]) == {}
    assert query(work_db(tmp_path), "SELECT count(*) FROM freight_meta.rejected_records WHERE source_key = ?",
                 [str(victim)]) == [(1,)]

    second = sync(sim, tmp_path)  # still bad: still waiting, tried again, still publishing
    assert_published(second)
    assert quarantined(tmp_path)[("shipments", str(victim))]["attempts"] == 2

    heal(sim)
    assert_published(sync(sim, tmp_path))  # the retry queue brings it in, with its events, legs and memos
    assert quarantined(tmp_path) == {}
    assert_converged(sim.store, work_db(tmp_path))


def test_an_impossible_utc_offset_nulls_the_instant_and_reports_it(sim: RunningSimulator, tmp_path: Path) -> None:
    victim = next(d["id"] for d in documents(sim) if sim.store.reader.get_events(d["id"]))
    corrupt(sim, "events", victim, "set", path="[0].date_time.zone_offset", value="+99:00")
    synced = sync(sim, tmp_path)
    assert_published(synced)
    event = sim.store.reader.get_events(victim)[0]
    ((at, offset, date),) = query(
        work_db(tmp_path),
        "SELECT event_at, event_offset, event_date FROM freight.shipment_events WHERE shipment_id = ? AND event = ? "
        "AND type = ?",
        [victim, event["event"], event["type"]],
    )
    assert at is None and offset is None and date.isoformat() == event["date_time"]["date"]
    raw, why = problems(tmp_path)[("shipment_events", str(victim), "[0].date_time.zone_offset")]
    assert raw == "+99:00" and "+/-18:00" in why
    assert synced.results["shipments"].extra["parts"]["shipment_events"]["data_problems"] == 1
    assert quarantined(tmp_path) == {}
    assert differences(sim.store, work_db(tmp_path), except_shipments=[victim]) == {}


def test_an_events_answer_wrapped_in_an_object_quarantines_that_shipments_events(
    sim: RunningSimulator, tmp_path: Path
) -> None:
    victim = next(d["id"] for d in documents(sim) if sim.store.reader.get_events(d["id"]))
    corrupt(sim, "events", victim, "wrap", key="events")
    synced = sync(sim, tmp_path)
    assert_published(synced)
    entry = quarantined(tmp_path)[("shipment_events", str(victim))]
    assert "not a JSON array" in entry["reason"] and entry["request"] == f"GET /service/shipment/{victim}/events"
    assert entry["excerpt"].startswith('{"events":')
    assert victim in shipment_ids(tmp_path)  # the shipment and its other streams are loaded
    assert query(work_db(tmp_path), "SELECT count(*) FROM freight.shipment_events WHERE shipment_id = ?",
                 [victim]) == [(0,)]
    differ = differences(sim.store, work_db(tmp_path))
    assert set(differ) == {"shipment_events"} and differ["shipment_events"][1] == 0  # missing, never wrong

    heal(sim)
    assert_published(sync(sim, tmp_path))
    assert quarantined(tmp_path) == {}
    assert_converged(sim.store, work_db(tmp_path))


def test_an_unknown_event_type_is_loaded_as_sent(sim: RunningSimulator, tmp_path: Path) -> None:
    victim = next(d["id"] for d in documents(sim) if sim.store.reader.get_events(d["id"]))
    corrupt(sim, "events", victim, "set", path="[0].type", value="PLANNED")
    assert_published(sync(sim, tmp_path))
    event = sim.store.reader.get_events(victim)[0]["event"]
    assert query(work_db(tmp_path), "SELECT type FROM freight.shipment_events WHERE shipment_id = ? AND event = ? "
                 "AND type = 'PLANNED'", [victim, event]) == [("PLANNED",)]
    assert quarantined(tmp_path) == {} and problems(tmp_path) == {}  # a new code is data, for dbt to flag


def test_a_mode_of_transport_sent_in_another_case_or_with_spaces_keeps_the_shipment_s_legs(
    sim: RunningSimulator, tmp_path: Path
) -> None:
    """Each part only shipments of one mode have (the air and the sea main carriage's legs), a shipment's mode sent
    as ``" Sea\u3000"`` or ``"\u00a0air"`` (an ideographic or a no-break space, as fixed-width fields pad): before its
    first read, and changed to it after. The marts read it as the mode (trimmed, upper case); the sync took the
    shipment for one without those legs, asked nothing and deleted the legs it held (a ``deleted`` version, the ETA
    marts' leg arrival gone) while the service still served them."""
    modal = {part.mode: part for part in DETAIL_PARTS if part.mode is not None}
    legs = {"AIR": sim.store.reader.get_air_main_carriage, "SEA": sim.store.reader.get_sea_main_carriage}
    assert set(modal) == set(legs)
    chosen = {mode: [d["id"] for d in documents(sim) if d.get("mode_of_transport") == mode and legs[mode](d["id"])][:2]
              for mode in modal}
    for mode, (first, _) in chosen.items():
        corrupt(sim, "shipment", first, "set", path="mode_of_transport", value=f" {mode.title()}\u3000")
    assert_published(sync(sim, tmp_path))
    for mode, (_, later) in chosen.items():
        corrupt(sim, "shipment", later, "set", path="mode_of_transport", value=f"\u00a0{mode.lower()}")
    changed(sim, [later for _, later in chosen.values()])
    assert_published(sync(sim, tmp_path))
    for mode, ids in chosen.items():
        (table,) = modal[mode].tables
        held = dict(query(work_db(tmp_path), f"SELECT shipment_id, count(*) FROM freight.{table} WHERE shipment_id "
                          f"IN ({', '.join(map(str, ids))}) GROUP BY 1"))
        assert held == {shipment: len(legs[mode](shipment)) for shipment in ids}, mode
    assert quarantined(tmp_path) == {}


def test_an_identity_sent_in_a_kind_it_cannot_be_read_in_is_said_as_what_became_of_its_record(
    sim: RunningSimulator, tmp_path: Path
) -> None:
    """A shipment's ``id`` sent as text that names no integer, an event's code as a number: the run's notice of the
    field sent in another kind said each value was nulled into ``freight_meta.data_problems``; the shipment was
    quarantined whole (its rows kept as held), the event not loaded (reported whole). It says so now."""
    assert_published(sync(sim, tmp_path))  # the kinds each field came in
    ids = [d["id"] for d in documents(sim) if sim.store.reader.get_events(d["id"])]
    shipment, other = ids[:2]
    corrupt(sim, "shipment", shipment, "set", path="id", value="abc")
    corrupt(sim, "events", other, "set", path="[0].event", value=7)
    changed(sim, [shipment, other])
    said = sync(sim, tmp_path).results["shipments"].shape_changes()
    document = next(line for line in said if line.startswith("shipment documents"))
    assert "id number -> text in 1 of " in document
    assert "1 not read (the record quarantined, freight_meta.quarantine)" in document
    assert list(quarantined(tmp_path)) == [("shipments", str(shipment))]
    events = next(line for line in said if line.startswith("shipment events"))
    assert "event text -> number in 1 of " in events
    assert "1 not read (the record not loaded, freight_meta.data_problems)" in events
    assert [why for (stream, key, _), (_, why) in problems(tmp_path).items() if key == str(other)] == [
        "event 7 is missing or not text: the event is not loaded"]


def test_unreadable_fields_are_nulled_and_the_shipments_stay_whole(sim: RunningSimulator, tmp_path: Path) -> None:
    with_memos = [d for d in documents(sim) if d.get("memos") and d.get("addresses")]
    a, b, c = (d["id"] for d in with_memos[:3])
    corrupt(sim, "shipment", a, "set", path="total_packages", value="12a")
    corrupt(sim, "shipment", b, "set", path="total_gross_weight", value="12,5")
    corrupt(sim, "shipment", c, "set", path="addresses[0].address_number", value="abc")
    assert_published(sync(sim, tmp_path))
    found = problems(tmp_path)
    assert {(k, p): raw for (_, k, p), (raw, _) in found.items()} == {
        (str(a), "total_packages"): "12a",
        (str(b), "total_gross_weight"): "12,5",
        (str(c), "addresses[0].address_number"): "abc",
    }
    assert {a, b, c} <= shipment_ids(tmp_path)
    nulls = query(work_db(tmp_path), "SELECT shipment_id, total_packages, total_gross_weight FROM freight.shipments "
                  "WHERE shipment_id IN (?, ?)", [a, b])
    assert {(i, p if i == a else w) for i, p, w in nulls} == {(a, None), (b, None)}
    assert query(work_db(tmp_path), "SELECT address_number FROM freight.shipment_addresses WHERE shipment_id = ? "
                 "AND position = 1", [c]) == [(None,)]
    # everything else of them is exact: goods, addresses but the one column, and every memo line
    differ = differences(sim.store, work_db(tmp_path))
    assert set(differ) == {"shipments", "shipment_addresses"}
    assert differ["shipments"] == (2, 2) and differ["shipment_addresses"] == (1, 1)
    memos = query(work_db(tmp_path), "SELECT count(*) FROM freight.shipment_memos")[0][0]
    assert memos == sum(len(d.get("memos") or []) for d in documents(sim))
    assert quarantined(tmp_path) == {}


def test_too_many_failing_records_trip_the_breaker_and_advance_nothing(
    sim: RunningSimulator, tmp_path: Path
) -> None:
    assert_published(sync(sim, tmp_path))
    cursor = query(work_db(tmp_path), "SELECT cursor_value FROM freight_meta.sync_state WHERE stream = 'shipments'")
    victims = [d["id"] for d in documents(sim)[:12]]
    for victim in victims:  # a service answering 500 for a fifth of its shipments: not 12 bad records
        corrupt(sim, "shipment", victim, "status", status=500)
    changed(sim, victims)
    with pytest.raises(CircuitOpen, match=r"shipments: 1\d of 1\d records failed in this run") as raised:
        sync(sim, tmp_path)
    assert re.search(r"; the commonest failure \(1\d of 1\d\): .*HTTP 500", str(raised.value)), raised.value
    assert query(work_db(tmp_path), "SELECT cursor_value FROM freight_meta.sync_state WHERE stream = 'shipments'") \
        == cursor
    assert quarantined(tmp_path) == {}  # an outage is not quarantined
    heal(sim)
    assert_published(sync(sim, tmp_path))
    assert_converged(sim.store, work_db(tmp_path))


# --- thirty kinds of bad value and bad shape at once ----------------------------------------------


@dataclass(frozen=True)
class Plant:
    """One bad thing planted in one record, and what the warehouse must make of it."""

    endpoint: str
    kind: str
    fields: dict[str, Any]
    outcome: str
    """'problem' (loaded, value nulled and reported), 'quarantine' (waits in the retry queue) or
    'as sent' (loaded as it came: the value is odd, not unreadable)."""
    stream: str
    wants: Callable[[Doc, RunningSimulator], bool] = lambda doc, sim: True


def has_events(doc: Doc, sim: RunningSimulator) -> bool:
    return len(sim.store.reader.get_events(doc["id"])) >= 1


def mode(name: str) -> Callable[[Doc, RunningSimulator], bool]:
    return lambda doc, sim: doc.get("mode_of_transport") == name and bool(
        (sim.store.reader.get_air_main_carriage if name == "AIR" else sim.store.reader.get_sea_main_carriage)(doc["id"])
    )


def has(*keys: str) -> Callable[[Doc, RunningSimulator], bool]:
    def check(doc: Doc, sim: RunningSimulator) -> bool:
        value: Any = doc
        for key in keys:
            if isinstance(value, list):
                if not value:
                    return False
                value = value[0]
            if not isinstance(value, dict) or not value.get(key):
                return False
            value = value[key]
        return True

    return check


def setting(path: str, value: Any, outcome: str = "problem", stream: str = "shipments", endpoint: str = "shipment",
            wants: Callable[[Doc, RunningSimulator], bool] = lambda doc, sim: True) -> Plant:
    return Plant(endpoint, "set", {"path": path, "value": value}, outcome, stream, wants)


SHIPMENT_PLANTS = [
    Plant("shipment", "truncated", {}, "quarantine", "shipments"),
    Plant("shipment", "status", {"status": 500}, "quarantine", "shipments"),
    Plant("shipment", "status", {"status": 422}, "quarantine", "shipments"),
    setting("id", "abc", "quarantine"),
    setting("total_packages", "12a"),
    setting("total_gross_weight", "12,5"),
    setting("total_volume", "Infinity"),
    setting("chargeableWeight", {"value": 3}),
    setting("shipment_closed", "maybe"),
    setting("created_date_time", "2026-02-30T10:00:00+01:00"),
    setting("client", ["C1"], wants=lambda doc, sim: not doc.get("memos")),
    setting("office", "Hamburg\u0000 \u202eetiffo", "as sent"),
    setting("employees", "nobody"),
    setting("goods", "a string where the goods belong", wants=has("goods")),
    setting("addresses", {"qualifier": "CNE"}, wants=has("addresses")),
    setting("addresses[0].address_number", "abc", wants=has("addresses")),
    setting("goods[0].weight", {"kg": 1}, wants=has("goods")),
    setting("goods[0].subgoods[0].quantity", "many", wants=has("goods", "subgoods")),
    setting("goods[0].marks", [{"mark": 1}], wants=has("goods")),
    setting("containers[0].shippers_own", "sometimes", wants=has("containers")),
    setting("main_carriage.carriage_legs[0].origin.estimated_datetime", {"date": "2026-13-45", "time": "10:00:00",
            "zone_offset": "+01:00"}, wants=has("main_carriage", "carriage_legs", "origin", "estimated_datetime")),
]
DETAIL_PLANTS = [
    setting("[0].date_time.zone_offset", "+99:00", stream="shipment_events", endpoint="events", wants=has_events),
    setting("[0].date_time.time", {"hour": 99}, stream="shipment_events", endpoint="events", wants=has_events),
    setting("[0].event", None, stream="shipment_events", endpoint="events", wants=has_events),
    setting("[0].type", "PLANNED", "as sent", stream="shipment_events", endpoint="events", wants=has_events),
    Plant("events", "wrap", {"key": "events"}, "quarantine", "shipment_events", has_events),
    Plant("events", "single_object", {}, "quarantine", "shipment_events", has_events),
    Plant("events", "truncated", {}, "quarantine", "shipment_events", has_events),
    setting("[0].leg_no", "first", stream="sea_main_carriage_legs", endpoint="seamaincarriage", wants=mode("SEA")),
    Plant("airmaincarriage", "wrap", {"key": "legs"}, "quarantine", "air_main_carriage_legs", mode("AIR")),
    Plant("memos", "status", {"status": 500}, "quarantine", "shipment_memos", has("memos")),
    setting("[0].running_number", "x", stream="shipment_memos", endpoint="memos", wants=has("memos")),
]
CONVERSION_PLANTS = [
    setting("id", "abc", "quarantine", stream="code_conversions", endpoint="codeconverter"),
    setting("direction", {"code": "I"}, stream="code_conversions", endpoint="codeconverter"),
]


def test_thirty_kinds_of_bad_data_each_in_one_record_then_the_source_heals(
    sim: RunningSimulator, tmp_path: Path
) -> None:
    plants = [*SHIPMENT_PLANTS, *DETAIL_PLANTS, *CONVERSION_PLANTS]
    assert len(plants) >= 30
    free = documents(sim)
    planted: list[tuple[Plant, int]] = []
    for plant in [*SHIPMENT_PLANTS, *DETAIL_PLANTS]:  # one shipment each
        doc = next(d for d in free if plant.wants(d, sim))
        free.remove(doc)
        planted.append((plant, doc["id"]))
    conversions = sorted(int(r["id"]) for r in sim.store.reader.code_conversion_rows())
    planted += [(plant, conversions[i]) for i, plant in enumerate(CONVERSION_PLANTS)]
    for plant, record in planted:
        corrupt(sim, plant.endpoint, record, plant.kind, **plant.fields)
    bad_shipments = [record for plant, record in planted if plant.stream != "code_conversions"]
    bad_conversions = [record for plant, record in planted if plant.stream == "code_conversions"]

    synced = sync(sim, tmp_path)
    assert_published(synced)
    waiting, found, loaded = quarantined(tmp_path), problems(tmp_path), shipment_ids(tmp_path)
    for plant, record in planted:
        # a shipment is keyed by the id it was requested with; a code conversion has only its own id
        unkeyed = plant.stream == "code_conversions" and plant.fields.get("path") == "id"
        key = 'id "abc"' if unkeyed else str(record)
        if plant.outcome == "quarantine":
            entry = waiting.get((plant.stream, key))
            assert entry and entry["reason"], f"{plant} of {record} is not in the retry queue: {sorted(waiting)}"
        elif plant.outcome == "problem":
            path = plant.fields["path"]
            assert any(s == plant.stream and k == key and (p == path or path.startswith(p) or p.startswith(path))
                       for s, k, p in found), f"{plant} of {record} is not reported: {sorted(found)}"
        if plant.stream != "code_conversions":
            # nothing silently dropped: a planted shipment is loaded, or waits in the retry queue
            assert record in loaded or ("shipments", str(record)) in waiting, plant
    assert differences(sim.store, work_db(tmp_path), except_shipments=bad_shipments,
                       except_conversions=bad_conversions) == {}  # every good record exact

    heal(sim)
    changed(sim, bad_shipments)  # re-read the ones loaded with nulled values too
    assert_published(sync(sim, tmp_path))
    assert quarantined(tmp_path) == {} and problems(tmp_path) == {}
    assert_converged(sim.store, work_db(tmp_path))


def test_a_clean_source_has_no_problems_and_nothing_quarantined(sim: RunningSimulator, tmp_path: Path) -> None:
    synced = sync(sim, tmp_path)
    assert_published(synced)
    assert quarantined(tmp_path) == {} and problems(tmp_path) == {}
    assert all(r.quarantined == 0 and r.data_problems == 0 for r in synced.results.values())


def test_the_breaker_counts_only_new_failures(sim: RunningSimulator, tmp_path: Path) -> None:
    """Records already waiting in the retry queue never trip the breaker by failing again."""
    settings = TEST_SETTINGS.replaced(breaker_min_failures=3)
    victims = [d["id"] for d in documents(sim)[:2]]
    for victim in victims:
        corrupt(sim, "shipment", victim, "truncated")
    sync_all(service_of(sim), tmp_path, settings, backend=storage_from_env())  # 2 of 60: quarantined
    more = [d["id"] for d in documents(sim)[2:4]]
    for victim in more:
        corrupt(sim, "shipment", victim, "truncated")
    changed(sim, more)
    # 2 new + 2 retried failures: 2 < 3
    _, published = sync_all(service_of(sim), tmp_path, settings, backend=storage_from_env())
    assert published is not None
    assert {k for s, k in quarantined(tmp_path) if s == "shipments"} == {str(i) for i in victims + more}


@pytest.mark.parametrize("bad_id", [None, "abc", {"id": 5}])
def test_a_held_code_conversion_sent_without_a_usable_id_keeps_its_row_until_it_comes_back(
    bad_id: Any, tmp_path: Path
) -> None:
    """The full replace cannot tell which held conversion an unkeyed record is: while one is quarantined, no held
    row is deleted (docs/sync.md: a record that had loaded before keeps its previous rows). Was: its row deleted."""
    with running_simulator(shipments=5, seed=11, control=True) as sim:
        conversions = ["code_conversions"]
        sync_all(service_of(sim), tmp_path, TEST_SETTINGS, backend=storage_from_env(), streams=conversions)
        held = query(work_db(tmp_path), "SELECT * EXCLUDE (_synced_at, _run_id) FROM freight.code_conversions "
                                        "ORDER BY conversion_id")
        victim = held[len(held) // 2][0]
        corrupt(sim, "codeconverter", victim, "set", path="id", value=bad_id)
        results, _ = sync_all(service_of(sim), tmp_path, TEST_SETTINGS, backend=storage_from_env(),
                              streams=conversions)
        (result,) = results
        assert (result.status, result.quarantined) == ("success", 1)
        assert query(work_db(tmp_path), "SELECT * EXCLUDE (_synced_at, _run_id) FROM freight.code_conversions "
                                        "ORDER BY conversion_id") == held
        assert [stream for stream, _ in quarantined(tmp_path)] == ["code_conversions"]
        heal(sim)
        sync_all(service_of(sim), tmp_path, TEST_SETTINGS, backend=storage_from_env(), streams=conversions)
        assert quarantined(tmp_path) == {}
        assert differences(sim.store, work_db(tmp_path), except_shipments=[
            d["id"] for d in documents(sim)]).get("code_conversions") is None


def test_two_code_conversions_of_one_id_load_the_later_as_a_data_problem_not_a_short_scroll(tmp_path: Path) -> None:
    """The service holds two conversions of one id (the scroll answers as many records as its lookup counts): the
    later is loaded and the repeat is a data problem. Was: ``ScrollShortOfLookup`` ("the scroll was cut short")
    every run, the table frozen; a copy of one record served twice in place of another still is a short scroll
    (``test_paged_reads.py``)."""
    with running_simulator(shipments=5, seed=11, control=True) as sim:
        conversions = ["code_conversions"]
        ids = sorted(int(r["id"]) for r in sim.store.reader.code_conversion_rows())
        kept, renumbered = ids[3], ids[4]
        corrupt(sim, "codeconverter", renumbered, "set", path="id", value=kept)
        results, _ = sync_all(service_of(sim), tmp_path, TEST_SETTINGS, backend=storage_from_env(),
                              streams=conversions)
        (result,) = results
        assert (result.status, result.rows_read) == ("success", len(ids))
        held = dict(query(work_db(tmp_path), "SELECT conversion_id, payload FROM freight.code_conversions"))
        assert sorted(held) == [i for i in ids if i != renumbered]
        assert json.loads(held[kept])["id"] == kept and json.loads(held[kept]) != next(
            r for r in sim.store.reader.code_conversion_rows() if r["id"] == kept)  # the later: the renumbered one's
        ((stream, key, _), (_, reason)), = problems(tmp_path).items()
        assert (stream, key) == ("code_conversions", str(kept)) and "repeated in the scroll" in reason


def test_a_goods_tree_three_hundred_levels_deep_loads_every_level_over_http(
    sim: RunningSimulator, tmp_path: Path
) -> None:
    """The spec's ``subgoods`` have no depth limit: a chain of 300 levels under one goods line, served and synced,
    is every level in ``shipment_goods`` (the simulator's own control surface failed on it: RecursionError, a 500)."""
    shipment = documents(sim)[0]["id"]
    node: dict[str, Any] | None = None
    for level in range(301, 1, -1):
        node = {"id": 900_000 + level, "identifier": f"deep-{level}", "subgoods": [node] if node else []}
    corrupt(sim, "shipment", shipment, "set", path="goods[0].subgoods", value=[node])
    changed(sim, [shipment])
    assert sync(sim, tmp_path).results["shipments"].status == "success"
    depths = query(work_db(tmp_path), "SELECT max(depth), count(*) FILTER (WHERE good_path LIKE '1.%') "
                   "FROM freight.shipment_goods WHERE shipment_id = ?", [shipment])
    assert depths == [(301, 300)]
