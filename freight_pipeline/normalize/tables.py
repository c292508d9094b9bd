"""Every table of the ``freight`` schema, declared once.

Each spec drives DuckDB DDL, Arrow schemas, Parquet output and the dbt docs. The source-to-column
mappings (:class:`Field` tuples and column groups) live here too and are reused by the flatteners,
so a column cannot be declared without its source or the other way round.

Naming conventions:

* snake_case source names are kept; camelCase sources become snake_case (``chargeableWeight`` ->
  ``chargeable_weight``, ``goodId`` -> ``good_id``, ``hsCode`` -> ``hs_code``); the goods field keeps
  the source spelling ``chargable_weight``. A record's own ``id`` becomes ``<entity>_id``
  (``shipment_id``, ``good_id``, ``container_id``, ``memo_id``, ...). SQL keyword ``order`` becomes
  ``address_order``.
* nested single objects are flattened with the object's name as prefix (``insurance_*``,
  ``credit_*``, ``customs_*``, ``contact_*``, ``printed_line_1..5``), without doubling a prefix the
  field already carries (``insurance_text``). Employee fields (``*_employee_matchcode``) are
  already unambiguous and kept as sent.
* DateTime objects -> ``<stem>_at`` (TIMESTAMPTZ, UTC) plus the raw parts ``<stem>_date`` (DATE),
  ``<stem>_time`` and ``<stem>_offset`` (VARCHAR), and ``<stem>_until`` / ``<stem>_until_time``
  where the source has ``until``.
* Locations -> ``<p>_location_name``, one column per code type (``<p>_service_code``, ``_unloc``,
  ``_iata``, ``_foreign_code``, ``_postal_code``, ``_un_country``; first code of that type),
  ``<p>_latitude`` / ``<p>_longitude`` and every code as JSON in ``<p>_location_codes``.
* Positions (``position``, ``leg_position``, ``*_position``) are 1-based array positions as sent;
  ``good_path`` is the dotted path of positions through ``goods`` / ``subgoods``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from freight_pipeline.normalize.documents import SHIPMENT_DOCUMENTS
from freight_pipeline.normalize.fields import (
    BIGINT,
    BOOLEAN,
    DATE,
    DOUBLE,
    INTEGER,
    JSON,
    TIMESTAMPTZ,
    VARCHAR,
    ContactGroup,
    DateTimeGroup,
    Field,
    LocationGroup,
    columns_of,
)
from freight_pipeline.normalize.schema import Column, TableSpec

SCHEMA = "freight"


def _key(name: str, type_: str, description: str) -> Column:
    return Column(name, type_, description, nullable=False)


SHIPMENT_ID = _key("shipment_id", BIGINT, "id of the shipment (the service's database id)")
SHIPMENT_ID_NULLABLE = Column("shipment_id", BIGINT, "id of the shipment; null when it could not be resolved")
POSITION = _key("position", INTEGER, "1-based position in the source array")
GOOD_PATH = _key("good_path", VARCHAR, "position path of the goods line: '1', '1.2', '1.2.1'")

# --- shipments -------------------------------------------------------------------------------------

SHIPMENT_FIELDS: tuple[Field, ...] = (
    Field("client", VARCHAR, "the client (tenant) of the shipment"),
    Field("direction", VARCHAR, "I (import) or E (export)"),
    Field("office", VARCHAR, "shipment office"),
    Field("shipment_number", VARCHAR, "shipment number; unique together with client"),
    Field("master_reference", VARCHAR, "master bill number"),
    Field("house_reference", VARCHAR, "house bill number"),
    Field("bl_type", VARCHAR),
    Field("mode_of_transport", VARCHAR, "SEA, AIR, RD or RL"),
    Field("month_of_service", VARCHAR, "month in which services are provided (billing, reporting)"),
    Field("total_packages", BIGINT),
    Field("total_gross_weight", DOUBLE),
    Field("self_pickup", VARCHAR, "whether the recipient collects the goods at warehouse or terminal"),
    Field("self_delivery", VARCHAR, "whether the sender delivers the goods to carrier or warehouse"),
    Field("terms_of_delivery_matchcode", VARCHAR),
    Field("terms_of_delivery_name", VARCHAR),
    Field("total_volume", DOUBLE, "cubic meters"),
    Field(
        "chargeable_weight",
        DOUBLE,
        "greater of actual and volumetric weight (source chargeableWeight)",
        "chargeableWeight",
    ),
    Field("original_shipment_number", VARCHAR),
    Field("foreign_id", VARCHAR, "shipment number used by a foreign system"),
    Field("movement_matchcode", VARCHAR),
    Field("project_matchcode", VARCHAR),
    Field("depot_matchcode", VARCHAR),
    Field("shipment_closed", BOOLEAN, "whether the shipment is done (lookup key SHIPMENT_CLOSED J/N)"),
    Field("booking_party_address_qualifier", VARCHAR),
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

# --- goods -----------------------------------------------------------------------------------------

GOOD_FIELDS: tuple[Field, ...] = (
    Field("good_id", BIGINT, "database id of the goods line", "id"),
    Field("client", VARCHAR),
    Field("shipment_number", VARCHAR),
    Field("identifier", VARCHAR),
    Field("counter", BIGINT, "numbers the goods description lines"),
    Field("level", BIGINT, "hierarchy level as sent by the service"),
    Field("level_number", BIGINT, "internal ordering number"),
    Field("quantity", BIGINT),
    Field("packaging_matchcode", VARCHAR),
    Field("commodity_matchcode", VARCHAR),
    Field("weight", DOUBLE, "gross weight"),
    Field("net_weight", DOUBLE),
    Field("chargable_weight", DOUBLE, "chargeable weight; column keeps the source spelling chargable_weight"),
    Field("weight_unit", VARCHAR),
    Field("volume", DOUBLE),
    Field("volume_unit", VARCHAR),
    Field("colli", BOOLEAN, "whether the line is a colli line"),
    Field("colli_number", BIGINT),
    Field("additional_mark", BOOLEAN),
    Field("container_number", VARCHAR),
)
SHIPMENT_GOODS = TableSpec(
    SCHEMA,
    "shipment_goods",
    columns_of(
        [
            SHIPMENT_ID,
            GOOD_PATH,
            Column("parent_good_path", VARCHAR, "good_path of the parent line; null at top level"),
            Column("depth", INTEGER, "1 for top-level goods, 2 for their subgoods, ..."),
            Column("position", INTEGER, "1-based position among its siblings"),
        ],
        GOOD_FIELDS,
    ),
    ("shipment_id", "good_path"),
    "Every goods line of a shipment at every depth of goods/subgoods.",
)
GOOD_KEY = (SHIPMENT_ID, GOOD_PATH, POSITION)
GOOD_KEY_NAMES = ("shipment_id", "good_path", "position")

HS_CODE_FIELDS: tuple[Field, ...] = (
    Field("hs_code_id", BIGINT, "database id of the HS code record", "id"),
    Field("good_id", BIGINT, "good id as sent (source goodId)", "goodId"),
    Field("hs_code", VARCHAR, "harmonized system code (source hsCode)", "hsCode"),
)
MEASUREMENT_FIELDS: tuple[Field, ...] = (
    Field("measurement_id", BIGINT, "database id of the measurement", "id"),
    Field("goods_id", BIGINT, "good id as sent (source goods_id)"),
    Field("client", VARCHAR),
    Field("shipment_number", VARCHAR),
    Field("quantity", BIGINT),
    Field("length", BIGINT),
    Field("width", BIGINT),
    Field("height", BIGINT),
    Field("measurement_unit", VARCHAR),
    Field("weight", DOUBLE),
    Field("weight_unit", VARCHAR),
    Field("volume", DOUBLE),
    Field("volume_unit", VARCHAR),
)
GOOD_CUSTOMS_FIELDS: tuple[Field, ...] = (
    Field("customs_id", BIGINT, "database id of the customs record", "id"),
    Field("invoice_number", VARCHAR),
    Field("amount", DOUBLE),
    Field("currency_matchcode", VARCHAR),
    Field("delivery_note", VARCHAR),
)
GOOD_CUSTOMS_DATETIMES: tuple[Column, ...] = (
    Column("invoice_date_time", VARCHAR, "invoice date-time as sent (format not specified)"),
    Column("invoice_at", TIMESTAMPTZ, "invoice_date_time as UTC instant when it is ISO 8601 with offset"),
    Column("delivery_date_time", VARCHAR, "delivery date-time as sent (format not specified)"),
    Column("delivery_at", TIMESTAMPTZ, "delivery_date_time as UTC instant when it is ISO 8601 with offset"),
)
MRN_FIELDS: tuple[Field, ...] = (
    Field("mrn_id", BIGINT, "database id of the MRN record", "id"),
    Field("mrn", VARCHAR, "movement reference number"),
)
DANGEROUS_GOOD_FIELDS: tuple[Field, ...] = (
    Field("dangerous_good_id", BIGINT, "database id of the dangerous goods record", "id"),
    Field("dangerous_good_legislation", VARCHAR, "IMDG, ADR or RID"),
    Field("classification_code", VARCHAR),
    Field("un_number", VARCHAR),
    Field("release", VARCHAR),
    *(Field(f"label_{i}", VARCHAR) for i in range(1, 5)),
    Field("site", VARCHAR),
    Field("flashpoint", VARCHAR),
    Field("flashpoint_unit", VARCHAR, "C or F"),
    Field("ems_number_1", VARCHAR),
    Field("ems_number_2", VARCHAR),
    Field("mfag_number_1", VARCHAR),
    Field("mfag_number_2", VARCHAR),
    Field("remarks", JSON, "remark lines as a JSON array of strings"),
    Field("authorisation_number", VARCHAR),
    Field("packaging_group", VARCHAR),
    Field("technical_name_1", VARCHAR),
    Field("technical_name_2", VARCHAR),
    Field("causing_substance_1", VARCHAR),
    Field("causing_substance_2", VARCHAR),
    Field("issuer", VARCHAR),
    Field("net_weight", DOUBLE),
    Field("gross_weight", DOUBLE),
    Field("weight_unit", VARCHAR),
)
DANGEROUS_GOOD_CONTACT = ContactGroup("contact")


def _good_child(name: str, description: str, *parts: Iterable[Column] | Iterable[Field]) -> TableSpec:
    return TableSpec(SCHEMA, name, columns_of(GOOD_KEY, *parts), GOOD_KEY_NAMES, description)


GOOD_HS_CODES = _good_child("good_hs_codes", "HS codes of a goods line (hs_codes).", HS_CODE_FIELDS)
GOOD_MEASUREMENTS = _good_child("good_measurements", "Measurements of a goods line.", MEASUREMENT_FIELDS)
GOOD_CUSTOMS = _good_child(
    "good_customs", "Customs invoice records of a goods line.", GOOD_CUSTOMS_FIELDS, GOOD_CUSTOMS_DATETIMES
)
GOOD_MRNS = _good_child("good_mrns", "Movement reference numbers of a goods line.", MRN_FIELDS)
GOOD_DANGEROUS_GOODS = _good_child(
    "good_dangerous_goods",
    "Dangerous goods records of a goods line (dangerousGoods), contact flattened.",
    DANGEROUS_GOOD_FIELDS,
    DANGEROUS_GOOD_CONTACT.columns(),
)
GOOD_MARKS = _good_child(
    "good_marks", "Marks of a goods line, one row per line.", [Column("mark", VARCHAR, "one mark line")]
)
GOOD_DESCRIPTIONS = _good_child(
    "good_descriptions",
    "Description of a goods line, one row per line.",
    [Column("description", VARCHAR, "one description line")],
)

# --- addresses -------------------------------------------------------------------------------------

ADDRESS_FIELDS: tuple[Field, ...] = (
    Field("qualifier", VARCHAR, "role of the address: AGT, CAR, CNE, CUS, SHP, ... (spelling as sent)"),
    Field("address_type", VARCHAR),
    Field("address_number", BIGINT),
    Field("street", VARCHAR),
    Field("postal_code", VARCHAR),
    Field("city", VARCHAR),
    Field("state", VARCHAR),
    Field("country_matchcode", VARCHAR),
    Field("un_location_code", VARCHAR),
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
    Field("client", VARCHAR),
    Field("shipment_number", VARCHAR),
    Field("container_number", VARCHAR),
    Field("seal_number1", VARCHAR),
    Field("seal_number2", VARCHAR),
    Field("seal_number3", VARCHAR),
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
    Field(
        "qualifier", VARCHAR, "DELIVERER, PICKUP, REDILIVERY (fixed, spelling as sent) or a free qualifier"
    ),
    Field("address_order", BIGINT, "sequence of the address (source field order)", "order"),
    Field("address_type", VARCHAR),
    Field("address_number", BIGINT),
    Field("street", VARCHAR),
    Field("postal_code", VARCHAR),
    Field("city", VARCHAR),
    Field("country_matchcode", VARCHAR),
    Field("un_location_code", VARCHAR),
    Field("references_json", JSON, "references of the container address as sent (JSON array)", "references"),
)
APPOINTMENT_FROM = DateTimeGroup(
    "appointment_from", "appointment start (from_date_and_time)", source="from_date_and_time"
)
APPOINTMENT_TO = DateTimeGroup(
    "appointment_to", "appointment end (to_date_and_time)", source="to_date_and_time"
)
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

# --- carriage legs ---------------------------------------------------------------------------------

LEG_COMMON_FIELDS: tuple[Field, ...] = (
    Field("leg_no", BIGINT, "order of the leg as sent"),
    Field("mot", VARCHAR, "leg kind (mode of transport) discriminator: SEA, ANY, ..."),
)
AIR_LEG_FIELDS: tuple[Field, ...] = (
    Field("flight_no", VARCHAR),
    Field("airline_awb_code", VARCHAR, "airline prefix of the air waybill"),
    Field("airline_name", VARCHAR),
)
SEA_LEG_FIELDS: tuple[Field, ...] = (
    Field("voyage_no", VARCHAR),
    Field("imo_code", VARCHAR, "IMO number of the vessel"),
    Field("vessel_name", VARCHAR),
    Field("vessel_flag", VARCHAR),
    Field("call_sign", VARCHAR),
)
HAULAGE_LEG_FIELDS: tuple[Field, ...] = (
    Field("haulage_type", VARCHAR, "road/other legs of pre- and post-carriage"),
    Field("haulage_reference", VARCHAR),
)


class LegEnd:
    """Column groups of one end (origin or destination) of a leg (a LocationDateTime)."""

    def __init__(self, end: str) -> None:
        self.end = end
        self.location = LocationGroup(end, end)
        self.estimated = DateTimeGroup(f"{end}_estimated", f"{end} estimated", until=True)
        self.actual = DateTimeGroup(f"{end}_actual", f"{end} actual")
        self.revised = DateTimeGroup(f"{end}_revised", f"{end} revised")

    def columns(self) -> list[Column]:
        return [
            *self.location.columns(),
            *self.estimated.columns(),
            *self.actual.columns(),
            *self.revised.columns(),
        ]


LEG_ENDS = (LegEnd("origin"), LegEnd("destination"))
LEG_END_COLUMNS = [c for end in LEG_ENDS for c in end.columns()]

CARRIAGE_LEGS = TableSpec(
    SCHEMA,
    "carriage_legs",
    columns_of(
        [
            SHIPMENT_ID,
            _key("carriage", VARCHAR, "pre, main or post (the shipment's pre_/main_/post_carriage)"),
            _key("leg_position", INTEGER, "1-based position in carriage_legs"),
        ],
        LEG_COMMON_FIELDS,
        AIR_LEG_FIELDS,
        SEA_LEG_FIELDS,
        HAULAGE_LEG_FIELDS,
        LEG_END_COLUMNS,
    ),
    ("shipment_id", "carriage", "leg_position"),
    "Carriage legs embedded in the shipment document (pre-, main- and post-carriage).",
)
AIR_MAIN_CARRIAGE_LEGS = TableSpec(
    SCHEMA,
    "air_main_carriage_legs",
    columns_of([SHIPMENT_ID, POSITION], LEG_COMMON_FIELDS, AIR_LEG_FIELDS, LEG_END_COLUMNS),
    ("shipment_id", "position"),
    "Air main-carriage legs from GET /service/shipment/{id}/airmaincarriage.",
)
SEA_MAIN_CARRIAGE_LEGS = TableSpec(
    SCHEMA,
    "sea_main_carriage_legs",
    columns_of([SHIPMENT_ID, POSITION], LEG_COMMON_FIELDS, SEA_LEG_FIELDS, LEG_END_COLUMNS),
    ("shipment_id", "position"),
    "Sea main-carriage legs from GET /service/shipment/{id}/seamaincarriage.",
)

# --- events ----------------------------------------------------------------------------------------

EVENT_DATETIME = DateTimeGroup("event", "event date_time", until=True, source="date_time")
EVENT_LOCATION = LocationGroup("", "event location")
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
    Field("client", VARCHAR),
    Field("shipment_number", VARCHAR),
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
    Field("client", VARCHAR),
    Field("mrn", VARCHAR, "movement reference number"),
    Field("shipment_number", VARCHAR),
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
    Field("client", VARCHAR),
    Field("value", VARCHAR),
    Field("shipment_number", VARCHAR),
    Field("running_number", BIGINT),
)
SHIPMENT_CUSTOM_FIELDS = TableSpec(
    SCHEMA,
    "shipment_custom_fields",
    columns_of([SHIPMENT_ID, POSITION], CUSTOM_FIELD_FIELDS),
    ("shipment_id", "position"),
    "Customer-defined custom fields of a shipment.",
)

# --- code conversions ------------------------------------------------------------------------------

CODE_CONVERSION_FIELDS: tuple[Field, ...] = (
    Field("partner", VARCHAR, "EDI partner"),
    Field("direction", VARCHAR, "I inbound (partner code -> internal) or O outbound (internal -> partner)"),
    Field("code_table", VARCHAR),
    Field("code_type", VARCHAR),
    Field("source_code", VARCHAR),
    Field("target_code", VARCHAR),
    Field("description", VARCHAR),
    Field("valid_from", DATE),
    Field("last_modified_at", TIMESTAMPTZ, "last modification instant (UTC)", "last_modified_date_time"),
)
CODE_CONVERSIONS = TableSpec(
    SCHEMA,
    "code_conversions",
    columns_of(
        [_key("conversion_id", BIGINT, "database id of the conversion record")],
        CODE_CONVERSION_FIELDS,
        [Column("payload", JSON, "the whole record as sent, including fields not known here")],
    ),
    ("conversion_id",),
    "EDI code conversion records (partner code <-> internal code); the whole set, replaced each run.",
    replace_key=None,
)

# --- registry --------------------------------------------------------------------------------------

FREIGHT_TABLES: tuple[TableSpec, ...] = (
    SHIPMENTS,
    SHIPMENT_GOODS,
    GOOD_HS_CODES,
    GOOD_MEASUREMENTS,
    GOOD_CUSTOMS,
    GOOD_MRNS,
    GOOD_DANGEROUS_GOODS,
    GOOD_MARKS,
    GOOD_DESCRIPTIONS,
    SHIPMENT_ADDRESSES,
    ADDRESS_REFERENCES,
    SHIPMENT_CONTAINERS,
    CONTAINER_ADDRESSES,
    CARRIAGE_LEGS,
    AIR_MAIN_CARRIAGE_LEGS,
    SEA_MAIN_CARRIAGE_LEGS,
    SHIPMENT_EVENTS,
    SHIPMENT_MEMOS,
    SHIPMENT_AES,
    SHIPMENT_CUSTOM_FIELDS,
    SHIPMENT_DOCUMENTS,
    CODE_CONVERSIONS,
)
TABLES_BY_NAME: Mapping[str, TableSpec] = {t.name: t for t in FREIGHT_TABLES}

# Which tables each sync stream fills (and replaces per unit). The shipment document fills every
# table embedded in it; events, legs and memos come from their own endpoints. The document's own
# ``events`` and ``memos`` arrays are not normalized: each table has exactly one writing stream.
STREAM_TABLES: Mapping[str, tuple[str, ...]] = {
    "shipments": (
        "shipments",
        "shipment_goods",
        "good_hs_codes",
        "good_measurements",
        "good_customs",
        "good_mrns",
        "good_dangerous_goods",
        "good_marks",
        "good_descriptions",
        "shipment_addresses",
        "address_references",
        "shipment_containers",
        "container_addresses",
        "carriage_legs",
        "shipment_aes",
        "shipment_custom_fields",
    ),
    "shipment_events": ("shipment_events",),
    "air_main_carriage_legs": ("air_main_carriage_legs",),
    "sea_main_carriage_legs": ("sea_main_carriage_legs",),
    "shipment_memos": ("shipment_memos",),
    "documents": ("shipment_documents",),
    "code_conversions": ("code_conversions",),
}
TABLE_STREAM: Mapping[str, str] = {
    table: stream for stream, tables in STREAM_TABLES.items() for table in tables
}
