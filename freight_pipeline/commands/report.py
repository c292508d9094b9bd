"""Read the PUBLISHED warehouse (read-only): cursors, last runs, row counts, queue and rejects.

Runs after the last publish (a failed one never publishes) come from the working database's run
log file (``work/latest_runs.json``), never from the working database itself, which a reader's lock
would keep a starting sync from opening.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb

from freight_pipeline.checks.queries import events_freshness
from freight_pipeline.normalize.shapes import OPEN_STATES
from freight_pipeline.sync.cursor import CursorError, ShipmentKey
from freight_pipeline.sync.derived_by import DERIVED_BY
from freight_pipeline.sync.streams import RECORD_SOURCES, STREAM_NAMES, runs_of
from freight_pipeline.warehouse.backend import StorageBackend
from freight_pipeline.warehouse.ddl import table_names
from freight_pipeline.warehouse.meta import LATEST_STATE, META_SCHEMA, NOTICES, extra_path
from freight_pipeline.warehouse.paths import LAKE_SCRATCH
from freight_pipeline.warehouse.run_log import SHOWN_STATUS, current_runs, runs_after_publish

COUNTED_SCHEMAS = ("freight", "analytics")
RUN_COLUMNS = ("run_id", "status", "started_at", "finished_at", "rows_read", "rows_written", "requests", "retries",
               "rejected", "error")


class NothingPublished(FileNotFoundError):
    pass


@contextmanager
def open_published(data_dir: Path, backend: StorageBackend) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-only connection to what ``backend`` published for ``data_dir`` (``<data_dir>/warehouse.duckdb``,
    or a lake as of its published snapshot); NothingPublished when nothing was published yet (a lake before its
    first publish too: its latest snapshot is no publish, its marts may be half built)."""
    with _published(data_dir, backend) as (con, _where):
        yield con


@contextmanager
def _published(
    data_dir: Path, backend: StorageBackend
) -> Iterator[tuple[duckdb.DuckDBPyConnection, dict[str, Any]]]:
    """:func:`open_published`'s connection, and where it reads: the database, the Parquet and which
    published version (the manifest's, or the lake snapshot the connection was opened at)."""
    state = backend.open_published(Path(data_dir), LAKE_SCRATCH)
    if state is not None and not state.is_published:  # a lake before its first publish: its latest, unpublished
        state.con.close()
        state = None
    if state is None:
        raise NothingPublished(
            f"nothing published yet {backend.published_where(Path(data_dir))} "
            "(run `freight-pipeline sync` or `make demo` first, or pass --data-dir)"
        )
    published = {} if state.version is None else {"version": state.version, "published_at": state.published_at}
    with state.con as con:
        yield con, {"database": state.database, "parquet": state.parquet, "published": published}


def read_report(data_dir: Path, backend: StorageBackend) -> dict[str, Any]:
    """Everything ``status`` shows, as plain JSON-able values."""
    data_dir = Path(data_dir)
    with _published(data_dir, backend) as (con, where):
        tables = table_names(con)
        streams = _streams(con, tables)
        return {
            **where,
            "streams": streams,
            "unpublished_runs": _unpublished_runs(data_dir, streams),
            "tables": {name: _count(con, name) for name in tables if name.split(".")[0] in COUNTED_SCHEMAS},
            "rejected_records": _per_stream(con, tables, "rejected_records"),  # failures logged, in all runs
            "rejected_in_last_run": _rejected_in_last_runs(con, tables),
            "retry_queue": _retry_queue(con, tables),
            "data_problems": _per_stream(con, tables, "data_problems"),
            "shape_changes": _shape_changes(con, tables),
            "null_jumps": _null_jumps(con, tables),
            "events_freshness": _plain_values(events_freshness(con)) if "freight.shipments" in tables else None,
        }


# Arrivals of a fct_on_time_performance row that have a delay in minutes (both instants): those its
# avg_arrival_delay_minutes averages; the ones judged by date have none.
TIMED_ARRIVALS = "(shipments_arrived - shipments_judged_by_date)"


def on_time_by_mode(data_dir: Path, backend: StorageBackend) -> list[dict[str, Any]]:
    """On-time share of arrived shipments per mode of transport, from analytics.fct_on_time_performance.

    The average delay is over the arrivals with a delay in minutes, each group's average weighted by
    its count of them (null for a mode whose arrivals were all judged by date).
    """
    with open_published(data_dir, backend) as con:
        if "analytics.fct_on_time_performance" not in table_names(con):
            return []
        rows = con.execute(
            "SELECT mode_of_transport, sum(shipments_planned), sum(shipments_arrived), sum(shipments_on_time), "
            "sum(shipments_on_time) / nullif(sum(shipments_arrived), 0), "
            f"sum(avg_arrival_delay_minutes * {TIMED_ARRIVALS}) / nullif(sum({TIMED_ARRIVALS}), 0) "
            "FROM analytics.fct_on_time_performance GROUP BY ALL ORDER BY mode_of_transport NULLS LAST"
        ).fetchall()
    keys = ("mode_of_transport", "planned", "arrived", "on_time", "on_time_share", "avg_delay_minutes")
    return [dict(zip(keys, (_plain(v) for v in row), strict=True)) for row in rows]


def shipments_present(data_dir: Path, shipment_ids: list[int], backend: StorageBackend) -> list[int]:
    """Those of ``shipment_ids`` that freight.shipments holds."""
    if not shipment_ids:
        return []
    with open_published(data_dir, backend) as con:
        rows = con.execute(
            "SELECT shipment_id FROM freight.shipments WHERE shipment_id IN (SELECT unnest(?::BIGINT[])) ORDER BY 1",
            [shipment_ids],
        ).fetchall()
    return [int(r[0]) for r in rows]


def document_pairs(data_dir: Path, backend: StorageBackend) -> set[tuple[int, int]]:
    """(shipment id, E-File id) of every row of freight.shipment_documents."""
    with open_published(data_dir, backend) as con:
        rows = con.execute("SELECT shipment_id, efile_id FROM freight.shipment_documents").fetchall()
    return {(int(s), int(e)) for s, e in rows}


def describe_cursor(text: str | None) -> str:
    """A cursor's JSON text as short ``key=value`` pairs (the run id left out); the shipments cursor as the service's
    wall-clock second with its UTC offset when it has one (:attr:`ShipmentKey.stamp`: one instant, even in the hour a
    fall-back repeats) and its id."""
    if not text:
        return "-"
    try:
        value = json.loads(text)
    except ValueError:
        return text
    if not isinstance(value, dict):
        return str(value)
    if "date" in value and "time" in value:
        key = f" (id {value['id']})" if "id" in value else ""
        try:
            second = ShipmentKey.from_json(text).stamp
        except CursorError:  # not a key the sync could read: shown as stored
            second = f"{value['date']} {value['time']}"
        return f"{second}{key}"
    return " ".join(f"{k}={v}" for k, v in value.items() if k != "run_id") or "-"


def _count(con: duckdb.DuckDBPyConnection, name: str) -> int:
    schema, table = name.split(".", 1)
    row = con.execute(f'SELECT count(*) FROM "{schema}"."{table}"').fetchone()
    return int(row[0]) if row else 0


def _streams(con: duckdb.DuckDBPyConnection, tables: list[str]) -> list[dict[str, Any]]:
    cursors: dict[str, tuple[Any, Any]] = {}
    if f"{META_SCHEMA}.sync_state" in tables:
        for stream, value, updated in con.execute(
            f"SELECT stream, cursor_value, updated_at FROM {META_SCHEMA}.sync_state {LATEST_STATE}"
        ).fetchall():
            cursors[stream] = (value, updated)
    mappings = {name: cursors.pop(name) for name in list(cursors) if name.startswith(f"{DERIVED_BY}:")}
    if mappings:  # the signatures of the mappings runs derived rows with: one line of their ids
        ids = sorted(name.removeprefix(f"{DERIVED_BY}:") for name in mappings)
        cursors[DERIVED_BY] = (json.dumps({"mappings": ids}), max(updated for _, updated in mappings.values()))
    runs: dict[str, dict[str, Any]] = {}
    if f"{META_SCHEMA}.sync_runs" in tables:
        rows = con.execute(
            f"SELECT stream, CAST(json_extract(details, ?) AS VARCHAR), "
            f"{', '.join(SHOWN_STATUS if c == 'status' else c for c in RUN_COLUMNS)} "
            f"FROM {current_runs(f'{META_SCHEMA}.sync_runs')}", [extra_path(NOTICES)]
        ).fetchall()
        runs = {row[0]: {**dict(zip(RUN_COLUMNS, (_plain(v) for v in row[2:]), strict=True)),
                         "notices": json.loads(row[1]) if row[1] else []} for row in rows}
    synced: dict[str, Any] = {}
    if f"{META_SCHEMA}.table_freshness" in tables:  # since when each stream's tables are current
        synced = dict(con.execute(f"SELECT stream, min(synced_through) FROM {META_SCHEMA}.table_freshness "
                                  "GROUP BY stream").fetchall())
    names = [s for s in STREAM_NAMES if s in cursors or s in runs]
    names += sorted((set(cursors) | set(runs)) - set(names))
    return [
        {
            "stream": name,
            "cursor": cursors.get(name, (None, None))[0],
            "cursor_updated_at": _plain(cursors.get(name, (None, None))[1]),
            "synced_through": _plain(synced.get(name)),
            "last_run": runs.get(name),
        }
        for name in names
    ]


def runs_never_published(data_dir: Path) -> list[dict[str, Any]]:
    """Before the first publish (:class:`NothingPublished`): each stream's latest run the working database logged
    (as ``read_report``'s ``unpublished_runs``; empty when no run has started there)."""
    return _unpublished_runs(Path(data_dir), [])


def _unpublished_runs(data_dir: Path, published: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The runs readers of the last publish do not see (:func:`~freight_pipeline.warehouse.run_log.runs_after_publish`;
    one killed: ``INTERRUPTED``)."""
    shown = {s["stream"]: (s.get("last_run") or {}).get("run_id") for s in published}
    return [{"stream": run["stream"], **{key: run.get(key) for key in RUN_COLUMNS}}
            for run in runs_after_publish(data_dir, shown)]


def _per_stream(con: duckdb.DuckDBPyConnection, tables: list[str], table: str) -> dict[str, int]:
    if f"{META_SCHEMA}.{table}" not in tables:
        return {}
    rows = con.execute(f"SELECT stream, count(*) FROM {META_SCHEMA}.{table} GROUP BY stream ORDER BY stream")
    return {str(stream): int(n) for stream, n in rows.fetchall()}


def _rejected_in_last_runs(con: duckdb.DuckDBPyConnection, tables: list[str]) -> dict[str, int]:
    """Per stream, the records its latest run rejected (each once, however often it failed in that run): what
    is wrong now, where ``rejected_records``' rows are a log of every failure of every run."""
    if not {f"{META_SCHEMA}.rejected_records", f"{META_SCHEMA}.sync_runs"} <= set(tables):
        return {}
    # a part of a shipment (shipment_events, ...) rejects in the runs of the stream that reads it (shipments)
    sources = list(RECORD_SOURCES)
    rows = con.execute(
        f"SELECT r.stream, count(DISTINCT r.source_key) FROM {META_SCHEMA}.rejected_records r "
        "JOIN (SELECT unnest(?) AS stream, unnest(?) AS runs_in) s ON s.stream = r.stream "
        f"JOIN {current_runs(f'{META_SCHEMA}.sync_runs')} l "
        "ON l.stream = s.runs_in AND l.run_id = r.run_id GROUP BY r.stream ORDER BY r.stream",
        [sources, [runs_of(source) for source in sources]])
    return {str(stream): int(n) for stream, n in rows.fetchall()}


def _shape_changes(con: duckdb.DuckDBPyConnection, tables: list[str]) -> list[dict[str, Any]]:
    """The fields new, vanished or retyped now (``freight_meta.source_fields``), by stream and field."""
    if f"{META_SCHEMA}.source_fields" not in tables:
        return []
    cur = con.execute(  # every column: a warehouse written before a column was added lacks it
        f"SELECT * FROM {META_SCHEMA}.source_fields WHERE state IN (SELECT unnest(?)) "
        "ORDER BY stream, state DESC, field", [list(OPEN_STATES)],
    )
    names = [d[0] for d in cur.description]
    shown = ("stream", "field", "state", "records_read", "records_with", "changed_run_id", "changed_at",
             "first_run_id", "example_record_key", "kinds", "kinds_read", "unread")
    return [{name: _plain(value) for name, value in zip(names, row, strict=True) if name in shown}
            for row in cur.fetchall()]


def _null_jumps(con: duckdb.DuckDBPyConnection, tables: list[str]) -> list[dict[str, Any]]:
    """The columns whose share of nulls jumped and stays so (``freight_meta.column_nulls``)."""
    if f"{META_SCHEMA}.column_nulls" not in tables:
        return []
    cur = con.execute(
        "SELECT stream, table_name, column_name, rows_latest, nulls_latest, recent_runs, changed_run_id, changed_at "
        f"FROM {META_SCHEMA}.column_nulls WHERE state = 'jumped' ORDER BY table_name, column_name"
    )
    names = [d[0] for d in cur.description]
    return [{name: _plain(value) for name, value in zip(names, row, strict=True)} for row in cur.fetchall()]


def _plain_values(values: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if values is None else {name: _plain(value) for name, value in values.items()}


def _retry_queue(con: duckdb.DuckDBPyConnection, tables: list[str]) -> dict[str, dict[str, Any]]:
    """Per stream: records waiting in the retry queue, the oldest first failure, the next attempt."""
    if f"{META_SCHEMA}.quarantine" not in tables:
        return {}
    rows = con.execute(
        f"SELECT stream, count(*), min(first_failed_at), min(next_attempt_at) FROM {META_SCHEMA}.quarantine "
        "GROUP BY stream ORDER BY stream"
    ).fetchall()
    return {
        str(stream): {"records": int(n), "since": _plain(since), "next_attempt": _plain(nxt)}
        for stream, n, since, nxt in rows
    }


def _plain(value: Any) -> Any:
    """JSON-able: datetimes as ISO text in UTC, decimals as floats, lists and tuples as lists of such values."""
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).isoformat(timespec="seconds") if value.tzinfo else value.isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    if value is not None and not isinstance(value, str | int | float | bool):
        try:
            return float(value)
        except (TypeError, ValueError):
            return str(value)
    return value
