"""Flattening of shipment documents, events, legs, memos and code conversions."""

from __future__ import annotations

import datetime as dt
import itertools
import json
from typing import Any

import pytest

from freight_pipeline.normalize.errors import NormalizationError, RecordShapeError
from freight_pipeline.normalize.events import normalize_events
from freight_pipeline.normalize.flatten import normalize_shipment
from freight_pipeline.normalize.legs import normalize_main_carriage
from freight_pipeline.normalize.problems import Problems
from freight_pipeline.normalize.records import normalize_code_conversions, normalize_memos
from freight_pipeline.normalize.tables import SHIPMENT_DOCUMENT_TABLES
from freight_pipeline_tests.normalize import samples

INSTANT = dt.datetime(2026, 11, 1, 9, 15, 30, tzinfo=dt.UTC)


def by(rows: list[dict[str, Any]], *keys: str) -> dict[Any, dict[str, Any]]:
    return {tuple(r[k] for k in keys) if len(keys) > 1 else r[keys[0]]: r for r in rows}


@pytest.fixture(scope="module")
def rows() -> dict[str, list[dict[str, Any]]]:
    return normalize_shipment(samples.shipment())


def test_shipment_returns_every_table_of_its_stream(rows: dict[str, list[dict[str, Any]]]) -> None:
    assert set(rows) == set(SHIPMENT_DOCUMENT_TABLES)
    minimal = normalize_shipment({"id": 5})
    assert set(minimal) == set(SHIPMENT_DOCUMENT_TABLES)
    assert minimal["shipments"] == [{"shipment_id": 5}]
    assert all(not v for k, v in minimal.items() if k != "shipments")


def test_shipment_row(rows: dict[str, list[dict[str, Any]]]) -> None:
    (row,) = rows["shipments"]
    assert row["shipment_id"] == 1001
    assert row["chargeable_weight"] == 400.0  # camelCase chargeableWeight
    assert row["last_modified_at"] == INSTANT
    assert (row["last_modified_date"], row["last_modified_time"], row["last_modified_offset"]) == (
        "2026-11-01",
        "10:15:30",
        "+01:00",
    )
    assert row["created_at"] == dt.datetime(2026, 10, 1, 7, 0, tzinfo=dt.UTC)
    assert row.get("ordered_at") is None
    assert row["shipment_closed"] is False
    assert row["last_modified_employee_matchcode"] == "jdoe"
    assert row.get("closed_employee_matchcode") is None
    assert row["insurance_text"] == "all risks"
    assert row["insurance_transport_insurance"] is True
    assert row["insurance_insurer_address_number"] == 12
    assert row["credit_latest_shipment_date"] == dt.date(2026, 12, 1)
    assert row.get("credit_lc_expiry") is None
    assert row["customs_clearance_date"] == dt.date(2026, 11, 3)
    assert "someFutureField" not in row and "some_future_field" not in row


def test_goods_tree_paths_parents_depth(rows: dict[str, list[dict[str, Any]]]) -> None:
    goods = by(rows["shipment_goods"], "good_path")
    assert list(goods) == ["1", "1.1", "1.1.1", "1.2", "2"]
    assert {p: (g["parent_good_path"], g["depth"], g["good_id"]) for p, g in goods.items()} == {
        "1": (None, 1, 1),
        "1.1": ("1", 2, 11),
        "1.1.1": ("1.1", 3, 111),
        "1.2": ("1", 2, 12),
        "2": (None, 1, 2),
    }
    g = goods["1.1.1"]
    assert g["quantity"] == 3  # numeric string coerced
    assert g["net_weight"] == 100.0 and isinstance(g["net_weight"], float)
    assert g["chargable_weight"] == 130.0
    assert g["colli"] is True and g["additional_mark"] is False


def test_goods_children(rows: dict[str, list[dict[str, Any]]]) -> None:
    hs = by(rows["good_hs_codes"], "good_path", "position")
    assert hs[("1.1.1", 1)] == {
        "shipment_id": 1001,
        "good_path": "1.1.1",
        "position": 1,
        "hs_code_id": 1110,
        "good_id": 111,
        "hs_code": "847130",
    }
    marks = [(r["good_path"], r["position"], r["mark"]) for r in rows["good_marks"] if r["good_path"] == "2"]
    assert marks == [("2", 1, "MARK A"), ("2", 2, "MARK B")]
    descriptions = by(rows["good_descriptions"], "good_path", "position")
    assert descriptions[("1.2", 2)]["description"] == "line two"
    customs = by(rows["good_customs"], "good_path", "position")[("1", 1)]
    assert customs["amount"] == 1500.5
    assert customs["invoice_at"] == dt.datetime(2026, 10, 30, 7, 0, tzinfo=dt.UTC)
    assert customs["delivery_date_time"] == "not a date" and customs["delivery_at"] is None
    measurement = by(rows["good_measurements"], "good_path", "position")[("1.2", 1)]
    assert (measurement["goods_id"], measurement["length"], measurement["volume"]) == (12, 120, 0.96)
    assert by(rows["good_mrns"], "good_path", "position")[("2", 1)]["mrn"] == "26DE123456789012A1"


def test_dangerous_goods_contact_flattened(rows: dict[str, list[dict[str, Any]]]) -> None:
    (dg,) = rows["good_dangerous_goods"]
    assert (dg["good_path"], dg["position"], dg["dangerous_good_id"]) == ("1", 1, 99)
    assert dg["contact_name"] == "Hazmat Desk"
    assert dg["contact_phone_number"] == "+49 40 1"
    assert dg.get("contact_fax_number") is None
    assert dg["contact_email"] == "hz@x.test"
    assert json.loads(dg["contact_json"])["name"] == "Hazmat Desk"
    assert json.loads(dg["remarks"]) == ["keep cool", "no smoking"]
    assert dg["gross_weight"] == 95.5


def test_addresses_and_references(rows: dict[str, list[dict[str, Any]]]) -> None:
    shp, cne = rows["shipment_addresses"]
    assert (shp["position"], shp["qualifier"], shp["address_number"]) == (1, "SHP", 4711)
    assert (shp["printed_line_1"], shp["printed_line_2"], shp.get("printed_line_3")) == (
        "ACME GmbH",
        "Hafenstr. 1",
        None,
    )
    assert shp["contact_name"] == "Jane" and shp["contact_email"] == "jane@acme.test"
    assert json.loads(shp["contact_json"])["mobile"] == "+49 170"  # unknown contact fields kept
    assert (cne["position"], cne["qualifier"], cne.get("contact_json")) == (2, "CNE", None)
    refs = by(rows["address_references"], "address_position", "position")
    assert refs[(1, 1)]["reference_at"] == INSTANT  # object-form DateTime
    assert refs[(1, 1)]["reference_offset"] == "+01:00"
    assert refs[(1, 2)].get("reference_at") is None and refs[(1, 2)]["value"] == "R-1"


def test_containers_and_container_addresses(rows: dict[str, list[dict[str, Any]]]) -> None:
    (container,) = rows["shipment_containers"]
    assert (container["container_id"], container["good_id"], container["shippers_own"]) == (501, 1, False)
    addresses = by(rows["container_addresses"], "container_position", "position")
    assert [a["qualifier"] for a in addresses.values()] == ["DELIVERER", "PICKUP", "REDILIVERY", "WAREHOUSE"]
    assert addresses[(1, 1)].get("address_id") is None
    dynamic = addresses[(1, 4)]
    assert (dynamic["address_id"], dynamic["address_order"]) == (9, 4)
    assert dynamic["appointment_from_at"] == INSTANT
    assert dynamic["appointment_to_at"] == dt.datetime(2026, 11, 1, 11, 0, tzinfo=dt.UTC)
    assert dynamic["contact_phone_number"] == "+49 421 1"
    assert json.loads(dynamic["references_json"]) == [{"id": 1, "matchcode": "X", "value": "Y"}]


def test_carriage_legs(rows: dict[str, list[dict[str, Any]]]) -> None:
    legs = by(rows["carriage_legs"], "carriage", "leg_position")
    assert set(legs) == {("pre", 1), ("main", 1), ("main", 2)}
    assert legs[("pre", 1)]["haulage_type"] == "TRUCK"
    first, second = legs[("main", 1)], legs[("main", 2)]
    # both DateTime forms give the identical instant
    assert first["origin_estimated_at"] == second["origin_estimated_at"] == INSTANT
    assert first["origin_estimated_time"] == second["origin_estimated_time"] == "10:15:30"
    assert first["origin_estimated_until"] == dt.datetime(2026, 11, 1, 11, 0, tzinfo=dt.UTC)
    assert (first["origin_unloc"], first["origin_iata"], first["origin_service_code"]) == (
        "DEHAM",
        "HAM",
        "S-DEHAM",
    )
    assert first["origin_longitude"] == 9.99  # numeric string
    # every code, ordered by code, then type (the spec promises no order): sent S-DEHAM, DEHAM, HAM
    assert [c["code"] for c in json.loads(first["origin_location_codes"])] == ["DEHAM", "HAM", "S-DEHAM"]
    assert first["destination_estimated_at"] == dt.datetime(2026, 12, 1, 0, 0, tzinfo=dt.UTC)
    # partial DateTime: the raw parts survive, no instant is invented
    assert first["origin_revised_date"] == dt.date(2026, 11, 2)
    assert first.get("origin_revised_at") is None and first.get("origin_revised_offset") is None
    assert first["vessel_name"] == "EVER GIVEN"


def test_both_datetime_forms_identical_instant() -> None:
    doc = {
        "id": 1,
        "addresses": [
            {"references": [{"id": 1, "date_and_time": samples.DT_STRING_FORM}]},
            {"references": [{"id": 2, "date_and_time": samples.DT_OBJECT_FORM}]},
        ],
    }
    a, b = normalize_shipment(doc)["address_references"]
    keys = ("reference_at", "reference_date", "reference_time", "reference_offset")
    assert [a[k] for k in keys] == [b[k] for k in keys]
    assert a["reference_at"] == INSTANT


def test_nulls_and_absent_arrays() -> None:
    doc = {
        "id": "77",  # numeric string id coerces
        "goods": None,
        "addresses": [],
        "containers": [{"id": 1, "containerAddresses": None}],
        "main_carriage": {"carriage_legs": None},
        "pre_carriage": None,
        "insurance": None,
        "employees": {},
        "aes": [None],
        "custom_fields": None,
        "shipment_closed": "J",
    }
    rows = normalize_shipment(doc)
    assert rows["shipments"] == [{"shipment_id": 77, "shipment_closed": True}]
    assert rows["shipment_containers"] == [{"shipment_id": 77, "position": 1, "container_id": 1}]
    assert not rows["container_addresses"] and not rows["shipment_goods"] and not rows["carriage_legs"]
    assert not rows["shipment_aes"]


def test_aes_and_custom_fields(rows: dict[str, list[dict[str, Any]]]) -> None:
    assert rows["shipment_aes"] == [
        {
            "shipment_id": 1001,
            "position": 1,
            "aes_id": 3,
            "client": "C1",
            "mrn": "MRN1",
            "shipment_number": "SN-1",
            "running_number": 1,
        }
    ]
    assert rows["shipment_custom_fields"][0]["value"] == "blue"


@pytest.mark.parametrize(
    ("mutate", "message"),
    [(lambda d: d.pop("id"), "id: missing"), (lambda d: d.update(id="abc"), "id: 'abc' is not an integer id")],
)
def test_a_document_without_a_usable_id_is_rejected(mutate: Any, message: str) -> None:
    doc = samples.shipment()
    mutate(doc)
    with pytest.raises(NormalizationError, match=f"^{message}"):
        normalize_shipment(doc, Problems())
    with pytest.raises(NormalizationError, match="is not an object"):
        normalize_shipment(["not", "a", "document"], Problems())  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda d: d["goods"][0]["subgoods"][1].update(weight="abc"),
            "goods[0].subgoods[1].weight: 'abc' is not a number",
        ),
        (
            lambda d: d["goods"][0]["subgoods"][0]["subgoods"][0].update(quantity=1.5),
            "goods[0].subgoods[0].subgoods[0].quantity: 1.5 is not an integer",
        ),
        (lambda d: d.update(goods={"not": "a list"}), "goods: {'not': 'a list'} is not an array"),
        (
            lambda d: d["addresses"][0].update(printed_address="x"),
            "addresses[0].printed_address: 'x' is not an object",
        ),
        (
            lambda d: d["main_carriage"]["carriage_legs"][1]["origin"].update(
                estimated_datetime={"date": "2026-13-45"}
            ),
            "main_carriage.carriage_legs[1].origin.estimated_datetime.date: date '2026-13-45'",
        ),
        (lambda d: d.update(shipment_closed="maybe"), "shipment_closed: 'maybe' is not a boolean"),
        (
            lambda d: d.update(last_modified_date_time="yesterday"),
            "last_modified_date_time: date-time 'yesterday'",
        ),
        (
            lambda d: d["containers"][0]["containerAddresses"].append(5),
            "containers[0].containerAddresses[4]: 5 is not",
        ),
        (lambda d: d["goods"][1].update(marks=[{"x": 1}]), "goods[1].marks[0]: {'x': 1} is not a string"),
        (
            lambda d: d.update(total_packages=2**70),
            "total_packages: 1180591620717411303424 is out of the 64-bit",
        ),
    ],
)
def test_a_bad_value_is_nulled_and_reported_by_path(mutate: Any, message: str) -> None:
    doc = samples.shipment()
    clean = normalize_shipment(samples.shipment())
    mutate(doc)
    problems = Problems()
    rows = normalize_shipment(doc, problems)
    (problem,) = problems
    assert f"{problem.path}: {problem.reason}".startswith(message), problem
    path, _, _ = message.partition(": ")
    assert problem.path == path
    # the shipment stays, and so do the tables the bad value is not in
    assert rows["shipments"][0]["client"] == clean["shipments"][0]["client"]
    for table in ("shipment_addresses", "shipment_containers", "carriage_legs", "shipment_aes"):
        assert len(rows[table]) == len(clean[table]) or path.startswith(table.removeprefix("shipment_"))
    # without a sink the first problem refuses the record, naming the same path
    with pytest.raises(NormalizationError) as err:
        normalize_shipment(doc)
    assert str(err.value).startswith(message), str(err.value)
    assert isinstance(err.value, ValueError)


def test_a_bad_value_leaves_its_column_null_and_the_rest_of_the_row() -> None:
    doc = samples.shipment()
    doc.update(total_packages="12a", total_gross_weight="12,5")
    doc["addresses"][0]["address_number"] = "abc"
    problems = Problems()
    rows = normalize_shipment(doc, problems)
    (shipment,) = rows["shipments"]
    assert "total_packages" not in shipment and "total_gross_weight" not in shipment
    assert shipment["client"] == doc["client"] and shipment["shipment_number"] == doc["shipment_number"]
    assert "address_number" not in rows["shipment_addresses"][0]
    assert rows["shipment_addresses"][0]["qualifier"] == doc["addresses"][0]["qualifier"]
    assert [(p.path, p.value) for p in problems] == [
        ("total_packages", "12a"),
        ("total_gross_weight", "12,5"),
        ("addresses[0].address_number", "abc"),
    ]


def test_a_renamed_field_is_read_under_either_name_in_the_order_declared() -> None:
    """The shipments spec names house/master reference's new names (release 2026.2) as aliases."""
    doc = samples.shipment()
    renamed = {("house_bill_number" if k == "house_reference" else "master_bill_number" if k == "master_reference"
                else k): v for k, v in doc.items()}
    (before,) = normalize_shipment(doc)["shipments"]
    (after,) = normalize_shipment(renamed)["shipments"]
    assert after["house_reference"] == before["house_reference"] == doc["house_reference"]
    assert after["master_reference"] == before["master_reference"] == doc["master_reference"]
    assert after == before
    both = {**doc, "house_bill_number": "NEW-1"}  # the first name that holds a value wins
    assert normalize_shipment(both)["shipments"][0]["house_reference"] == doc["house_reference"]
    assert normalize_shipment({**both, "house_reference": None})["shipments"][0]["house_reference"] == "NEW-1"
    problems = Problems()  # a bad value under the alias is reported under the alias's path
    normalize_shipment({**renamed, "house_bill_number": {"x": 1}}, problems)
    assert [p.path for p in problems] == ["house_bill_number"]


def test_events() -> None:
    rows = normalize_events(1001, samples.events())["shipment_events"]
    events = by(rows, "event", "type")
    pickup = events[("PICKUP", "ESTIMATED")]
    assert pickup["event_at"] == INSTANT
    assert pickup["event_until"] == dt.datetime(2026, 11, 1, 11, 30, tzinfo=dt.UTC)
    assert pickup["event_until_time"] == "12:30:00"
    assert (pickup["unloc"], pickup["service_code"], pickup["location_name"]) == (
        "DEHAM",
        "S-DEHAM",
        "Hamburg",
    )
    final = events[("FINAL_DESTINATION", "ACTUAL")]
    assert final["event_at"] == INSTANT  # object form
    assert final["event_until"] == dt.datetime(
        2026, 11, 2, 8, 0, tzinfo=dt.UTC
    )  # until before start: next day
    unknown = events[("SOMETHING_NEW", "ACTUAL")]  # unknown codes are kept
    assert unknown.get("event_at") is None
    assert normalize_events(1, []) == {"shipment_events": []}
    assert normalize_events(1, None) == {"shipment_events": []}


def test_a_location_s_codes_in_any_order_give_one_row() -> None:
    """Two codes of one type (two UNLOCs), in another order each read: the column of that type took the first as
    sent, so it flipped between them and each sample said the events changed without the stamp. Every order gives
    the row of one: the first in the codes' order, as they are stored; what cannot be read is said at its path as
    sent."""
    codes = [{"type": "UNLOC", "code": "DEHAM"}, {"type": "UNLOC", "code": "DEBRV"}, {"type": "IATA", "code": "HAM"},
             "not a code", {"type": "UNLOC", "code": {"not": "text"}}]
    rows = []
    for order in itertools.permutations(range(len(codes))):
        event = {**samples.events()[0], "location": {"name": "Hamburg", "codes": [codes[i] for i in order]}}
        problems = Problems()
        (row,) = normalize_events(1001, [event], problems)["shipment_events"]
        rows.append(row)
        assert [p.path for p in problems] == [f"[0].location.codes[{order.index(3)}]"]  # kept in location_codes
    assert (rows[0]["unloc"], rows[0]["iata"]) == ("DEBRV", "HAM")
    assert all(row == rows[0] for row in rows) and len(rows) == 120


def test_duplicate_events_keep_last_and_count() -> None:
    first = {"event": "POL_DEPARTURE", "type": "ESTIMATED", "date_time": samples.DT_STRING_FORM}
    second = {**first, "date_time": {"date": "2026-11-05", "time": "00:00:00", "zone_offset": "Z"}}
    third = {**first, "date_time": {"date": "2026-11-06", "time": "00:00:00", "zone_offset": "Z"}}
    problems = Problems()
    (row,) = normalize_events(1, [first, second, third], problems)["shipment_events"]
    assert row["event_at"] == dt.datetime(2026, 11, 6, tzinfo=dt.UTC)
    assert row["source_duplicates"] == 2
    # the entries not loaded are reported whole, so nothing vanishes unseen
    assert [(p.path, p.value) for p in problems] == [("[0]", first), ("[1]", second)]


def test_an_event_without_code_is_skipped_and_reported_whole() -> None:
    bad = {"event": "PICKUP", "type": None, "date_time": samples.DT_STRING_FORM}
    problems = Problems()
    rows = normalize_events(1, [{"event": "PICKUP", "type": "ACTUAL"}, bad], problems)["shipment_events"]
    assert [(r["event"], r["type"]) for r in rows] == [("PICKUP", "ACTUAL")]
    (problem,) = problems
    assert (problem.path, problem.value) == ("[1]", bad)
    assert problem.reason.startswith("type None is missing")


def test_an_event_naming_another_shipment_refuses_the_answer() -> None:
    """An answer mixed up by a cache or a proxy: another shipment's event stored under this one, silently, was the
    old way; the part is refused (read again, its rows kept). Its own id, as a number or as text, is fine."""
    own = {"event": "PICKUP", "type": "ACTUAL", "date_time": {"date": "2026-07-08"}}
    both = [{**own, "shipment_id": 10002}, {**own, "type": "ESTIMATED", "shipment_id": "10002"}]
    assert len(normalize_events(10002, both)["shipment_events"]) == 2
    with pytest.raises(RecordShapeError, match=r"\[1\]\.shipment_id 10008 is not the shipment asked for \(10002\)"):
        normalize_events(10002, [{**own, "shipment_id": 10002}, {**own, "type": "ESTIMATED", "shipment_id": 10008}])


def test_an_impossible_offset_nulls_the_instant_and_keeps_the_event() -> None:
    event = {"event": "PICKUP", "type": "ACTUAL", "date_time": {"date": "2026-11-01", "time": "10:15:30",
                                                                  "zone_offset": "+99:00"}}
    problems = Problems()
    (row,) = normalize_events(1, [event], problems)["shipment_events"]
    assert row["event_at"] is None and row["event_offset"] is None
    assert (row["event_date"], row["event_time"]) == (dt.date(2026, 11, 1), "10:15:30")
    assert [(p.path, p.value) for p in problems] == [("[0].date_time.zone_offset", "+99:00")]


@pytest.mark.parametrize("answer", [{"events": []}, {"event": "PICKUP", "type": "ACTUAL"}, "PICKUP", 5])
def test_an_answer_that_is_not_an_array_is_a_shape_error(answer: Any) -> None:
    with pytest.raises(RecordShapeError, match=r"^events: the answer is .*not an array"):
        normalize_events(1, answer, Problems())
    with pytest.raises(RecordShapeError, match=r"^seamaincarriage: the answer"):
        normalize_main_carriage(1, answer, "sea", Problems())
    with pytest.raises(RecordShapeError, match=r"^memos: the answer"):
        normalize_memos(answer, {}, Problems())


def test_main_carriage_air_and_sea() -> None:
    air_leg = {
        "leg_no": 1,
        "mot": "AIR",
        "flight_no": "LH400",
        "airline_awb_code": "020",
        "airline_name": "Lufthansa",
        "origin": {
            "location": samples.location("Frankfurt", "DEFRA", "FRA"),
            "actual_datetime": samples.DT_OBJECT_FORM,
        },
        "destination": None,
    }
    (air,) = normalize_main_carriage(7, [air_leg], kind="air")["air_main_carriage_legs"]
    assert (air["shipment_id"], air["position"], air["flight_no"], air["origin_iata"]) == (
        7,
        1,
        "LH400",
        "FRA",
    )
    assert air["origin_actual_at"] == INSTANT
    sea = normalize_main_carriage(7, [samples.leg(1), samples.leg(2)], kind="sea")["sea_main_carriage_legs"]
    assert [(r["position"], r["voyage_no"]) for r in sea] == [(1, "V001"), (2, "V001")]
    assert "flight_no" not in sea[0]
    assert normalize_main_carriage(7, [], kind="sea") == {"sea_main_carriage_legs": []}
    with pytest.raises(ValueError):
        normalize_main_carriage(7, [], kind="rail")  # type: ignore[arg-type]


def _numbered(legs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Legs with distinct voyages, to tell them apart in the rows."""
    return [{**leg, "voyage_no": f"V{i}"} for i, leg in enumerate(legs)]


def test_legs_sent_in_another_order_give_the_same_rows_in_leg_no_order() -> None:
    """A service answering its legs in another order (no ORDER BY behind it) gave rows swapped by position: each
    read a false revision of every leg's times in the history."""
    legs = _numbered([samples.leg(2), {**samples.leg(9), "leg_no": None}, samples.leg(1), samples.leg(3)])
    sea = normalize_main_carriage(7, legs, kind="sea")["sea_main_carriage_legs"]
    assert [(r["position"], r.get("leg_no"), r["voyage_no"]) for r in sea] == [
        (1, 1, "V2"), (2, 2, "V0"), (3, 3, "V3"), (4, None, "V1")]  # without a leg_no: after the others
    assert normalize_main_carriage(7, legs[::-1], kind="sea")["sea_main_carriage_legs"] == sea
    doc = samples.shipment()
    doc["main_carriage"]["carriage_legs"] = legs
    embedded = [r for r in normalize_shipment(doc)["carriage_legs"] if r["carriage"] == "main"]
    assert [(r["leg_position"], r["voyage_no"]) for r in embedded] == [(1, "V2"), (2, "V0"), (3, "V3"), (4, "V1")]
    doc["main_carriage"]["carriage_legs"] = legs[::-1]
    assert [r for r in normalize_shipment(doc)["carriage_legs"] if r["carriage"] == "main"] == embedded


def test_legs_of_one_leg_no_keep_the_arrays_order() -> None:
    legs = _numbered([samples.leg(1), samples.leg(1)])
    sea = normalize_main_carriage(7, legs, kind="sea")["sea_main_carriage_legs"]
    assert [(r["position"], r["voyage_no"]) for r in sea] == [(1, "V0"), (2, "V1")]


def test_memos_resolve_shipment_id() -> None:
    memos = [
        {"id": 1, "client": "C1", "memo": "fragile", "shipment_number": "SN-1", "running_number": 1},
        {"id": 2, "client": "C1", "memo": "other", "shipment_number": "SN-9", "running_number": 1},
        {"id": 1, "client": "C1", "memo": "fragile!", "shipment_number": "SN-1", "running_number": 1},
    ]
    problems = Problems()
    rows = normalize_memos(memos, {("C1", "SN-1"): 1001}, problems)["shipment_memos"]
    assert [(r["memo_id"], r["shipment_id"], r["memo"]) for r in rows] == [
        (1, 1001, "fragile!"),
        (2, None, "other"),
    ]
    # a line the lookup of SN-1 answered that names another shipment: unattached, and said
    assert [(p.path, p.value) for p in problems] == [("[1]", {"client": "C1", "shipment_number": "SN-9"}),
                                                     ("[0]", memos[0])]
    problems = Problems()
    assert normalize_memos([{"memo": "x"}, memos[1]], {}, problems)["shipment_memos"][0]["memo_id"] == 2
    assert [(p.path, p.reason) for p in problems] == [
        ("[0]", "id missing: the record cannot be keyed and is not loaded")
    ]
    with pytest.raises(NormalizationError, match=r"^\[0\]: id missing"):
        normalize_memos([{"memo": "x"}], {})


@pytest.mark.parametrize("sent", [("C1", "SN-1   "), (" C1", "SN-1"), ("C1\t", "\nSN-1 ")])
def test_a_memo_line_whose_client_or_number_is_padded_belongs_to_its_shipment(sent: tuple[str, str]) -> None:
    """A fixed-width column pads the number in one answer and not in another: the line is the shipment's."""
    memo = {"id": 1, "client": sent[0], "memo": "fragile", "shipment_number": sent[1], "running_number": 1}
    problems = Problems()
    (row,) = normalize_memos([memo], {("C1", "SN-1"): 1001}, problems)["shipment_memos"]
    assert (row["shipment_id"], row["client"], row["shipment_number"], problems) == (1001, *sent, [])


def test_memo_lines_that_leave_out_their_shipment_s_keys_are_the_one_asked_for_s() -> None:
    """``client`` and ``shipment_number`` are optional (A20): a line without either, answered by the lookup of one
    shipment, is that shipment's when what it does say agrees; for several asked, or naming another, it is not."""
    lines = [
        {"id": 1, "memo": "neither"},
        {"id": 2, "memo": "client only", "client": " C1 "},
        {"id": 3, "memo": "number only", "shipment_number": "SN-1", "client": None},
        {"id": 4, "memo": "another client", "client": "C2"},
        {"id": 5, "memo": "another number", "shipment_number": "SN-2"},
    ]
    problems = Problems()
    rows = normalize_memos(lines, {("C1", "SN-1"): 1001}, problems)["shipment_memos"]
    assert [(r["memo_id"], r["shipment_id"]) for r in rows] == [(1, 1001), (2, 1001), (3, 1001), (4, None), (5, None)]
    assert [p.path for p in problems] == ["[3]", "[4]"]
    problems = Problems()
    rows = normalize_memos(lines[:1], {("C1", "SN-1"): 1001, ("C1", "SN-2"): 1002}, problems)["shipment_memos"]
    assert rows[0]["shipment_id"] is None and [p.path for p in problems] == ["[0]"]


def test_a_memo_line_that_names_no_shipment_asked_for_is_loaded_unattached_and_reported() -> None:
    memo = {"id": 1, "client": 1, "memo": "fragile", "shipment_number": "SN-1", "running_number": 1}
    problems = Problems()
    (row,) = normalize_memos([memo], {("001", "SN-1"): 1001}, problems)["shipment_memos"]
    assert (row["memo_id"], row["shipment_id"], row["client"]) == (1, None, "1")
    (problem,) = problems
    assert (problem.path, problem.value) == ("[0]", {"client": "1", "shipment_number": "SN-1"})
    assert "'001'/'SN-1'" in problem.reason and "null shipment_id" in problem.reason


def test_code_conversions() -> None:
    (row,) = normalize_code_conversions([samples.code_conversion(3)])["code_conversions"]
    assert row["conversion_id"] == 3
    assert row["valid_from"] == dt.date(2026, 1, 1)
    assert row["last_modified_at"] == dt.datetime(2026, 10, 1, 7, 0, tzinfo=dt.UTC)
    assert json.loads(row["payload"])["extra_field"] == "kept in payload"
    assert normalize_code_conversions([]) == {"code_conversions": []}
    with pytest.raises(NormalizationError, match=r"^\[0\]\.valid_from: date 'soon'"):
        normalize_code_conversions([{**samples.code_conversion(1), "valid_from": "soon"}])
    problems = Problems()
    (row,) = normalize_code_conversions([{**samples.code_conversion(1), "valid_from": "soon"}], problems)[
        "code_conversions"
    ]
    assert "valid_from" not in row  # null
    assert json.loads(row["payload"])["valid_from"] == "soon"
    assert [(p.path, p.value) for p in problems] == [("[0].valid_from", "soon")]
