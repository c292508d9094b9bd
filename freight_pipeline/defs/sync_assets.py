"""One asset per sync stream; each normalized table it writes is an ``AssetSpec`` keyed ``freight/<table>``.
The shipments stream also writes the ``freight_history`` tables (with each batch, in its transaction):
``AssetSpec``s keyed ``freight_history/<table>`` of its asset, upstream of the dbt models on them.

The computation is :func:`freight_pipeline.sync.runner.run_stream`; this module only turns its
:class:`StreamResult` (plus a read-only look at the working database) into asset metadata.
"""

import datetime as dt
import json
from collections.abc import Iterator
from typing import Any

import dagster as dg

from freight_pipeline.checks import queries
from freight_pipeline.defs.dbt import warm_up
from freight_pipeline.defs.resources import FreightServiceResource, WarehouseResource
from freight_pipeline.normalize.schema import TableSpec
from freight_pipeline.normalize.tables import TABLES_BY_NAME
from freight_pipeline.sync.parts import PART_BY_STREAM
from freight_pipeline.sync.progress import Throttled
from freight_pipeline.sync.result import StreamResult
from freight_pipeline.sync.runner import run_stream
from freight_pipeline.sync.streams import (
    SHIPMENTS,
    STREAM_BY_NAME,
    STREAM_NAMES,
    TABLE_SOURCE,
    TABLE_WRITER,
    stream_named,
)
from freight_pipeline.warehouse.history import HISTORY_TABLES

SYNC_GROUP = "freight"
SOURCE_SCHEMA = "freight"
PROGRESS_EVERY_S = 15.0
"""At most one progress line per this many seconds goes to Dagster's event log (each is a stored event)."""


def table_key(table: str) -> dg.AssetKey:
    return dg.AssetKey([SOURCE_SCHEMA, table])


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


def table_spec(table: str) -> dg.AssetSpec:
    spec = TABLES_BY_NAME[table]
    part = TABLE_SOURCE[table]
    stream = TABLE_WRITER[table]
    origin = f" ({PART_BY_STREAM[part].description()})" if part in PART_BY_STREAM and part != SHIPMENTS.name else ""
    return dg.AssetSpec(
        key=table_key(table),
        description=f"{spec.description} Primary key ({', '.join(spec.primary_key)}); written by the "
        f"{stream.name} stream{origin}.",
        group_name=SYNC_GROUP,
        kinds={"duckdb", "python"},
        deps=[table_key(STREAM_BY_NAME[first].tables[0]) for first in stream.reads_first],
        metadata={
            "dagster/table_name": spec.qualified_name,
            "dagster/column_schema": column_schema(spec),
            "stream": part,
            "primary_key": ", ".join(spec.primary_key),
        },
    )


def history_key(spec: TableSpec) -> dg.AssetKey:
    return dg.AssetKey([spec.schema, spec.name])


def history_spec(spec: TableSpec) -> dg.AssetSpec:
    return dg.AssetSpec(
        key=history_key(spec),
        description=f"{spec.description} Key ({', '.join(spec.primary_key)}); written by the {SHIPMENTS.name} "
        "stream with each batch, in the same transaction.",
        group_name=SYNC_GROUP,
        kinds={"duckdb", "python"},
        metadata={
            "dagster/table_name": spec.qualified_name,
            "dagster/column_schema": column_schema(spec),
            "primary_key": ", ".join(spec.primary_key),
        },
    )


def history_tables(stream: str) -> tuple[TableSpec, ...]:
    """The ``freight_history`` tables ``stream`` writes (the shipments stream: all of them)."""
    return HISTORY_TABLES if stream == SHIPMENTS.name else ()


def _text_or_json(value: str | None) -> dg.MetadataValue:
    if value is None:
        return dg.MetadataValue.null()
    try:
        return dg.MetadataValue.json(json.loads(value))
    except ValueError:
        return dg.MetadataValue.text(value)


def stream_metadata(result: StreamResult, newest_change: dt.datetime | None) -> dict[str, Any]:
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
        "notices": dg.MetadataValue.md("\n".join(f"- {n}" for n in result.notices)) if result.notices else None,
    }
    if newest_change is not None:
        metadata["newest_source_change"] = dg.MetadataValue.timestamp(newest_change)
        metadata["source_lag_seconds"] = dg.MetadataValue.float(round((now - newest_change).total_seconds(), 3))
    return {k: v for k, v in metadata.items() if v is not None}


def part_metadata(result: StreamResult, part: str) -> dict[str, Any]:
    """What one part (events, legs, memos) did in this run: read, loaded, quarantined, nulled, waiting."""
    figures = (result.extra.get("parts") or {}).get(part) or {}
    return {
        "records_read": figures.get("read", 0),
        "shipments_loaded": figures.get("loaded", 0),
        "quarantined": figures.get("quarantined", 0),
        "data_problems": figures.get("data_problems", 0),
        "rejected": figures.get("rejected", 0),
        "retry_queue": figures.get("retry_queue", 0),
    }


def stream_results(stream: str, result: StreamResult, warehouse: WarehouseResource) -> Iterator[dg.MaterializeResult]:
    """One ``MaterializeResult`` per table of ``stream``: its rows, the stream's figures on its first
    table, each part's own figures on the first table of that part.

    Reads the working database read-only, after ``run_stream`` has closed its connection.
    """
    tables = stream_named(stream).tables
    with warehouse.read_working_db() as con:
        counts = {t: queries.row_count(con, TABLES_BY_NAME[t]) for t in tables}
        versions = {spec: queries.row_count(con, spec) for spec in history_tables(stream)}
        newest = queries.newest_source_change(con, stream)
    figures = stream_metadata(result, newest)
    firsts = {part.tables[0]: part.stream for part in stream_named(stream).parts}
    for index, table in enumerate(tables):
        metadata: dict[str, Any] = {
            "dagster/row_count": counts[table],
            "table_rows_written": result.rows_by_table.get(table, 0),
        }
        if index == 0:
            metadata.update(figures)
        else:
            metadata.update(stream=stream, stream_rows_read=result.rows_read)
        if table in firsts and index > 0:
            metadata.update(part_metadata(result, firsts[table]))
        yield dg.MaterializeResult(asset_key=table_key(table), metadata=metadata)
    for spec, rows in versions.items():
        yield dg.MaterializeResult(asset_key=history_key(spec), metadata={"dagster/row_count": rows})


def stream_asset_name(stream: str) -> str:
    """The name (and step key) of a stream's asset."""
    return f"sync_{stream}"


def build_stream_asset(stream: str) -> dg.AssetsDefinition:
    """The asset of one stream: all tables it writes, materialized together by one ``run_stream``."""

    @dg.multi_asset(
        name=stream_asset_name(stream),
        specs=[*(table_spec(t) for t in stream_named(stream).tables), *map(history_spec, history_tables(stream))],
        description=stream_named(stream).description,
        can_subset=False,
    )
    def sync_stream(
        context: dg.AssetExecutionContext, freight_service: FreightServiceResource, warehouse: WarehouseResource
    ) -> Iterator[dg.MaterializeResult]:
        service = freight_service.service_settings()
        context.log.info(f"syncing {stream} from {service.base_url} as {service.username} into {warehouse.path}")
        if stream == SHIPMENTS.name and warm_up(warehouse):
            context.log.info("parsing the dbt project for this data directory meanwhile (its first build)")
        result = run_stream(
            stream,
            service,
            warehouse.path,
            freight_service.sync_settings(),
            run_id=context.run_id,
            progress=Throttled(context.log.info, PROGRESS_EVERY_S),
            backend=warehouse.backend,
        )
        context.log.info(f"{stream}: {result.summary()}")
        if (bad := result.bad_records()) is not None:
            context.log.warning(f"{stream}: {bad}")
        for notice in result.notices:
            context.log.warning(f"{stream}: {notice}")
        yield from stream_results(stream, result, warehouse)

    return sync_stream


SYNC_ASSETS: tuple[dg.AssetsDefinition, ...] = tuple(build_stream_asset(s) for s in STREAM_NAMES)
"""Every stream's asset, in run order."""
SYNC_ASSET_KEYS: tuple[dg.AssetKey, ...] = tuple(k for a in SYNC_ASSETS for k in a.keys)
