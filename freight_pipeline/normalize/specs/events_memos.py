"""Shipment events, memo lines, export-system (AES) proposals and custom fields."""

from __future__ import annotations

from freight_pipeline.normalize.converters import BIGINT, INTEGER, VARCHAR
from freight_pipeline.normalize.groups import DateTimeGroup, LocationGroup
from freight_pipeline.normalize.nodes import TEXT, Key, Node
from freight_pipeline.normalize.plain_fields import Field, columns_of
from freight_pipeline.normalize.schema import Column, TableSpec
from freight_pipeline.normalize.specs.keys import (
    NOT_LOADED,
    POSITION,
    RECORD_ID,
    SCHEMA,
    SHIPMENT_ID,
    SHIPMENT_ID_NULLABLE,
    _key,
)

# --- events ----------------------------------------------------------------------------------------

EVENT_DATETIME = DateTimeGroup("event", "event date_time", until=True, source="date_time")
EVENT_LOCATION = LocationGroup("", "event location", source="location")
EVENT_CODE_KEY = Key("event", kinds=frozenset({TEXT}), unread=NOT_LOADED)
"""The event code (part of the key: an event without text here is not loaded)."""
EVENT_TYPE_KEY = Key("type", kinds=frozenset({TEXT}), unread=NOT_LOADED)
"""ESTIMATED or ACTUAL (part of the key, as the code)."""
EVENT_SHIPMENT_ID = "shipment_id"
"""An event's shipment id: the request's is stored; one naming another shipment refuses the answer."""
EVENT_NODE = Node.of((), EVENT_CODE_KEY, EVENT_TYPE_KEY, EVENT_DATETIME.key, EVENT_LOCATION.key,
                     known=(EVENT_SHIPMENT_ID,))
"""An event of ``GET /service/shipment/{id}/events``."""
SHIPMENT_EVENTS = TableSpec(
    SCHEMA,
    "shipment_events",
    columns_of(
        [
            SHIPMENT_ID,
            _key("event", VARCHAR, "event code (DISPATCH, PICKUP, ...; unknown codes kept as sent)"),
            _key("type", VARCHAR, "ESTIMATED or ACTUAL"),
        ],
        EVENT_DATETIME.columns(),
        EVENT_LOCATION.columns(),
        [
            Column(
                "source_duplicates",
                INTEGER,
                "earlier entries with the same (event, type) in the response, dropped",
            )
        ],
    ),
    ("shipment_id", "event", "type"),
    "Shipment events from GET /service/shipment/{id}/events, one per (event, type).",
)

# --- memos, AES, custom fields ---------------------------------------------------------------------

MEMO_FIELDS: tuple[Field, ...] = (
    Field("client", VARCHAR, "the client (tenant) of the shipment, as sent"),
    Field("shipment_number", VARCHAR, "shipment number, as sent; unique together with client"),
    Field("running_number", BIGINT, "line number of the memo within the shipment"),
    Field("memo", VARCHAR, "the memo text"),
)
SHIPMENT_MEMOS = TableSpec(
    SCHEMA,
    "shipment_memos",
    columns_of([_key("memo_id", BIGINT, "database id of the memo line"), SHIPMENT_ID_NULLABLE], MEMO_FIELDS),
    ("memo_id",),
    "Order memo lines; shipment_id resolved from (client, shipment_number) where the shipment is known.",
)
AES_FIELDS: tuple[Field, ...] = (
    Field("aes_id", BIGINT, "database id of the export-system proposal", "id"),
    Field("client", VARCHAR, "the client (tenant) of the shipment, as sent"),
    Field("mrn", VARCHAR, "movement reference number"),
    Field("shipment_number", VARCHAR, "shipment number, as sent; unique together with client"),
    Field("running_number", BIGINT, "proposal counter"),
)
SHIPMENT_AES = TableSpec(
    SCHEMA,
    "shipment_aes",
    columns_of([SHIPMENT_ID, POSITION], AES_FIELDS),
    ("shipment_id", "position"),
    "Export-system (AES) proposals of a shipment.",
)
CUSTOM_FIELD_FIELDS: tuple[Field, ...] = (
    Field("custom_field_id", BIGINT, "database id of the custom field", "id"),
    Field("client", VARCHAR, "the client (tenant) of the shipment, as sent"),
    Field("value", VARCHAR, "value of the custom field, as sent"),
    Field("shipment_number", VARCHAR, "shipment number, as sent; unique together with client"),
    Field("running_number", BIGINT, "running number of the custom field, as sent"),
)
SHIPMENT_CUSTOM_FIELDS = TableSpec(
    SCHEMA,
    "shipment_custom_fields",
    columns_of([SHIPMENT_ID, POSITION], CUSTOM_FIELD_FIELDS),
    ("shipment_id", "position"),
    "Customer-defined custom fields of a shipment.",
)

MEMO_NODE = Node.of(MEMO_FIELDS, RECORD_ID.unread_as(NOT_LOADED))
"""A memo line of the memo lookup."""
AES_KEY = Key("aes", Node.of(AES_FIELDS), array=True)
CUSTOM_FIELDS_KEY = Key("custom_fields", Node.of(CUSTOM_FIELD_FIELDS), array=True)
