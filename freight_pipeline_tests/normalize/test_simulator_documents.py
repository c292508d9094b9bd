"""Documents of the bundled simulator normalize without errors, and every field they carry is mapped."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from freight_pipeline.normalize.errors import NormalizationError
from freight_pipeline.normalize.events import normalize_events
from freight_pipeline.normalize.flatten import merge_rows, normalize_shipment, to_arrow_batch
from freight_pipeline.normalize.legs import normalize_main_carriage
from freight_pipeline.normalize.records import normalize_code_conversions, normalize_memos
from freight_pipeline.simulator.store import SimulatorStore

# Which source keys normalization reads, per object. A leaf is "x"; a nested object or array of
# objects maps to its own schema; "*" = kept whole (JSON column) or deliberately not read.
Schema = Mapping[str, Any]
LEAF = None
WHOLE = "*"

DATETIME: Schema = {"date": LEAF, "time": WHOLE, "zone_offset": WHOLE, "until": WHOLE}
LOCATION: Schema = {"codes": WHOLE, "name": LEAF, "latitude": LEAF, "longitude": LEAF}
LOCATION_DATETIME: Schema = {
    "location": LOCATION,
    "estimated_datetime": DATETIME,
    "actual_datetime": DATETIME,
    "revised_datetime": DATETIME,
    "estimated_datetime_until": WHOLE,
}
LEG: Schema = {
    **dict.fromkeys(
        (
            "leg_no",
            "mot",
            "flight_no",
            "airline_awb_code",
            "airline_name",
            "voyage_no",
            "imo_code",
            "vessel_name",
            "vessel_flag",
            "call_sign",
            "haulage_type",
            "haulage_reference",
        ),
        LEAF,
    ),
    "origin": LOCATION_DATETIME,
    "destination": LOCATION_DATETIME,
}
CONTACT: Schema = {"*": WHOLE}
GOOD: dict[str, Any] = {
    **dict.fromkeys(
        (
            "id",
            "client",
            "shipment_number",
            "identifier",
            "counter",
            "level",
            "level_number",
            "marks",
            "quantity",
            "packaging_matchcode",
            "commodity_matchcode",
            "description",
            "weight",
            "net_weight",
            "chargable_weight",
            "weight_unit",
            "volume",
            "volume_unit",
            "colli",
            "colli_number",
            "additional_mark",
            "container_number",
        ),
        LEAF,
    ),
    "hs_codes": {"id": LEAF, "goodId": LEAF, "hsCode": LEAF},
    "measurements": dict.fromkeys(
        (
            "id",
            "weight",
            "length",
            "width",
            "height",
            "quantity",
            "goods_id",
            "client",
            "shipment_number",
            "weight_unit",
            "volume_unit",
            "measurement_unit",
            "volume",
        ),
        LEAF,
    ),
    "customs": dict.fromkeys(
        (
            "id",
            "invoice_number",
            "invoice_date_time",
            "amount",
            "currency_matchcode",
            "delivery_note",
            "delivery_date_time",
        ),
        WHOLE,
    ),
    "mrns": {"id": LEAF, "mrn": LEAF},
    "dangerousGoods": {
        **dict.fromkeys(
            (
                "id",
                "dangerous_good_legislation",
                "classification_code",
                "un_number",
                "release",
                "label_1",
                "label_2",
                "label_3",
                "label_4",
                "site",
                "flashpoint",
                "flashpoint_unit",
                "ems_number_1",
                "ems_number_2",
                "mfag_number_1",
                "mfag_number_2",
                "remarks",
                "authorisation_number",
                "packaging_group",
                "technical_name_1",
                "technical_name_2",
                "causing_substance_1",
                "causing_substance_2",
                "issuer",
                "net_weight",
                "gross_weight",
                "weight_unit",
            ),
            LEAF,
        ),
        "contact": CONTACT,
    },
}
GOOD["subgoods"] = GOOD
ADDRESS_REFERENCE: Schema = {"id": LEAF, "matchcode": LEAF, "value": LEAF, "date_and_time": DATETIME}
SHIPMENT: Schema = {
    **dict.fromkeys(
        (
            "id",
            "client",
            "direction",
            "office",
            "shipment_number",
            "master_reference",
            "house_reference",
            "bl_type",
            "mode_of_transport",
            "month_of_service",
            "total_packages",
            "total_gross_weight",
            "self_pickup",
            "self_delivery",
            "terms_of_delivery_matchcode",
            "terms_of_delivery_name",
            "total_volume",
            "chargeableWeight",
            "original_shipment_number",
            "foreign_id",
            "movement_matchcode",
            "last_modified_date_time",
            "created_date_time",
            "order_date_time",
            "project_matchcode",
            "depot_matchcode",
            "shipment_closed",
            "booking_party_address_qualifier",
        ),
        LEAF,
    ),
    "events": WHOLE,  # from the events endpoint instead
    "memos": WHOLE,  # from the memo endpoints instead
    "employees": dict.fromkeys(
        (
            "closed_employee_matchcode",
            "last_modified_employee_matchcode",
            "created_employee_matchcode",
            "responsible_employee_matchcode",
        ),
        LEAF,
    ),
    "aes": dict.fromkeys(("id", "client", "mrn", "shipment_number", "running_number"), LEAF),
    "custom_fields": dict.fromkeys(("id", "client", "value", "shipment_number", "running_number"), LEAF),
    "goods": GOOD,
    "addresses": {
        **dict.fromkeys(
            (
                "qualifier",
                "address_type",
                "address_number",
                "street",
                "postal_code",
                "city",
                "state",
                "country_matchcode",
                "un_location_code",
            ),
            LEAF,
        ),
        "printed_address": dict.fromkeys(("line_1", "line_2", "line_3", "line_4", "line_5"), LEAF),
        "contact": CONTACT,
        "references": ADDRESS_REFERENCE,
    },
    "pre_carriage": {"carriage_legs": LEG},
    "main_carriage": {"carriage_legs": LEG},
    "post_carriage": {"carriage_legs": LEG},
    "insurance": {
        **dict.fromkeys(
            (
                "waiver_customer",
                "insurable_value",
                "insurable_value_currency_matchcode",
                "value_of_goods",
                "value_of_goods_currency_matchcode",
                "insurance_text",
                "transport_insurance",
                "insurance_type",
            ),
            LEAF,
        ),
        "insurer": {"address_type": LEAF, "address_number": LEAF},
    },
    "credit_data": dict.fromkeys(("lc_number", "latest_shipment_date", "lc_expiry"), LEAF),
    "customs_data": dict.fromkeys(("custom_clearance_date", "clearance", "book"), LEAF),
    "containers": {
        **dict.fromkeys(
            (
                "id",
                "good_id",
                "client",
                "shipment_number",
                "container_number",
                "seal_number1",
                "seal_number2",
                "seal_number3",
                "container_iso_code",
                "shippers_own",
            ),
            LEAF,
        ),
        "containerAddresses": {
            **dict.fromkeys(
                (
                    "id",
                    "qualifier",
                    "street",
                    "city",
                    "order",
                    "references",
                    "address_type",
                    "address_number",
                    "postal_code",
                    "country_matchcode",
                    "un_location_code",
                ),
                LEAF,
            ),
            "from_date_and_time": DATETIME,
            "to_date_and_time": DATETIME,
            "contact": CONTACT,
        },
    },
}
EVENT: Schema = {
    "event": LEAF,
    "type": LEAF,
    "shipment_id": WHOLE,
    "date_time": DATETIME,
    "location": LOCATION,
}


def unmapped_keys(value: Any, schema: Schema, path: str, found: set[str]) -> set[str]:
    """Key paths present in ``value`` that ``schema`` does not read (array indices as ``[]``)."""
    if isinstance(value, list):
        for item in value:
            unmapped_keys(item, schema, f"{path}[]", found)
        return found
    if not isinstance(value, dict) or "*" in schema:
        return found
    for key, item in value.items():
        if key not in schema:
            found.add(f"{path}.{key}" if path else key)
            continue
        sub = schema[key]
        if isinstance(sub, Mapping) and item is not None:
            unmapped_keys(item, sub, f"{path}.{key}" if path else key, found)
    return found


def test_schema_walker_flags_unknown_fields() -> None:
    doc = {"id": 1, "goods": [{"id": 2, "subgoods": [{"id": 3, "surprise": 1}]}], "new_top": 2}
    assert unmapped_keys(doc, SHIPMENT, "", set()) == {"goods[].subgoods[].surprise", "new_top"}


@pytest.fixture(scope="module")
def store() -> SimulatorStore:
    return SimulatorStore(shipments=300, seed=7)


def test_generated_documents_normalize_without_errors(store: SimulatorStore) -> None:
    ids = [int(row["ID"]) for row in store.reader.shipment_key_rows()]
    assert len(ids) >= 200
    errors: list[str] = []
    unmapped: set[str] = set()
    parts = []
    for shipment_id in ids:
        doc = store.reader.get_shipment(shipment_id)
        unmapped_keys(doc, SHIPMENT, "", unmapped)
        events = store.reader.get_events(shipment_id)
        unmapped_keys(events, EVENT, "events", unmapped)
        air = store.reader.get_air_main_carriage(shipment_id)
        sea = store.reader.get_sea_main_carriage(shipment_id)
        unmapped_keys(air, LEG, "airmaincarriage", unmapped)
        unmapped_keys(sea, LEG, "seamaincarriage", unmapped)
        try:
            parts.append(normalize_shipment(doc))
            parts.append(normalize_events(shipment_id, events))
            parts.append(normalize_main_carriage(shipment_id, air, kind="air"))
            parts.append(normalize_main_carriage(shipment_id, sea, kind="sea"))
        except NormalizationError as exc:
            errors.append(f"shipment {shipment_id}: {exc}")
    assert errors == []
    assert unmapped == set(), (
        f"fields of the generated documents that normalization does not read: {unmapped}"
    )
    key_of = {(d["client"], d["shipment_number"]): d["shipment_id"] for d in merge_rows(parts)["shipments"]}
    parts.append(normalize_memos(list(store.reader.memo_rows()), key_of))
    parts.append(normalize_code_conversions(list(store.reader.code_conversion_rows())))
    tables = to_arrow_batch(merge_rows(parts))
    assert tables["shipments"].num_rows == len(ids)
    assert tables["shipment_goods"].num_rows > 0
