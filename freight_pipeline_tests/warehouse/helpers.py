"""Small table specs (a parent, two children, a moving child, a full-refresh table), batch builders,
:func:`apply_shipment_batch`, the keyword form of ``Writes.apply_batch`` the tests write with, and
:func:`publish_held`, the publish of an open warehouse."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from freight_pipeline.config import StorageSettings
from freight_pipeline.normalize.schema import Column, TableSpec
from freight_pipeline.warehouse.publish import PublishResult, publish
from freight_pipeline.warehouse.records import (
    DEFAULT_BACKOFF,
    Backoff,
    BatchWrite,
    DataProblem,
    Quarantined,
    RawDocument,
    Reject,
    WriteStats,
)
from freight_pipeline.warehouse.store import Warehouse

SCHEMA = "freight"
SID = Column("shipment_id", "BIGINT", nullable=False)

PARENTS = TableSpec(
    SCHEMA,
    "parents",
    (SID, Column("name", "VARCHAR"), Column("modified_at", "TIMESTAMPTZ"), Column("payload", "JSON")),
    ("shipment_id",),
    "one row per shipment",
)
LINES = TableSpec(
    SCHEMA,
    "lines",
    (SID, Column("position", "INTEGER", nullable=False), Column("qty", "DOUBLE")),
    ("shipment_id", "position"),
    "child: lines of a shipment",
)
MARKS = TableSpec(
    SCHEMA,
    "marks",
    (SID, Column("position", "INTEGER", nullable=False), Column("mark", "VARCHAR")),
    ("shipment_id", "position"),
    "child: marks of a shipment",
)
NOTES = TableSpec(
    SCHEMA,
    "notes",
    (Column("note_id", "BIGINT", nullable=False), Column("shipment_id", "BIGINT"), Column("text", "VARCHAR")),
    ("note_id",),
    "child keyed by its own id (may move between shipments)",
)
CODES = TableSpec(
    SCHEMA,
    "codes",
    (Column("code_id", "BIGINT", nullable=False), Column("label", "VARCHAR"), Column("payload", "JSON")),
    ("code_id",),
    "full refresh",
    replace_key=None,
)
TABLES: tuple[TableSpec, ...] = (PARENTS, LINES, MARKS, NOTES, CODES)
SHIPMENT_TABLES = ("parents", "lines", "marks")

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def shipment_batch(
    ids: Sequence[int], lines: int = 2, marks: int = 1, version: int = 0
) -> tuple[dict[str, pa.Table], list[RawDocument]]:
    """Rows of ``ids`` in parents/lines/marks (``lines`` / ``marks`` children each) and their raw documents."""
    parents: list[dict[str, Any]] = []
    line_rows: list[dict[str, Any]] = []
    mark_rows: list[dict[str, Any]] = []
    raw: list[RawDocument] = []
    for i in ids:
        modified = T0 + dt.timedelta(seconds=i, minutes=version)
        doc = {"id": i, "name": f"S{i}", "version": version}
        parents.append(
            {"shipment_id": i, "name": f"S{i} v{version}", "modified_at": modified, "payload": json.dumps(doc)}
        )
        line_rows += [{"shipment_id": i, "position": p, "qty": float(p + version)} for p in range(1, lines + 1)]
        mark_rows += [{"shipment_id": i, "position": p, "mark": f"M{p}"} for p in range(1, marks + 1)]
        raw.append(RawDocument(i, json.dumps(doc), T0, modified))
    tables = {
        "parents": PARENTS.to_arrow(parents),
        "lines": LINES.to_arrow(line_rows),
        "marks": MARKS.to_arrow(mark_rows),
    }
    return tables, raw


def codes(n: int, label: str = "x") -> pa.Table:
    return CODES.to_arrow(
        [{"code_id": i, "label": f"{label}{i}", "payload": json.dumps({"id": i})} for i in range(1, n + 1)]
    )


def apply_shipment_batch(
    wh: Warehouse,
    run_id: str,
    tables: Mapping[str, pa.Table],
    unit_ids: Sequence[int],
    raw_documents: Sequence[RawDocument | tuple[int, str, dt.datetime, dt.datetime | None]] = (),
    deleted_ids: Sequence[int] = (),
    cursor: tuple[str, str] | None = None,
    rejects: Sequence[Reject] = (),
    replaced_tables: Sequence[str] | None = None,
    *,
    stream: str = "shipments",
    quarantined: Sequence[Quarantined] = (),
    problems: Sequence[DataProblem] = (),
    backoff: Backoff = DEFAULT_BACKOFF,
) -> WriteStats:
    """Write one batch of ``stream`` in ONE transaction (``Writes.apply_batch``).

    * ``unit_ids``: shipments whose rows are replaced: in each table of ``replaced_tables``
      (default: every table given in ``tables``; an empty Arrow table means "no rows") their
      old rows are deleted and the new rows of ``tables`` inserted; they loaded for ``stream``.
    * ``deleted_ids``: shipments gone from the source.
    * ``raw_documents``: ``(shipment_id, json_text, fetched_at, last_modified_at)``, upserted.
    * ``cursor``: ``(stream, cursor_json)`` set in the same transaction.
    """
    units = [int(i) for i in unit_ids]
    return wh.writes.apply_batch(
        run_id,
        BatchWrite(
            tables=dict(tables),
            replaced={name: units for name in (replaced_tables if replaced_tables is not None else tables)},
            loaded={stream: units},
            deleted_ids=list(deleted_ids),
            raw_documents=[doc if isinstance(doc, RawDocument) else RawDocument(*doc) for doc in raw_documents],
            rejects=list(rejects),
            quarantined=list(quarantined),
            problems=list(problems),
            cursor=cursor,
        ),
        backoff=backoff,
    )


def publish_held(
    wh: Warehouse, schemas: Sequence[str] | None = None, *, settings: StorageSettings | None = None, **options: Any
) -> PublishResult:
    """The embedded publish of ``wh``'s working database through its open connection, with its backend's
    DuckDB settings (or ``settings``)."""
    return publish(wh.data_dir, schemas, settings=settings or wh.backend.duckdb_settings, connection=wh.con,
                   **options)
