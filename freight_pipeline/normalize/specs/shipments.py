"""The ``shipments`` table: scalars, employees, insurance, credit and customs data of a shipment."""

from __future__ import annotations

from freight_pipeline.normalize.converters import BIGINT, BOOLEAN, DATE, DOUBLE, TIMESTAMPTZ, VARCHAR
from freight_pipeline.normalize.nodes import Key, Node
from freight_pipeline.normalize.plain_fields import Field, columns_of
from freight_pipeline.normalize.schema import Column, TableSpec
from freight_pipeline.normalize.specs.events_memos import AES_KEY, CUSTOM_FIELDS_KEY
from freight_pipeline.normalize.specs.goods import GOODS_KEY
from freight_pipeline.normalize.specs.keys import QUARANTINED, RECORD_ID, SCHEMA, SHIPMENT_ID
from freight_pipeline.normalize.specs.legs import CARRIAGES
from freight_pipeline.normalize.specs.parties import ADDRESSES_KEY, CONTAINERS_KEY

SHIPMENT_FIELDS: tuple[Field, ...] = (
    Field("client", VARCHAR, "the client (tenant) of the shipment"),
    Field("direction", VARCHAR, "I (import) or E (export)"),
    Field("office", VARCHAR, "shipment office"),
    Field("shipment_number", VARCHAR, "shipment number; unique together with client"),
    Field("master_reference", VARCHAR, "master bill number", ("master_reference", "master_bill_number")),
    Field("house_reference", VARCHAR, "house bill number", ("house_reference", "house_bill_number")),
    Field("bl_type", VARCHAR, "bill of lading type, as sent"),
    Field("mode_of_transport", VARCHAR, "SEA, AIR, RD or RL"),
    Field("month_of_service", VARCHAR, "month in which services are provided (billing, reporting)"),
    Field("total_packages", BIGINT, "total number of packages of the shipment, as sent"),
    Field("total_gross_weight", DOUBLE, "total gross weight of the shipment, as sent (the service gives no unit)"),
    Field("self_pickup", VARCHAR, "whether the recipient collects the goods at warehouse or terminal"),
    Field("self_delivery", VARCHAR, "whether the sender delivers the goods to carrier or warehouse"),
    Field(
        "terms_of_delivery_matchcode",
        VARCHAR,
        "terms of delivery matchcode (the service's short code of the terms of delivery record)",
    ),
    Field("terms_of_delivery_name", VARCHAR, "name of the terms of delivery, as sent"),
    Field("total_volume", DOUBLE, "cubic meters"),
    Field(
        "chargeable_weight",
        DOUBLE,
        "greater of actual and volumetric weight (source chargeableWeight)",
        "chargeableWeight",
    ),
    Field("original_shipment_number", VARCHAR, "original shipment number, as sent"),
    Field("foreign_id", VARCHAR, "shipment number used by a foreign system"),
    Field("movement_matchcode", VARCHAR, "movement matchcode (the service's short code of the movement record)"),
    Field("project_matchcode", VARCHAR, "project matchcode (the service's short code of the project record)"),
    Field("depot_matchcode", VARCHAR, "depot matchcode (the service's short code of the depot record)"),
    Field("shipment_closed", BOOLEAN, "whether the shipment is done (lookup key SHIPMENT_CLOSED J/N)"),
    Field("booking_party_address_qualifier", VARCHAR, "address qualifier of the booking party, as sent"),
)
EMPLOYEE_FIELDS: tuple[Field, ...] = tuple(
    Field(
        f"{role}_employee_matchcode",
        VARCHAR,
        f"login name of the {label} employee (employees.{role}_employee_matchcode)",
    )
    for role, label in (
        ("closed", "closing"),
        ("last_modified", "last modifying"),
        ("created", "creating"),
        ("responsible", "responsible"),
    )
)
INSURANCE_FIELDS: tuple[Field, ...] = (
    Field("insurance_waiver_customer", BOOLEAN, "insurance.waiver_customer", "waiver_customer"),
    Field("insurance_insurable_value", DOUBLE, "insurance.insurable_value", "insurable_value"),
    Field(
        "insurance_insurable_value_currency_matchcode",
        VARCHAR,
        "insurance.insurable_value_currency_matchcode",
        "insurable_value_currency_matchcode",
    ),
    Field("insurance_value_of_goods", DOUBLE, "insurance.value_of_goods", "value_of_goods"),
    Field(
        "insurance_value_of_goods_currency_matchcode",
        VARCHAR,
        "insurance.value_of_goods_currency_matchcode",
        "value_of_goods_currency_matchcode",
    ),
    Field("insurance_text", VARCHAR, "insurance.insurance_text"),
    Field("insurance_transport_insurance", BOOLEAN, "insurance.transport_insurance", "transport_insurance"),
    Field("insurance_type", VARCHAR, "insurance.insurance_type"),
)
INSURER_FIELDS: tuple[Field, ...] = (
    Field("insurance_insurer_address_type", VARCHAR, "insurance.insurer.address_type", "address_type"),
    Field("insurance_insurer_address_number", BIGINT, "insurance.insurer.address_number", "address_number"),
)
CREDIT_FIELDS: tuple[Field, ...] = (
    Field("credit_lc_number", VARCHAR, "credit_data.lc_number (letter of credit number)", "lc_number"),
    Field("credit_latest_shipment_date", DATE, "credit_data.latest_shipment_date", "latest_shipment_date"),
    Field("credit_lc_expiry", DATE, "credit_data.lc_expiry", "lc_expiry"),
)
CUSTOMS_FIELDS: tuple[Field, ...] = (
    Field("customs_clearance_date", DATE, "customs_data.custom_clearance_date", "custom_clearance_date"),
    Field("customs_clearance", VARCHAR, "customs_data.clearance", "clearance"),
    Field("customs_book", VARCHAR, "customs_data.book", "book"),
)
SHIPMENT_TIMESTAMP_FIELDS: tuple[Field, ...] = (
    Field(
        "last_modified_at",
        TIMESTAMPTZ,
        "last modification instant (UTC) from last_modified_date_time",
        "last_modified_date_time",
    ),
    Field("created_at", TIMESTAMPTZ, "creation instant (UTC) from created_date_time", "created_date_time"),
    Field("ordered_at", TIMESTAMPTZ, "order instant (UTC) from order_date_time", "order_date_time"),
)
SHIPMENT_LOCAL_CLOCK: tuple[Column, ...] = (
    Column(
        "last_modified_date",
        VARCHAR,
        "service-local date part of last_modified_date_time, 'YYYY-MM-DD' (sync cursor)",
    ),
    Column(
        "last_modified_time",
        VARCHAR,
        "service-local time part of last_modified_date_time, 'HH:MM:SS' (sync cursor)",
    ),
    Column("last_modified_offset", VARCHAR, "UTC offset of last_modified_date_time as sent (+HH:MM)"),
)

SHIPMENTS = TableSpec(
    SCHEMA,
    "shipments",
    columns_of(
        [SHIPMENT_ID],
        SHIPMENT_FIELDS,
        SHIPMENT_TIMESTAMP_FIELDS,
        SHIPMENT_LOCAL_CLOCK,
        EMPLOYEE_FIELDS,
        INSURANCE_FIELDS,
        INSURER_FIELDS,
        CREDIT_FIELDS,
        CUSTOMS_FIELDS,
    ),
    ("shipment_id",),
    "One row per shipment, latest version: scalars, flattened employees, insurance, credit, customs.",
)

# --- the shipment document as the normalizer reads it (``normalize.nodes``) -----------------------

EMPLOYEES_KEY = Key("employees", Node.of(EMPLOYEE_FIELDS))
INSURER_KEY = Key("insurer", Node.of(INSURER_FIELDS))
INSURANCE_KEY = Key("insurance", Node.of(INSURANCE_FIELDS, INSURER_KEY))
CREDIT_KEY = Key("credit_data", Node.of(CREDIT_FIELDS))
CUSTOMS_KEY = Key("customs_data", Node.of(CUSTOMS_FIELDS))
DOCUMENT_NODE = Node.of(
    (*SHIPMENT_FIELDS, *SHIPMENT_TIMESTAMP_FIELDS),
    RECORD_ID.unread_as(QUARANTINED), EMPLOYEES_KEY, INSURANCE_KEY, CREDIT_KEY, CUSTOMS_KEY, GOODS_KEY, ADDRESSES_KEY,
    CONTAINERS_KEY,
    *(key for _, key in CARRIAGES), AES_KEY, CUSTOM_FIELDS_KEY,
    known=("events", "memos"),  # named by the spec; their tables come from their own endpoints
)
"""A shipment document (``GET /service/shipment/{id}``)."""
