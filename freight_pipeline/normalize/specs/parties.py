"""Addresses of a shipment (with their references) and its containers (with their addresses)."""

from __future__ import annotations

from freight_pipeline.normalize.converters import BIGINT, BOOLEAN, INTEGER, JSON, VARCHAR
from freight_pipeline.normalize.groups import ContactGroup, DateTimeGroup
from freight_pipeline.normalize.nodes import Key, Node
from freight_pipeline.normalize.plain_fields import Field, columns_of
from freight_pipeline.normalize.schema import TableSpec
from freight_pipeline.normalize.specs.keys import POSITION, SCHEMA, SHIPMENT_ID, _key

# --- addresses -------------------------------------------------------------------------------------

ADDRESS_FIELDS: tuple[Field, ...] = (
    Field("qualifier", VARCHAR, "role of the address: AGT, CAR, CNE, CUS, SHP, ... (spelling as sent)"),
    Field("address_type", VARCHAR, "address type, as sent"),
    Field("address_number", BIGINT, "address number, as sent"),
    Field("street", VARCHAR, "street of the address"),
    Field("postal_code", VARCHAR, "postal code of the address"),
    Field("city", VARCHAR, "city of the address"),
    Field("state", VARCHAR, "state of the address"),
    Field("country_matchcode", VARCHAR, "country matchcode (the service's short code of the country record)"),
    Field("un_location_code", VARCHAR, "UN/LOCODE of the address"),
)
PRINTED_ADDRESS_FIELDS: tuple[Field, ...] = tuple(
    Field(
        f"printed_line_{i}",
        VARCHAR,
        f"printed_address.line_{i}: the address as entered in the shipment",
        f"line_{i}",
    )
    for i in range(1, 6)
)
ADDRESS_CONTACT = ContactGroup("contact")
SHIPMENT_ADDRESSES = TableSpec(
    SCHEMA,
    "shipment_addresses",
    columns_of([SHIPMENT_ID, POSITION], ADDRESS_FIELDS, PRINTED_ADDRESS_FIELDS, ADDRESS_CONTACT.columns()),
    ("shipment_id", "position"),
    "Addresses of a shipment (parties by qualifier), printed address lines and contact flattened.",
)

REFERENCE_FIELDS: tuple[Field, ...] = (
    Field("reference_id", BIGINT, "database id of the reference", "id"),
    Field("matchcode", VARCHAR, "kind of reference"),
    Field("value", VARCHAR, "the reference value"),
)
REFERENCE_DATETIME = DateTimeGroup("reference", "reference date_and_time", source="date_and_time")
ADDRESS_REFERENCES = TableSpec(
    SCHEMA,
    "address_references",
    columns_of(
        [
            SHIPMENT_ID,
            _key("address_position", INTEGER, "position of the address in shipment_addresses"),
            POSITION,
        ],
        REFERENCE_FIELDS,
        REFERENCE_DATETIME.columns(),
    ),
    ("shipment_id", "address_position", "position"),
    "References attached to a shipment address.",
)

# --- containers ------------------------------------------------------------------------------------

CONTAINER_FIELDS: tuple[Field, ...] = (
    Field("container_id", BIGINT, "database id of the container", "id"),
    Field("good_id", BIGINT, "associated goods line (its good_id)"),
    Field("client", VARCHAR, "the client (tenant) of the shipment, as sent"),
    Field("shipment_number", VARCHAR, "shipment number, as sent; unique together with client"),
    Field("container_number", VARCHAR, "container number"),
    Field("seal_number1", VARCHAR, "first seal number"),
    Field("seal_number2", VARCHAR, "second seal number"),
    Field("seal_number3", VARCHAR, "third seal number"),
    Field("container_iso_code", VARCHAR, "container type and size (ISO code)"),
    Field("shippers_own", BOOLEAN, "container owned by the shipper"),
)
SHIPMENT_CONTAINERS = TableSpec(
    SCHEMA,
    "shipment_containers",
    columns_of([SHIPMENT_ID, POSITION], CONTAINER_FIELDS),
    ("shipment_id", "position"),
    "Containers of a shipment.",
)

CONTAINER_ADDRESS_FIELDS: tuple[Field, ...] = (
    Field(
        "address_id",
        BIGINT,
        "database id of a dynamic address; null for the fixed DELIVERER/PICKUP/REDILIVERY",
        "id",
    ),
    Field("qualifier", VARCHAR, "DELIVERER, PICKUP, REDILIVERY (fixed, spelling as sent) or a free qualifier"),
    Field("address_order", BIGINT, "sequence of the address (source field order)", "order"),
    Field("address_type", VARCHAR, "address type, as sent"),
    Field("address_number", BIGINT, "address number, as sent"),
    Field("street", VARCHAR, "street of the address"),
    Field("postal_code", VARCHAR, "postal code of the address"),
    Field("city", VARCHAR, "city of the address"),
    Field("country_matchcode", VARCHAR, "country matchcode (the service's short code of the country record)"),
    Field("un_location_code", VARCHAR, "UN/LOCODE of the address"),
    Field("references_json", JSON, "references of the container address as sent (JSON array)", "references"),
)
APPOINTMENT_FROM = DateTimeGroup(
    "appointment_from", "appointment start (from_date_and_time)", source="from_date_and_time"
)
APPOINTMENT_TO = DateTimeGroup("appointment_to", "appointment end (to_date_and_time)", source="to_date_and_time")
CONTAINER_CONTACT = ContactGroup("contact")
CONTAINER_ADDRESSES = TableSpec(
    SCHEMA,
    "container_addresses",
    columns_of(
        [
            SHIPMENT_ID,
            _key("container_position", INTEGER, "position of the container in shipment_containers"),
            POSITION,
        ],
        CONTAINER_ADDRESS_FIELDS,
        APPOINTMENT_FROM.columns(),
        APPOINTMENT_TO.columns(),
        CONTAINER_CONTACT.columns(),
    ),
    ("shipment_id", "container_position", "position"),
    "Addresses of a container (containerAddresses): fixed and dynamic, appointment, contact.",
)

# --- the objects of addresses and containers, as the normalizer reads them (``normalize.nodes``) ---

PRINTED_ADDRESS_KEY = Key("printed_address", Node.of(PRINTED_ADDRESS_FIELDS))
REFERENCES_KEY = Key("references", Node.of(REFERENCE_FIELDS, REFERENCE_DATETIME.key), array=True)
ADDRESS_NODE = Node.of(ADDRESS_FIELDS, PRINTED_ADDRESS_KEY, ADDRESS_CONTACT.key, REFERENCES_KEY)
ADDRESSES_KEY = Key("addresses", ADDRESS_NODE, array=True)
CONTAINER_ADDRESSES_KEY = Key(
    "containerAddresses",
    Node.of(CONTAINER_ADDRESS_FIELDS, APPOINTMENT_FROM.key, APPOINTMENT_TO.key, CONTAINER_CONTACT.key),
    array=True,
)
CONTAINER_NODE = Node.of(CONTAINER_FIELDS, CONTAINER_ADDRESSES_KEY)
CONTAINERS_KEY = Key("containers", CONTAINER_NODE, array=True)
