"""The goods tree: every goods line at every depth, and the arrays hanging off each line."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from freight_pipeline.normalize.converters import Row, Rows
from freight_pipeline.normalize.errors import show
from freight_pipeline.normalize.groups import loose_datetime
from freight_pipeline.normalize.plain_fields import compile_fields, copy_fields, items_of, string_lines
from freight_pipeline.normalize.problems import Problems
from freight_pipeline.normalize.specs.goods import (
    DANGEROUS_GOOD_CONTACT,
    DANGEROUS_GOOD_FIELDS,
    GOOD_CUSTOMS,
    GOOD_CUSTOMS_FIELDS,
    GOOD_DANGEROUS_GOODS,
    GOOD_DESCRIPTIONS,
    GOOD_FIELDS,
    GOOD_HS_CODES,
    GOOD_MARKS,
    GOOD_MEASUREMENTS,
    GOOD_MRNS,
    HS_CODE_FIELDS,
    MEASUREMENT_FIELDS,
    MRN_FIELDS,
    SHIPMENT_GOODS,
)

MAX_DEPTH = 32  # far beyond any real hierarchy; guards against pathological documents

_GOOD = compile_fields(GOOD_FIELDS)
_HS_CODE = compile_fields(HS_CODE_FIELDS)
_MEASUREMENT = compile_fields(MEASUREMENT_FIELDS)
_CUSTOMS = compile_fields(GOOD_CUSTOMS_FIELDS)
_MRN = compile_fields(MRN_FIELDS)
_DANGEROUS = compile_fields(DANGEROUS_GOOD_FIELDS)

# (source key, table, compiled fields) of the object arrays of a goods line
_OBJECT_CHILDREN = (
    ("hs_codes", GOOD_HS_CODES.name, _HS_CODE),
    ("measurements", GOOD_MEASUREMENTS.name, _MEASUREMENT),
    ("customs", GOOD_CUSTOMS.name, _CUSTOMS),
    ("mrns", GOOD_MRNS.name, _MRN),
    ("dangerousGoods", GOOD_DANGEROUS_GOODS.name, _DANGEROUS),
)
# (source key, table, column) of the string arrays of a goods line
_LINE_CHILDREN = (
    ("marks", GOOD_MARKS.name, "mark"),
    ("description", GOOD_DESCRIPTIONS.name, "description"),
)


def _add_child_objects(
    out: Rows, shipment_id: int, good_path: str, good: Mapping[str, Any], path: str, problems: Problems
) -> None:
    for key, table, fields in _OBJECT_CHILDREN:
        target = out[table]
        for position, item_path, item in items_of(good, key, f"{path}.{key}", problems):
            row: Row = {"shipment_id": shipment_id, "good_path": good_path, "position": position}
            copy_fields(row, item, fields, item_path, problems)
            if table == GOOD_CUSTOMS.name:
                row["invoice_date_time"], row["invoice_at"] = loose_datetime(
                    item.get("invoice_date_time"), f"{item_path}.invoice_date_time", problems
                )
                row["delivery_date_time"], row["delivery_at"] = loose_datetime(
                    item.get("delivery_date_time"), f"{item_path}.delivery_date_time", problems
                )
            elif table == GOOD_DANGEROUS_GOODS.name:
                DANGEROUS_GOOD_CONTACT.put(row, item.get("contact"), f"{item_path}.contact", problems)
            target.append(row)
    for key, table, column in _LINE_CHILDREN:
        if key not in good:
            continue
        target = out[table]
        for position, text in string_lines(good[key], f"{path}.{key}", problems):
            target.append(
                {"shipment_id": shipment_id, "good_path": good_path, "position": position, column: text}
            )


def add_goods(
    out: Rows,
    shipment_id: int,
    source: Mapping[str, Any],
    problems: Problems,
    key: str = "goods",
    path: str = "goods",
    parent_path: str | None = None,
    depth: int = 1,
) -> None:
    """Append rows for ``source[key]`` (and, recursively, their ``subgoods``) to ``out``."""
    if key not in source:
        return
    if depth > MAX_DEPTH:
        reason = f"goods nested deeper than {MAX_DEPTH} levels: not read (kept in the raw document)"
        problems.add(path, show(source[key], 200), reason)
        return
    target = out[SHIPMENT_GOODS.name]
    for position, good_src_path, good in items_of(source, key, path, problems):
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
        add_goods(out, shipment_id, good, problems, "subgoods", f"{good_src_path}.subgoods", good_path, depth + 1)
