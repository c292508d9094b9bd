"""One asset per sync stream; each normalized table it writes is an ``AssetSpec`` keyed ``freight/<table>``.

The computation is :func:`freight_pipeline.sync.runner.run_stream`; this module only turns its
:class:`StreamResult` (plus a read-only look at the working database) into asset metadata.
"""

import datetime as dt
import json
from collections.abc import Iterator
from typing import Any

import dagster as dg

from freight_pipeline.defs import queries
from freight_pipeline.defs.resources import FreightServiceResource, WarehouseResource
from freight_pipeline.normalize import STREAM_TABLES, TABLES_BY_NAME, TableSpec
from freight_pipeline.sync.result import StreamResult
from freight_pipeline.sync.runner import STREAM_ORDER, run_stream

SYNC_GROUP = "freight"
ROOT_STREAM = "shipments"
"""The stream that fills the detail queues; the detail streams run after it."""
SOURCE_SCHEMA = "freight"
DESCRIPTIONS: dict[str, str] = {
    "shipments": "Changed shipments since the cursor (lookup + retrieve), flattened into every embedded table; "
    "queues the changed shipments for the detail streams.",
    "shipment_events": "Events of the shipments queued by the shipments stream.",
    "air_main_carriage_legs": "Air main-carriage legs of the queued AIR shipments.",
    "sea_main_carriage_legs": "Sea main-carriage legs of the queued SEA shipments.",
    "shipment_memos": "Memo lines of the queued shipments.",
    "code_conversions": "The whole set of EDI code conversions, replaced each run.",
}


def table_key(table: str) -> dg.AssetKey:
    return dg.AssetKey([SOURCE_SCHEMA, table])


def stream_keys(stream: str) -> list[dg.AssetKey]:
    return [table_key(t) for t in STREAM_TABLES[stream]]


def column_schema(spec: TableSpec) -> dg.TableSchema:
    return dg.TableSchema(
        columns=[
            dg.TableColumn(
                c.name,
                c.type.lower(),
                description=c.description or None,
                constraints=dg.TableColumnConstraints(nullable=c.nullable),
            )
            for c in spec.all_columns
        ]
    )


def table_spec(stream: str, table: str) -> dg.AssetSpec:
    spec = TABLES_BY_NAME[table]
    deps = [] if stream in (ROOT_STREAM, "code_conversions") else stream_keys(ROOT_STREAM)[:1]
    return dg.AssetSpec(
        key=table_key(table),
        description=f"{spec.description} Primary key ({', '.join(spec.primary_key)}); written by the "
        f"{stream} stream.",
        group_name=SYNC_GROUP,
        kinds={"duckdb", "python"},
        deps=deps,
        metadata={
            "dagster/table_name": spec.qualified_name,
            "dagster/column_schema": column_schema(spec),
            "stream": stream,
            "primary_key": ", ".join(spec.primary_key),
        },
    )


def _text_or_json(value: str | None) -> dg.MetadataValue:
    if value is None:
        return dg.MetadataValue.null()
    try:
        return dg.MetadataValue.json(json.loads(value))
    except ValueError:
        return dg.MetadataValue.text(value)


def stream_metadata(result: StreamResult, newest_change: dt.datetime | None, pending: int | None) -> dict[str, Any]:
    """The stream's figures: rows read/written, requests, retries, rejects, cursors, source lag."""
    now = dt.datetime.now(dt.UTC)
    seconds = (result.finished_at - result.started_at).total_seconds() if result.finished_at else None
    metadata: dict[str, Any] = {
        "rows_read": result.rows_read,
        "rows_written": result.rows_written,
        "rows_written_by_table": dg.MetadataValue.json(dict(sorted(result.rows_by_table.items()))),
        "requests": result.requests,
        "retries": result.retries,
        "rejected": result.rejected,
        "quarantined": result.quarantined,
        "data_problems": result.data_problems,
        "retry_queue": result.extra.get("retry_queue"),
        "cursor_before": _text_or_json(result.cursor_before),
        "cursor_after": _text_or_json(result.cursor_after),
        "duration_seconds": dg.MetadataValue.float(round(seconds, 3)) if seconds is not None else None,
        "details": dg.MetadataValue.json(json.loads(json.dumps(result.extra, default=str))),
    }
    if newest_change is not None:
        metadata["newest_source_change"] = dg.MetadataValue.timestamp(newest_change)
        metadata["source_lag_seconds"] = dg.MetadataValue.float(round((now - newest_change).total_seconds(), 3))
    if pending is not None:
        metadata["pending_shipments"] = pending
    return {k: v for k, v in metadata.items() if v is not None}


def stream_results(stream: str, result: StreamResult, warehouse: WarehouseResource) -> Iterator[dg.MaterializeResult]:
    """One ``MaterializeResult`` per table of ``stream``; the first table also carries the stream's figures.

    Reads the working database read-only, after ``run_stream`` has closed its connection.
    """
    tables = STREAM_TABLES[stream]
    with warehouse.read_working_db() as con:
        counts = {t: queries.row_count(con, TABLES_BY_NAME[t]) for t in tables}
        newest = queries.newest_source_change(con, stream)
        pending = queries.pending_details(con, stream) if stream not in (ROOT_STREAM, "code_conversions") else None
    figures = stream_metadata(result, newest, pending)
    for index, table in enumerate(tables):
        metadata: dict[str, Any] = {
            "dagster/row_count": counts[table],
            "table_rows_written": result.rows_by_table.get(table, 0),
            **(figures if index == 0 else {"stream": stream, "stream_rows_read": result.rows_read}),
        }
        yield dg.MaterializeResult(asset_key=table_key(table), metadata=metadata)


def build_stream_asset(stream: str) -> dg.AssetsDefinition:
    """The asset of one stream: all tables it writes, materialized together by one ``run_stream``."""

    @dg.multi_asset(
        name=f"sync_{stream}",
        specs=[table_spec(stream, t) for t in STREAM_TABLES[stream]],
        description=DESCRIPTIONS.get(stream, f"The {stream} stream."),
        can_subset=False,
    )
    def sync_stream(
        context: dg.AssetExecutionContext, freight_service: FreightServiceResource, warehouse: WarehouseResource
    ) -> Iterator[dg.MaterializeResult]:
        service = freight_service.service_settings()
        context.log.info(f"syncing {stream} from {service.base_url} as {service.username} into {warehouse.path}")
        result = run_stream(
            stream,
            service,
            warehouse.path,
            freight_service.sync_settings(),
            run_id=context.run_id,
            progress=context.log.info,
        )
        context.log.info(
            f"{stream}: read {result.rows_read}, wrote {result.rows_written} rows in {result.requests} requests "
            f"({result.retries} retries, {result.rejected} rejected)"
        )
        if result.quarantined or result.data_problems or result.extra.get("retry_queue"):
            context.log.warning(
                f"{stream}: {result.quarantined} records quarantined in this run, "
                f"{result.extra.get('retry_queue', 0)} waiting in the retry queue, "
                f"{result.data_problems} unconvertible values nulled (freight_meta.quarantine, "
                "freight_meta.data_problems)"
            )
        yield from stream_results(stream, result, warehouse)

    return sync_stream


SYNC_ASSETS: tuple[dg.AssetsDefinition, ...] = tuple(build_stream_asset(s) for s in STREAM_ORDER)
"""Every stream's asset, in run order (shipments first: the detail streams drain what it queued)."""
SYNC_ASSET_KEYS: tuple[dg.AssetKey, ...] = tuple(k for a in SYNC_ASSETS for k in a.keys)
