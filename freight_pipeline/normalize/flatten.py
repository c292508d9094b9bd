"""Shipment documents to rows, and rows to Arrow: the entry points of normalization.

Everything here is a pure function of plain dicts (the service's JSON as received). Rows are dicts
keyed by column name; absent keys are null. ``to_arrow_batch`` turns a whole batch into one Arrow
table per warehouse table, built column-wise from the table specs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from freight_pipeline.datetimes import DateTimeParseError, format_offset, parse_iso_datetime
from freight_pipeline.normalize.addresses import add_addresses, add_containers
from freight_pipeline.normalize.converters import Row, Rows
from freight_pipeline.normalize.errors import NormalizationError, show
from freight_pipeline.normalize.goods import add_goods
from freight_pipeline.normalize.legs import add_carriage_legs
from freight_pipeline.normalize.nodes import Key
from freight_pipeline.normalize.plain_fields import as_object, compile_fields, copy_fields, field_value
from freight_pipeline.normalize.problems import Problems, sink
from freight_pipeline.normalize.records import record_id
from freight_pipeline.normalize.shapes import Shape
from freight_pipeline.normalize.specs.events_memos import (
    AES_FIELDS,
    AES_KEY,
    CUSTOM_FIELD_FIELDS,
    CUSTOM_FIELDS_KEY,
    SHIPMENT_AES,
    SHIPMENT_CUSTOM_FIELDS,
)
from freight_pipeline.normalize.specs.shipments import (
    CREDIT_FIELDS,
    CREDIT_KEY,
    CUSTOMS_FIELDS,
    CUSTOMS_KEY,
    DOCUMENT_NODE,
    EMPLOYEE_FIELDS,
    EMPLOYEES_KEY,
    INSURANCE_FIELDS,
    INSURANCE_KEY,
    INSURER_FIELDS,
    INSURER_KEY,
    SHIPMENT_FIELDS,
    SHIPMENT_TIMESTAMP_FIELDS,
    SHIPMENTS,
)
from freight_pipeline.normalize.tables import SHIPMENT_DOCUMENT_TABLES, TABLES_BY_NAME

_SHIPMENT = compile_fields((*SHIPMENT_FIELDS, *SHIPMENT_TIMESTAMP_FIELDS))
_EMPLOYEES = compile_fields(EMPLOYEE_FIELDS)
_INSURANCE = compile_fields(INSURANCE_FIELDS)
_INSURER = compile_fields(INSURER_FIELDS)
_CREDIT = compile_fields(CREDIT_FIELDS)
_CUSTOMS = compile_fields(CUSTOMS_FIELDS)
_AES = compile_fields(AES_FIELDS)
_CUSTOM_FIELDS = compile_fields(CUSTOM_FIELD_FIELDS)

DOCUMENT_SHAPE = Shape("shipment documents", DOCUMENT_NODE)
"""The shipment document at every level, as ``normalize_shipment`` reads it."""


def _put_object(
    row: Row, doc: Mapping[str, Any], key: Key, fields: Any, path: str, problems: Problems
) -> Mapping[str, Any] | None:
    obj = as_object(key.of(doc), path, problems)
    if obj:
        copy_fields(row, obj, fields, path, problems)
    return obj


LAST_MODIFIED = "last_modified_date_time"
"""The field a shipment's version and the sync's cursor are read from."""


def document_value(doc: Mapping[str, Any], key: str) -> Any:
    """The value of a shipment document's (or a lookup row's) field ``key`` as its column reads it: under the first
    of the field's names that holds one (an alias the mapping gives a renamed field), so that what the sync decides
    by (the cursor, the legs' mode, the memo lookup's client and number) follows the same rename the columns do."""
    return field_value(doc, key, _SHIPMENT)


def _put_local_clock(row: Row, value: Any) -> None:
    """The service-local date/time parts of last_modified_date_time (the sync cursor compares these).

    An unreadable value is reported once, by the ``last_modified_at`` field; its parts stay null.
    """
    if not isinstance(value, str):
        return
    try:
        local = parse_iso_datetime(value)
    except DateTimeParseError:
        return
    if local is None:
        return
    row["last_modified_date"] = local.date().isoformat()
    row["last_modified_time"] = local.time().replace(microsecond=0).isoformat()
    offset = local.utcoffset()
    if offset is not None:
        row["last_modified_offset"] = format_offset(offset)


def _add_simple_children(
    out: Rows, table: str, shipment_id: int, doc: Mapping[str, Any], key: Key, fields: Any, problems: Problems
) -> None:
    target = out[table]
    for position, path, item in key.items_in(doc, key.name, problems):
        target.append(copy_fields({"shipment_id": shipment_id, "position": position}, item, fields, path, problems))


def normalize_shipment(doc: Mapping[str, Any], problems: Problems | None = None) -> Rows:
    """Rows of ``shipments`` and every table embedded in the shipment document.

    The result has a key for every table the shipment document fills (``SHIPMENT_DOCUMENT_TABLES``), with an
    empty list where the document has no rows: the caller replaces all of them for this shipment.
    The document's ``events`` and ``memos`` arrays are not used (their tables come from their own
    endpoints). Raises :class:`NormalizationError` only for a document that is not an object or has
    no usable ``id``; every value that cannot be converted is null in its column and one entry in
    ``problems`` (None: a strict sink, whose first problem raises ``NormalizationError``).
    """
    if not isinstance(doc, Mapping):
        raise NormalizationError(f"document: {show(doc)} is not an object")
    shipment_id = record_id(doc, "")
    problems = sink(problems)
    out: Rows = {name: [] for name in SHIPMENT_DOCUMENT_TABLES}
    row: Row = {"shipment_id": shipment_id}
    copy_fields(row, doc, _SHIPMENT, "", problems)
    _put_local_clock(row, document_value(doc, LAST_MODIFIED))
    _put_object(row, doc, EMPLOYEES_KEY, _EMPLOYEES, EMPLOYEES_KEY.name, problems)
    insurance = _put_object(row, doc, INSURANCE_KEY, _INSURANCE, INSURANCE_KEY.name, problems)
    if insurance:
        _put_object(row, insurance, INSURER_KEY, _INSURER, f"{INSURANCE_KEY.name}.{INSURER_KEY.name}", problems)
    _put_object(row, doc, CREDIT_KEY, _CREDIT, CREDIT_KEY.name, problems)
    _put_object(row, doc, CUSTOMS_KEY, _CUSTOMS, CUSTOMS_KEY.name, problems)
    out[SHIPMENTS.name].append(row)

    add_goods(out, shipment_id, doc, problems)
    add_addresses(out, shipment_id, doc, problems)
    add_containers(out, shipment_id, doc, problems)
    add_carriage_legs(out, shipment_id, doc, problems)
    _add_simple_children(out, SHIPMENT_AES.name, shipment_id, doc, AES_KEY, _AES, problems)
    custom_fields = SHIPMENT_CUSTOM_FIELDS.name
    _add_simple_children(out, custom_fields, shipment_id, doc, CUSTOM_FIELDS_KEY, _CUSTOM_FIELDS, problems)
    return out


def merge_rows(parts: Sequence[Rows]) -> Rows:
    """Concatenate the rows of several normalized records table by table."""
    merged: Rows = {}
    for part in parts:
        for table, rows in part.items():
            merged.setdefault(table, []).extend(rows)
    return merged


def to_arrow_batch(rows_by_table: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, pa.Table]:
    """One Arrow table per table named in ``rows_by_table`` (empty list: empty table), typed by its spec.

    Audit columns are not included; the warehouse adds them.
    """
    tables: dict[str, pa.Table] = {}
    for name, rows in rows_by_table.items():
        spec = TABLES_BY_NAME.get(name)
        if spec is None:
            raise KeyError(f"unknown freight table {name!r}")
        tables[name] = spec.to_arrow(rows)
    return tables
