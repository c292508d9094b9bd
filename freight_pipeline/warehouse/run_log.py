"""The run log: one ``freight_meta.sync_runs`` row per stream and run, and ``work/latest_runs.json``
(the latest run of each stream, ``paths.run_log_path``) for a look without DuckDB.

A mixin of :class:`~freight_pipeline.warehouse.store.Warehouse`.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import duckdb

from freight_pipeline.lake.settings import LakeSettings
from freight_pipeline.warehouse import meta
from freight_pipeline.warehouse.conflicts import retried_on_conflict
from freight_pipeline.warehouse.ddl import qualified, run
from freight_pipeline.warehouse.paths import run_log_path
from freight_pipeline.warehouse.records import RunLike


class RunLog:
    """Recording runs (mixin of ``Warehouse``)."""

    con: duckdb.DuckDBPyConnection
    lake: LakeSettings | None
    data_dir: Path
    _transaction: Callable[[], AbstractContextManager[duckdb.DuckDBPyConnection]]

    @retried_on_conflict
    def record_run(self, record: RunLike) -> None:
        """Insert or update the ``sync_runs`` row of ``(record.run_id, record.stream)``: call at start and finish."""
        details = {
            "rows_by_table": getattr(record, "rows_by_table", {}),
            "extra": getattr(record, "extra", {}),
        }
        r = record
        with self._transaction() as con:
            run(con, f"DELETE FROM {qualified(meta.SYNC_RUNS)} WHERE run_id = ? AND stream = ?", [r.run_id, r.stream])
            run(
                con,
                f"INSERT INTO {qualified(meta.SYNC_RUNS)} (run_id, stream, started_at, finished_at, "
                "status, rows_read, rows_written, requests, retries, rejected, quarantined, data_problems, error, "
                "cursor_before, cursor_after, details) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    r.run_id,
                    r.stream,
                    r.started_at,
                    r.finished_at,
                    r.status,
                    r.rows_read,
                    r.rows_written,
                    r.requests,
                    r.retries,
                    r.rejected,
                    getattr(r, "quarantined", 0),
                    getattr(r, "data_problems", 0),
                    r.error,
                    r.cursor_before,
                    r.cursor_after,
                    json.dumps(details, default=str, sort_keys=True),
                ],
            )
        self._write_run_log()

    def _write_run_log(self) -> None:
        cur = self.con.execute(
            f"SELECT * EXCLUDE (details) FROM {qualified(meta.SYNC_RUNS)} {meta.LATEST_RUN_PER_STREAM} ORDER BY stream"
        )
        names = [d[0] for d in cur.description]
        latest = [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
        path = run_log_path(self.data_dir)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps(latest, default=_iso, indent=2))
        os.replace(tmp, path)


def _iso(value: Any) -> str:
    return value.isoformat() if isinstance(value, dt.datetime | dt.date) else str(value)
