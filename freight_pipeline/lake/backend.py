"""Lake mode's storage (:class:`LakeBackend`): the warehouse as a DuckLake written by several
processes at once, its publish, readers and maintenance on DuckLake snapshots; and the one choice of
the storage from the configuration (:func:`storage_from_env`).

Concurrent writers: a write whose transaction met another writer's commit that DuckLake could not
merge (both created a table, say) rolled back, so it is run again (:meth:`LakeBackend.retried`).

Every commit of the sync (one batch: its rows in every table plus the cursor) is one DuckLake
snapshot, so a reader of the latest snapshot already sees committed, consistent source tables. The
dbt build, though, commits mart by mart; so the publish records the snapshot a whole successful
build ended at in ``freight_meta.published_snapshots``, and readers who want marts and source
tables of one run (dashboards) open THAT snapshot (:func:`connect_published`), as embedded readers
open the published copy. Maintenance (:func:`maintain`) never expires it.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import random
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import duckdb

from freight_pipeline.config import Settings, StorageSettings, load_settings
from freight_pipeline.lake.connect import (
    CONFLICT_ATTEMPTS,
    LakeCommitConflict,
    attach_sql,
    catalog_writes,
    connect_lake,
    is_commit_conflict,
)
from freight_pipeline.lake.settings import LAKE_ALIAS, LAKE_DBT_TARGET, LAKE_METADATA, LakeSettings
from freight_pipeline.normalize.schema import Column, TableSpec
from freight_pipeline.process_end import unless_stop_asked
from freight_pipeline.text import error_in_one_line
from freight_pipeline.warehouse import meta
from freight_pipeline.warehouse.backend import PublishedState, StorageBackend, UnsettledWarehouse, unsettled_runs
from freight_pipeline.warehouse.comments import DESCRIBED_TABLES, describe_tables
from freight_pipeline.warehouse.ddl import SYNC_THREADS, explained_out_of_memory, first, literal, quote, run
from freight_pipeline.warehouse.embedded import EmbeddedDuckDB
from freight_pipeline.warehouse.paths import LAKE_SCRATCH, WORK_DIR
from freight_pipeline.warehouse.store import SCHEMA_STATE, open_warehouse, refuse_newer
from freight_pipeline.warehouse.writer_lock import writer_lock

log = logging.getLogger(__name__)
T = TypeVar("T")


PUBLISHED_SNAPSHOTS_TABLE = TableSpec(
    "freight_meta",
    "published_snapshots",
    (
        Column("snapshot_id", "BIGINT", "the lake's snapshot a successful run ended at: what readers open",
               nullable=False),
        Column("published_at", "TIMESTAMPTZ", "when the run published it", nullable=False),
        Column("run_id", "VARCHAR", "the run that published it", nullable=False),
    ),
    ("snapshot_id",),
    "The lake's published snapshots, the newest what readers and `freight-pipeline status` open (lake mode only); "
    "read in a published snapshot, the publishes before it (its own row is written after it).",
    replace_key=None,
    audit=False,
)
PUBLISHED_SNAPSHOTS = PUBLISHED_SNAPSHOTS_TABLE.qualified_name
DEFAULT_RETENTION = dt.timedelta(days=7)
"""How long snapshots stay readable (time travel) before maintenance expires them."""
REWRITE_DELETED_SHARE = 0.1
"""A data file is rewritten without its deleted rows once this share of them is deleted: every changed
shipment deletes its old rows, so files collect delete files (DuckLake's own default waits for 95 %)."""
MAINTENANCE_WAIT = dt.timedelta(hours=1)
"""How long maintenance waits for a sync of its data directory to end (:meth:`LakeBackend.maintain`)."""
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
    """Record the lake's current snapshot as the published one; UnsettledWarehouse (nothing recorded) when a run
    left a stream or the dbt build unsettled, as the embedded publish refuses (a stream that failed and settled, the
    others' data published anyway, is published as the embedded copy is)."""
    unsettled = unsettled_runs(con)
    if unsettled:
        described = "; ".join(f"{stream} {status} in run {run_id}" for stream, run_id, status in unsettled)
        raise UnsettledWarehouse(f"not published: the latest run of some streams did not succeed: {described}")
    run(con, PUBLISHED_SNAPSHOTS_TABLE.ddl(key_constraint=False, storage_hints=False))
    describe_tables(con, (*DESCRIBED_TABLES, PUBLISHED_SNAPSHOTS_TABLE))  # in the snapshot readers open
    snapshot = PublishedSnapshot(current_snapshot(con), dt.datetime.now(dt.UTC), run_id)
    unless_stop_asked()  # a stop of a run's thread no signal reaches, before readers see anything
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


def retried(what: str, attempt: Callable[[], T]) -> T:
    """``attempt()`` run again (after a growing, jittered wait) while its transaction met a concurrent
    writer's commit DuckLake could not merge: it rolled back, so running it again is safe.
    LakeCommitConflict after ``CONFLICT_ATTEMPTS``."""
    for number in range(1, CONFLICT_ATTEMPTS + 1):
        try:
            return attempt()
        except duckdb.TransactionException as exc:
            if not is_commit_conflict(exc):
                raise
            reason = error_in_one_line(exc, 600)
            if number == CONFLICT_ATTEMPTS:
                raise LakeCommitConflict(f"{what} met a concurrent writer's commit {number} times: {reason}") from exc
            log.warning("%s met a concurrent commit (attempt %d): %s", what, number, reason)
            time.sleep(min(5.0, 0.05 * 2**number) * (0.5 + random.random()))
    raise AssertionError("unreachable")


def expirable_snapshots(con: duckdb.DuckDBPyConnection, cutoff: dt.datetime, published: int | None) -> list[int]:
    """The ids of the lake's snapshots taken before ``cutoff`` and before snapshot ``published`` (None: nothing
    published yet): never the latest, nor the published one. Instants are compared (``ducklake_snapshots``' times,
    TIMESTAMPTZ), not the catalog's text: DuckLake 1.5.5's own ``older_than`` on a SQLite catalog expired every
    snapshot of the day but the latest when given a cutoff an hour ago."""
    rows = run(con, f"SELECT snapshot_id, snapshot_time FROM ducklake_snapshots({literal(LAKE_ALIAS)})")
    latest = max((int(snapshot_id) for snapshot_id, _ in rows), default=None)
    return sorted(int(snapshot_id) for snapshot_id, taken in rows
                  if taken is not None and taken.astimezone(dt.UTC) < cutoff and int(snapshot_id) != latest
                  and (published is None or int(snapshot_id) < published))


@dataclass(frozen=True)
class MaintenanceResult:
    flushed_inlined: int
    merged_files: int
    expired_snapshots: int
    removed_files: int
    kept_from: dt.datetime

    def summary(self) -> str:
        return (f"flushed {self.flushed_inlined} inlined tables, merged {self.merged_files} files, expired "
                f"{self.expired_snapshots} snapshots older than {self.kept_from:%Y-%m-%d %H:%M} UTC, deleted "
                f"{self.removed_files} files")

    def metadata(self) -> dict[str, Any]:
        return {"flushed inlined tables": self.flushed_inlined, "merged files": self.merged_files,
                "expired snapshots": self.expired_snapshots, "deleted files": self.removed_files,
                "kept from": self.kept_from}


def maintain(con: duckdb.DuckDBPyConnection, retention: dt.timedelta = DEFAULT_RETENTION) -> MaintenanceResult:
    """Compaction and expiry: small inlined inserts flushed to Parquet, files with deleted rows rewritten
    without them, adjacent small files merged, snapshots older than ``retention`` and than the latest published one
    (never it, never the latest) expired (:func:`expirable_snapshots`), the files only they used deleted, and
    orphaned files (older than ``ORPHAN_AGE``) too. Safe while writers run:
    each step is its own DuckLake transaction, run again when it met a writer's commit (a compaction of a table
    a batch deleted from meanwhile is refused), as a writer's transaction is (:func:`retried`)."""
    cutoff = _now() - retention
    published = latest_published(con)
    if published is not None:
        taken = first(run(con, f"SELECT snapshot_time FROM ducklake_snapshots({literal(LAKE_ALIAS)}) "
                               "WHERE snapshot_id = ?", [published.snapshot_id]))
        if taken is not None and taken[0] is not None:
            cutoff = min(cutoff, taken[0].astimezone(dt.UTC))

    def step(call: str, *parameters: object) -> list[Any]:
        name = call.partition("(")[0]
        return retried(f"lake maintenance ({name})", lambda: run(con, f"CALL {call}", list(parameters) or None))

    lake = literal(LAKE_ALIAS)
    flushed = step(f"ducklake_flush_inlined_data({lake})")
    rewritten = step(f"ducklake_rewrite_data_files({lake}, delete_threshold => {REWRITE_DELETED_SHARE})")
    merged = step(f"ducklake_merge_adjacent_files({lake})")
    # the snapshots to expire chosen here, not by ``older_than`` (wrong on a SQLite catalog: expirable_snapshots)
    doomed = expirable_snapshots(con, cutoff, None if published is None else published.snapshot_id)
    expired = step(f"ducklake_expire_snapshots({lake}, versions => ?)", doomed) if doomed else []
    removed = step(f"ducklake_cleanup_old_files({lake}, older_than => ?)", cutoff)
    # files no snapshot references: left by a writer killed between writing its Parquet and committing
    orphans = step(f"ducklake_delete_orphaned_files({lake}, older_than => ?)",
                   min(cutoff, _now() - ORPHAN_AGE))
    return MaintenanceResult(len(flushed), len(rewritten) + len(merged), len(expired), len(removed) + len(orphans),
                             cutoff)


@dataclass(frozen=True)
class LakePublication:
    """A lake's publish: the snapshot recorded as published, and the rows the warehouse's tables hold."""

    snapshot: PublishedSnapshot
    lake: str
    """The lake's description (no secrets)."""
    row_counts: dict[str, int]

    def summary(self) -> str:
        return f"published snapshot {self.snapshot.snapshot_id} of the {self.lake}"

    def metadata(self) -> dict[str, Any]:
        return {"snapshot_id": self.snapshot.snapshot_id, "lake": self.lake,
                "row_counts": dict(sorted(self.row_counts.items()))}


class LakeBackend:
    """The working warehouse in a DuckLake (``lake``): several writers at once, each commit a snapshot
    readers of the latest see; the publish records the snapshot a whole successful build ended at."""

    key_constraints = False
    storage_hints = False
    concurrent_writers = True
    deletes_return_rows = False
    readers_see_commits = True
    dbt_target: str | None = LAKE_DBT_TARGET

    def __init__(self, lake: LakeSettings, duckdb_settings: StorageSettings | None = None) -> None:
        self.lake = lake
        self.duckdb_settings = duckdb_settings or StorageSettings()

    def dbt_environment(self) -> dict[str, str]:
        return self.lake.dbt_environment()

    def describe(self, data_dir: Path) -> str:
        return self.lake.describe()

    def published_where(self, data_dir: Path) -> str:
        return f"in the {self.lake.describe()}"

    def working_database_missing(self, data_dir: Path) -> bool:
        return False  # the catalog is created by the first connection

    def nothing_published(self, data_dir: Path) -> bool:
        return False  # only a connection to the catalog tells

    def connect(self, data_dir: Path) -> duckdb.DuckDBPyConnection:
        return connect_lake(self.lake, _spill(data_dir, LAKE_SCRATCH), self.duckdb_settings.sync_memory_limit,
                            threads=SYNC_THREADS)

    def connect_read_only(self, data_dir: Path) -> duckdb.DuckDBPyConnection:
        """The lake's latest snapshot (readers never wait for writers here)."""
        return connect_lake(self.lake, _spill(data_dir, LAKE_SCRATCH), self.duckdb_settings.sync_memory_limit,
                            read_only=True)

    def retried(self, what: str, attempt: Callable[[], T]) -> T:
        """:func:`retried`."""
        return retried(what, attempt)

    def writing(self) -> AbstractContextManager[None]:
        """:func:`catalog_writes`: a SQLite catalog's writers take turns."""
        return catalog_writes(self.lake)

    def prime_tables(self, con: duckdb.DuckDBPyConnection, specs: Sequence[TableSpec]) -> list[str]:
        """Each table of ``specs`` never written yet, written once and emptied in one transaction: a row of
        placeholders (:func:`_placeholder`) inserted and deleted before the commit, so that no snapshot holds it
        and no change feed shows it. DuckLake 1.5.5 plans every scan of a table without statistics by asking its
        catalog once per column, on every statement (fixed by duckdb/ducklake pull request 1313, which the 1.5.5
        extension package predates): a table of 40 columns cost 150 ms a ``SELECT *`` against 8 ms once written,
        and a lake keeps such tables for good (an empty retry queue, no data problems, no sea legs); after this
        commit the table has statistics (no rows, and the placeholders' values inside its columns' ranges, which
        only widen). The tables it primed."""
        wanted = {(spec.schema, spec.name) for spec in specs}
        unwritten = [found for found in run(con, _UNWRITTEN_TABLES) if tuple(found) in wanted]
        if not unwritten:
            return []
        required: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for schema, table, column, kind in run(
            con, "SELECT schema_name, table_name, column_name, data_type FROM duckdb_columns() "
                 "WHERE database_name = ? AND NOT is_nullable ORDER BY column_index", [LAKE_ALIAS],
        ):
            required.setdefault((schema, table), []).append((column, kind))
        for schema, table in unwritten:
            name = f"{quote(schema)}.{quote(table)}"
            columns = required.get((schema, table), [])
            if columns:
                run(con, f"INSERT INTO {name} ({', '.join(quote(c) for c, _ in columns)}) "
                         f"VALUES ({', '.join(_placeholder(kind) for _, kind in columns)})")
            else:
                run(con, f"INSERT INTO {name} DEFAULT VALUES")
            run(con, f"DELETE FROM {name}")
        return [f"{schema}.{table}" for schema, table in unwritten]

    def publish(self, data_dir: Path, run_id: str) -> LakePublication:
        """Record the snapshot this run's whole, successful build ended at (what readers open)."""
        with open_warehouse(data_dir, self) as held:
            snapshot = publish_snapshot(held.con, run_id)
            counts = held.reads.row_counts()
        return LakePublication(snapshot, self.lake.describe(), counts)

    def open_published(self, data_dir: Path, spill: str) -> PublishedState:
        """The lake as of its published snapshot (before the first publish: as of its latest, not published)."""
        con, snapshot = open_published_snapshot(self.lake, _spill(data_dir, spill),
                                                self.duckdb_settings.publish_memory_limit)
        where = self.published_where(data_dir)
        database, parquet = self.lake.describe(), (
            f"{self.lake.data_uri.rstrip('/')}/ (the lake's data files: a table's current ones are the catalog's "
            f"to say, ducklake_list_files('{LAKE_ALIAS}', '<table>', schema => '<schema>'))")
        if snapshot is None:
            return PublishedState(con, where, database, parquet, None, None, is_published=False)
        published = snapshot.published_at.astimezone(dt.UTC)
        return PublishedState(
            con, f"{where} (snapshot {snapshot.snapshot_id}, published {published:%Y-%m-%d %H:%M} UTC)", database,
            parquet, f"snapshot {snapshot.snapshot_id}", published.isoformat(timespec="seconds"),
        )

    def maintain(self, data_dir: Path, retention: dt.timedelta = DEFAULT_RETENTION,
                 run_id: str = "lake-maintenance") -> MaintenanceResult:
        """:func:`maintain` in a connection of its own, under the publish's memory limit (compaction
        reads and writes whole files), holding ``data_dir``'s writer lock as run ``run_id``: DuckLake 1.5.5's
        compaction does not see a delete another writer commits while it runs (the deleted rows come back, a
        replaced shipment's rows then twice), so the syncs of this data directory take turns with it (a sync
        running: it waits up to :data:`MAINTENANCE_WAIT`; one starting meanwhile is skipped, as beside any run, and
        a Dagster schedule's tick too)."""
        settings = self.duckdb_settings
        with writer_lock(data_dir, run_id, wait=MAINTENANCE_WAIT.total_seconds()), \
                explained_out_of_memory("lake maintenance", settings, "publish"), \
                connect_lake(self.lake, _spill(data_dir, LAKE_SCRATCH), settings.publish_memory_limit) as con:
            refuse_newer(_ensured_signature(con), data_dir)  # a later generation's lake: nothing rewritten
            return maintain(con, retention)


_UNWRITTEN_TABLES = (
    f"SELECT s.schema_name, t.table_name FROM {LAKE_METADATA}.ducklake_table t JOIN {LAKE_METADATA}.ducklake_schema s "
    f"USING (schema_id) LEFT JOIN {LAKE_METADATA}.ducklake_table_stats st USING (table_id) "
    "WHERE t.end_snapshot IS NULL AND s.end_snapshot IS NULL AND st.table_id IS NULL"
)
"""The lake's current tables that have no statistics: never written (DuckLake's own catalog tables)."""


def _placeholder(kind: str) -> str:
    """A value of DuckDB type ``kind`` for a NOT NULL column of a row that is deleted before it is committed: zero,
    false or the epoch (NULL for a type none of these is one of: the INSERT then names the column)."""
    return f"coalesce(TRY_CAST('0' AS {kind}), TRY_CAST('1970-01-01' AS {kind}))"


def _ensured_signature(con: duckdb.DuckDBPyConnection) -> str | None:
    """The schema signature the lake's tables were last ensured for (``store.SCHEMA_STATE``; None: none yet)."""
    try:
        row = first(run(con, f"SELECT cursor_value FROM {meta.SYNC_STATE.qualified_name} WHERE stream = ? "
                             f"{meta.LATEST_STATE}", [SCHEMA_STATE]))
    except duckdb.CatalogException:  # a lake never synced: no sync_state yet
        return None
    return None if row is None else row[0]


def _now() -> dt.datetime:
    """The maintenance's clock (a test moves it on to age the lake's snapshots)."""
    return dt.datetime.now(dt.UTC)


def _spill(data_dir: Path, name: str) -> Path:
    """Where a lake connection of ``data_dir`` spills what does not fit its memory limit."""
    return Path(data_dir) / WORK_DIR / name


def storage_from_env() -> StorageBackend:
    """The storage the configuration names, chosen once at the top (the Dagster resources, the
    commands, the dashboard's page): the lake the settings name, else the embedded DuckDB file; either with
    the DuckDB settings (``config.StorageSettings``). LakeConfigError for lake settings that cannot be used."""
    return storage_of(load_settings())


def storage_of(settings: Settings) -> StorageBackend:
    """The storage ``settings`` name (the S3 connection from this process's ``AWS_*`` variables)."""
    lake = LakeSettings.of(settings.lake, os.environ)
    return EmbeddedDuckDB(settings.storage) if lake is None else LakeBackend(lake, settings.storage)
