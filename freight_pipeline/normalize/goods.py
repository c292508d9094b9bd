"""The goods tree: every goods line at every depth, and the arrays hanging off each line."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from freight_pipeline.normalize.converters import Row, Rows
from freight_pipeline.normalize.groups import loose_datetime
from freight_pipeline.normalize.nodes import Key
from freight_pipeline.normalize.plain_fields import as_items, compile_fields, copy_fields, string_lines
from freight_pipeline.normalize.problems import Problems
from freight_pipeline.normalize.specs.goods import (
    DANGEROUS_GOOD_CONTACT,
    DANGEROUS_GOOD_FIELDS,
    DANGEROUS_GOODS_KEY,
    DELIVERY_DATE_TIME_KEY,
    DESCRIPTION_KEY,
    GOOD_CUSTOMS,
    GOOD_CUSTOMS_FIELDS,
    GOOD_CUSTOMS_KEY,
    GOOD_DANGEROUS_GOODS,
    GOOD_DESCRIPTIONS,
    GOOD_FIELDS,
    GOOD_HS_CODES,
    GOOD_MARKS,
    GOOD_MEASUREMENTS,
    GOOD_MRNS,
    GOODS_KEY,
    HS_CODE_FIELDS,
    HS_CODES_KEY,
    INVOICE_DATE_TIME_KEY,
    MARKS_KEY,
    MEASUREMENT_FIELDS,
    MEASUREMENTS_KEY,
    MRN_FIELDS,
    MRNS_KEY,
    SHIPMENT_GOODS,
    SUBGOODS_KEY,
)

_GOOD = compile_fields(GOOD_FIELDS)
_HS_CODE = compile_fields(HS_CODE_FIELDS)
_MEASUREMENT = compile_fields(MEASUREMENT_FIELDS)
_CUSTOMS = compile_fields(GOOD_CUSTOMS_FIELDS)
_MRN = compile_fields(MRN_FIELDS)
_DANGEROUS = compile_fields(DANGEROUS_GOOD_FIELDS)

# (key, table, compiled fields) of the object arrays of a goods line
_OBJECT_CHILDREN: tuple[tuple[Key, str, Any], ...] = (
    (HS_CODES_KEY, GOOD_HS_CODES.name, _HS_CODE),
    (MEASUREMENTS_KEY, GOOD_MEASUREMENTS.name, _MEASUREMENT),
    (GOOD_CUSTOMS_KEY, GOOD_CUSTOMS.name, _CUSTOMS),
    (MRNS_KEY, GOOD_MRNS.name, _MRN),
    (DANGEROUS_GOODS_KEY, GOOD_DANGEROUS_GOODS.name, _DANGEROUS),
)
# (key, table, column) of the string arrays of a goods line
_LINE_CHILDREN: tuple[tuple[Key, str, str], ...] = (
    (MARKS_KEY, GOOD_MARKS.name, "mark"),
    (DESCRIPTION_KEY, GOOD_DESCRIPTIONS.name, "description"),
)


def _add_child_objects(
    out: Rows, shipment_id: int, good_path: str, good: Mapping[str, Any], path: str, problems: Problems
) -> None:
    for key, table, fields in _OBJECT_CHILDREN:
        target = out[table]
        for position, item_path, item in key.items_in(good, f"{path}.{key.name}", problems):
            row: Row = {"shipment_id": shipment_id, "good_path": good_path, "position": position}
            copy_fields(row, item, fields, item_path, problems)
            if table == GOOD_CUSTOMS.name:
                row["invoice_date_time"], row["invoice_at"] = loose_datetime(
                    INVOICE_DATE_TIME_KEY.of(item), f"{item_path}.{INVOICE_DATE_TIME_KEY.name}", problems
                )
                row["delivery_date_time"], row["delivery_at"] = loose_datetime(
                    DELIVERY_DATE_TIME_KEY.of(item), f"{item_path}.{DELIVERY_DATE_TIME_KEY.name}", problems
                )
            elif table == GOOD_DANGEROUS_GOODS.name:
                DANGEROUS_GOOD_CONTACT.put_in(row, item, item_path, problems)
            target.append(row)
    for key, table, column in _LINE_CHILDREN:
        lines = key.of(good)
        if lines is None:
            continue
        target = out[table]
        for position, text in string_lines(lines, f"{path}.{key.name}", problems):
            target.append(
                {"shipment_id": shipment_id, "good_path": good_path, "position": position, column: text}
            )


def add_goods(out: Rows, shipment_id: int, source: Mapping[str, Any], problems: Problems) -> None:
    """Append rows for the goods of ``source`` and their ``subgoods`` at every depth to ``out``: each line, its
    child rows, then its subgoods, before the next line (a stack of the arrays being read, not recursion: the
    spec's ``subgoods`` have no depth limit, and a cap of 32 levels left the lines below it out of every table;
    only the JSON parser's own nesting limit bounds a document)."""
    target = out[SHIPMENT_GOODS.name]
    goods = GOODS_KEY.of(source)
    if goods is None:
        return
    reading: list[tuple[Iterator[tuple[int, str, Mapping[str, Any]]], str | None, int]] = [
        (iter(as_items(goods, GOODS_KEY.name, problems)), None, 1)]  # (its lines, the parent's good_path, depth)
    while reading:
        lines, parent_path, depth = reading[-1]
        line = next(lines, None)
        if line is None:
            reading.pop()
            continue
        position, good_src_path, good = line
        good_path = str(position) if parent_path is None else f"{parent_path}.{position}"
        row: Row = {
            "shipment_id": shipment_id,
            "good_path": good_path,
            "parent_good_path": parent_path,
            "depth": depth,
            "position": position,
        }
        copy_fields(row, good, _GOOD, good_src_path, problems)
        target.append(row)
        _add_child_objects(out, shipment_id, good_path, good, good_src_path, problems)
        subgoods = SUBGOODS_KEY.of(good)
        if subgoods is not None:
            path = f"{good_src_path}.{SUBGOODS_KEY.name}"
            reading.append((iter(as_items(subgoods, path, problems)), good_path, depth + 1))
