"""Lake mode's publish, readers and maintenance, on DuckLake snapshots.

Every commit of the sync (one batch: its rows in every table plus the cursor) is one DuckLake
snapshot, so a reader of the latest snapshot already sees committed, consistent source tables. The
dbt build, though, commits mart by mart; so the publish records the snapshot a whole successful
build ended at in ``freight_meta.published_snapshots``, and readers who want marts and source
tables of one run (dashboards) open THAT snapshot (:func:`connect_published`), as embedded readers
open the published copy. Maintenance (:func:`maintain`) never expires it.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

import duckdb

from freight_pipeline.lake.connect import attach_sql, connect_lake, literal
from freight_pipeline.lake.settings import LAKE_ALIAS, LakeSettings
from freight_pipeline.warehouse.ddl import first, run
from freight_pipeline.warehouse.publish import UnsettledWarehouse, unsettled_runs

PUBLISHED_SNAPSHOTS = "freight_meta.published_snapshots"
DEFAULT_RETENTION = dt.timedelta(days=7)
"""How long snapshots stay readable (time travel) before maintenance expires them."""
REWRITE_DELETED_SHARE = 0.1
"""A data file is rewritten without its deleted rows once this share of them is deleted: every changed
shipment deletes its old rows, so files collect delete files (DuckLake's own default waits for 95 %)."""
ORPHAN_AGE = dt.timedelta(hours=1)
"""A file no snapshot references is deleted once this old: younger ones may be a running writer's,
written before its commit."""


@dataclass(frozen=True)
class PublishedSnapshot:
    snapshot_id: int
    published_at: dt.datetime
    run_id: str


def current_snapshot(con: duckdb.DuckDBPyConnection) -> int:
    return int(first(run(con, f"SELECT id FROM {LAKE_ALIAS}.current_snapshot()"))[0])


def publish_snapshot(con: duckdb.DuckDBPyConnection, run_id: str) -> PublishedSnapshot:
    """Record the lake's current snapshot as the published one; UnsettledWarehouse (nothing recorded)
    when a stream or the dbt build of the latest run failed, as the embedded publish refuses."""
    unsettled = unsettled_runs(con)
    if unsettled:
        described = "; ".join(f"{stream} {status} (run {run})" for stream, status, run in unsettled)
        raise UnsettledWarehouse(f"not published: the latest run of some streams did not succeed: {described}")
    run(con, f"CREATE TABLE IF NOT EXISTS {PUBLISHED_SNAPSHOTS} "
             "(snapshot_id BIGINT NOT NULL, published_at TIMESTAMPTZ NOT NULL, run_id VARCHAR NOT NULL)")
    snapshot = PublishedSnapshot(current_snapshot(con), dt.datetime.now(dt.UTC), run_id)
    run(con, f"INSERT INTO {PUBLISHED_SNAPSHOTS} VALUES (?, ?, ?)",
        [snapshot.snapshot_id, snapshot.published_at, snapshot.run_id])
    return snapshot


def latest_published(con: duckdb.DuckDBPyConnection) -> PublishedSnapshot | None:
    exists = first(run(con, "SELECT count(*) FROM duckdb_tables() WHERE database_name = current_database() "
                            "AND schema_name = 'freight_meta' AND table_name = 'published_snapshots'"))
    if not exists or not exists[0]:
        return None
    row = first(run(con, f"SELECT snapshot_id, published_at, run_id FROM {PUBLISHED_SNAPSHOTS} "
                         "ORDER BY snapshot_id DESC LIMIT 1"))
    return None if row is None else PublishedSnapshot(int(row[0]), row[1], str(row[2]))


def open_published_snapshot(
    lake: LakeSettings, scratch: Path, memory_limit: str = "512MB"
) -> tuple[duckdb.DuckDBPyConnection, PublishedSnapshot | None]:
    """:func:`connect_published`'s connection and the published snapshot it reads (None: nothing
    published yet, the connection reads the latest snapshot)."""
    con = connect_lake(lake, scratch, memory_limit, read_only=True)
    try:
        published = latest_published(con)
        if published is not None:  # the same connection, attached again as of that snapshot
            run(con, "USE memory")
            run(con, f"DETACH {LAKE_ALIAS}")
            run(con, attach_sql(lake, read_only=True, snapshot=published.snapshot_id))
            run(con, f"USE {LAKE_ALIAS}")
    except BaseException:
        con.close()
        raise
    return con, published


def connect_published(lake: LakeSettings, scratch: Path, memory_limit: str = "512MB") -> duckdb.DuckDBPyConnection:
    """A read-only connection to the lake as of its latest published snapshot (the latest snapshot when
    none was published yet), attached as ``lake`` and used as the default catalog."""
    return open_published_snapshot(lake, scratch, memory_limit)[0]


@dataclass(frozen=True)
class MaintenanceResult:
    flushed_inlined: int
    merged_files: int
    expired_snapshots: int
    removed_files: int
    kept_from: dt.datetime


def maintain(con: duckdb.DuckDBPyConnection, retention: dt.timedelta = DEFAULT_RETENTION) -> MaintenanceResult:
    """Compaction and expiry: small inlined inserts flushed to Parquet, files with deleted rows rewritten
    without them, adjacent small files merged,
    snapshots older than ``retention`` (but never the latest published one) expired, the files only
    they used deleted, and orphaned files (older than ``ORPHAN_AGE``) too. Safe while writers run
    (each step is its own DuckLake transaction)."""
    cutoff = dt.datetime.now(dt.UTC) - retention
    published = latest_published(con)
    if published is not None:
        taken = first(run(con, f"SELECT snapshot_time FROM ducklake_snapshots({literal(LAKE_ALIAS)}) "
                               "WHERE snapshot_id = ?", [published.snapshot_id]))
        if taken is not None and taken[0] is not None:
            cutoff = min(cutoff, taken[0].astimezone(dt.UTC))
    flushed = run(con, f"CALL ducklake_flush_inlined_data({literal(LAKE_ALIAS)})")
    rewritten = run(con, f"CALL ducklake_rewrite_data_files({literal(LAKE_ALIAS)}, "
                         f"delete_threshold => {REWRITE_DELETED_SHARE})")
    merged = run(con, f"CALL ducklake_merge_adjacent_files({literal(LAKE_ALIAS)})")
    expired = run(con, f"CALL ducklake_expire_snapshots({literal(LAKE_ALIAS)}, older_than => ?)", [cutoff])
    removed = run(con, f"CALL ducklake_cleanup_old_files({literal(LAKE_ALIAS)}, older_than => ?)", [cutoff])
    # files no snapshot references: left by a writer killed between writing its Parquet and committing
    orphans = run(con, f"CALL ducklake_delete_orphaned_files({literal(LAKE_ALIAS)}, older_than => ?)",
                  [min(cutoff, dt.datetime.now(dt.UTC) - ORPHAN_AGE)])
    return MaintenanceResult(len(flushed), len(rewritten) + len(merged), len(expired), len(removed) + len(orphans),
                             cutoff)
