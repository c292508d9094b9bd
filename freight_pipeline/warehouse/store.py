"""The private working database: every write of a sync is one DuckDB transaction.

Only the pipeline opens ``{data_dir}/work/warehouse.duckdb``; readers open the published copy (see
:mod:`freight_pipeline.warehouse.publish`). A batch of changed shipments is written as ONE
transaction: their rows in every replaced table are deleted and the new rows inserted, the raw
documents upserted, rejects and detail work recorded and the stream cursor advanced. DuckDB's WAL
makes a commit durable and an interrupted transaction invisible, so after a crash at any instant
the database holds either the old cursor with the old rows or the new cursor with the new rows
(DESIGN.md rules 6 and 7).

Arrow tables go in by registering them with the connection and ``INSERT ... BY NAME SELECT``;
key sets (unit ids, raw documents, rejects) are registered the same way, never inlined in SQL.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import logging
import os
import random
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, TypeVar

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from freight_pipeline.lake.connect import CONFLICT_ATTEMPTS, LakeCommitConflict, connect_lake, is_commit_conflict
from freight_pipeline.lake.settings import LAKE_ALIAS, LakeSettings
from freight_pipeline.normalize.schema import TableSpec
from freight_pipeline.warehouse import meta
from freight_pipeline.warehouse.ddl import connect, ensure_tables, first, memory_limit, qualified, quote, run
from freight_pipeline.warehouse.listing import LiveListing
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
from freight_pipeline.warehouse.records import (
    Backoff,
    BatchWrite,
    DataProblem,
    PendingDetail,
    Quarantined,
    RawDocument,
    Reject,
    ReplaceOutcome,
    RunLike,
    WriteStats,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

_TS = pa.timestamp("us", tz="UTC")
DEFAULT_BACKOFF = Backoff(dt.timedelta(minutes=10), dt.timedelta(hours=24))


def _iso(value: Any) -> str:
    return value.isoformat() if isinstance(value, dt.datetime | dt.date) else str(value)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _json_text(payload: str | None) -> str | None:
    """Valid JSON text for a JSON column: non-JSON text becomes a JSON string instead of failing the batch."""
    if payload is None:
        return None
    try:
        json.loads(payload)
    except ValueError:
        return json.dumps(payload)
    return payload


def retried_on_conflict(method: Callable[..., T]) -> Callable[..., T]:
    """In lake mode, run a writing method again when its transaction met a concurrent writer's commit
    that DuckLake could not merge (both created a table, say): the transaction rolled back, so
    running it again is safe. Embedded: DuckDB's file lock admits one writer, nothing to retry."""

    @functools.wraps(method)
    def run_retrying(self: Warehouse, *args: Any, **kwargs: Any) -> T:
        if self.lake is None:
            return method(self, *args, **kwargs)
        for attempt in range(1, CONFLICT_ATTEMPTS + 1):
            try:
                return method(self, *args, **kwargs)
            except duckdb.TransactionException as exc:
                if not is_commit_conflict(exc):
                    raise
                reason = " ".join(str(exc).split())[:600]
                if attempt == CONFLICT_ATTEMPTS:
                    raise LakeCommitConflict(
                        f"{method.__name__} met a concurrent writer's commit {attempt} times: {reason}"
                    ) from exc
                log.warning("%s met a concurrent commit (attempt %d): %s", method.__name__, attempt, reason)
                time.sleep(min(5.0, 0.05 * 2**attempt) * (0.5 + random.random()))
        raise AssertionError("unreachable")

    return run_retrying


class Warehouse:
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
            connect(self.path) if lake is None else connect_lake(lake, self.path.parent / LAKE_SCRATCH, memory_limit())
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

    def apply_shipment_batch(
        self,
        run_id: str,
        tables: Mapping[str, pa.Table],
        unit_ids: Sequence[int],
        raw_documents: Sequence[RawDocument | tuple[int, str, dt.datetime, dt.datetime | None]] = (),
        deleted_ids: Sequence[int] = (),
        cursor: tuple[str, str] | None = None,
        rejects: Sequence[Reject] = (),
        pending: Sequence[PendingDetail] = (),
        replaced_tables: Sequence[str] | None = None,
        *,
        stream: str = "shipments",
        quarantined: Sequence[Quarantined] = (),
        problems: Sequence[DataProblem] = (),
        backoff: Backoff = DEFAULT_BACKOFF,
    ) -> WriteStats:
        """Write one batch of shipments in ONE transaction (all or nothing).

        * ``unit_ids``: shipments whose rows are replaced: in each table of ``replaced_tables``
          (default: every table given in ``tables``; an empty Arrow table means "no rows") their
          old rows are deleted and the new rows of ``tables`` inserted. Every row given must
          belong to a unit id.
        * ``deleted_ids``: shipments gone from the source: their rows vanish from every
          per-shipment table, ``raw_shipments`` and the detail queue.
        * ``raw_documents``: ``(shipment_id, json_text, fetched_at, last_modified_at)``, upserted.
        * ``rejects``: upserted into ``rejected_records`` by ``(stream, source_key, run_id)``.
        * ``pending``: (re)queued detail work; a re-queue replaces the entry.
        * ``cursor``: ``(stream, cursor_json)`` set in the same transaction, so it never runs ahead.
        * ``quarantined``: records that failed, upserted into the retry queue (attempts counted,
          next attempt after ``backoff``); a unit id that loads leaves ``stream``'s queue, and its
          ``data_problems`` are replaced by ``problems``.
        """
        units = [int(i) for i in unit_ids]
        return self.apply_batch(
            run_id,
            BatchWrite(
                tables=dict(tables),
                replaced={name: units for name in (replaced_tables if replaced_tables is not None else tables)},
                loaded={stream: units},
                deleted_ids=list(deleted_ids),
                raw_documents=[RawDocument(*doc) for doc in raw_documents],
                rejects=list(rejects),
                quarantined=list(quarantined),
                problems=list(problems),
                cursor=cursor,
            ),
            pending=pending,
            backoff=backoff,
        )

    def apply_detail_batch(
        self,
        run_id: str,
        stream: str,
        tables: Mapping[str, pa.Table],
        replaced_tables: Sequence[str],
        unit_ids: Sequence[int],
        done: Sequence[tuple[int, dt.datetime | None]] = (),
        rejects: Sequence[Reject] = (),
        cursor: str | None = None,
        *,
        quarantined: Sequence[Quarantined] = (),
        problems: Sequence[DataProblem] = (),
        backoff: Backoff = DEFAULT_BACKOFF,
    ) -> WriteStats:
        """Write one batch of a detail stream in ONE transaction and acknowledge its queue entries.

        Rows of ``unit_ids`` in ``replaced_tables`` are replaced by those in ``tables``; each
        ``(shipment_id, enqueued_at)`` of ``done`` leaves ``stream``'s queue unless it was re-queued
        meanwhile (different ``enqueued_at``); ``cursor`` (JSON text) becomes ``stream``'s cursor.
        ``quarantined``, ``problems`` and ``backoff`` as in :meth:`apply_shipment_batch`.
        """
        units = [int(i) for i in unit_ids]
        return self.apply_batch(
            run_id,
            BatchWrite(
                tables=dict(tables),
                replaced={name: units for name in replaced_tables},
                loaded={stream: units},
                rejects=list(rejects),
                quarantined=list(quarantined),
                problems=list(problems),
                cursor=(stream, cursor) if cursor is not None else None,
            ),
            done=(stream, done),
            backoff=backoff,
        )

    @retried_on_conflict
    def apply_batch(
        self,
        run_id: str,
        batch: BatchWrite,
        *,
        pending: Sequence[PendingDetail] = (),
        done: tuple[str, Sequence[tuple[int, dt.datetime | None]]] | None = None,
        backoff: Backoff = DEFAULT_BACKOFF,
    ) -> WriteStats:
        """Write ``batch`` in ONE transaction (all or nothing); see :class:`BatchWrite`.

        ``pending`` and ``done`` feed the legacy detail queue (tests of its migration only).
        """
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
                for spec in (meta.RAW_SHIPMENTS, meta.PENDING_DETAILS, meta.QUARANTINE, meta.DATA_PROBLEMS):
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
            self._enqueue(pending, run_id, synced_at)
            if done is not None and done[1]:
                self._acknowledge(done[0], done[1])
            if batch.acknowledged:
                self._drop_pending(batch.acknowledged)
            if batch.cursor is not None:
                self._set_cursor(con, batch.cursor[0], batch.cursor[1], run_id, synced_at)
        return stats

    def _ids_view(self, ids: Sequence[int], views: dict[tuple[int, ...], str]) -> str:
        """A view of ``ids`` (column ``id``), registered once per transaction (``_registered`` keeps
        what it registers inside a transaction until the transaction ends)."""
        key = tuple(ids)
        if key not in views:
            with self._registered(pa.table({"id": pa.array(key, pa.int64())})) as view:
                views[key] = view
        return views[key]

    def _delete_ids(self, spec: TableSpec, key: str, ids: Sequence[int], views: dict[tuple[int, ...], str]) -> int:
        """Delete the rows of ``spec`` whose ``key`` is one of ``ids``; how many went."""
        if not ids:
            return 0
        return self._delete_keys(spec, key, self._ids_view(ids, views))

    def _same_content(self, docs: Sequence[RawDocument]) -> set[int]:
        """Shipments written again with the content hash they hold: nothing changed for the marts."""
        hashed = [d for d in docs if d.content_hash is not None]
        if not hashed:
            return set()
        new = pa.table({"shipment_id": pa.array([int(d.shipment_id) for d in hashed], pa.int64()),
                        "content_hash": pa.array([d.content_hash for d in hashed], pa.string())})
        with self._registered(new) as view:
            rows = run(self.con, f"SELECT r.shipment_id FROM {qualified(meta.RAW_SHIPMENTS)} r JOIN {view} n "
                                 "USING (shipment_id) WHERE r.content_hash = n.content_hash")
        return {int(r[0]) for r in rows}

    def _record_changes(self, ids: Sequence[int], run_id: str, at: dt.datetime) -> None:
        """Shipments whose rows this batch wrote or deleted: what the incremental marts rebuild."""
        unique = sorted(set(ids))
        self._upsert(
            meta.CHANGED_SHIPMENTS,
            pa.table({"shipment_id": pa.array(unique, pa.int64()), "run_id": pa.array([run_id] * len(unique)),
                      "changed_at": pa.array([at] * len(unique), _TS)}),
        )

    def pending_changes(self) -> int:
        """Shipments written or deleted since the last complete dbt build."""
        return _scalar(self.con, f"SELECT count(*) FROM {qualified(meta.CHANGED_SHIPMENTS)}")

    @retried_on_conflict
    def forget_changes(self, until: dt.datetime) -> int:
        """After a complete, successful dbt build that began at ``until``: the changes it covered go."""
        with self._transaction() as con:
            return _scalar(con, f"DELETE FROM {qualified(meta.CHANGED_SHIPMENTS)} WHERE changed_at <= ?", [until])

    def _drop_pending(self, entries: Sequence[tuple[str, int]]) -> None:
        keys = pa.table({"stream": pa.array([s for s, _ in entries], pa.string()),
                         "shipment_id": pa.array([int(i) for _, i in entries], pa.int64())})
        with self._registered(keys) as view:
            run(self.con, f"DELETE FROM {qualified(meta.PENDING_DETAILS)} p USING {view} k "
                "WHERE p.stream = k.stream AND p.shipment_id = k.shipment_id")

    def _clear_records(self, stream: str, ids_view: str, leaving_view: str | None) -> None:
        """Loaded records of ``stream`` (``ids_view``): their old data problems go (new ones follow),
        and those of ``leaving_view`` (None: none) leave its retry queue."""
        for spec, view in ((meta.QUARANTINE, leaving_view), (meta.DATA_PROBLEMS, ids_view)):
            if view is None:
                continue
            run(
                self.con,
                f"DELETE FROM {qualified(spec)} WHERE stream = ? "
                f"AND record_key IN (SELECT CAST(id AS VARCHAR) FROM {view})",
                [stream],
            )

    def _insert_problems(self, problems: Sequence[DataProblem], run_id: str, at: dt.datetime) -> None:
        latest = {(p.stream, p.record_key, p.json_path): p for p in problems}
        rows = list(latest.values())
        self._upsert(
            meta.DATA_PROBLEMS,
            pa.table(
                {
                    "stream": pa.array([p.stream for p in rows], pa.string()),
                    "record_key": pa.array([p.record_key for p in rows], pa.string()),
                    "json_path": pa.array([p.json_path for p in rows], pa.string()),
                    "shipment_id": pa.array([p.shipment_id for p in rows], pa.int64()),
                    "raw_value": pa.array([_json_text(p.raw_value) for p in rows], pa.string()),
                    "reason": pa.array([p.reason for p in rows], pa.string()),
                    "run_id": pa.array([run_id] * len(rows), pa.string()),
                    "detected_at": pa.array([at] * len(rows), _TS),
                }
            ),
        )

    def _quarantine(self, entries: Sequence[Quarantined], run_id: str, at: dt.datetime, backoff: Backoff) -> None:
        """Upsert failed records: attempts counted from the held entry, the next attempt after ``backoff``."""
        if not entries:
            return
        latest = list({(q.stream, q.record_key): q for q in entries}.values())
        keys = pa.table(
            {
                "stream": pa.array([q.stream for q in latest], pa.string()),
                "record_key": pa.array([q.record_key for q in latest], pa.string()),
            }
        )
        with self._registered(keys) as view:
            held = {
                (stream, key): (attempts, first_failed)
                for stream, key, attempts, first_failed in run(
                    self.con,
                    f"SELECT q.stream, q.record_key, q.attempts, q.first_failed_at FROM {qualified(meta.QUARANTINE)} q "
                    f"JOIN {view} k ON q.stream = k.stream AND q.record_key = k.record_key",
                )
            }
        attempts = [int(held.get((q.stream, q.record_key), (0, None))[0] or 0) + 1 for q in latest]
        self._upsert(
            meta.QUARANTINE,
            pa.table(
                {
                    "stream": keys.column("stream"),
                    "record_key": keys.column("record_key"),
                    "shipment_id": pa.array([q.shipment_id for q in latest], pa.int64()),
                    "reason": pa.array([q.reason for q in latest], pa.string()),
                    "request": pa.array([q.request for q in latest], pa.string()),
                    "status_code": pa.array([q.status_code for q in latest], pa.int32()),
                    "response_excerpt": pa.array([q.response_excerpt for q in latest], pa.string()),
                    "context": pa.array([_json_text(q.context) for q in latest], pa.string()),
                    "first_failed_at": pa.array(
                        [held.get((q.stream, q.record_key), (0, None))[1] or at for q in latest], _TS
                    ),
                    "last_failed_at": pa.array([at] * len(latest), _TS),
                    "attempts": pa.array(attempts, pa.int32()),
                    "next_attempt_at": pa.array([at + backoff.delay(n) for n in attempts], _TS),
                    "run_id": pa.array([run_id] * len(latest), pa.string()),
                }
            ),
        )

    def _unit_spec(self, name: str) -> TableSpec:
        spec = self.spec(name)
        if spec.replace_key is None or spec not in self.tables:
            raise ValueError(f"{spec.qualified_name} is not a per-shipment table; use replace_table()")
        return spec

    @staticmethod
    def _check_units(spec: TableSpec, table: pa.Table, units: Sequence[int]) -> None:
        if table.num_rows == 0:
            return
        key = spec.replace_key or ""
        if key not in table.column_names:
            raise ValueError(f"{spec.qualified_name}: rows lack the replace key {key!r}")
        column = table.column(key)
        inside = pc.is_in(column, value_set=pa.array(units, column.type))
        # A null key (e.g. a memo whose shipment is unknown) belongs to no unit: its row is kept by
        # primary key only. Any other key must be one of the units replaced.
        if not pc.all(pc.or_kleene(inside, pc.is_null(column))).as_py():
            raise ValueError(f"{spec.qualified_name}: rows whose {key} is not among the unit ids")

    def _delete_keys(self, spec: TableSpec, key: str, ids_view: str) -> int:
        row = first(run(self.con, f"DELETE FROM {qualified(spec)} WHERE {quote(key)} IN (SELECT id FROM {ids_view})"))
        return int(row[0]) if row else 0

    def _insert_rows(self, spec: TableSpec, table: pa.Table, synced_at: dt.datetime, run_id: str) -> int:
        """Batched insert by name; rows with the same primary key are replaced first when the key
        does not contain the replace key (e.g. a memo that moved to another shipment)."""
        if table.num_rows == 0:
            return 0
        _refuse_repeated_keys(spec, table)
        with self._registered(table) as view:
            if spec.replace_key not in spec.primary_key:
                match = " AND ".join(f"t.{quote(k)} = i.{quote(k)}" for k in spec.primary_key)
                run(self.con, f"DELETE FROM {qualified(spec)} t USING {view} i WHERE {match}")
            audit = ", $synced_at AS _synced_at, $run_id AS _run_id" if spec.audit else ""
            params = {"synced_at": synced_at, "run_id": run_id} if spec.audit else {}
            run(self.con, f"INSERT INTO {qualified(spec)} BY NAME SELECT *{audit} FROM {view}", params)
        return table.num_rows

    def _upsert(self, spec: TableSpec, table: pa.Table) -> None:
        """Delete rows with the primary keys of ``table``, insert ``table`` (deduplicated by the caller)."""
        if table.num_rows == 0:
            return
        with self._registered(table) as view:
            match = " AND ".join(f"t.{quote(k)} = i.{quote(k)}" for k in spec.primary_key)
            run(self.con, f"DELETE FROM {qualified(spec)} t USING {view} i WHERE {match}")
            run(self.con, f"INSERT INTO {qualified(spec)} BY NAME SELECT * FROM {view}")

    def _upsert_raw(self, docs: Sequence[RawDocument], run_id: str) -> None:
        latest = {int(d.shipment_id): d for d in docs}
        rows = list(latest.values())
        self._upsert(
            meta.RAW_SHIPMENTS,
            pa.table(
                {
                    "shipment_id": pa.array([int(d.shipment_id) for d in rows], pa.int64()),
                    "document": pa.array([d.document for d in rows], pa.string()),
                    "fetched_at": pa.array([d.fetched_at for d in rows], _TS),
                    "last_modified_at": pa.array([d.last_modified_at for d in rows], _TS),
                    "run_id": pa.array([run_id] * len(rows), pa.string()),
                    "last_modified_key": pa.array([d.last_modified_key for d in rows], pa.string()),
                    "fetched_ceiling": pa.array([d.fetched_ceiling for d in rows], pa.string()),
                    "content_hash": pa.array([d.content_hash for d in rows], pa.string()),
                }
            ),
        )

    def _upsert_rejects(self, rejects: Sequence[Reject], run_id: str, at: dt.datetime) -> None:
        latest = {(r.stream, str(r.source_key)): r for r in rejects}
        rows = list(latest.values())
        self._upsert(
            meta.REJECTED_RECORDS,
            pa.table(
                {
                    "stream": pa.array([r.stream for r in rows], pa.string()),
                    "source_key": pa.array([str(r.source_key) for r in rows], pa.string()),
                    "run_id": pa.array([run_id] * len(rows), pa.string()),
                    "payload": pa.array([_json_text(r.payload) for r in rows], pa.string()),
                    "reason": pa.array([r.reason for r in rows], pa.string()),
                    "rejected_at": pa.array([at] * len(rows), _TS),
                }
            ),
        )

    def _enqueue(self, pending: Sequence[PendingDetail], run_id: str, at: dt.datetime) -> None:
        latest = {(p.stream, int(p.shipment_id)): p for p in pending}
        rows = list(latest.values())
        self._upsert(
            meta.PENDING_DETAILS,
            pa.table(
                {
                    "stream": pa.array([p.stream for p in rows], pa.string()),
                    "shipment_id": pa.array([int(p.shipment_id) for p in rows], pa.int64()),
                    "client": pa.array([p.client for p in rows], pa.string()),
                    "shipment_number": pa.array([p.shipment_number for p in rows], pa.string()),
                    "mode_of_transport": pa.array([p.mode_of_transport for p in rows], pa.string()),
                    "enqueued_at": pa.array([at] * len(rows), _TS),
                    "run_id": pa.array([run_id] * len(rows), pa.string()),
                }
            ),
        )

    def _acknowledge(self, stream: str, done: Sequence[tuple[int, dt.datetime | None]]) -> None:
        acked = pa.table(
            {
                "shipment_id": pa.array([int(i) for i, _ in done], pa.int64()),
                "enqueued_at": pa.array([at for _, at in done], _TS),
            }
        )
        with self._registered(acked) as view:
            run(
                self.con,
                f"DELETE FROM {qualified(meta.PENDING_DETAILS)} p USING {view} d "
                "WHERE p.stream = ? AND p.shipment_id = d.shipment_id "
                "AND p.enqueued_at IS NOT DISTINCT FROM d.enqueued_at",
                [stream],
            )

    def _set_cursor(
        self, con: duckdb.DuckDBPyConnection, stream: str, value: str | None, run_id: str, at: dt.datetime
    ) -> None:
        """Embedded: the stream's one row replaced (delete, then insert, in the transaction). Lake: a row
        appended, the latest per stream counting (``meta.LATEST_STATE``): DuckLake refuses a commit that
        deletes from a table another writer inserted into meanwhile, so replacing the row made every
        writer's every batch collide with the others' (a third of the commits of three writers)."""
        if self.lake is None:
            run(con, f"DELETE FROM {qualified(meta.SYNC_STATE)} WHERE stream = ?", [stream])
        run(
            con,
            f"INSERT INTO {qualified(meta.SYNC_STATE)} (stream, cursor_value, updated_at, run_id) "
            "VALUES (?, ?, ?, ?)",
            [stream, value, at, run_id],
        )

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

    # --- cursors, run log -----------------------------------------------------------------------

    def get_cursor(self, stream: str) -> str | None:
        row = first(run(self.con, f"SELECT cursor_value FROM {qualified(meta.SYNC_STATE)} WHERE stream = ? "
                                  f"{meta.LATEST_STATE}", [stream]))
        return None if row is None else row[0]

    def cursors_with_prefix(self, prefix: str) -> dict[str, str]:
        """Every stored cursor whose stream name starts with ``prefix`` (stream -> value)."""
        rows = run(self.con, f"SELECT stream, cursor_value FROM {qualified(meta.SYNC_STATE)} "
                             f"WHERE starts_with(stream, ?) {meta.LATEST_STATE}", [prefix])
        return {str(stream): str(value) for stream, value in rows if value is not None}

    def cursor_updated_at(self, stream: str) -> dt.datetime | None:
        """When ``stream``'s cursor was last set (for a full refresh: when its table last changed)."""
        row = first(run(self.con, f"SELECT updated_at FROM {qualified(meta.SYNC_STATE)} WHERE stream = ? "
                                  f"{meta.LATEST_STATE}", [stream]))
        return None if row is None or row[0] is None else row[0].astimezone(dt.UTC)

    def last_run_status(self, stream: str) -> str | None:
        row = first(run(self.con, f"SELECT status FROM {qualified(meta.SYNC_RUNS)} WHERE stream = ? "
                                  "ORDER BY started_at DESC, run_id DESC LIMIT 1", [stream]))
        return None if row is None else str(row[0])

    @retried_on_conflict
    def set_cursor(self, stream: str, value: str | None, run_id: str) -> None:
        """Set a cursor on its own (e.g. an operator's reset); data batches set it themselves."""
        with self._transaction() as con:
            self._set_cursor(con, stream, value, run_id, _now())

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

    def runs(self, run_id: str | None = None) -> list[dict[str, Any]]:
        where, params = ("WHERE run_id = ?", [run_id]) if run_id else ("", [])
        cur = self.con.execute(f"SELECT * FROM {qualified(meta.SYNC_RUNS)} {where} ORDER BY started_at, stream", params)
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

    # --- what the sync asks ---------------------------------------------------------------------

    @contextmanager
    def live_listing(self) -> Iterator[LiveListing]:
        """A temporary table for the reconcile's listing of live shipments, dropped after the block."""
        listing = LiveListing(self.con)
        try:
            yield listing
        finally:
            listing.drop()

    def reader(self) -> duckdb.DuckDBPyConnection:
        """A second connection to this database, for reads from another thread while batches are written."""
        reader = self.con.cursor()
        if self.lake is not None:
            run(reader, f"USE {LAKE_ALIAS}")
        return reader

    @staticmethod
    def current_copies(reader: duckdb.DuckDBPyConnection, keys: Mapping[int, str]) -> set[int]:
        """Of ``keys`` (shipment id -> last-modified second the source shows now), the shipments whose
        held copy is provably current: same last-modified second, fetched after it by the service's
        clock (``fetched_ceiling`` later than it), and nothing of them waiting in the retry queue."""
        if not keys:
            return set()
        asked = pa.table({"shipment_id": pa.array(list(keys), pa.int64()),
                          "last_modified_key": pa.array(list(keys.values()), pa.string())})
        reader.register("_asked_copies", asked)
        try:
            rows = run(
                reader,
                f"SELECT r.shipment_id FROM {qualified(meta.RAW_SHIPMENTS)} r JOIN _asked_copies a USING (shipment_id) "
                "WHERE r.last_modified_key = a.last_modified_key AND r.last_modified_key < r.fetched_ceiling "
                f"AND r.shipment_id NOT IN (SELECT shipment_id FROM {qualified(meta.QUARANTINE)} "
                "WHERE shipment_id IS NOT NULL)",
            )
        finally:
            reader.unregister("_asked_copies")
        return {int(r[0]) for r in rows}

    def shipment_last_modified(self, ids: Sequence[int] | None) -> dict[int, dt.datetime | None]:
        """Last-modified instant (UTC) of the held raw documents of ``ids`` (None: of every shipment)."""
        table = qualified(meta.RAW_SHIPMENTS)
        if ids is None:
            rows = run(self.con, f"SELECT shipment_id, last_modified_at FROM {table}")
        else:
            with self._registered(pa.table({"id": pa.array([int(i) for i in ids], pa.int64())})) as view:
                rows = run(
                    self.con,
                    f"SELECT shipment_id, last_modified_at FROM {table} WHERE shipment_id IN (SELECT id FROM {view})",
                )
        return {int(i): (lm.astimezone(dt.UTC) if lm is not None else None) for i, lm in rows}

    def holds_shipments(self) -> bool:
        """Whether any shipment (or a record of one waiting in the retry queue) is held."""
        row = first(run(self.con, f"SELECT EXISTS (FROM {qualified(meta.RAW_SHIPMENTS)}) OR EXISTS "
                                  f"(FROM {qualified(meta.QUARANTINE)} WHERE shipment_id IS NOT NULL)"))
        return bool(row and row[0])

    def shipment_ids(self) -> set[int]:
        """Ids of the shipments whose raw document is held."""
        rows = run(self.con, f"SELECT shipment_id FROM {qualified(meta.RAW_SHIPMENTS)}")
        return {int(r[0]) for r in rows}

    def raw_documents(self, ids: Sequence[int] | None = None) -> Iterator[RawDocument]:
        """Held raw documents (all, or of ``ids``) in id order, for replay without re-fetching."""
        where = ""
        params: list[Any] = []
        if ids is not None:
            where, params = "WHERE shipment_id IN (SELECT unnest(?::BIGINT[]))", [[int(i) for i in ids]]
        cur = self.con.cursor()
        cur.execute(
            f"SELECT shipment_id, CAST(document AS VARCHAR), fetched_at, last_modified_at "
            f"FROM {qualified(meta.RAW_SHIPMENTS)} {where} ORDER BY shipment_id",
            params,
        )
        try:
            while chunk := cur.fetchmany(1000):
                for shipment_id, doc, fetched, modified in chunk:
                    yield RawDocument(int(shipment_id), doc, fetched, modified)
        finally:
            cur.close()

    @retried_on_conflict
    def enqueue(self, pending: Sequence[PendingDetail], run_id: str, *, replace: bool = True) -> None:
        """Queue detail work on its own; ``replace`` False leaves entries already queued as they are."""
        if not pending:
            return
        with self._transaction():
            if not replace:
                sql = f"SELECT stream, shipment_id FROM {qualified(meta.PENDING_DETAILS)} WHERE stream = ANY(?)"
                held = {(s, int(i)) for s, i in run(self.con, sql, [sorted({p.stream for p in pending})])}
                pending = [p for p in pending if (p.stream, int(p.shipment_id)) not in held]
            self._enqueue(pending, run_id, _now())

    def pending_count(self, stream: str) -> int:
        return _scalar(self.con, f"SELECT count(*) FROM {qualified(meta.PENDING_DETAILS)} WHERE stream = ?", [stream])

    def pending_details(self, stream: str, limit: int | None = None) -> list[PendingDetail]:
        """Queued shipments of ``stream``, oldest first."""
        rows = run(
            self.con,
            f"SELECT stream, shipment_id, client, shipment_number, mode_of_transport, enqueued_at "
            f"FROM {qualified(meta.PENDING_DETAILS)} WHERE stream = ? ORDER BY enqueued_at, shipment_id "
            f"{'LIMIT ?' if limit is not None else ''}",
            [stream, limit] if limit is not None else [stream],
        )
        return [PendingDetail(s, int(i), c, n, m, at) for s, i, c, n, m, at in rows]

    def legacy_pending(self) -> list[PendingDetail]:
        """Entries left in the detail queue of earlier versions (which fetched details in separate
        streams); the shipments stream settles them."""
        rows = run(
            self.con,
            f"SELECT stream, shipment_id, client, shipment_number, mode_of_transport, enqueued_at "
            f"FROM {qualified(meta.PENDING_DETAILS)} ORDER BY shipment_id, stream",
        )
        return [PendingDetail(s, int(i), c, n, m, at) for s, i, c, n, m, at in rows]

    def due_quarantine(self, stream: str, run_id: str, now: dt.datetime | None = None) -> list[dict[str, Any]]:
        """Entries of ``stream``'s retry queue whose next attempt is due, oldest failure first; entries
        that failed in ``run_id`` itself wait for a later run."""
        cur = self.con.execute(
            f"SELECT * FROM {qualified(meta.QUARANTINE)} WHERE stream = ? AND next_attempt_at <= ? "
            "AND run_id IS DISTINCT FROM ? ORDER BY first_failed_at, record_key",
            [stream, now or _now(), run_id],
        )
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

    def quarantined_ids(self, stream: str) -> set[int]:
        """Shipment ids in ``stream``'s retry queue."""
        rows = run(
            self.con,
            f"SELECT shipment_id FROM {qualified(meta.QUARANTINE)} WHERE stream = ? AND shipment_id IS NOT NULL",
            [stream],
        )
        return {int(r[0]) for r in rows}

    def quarantine_count(self, stream: str | None = None) -> int:
        where, params = ("WHERE stream = ?", [stream]) if stream else ("", [])
        return _scalar(self.con, f"SELECT count(*) FROM {qualified(meta.QUARANTINE)} {where}", params)

    def data_problem_count(self, stream: str | None = None) -> int:
        where, params = ("WHERE stream = ?", [stream]) if stream else ("", [])
        return _scalar(self.con, f"SELECT count(*) FROM {qualified(meta.DATA_PROBLEMS)} {where}", params)

    def rejected_count(self, stream: str | None = None, run_id: str | None = None) -> int:
        conditions = [(c, v) for c, v in (("stream", stream), ("run_id", run_id)) if v is not None]
        where = " AND ".join(f"{c} = ?" for c, _ in conditions)
        return _scalar(
            self.con,
            f"SELECT count(*) FROM {qualified(meta.REJECTED_RECORDS)}{' WHERE ' + where if where else ''}",
            [v for _, v in conditions],
        )

    def row_counts(self) -> dict[str, int]:
        """Rows per table, keyed by qualified name (``freight.shipments``), source tables then meta."""
        return {
            spec.qualified_name: _scalar(self.con, f"SELECT count(*) FROM {qualified(spec)}")
            for spec in (*self.tables, *self.meta_tables)
        }


class RepeatedKey(ValueError):
    """Rows to write that repeat a primary key: the whole transaction is refused."""


def _refuse_repeated_keys(spec: TableSpec, table: pa.Table) -> None:
    """What a PRIMARY KEY would refuse, for tables declared without one (``TableSpec.key_constraint``)."""
    if spec.key_constraint or table.num_rows < 2:
        return
    counted = table.select(list(spec.primary_key)).group_by(list(spec.primary_key)).aggregate([([], "count_all")])
    if counted.num_rows == table.num_rows:
        return
    repeated = counted.filter(pc.greater(counted.column("count_all"), 1)).slice(0, 3).to_pylist()
    raise RepeatedKey(f"{spec.qualified_name}: rows repeat the key ({', '.join(spec.primary_key)}): "
                      f"{[{k: row[k] for k in spec.primary_key} for row in repeated]}")


def _without(table: pa.Table, key: str, ids: set[int]) -> pa.Table:
    """``table`` without the rows whose ``key`` is one of ``ids`` (rows with a null key stay)."""
    if table.num_rows == 0 or key not in table.column_names:
        return table
    drop = pc.is_in(table.column(key), value_set=pa.array(sorted(ids), table.column(key).type))
    return table.filter(pc.invert(pc.fill_null(drop, False)))


def _scalar(con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> int:
    row = first(run(con, sql, params))
    return int(row[0]) if row and row[0] is not None else 0
