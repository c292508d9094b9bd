"""Lenient model parsing with payloads shaped as the spec shows them; DateTime in both forms."""

from __future__ import annotations

import datetime as dt
import logging

import pytest

from freight_pipeline.client import (
    CarriageLeg,
    CodeConversion,
    Criterion,
    DateTime,
    EFile,
    FieldProblem,
    Location,
    Shipment,
    ShipmentEvent,
    WebhookReceipt,
)
from freight_pipeline.client import models as m
from freight_pipeline.client.models.base import _reported
from freight_pipeline.datetimes import parse_datetime_object, parse_time


@pytest.fixture(autouse=True)
def _forget_reported_drift() -> None:
    """Drift is logged once per process: each test starts as if nothing had been reported yet."""
    _reported.clear()


STRING_FORM = {"date": "2026-11-01", "time": "10:15:30", "zone_offset": "+01:00"}
OBJECT_FORM = {
    "date": "2026-11-01",
    "time": {"hour": 10, "minute": 15, "second": 30, "nano": 0},
    "zone_offset": {"totalSeconds": 3600, "id": "+01:00", "rules": {}},
}

FULL_SHIPMENT = {
    "id": 4711,
    "client": "001",
    "direction": "E",
    "office": "HAM",
    "employees": {"created_employee_matchcode": "jdoe", "responsible_employee_matchcode": None},
    "memos": [{"id": 1, "client": "001", "memo": "fragile", "shipment_number": "S-1", "running_number": 1}],
    "aes": [{"id": 2, "client": "001", "mrn": "26DE123", "shipment_number": "S-1", "running_number": 1}],
    "shipment_number": "S-1",
    "master_reference": "MBL1",
    "house_reference": "HBL1",
    "mode_of_transport": "SEA",
    "total_packages": 3,
    "total_gross_weight": 1200.5,
    "goods": [
        {
            "id": 10,
            "marks": ["M1"],
            "description": ["machine parts"],
            "chargable_weight": 900,
            "hs_codes": [{"id": 1, "goodId": 10, "hsCode": "8479"}],
            "measurements": [{"id": 1, "weight": 5.0, "length": 120, "goods_id": 10}],
            "customs": [{"id": 1, "invoice_number": "INV", "amount": 12.5}],
            "mrns": [{"id": 1, "mrn": "M"}],
            "dangerousGoods": [
                {"id": 3, "dangerous_good_legislation": "IMDG", "remarks": ["r"], "contact": {"name": "Ann"}}
            ],
            "subgoods": [{"id": 11, "subgoods": [{"id": 12}]}],
        }
    ],
    "addresses": [
        {
            "qualifier": "CNE",
            "address_number": 77,
            "printed_address": {"line_1": "ACME", "line_2": None},
            "references": [{"id": 1, "matchcode": "PO", "value": "123", "date_and_time": STRING_FORM}],
        }
    ],
    "main_carriage": {
        "carriage_legs": [
            {
                "leg_no": 1,
                "mot": "SEA",
                "vessel_name": "EVER GIVEN",
                "origin": {
                    "location": {"codes": [{"type": "UNLOC", "code": "DEHAM"}], "name": "Hamburg", "latitude": None},
                    "estimated_datetime": OBJECT_FORM,
                    "actual_datetime": None,
                },
            }
        ]
    },
    "events": [{"event": "POL_DEPARTURE", "type": "ACTUAL", "shipment_id": 4711, "date_time": STRING_FORM}],
    "chargeableWeight": 950.0,
    "insurance": {"waiver_customer": False, "insurer": {"address_type": "K", "address_number": 5}},
    "credit_data": {"lc_number": "LC1", "lc_expiry": "2026-12-31"},
    "customs_data": {"clearance": "X"},
    "containers": [
        {
            "id": 5,
            "container_number": "MSCU1234567",
            "containerAddresses": [{"qualifier": "PICKUP", "order": 1, "from_date_and_time": STRING_FORM}],
        }
    ],
    "custom_fields": [{"id": 1, "value": "v"}],
    "last_modified_date_time": "2026-11-01T10:15:30+01:00",
    "shipment_closed": False,
    "some_future_field": {"nested": True},
}


def test_datetime_both_forms_give_the_same_instant() -> None:
    a = DateTime.model_validate(STRING_FORM)
    b = DateTime.model_validate(OBJECT_FORM)
    assert a.instant == b.instant == dt.datetime(2026, 11, 1, 9, 15, 30, tzinfo=dt.UTC)
    assert a.instant is not None and a.instant.utcoffset() == dt.timedelta(hours=1)


def test_datetime_until_and_missing_parts() -> None:
    pickup = DateTime.model_validate({**STRING_FORM, "until": {"hour": 12, "minute": 0, "second": 0, "nano": 0}})
    assert pickup.until == dt.datetime(2026, 11, 1, 12, 0, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    assert pickup.raw["until"] == {"hour": 12, "minute": 0, "second": 0, "nano": 0}
    assert pickup.model_dump(by_alias=True)["until"]["hour"] == 12
    partial = DateTime.model_validate({"date": "2026-11-01", "time": None, "zone_offset": None})
    assert partial.instant is None and partial.until is None and partial.parse_error is None
    broken = DateTime.model_validate({"date": "yesterday", "time": "10:00:00", "zone_offset": "+01:00"})
    assert broken.instant is None and "yesterday" in (broken.parse_error or "")
    assert DateTime.model_validate({}).instant is None


def test_full_shipment_parses_with_aliases_and_keeps_raw() -> None:
    shipment = Shipment.model_validate(FULL_SHIPMENT)
    assert shipment.raw is FULL_SHIPMENT
    assert shipment.chargeable_weight == 950.0
    good = shipment.goods[0]
    assert good.hs_codes[0].good_id == 10 and good.hs_codes[0].hs_code == "8479"
    assert good.dangerous_goods[0].dangerous_good_legislation == "IMDG"
    assert [g.id for g in good.walk()] == [10, 11, 12]
    assert shipment.containers[0].container_addresses[0].from_date_and_time is not None
    leg = shipment.main_carriage.carriage_legs[0] if shipment.main_carriage else None
    assert leg is not None and leg.origin is not None and leg.origin.location is not None
    assert leg.origin.location.code_of("UNLOC") == "DEHAM"
    assert leg.origin.estimated_datetime is not None and leg.origin.estimated_datetime.instant is not None
    assert shipment.events[0].instant == DateTime.model_validate(STRING_FORM).instant
    assert shipment.extra_fields == {"some_future_field": {"nested": True}}
    assert shipment.last_modified_at == dt.datetime(2026, 11, 1, 9, 15, 30, tzinfo=dt.UTC)
    dumped = shipment.model_dump(by_alias=True)
    assert "chargeableWeight" in dumped and "dangerousGoods" in dumped["goods"][0]
    assert "containerAddresses" in dumped["containers"][0]
    assert dumped["goods"][0]["hs_codes"][0] == {"id": 1, "goodId": 10, "hsCode": "8479"}


def test_populate_by_name_and_by_alias() -> None:
    assert Shipment(chargeable_weight=1.0).chargeable_weight == 1.0
    assert Shipment.model_validate({"chargeable_weight": 2.0}).chargeable_weight == 2.0
    assert Shipment(chargeable_weight=1.0).to_payload() == {
        "chargeableWeight": 1.0,
        "memos": [],
        "aes": [],
        "goods": [],
        "addresses": [],
        "events": [],
        "containers": [],
        "custom_fields": [],
    }


def test_base_shipment_nulls_and_absent_fields_are_fine() -> None:
    raw = {"id": 1, "goods": None, "employees": None, "shipment_closed": None, "dangerousGoods": None}
    base = Shipment.model_validate(raw)
    assert base.id == 1 and base.goods == [] and base.employees is None
    assert base.raw is raw and raw["goods"] is None
    good = m.Good.model_validate({"id": 1, "dangerousGoods": None, "subgoods": None})
    assert good.dangerous_goods == [] and good.subgoods == []
    assert Shipment.model_validate({}).id is None


def test_null_arrays_become_empty_or_stay_none_without_failing() -> None:
    raw = {"codes": None, "name": "Hamburg"}
    location = Location.model_validate(raw)
    assert location.codes == [] and location.name == "Hamburg" and raw["codes"] is None and location.problems == []
    leg = CarriageLeg.model_validate({"mot": "ANY", "origin": {"location": raw}, "destination": None})
    assert leg.origin is not None and leg.origin.location is not None and leg.origin.location.codes == []
    transport = m.Transport.model_validate({"carriage_legs": None})
    assert transport.carriage_legs == [] and transport.to_payload() == {"carriage_legs": []}
    # where null has a meaning of its own it stays null: an E-File read without cascade
    efile = EFile.model_validate({"id": 1, "references": None, "roles": None})
    assert efile.references is None and efile.roles is None and efile.problems == []


def test_unknown_event_code_kept_flagged_and_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="freight_pipeline.client"):
        one = ShipmentEvent.model_validate({"event": "TELEPORTED", "type": "ACTUAL"})
        two = ShipmentEvent.model_validate({"event": "TELEPORTED", "type": "ESTIMATED"})
    assert one.event == two.event == "TELEPORTED" and not one.known
    assert ShipmentEvent.model_validate({"event": "PICKUP"}).known
    assert sum("TELEPORTED" in r.getMessage() for r in caplog.records) == 1


def test_criterion_coerces_values_and_rejects_bad_match_mode() -> None:
    c = Criterion(key="LAST_MODIFIED_DATE", match_mode="GE", value=dt.date(2026, 11, 1))
    assert c.to_payload() == {"key": "LAST_MODIFIED_DATE", "match_mode": "GE", "value": "2026-11-01"}
    assert Criterion(key="ID", match_mode="IN", values=[1, 2]).to_payload()["values"] == ["1", "2"]
    nested = Criterion(key="OR", match_mode="OR", identifiers=[Criterion(key="ID", value=1)])
    assert nested.to_payload()["identifiers"] == [{"key": "ID", "match_mode": "EQUALS", "value": "1"}]
    with pytest.raises(ValueError, match="match_mode"):
        Criterion(key="ID", match_mode="LIKE", value="1")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Criterion(key=" ", value="1")


def test_efile_round_trip_and_code_conversion() -> None:
    efile = EFile.from_bytes(
        b"%PDF-1.4",
        file_name="a.pdf",
        mime_type="application/pdf",
        references=[{"type": "SHIPMENT", "value": 4711}],
        roles=["OPS"],
    )
    payload = efile.to_payload()
    assert payload["references"] == [{"type": "SHIPMENT", "value": "4711"}]
    assert payload["roles"] == [{"role": "OPS"}]
    assert EFile.model_validate(payload).content() == b"%PDF-1.4"
    assert "document" not in repr(efile)
    conv = CodeConversion.model_validate({"id": 1, "partner": "P", "direction": "I", "payload": {"x": 1}})
    assert conv.extra_fields == {"payload": {"x": 1}}


# --- drift: lenient reading ---------------------------------------------------------------------


def test_numbers_where_strings_are_expected_are_read_as_text() -> None:
    shipment = Shipment.model_validate(
        {"id": 1, "client": 1, "shipment_number": 26000001, "total_gross_weight": "12.5"}
    )
    assert (shipment.client, shipment.shipment_number, shipment.total_gross_weight) == ("1", "26000001", 12.5)
    assert shipment.problems == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        *[("J", True), ("j", True), ("Y", True), ("true", True), ("TRUE", True), (True, True), (1, True)],
        *[("N", False), ("n", False), ("false", False), (False, False), (0, False), ("", None), (None, None)],
    ],
)
def test_boolean_fields_accept_j_n_y_and_true_false_texts(text: object, expected: bool | None) -> None:
    assert Shipment.model_validate({"shipment_closed": text}).shipment_closed is expected
    assert m.Insurance.model_validate({"waiver_customer": text}).waiver_customer is expected
    assert m.Container.model_validate({"shippers_own": text}).shippers_own is expected
    assert m.Good.model_validate({"colli": text, "additional_mark": text}).additional_mark is expected
    assert WebhookReceipt.model_validate({"received": text}).received is expected


def test_an_unreadable_boolean_is_a_problem_and_stays_raw() -> None:
    shipment = Shipment.model_validate({"id": 5, "shipment_closed": "maybe"})
    assert shipment.id == 5 and shipment.shipment_closed is None and shipment.raw["shipment_closed"] == "maybe"
    assert [(p.path, p.value) for p in shipment.problems] == [("shipment_closed", "maybe")]


def test_datetime_as_one_iso_string_gives_the_same_instant_as_both_object_forms() -> None:
    text = DateTime.model_validate("2026-11-01T10:15:30+01:00")
    assert text.instant == DateTime.model_validate(STRING_FORM).instant == DateTime.model_validate(OBJECT_FORM).instant
    assert (text.date, text.time, text.zone_offset) == ("2026-11-01", "10:15:30", "+01:00")
    event = ShipmentEvent.model_validate({"event": "PICKUP", "date_time": "2026-11-01T09:15:30Z"})
    assert event.instant == text.instant and event.raw["date_time"] == "2026-11-01T09:15:30Z"
    broken = ShipmentEvent.model_validate({"event": "PICKUP", "type": "ACTUAL", "date_time": "yesterday"})
    assert broken.date_time is None and broken.type == "ACTUAL"
    assert [p.path for p in broken.problems] == ["date_time"] and "yesterday" in broken.problems[0].message


def test_a_time_object_of_null_parts_is_no_time_not_midnight() -> None:
    for time_part in ({"hour": None, "minute": None, "second": None, "nano": None}, {}, {"minute": 30}):
        value = DateTime.model_validate({"date": "2026-11-01", "time": time_part, "zone_offset": "+01:00"})
        assert value.instant is None and value.parse_error is None and value.problems == []
        assert parse_time(time_part) is None
    assert parse_time({"hour": 7}) == dt.time(7, 0) and parse_time({"hour": 0, "minute": None}) == dt.time(0, 0)
    assert parse_time({"hour": 23, "minute": 59, "second": 58, "nano": 5_000_000}) == dt.time(23, 59, 58, 5000)
    parsed = parse_datetime_object({**STRING_FORM, "until": {"hour": None}})
    assert parsed is not None and parsed.until_time is None and parsed.until is None


def test_a_bare_iso_date_is_that_date_without_a_time_not_midnight() -> None:
    value = DateTime.model_validate("2026-11-20")
    assert (value.date, value.time, value.zone_offset) == ("2026-11-20", None, None)
    assert value.instant is None and value.parse_error is None and value.problems == []
    parsed = value.parsed
    assert parsed is not None and parsed.date == dt.date(2026, 11, 20) and parsed.time is None
    event = ShipmentEvent.model_validate({"event": "PICKUP", "type": "ESTIMATED", "date_time": "2026-11-20"})
    assert event.date_time is not None and event.date_time.time is None and event.problems == []


def test_null_items_inside_arrays_are_dropped_silently() -> None:
    raw = {"id": 1, "goods": [None, {"id": 10, "marks": ["M1", None], "subgoods": [None]}], "memos": [None]}
    shipment = Shipment.model_validate(raw)
    assert [g.id for g in shipment.goods] == [10] and shipment.goods[0].marks == ["M1"]
    assert shipment.goods[0].subgoods == [] and shipment.memos == [] and shipment.problems == []
    assert raw["goods"][0] is None  # the received dict is never changed
    refs = EFile.model_validate({"references": [None, {"type": "HBL", "value": "H1"}]}).references
    assert refs is not None and [(r.type, r.value) for r in refs] == [("HBL", "H1")]


def test_a_wrong_typed_container_becomes_its_default_and_a_problem() -> None:
    raw = {"id": 7, "client": "001", "employees": [], "insurance": "none", "goods": {"id": 1}, "events": "n/a"}
    shipment = Shipment.model_validate(raw)
    assert shipment.id == 7 and shipment.client == "001"
    assert (shipment.employees, shipment.insurance, shipment.goods, shipment.events) == (None, None, [], [])
    assert {p.path: p.value for p in shipment.problems} == {
        "employees": [],
        "insurance": "none",
        "goods": {"id": 1},
        "events": "n/a",
    }
    assert shipment.raw is raw and shipment.extra_fields == {}


def test_problems_of_nested_models_have_paths_with_indexes_as_received(caplog: pytest.LogCaptureFixture) -> None:
    raw = {
        "goods": [
            None,
            "not a good",
            {"id": 10, "weight": "heavy", "marks": ["M", {"x": 1}], "subgoods": [{"id": 11, "volume": "big"}]},
        ],
        "events": [{"event": "PICKUP", "date_time": {"date": "yesterday", "time": None, "zone_offset": None}}],
    }
    with caplog.at_level(logging.WARNING, logger="freight_pipeline.client"):
        shipment = Shipment.model_validate(raw)
        Shipment.model_validate(raw)  # the same drift again is not logged again
    assert [g.id for g in shipment.goods] == [10] and shipment.goods[0].subgoods[0].id == 11
    assert [p.path for p in shipment.problems] == [
        "goods[1]",
        "goods[2].marks[1]",
        "goods[2].weight",
        "goods[2].subgoods[0].volume",
        "events[0].date_time",
    ]
    assert all(isinstance(p, FieldProblem) for p in shipment.problems)
    assert shipment.problems[-1].value == raw["events"][0]["date_time"]
    logged = [r.getMessage() for r in caplog.records if "cannot be read" in r.getMessage()]
    assert len(logged) == len(set(logged)) and any("Good.weight" in text for text in logged)


def test_different_bad_values_of_one_field_are_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    events = [{"event": "PICKUP", "date_time": text} for text in ("yesterday", "next week", "soon")]
    with caplog.at_level(logging.WARNING, logger="freight_pipeline.client"):
        first = ShipmentEvent.model_validate(events[0])
        shipment = Shipment.model_validate({"id": 1, "events": events[1:]})
    assert "yesterday" in first.problems[0].message  # each record still says what it holds
    assert [p.value for p in shipment.problems] == ["next week", "soon"]
    logged = [r.getMessage() for r in caplog.records if "cannot be read" in r.getMessage()]
    assert len(logged) == 1 and "ShipmentEvent.date_time" in logged[0]


def test_criterion_is_strict_about_unknown_fields() -> None:
    with pytest.raises(ValueError, match="mode"):
        Criterion(key="ID", mode="GE", value="1")  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="identifier"):
        Criterion.model_validate({"key": "OR", "match_mode": "OR", "identifier": []})
    with pytest.raises(ValueError, match="vlaue"):
        Criterion.model_validate({"key": "OR", "match_mode": "OR", "identifiers": [{"key": "ID", "vlaue": "1"}]})
    assert Criterion.model_validate({"key": "ID", "value": 5}).to_payload() == {
        "key": "ID",
        "match_mode": "EQUALS",
        "value": "5",
    }
