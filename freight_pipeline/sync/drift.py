"""Schema drift: after a stream's run, the fields its records carried compared with the table specs and
with what earlier runs received (``normalize.shapes.compare``), kept in ``freight_meta.source_fields``.

A change is reported by the run that meets it (its ``sync_runs.details`` ``extra.shape_changes``, its
result line) and stays in ``source_fields`` (``state`` new or vanished) for ``status`` and the Dagster
check ``no_shape_changes`` until it is resolved: a new field declared in a spec (or its alias), a
vanished field received again or its column fed under another name.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Mapping
from typing import Any

from freight_pipeline.normalize.documents import EFILE_SHAPE
from freight_pipeline.normalize.records import CODE_CONVERSION_SHAPE
from freight_pipeline.normalize.shapes import OPEN_STATES, FieldChange, FieldTally, KnownField, Shape, compare
from freight_pipeline.sync.code_conversions import STREAM as CODE_CONVERSIONS
from freight_pipeline.sync.documents import STREAM as DOCUMENTS
from freight_pipeline.sync.parts import PARTS
from freight_pipeline.warehouse.store import Warehouse

SOURCE_SHAPES: Mapping[str, Shape] = {**{part.stream: part.shape for part in PARTS},
                                      CODE_CONVERSIONS: CODE_CONVERSION_SHAPE, DOCUMENTS: EFILE_SHAPE}
"""Each source of records whose shape is watched, and the fields it declares."""


def note_shape(warehouse: Warehouse, run_id: str, tallies: Mapping[str, FieldTally],
               at: dt.datetime | None = None) -> list[FieldChange]:
    """Compare ``tallies`` (source -> the fields its records of this run carried) with the specs and the
    fields earlier runs received; record the state of every field the run changed in one transaction; this
    run's changes."""
    watched = {source: tally for source, tally in tallies.items() if source in SOURCE_SHAPES and tally.records}
    if not watched:
        return []
    at = at or dt.datetime.now(dt.UTC)
    known: dict[str, dict[str, KnownField]] = {}
    for row in warehouse.reads.source_fields(list(watched)):
        known.setdefault(row["stream"], {})[row["field"]] = _known(row)
    changes: list[FieldChange] = []
    rows: list[dict[str, Any]] = []
    for source, tally in watched.items():
        before = known.get(source, {})
        found, states = compare(source, SOURCE_SHAPES[source], tally, before, run_id, at)
        changes += found
        rows += [_row(state) for state in states if before.get(state.field) != state]
    warehouse.writes.record_source_fields(rows)
    return changes


def change_record(change: FieldChange) -> dict[str, Any]:
    """A change as kept in ``sync_runs.details`` (and shown by the run's result line)."""
    return {**dataclasses.asdict(change), "kinds_new": dict(change.kinds_new), "phrase": change.phrase()}


def open_changes(warehouse: Warehouse, streams: list[str] | None = None) -> list[dict[str, Any]]:
    """The fields that are new or vanished now (of ``streams``; None: all)."""
    return warehouse.reads.source_fields(streams, OPEN_STATES)


_KNOWN_FIELDS = tuple(f.name for f in dataclasses.fields(KnownField))


def _known(row: Mapping[str, Any]) -> KnownField:
    values = {name: row.get("stream" if name == "source" else name) for name in _KNOWN_FIELDS}
    kinds, kinds_read = _json(values["kinds"]), _json(values["kinds_read"])
    values.update(path=values["path"] or "", unread=values["unread"] or 0,
                  kinds=tuple(kinds) if kinds is not None else None, kinds_read=kinds_read)
    return KnownField(**values)


def _row(state: KnownField) -> dict[str, Any]:
    row = {name: getattr(state, name) for name in _KNOWN_FIELDS}  # shallow: asdict copies deeply, 1,000 a run
    row["stream"] = row.pop("source")
    row["kinds"] = json.dumps(list(state.kinds)) if state.kinds is not None else None
    row["kinds_read"] = json.dumps(dict(state.kinds_read)) if state.kinds_read is not None else None
    return row


def _json(value: Any) -> Any:
    """A JSON column's value as data (DuckDB returns its text)."""
    return json.loads(value) if isinstance(value, str) else value
