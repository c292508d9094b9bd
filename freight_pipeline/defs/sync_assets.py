"""The sync streams' tables as Dagster sees them: each normalized table is an ``AssetSpec`` keyed
``freight/<table>``, in the ``freight`` group, with the stream that writes it. The shipments stream
also writes the ``freight_history`` tables (with each batch, in its transaction): ``AssetSpec``s keyed
``freight_history/<table>``, upstream of the dbt models on them.

The computation is the job's (``job.run``); this module only turns what a stream's step reports
(:class:`~freight_pipeline.job.run.StreamFigures`) into asset metadata.
"""

import datetime as dt
import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import dagster as dg
from dagster._core.definitions.data_version import DATA_VERSION_TAG

from freight_pipeline.job.run import StreamFigures
from freight_pipeline.normalize.schema import TableSpec
from freight_pipeline.normalize.tables import TABLES_BY_NAME
from freight_pipeline.sync.parts import PART_BY_STREAM
from freight_pipeline.sync.result import StreamResult
from freight_pipeline.sync.streams import (
    SHIPMENTS,
    STREAM_BY_NAME,
    TABLE_SOURCE,
    TABLE_WRITER,
    stream_named,
)
from freight_pipeline.warehouse.history import HISTORY_TABLES

SYNC_GROUP = "freight"
SOURCE_SCHEMA = "freight"


def metadata_value(value: Any) -> Any:
    """A plain figure (a check's, a publication's, the lake maintenance's) as Dagster shows it: paths as paths,
    instants as timestamps, samples and tables of figures as JSON, None as null, seconds as floats."""
    if value is None:
        return dg.MetadataValue.null()
    if isinstance(value, Path):
        return dg.MetadataValue.path(str(value))
    if isinstance(value, dt.datetime):
        return dg.MetadataValue.timestamp(value)
    if isinstance(value, list | dict):
        return dg.MetadataValue.json(value)
    if isinstance(value, float):
        return dg.MetadataValue.float(value)
    return value


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


TableState = tuple[str | None, int | None]
"""A table asset's last materialization, as a run found it before it wrote: its data version and its row count (None:
not known)."""
ROW_COUNT = "dagster/row_count"


def table_states(instance: dg.DagsterInstance, keys: Sequence[dg.AssetKey]) -> dict[dg.AssetKey, TableState]:
    """The last materialization's data version and row count of each of ``keys`` that has one."""
    states: dict[dg.AssetKey, TableState] = {}
    for record in instance.get_asset_records(list(keys)):
        entry = record.asset_entry.last_materialization
        done = entry.asset_materialization if entry is not None else None
        if done is not None:
            count = done.metadata.get(ROW_COUNT)
            states[done.asset_key] = (done.tags.get(DATA_VERSION_TAG) if done.tags else None,
                                      count.value if isinstance(count, dg.IntMetadataValue) else None)
    return states


def table_version(before: TableState | None, rows: int, written: int, run_id: str) -> dg.DataVersion:
    """A table's data version after a run: the one it had when the run wrote none of its rows and left its row count as
    it was (the dbt views on it are then not shown stale), else a new one, the run's id."""
    version, count = before or (None, None)
    return dg.DataVersion(version if version and not written and count == rows else run_id)


def stream_results(stream: str, figures: StreamFigures, run_id: str,
                   before: Mapping[dg.AssetKey, TableState] | None = None) -> Iterator[dg.MaterializeResult]:
    """One ``MaterializeResult`` per table of ``stream``: its rows, the stream's figures on its first
    table, each part's own figures on the first table of that part; its data version by :func:`table_version` from
    ``before`` (the tables' states before the run)."""
    result = figures.result
    before = before or {}
    tables = stream_named(stream).tables
    metadata_of = stream_metadata(result, figures.newest_change)
    firsts = {part.tables[0]: part.stream for part in stream_named(stream).parts}
    for index, table in enumerate(tables):
        rows, written = figures.rows.get(TABLES_BY_NAME[table].qualified_name, 0), result.rows_by_table.get(table, 0)
        metadata: dict[str, Any] = {ROW_COUNT: rows, "table_rows_written": written}
        if index == 0:
            metadata.update(metadata_of)
        else:
            metadata.update(stream=stream, stream_rows_read=result.rows_read)
        if table in firsts and index > 0:
            metadata.update(part_metadata(result, firsts[table]))
        key = table_key(table)
        yield dg.MaterializeResult(asset_key=key, metadata=metadata,
                                   data_version=table_version(before.get(key), rows, written, run_id))
    for spec in history_tables(stream):
        key, rows = history_key(spec), figures.rows.get(spec.qualified_name, 0)
        yield dg.MaterializeResult(asset_key=key, metadata={ROW_COUNT: rows},  # appended to only: its count says
                                   data_version=table_version(before.get(key), rows, 0, run_id))


def stream_keys(stream: str) -> list[dg.AssetKey]:
    """The keys of the tables ``stream`` writes."""
    return [*(table_key(t) for t in stream_named(stream).tables), *map(history_key, history_tables(stream))]


def stream_specs(stream: str) -> list[dg.AssetSpec]:
    """The specs of the tables ``stream`` writes."""
    return [*(table_spec(t) for t in stream_named(stream).tables), *map(history_spec, history_tables(stream))]
