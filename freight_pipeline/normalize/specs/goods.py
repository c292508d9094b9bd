"""``shipment_goods`` (every goods line at every depth) and the tables per goods line."""

from __future__ import annotations

from collections.abc import Iterable

from freight_pipeline.normalize.converters import BIGINT, BOOLEAN, DOUBLE, INTEGER, JSON, TIMESTAMPTZ, VARCHAR
from freight_pipeline.normalize.groups import ContactGroup, loose_datetime_key
from freight_pipeline.normalize.nodes import SAME, Key, Node
from freight_pipeline.normalize.plain_fields import Field, columns_of
from freight_pipeline.normalize.schema import Column, TableSpec
from freight_pipeline.normalize.specs.keys import GOOD_PATH, POSITION, SCHEMA, SHIPMENT_ID

GOOD_FIELDS: tuple[Field, ...] = (
    Field("good_id", BIGINT, "database id of the goods line", "id"),
    Field("client", VARCHAR, "the client (tenant) of the shipment, as sent"),
    Field("shipment_number", VARCHAR, "shipment number, as sent; unique together with client"),
    Field("identifier", VARCHAR, "identifier of the goods line, as sent"),
    Field("counter", BIGINT, "numbers the goods description lines"),
    Field("level", BIGINT, "hierarchy level as sent by the service"),
    Field("level_number", BIGINT, "internal ordering number"),
    Field("quantity", BIGINT, "quantity of the goods line, as sent"),
    Field("packaging_matchcode", VARCHAR, "packaging matchcode (the service's short code of the packaging record)"),
    Field("commodity_matchcode", VARCHAR, "commodity matchcode (the service's short code of the commodity record)"),
    Field("weight", DOUBLE, "gross weight"),
    Field("net_weight", DOUBLE, "net weight of the goods line, in weight_unit"),
    Field("chargable_weight", DOUBLE, "chargeable weight; column keeps the source spelling chargable_weight"),
    Field("weight_unit", VARCHAR, "unit of weight, net_weight and chargable_weight, as sent"),
    Field("volume", DOUBLE, "volume of the goods line, in volume_unit"),
    Field("volume_unit", VARCHAR, "unit of volume, as sent"),
    Field("colli", BOOLEAN, "whether the line is a colli line"),
    Field("colli_number", BIGINT, "colli number of the goods line, as sent"),
    Field("additional_mark", BOOLEAN, "additional mark flag of the goods line, as sent"),
    Field("container_number", VARCHAR, "container number of the goods line, as sent"),
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
    Field("client", VARCHAR, "the client (tenant) of the shipment, as sent"),
    Field("shipment_number", VARCHAR, "shipment number, as sent; unique together with client"),
    Field("quantity", BIGINT, "quantity of the measurement, as sent"),
    Field("length", BIGINT, "length, in measurement_unit"),
    Field("width", BIGINT, "width, in measurement_unit"),
    Field("height", BIGINT, "height, in measurement_unit"),
    Field("measurement_unit", VARCHAR, "unit of length, width and height, as sent"),
    Field("weight", DOUBLE, "weight of the measurement, in weight_unit"),
    Field("weight_unit", VARCHAR, "unit of weight, as sent"),
    Field("volume", DOUBLE, "volume of the measurement, in volume_unit"),
    Field("volume_unit", VARCHAR, "unit of volume, as sent"),
)
GOOD_CUSTOMS_FIELDS: tuple[Field, ...] = (
    Field("customs_id", BIGINT, "database id of the customs record", "id"),
    Field("invoice_number", VARCHAR, "invoice number"),
    Field("amount", DOUBLE, "amount of the customs record, in the currency of currency_matchcode"),
    Field(
        "currency_matchcode", VARCHAR, "currency matchcode of amount (the service's short code of the currency record)"
    ),
    Field("delivery_note", VARCHAR, "delivery note, as sent"),
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
    Field("classification_code", VARCHAR, "classification code of the dangerous good, as sent"),
    Field("un_number", VARCHAR, "UN number of the dangerous good"),
    Field("release", VARCHAR, "release, as sent"),
    *(Field(f"label_{i}", VARCHAR, f"label {i} of the dangerous good, as sent") for i in range(1, 5)),
    Field("site", VARCHAR, "site, as sent"),
    Field("flashpoint", VARCHAR, "flashpoint, in flashpoint_unit (text as sent)"),
    Field("flashpoint_unit", VARCHAR, "C or F"),
    Field("ems_number_1", VARCHAR, "first EmS (emergency schedule) number, as sent"),
    Field("ems_number_2", VARCHAR, "second EmS (emergency schedule) number, as sent"),
    Field("mfag_number_1", VARCHAR, "first MFAG (medical first aid guide) number, as sent"),
    Field("mfag_number_2", VARCHAR, "second MFAG (medical first aid guide) number, as sent"),
    Field("remarks", JSON, "remark lines as a JSON array of strings"),
    Field("authorisation_number", VARCHAR, "authorisation number, as sent"),
    Field("packaging_group", VARCHAR, "packaging group, as sent"),
    Field("technical_name_1", VARCHAR, "first technical name, as sent"),
    Field("technical_name_2", VARCHAR, "second technical name, as sent"),
    Field("causing_substance_1", VARCHAR, "first causing substance, as sent"),
    Field("causing_substance_2", VARCHAR, "second causing substance, as sent"),
    Field("issuer", VARCHAR, "issuer, as sent"),
    Field("net_weight", DOUBLE, "net weight of the dangerous good, in weight_unit"),
    Field("gross_weight", DOUBLE, "gross weight of the dangerous good, in weight_unit"),
    Field("weight_unit", VARCHAR, "unit of net_weight and gross_weight, as sent"),
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

# --- the objects a goods line holds, as the normalizer reads them (``normalize.nodes``) --------------

INVOICE_DATE_TIME_KEY = loose_datetime_key("invoice_date_time")
DELIVERY_DATE_TIME_KEY = loose_datetime_key("delivery_date_time")
HS_CODES_KEY = Key("hs_codes", Node.of(HS_CODE_FIELDS), array=True)
MEASUREMENTS_KEY = Key("measurements", Node.of(MEASUREMENT_FIELDS), array=True)
GOOD_CUSTOMS_KEY = Key(
    "customs", Node.of(GOOD_CUSTOMS_FIELDS, INVOICE_DATE_TIME_KEY, DELIVERY_DATE_TIME_KEY), array=True
)
MRNS_KEY = Key("mrns", Node.of(MRN_FIELDS), array=True)
DANGEROUS_GOODS_KEY = Key("dangerousGoods", Node.of(DANGEROUS_GOOD_FIELDS, DANGEROUS_GOOD_CONTACT.key), array=True)
MARKS_KEY = Key("marks", array=True)
"""Marks: an array of text lines."""
DESCRIPTION_KEY = Key("description", array=True)
"""The description: an array of text lines."""
SUBGOODS_KEY = Key("subgoods", SAME, array=True)
GOOD_NODE = Node.of(
    GOOD_FIELDS, HS_CODES_KEY, MEASUREMENTS_KEY, GOOD_CUSTOMS_KEY, MRNS_KEY, DANGEROUS_GOODS_KEY, MARKS_KEY,
    DESCRIPTION_KEY, SUBGOODS_KEY,
)
"""A goods line, at any depth."""
GOODS_KEY = Key("goods", GOOD_NODE, array=True)
