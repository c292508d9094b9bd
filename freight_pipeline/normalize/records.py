"""Records of the flat groups: shipment memo lines and EDI code conversions."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from freight_pipeline.normalize import tables as t
from freight_pipeline.normalize.errors import Invalid, NormalizationError, show
from freight_pipeline.normalize.fields import (
    Row,
    Rows,
    as_items,
    compile_fields,
    copy_fields,
    to_int,
    to_json,
)

_MEMO = compile_fields(t.MEMO_FIELDS)
_CODE_CONVERSION = compile_fields(t.CODE_CONVERSION_FIELDS)

MemoKey = tuple[str | None, str | None]


def record_id(record: Mapping[str, Any], path: str) -> int:
    """The required ``id`` of a record."""
    value = record.get("id")
    if value is None:
        raise NormalizationError(f"{path}.id: missing" if path else "id: missing")
    try:
        return to_int(value)
    except Invalid:
        raise NormalizationError(
            f"{path + '.' if path else ''}id: {show(value)} is not an integer id"
        ) from None


def normalize_memos(
    memos: Iterable[Mapping[str, Any]] | None, shipment_id_by_key: Mapping[MemoKey, int] | None = None
) -> Rows:
    """Rows of ``shipment_memos``; ``shipment_id`` looked up by ``(client, shipment_number)``, else null.

    A repeated memo id keeps the last record.
    """
    lookup = shipment_id_by_key or {}
    by_id: dict[int, Row] = {}
    for _, path, memo in as_items(list(memos) if memos is not None else None, "memos"):
        memo_id = record_id(memo, path)
        row: Row = {"memo_id": memo_id}
        copy_fields(row, memo, _MEMO, path)
        row["shipment_id"] = lookup.get((row.get("client"), row.get("shipment_number")))
        by_id[memo_id] = row
    return {t.SHIPMENT_MEMOS.name: list(by_id.values())}


def normalize_code_conversions(records: Iterable[Mapping[str, Any]] | None) -> Rows:
    """Rows of ``code_conversions``: known fields (assumption A14) plus the whole record (``payload``)."""
    by_id: dict[int, Row] = {}
    for _, path, record in as_items(list(records) if records is not None else None, "code_conversions"):
        conversion_id = record_id(record, path)
        row: Row = {"conversion_id": conversion_id}
        copy_fields(row, record, _CODE_CONVERSION, path)
        row["payload"] = to_json(record)
        by_id[conversion_id] = row
    return {t.CODE_CONVERSIONS.name: list(by_id.values())}
