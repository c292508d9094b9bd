"""What the sync and the Dagster layer ask the warehouse (:class:`Reads`): cursors, runs, held
shipments and their raw documents, the retry queue, counts. Nothing here writes (but the reconcile's
temporary listing table).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import duckdb
import pyarrow as pa

from freight_pipeline.normalize.schema import TableSpec
from freight_pipeline.normalize.specs.code_conversions import CODE_CONVERSIONS
from freight_pipeline.normalize.specs.events_memos import SHIPMENT_EVENTS
from freight_pipeline.normalize.specs.shipments import SHIPMENTS
from freight_pipeline.warehouse import meta
from freight_pipeline.warehouse.database import Database
from freight_pipeline.warehouse.ddl import (
    any_row,
    arrow_input,
    catalog_cursors,
    first,
    qualified,
    row_counts,
    run,
    scalar,
)
from freight_pipeline.warehouse.history import SHIPMENT_VERSIONS
from freight_pipeline.warehouse.listing import LiveListing
from freight_pipeline.warehouse.records import (
    EARLIEST_FETCH,
    DueRetry,
    RawBatch,
    RawDocument,
    RawPosition,
    RunMapping,
)
from freight_pipeline.warehouse.stamps import earlier, same_instant


def oldest_part_read(con: duckdb.DuckDBPyConnection, part: str) -> tuple[int, dt.datetime | None]:
    """Open shipments held (``shipment_closed`` not true), and the oldest instant ``part`` (a stream of
    ``raw_parts``: ``shipment_events``) of one was last read (None: none held)."""
    row = first(run(con, f"SELECT count(*), min(p.fetched_at) FROM {qualified(SHIPMENTS)} s LEFT JOIN "
                         f"{qualified(meta.RAW_PARTS)} p ON p.stream = ? AND p.shipment_id = s.shipment_id "
                         "WHERE s.shipment_closed IS NOT TRUE", [part]))
    return (int(row[0]), row[1]) if row else (0, None)


_RAW_FETCHED = f"coalesce(fetched_at, TIMESTAMPTZ '{EARLIEST_FETCH.isoformat()}')"
"""A raw document's place in the order a rebuild reads them (:class:`RawPosition`)."""


def _raw_after(after: RawPosition | None) -> tuple[str, list[object]]:
    """The ``WHERE`` clause (and its parameters) of the raw documents after ``after`` (None: every one)."""
    if after is None:
        return "", []
    return (f"WHERE {_RAW_FETCHED} > ? OR ({_RAW_FETCHED} = ? AND shipment_id > ?)",
            [after.fetched_at, after.fetched_at, after.shipment_id])


class Reads:
    """Reading the working database (in the transaction of the moment, if any)."""

    def __init__(self, database: Database) -> None:
        self.database = database

    def get_cursor(self, stream: str) -> str | None:
        """``stream``'s latest cursor. Outside a transaction, every stream's is read in one statement and kept until
        a cursor is written (``Writes._set_cursor``): a run read 17 at its streams' starts and ends, one statement
        each (in a lake 11-25 ms apiece), though it writes one only where a batch or a stream ends."""
        database = self.database
        kept = database.cursors_kept
        if kept is not None and kept[0] == database.cursor_writes:
            return kept[1].get(stream)
        writes = database.cursor_writes
        cursors = dict(run(database.con, f"SELECT stream, cursor_value FROM {qualified(meta.SYNC_STATE)} "
                                         f"{meta.LATEST_STATE}"))
        # kept with the count of writes before the read (one by another thread meanwhile moved it: never used); inside
        # a transaction what it wrote is not settled: read as it is now, kept by none
        if not database.in_transaction:
            database.cursors_kept = (writes, cursors)
        return cursors.get(stream)

    def cursors_with_prefix(self, prefix: str) -> dict[str, str]:
        """Every stored cursor whose stream name starts with ``prefix`` (stream -> value)."""
        rows = run(self.database.con, f"SELECT stream, cursor_value FROM {qualified(meta.SYNC_STATE)} "
                             f"WHERE starts_with(stream, ?) {meta.LATEST_STATE}", [prefix])
        return {str(stream): str(value) for stream, value in rows if value is not None}

    def cursor_updated_at(self, stream: str) -> dt.datetime | None:
        """When ``stream``'s cursor was last set (for a full refresh: when its table last changed)."""
        row = first(run(self.database.con, f"SELECT updated_at FROM {qualified(meta.SYNC_STATE)} WHERE stream = ? "
                                  f"{meta.LATEST_STATE}", [stream]))
        return None if row is None or row[0] is None else row[0].astimezone(dt.UTC)

    def last_run_status(self, stream: str) -> str | None:
        """The status of ``stream``'s latest run, the one recorded last (``meta.latest_runs``; None: none ran)."""
        row = first(run(self.database.con, f"SELECT status FROM {qualified(meta.SYNC_RUNS)} WHERE stream = ? "
                                  "ORDER BY rowid DESC LIMIT 1", [stream]))
        return None if row is None else str(row[0])

    def last_success_notice_kinds(self, stream: str) -> list[str]:
        """The kinds of notice (``meta.NOTICE_KINDS``) the stream's latest successful run (recorded last) said."""
        row = first(run(self.database.con, "SELECT CAST(json_extract(details, ?) AS VARCHAR) "
                                           f"FROM {qualified(meta.SYNC_RUNS)} WHERE stream = ? AND status = 'success' "
                                           "ORDER BY rowid DESC LIMIT 1",
                        [meta.extra_path(meta.NOTICE_KINDS), stream]))
        return [str(kind) for kind in json.loads(row[0])] if row is not None and row[0] else []

    def zone_read_in(self) -> str | None:
        """The service zone the latest successful run that read date-times without a UTC offset read them in (a
        rebuild's too: ``meta.NAIVE_DATETIMES``); None when no run read one."""
        path = meta.extra_path(meta.NAIVE_DATETIMES) + ".service_timezone"
        row = first(run(self.database.con, "SELECT json_extract_string(details, ?) "
                                           f"FROM {qualified(meta.SYNC_RUNS)} WHERE status = 'success' "
                                           "AND json_extract_string(details, ?) IS NOT NULL "
                                           "ORDER BY rowid DESC LIMIT 1", [path, path]))
        return str(row[0]) if row is not None else None

    def runs(self, run_id: str | None = None) -> list[dict[str, Any]]:
        """The ``sync_runs`` rows (of ``run_id``; None: every run's) in the order they were recorded."""
        where, params = ("WHERE run_id = ?", [run_id]) if run_id else ("", [])
        cur = self.database.con.execute(
            f"SELECT * FROM {qualified(meta.SYNC_RUNS)} {where} ORDER BY rowid", params
        )
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

    def run_mappings(self, key: str) -> list[RunMapping]:
        """Every run's stream, instants and status, and the text under ``key`` in its ``details.extra``, in the order
        the runs were recorded (``meta.latest_runs``: a clock stepped back misorders their instants)."""
        rows = run(self.database.con, "SELECT stream, started_at, finished_at, status, json_extract_string(details, ?) "
                                      f"FROM {qualified(meta.SYNC_RUNS)} ORDER BY rowid", [meta.extra_path(key)])
        return [RunMapping(*row) for row in rows]

    @contextmanager
    def live_listing(self) -> Iterator[LiveListing]:
        """A temporary table for the reconcile's listing of live shipments, dropped after the block."""
        listing = LiveListing(self.database.con)
        try:
            yield listing
        finally:
            listing.drop()

    def reader(self) -> duckdb.DuckDBPyConnection:
        """A second connection to this database, for reads from another thread while batches are written."""
        return catalog_cursors(self.database.con)()

    @staticmethod
    def current_copies(reader: duckdb.DuckDBPyConnection, keys: Mapping[int, str]) -> set[int]:
        """Of ``keys`` (shipment id -> last-modified stamp the source shows now), the shipments whose
        held copy is provably current: the same last-modified instant, fetched after it by the
        service's clock (``fetched_ceiling`` later than it), and nothing of them waiting in the retry
        queue. Stamps compare as instants (``warehouse.stamps``), never as wall-clock text."""
        if not keys:
            return set()
        asked = pa.table({"shipment_id": pa.array(list(keys), pa.int64()),
                          "last_modified_key": pa.array(list(keys.values()), pa.string())})
        with arrow_input(reader, asked, "_asked") as view:
            rows = run(
                reader,
                f"SELECT r.shipment_id FROM {qualified(meta.RAW_SHIPMENTS)} r JOIN {view} a USING (shipment_id) "
                f"WHERE {same_instant('r.last_modified_key', 'a.last_modified_key')} "
                f"AND {earlier('r.last_modified_key', 'r.fetched_ceiling')} "
                f"AND r.shipment_id NOT IN (SELECT shipment_id FROM {qualified(meta.QUARANTINE)} "
                "WHERE shipment_id IS NOT NULL)",
            )
        return {int(r[0]) for r in rows}

    def shipment_last_modified(self, ids: Sequence[int] | None) -> dict[int, dt.datetime | None]:
        """Last-modified instant (UTC) of the held raw documents of ``ids`` (None: of every shipment)."""
        table = qualified(meta.RAW_SHIPMENTS)
        if ids is None:
            rows = run(self.database.con, f"SELECT shipment_id, last_modified_at FROM {table}")
        else:
            with self.database.registered(pa.table({"id": pa.array([int(i) for i in ids], pa.int64())})) as view:
                rows = run(
                    self.database.con,
                    f"SELECT shipment_id, last_modified_at FROM {table} WHERE shipment_id IN (SELECT id FROM {view})",
                )
        return {int(i): (lm.astimezone(dt.UTC) if lm is not None else None) for i, lm in rows}

    def open_shipments_by_part_age(self, parts: Collection[str], limit: int, *, read_before: dt.datetime | None = None,
                                   upcoming_after: dt.datetime | None = None) -> list[dict[str, Any]]:
        """Up to ``limit`` held shipments still open (``shipment_closed`` not true), with when the one of ``parts``
        (streams of ``raw_parts``: ``shipment_events``, ``shipment_memos``) read longest ago was last read
        (``read_at``; null: one never kept raw): those read at or before ``read_before`` (None: every one), longest
        unread first; with ``upcoming_after``, ordered by their first ESTIMATED event after it
        (``next_estimate_at``, nearest first, none last), then longest unread. Each: shipment_id, client,
        shipment_number, mode_of_transport, read_at, next_estimate_at. (By the oldest of the parts a re-read reads:
        by one alone, a shipment another reader keeps that one fresh for never came up for the others.)"""
        shipments, events = qualified(SHIPMENTS), qualified(SHIPMENT_EVENTS)
        wanted = sorted(set(parts))
        read = (f"SELECT shipment_id, CASE WHEN count(*) = {len(wanted)} THEN min(fetched_at) END AS fetched_at "
                f"FROM {qualified(meta.RAW_PARTS)} WHERE stream IN ({', '.join('?' for _ in wanted)}) "
                "GROUP BY shipment_id")
        upcoming = (f"SELECT shipment_id, min(event_at) AS next_estimate_at FROM {events} "  # its type as the marts
                    "WHERE upper(trim(type)) = 'ESTIMATED' AND event_at > ? GROUP BY shipment_id"  # read it
                    ) if upcoming_after else None
        sql = (
            f"SELECT s.shipment_id, s.client, s.shipment_number, s.mode_of_transport, p.fetched_at AS read_at, "
            f"{'u.next_estimate_at' if upcoming else 'NULL AS next_estimate_at'} "
            f"FROM {shipments} s LEFT JOIN ({read}) p ON p.shipment_id = s.shipment_id "
            + (f"LEFT JOIN ({upcoming}) u ON u.shipment_id = s.shipment_id " if upcoming else "")
            + "WHERE s.shipment_closed IS NOT TRUE"
            + (" AND (p.fetched_at IS NULL OR p.fetched_at <= ?)" if read_before is not None else "")
            + " ORDER BY " + ("u.next_estimate_at NULLS LAST, " if upcoming else "")
            + "p.fetched_at NULLS FIRST, s.shipment_id LIMIT ?"
        )
        params: list[Any] = [*wanted, *([upcoming_after] if upcoming else []),
                             *([read_before] if read_before is not None else []), limit]
        cur = self.database.con.execute(sql, params)
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

    def oldest_part_read(self, part: str) -> tuple[int, dt.datetime | None]:
        """Open shipments held, and the oldest instant ``part`` of one was last read (:func:`oldest_part_read`)."""
        return oldest_part_read(self.database.con, part)

    def holds_shipments(self) -> bool:
        """Whether any shipment (or a record of one waiting in the retry queue) is held."""
        return any_row(self.database.con, [f"FROM {qualified(meta.RAW_SHIPMENTS)}",
                                           f"FROM {qualified(meta.QUARANTINE)} WHERE shipment_id IS NOT NULL"])

    def holds_shipment_rows(self, tables: Sequence[str], within: tuple[int, int | None] | None = None) -> bool:
        """Whether any row of a shipment is held in ``tables`` (names of per-shipment tables), the raw documents
        and parts, the data problems or the retry queue (``within``: of a shipment ``low <= id < high``, a
        backfill partition's range; ``high`` None: no bound): while none is, a shipment not yet written holds
        nothing to delete or compare (``BatchWrite.fresh_ids``)."""
        held = [*(self.database.spec(name) for name in tables), meta.RAW_SHIPMENTS, meta.RAW_PARTS]
        conditions, bounds = ["true"], []
        if within is not None:
            low, high = within
            conditions.append("shipment_id >= ?")
            bounds.append(low)
            if high is not None:
                conditions.append("shipment_id < ?")
                bounds.append(high)
        where = " AND ".join(conditions)
        sources = [f"FROM {qualified(spec)} WHERE {where}" for spec in held]
        sources += [f"FROM {qualified(spec)} WHERE shipment_id IS NOT NULL AND {where}"
                    for spec in (meta.DATA_PROBLEMS, meta.QUARANTINE)]
        return any_row(self.database.con, sources, bounds)

    def latest_stamps(self, limit: int) -> dict[int, str]:
        """The ``limit`` shipments held with the newest last-modified instants: id -> stamp
        (``last_modified_key``), newest first (the restore probe's sample)."""
        rows = run(self.database.con, f"SELECT shipment_id, last_modified_key FROM {qualified(meta.RAW_SHIPMENTS)} "
                                      "WHERE last_modified_key IS NOT NULL ORDER BY last_modified_at DESC NULLS LAST, "
                                      f"left(last_modified_key, 19) DESC, shipment_id DESC LIMIT {int(limit)}")
        return {int(shipment_id): str(stamp) for shipment_id, stamp in rows}

    def recently_deleted(self, limit: int) -> list[int]:
        """Up to ``limit`` shipments deleted most recently and not held again (their current version in the
        history is a deletion), newest first: the restore probe asks for them too, a restore brings them back. Not
        those waiting in the retry queue: a reconcile leaves them to it, and a probe finding them listed would start
        one every run."""
        rows = run(self.database.con, f"SELECT shipment_id FROM {qualified(SHIPMENT_VERSIONS)} WHERE valid_to IS NULL "
                                      f"AND deleted AND shipment_id NOT IN (SELECT shipment_id FROM "
                                      f"{qualified(meta.RAW_SHIPMENTS)}) AND shipment_id NOT IN (SELECT shipment_id "
                                      f"FROM {qualified(meta.QUARANTINE)} WHERE shipment_id IS NOT NULL) "
                                      f"ORDER BY valid_from DESC, shipment_id DESC LIMIT {int(limit)}")
        return [int(shipment_id) for (shipment_id,) in rows]

    def shipment_ids(self) -> set[int]:
        """Ids of the shipments whose raw document is held."""
        rows = run(self.database.con, f"SELECT shipment_id FROM {qualified(meta.RAW_SHIPMENTS)}")
        return {int(r[0]) for r in rows}

    def raw_documents(self, ids: Sequence[int] | None = None) -> Iterator[RawDocument]:
        """Held raw documents (all, or of ``ids``) in id order, for replay without re-fetching."""
        where = ""
        params: list[Any] = []
        if ids is not None:
            where, params = "WHERE shipment_id IN (SELECT unnest(?::BIGINT[]))", [[int(i) for i in ids]]
        cur = self.reader()  # in the connection's catalog (the lake's, in lake mode)
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

    def held_under_the_same_stamp(self, documents: Sequence[RawDocument]) -> dict[int, str]:
        """Of ``documents`` (read now, each with its content hash), the raw document held (JSON text) of each whose
        held copy, read whole (a content hash: none of its parts had failed), has the same last-modified stamp (its
        key and instant) and another content hash: read again under the stamp held, and answered otherwise."""
        read = [d for d in documents if d.content_hash is not None and d.last_modified_key is not None]
        if not read:
            return {}
        table = pa.table({"shipment_id": pa.array([d.shipment_id for d in read], pa.int64()),
                          "last_modified_key": pa.array([d.last_modified_key for d in read], pa.string()),
                          "last_modified_at": pa.array([d.last_modified_at for d in read], pa.timestamp("us", "UTC")),
                          "content_hash": pa.array([d.content_hash for d in read], pa.string())})
        with self.database.registered(table) as view:
            rows = run(self.database.con,
                       f"SELECT r.shipment_id, CAST(r.document AS VARCHAR) FROM {qualified(meta.RAW_SHIPMENTS)} r "
                       f"JOIN {view} n USING (shipment_id) WHERE r.last_modified_key = n.last_modified_key "
                       "AND r.last_modified_at = n.last_modified_at AND r.content_hash IS NOT NULL "
                       "AND r.content_hash <> n.content_hash")
        return {int(shipment_id): str(document) for shipment_id, document in rows}

    def raw_shipment_count(self, after: RawPosition | None = None) -> int:
        """Shipments held raw after ``after`` (None: all), in the order of :meth:`raw_records`: what a rebuild
        from there reads."""
        where, params = _raw_after(after)
        return scalar(self.database.con, f"SELECT count(*) FROM {qualified(meta.RAW_SHIPMENTS)} {where}", params)

    def raw_records(self, after: RawPosition | None, limit: int, con: duckdb.DuckDBPyConnection | None = None,
                    ) -> RawBatch:
        """The next ``limit`` shipments held raw after ``after`` (None: from the first), in the order their raw
        documents were fetched (then by id): each one's id, raw document (JSON text) and raw parts (stream ->
        the compressed answer, None where the part had no rows); what a rebuild re-derives them from. ``con``:
        read there (a :meth:`reader`, while batches are written on the warehouse's connection).

        The order of fetching is the order the syncs wrote the documents in, each batch's side by side: 2,000 of
        20,000 are read from a few of the file's blocks in that order (0.12 s), where 2,000 consecutive ids are
        spread over all of them (0.25 s). A shipment written again after ``after`` moves past it (a sync between
        a rebuild and its resumption: read again, harmlessly)."""
        con = con or self.database.con
        # the ids first, then their documents by a join: DuckDB 2.0 ran out of the sync's 128 MB sorting the
        # documents for ``ORDER BY ... LIMIT`` (20,000 held), and took 20 s to read 2,000 of 20,000 through
        # a range filter on the scan (against 0.3 s through the join; bench/log.md, issue 34)
        where, params = _raw_after(after)
        order = [(int(row[0]), row[1]) for row in run(
            con, f"SELECT shipment_id, {_RAW_FETCHED} AS fetched FROM {qualified(meta.RAW_SHIPMENTS)} {where} "
                 "ORDER BY fetched, shipment_id LIMIT ?", [*params, limit])]
        if not order:
            return RawBatch([], None)
        ids = [i for i, _ in order]
        found = dict(run(con, f"SELECT shipment_id, CAST(document AS VARCHAR) FROM {qualified(meta.RAW_SHIPMENTS)} "
                              "WHERE shipment_id IN (SELECT unnest(?::BIGINT[]))", [ids]))
        parts: dict[int, dict[str, bytes | None]] = {}
        held = run(con, f"SELECT stream, shipment_id, answer FROM {qualified(meta.RAW_PARTS)} "
                        "WHERE shipment_id IN (SELECT unnest(?::BIGINT[]))", [ids])
        for stream, shipment_id, answer in held:
            parts.setdefault(int(shipment_id), {})[str(stream)] = answer
        records = [(i, str(found[i]), parts.get(i, {})) for i in ids if i in found]
        return RawBatch(records, RawPosition(order[-1][1], order[-1][0]))

    def raw_part_answers(self, keys: Sequence[tuple[str, int]]) -> dict[tuple[str, int], bytes | None]:
        """The answers held in ``raw_parts`` (compressed, None: the part had no rows) of ``keys``, (stream, shipment
        id) pairs; a pair with no row held is left out."""
        if not keys:
            return {}
        wanted = pa.table({"stream": pa.array([stream for stream, _ in keys], pa.string()),
                           "shipment_id": pa.array([int(i) for _, i in keys], pa.int64())})
        with self.database.registered(wanted) as view:
            rows = run(self.database.con, f"SELECT p.stream, p.shipment_id, p.answer FROM {qualified(meta.RAW_PARTS)} "
                                          f"p JOIN {view} w USING (stream, shipment_id)")
        return {(str(stream), int(shipment_id)): answer for stream, shipment_id, answer in rows}

    def code_conversion_payloads(self) -> list[str]:
        """The whole record kept with each code conversion held (its ``payload``, JSON text), in id order."""
        return [str(row[0]) for row in run(
            self.database.con, f"SELECT CAST(payload AS VARCHAR) FROM {qualified(CODE_CONVERSIONS)} "
                               "WHERE payload IS NOT NULL ORDER BY conversion_id")]

    def due_retries(self, streams: Sequence[str], run_id: str, now: dt.datetime | None = None) -> list[DueRetry]:
        """Entries of ``streams``' retry queue whose next attempt is due, stream by stream in the order given, each
        stream's oldest failure first; entries that failed in ``run_id`` itself wait for a later run. One statement
        for every stream, of the four columns a retry reads: a ``SELECT *`` per stream had cost about 115 ms each in
        a lake whose queue was never written (DuckLake's catalog read per column: ``LakeBackend.prime_tables``)."""
        rows = run(
            self.database.con,
            f"SELECT stream, record_key, shipment_id, CAST(context AS VARCHAR) FROM {qualified(meta.QUARANTINE)} "
            "WHERE stream IN (SELECT unnest(?::VARCHAR[])) AND next_attempt_at <= ? AND run_id IS DISTINCT FROM ? "
            "ORDER BY first_failed_at, record_key",
            [list(streams), now or dt.datetime.now(dt.UTC), run_id],
        )
        rank = {stream: number for number, stream in enumerate(streams)}
        return sorted((DueRetry(*row) for row in rows), key=lambda due: rank[due.stream])  # stable: oldest first

    def quarantined_ids(self, stream: str) -> set[int]:
        """Shipment ids in ``stream``'s retry queue."""
        rows = run(
            self.database.con,
            f"SELECT shipment_id FROM {qualified(meta.QUARANTINE)} WHERE stream = ? AND shipment_id IS NOT NULL",
            [stream],
        )
        return {int(r[0]) for r in rows}

    def quarantine_counts(self) -> dict[str, int]:
        """Records waiting in the retry queue, per stream (a stream with none is absent): one statement for every
        stream, each a catalog round trip in a lake (a count per stream took 33 ms each there)."""
        rows = run(self.database.con, f"SELECT stream, count(*) FROM {qualified(meta.QUARANTINE)} GROUP BY stream")
        return {str(stream): int(count) for stream, count in rows}

    def data_problem_count(self, stream: str | None = None) -> int:
        where, params = ("WHERE stream = ?", [stream]) if stream else ("", [])
        return scalar(self.database.con, f"SELECT count(*) FROM {qualified(meta.DATA_PROBLEMS)} {where}", params)

    def rejected_count(self, stream: str | None = None, run_id: str | None = None) -> int:
        conditions = [(c, v) for c, v in (("stream", stream), ("run_id", run_id)) if v is not None]
        where = " AND ".join(f"{c} = ?" for c, _ in conditions)
        return scalar(
            self.database.con,
            f"SELECT count(*) FROM {qualified(meta.REJECTED_RECORDS)}{' WHERE ' + where if where else ''}",
            [v for _, v in conditions],
        )

    def row_counts(self) -> dict[str, int]:
        """Rows per table, keyed by qualified name (``freight.shipments``): source tables, meta, history."""
        return row_counts(self.database.con,
                          (*self.database.tables, *self.database.meta_tables, *self.database.history_tables))

    def source_fields(self, streams: Sequence[str] | None = None, states: Sequence[str] | None = None,
                      ) -> list[dict[str, Any]]:
        """``freight_meta.source_fields`` rows (of ``streams``, in ``states``; None: all), by stream and field."""
        return self._rows_in(meta.SOURCE_FIELDS, stream=streams, state=states)

    def column_nulls(self, tables: Sequence[str] | None = None, states: Sequence[str] | None = None,
                     ) -> list[dict[str, Any]]:
        """``freight_meta.column_nulls`` rows (of ``tables``, in ``states``; None: all), by table and column."""
        return self._rows_in(meta.COLUMN_NULLS, table_name=tables, state=states)

    def _rows_in(self, spec: TableSpec, **within: Sequence[str] | None) -> list[dict[str, Any]]:
        """The rows of ``spec`` whose each named column holds one of its values (None: any), by primary key."""
        conditions = [(f"{column} IN (SELECT unnest(?))", list(values))
                      for column, values in within.items() if values is not None]
        where = " WHERE " + " AND ".join(c for c, _ in conditions) if conditions else ""
        cur = self.database.con.execute(
            f"SELECT * FROM {qualified(spec)}{where} ORDER BY {', '.join(spec.primary_key)}",
            [v for _, v in conditions],
        )
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

    def pending_changes(self) -> int:
        """Shipments written or deleted since the last complete dbt build."""
        return scalar(self.database.con, f"SELECT count(*) FROM {qualified(meta.CHANGED_SHIPMENTS)}")
