"""Carriage legs: embedded in the shipment (pre/main/post) and from the air/sea main-carriage endpoints."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from freight_pipeline.normalize.converters import Row, Rows
from freight_pipeline.normalize.plain_fields import as_items, as_object, compile_fields, copy_fields
from freight_pipeline.normalize.problems import Problems, sink
from freight_pipeline.normalize.records import require_list, require_shipment_id
from freight_pipeline.normalize.shapes import Shape
from freight_pipeline.normalize.specs.legs import (
    AIR_LEG_FIELDS,
    AIR_LEG_NODE,
    AIR_MAIN_CARRIAGE_LEGS,
    CARRIAGE_LEGS,
    CARRIAGE_LEGS_KEY,
    CARRIAGES,
    HAULAGE_LEG_FIELDS,
    LEG_COMMON_FIELDS,
    LEG_ENDS,
    SEA_LEG_FIELDS,
    SEA_LEG_NODE,
    SEA_MAIN_CARRIAGE_LEGS,
)

_EMBEDDED = compile_fields(
    (*LEG_COMMON_FIELDS, *AIR_LEG_FIELDS, *SEA_LEG_FIELDS, *HAULAGE_LEG_FIELDS)
)
_AIR = compile_fields((*LEG_COMMON_FIELDS, *AIR_LEG_FIELDS))
_SEA = compile_fields((*LEG_COMMON_FIELDS, *SEA_LEG_FIELDS))

AIR_LEG_SHAPE = Shape("air main-carriage legs", AIR_LEG_NODE)
SEA_LEG_SHAPE = Shape("sea main-carriage legs", SEA_LEG_NODE)
"""A main-carriage leg at every level, as ``normalize_main_carriage`` reads it."""


def _put_leg_ends(row: Row, leg: Mapping[str, Any], path: str, problems: Problems) -> None:
    for end in LEG_ENDS:
        end_path = f"{path}.{end.key.name}"
        data = as_object(end.key.of(leg), end_path, problems)
        if not data:
            continue
        end.location.put_in(row, data, end_path, problems)
        start = end.estimated.put_in(row, data, end_path, problems)
        until = end.estimated_until
        end.estimated.put_until(row, start, until.of(data), f"{end_path}.{until.name}", problems)
        end.actual.put_in(row, data, end_path, problems)
        end.revised.put_in(row, data, end_path, problems)


def in_leg_order(rows: list[Row], position: str) -> list[Row]:
    """``rows`` (the legs of one array) in the order of their ``leg_no`` (the spec's "order of legs"; legs without
    one after them), ties in the array's order, with ``position`` renumbered 1.. in that order: the same legs sent
    in another order give the same rows, so their history shows no false revision."""
    rows.sort(key=lambda row: (row.get("leg_no") is None, row.get("leg_no") or 0, row[position]))
    for number, row in enumerate(rows, 1):
        row[position] = number
    return rows


def add_carriage_legs(out: Rows, shipment_id: int, doc: Mapping[str, Any], problems: Problems) -> None:
    target = out[CARRIAGE_LEGS.name]
    for carriage, key in CARRIAGES:
        transport = as_object(key.of(doc), key.name, problems)
        if not transport:
            continue
        legs_path = f"{key.name}.{CARRIAGE_LEGS_KEY.name}"
        legs: list[Row] = []
        for position, leg_path, leg in CARRIAGE_LEGS_KEY.items_in(transport, legs_path, problems):
            row: Row = {"shipment_id": shipment_id, "carriage": carriage, "leg_position": position}
            copy_fields(row, leg, _EMBEDDED, leg_path, problems)
            _put_leg_ends(row, leg, leg_path, problems)
            legs.append(row)
        target.extend(in_leg_order(legs, "leg_position"))


def normalize_main_carriage(
    shipment_id: int,
    legs: list[dict[str, Any]] | None,
    kind: Literal["air", "sea"] = "air",
    problems: Problems | None = None,
) -> Rows:
    """Rows of ``air_main_carriage_legs`` or ``sea_main_carriage_legs`` for one endpoint response.

    An answer that is not an array raises ``RecordShapeError`` (the record is quarantined, never
    guessed at); problems inside it go to ``problems`` (None: the first one raises).
    """
    if kind == "air":
        table, fields = AIR_MAIN_CARRIAGE_LEGS.name, _AIR
    elif kind == "sea":
        table, fields = SEA_MAIN_CARRIAGE_LEGS.name, _SEA
    else:
        raise ValueError(f"kind must be 'air' or 'sea', not {kind!r}")
    require_shipment_id(shipment_id)
    problems = sink(problems)
    rows: list[Row] = []
    for position, leg_path, leg in as_items(require_list(legs, f"{kind}maincarriage"), "", problems):
        row: Row = {"shipment_id": shipment_id, "position": position}
        copy_fields(row, leg, fields, leg_path, problems)
        _put_leg_ends(row, leg, leg_path, problems)
        rows.append(row)
    return {table: in_leg_order(rows, "position")}
