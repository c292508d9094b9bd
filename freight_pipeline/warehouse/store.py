"""The private working database: every write of a sync is one DuckDB transaction.

Only the pipeline opens ``{data_dir}/work/warehouse.duckdb``; readers open the published copy (see
:mod:`freight_pipeline.warehouse.publish`). A batch of changed shipments is written as ONE
transaction: their rows in every replaced table are deleted and the new rows inserted, the raw
documents upserted, rejects, failed records and data problems recorded and the stream cursor
advanced. DuckDB's WAL makes a commit durable and an interrupted transaction invisible, so after a
crash at any instant the database holds either the old cursor with the old rows or the new cursor
with the new rows: a cursor never runs ahead of the rows it covers, and no batch is half written.

Arrow tables go in by registering them with the connection and ``INSERT ... BY NAME SELECT``;
key sets (unit ids, raw documents, rejects) are registered the same way, never inlined in SQL.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, TypeVar

import duckdb
import pyarrow as pa

from freight_pipeline.lake.connect import connect_lake
from freight_pipeline.lake.settings import LakeSettings
from freight_pipeline.normalize.schema import TableSpec
from freight_pipeline.warehouse import meta
from freight_pipeline.warehouse.conflicts import retried_on_conflict
from freight_pipeline.warehouse.ddl import (
    connect,
    ensure_tables,
    memory_limit,
    qualified,
    quote,
    run,
    storage_version,
)
from freight_pipeline.warehouse.paths import (  # noqa: F401 (re-exported: where they were)
    DB_NAME,
    LAKE_SCRATCH,
    RUN_LOG,
    WORK_DIR,
    read_run_log,
    run_log_path,
    working_db_path,
)
from freight_pipeline.warehouse.publish import PublishResult, publish
from freight_pipeline.warehouse.reads import WarehouseReads
from freight_pipeline.warehouse.records import (
    DEFAULT_BACKOFF,
    Backoff,
    BatchWrite,
    DataProblem,
    Quarantined,
    Reject,
    ReplaceOutcome,
    WriteStats,
)
from freight_pipeline.warehouse.row_writes import (  # noqa: F401 (RepeatedKey re-exported)
    RepeatedKey,
    RowWrites,
    _refuse_repeated_keys,
    _scalar,
    _without,
)
from freight_pipeline.warehouse.run_log import RunLog

log = logging.getLogger(__name__)
T = TypeVar("T")

_TS = pa.timestamp("us", tz="UTC")


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class Warehouse(RowWrites, WarehouseReads, RunLog):
    """The working DuckDB database of one data directory, with the given ``freight`` tables.

    ``tables`` are the source tables (normally ``normalize.FREIGHT_TABLES``); the ``freight_meta``
    tables are always added. Opening creates what is missing (:meth:`ensure_schema`). One process
    writes at a time (DuckDB's file lock); use one ``Warehouse`` per process and do not share it
    between threads.
    """

    def __init__(
        self,
        data_dir: Path,
        tables: Sequence[TableSpec],
        *,
        ensure_schema: bool = True,
        lake: LakeSettings | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.lake = lake
        self.path = working_db_path(self.data_dir)
        self.tables: tuple[TableSpec, ...] = tuple(tables)
        self.meta_tables: tuple[TableSpec, ...] = meta.META_TABLES
        self._by_name: dict[str, TableSpec] = {}
        for spec in (*self.tables, *self.meta_tables):
            self._by_name[spec.qualified_name] = spec
            self._by_name.setdefault(spec.name, spec)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._in_transaction: list[str] | None = None
        self._con: duckdb.DuckDBPyConnection | None = (
            # a new working database in the published file's format, so that a publish is a byte copy
            connect(self.path, new_storage_version=None if self.path.exists() else storage_version())
            if lake is None
            else connect_lake(lake, self.path.parent / LAKE_SCRATCH, memory_limit())
        )
        try:
            run(self._con, "SET TimeZone = 'UTC'")
            if ensure_schema:
                self.ensure_schema()
        except BaseException:
            self.close()
            raise

    # --- lifecycle ------------------------------------------------------------------------------

    def __enter__(self) -> Warehouse:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection (DuckDB checkpoints the WAL into the file on close)."""
        if self._con is not None:
            self._con.close()
            self._con = None

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        if self._con is None:
            raise RuntimeError("the warehouse is closed")
        return self._con

    def checkpoint(self) -> None:
        """Fold the WAL into the file (embedded only: a lake commits every transaction to its catalog)."""
        if self.lake is None:
            run(self.con, "CHECKPOINT")

    @retried_on_conflict
    def ensure_schema(self) -> list[str]:
        """Create schemas and tables, add columns specs gained; returns the migration steps taken."""
        with self._transaction() as con:
            return ensure_tables(con, (*self.tables, *self.meta_tables), key_constraints=self.lake is None)

    def spec(self, name: str) -> TableSpec:
        """The spec of ``name`` (``shipments`` or ``freight.shipments``)."""
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"unknown warehouse table {name!r}") from None

    @property
    def unit_tables(self) -> tuple[TableSpec, ...]:
        """The per-shipment tables (those with a replace key)."""
        return tuple(spec for spec in self.tables if spec.replace_key is not None)

    def publish(self, schemas: Sequence[str] | None = None, **options: Any) -> PublishResult:
        """Publish this working database (see :func:`freight_pipeline.warehouse.publish.publish`)."""
        return publish(self.data_dir, schemas, connection=self.con, **options)

    # --- transactions ---------------------------------------------------------------------------

    @contextmanager
    def _transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """BEGIN ... COMMIT, ROLLBACK on any error; Arrow views registered inside are dropped after."""
        con = self.con
        self._in_transaction = []
        con.begin()
        try:
            yield con
        except BaseException:
            con.rollback()
            raise
        else:
            con.commit()
        finally:
            names, self._in_transaction = self._in_transaction, None
            for name in names:
                with suppress(duckdb.Error):
                    con.unregister(name)

    @contextmanager
    def _registered(self, table: pa.Table) -> Iterator[str]:
        """Expose an Arrow table to SQL under a unique view name for the duration of the block
        (inside a transaction: until it ends, since an aborted transaction refuses ``unregister``)."""
        name = f"_wh_{uuid.uuid4().hex[:12]}"
        self.con.register(name, table)
        if self._in_transaction is not None:
            self._in_transaction.append(name)
            yield name
            return
        try:
            yield name
        finally:
            self.con.unregister(name)

    # --- batches of shipments -------------------------------------------------------------------

    @retried_on_conflict
    def apply_batch(
        self,
        run_id: str,
        batch: BatchWrite,
        *,
        backoff: Backoff = DEFAULT_BACKOFF,
    ) -> WriteStats:
        """Write ``batch`` in ONE transaction (all or nothing); see :class:`BatchWrite`."""
        gone = sorted({int(i) for i in batch.deleted_ids})
        replaced = {self._unit_spec(name).qualified_name: sorted({int(i) for i in ids})
                    for name, ids in batch.replaced.items()}
        both = set(gone) & {i for ids in replaced.values() for i in ids}
        if both:
            raise ValueError(f"ids both replaced and deleted: {sorted(both)[:10]}")
        incoming = {self._unit_spec(name).qualified_name: table for name, table in batch.tables.items()}
        for name, table in incoming.items():
            if name not in replaced:
                raise ValueError(f"rows given for {name}, which is not among the replaced tables")
            self._check_units(self.spec(name), table, replaced[name])

        synced_at = _now()
        stats = WriteStats()
        with self._transaction() as con:
            unchanged = self._same_content(batch.raw_documents)
            if unchanged:  # read again exactly as held: their rows stay as they are (audit columns too)
                replaced = {name: [i for i in ids if i not in unchanged] for name, ids in replaced.items()}
                incoming = {name: _without(table, self.spec(name).replace_key or "", unchanged)
                            for name, table in incoming.items()}
            views: dict[tuple[int, ...], str] = {}  # one view per id set: most tables replace the same ids
            for name, ids in replaced.items():
                spec = self.spec(name)
                stats.deleted[spec.name] = self._delete_ids(spec, spec.replace_key or "", ids, views)
            requeued = {(q.stream, q.record_key) for q in batch.quarantined}
            for stream, ids in [*batch.loaded.items(), *batch.settled.items()]:
                if ids:
                    # a record this batch quarantines again keeps its entry: its attempts count on
                    leaving = sorted({i for i in ids if (stream, str(i)) not in requeued})
                    self._clear_records(stream, self._ids_view(sorted(set(ids)), views),
                                        self._ids_view(leaving, views) if leaving else None)
            if gone:
                for spec in self.unit_tables:
                    removed = self._delete_ids(spec, spec.replace_key or "", gone, views)
                    stats.deleted[spec.name] = stats.deleted.get(spec.name, 0) + removed
                for spec in (meta.RAW_SHIPMENTS, meta.QUARANTINE, meta.DATA_PROBLEMS):
                    self._delete_ids(spec, "shipment_id", gone, views)
            for name in replaced:
                table = incoming.get(name)
                spec = self.spec(name)
                stats[spec.name] = self._insert_rows(spec, table, synced_at, run_id) if table is not None else 0
            written = {i for ids in batch.loaded.values() for i in ids} - unchanged
            self._record_changes([*written, *gone], run_id, synced_at)
            self._upsert_raw(batch.raw_documents, run_id)
            self._upsert_rejects(batch.rejects, run_id, synced_at)
            self._insert_problems(batch.problems, run_id, synced_at)
            self._quarantine(batch.quarantined, run_id, synced_at, backoff)
            if batch.cursor is not None:
                self._set_cursor(con, batch.cursor[0], batch.cursor[1], run_id, synced_at)
        return stats

    @retried_on_conflict
    def forget_changes(self, until: dt.datetime) -> int:
        """After a complete, successful dbt build that began at ``until``: the changes it covered go."""
        with self._transaction() as con:
            return _scalar(con, f"DELETE FROM {qualified(meta.CHANGED_SHIPMENTS)} WHERE changed_at <= ?", [until])

    def _unit_spec(self, name: str) -> TableSpec:
        spec = self.spec(name)
        if spec.replace_key is None or spec not in self.tables:
            raise ValueError(f"{spec.qualified_name} is not a per-shipment table; use replace_table()")
        return spec

    # --- full refresh ---------------------------------------------------------------------------

    @retried_on_conflict
    def replace_table(
        self,
        run_id: str,
        spec: TableSpec | str,
        table: pa.Table,
        *,
        stream: str | None = None,
        cursor: tuple[str, str] | None = None,
        rejects: Sequence[Reject] = (),
        quarantined: Sequence[Quarantined] | None = None,
        problems: Sequence[DataProblem] | None = None,
        backoff: Backoff = DEFAULT_BACKOFF,
    ) -> ReplaceOutcome:
        """Make ``spec``'s table hold exactly ``table`` (a full refresh), writing only differences.

        Rows are compared on the business columns (audit columns excluded). When nothing differs,
        the table is not written at all: its rows keep their ``_synced_at`` and the publish keeps
        its Parquet file. Otherwise, in ONE transaction, rows that are no longer present (or
        changed) are deleted and new or changed rows inserted, so unchanged rows keep their audit
        columns. ``rejects`` are recorded either way; ``cursor`` (or, when only ``stream`` is given,
        ``{"rows": n}``) is set only when the table changed. ``quarantined`` and ``problems`` (given
        with ``stream``) replace that stream's whole retry queue and data problems: a full refresh
        re-reads every record, so what is not failing now has loaded.
        """
        target = self.spec(spec) if isinstance(spec, str) else spec
        _refuse_repeated_keys(target, table)
        cols = ", ".join(quote(c.name) for c in target.columns)
        typed = ", ".join(f"CAST({quote(c.name)} AS {c.type}) AS {quote(c.name)}" for c in target.columns)
        pk = ", ".join(quote(k) for k in target.primary_key)
        match = " AND ".join(f"t.{quote(k)} = g.{quote(k)}" for k in target.primary_key)
        synced_at = _now()
        with self._transaction() as con, self._registered(table) as view:
            new_rows = f"SELECT {typed} FROM {view} EXCEPT SELECT {cols} FROM {qualified(target)}"
            gone_rows = f"SELECT {cols} FROM {qualified(target)} EXCEPT SELECT {typed} FROM {view}"
            total_before = _scalar(con, f"SELECT count(*) FROM {qualified(target)}")
            n_new = _scalar(con, f"SELECT count(*) FROM ({new_rows})")
            n_gone = _scalar(con, f"SELECT count(*) FROM ({gone_rows})")
            changed = n_new > 0 or n_gone > 0 or total_before != table.num_rows
            deleted = written = 0
            if changed:
                deleted = _scalar(
                    con,
                    f"DELETE FROM {qualified(target)} t USING (SELECT {pk} FROM ({gone_rows})) g WHERE {match}",
                )
                audit = ", $synced_at AS _synced_at, $run_id AS _run_id" if target.audit else ""
                params = {"synced_at": synced_at, "run_id": run_id} if target.audit else {}
                written = _scalar(
                    con,
                    f"INSERT INTO {qualified(target)} BY NAME SELECT *{audit} FROM ({new_rows})",
                    params,
                )
                if cursor is None and stream is not None:
                    cursor = (stream, json.dumps({"rows": table.num_rows}))
                if cursor is not None:
                    self._set_cursor(con, cursor[0], cursor[1], run_id, synced_at)
            self._upsert_rejects(rejects, run_id, synced_at)
            if stream is not None and quarantined is not None:
                run(con, f"DELETE FROM {qualified(meta.QUARANTINE)} WHERE stream = ? AND record_key NOT IN "
                    f"(SELECT unnest(?::VARCHAR[]))", [stream, [q.record_key for q in quarantined]])
                self._quarantine(quarantined, run_id, synced_at, backoff)
            if stream is not None and problems is not None:
                run(con, f"DELETE FROM {qualified(meta.DATA_PROBLEMS)} WHERE stream = ?", [stream])
                self._insert_problems(problems, run_id, synced_at)
            total = _scalar(con, f"SELECT count(*) FROM {qualified(target)}")
        return ReplaceOutcome(target.qualified_name, changed, written, deleted, total)

    # --- cursors ------------------------------------------------------------------------------------

    @retried_on_conflict
    def set_cursor(self, stream: str, value: str | None, run_id: str) -> None:
        """Set a cursor on its own (e.g. an operator's reset); data batches set it themselves."""
        with self._transaction() as con:
            self._set_cursor(con, stream, value, run_id, _now())
