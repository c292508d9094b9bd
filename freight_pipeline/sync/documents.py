"""What the documents stream reads of the working database: which shipments to list E-Files for,
and the document rows held for them (to write only what changed)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import duckdb

from freight_pipeline.normalize.documents import SHIPMENT_DOCUMENTS
from freight_pipeline.normalize.specs.shipments import SHIPMENTS
from freight_pipeline.warehouse.ddl import first, qualified, run
from freight_pipeline.warehouse.meta import SYNC_RUNS

COMPARED = tuple(c.name for c in SHIPMENT_DOCUMENTS.columns)
"""The business columns: two row sets of a shipment are the same when these are."""


def newest_shipment_write(con: duckdb.DuckDBPyConnection, but: tuple[str, dt.datetime] | None = None
                          ) -> dt.datetime | None:
    """When the pipeline last wrote a shipment row (``_synced_at``): the documents stream's watermark. ``but``:
    (stream, since) leaves out the rows that stream's runs started since then wrote (a rebuild's own)."""
    if but is None:
        row = first(run(con, f"SELECT max(_synced_at) FROM {qualified(SHIPMENTS)}"))
    else:
        row = first(run(con, f"SELECT max(_synced_at) FROM {qualified(SHIPMENTS)} WHERE _run_id NOT IN (SELECT "
                             f"run_id FROM {qualified(SYNC_RUNS)} WHERE stream = ? AND started_at >= ?)", list(but)))
    return row[0].astimezone(dt.UTC) if row and row[0] is not None else None


def shipments_written_after(con: duckdb.DuckDBPyConnection, after: dt.datetime | None) -> list[int]:
    """Ids of the held shipments written after ``after`` (None: every held shipment), in id order."""
    if after is None:
        rows = run(con, f"SELECT shipment_id FROM {qualified(SHIPMENTS)} ORDER BY shipment_id")
    else:
        rows = run(con, f"SELECT shipment_id FROM {qualified(SHIPMENTS)} WHERE _synced_at > ? ORDER BY shipment_id",
                   [after])
    return [int(r[0]) for r in rows]


def held_documents(con: duckdb.DuckDBPyConnection, ids: Sequence[int]) -> dict[int, set[tuple[Any, ...]]]:
    """The document rows held for ``ids``, per shipment, as tuples of :data:`COMPARED` (JSON as text,
    instants in UTC), comparable with :func:`row_key` of new rows."""
    if not ids:
        return {}
    columns = ", ".join(f'CAST("{c}" AS VARCHAR)' if c in ("document_references", "roles") else f'"{c}"'
                        for c in COMPARED)
    rows = run(con, f"SELECT {columns} FROM {qualified(SHIPMENT_DOCUMENTS)} "
                    "WHERE shipment_id IN (SELECT unnest(?::BIGINT[]))", [[int(i) for i in ids]])
    held: dict[int, set[tuple[Any, ...]]] = {}
    for row in rows:
        held.setdefault(int(row[0]), set()).add(_normalized(row))
    return held


def sharing_shipments(con: duckdb.DuckDBPyConnection, ids: Sequence[int], efile_ids: Sequence[int],
                      named: Sequence[int]) -> set[int]:
    """The held shipments other than ``ids`` with a row of an E-File ``efile_ids`` names or one of ``ids`` holds,
    or that the files read name (``named``: their ``SHIPMENT`` references): an E-File two shipments share is a row of
    each, which a read of one leaves as it was (or missing) in the other."""
    rows = run(con, f"SELECT DISTINCT shipment_id FROM {qualified(SHIPMENT_DOCUMENTS)} WHERE efile_id IN ("
                    f"SELECT unnest(?::BIGINT[]) UNION ALL SELECT efile_id FROM {qualified(SHIPMENT_DOCUMENTS)} "
                    "WHERE shipment_id IN (SELECT unnest(?::BIGINT[]))) "
                    f"UNION SELECT shipment_id FROM {qualified(SHIPMENTS)} "
                    "WHERE shipment_id IN (SELECT unnest(?::BIGINT[]))",
               [[int(i) for i in efile_ids], [int(i) for i in ids], [int(i) for i in named]])
    return {int(r[0]) for r in rows} - {int(i) for i in ids}


def row_key(row: dict[str, Any]) -> tuple[Any, ...]:
    """A new row as the tuple :func:`held_documents` gives for the same row once written."""
    return _normalized(tuple(row.get(c) for c in COMPARED))


def _normalized(values: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(v.astimezone(dt.UTC) if isinstance(v, dt.datetime) and v.tzinfo else v for v in values)
