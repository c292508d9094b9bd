"""Shapes and realism of the simulator's generated documents (against the spec)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from freight_pipeline.datetimes import parse_datetime_object, parse_iso_datetime
from freight_pipeline.simulator.data_estimates import REVISED_CODES
from freight_pipeline.simulator.data_identity import derive_identity
from freight_pipeline.simulator.store import SimulatorStore
from freight_pipeline.simulator.store_api import EVENT_CODES, SHIPMENT_KEYS

SHIPMENT_FIELDS = {
    "id", "client", "direction", "office", "employees", "memos", "aes", "shipment_number", "master_reference",
    "house_reference", "bl_type", "mode_of_transport", "month_of_service", "total_packages", "total_gross_weight",
    "self_pickup", "self_delivery", "goods", "addresses", "pre_carriage", "main_carriage", "post_carriage", "events",
    "terms_of_delivery_matchcode", "terms_of_delivery_name", "total_volume", "chargeableWeight",
    "original_shipment_number", "foreign_id", "movement_matchcode", "insurance", "credit_data", "customs_data",
    "containers", "custom_fields", "last_modified_date_time", "created_date_time", "order_date_time",
    "project_matchcode", "depot_matchcode", "shipment_closed", "booking_party_address_qualifier",
}
GOOD_FIELDS = {
    "id", "client", "shipment_number", "identifier", "counter", "level", "level_number", "marks", "quantity",
    "packaging_matchcode", "commodity_matchcode", "description", "weight", "net_weight", "chargable_weight",
    "weight_unit", "volume", "volume_unit", "colli", "colli_number", "additional_mark", "container_number",
    "hs_codes", "measurements", "customs", "mrns", "subgoods", "dangerousGoods",
}
DG_FIELDS = {
    "id", "dangerous_good_legislation", "classification_code", "un_number", "release", "label_1", "label_2",
    "label_3", "label_4", "site", "flashpoint", "flashpoint_unit", "ems_number_1", "ems_number_2", "mfag_number_1",
    "mfag_number_2", "remarks", "authorisation_number", "packaging_group", "technical_name_1", "technical_name_2",
    "causing_substance_1", "causing_substance_2", "issuer", "net_weight", "gross_weight", "weight_unit", "contact",
}
ADDRESS_FIELDS = {
    "qualifier", "address_type", "address_number", "printed_address", "street", "postal_code", "city", "state",
    "country_matchcode", "un_location_code", "contact", "references",
}
QUALIFIERS = {"AGT", "CAR", "CNE", "CUS", "DEL", "DEP", "DL1", "DL2", "INV", "MIS", "NFY", "PUP", "SHP", "TRA",
              "FACILIATOR", "AGENT", "CARRIER"}
CONTAINER_FIELDS = {"id", "good_id", "client", "shipment_number", "container_number", "seal_number1", "seal_number2",
                    "seal_number3", "container_iso_code", "shippers_own", "containerAddresses"}
CONTAINER_ADDRESS_FIELDS = {"qualifier", "street", "city", "order", "references", "address_type", "address_number",
                            "postal_code", "country_matchcode", "un_location_code", "from_date_and_time",
                            "to_date_and_time", "contact"}
LOCATION_CODE_TYPES = {"SERVICE", "UNLOC", "IATA", "FOREIGN", "POSTAL_CODE", "UN_COUNTRY"}
ISO_WITH_OFFSET = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}[+-]\d{2}:\d{2}$")


@pytest.fixture(scope="module")
def store() -> SimulatorStore:
    return SimulatorStore(shipments=400, seed=7)


@pytest.fixture(scope="module")
def docs(store: SimulatorStore) -> list[dict[str, Any]]:
    return list(store.reader.expected_documents())


def walk_goods(goods: list[dict[str, Any]], depth: int = 1) -> Iterator[tuple[int, dict[str, Any]]]:
    for good in goods:
        yield depth, good
        yield from walk_goods(good.get("subgoods") or [], depth + 1)


def datetime_objects(doc: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for event in doc["events"]:
        if event["date_time"] is not None:
            yield event["date_time"]
    for carriage in ("pre_carriage", "main_carriage", "post_carriage"):
        for leg in doc[carriage]["carriage_legs"]:
            for end in ("origin", "destination"):
                for name in ("estimated_datetime", "actual_datetime", "revised_datetime", "estimated_datetime_until"):
                    if leg[end][name] is not None:
                        yield leg[end][name]
    for address in doc["addresses"]:
        for ref in address["references"]:
            if ref["date_and_time"] is not None:
                yield ref["date_and_time"]


def test_same_seed_gives_byte_identical_documents() -> None:
    a, b = SimulatorStore(shipments=150, seed=3), SimulatorStore(shipments=150, seed=3)
    assert [dict(r) for r in a.reader.shipment_key_rows()] == [dict(r) for r in b.reader.shipment_key_rows()]
    texts_a = [json.dumps(d, sort_keys=True) for d in a.reader.expected_documents()]
    texts_b = [json.dumps(d, sort_keys=True) for d in b.reader.expected_documents()]
    assert texts_a == texts_b
    assert list(a.reader.memo_rows()) == list(b.reader.memo_rows())
    assert list(a.reader.code_conversion_rows()) == list(b.reader.code_conversion_rows())
    other = SimulatorStore(shipments=150, seed=4)
    assert [json.dumps(d, sort_keys=True) for d in other.reader.expected_documents()] != texts_a


def test_same_seed_and_calls_give_identical_changes() -> None:
    a, b = SimulatorStore(shipments=120, seed=5), SimulatorStore(shipments=120, seed=5)
    for s in (a, b):
        s.clock.advance(3600)
        s.changes.modify_shipments(10)
        s.changes.create_shipments(3)
        s.changes.delete_shipments(2)
    assert ([json.dumps(d) for d in a.reader.expected_documents()]
            == [json.dumps(d) for d in b.reader.expected_documents()])


def test_top_level_fields_match_the_spec(docs: list[dict[str, Any]]) -> None:
    for doc in docs:
        missing = SHIPMENT_FIELDS - set(doc) - {"project_matchcode"}  # the one optional key sometimes absent
        assert not missing, (doc["id"], missing)
        assert set(doc) <= SHIPMENT_FIELDS
        assert set(doc["employees"]) == {"closed_employee_matchcode", "last_modified_employee_matchcode",
                                         "created_employee_matchcode", "responsible_employee_matchcode"}
        assert isinstance(doc["shipment_closed"], bool)
        for name in ("last_modified_date_time", "created_date_time", "order_date_time"):
            assert ISO_WITH_OFFSET.match(doc[name]), doc[name]
            assert doc[name].endswith("+01:00")
        assert parse_iso_datetime(doc["created_date_time"]) <= parse_iso_datetime(doc["last_modified_date_time"])
        assert doc["chargeableWeight"] >= doc["total_gross_weight"]
        for memo in doc["memos"]:
            assert set(memo) == {"id", "client", "memo", "shipment_number", "running_number"}
            assert (memo["client"], memo["shipment_number"]) == (doc["client"], doc["shipment_number"])
    assert any("project_matchcode" not in d for d in docs)
    assert any(d["insurance"] is None for d in docs) and any(d["insurance"] is not None for d in docs)
    insured = next(d["insurance"] for d in docs if d["insurance"] and d["insurance"]["insurer"])
    assert set(insured["insurer"]) == {"address_type", "address_number"}
    assert any(d["credit_data"] and d["credit_data"]["lc_number"] for d in docs)
    assert any(d["aes"] for d in docs)
    assert any(d["custom_fields"] for d in docs)


def test_modes_directions_and_realistic_codes(docs: list[dict[str, Any]]) -> None:
    assert {(d["mode_of_transport"], d["direction"]) for d in docs} == {
        (m, x) for m in ("SEA", "AIR", "RD", "RL") for x in ("I", "E")}
    for doc in docs:
        for carriage in ("pre_carriage", "main_carriage", "post_carriage"):
            for leg in doc[carriage]["carriage_legs"]:
                assert leg["mot"] in ("SEA", "ANY")
                for end in ("origin", "destination"):
                    location = leg[end]["location"]
                    assert {c["type"] for c in location["codes"]} <= LOCATION_CODE_TYPES
                    unloc = [c["code"] for c in location["codes"] if c["type"] == "UNLOC"]
                    assert unloc and re.fullmatch(r"[A-Z]{2}[A-Z2-9]{3}", unloc[0])
        if doc["mode_of_transport"] == "AIR":
            leg = doc["main_carriage"]["carriage_legs"][0]
            assert re.fullmatch(r"\d{3}", leg["airline_awb_code"]) and leg["airline_name"] and leg["flight_no"]
            assert re.fullmatch(r"\d{3}-\d{8}", doc["master_reference"])
        if doc["mode_of_transport"] == "SEA":
            for leg in doc["main_carriage"]["carriage_legs"]:
                assert leg["mot"] == "SEA"
                assert re.fullmatch(r"\d{7}", leg["imo_code"])
                assert {"voyage_no", "vessel_name", "vessel_flag", "call_sign"} <= set(leg)
        for leg in doc["pre_carriage"]["carriage_legs"] + doc["post_carriage"]["carriage_legs"]:
            assert leg["haulage_type"] and leg["haulage_reference"]


def test_goods_tree_and_camel_case_names(docs: list[dict[str, Any]]) -> None:
    depths = set()
    dangerous = []
    for doc in docs:
        ids = set()
        for depth, good in walk_goods(doc["goods"]):
            depths.add(depth)
            assert set(good) - {"additional_mark"} <= GOOD_FIELDS <= set(good) | {"additional_mark"}
            assert good["level"] == depth
            assert good["id"] not in ids
            ids.add(good["id"])
            for hs in good["hs_codes"]:
                assert set(hs) == {"id", "goodId", "hsCode"} and hs["goodId"] == good["id"]
            for m in good["measurements"]:
                assert m["goods_id"] == good["id"]
            dangerous.extend(good["dangerousGoods"])
        assert doc["total_packages"] == sum(g["quantity"] for g in doc["goods"])
    assert depths == {1, 2, 3}
    assert dangerous
    for item in dangerous:
        assert set(item) == DG_FIELDS
        assert item["dangerous_good_legislation"] in ("IMDG", "ADR", "RID")
        assert set(item["contact"]) == {"name", "phone_number", "fax_number", "email"}


def test_addresses_and_references(store: SimulatorStore, docs: list[dict[str, Any]]) -> None:
    rows = {r["ID"]: r for r in store.reader.shipment_key_rows()}
    for doc in docs:
        assert doc["addresses"]
        values = []
        for address in doc["addresses"]:
            assert set(address) == ADDRESS_FIELDS
            assert address["qualifier"] in QUALIFIERS
            assert set(address["printed_address"]) == {f"line_{i}" for i in range(1, 6)}
            for ref in address["references"]:
                assert {"id", "matchcode", "value"} <= set(ref) and "date_and_time" in ref
                values.append(ref["value"])
        assert sorted(values) == sorted(rows[doc["id"]]["ADDRESS_REFERENCE"])
        customer = next(a for a in doc["addresses"] if a["qualifier"] == "CUS")
        assert customer["address_type"] == rows[doc["id"]]["CUSTOMER_ADDRESS_TYPE"]
        assert customer["address_number"] == rows[doc["id"]]["CUSTOMER_ADDRESS_NUMBER"]


def test_containers_only_on_sea(docs: list[dict[str, Any]]) -> None:
    with_containers = [d for d in docs if d["containers"]]
    assert with_containers
    dynamic = 0
    for doc in with_containers:
        assert doc["mode_of_transport"] == "SEA"
        for container in doc["containers"]:
            assert set(container) == CONTAINER_FIELDS
            assert re.fullmatch(r"[A-Z]{3}U\d{7}", container["container_number"])
            addresses = container["containerAddresses"]
            fixed = [a for a in addresses if "id" not in a]
            assert [a["qualifier"] for a in fixed] == ["PICKUP", "DELIVERER", "REDILIVERY"]
            for item in addresses:
                assert set(item) - {"id"} == CONTAINER_ADDRESS_FIELDS
            dynamic += len(addresses) - len(fixed)
    assert dynamic > 0


def test_both_datetime_forms_present_and_parse(docs: list[dict[str, Any]]) -> None:
    forms = set()
    for doc in docs:
        for value in datetime_objects(doc):
            forms.add("object" if isinstance(value["zone_offset"], dict) else "string")
            parsed = parse_datetime_object(value)
            assert parsed is not None and parsed.date is not None and parsed.offset is not None
            if value["time"] is not None:
                assert parsed.instant is not None
            if isinstance(value["zone_offset"], dict):
                assert set(value["zone_offset"]) == {"totalSeconds", "id", "rules"}
                if value["time"] is not None:
                    assert set(value["time"]) == {"hour", "minute", "second", "nano"}
            else:
                assert re.fullmatch(r"[+-]\d{2}:\d{2}", value["zone_offset"])
    assert forms == {"object", "string"}


def test_events_follow_milestones(store: SimulatorStore, docs: list[dict[str, Any]]) -> None:
    late = 0
    for doc in docs:
        events = doc["events"]
        assert events == store.reader.get_events(doc["id"])
        keys = [(e["event"], e["type"]) for e in events]
        assert len(keys) == len(set(keys))
        last_modified = parse_iso_datetime(doc["last_modified_date_time"])
        estimated = {}
        for event in events:
            assert event["event"] in EVENT_CODES and event["type"] in ("ESTIMATED", "ACTUAL")
            assert event["shipment_id"] == doc["id"]
            assert ("until" in event["date_time"] and event["date_time"]["until"] is not None) <= (
                event["event"] in ("PICKUP", "FINAL_DESTINATION"))
            parsed = parse_datetime_object(event["date_time"])
            if event["type"] == "ESTIMATED":
                estimated[event["event"]] = parsed.instant
            else:
                assert event["event"] in estimated  # an ACTUAL follows its ESTIMATED
                assert parsed.instant <= last_modified
                if estimated[event["event"]] and parsed.instant > estimated[event["event"]]:
                    late += 1
        assert keys[0] == ("PICKUP", "ESTIMATED")
        assert ("FINAL_DESTINATION", "ESTIMATED") in keys
        actual = [e["event"] for e in events if e["type"] == "ACTUAL"]
        ordered = [e["event"] for e in events if e["type"] == "ESTIMATED" and e["event"] in actual]
        assert actual == ordered
        if doc["shipment_closed"]:
            assert ("FINAL_DESTINATION", "ACTUAL") in keys
    assert late > 0
    sea = next(d for d in docs if d["mode_of_transport"] == "SEA" and len(d["events"]) > 14)
    codes = [e["event"] for e in sea["events"] if e["type"] == "ESTIMATED"]
    assert codes.index("PICKUP") < codes.index("POL_ARRIVAL") < codes.index("LOADING_END") < codes.index(
        "POL_DEPARTURE") < codes.index("POD_ARRIVAL") < codes.index("CUSTOMS_CLEARANCE") < codes.index(
        "DELIVERY_DATE") < codes.index("FINAL_DESTINATION")


def test_main_carriage_endpoints(store: SimulatorStore, docs: list[dict[str, Any]]) -> None:
    for doc in docs[:120]:
        air, sea = store.reader.get_air_main_carriage(doc["id"]), store.reader.get_sea_main_carriage(doc["id"])
        legs = doc["main_carriage"]["carriage_legs"]
        if doc["mode_of_transport"] == "AIR":
            assert sea == [] and len(air) == len(legs)
            assert set(air[0]) == {"leg_no", "origin", "destination", "mot", "flight_no", "airline_awb_code",
                                   "airline_name"}
            assert air[0]["flight_no"] == legs[0]["flight_no"]
        elif doc["mode_of_transport"] == "SEA":
            assert air == [] and len(sea) == len(legs)
            assert set(sea[0]) == {"leg_no", "origin", "destination", "mot", "voyage_no", "imo_code", "vessel_name",
                                   "vessel_flag", "call_sign"}
        else:
            assert air == [] and sea == []


def test_key_rows_agree_with_documents(store: SimulatorStore, docs: list[dict[str, Any]]) -> None:
    rows = {r["ID"]: r for r in store.reader.shipment_key_rows()}
    assert set(rows) == {d["id"] for d in docs}
    for doc in docs:
        row = rows[doc["id"]]
        assert tuple(row) == SHIPMENT_KEYS
        assert row["HBL"] == doc["house_reference"] and row["MBL"] == doc["master_reference"]
        assert row["FILENUMBER"] == row["SHIPMENT_NUMBER"] == doc["shipment_number"]
        assert row["SHIPMENT_ID"] == doc["foreign_id"]
        assert row["DIRECTION"] == doc["direction"] and row["MODE_OF_TRANSPORT"] == doc["mode_of_transport"]
        assert row["CLIENT"] == doc["client"] and row["MONTH_OF_SERVICE"] == doc["month_of_service"]
        assert row["CREATION_DATE"] == doc["created_date_time"][:10]
        assert row["LAST_MODIFIED_DATE"] == doc["last_modified_date_time"][:10]
        assert row["LAST_MODIFIED_TIME"] == doc["last_modified_date_time"][11:19]
        assert row["SHIPMENT_CLOSED"] == ("J" if doc["shipment_closed"] else "N")
        assert isinstance(row["RUNNING_SEQUENCE_NUMBER"], int) and isinstance(row["CUSTOMER_ADDRESS_NUMBER"], int)
        assert row["CUSTOMER_ADDRESS_TYPE"] in ("D", "K", "G", "P", "A")
    numbers = [(r["CLIENT"], r["SHIPMENT_NUMBER"]) for r in rows.values()]
    assert len(numbers) == len(set(numbers))


def test_base_shipment_is_scalars_plus_employees(store: SimulatorStore, docs: list[dict[str, Any]]) -> None:
    base = store.reader.get_base_shipment(docs[0]["id"])
    excluded = {"goods", "addresses", "containers", "pre_carriage", "main_carriage", "post_carriage", "events",
                "memos", "aes", "custom_fields", "insurance", "credit_data", "customs_data"}
    assert not excluded & set(base)
    assert base["employees"] == docs[0]["employees"]
    assert {k: v for k, v in docs[0].items() if k not in excluded} == base


def test_other_utc_offset() -> None:
    store = SimulatorStore(shipments=30, seed=1, utc_offset="-05:00")
    assert store.clock.now().isoformat() == "2026-11-01T08:00:00-05:00"
    doc = next(store.reader.expected_documents())
    assert doc["last_modified_date_time"].endswith("-05:00")
    row = store.reader.shipment_state(doc["id"])
    assert row["LAST_MODIFIED_TIME"] == doc["last_modified_date_time"][11:19]


def test_integers_fit_int32(docs: list[dict[str, Any]]) -> None:
    def ints(value: Any) -> Iterator[int]:
        if isinstance(value, bool):
            return
        if isinstance(value, int):
            yield value
        elif isinstance(value, dict):
            for item in value.values():
                yield from ints(item)
        elif isinstance(value, list):
            for item in value:
                yield from ints(item)

    assert max(max(ints(doc)) for doc in docs) < 2**31


def test_only_changes_revise_estimates() -> None:
    """The initial data keeps every identity's timeline; a modification revises the estimates of
    some shipments still on their way (and only in what their milestones say)."""
    store = SimulatorStore(shipments=150, seed=3)
    assert all(state.timeline is None for state in store.data.live.values())
    store.clock.advance(3600)
    modified = store.changes.modify_shipments(40)
    revised = [store.data.live[i] for i in modified if store.data.live[i].timeline is not None]
    assert 10 <= len(revised) < 40
    for state in revised:
        before = derive_identity(3, state.id, state.created).milestones
        assert [(m.code, m.actual) for m in state.timeline] == [(m.code, m.actual) for m in before]
        assert {m.code for m, b in zip(state.timeline, before, strict=True) if m != b} <= REVISED_CODES
