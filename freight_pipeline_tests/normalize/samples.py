"""Sample documents shaped as the spec describes them (both DateTime forms, camelCase fields, nesting)."""

from __future__ import annotations

import copy
from typing import Any

# One instant, 2026-11-01 09:15:30 UTC, in the two DateTime shapes of the spec.
DT_STRING_FORM: dict[str, Any] = {"date": "2026-11-01", "time": "10:15:30", "zone_offset": "+01:00"}
DT_OBJECT_FORM: dict[str, Any] = {
    "date": "2026-11-01",
    "time": {"hour": 10, "minute": 15, "second": 30, "nano": 0},
    "zone_offset": {"totalSeconds": 3600, "id": "+01:00", "rules": {"fixedOffset": True}},
}


def location(name: str, unloc: str, iata: str | None = None) -> dict[str, Any]:
    codes = [{"type": "SERVICE", "code": f"S-{unloc}"}, {"type": "UNLOC", "code": unloc}]
    if iata:
        codes.append({"type": "IATA", "code": iata})
    return {"codes": codes, "name": name, "latitude": 53.55, "longitude": "9.99"}


def good(good_id: int, subgoods: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "id": good_id,
        "client": "C1",
        "shipment_number": "SN-1",
        "identifier": f"G{good_id}",
        "counter": 1,
        "level": 1,
        "level_number": good_id,
        "marks": ["MARK A", "MARK B"],
        "quantity": "3",  # numeric string: coerced
        "packaging_matchcode": "PAL",
        "commodity_matchcode": "MACH",
        "description": ["line one", "line two"],
        "weight": 120.5,
        "net_weight": 100,
        "chargable_weight": 130.0,
        "weight_unit": "KG",
        "volume": 1.2,
        "volume_unit": "CBM",
        "colli": True,
        "colli_number": 2,
        "additional_mark": False,
        "container_number": "MSCU1234567",
        "hs_codes": [{"id": good_id * 10, "goodId": good_id, "hsCode": "847130"}],
        "measurements": [
            {
                "id": 1,
                "weight": 10.0,
                "length": 120,
                "width": 80,
                "height": 100,
                "quantity": 2,
                "goods_id": good_id,
                "client": "C1",
                "shipment_number": "SN-1",
                "weight_unit": "KG",
                "volume_unit": "CBM",
                "measurement_unit": "CM",
                "volume": 0.96,
            }
        ],
        "customs": [
            {
                "id": 5,
                "invoice_number": "INV-1",
                "invoice_date_time": "2026-10-30T08:00:00+01:00",
                "amount": "1500.50",
                "currency_matchcode": "EUR",
                "delivery_note": "DN-1",
                "delivery_date_time": "not a date",  # unknown format: kept as text
            }
        ],
        "mrns": [{"id": 7, "mrn": "26DE123456789012A1"}],
        "subgoods": subgoods,
        "dangerousGoods": [],
    }
    doc.update(extra)
    return doc


def dangerous_good() -> dict[str, Any]:
    return {
        "id": 99,
        "dangerous_good_legislation": "IMDG",
        "classification_code": "F1",
        "un_number": "1203",
        "release": "R",
        "label_1": "3",
        "label_2": None,
        "site": "S",
        "flashpoint": "-40",
        "flashpoint_unit": "C",
        "ems_number_1": "F-E",
        "remarks": ["keep cool", "no smoking"],
        "packaging_group": "II",
        "technical_name_1": "Gasoline",
        "net_weight": 80,
        "gross_weight": "95.5",
        "weight_unit": "KG",
        "contact": {
            "name": "Hazmat Desk",
            "phone_number": "+49 40 1",
            "fax_number": None,
            "email": "hz@x.test",
        },
    }


def leg(leg_no: int, mot: str = "SEA", dt_form: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "leg_no": leg_no,
        "mot": mot,
        "origin": {
            "location": location("Hamburg", "DEHAM", "HAM"),
            "estimated_datetime": dt_form or DT_STRING_FORM,
            "actual_datetime": None,
            "revised_datetime": {"date": "2026-11-02", "time": None, "zone_offset": None},
            "estimated_datetime_until": {"hour": 12, "minute": 0, "second": 0, "nano": 0},
        },
        "destination": {
            "location": location("Shanghai", "CNSHA"),
            "estimated_datetime": {"date": "2026-12-01", "time": "08:00:00", "zone_offset": "+08:00"},
        },
        "voyage_no": "V001",
        "imo_code": "9321483",
        "vessel_name": "EVER GIVEN",
        "vessel_flag": "PA",
        "call_sign": "H3RC",
        "flight_no": None,
    }


def shipment(shipment_id: int = 1001) -> dict[str, Any]:
    """A full shipment document exercising every nested structure of the spec."""
    return copy.deepcopy(
        {
            "id": shipment_id,
            "client": "C1",
            "direction": "E",
            "office": "HAM",
            "employees": {
                "closed_employee_matchcode": None,
                "last_modified_employee_matchcode": "jdoe",
                "created_employee_matchcode": "asmith",
                "responsible_employee_matchcode": "jdoe",
            },
            "memos": [
                {"id": 1, "client": "C1", "memo": "fragile", "shipment_number": "SN-1", "running_number": 1}
            ],
            "aes": [{"id": 3, "client": "C1", "mrn": "MRN1", "shipment_number": "SN-1", "running_number": 1}],
            "shipment_number": "SN-1",
            "master_reference": "MBL1",
            "house_reference": "HBL1",
            "bl_type": "OBL",
            "mode_of_transport": "SEA",
            "month_of_service": "2026-11",
            "total_packages": 4,
            "total_gross_weight": 361.5,
            "self_pickup": "N",
            "self_delivery": "N",
            "goods": [
                good(1, [good(11, [good(111)]), good(12)], dangerousGoods=[dangerous_good()]),
                good(2),
            ],
            "addresses": [
                {
                    "qualifier": "SHP",
                    "address_type": "K",
                    "address_number": 4711,
                    "printed_address": {"line_1": "ACME GmbH", "line_2": "Hafenstr. 1", "line_3": None},
                    "street": "Hafenstr. 1",
                    "postal_code": "20457",
                    "city": "Hamburg",
                    "state": None,
                    "country_matchcode": "DE",
                    "un_location_code": "DEHAM",
                    "contact": {"name": "Jane", "email": "jane@acme.test", "mobile": "+49 170"},
                    "references": [
                        {"id": 1, "matchcode": "PO", "value": "PO-77", "date_and_time": DT_OBJECT_FORM},
                        {"id": 2, "matchcode": "REF", "value": "R-1"},
                    ],
                },
                {"qualifier": "CNE", "address_type": "K", "address_number": 815},
            ],
            "pre_carriage": {"carriage_legs": [{"leg_no": 1, "mot": "ANY", "haulage_type": "TRUCK"}]},
            "main_carriage": {"carriage_legs": [leg(1), leg(2, dt_form=DT_OBJECT_FORM)]},
            "post_carriage": None,
            "events": [],
            "terms_of_delivery_matchcode": "FOB",
            "terms_of_delivery_name": "Free on board",
            "total_volume": 2.4,
            "chargeableWeight": 400,
            "original_shipment_number": None,
            "foreign_id": "EXT-1",
            "movement_matchcode": "FCL",
            "insurance": {
                "waiver_customer": False,
                "insurable_value": 10000,
                "insurable_value_currency_matchcode": "EUR",
                "value_of_goods": 9000.5,
                "value_of_goods_currency_matchcode": "EUR",
                "insurance_text": "all risks",
                "transport_insurance": True,
                "insurance_type": "A",
                "insurer": {"address_type": "G", "address_number": 12},
            },
            "credit_data": {"lc_number": "LC1", "latest_shipment_date": "2026-12-01", "lc_expiry": None},
            "customs_data": {"custom_clearance_date": "2026-11-03", "clearance": "EXP", "book": "B1"},
            "containers": [
                {
                    "id": 501,
                    "good_id": 1,
                    "client": "C1",
                    "shipment_number": "SN-1",
                    "container_number": "MSCU1234567",
                    "seal_number1": "S1",
                    "seal_number2": None,
                    "container_iso_code": "45G1",
                    "shippers_own": False,
                    "containerAddresses": [
                        {"qualifier": "DELIVERER", "city": "Hamburg", "order": 1},
                        {"qualifier": "PICKUP", "city": "Hamburg", "order": 2},
                        {"qualifier": "REDILIVERY", "order": 3},
                        {
                            "id": 9,
                            "qualifier": "WAREHOUSE",
                            "street": "Kai 5",
                            "city": "Bremen",
                            "order": 4,
                            "references": [{"id": 1, "matchcode": "X", "value": "Y"}],
                            "address_type": "D",
                            "address_number": 77,
                            "postal_code": "28195",
                            "country_matchcode": "DE",
                            "un_location_code": "DEBRE",
                            "from_date_and_time": DT_STRING_FORM,
                            "to_date_and_time": {
                                "date": "2026-11-01",
                                "time": "12:00:00",
                                "zone_offset": "+01:00",
                            },
                            "contact": {"name": "Gate", "phone_number": "+49 421 1"},
                        },
                    ],
                }
            ],
            "custom_fields": [
                {"id": 8, "client": "C1", "value": "blue", "shipment_number": "SN-1", "running_number": 1}
            ],
            "last_modified_date_time": "2026-11-01T10:15:30+01:00",
            "created_date_time": "2026-10-01T08:00:00+01:00",
            "order_date_time": None,
            "project_matchcode": "P1",
            "depot_matchcode": None,
            "shipment_closed": False,
            "booking_party_address_qualifier": "SHP",
            "someFutureField": {"ignored": True},
        }
    )


def events(shipment_id: int = 1001) -> list[dict[str, Any]]:
    return [
        {
            "event": "PICKUP",
            "type": "ESTIMATED",
            "shipment_id": shipment_id,
            "date_time": {**DT_STRING_FORM, "until": {"hour": 12, "minute": 30, "second": 0, "nano": 0}},
            "location": location("Hamburg", "DEHAM"),
        },
        {
            "event": "FINAL_DESTINATION",
            "type": "ACTUAL",
            "shipment_id": shipment_id,
            "date_time": {**DT_OBJECT_FORM, "until": "09:00:00"},  # until before start: next day
            "location": None,
        },
        {"event": "SOMETHING_NEW", "type": "ACTUAL", "shipment_id": shipment_id, "date_time": None},
    ]


def code_conversion(conversion_id: int) -> dict[str, Any]:
    return {
        "id": conversion_id,
        "partner": "EDI1",
        "direction": "I",
        "code_table": "PKG",
        "code_type": "PACKAGING",
        "source_code": "PX",
        "target_code": "PAL",
        "description": "pallet",
        "valid_from": "2026-01-01",
        "last_modified_date_time": "2026-10-01T08:00:00+01:00",
        "extra_field": "kept in payload",
    }


def document_rows(shipment_id: int, kinds: tuple[str, ...] = ("Commercial invoice", "Bill of lading")) -> list[dict]:
    """``shipment_documents`` rows of E-Files of ``kinds`` (descriptions) linked to ``shipment_id``."""
    from freight_pipeline.normalize.documents import document_row
    from freight_pipeline.normalize.problems import StrictProblems

    rows = []
    for n, kind in enumerate(kinds, start=1):
        efile = {"id": shipment_id * 100 + n, "file_name": f"{kind.lower().replace(' ', '_')}_{shipment_id}.pdf",
                 "mime_type": "application/pdf", "description": f"{kind} {shipment_id}",
                 "created_date_time": "2026-10-01T08:00:00+01:00"}
        references = [{"id": n, "type": "SHIPMENT", "value": str(shipment_id)}]
        rows.append(document_row(shipment_id, efile, references, [{"id": n, "role": "OPERATIONS"}],
                                 StrictProblems()))
    return rows
