"""Records of the flat groups (shipment memo lines, EDI code conversions) and the checks every
endpoint answer passes before its records are read (a usable id, the promised array)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from freight_pipeline.normalize.converters import Row, Rows, json_or_report, text_or_none, to_int
from freight_pipeline.normalize.errors import Invalid, NormalizationError, RecordShapeError, show
from freight_pipeline.normalize.plain_fields import as_items, compile_fields, copy_fields, field_value
from freight_pipeline.normalize.problems import Problems, sink
from freight_pipeline.normalize.shapes import Shape
from freight_pipeline.normalize.specs.code_conversions import (
    CODE_CONVERSION_FIELDS,
    CODE_CONVERSION_NODE,
    CODE_CONVERSIONS,
)
from freight_pipeline.normalize.specs.events_memos import MEMO_FIELDS, MEMO_NODE, SHIPMENT_MEMOS
from freight_pipeline.normalize.specs.keys import RECORD_ID

_MEMO = compile_fields(MEMO_FIELDS)
_CODE_CONVERSION = compile_fields(CODE_CONVERSION_FIELDS)

MEMO_SHAPE = Shape("memo lines", MEMO_NODE)
CODE_CONVERSION_SHAPE = Shape("code conversions", CODE_CONVERSION_NODE)
"""The fields of a memo line and of a code conversion that their normalizers read (a code conversion's
other fields are kept whole in ``payload`` too)."""

MemoKey = tuple[str | None, str | None]


def record_id(record: Mapping[str, Any], path: str) -> int:
    """The required ``id`` of a record (NormalizationError when it is missing or not an integer)."""
    value = RECORD_ID.of(record)
    if value is None:
        raise NormalizationError(f"{path}.id: missing" if path else "id: missing")
    try:
        return to_int(value)
    except Invalid:
        raise NormalizationError(
            f"{path + '.' if path else ''}id: {show(value)} is not an integer id"
        ) from None


def memo_key(line: Mapping[str, Any]) -> MemoKey:
    """The client and shipment number a memo line names, as :func:`normalize_memos` files it by them: as their columns
    read them (under the first of their declared names holding a value; text), whitespace around either aside; None
    for one no column reads."""
    return _trimmed((text_or_none(field_value(line, "client", _MEMO)),
                     text_or_none(field_value(line, "shipment_number", _MEMO))))


def require_list(answer: Any, what: str) -> list[Any]:
    """An endpoint answer that must be an array (RecordShapeError otherwise; null is no items)."""
    if answer is None:
        return []
    if isinstance(answer, list):
        return answer
    kind = "an object" if isinstance(answer, dict) else type(answer).__name__
    keys = f" with keys {sorted(map(str, answer))[:5]}" if isinstance(answer, dict) else ""
    raise RecordShapeError(f"{what}: the answer is {kind}{keys}, not an array: {show(answer, 120)}")


def require_shipment_id(shipment_id: Any) -> int:
    if not isinstance(shipment_id, int) or isinstance(shipment_id, bool):
        raise NormalizationError(f"shipment_id: {shipment_id!r} is not an integer")
    return shipment_id


def keyed_items(
    records: Any, what: str, problems: Problems
) -> Iterable[tuple[str, int, Mapping[str, Any]]]:
    """(path, id, record) of each record of an array answer; a record without a usable id is skipped
    and reported whole (it cannot be keyed), a later record with the same id replaces an earlier one
    (reported too). The caller keeps the last row per id."""
    seen: dict[int, tuple[str, Mapping[str, Any]]] = {}
    for _, path, record in as_items(require_list(records, what), "", problems):
        try:
            key = record_id(record, path)
        except NormalizationError:
            value = RECORD_ID.of(record)
            why = "id missing" if value is None else f"id {show(value)} is not an integer"
            problems.add(path, record, f"{why}: the record cannot be keyed and is not loaded")
            continue
        if key in seen:
            earlier_path, earlier = seen[key]
            problems.add(earlier_path, earlier, f"id {key} repeated: the later record, {path}, is loaded")
        seen[key] = (path, record)
        yield path, key, record


def normalize_memos(
    memos: Iterable[Mapping[str, Any]] | None,
    shipment_id_by_key: Mapping[MemoKey, int] | None = None,
    problems: Problems | None = None,
) -> Rows:
    """Rows of ``shipment_memos``; ``shipment_id`` looked up by ``(client, shipment_number)`` (whitespace around
    either aside, as a fixed-width column pads it), else null and, when shipments were given, reported: a line
    their lookup answered that names none of them is never filed under a guess, nor left unattached unseen. When
    one shipment was asked for, a line that leaves out either field (optional, A20) and agrees with it on the other
    is that shipment's: the lookup answered it for that shipment's criteria.

    A repeated memo id keeps the last record.
    """
    problems = sink(problems)
    lookup = {_trimmed(key): shipment_id for key, shipment_id in (shipment_id_by_key or {}).items()}
    only, only_id = next(iter(lookup.items())) if len(lookup) == 1 else ((None, None), None)
    by_id: dict[int, Row] = {}
    for path, memo_id, memo in keyed_items(memos, "memos", problems):
        row: Row = {"memo_id": memo_id}
        copy_fields(row, memo, _MEMO, path, problems)
        key = _trimmed((row.get("client"), row.get("shipment_number")))
        row["shipment_id"] = lookup.get(key)
        if row["shipment_id"] is None and None in key and only_id is not None and all(
                said is None or said == asked for said, asked in zip(key, only, strict=True)):
            row["shipment_id"] = only_id
        if row["shipment_id"] is None and lookup:
            asked = ", ".join(f"{client!r}/{number!r}" for client, number in list(lookup)[:3])
            asked += ", ..." if len(lookup) > 3 else ""
            problems.add(path, {"client": key[0], "shipment_number": key[1]},
                         f"client/shipment_number {key[0]!r}/{key[1]!r} name no shipment asked for ({asked}): "
                         "the memo line is loaded with a null shipment_id")
        by_id[memo_id] = row
    return {SHIPMENT_MEMOS.name: list(by_id.values())}


def _trimmed(key: MemoKey) -> MemoKey:
    client, number = key
    return (client.strip() if client is not None else None, number.strip() if number is not None else None)


def normalize_code_conversion(record: Any, problems: Problems | None = None) -> Row:
    """The ``code_conversions`` row of one record: known fields (assumption A14) plus the whole record
    (``payload``). NormalizationError when it is not an object or has no usable id."""
    if not isinstance(record, Mapping):
        raise NormalizationError(f"record: {show(record)} is not an object")
    return _conversion_row(record, record_id(record, ""), "", sink(problems))


def normalize_code_conversions(records: Iterable[Mapping[str, Any]] | None, problems: Problems | None = None) -> Rows:
    """Rows of ``code_conversions``; a record without a usable id is reported, a repeated id keeps the last."""
    problems = sink(problems)
    by_id: dict[int, Row] = {}
    for path, conversion_id, record in keyed_items(records, "code_conversions", problems):
        by_id[conversion_id] = _conversion_row(record, conversion_id, path, problems)
    return {CODE_CONVERSIONS.name: list(by_id.values())}


def _conversion_row(record: Mapping[str, Any], conversion_id: int, path: str, problems: Problems) -> Row:
    row: Row = {"conversion_id": conversion_id}
    copy_fields(row, record, _CODE_CONVERSION, path, problems)
    row["payload"] = json_or_report(record, path, problems)
    return row
