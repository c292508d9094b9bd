"""Carriage legs: embedded in the shipment (pre/main/post) and from the air/sea main-carriage endpoints."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from freight_pipeline.normalize.converters import Row, Rows
from freight_pipeline.normalize.plain_fields import as_items, as_object, compile_fields, copy_fields, items_of
from freight_pipeline.normalize.problems import Problems, sink
from freight_pipeline.normalize.records import require_list, require_shipment_id
from freight_pipeline.normalize.shapes import Shape
from freight_pipeline.normalize.specs.legs import (
    AIR_LEG_FIELDS,
    AIR_MAIN_CARRIAGE_LEGS,
    CARRIAGE_LEGS,
    HAULAGE_LEG_FIELDS,
    LEG_COMMON_FIELDS,
    LEG_ENDS,
    SEA_LEG_FIELDS,
    SEA_MAIN_CARRIAGE_LEGS,
)

CARRIAGES: tuple[tuple[str, str], ...] = (
    ("pre", "pre_carriage"),
    ("main", "main_carriage"),
    ("post", "post_carriage"),
)

_EMBEDDED = compile_fields(
    (*LEG_COMMON_FIELDS, *AIR_LEG_FIELDS, *SEA_LEG_FIELDS, *HAULAGE_LEG_FIELDS)
)
_AIR = compile_fields((*LEG_COMMON_FIELDS, *AIR_LEG_FIELDS))
_SEA = compile_fields((*LEG_COMMON_FIELDS, *SEA_LEG_FIELDS))

_ENDS = tuple(end.end for end in LEG_ENDS)
AIR_LEG_SHAPE = Shape.of("air main-carriage legs", (*LEG_COMMON_FIELDS, *AIR_LEG_FIELDS), *_ENDS)
SEA_LEG_SHAPE = Shape.of("sea main-carriage legs", (*LEG_COMMON_FIELDS, *SEA_LEG_FIELDS), *_ENDS)
"""The fields of a main-carriage leg that ``normalize_main_carriage`` reads."""


def _put_leg_ends(row: Row, leg: Mapping[str, Any], path: str, problems: Problems) -> None:
    for end in LEG_ENDS:
        end_path = f"{path}.{end.end}"
        data = as_object(leg.get(end.end), end_path, problems)
        if not data:
            continue
        end.location.put(row, data.get("location"), f"{end_path}.location", problems)
        start = end.estimated.put(row, data.get("estimated_datetime"), f"{end_path}.estimated_datetime", problems)
        end.estimated.put_until(
            row, start, data.get("estimated_datetime_until"), f"{end_path}.estimated_datetime_until", problems
        )
        end.actual.put(row, data.get("actual_datetime"), f"{end_path}.actual_datetime", problems)
        end.revised.put(row, data.get("revised_datetime"), f"{end_path}.revised_datetime", problems)


def add_carriage_legs(out: Rows, shipment_id: int, doc: Mapping[str, Any], problems: Problems) -> None:
    target = out[CARRIAGE_LEGS.name]
    for carriage, key in CARRIAGES:
        transport = as_object(doc.get(key), key, problems)
        if not transport:
            continue
        for position, leg_path, leg in items_of(transport, "carriage_legs", f"{key}.carriage_legs", problems):
            row: Row = {"shipment_id": shipment_id, "carriage": carriage, "leg_position": position}
            copy_fields(row, leg, _EMBEDDED, leg_path, problems)
            _put_leg_ends(row, leg, leg_path, problems)
            target.append(row)


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
    return {table: rows}
