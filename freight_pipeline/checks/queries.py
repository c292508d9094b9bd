"""Read-only questions to the working database, asked by the warehouse checks and asset metadata.

Every SQL statement is derived from the table specs (``TableSpec.qualified_name``, ``primary_key``)
and the ``freight_meta`` specs; no table is listed by hand.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from typing import Any

import duckdb

from freight_pipeline.normalize.schema import TableSpec
from freight_pipeline.normalize.shapes import OPEN_STATES
from freight_pipeline.normalize.tables import TABLES_BY_NAME
from freight_pipeline.sync import freshness
from freight_pipeline.sync.parts import EVENTS
from freight_pipeline.sync.streams import SHIPMENTS
from freight_pipeline.warehouse import meta
from freight_pipeline.warehouse.ddl import existing_columns, qualified, quote, scalar
from freight_pipeline.warehouse.history import BEHIND_STATE, Subject, disagreeing_sql
from freight_pipeline.warehouse.reads import oldest_part_read

PARENT = TABLES_BY_NAME["shipments"]
"""The table every child row points at through the parent's key column (``shipment_id``)."""


def _scalar(con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any] = ()) -> Any:
    row = con.execute(sql, list(params)).fetchone()
    return None if row is None else row[0]


def _utc(value: dt.datetime | None) -> dt.datetime | None:
    return None if value is None else value.astimezone(dt.UTC)


def newest_source_change(con: duckdb.DuckDBPyConnection, stream: str) -> dt.datetime | None:
    """Newest source ``last_modified_at`` the warehouse holds for ``stream`` (None: unknown for it)."""
    if stream == SHIPMENTS.name:
        source = qualified(meta.RAW_SHIPMENTS)
    elif stream in TABLES_BY_NAME and "last_modified_at" in TABLES_BY_NAME[stream].column_index:
        source = qualified(TABLES_BY_NAME[stream])
    else:
        return None
    return _utc(_scalar(con, f"SELECT max(last_modified_at) FROM {source}"))


def duplicate_keys(con: duckdb.DuckDBPyConnection, spec: TableSpec, sample: int = 5) -> tuple[int, list[str]]:
    """How many primary-key values occur more than once, and a few of them as text."""
    key = ", ".join(quote(c) for c in spec.primary_key)
    dupes = f"SELECT {key} FROM {qualified(spec)} GROUP BY ALL HAVING count(*) > 1"
    count = scalar(con, f"SELECT count(*) FROM ({dupes})")
    rows = con.execute(f"{dupes} LIMIT {int(sample)}").fetchall() if count else []
    return count, [", ".join(map(str, row)) for row in rows]


def child_tables(tables: Sequence[TableSpec], parent: TableSpec = PARENT) -> list[TableSpec]:
    """Tables that point at ``parent`` through its (single-column) key."""
    (key,) = parent.primary_key
    return [t for t in tables if t is not parent and key in t.column_index]


def orphan_rows(con: duckdb.DuckDBPyConnection, child: TableSpec, parent: TableSpec = PARENT) -> int:
    """Rows of ``child`` whose (non-null) parent key is missing from ``parent``."""
    (key,) = parent.primary_key
    column = quote(key)
    return scalar(con, f"SELECT count(*) FROM {qualified(child)} c WHERE c.{column} IS NOT NULL AND NOT EXISTS "
                       f"(SELECT 1 FROM {qualified(parent)} p WHERE p.{column} = c.{column})")


def judged_runs(con: duckdb.DuckDBPyConnection, stream: str) -> list[str]:
    """The runs of ``stream`` a check of what its latest run met looks at, in turn: the latest (the one recorded
    last, as ``meta.latest_runs``), and when it did not succeed (it failed, was stopped or still runs, so it may
    not have read what an earlier run found), the latest that did. None: none ran."""
    table = qualified(meta.SYNC_RUNS)
    latest = con.execute(f"SELECT run_id, status FROM {table} WHERE stream = ? ORDER BY rowid DESC LIMIT 1",
                         [stream]).fetchone()
    if latest is None or latest[1] == "success":
        return [latest[0]] if latest else []
    succeeded = _scalar(con, f"SELECT run_id FROM {table} WHERE stream = ? AND status = 'success' "
                             "ORDER BY rowid DESC LIMIT 1", [stream])
    return [latest[0], *([succeeded] if succeeded else [])]


def run_notices(con: duckdb.DuckDBPyConnection, stream: str, run_id: str) -> list[tuple[str, str]]:
    """What run ``run_id`` of ``stream`` said of the service's behaviour (``StreamResult.notices``): each
    notice's kind (``sync.result.NoticeKind``; ``notice`` for a run that did not record it) and line."""
    row = con.execute(
        "SELECT CAST(json_extract(details, ?) AS VARCHAR), CAST(json_extract(details, ?) AS VARCHAR) "
        f"FROM {qualified(meta.SYNC_RUNS)} WHERE stream = ? AND run_id = ?",
        [meta.extra_path(meta.NOTICES), meta.extra_path(meta.NOTICE_KINDS), stream, run_id]).fetchone()
    lines = [str(n) for n in json.loads(row[0])] if row and row[0] else []
    kinds = [str(k) for k in json.loads(row[1])] if row and row[1] else []
    return [(kinds[i] if i < len(kinds) else "notice", line) for i, line in enumerate(lines)]


def rejected_records(
    con: duckdb.DuckDBPyConnection, stream: str, run_id: str, sample: int = 5
) -> tuple[int, list[dict[str, str]]]:
    """Records of ``stream`` rejected in ``run_id``, and a few of them (key and reason)."""
    where = f"FROM {qualified(meta.REJECTED_RECORDS)} WHERE stream = ? AND run_id = ?"
    count = scalar(con, f"SELECT count(*) {where}", [stream, run_id])
    rows = (
        con.execute(f"SELECT source_key, reason {where} ORDER BY source_key LIMIT {int(sample)}", [stream, run_id])
        .fetchall()
        if count
        else []
    )
    return count, [{"source_key": str(k), "reason": str(r)} for k, r in rows]


def quarantined_records(
    con: duckdb.DuckDBPyConnection, stream: str, sample: int = 5
) -> tuple[int, dt.datetime | None, list[dict[str, Any]]]:
    """Records of ``stream`` waiting in the retry queue: how many, since when, and a few of them."""
    where = f"FROM {qualified(meta.QUARANTINE)} WHERE stream = ?"
    count, oldest = con.execute(f"SELECT count(*), min(first_failed_at) {where}", [stream]).fetchone() or (0, None)
    rows = con.execute(
        f"SELECT record_key, reason, request, attempts, next_attempt_at {where} "
        f"ORDER BY first_failed_at, record_key LIMIT {int(sample)}",
        [stream],
    ).fetchall() if count else []
    examples = [
        {"record_key": k, "reason": r, "request": q, "attempts": a, "next_attempt_at": str(_utc(n))}
        for k, r, q, a, n in rows
    ]
    return int(count or 0), _utc(oldest), examples


def data_problems(con: duckdb.DuckDBPyConnection, stream: str, sample: int = 5) -> tuple[int, list[dict[str, Any]]]:
    """Unconvertible values held for ``stream``'s records: how many, and a few of them."""
    where = f"FROM {qualified(meta.DATA_PROBLEMS)} WHERE stream = ?"
    count = scalar(con, f"SELECT count(*) {where}", [stream])
    rows = con.execute(
        f"SELECT record_key, json_path, CAST(raw_value AS VARCHAR), reason {where} "
        f"ORDER BY detected_at DESC, record_key, json_path LIMIT {int(sample)}",
        [stream],
    ).fetchall() if count else []
    examples = [{"record_key": k, "json_path": p, "raw_value": v, "reason": r} for k, p, v, r in rows]
    return count, examples


def history_behind(con: duckdb.DuckDBPyConnection, subject: Subject) -> str | None:
    """Why the history of ``subject`` cannot be compared with the rows held (None: it can): not created
    yet, or switched off and behind (``sync_state`` entry ``freight_history_behind``)."""
    if not existing_columns(con, subject.spec):
        return f"{subject.spec.qualified_name} does not exist yet"
    if existing_columns(con, meta.SYNC_STATE):
        since = _scalar(con, f"SELECT cursor_value FROM {qualified(meta.SYNC_STATE)} WHERE stream = ? "
                             f"{meta.LATEST_STATE}", [BEHIND_STATE])
        if since:
            return f"the history is switched off and behind the rows held since {since}"
    return None


def history_disagreements(con: duckdb.DuckDBPyConnection, subject: Subject, sample: int = 10, *,
                          changed_only: bool = False) -> tuple[int, list[int]]:
    """How many rows differ between the subject's current versions and the rows held, and a few shipments
    (``changed_only``: of the shipments changed since the last complete build)."""
    shipments = f"SELECT shipment_id FROM {qualified(meta.CHANGED_SHIPMENTS)}" if changed_only else None
    row = con.execute(f"SELECT count(*), list(DISTINCT shipment_id ORDER BY shipment_id) "
                      f"FROM ({disagreeing_sql(subject, shipments)})").fetchone()
    count, ids = (row or (0, []))
    return int(count or 0), [int(i) for i in (ids or [])[:sample]]
def events_freshness(con: duckdb.DuckDBPyConnection) -> dict[str, Any] | None:
    """What the runs know of events changed without a moved stamp (``sync.freshness``), and how long the
    events of the open shipment read longest ago have gone unread; None before the first run said."""
    if not existing_columns(con, meta.SYNC_STATE):
        return None
    text = _scalar(con, f"SELECT cursor_value FROM {qualified(meta.SYNC_STATE)} WHERE stream = ? "
                        f"{meta.LATEST_STATE}", [freshness.STATE])
    if not text:
        return None
    state = json.loads(text)
    open_held, oldest = oldest_part_read(con, EVENTS)
    oldest = _utc(oldest)
    age = dt.datetime.now(dt.UTC) - oldest if oldest is not None else None
    return {"rolling_reread": bool(state.get("rolling")), "found_run_id": state.get("found_run_id"),
            "found_at": state.get("found_at"), "parts_found": state.get("parts") or [],
            "max_age_minutes": state.get("max_age_minutes"), "open_shipments": open_held,
            "oldest_events_read_at": oldest, "oldest_age_minutes": round(age.total_seconds() / 60) if age else None}


def null_jumps(con: duckdb.DuckDBPyConnection, stream: str) -> list[dict[str, Any]]:
    """Columns of the tables ``stream``'s records fill whose share of nulls jumped and stays so."""
    rows = con.execute(
        "SELECT table_name, column_name, nulls_latest, rows_latest, changed_run_id "
        f"FROM {qualified(meta.COLUMN_NULLS)} WHERE stream = ? AND state = 'jumped' ORDER BY table_name, column_name",
        [stream],
    ).fetchall()
    return [{"column": f"{t}.{c}", "nulls": n, "rows": r, "since_run": run} for t, c, n, r, run in rows]


def shape_changes(con: duckdb.DuckDBPyConnection, stream: str) -> tuple[dict[str, int], list[dict[str, Any]]]:
    """Fields of ``stream``'s records that are new, vanished or retyped now: how many in each state, and each
    of them (field, state, records with it of records read, since which run, an example record)."""
    rows = con.execute(
        "SELECT field, state, records_with, records_read, changed_run_id, example_record_key "
        f"FROM {qualified(meta.SOURCE_FIELDS)} WHERE stream = ? AND state IN (SELECT unnest(?)) "
        "ORDER BY state DESC, field",
        [stream, list(OPEN_STATES)],
    ).fetchall()
    fields = [{"field": f, "state": s, "records_with": w, "records_read": r, "since_run": run, "example_record": e}
              for f, s, w, r, run, e in rows]
    return {state: sum(f["state"] == state for f in fields) for state in OPEN_STATES}, fields
