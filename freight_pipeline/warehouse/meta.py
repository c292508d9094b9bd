"""The ``freight_meta`` tables: cursors, run log, rejected records, raw documents, detail queue.

Declared once as :class:`TableSpec` so the same declaration drives the DDL, the Parquet export and
the docs. They carry no audit columns (their own timestamps and ``run_id`` say who wrote them) and
no replace key (the warehouse writes them with explicit keyed upserts).
"""

from __future__ import annotations

from freight_pipeline.normalize.schema import Column, TableSpec

META_SCHEMA = "freight_meta"


def _meta(name: str, columns: tuple[Column, ...], primary_key: tuple[str, ...], description: str) -> TableSpec:
    return TableSpec(META_SCHEMA, name, columns, primary_key, description, replace_key=None, audit=False)


def _key(name: str, type_: str, description: str) -> Column:
    return Column(name, type_, description, nullable=False)


SYNC_STATE = _meta(
    "sync_state",
    (
        _key("stream", "VARCHAR", "name of the incremental stream"),
        Column("cursor_value", "VARCHAR", "the stream's cursor as JSON text (its shape belongs to the stream)"),
        Column("updated_at", "TIMESTAMPTZ", "when the cursor was last written"),
        Column("run_id", "VARCHAR", "the run that wrote the cursor"),
    ),
    ("stream",),
    "Cursor of each incremental stream; advanced only in the same transaction as the rows it covers.",
)

SYNC_RUNS = _meta(
    "sync_runs",
    (
        _key("run_id", "VARCHAR", "Dagster run id or CLI run id"),
        _key("stream", "VARCHAR", "stream name"),
        Column("started_at", "TIMESTAMPTZ"),
        Column("finished_at", "TIMESTAMPTZ", "null while running or after a crash"),
        Column("status", "VARCHAR", "running, success or failed"),
        Column("rows_read", "BIGINT", "records received from the service"),
        Column("rows_written", "BIGINT", "rows inserted into freight tables"),
        Column("requests", "BIGINT", "HTTP requests made"),
        Column("retries", "BIGINT", "HTTP requests retried"),
        Column("rejected", "BIGINT", "records written to rejected_records"),
        Column("error", "VARCHAR", "error message of a failed stream"),
        Column("cursor_before", "VARCHAR", "cursor (JSON text) at the start"),
        Column("cursor_after", "VARCHAR", "cursor (JSON text) at the end"),
        Column("details", "JSON", "rows written per table and stream-specific figures"),
    ),
    ("run_id", "stream"),
    "One row per stream per run: started/finished, rows read and written, requests, retries, rejected.",
)

LATEST_RUN_PER_STREAM = "QUALIFY row_number() OVER (PARTITION BY stream ORDER BY started_at DESC, run_id DESC) = 1"
"""The clause keeping each stream's latest ``sync_runs`` row."""

REJECTED_RECORDS = _meta(
    "rejected_records",
    (
        _key("stream", "VARCHAR", "stream that received the record"),
        _key("source_key", "VARCHAR", "the record's key in the source (e.g. the shipment id)"),
        _key("run_id", "VARCHAR", "the run that rejected it"),
        Column("payload", "JSON", "the raw record as received (null when there was none, e.g. a 404)"),
        Column("reason", "VARCHAR", "why it could not be normalized"),
        Column("rejected_at", "TIMESTAMPTZ"),
    ),
    ("stream", "source_key", "run_id"),
    "Records that could not be normalized: the raw payload, the reason, the run.",
)

RAW_SHIPMENTS = _meta(
    "raw_shipments",
    (
        _key("shipment_id", "BIGINT", "id of the shipment"),
        Column("document", "JSON", "the last full document as received"),
        Column("fetched_at", "TIMESTAMPTZ", "when it was fetched"),
        Column("last_modified_at", "TIMESTAMPTZ", "the document's last-modified instant (UTC)"),
        Column("run_id", "VARCHAR", "the run that fetched it"),
    ),
    ("shipment_id",),
    "The last raw JSON document of each shipment, for replay without re-fetching.",
)

PENDING_DETAILS = _meta(
    "pending_details",
    (
        _key("stream", "VARCHAR", "detail stream (shipment_events, air_main_carriage_legs, ...)"),
        _key("shipment_id", "BIGINT", "shipment whose details must be (re)fetched"),
        Column("client", "VARCHAR"),
        Column("shipment_number", "VARCHAR"),
        Column("mode_of_transport", "VARCHAR"),
        Column("enqueued_at", "TIMESTAMPTZ", "when the shipment was queued; a re-queue replaces the entry"),
        Column("run_id", "VARCHAR", "the run that queued it"),
    ),
    ("stream", "shipment_id"),
    "Work queue of the detail streams, filled in the same transaction as the changed shipments.",
)

META_TABLES: tuple[TableSpec, ...] = (SYNC_STATE, SYNC_RUNS, REJECTED_RECORDS, RAW_SHIPMENTS, PENDING_DETAILS)
