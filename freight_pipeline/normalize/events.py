"""Shipment events from the events endpoint: one row per (event, type)."""

from __future__ import annotations

from typing import Any

from freight_pipeline.normalize.converters import Row, Rows, is_text
from freight_pipeline.normalize.errors import RecordShapeError, show
from freight_pipeline.normalize.plain_fields import as_items
from freight_pipeline.normalize.problems import Problems, sink
from freight_pipeline.normalize.records import require_list, require_shipment_id
from freight_pipeline.normalize.shapes import Shape
from freight_pipeline.normalize.specs.events_memos import (
    EVENT_CODE_KEY,
    EVENT_DATETIME,
    EVENT_LOCATION,
    EVENT_NODE,
    EVENT_SHIPMENT_ID,
    EVENT_TYPE_KEY,
    SHIPMENT_EVENTS,
)

EVENT_SHAPE = Shape("shipment events", EVENT_NODE)
"""An event at every level, as ``normalize_events`` reads it."""


def _code(value: Any) -> str | None:
    """Event code or type (part of the key): text as sent, trimmed; None when missing or not text.
    Unknown codes are kept: the dbt tests flag them."""
    if isinstance(value, str) and value.strip() and is_text(value):
        return value.strip()
    return None


def normalize_events(shipment_id: int, events: list[dict[str, Any]] | None, problems: Problems | None = None) -> Rows:
    """Rows of ``shipment_events`` for one shipment's ``GET .../events`` response.

    An answer that is not an array, or one with an event naming another shipment (an answer mixed up by a cache or
    a proxy), raises ``RecordShapeError``: the part is read again, its rows kept. An event without a usable code or
    type cannot be keyed: it is skipped and reported whole. A repeated (event, type) keeps the last
    entry; ``source_duplicates`` counts the earlier ones, and each is reported.
    """
    require_shipment_id(shipment_id)
    problems = sink(problems)
    by_key: dict[tuple[str, str], tuple[str, Any, Row]] = {}
    for _, path, event in as_items(require_list(events, "events"), "", problems):
        named = event.get(EVENT_SHIPMENT_ID)
        if named is not None and named != shipment_id and str(named).strip() != str(shipment_id):
            raise RecordShapeError(f"events: {path or '[?]'}.{EVENT_SHIPMENT_ID} {show(named)} is not the shipment "
                                   f"asked for ({shipment_id})")
        code, kind = _code(EVENT_CODE_KEY.of(event)), _code(EVENT_TYPE_KEY.of(event))
        if code is None or kind is None:
            which = EVENT_CODE_KEY if code is None else EVENT_TYPE_KEY
            reason = f"{which.name} {show(which.of(event))} is missing or not text: the event is not loaded"
            problems.add(path, event, reason)
            continue
        row: Row = {"shipment_id": shipment_id, "event": code, "type": kind, "source_duplicates": 0}
        EVENT_DATETIME.put_in(row, event, path, problems)
        EVENT_LOCATION.put_in(row, event, path, problems)
        previous = by_key.pop((code, kind), None)
        if previous is not None:
            earlier_path, earlier_event, earlier = previous
            row["source_duplicates"] = earlier["source_duplicates"] + 1
            reason = f"duplicate event ({code}, {kind}): the later one, {path}, is loaded"
            problems.add(earlier_path, earlier_event, reason)
        by_key[(code, kind)] = (path, event, row)
    return {SHIPMENT_EVENTS.name: [row for _, _, row in by_key.values()]}
