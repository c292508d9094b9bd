"""Shipment events from the events endpoint: one row per (event, type)."""

from __future__ import annotations

import logging
from typing import Any

from freight_pipeline.normalize import tables as t
from freight_pipeline.normalize.errors import NormalizationError, show
from freight_pipeline.normalize.fields import Row, Rows, as_items

log = logging.getLogger(__name__)


def _code(value: Any, path: str) -> str:
    """Event code or type: required (it is part of the key); unknown codes are kept as sent."""
    if isinstance(value, str) and value.strip():
        return value.strip()
    raise NormalizationError(f"{path}: {show(value)} is missing or not a code")


def normalize_events(shipment_id: int, events: list[dict[str, Any]] | None) -> Rows:
    """Rows of ``shipment_events`` for one shipment's ``GET .../events`` response.

    A repeated (event, type) keeps the last entry; ``source_duplicates`` counts the dropped ones.
    """
    if not isinstance(shipment_id, int) or isinstance(shipment_id, bool):
        raise NormalizationError(f"shipment_id: {shipment_id!r} is not an integer")
    by_key: dict[tuple[str, str], Row] = {}
    for _, path, event in as_items(events, "events"):
        code = _code(event.get("event"), f"{path}.event")
        kind = _code(event.get("type"), f"{path}.type")
        row: Row = {"shipment_id": shipment_id, "event": code, "type": kind, "source_duplicates": 0}
        t.EVENT_DATETIME.put(row, event.get("date_time"), f"{path}.date_time")
        t.EVENT_LOCATION.put(row, event.get("location"), f"{path}.location")
        previous = by_key.pop((code, kind), None)
        if previous is not None:
            row["source_duplicates"] = previous["source_duplicates"] + 1
            log.warning(
                "shipment %s: duplicate event (%s, %s) in the source; keeping the last",
                shipment_id,
                code,
                kind,
            )
        by_key[(code, kind)] = row
    return {t.SHIPMENT_EVENTS.name: list(by_key.values())}
