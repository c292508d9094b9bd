"""The statements a write transaction of the warehouse is made of: rows deleted and inserted by
shipment, raw documents, rejects, data problems, the retry queue, the change log and the cursor.

A mixin of :class:`~freight_pipeline.warehouse.store.Warehouse`, which runs these inside its one
transaction per batch (``Warehouse.apply_batch``, ``replace_table``); nothing here commits.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from freight_pipeline.lake.settings import LakeSettings
from freight_pipeline.normalize.schema import TableSpec
from freight_pipeline.warehouse import meta
from freight_pipeline.warehouse.ddl import first, qualified, quote, run
from freight_pipeline.warehouse.records import (
    Backoff,
    DataProblem,
    Quarantined,
    RawDocument,
    Reject,
)

_TS = pa.timestamp("us", tz="UTC")


class RowWrites:
    """The row-level statements of a write transaction (mixin of ``Warehouse``)."""

    con: duckdb.DuckDBPyConnection
    lake: LakeSettings | None
    spec: Callable[[str], TableSpec]
    _registered: Callable[[pa.Table], AbstractContextManager[str]]

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


def _json_text(payload: str | None) -> str | None:
    """Valid JSON text for a JSON column: non-JSON text becomes a JSON string instead of failing the batch."""
    if payload is None:
        return None
    try:
        json.loads(payload)
    except ValueError:
        return json.dumps(payload)
    return payload


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
