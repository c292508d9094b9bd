"""EDI code conversion records (partner code <-> internal code)."""

from __future__ import annotations

from freight_pipeline.normalize.converters import BIGINT, DATE, JSON, TIMESTAMPTZ, VARCHAR
from freight_pipeline.normalize.nodes import Node
from freight_pipeline.normalize.plain_fields import Field, columns_of
from freight_pipeline.normalize.schema import Column, TableSpec
from freight_pipeline.normalize.specs.keys import QUARANTINED, RECORD_ID, SCHEMA, _key

CODE_CONVERSION_FIELDS: tuple[Field, ...] = (
    Field("partner", VARCHAR, "EDI partner"),
    Field("direction", VARCHAR, "I inbound (partner code -> internal) or O outbound (internal -> partner)"),
    Field("code_table", VARCHAR, "code table of the conversion"),
    Field("code_type", VARCHAR, "code type of the conversion"),
    Field("source_code", VARCHAR, "code converted from (as sent)"),
    Field("target_code", VARCHAR, "code converted to (as sent)"),
    Field("description", VARCHAR, "description of the conversion"),
    Field("valid_from", DATE, "date from which the conversion is valid"),
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
CODE_CONVERSION_NODE = Node.of(CODE_CONVERSION_FIELDS, RECORD_ID.unread_as(QUARANTINED))
"""A code conversion record (its other keys are kept whole in ``payload`` too)."""
