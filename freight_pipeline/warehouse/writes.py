"""The warehouse's writes (:class:`Writes`), each ONE transaction: a batch of shipments (their rows
deleted and inserted in every replaced table, raw documents, rejects, data problems, the retry queue,
the change log and the cursor), a full refresh of a table, a cursor on its own, and forgetting the
changes a dbt build covered. Nothing here commits but :meth:`Database.write`.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import ExitStack
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from freight_pipeline.normalize.schema import TableSpec
from freight_pipeline.warehouse import meta
from freight_pipeline.warehouse.database import Database
from freight_pipeline.warehouse.ddl import first, qualified, quote, run, scalar
from freight_pipeline.warehouse.history import (
    BEHIND_STATE,
    HISTORY_TABLES,
    SOURCE_TABLES,
    VersionBatch,
    VersionCounts,
    held_batch,
    held_shipment_ids,
    record_versions,
    retake_current,
    vanished_shipment_ids,
)
from freight_pipeline.warehouse.records import (
    DEFAULT_BACKOFF,
    Backoff,
    BatchWrite,
    DataProblem,
    Quarantined,
    RawDocument,
    RawPart,
    Reject,
    ReplaceOutcome,
    WriteStats,
)

_TS = pa.timestamp("us", tz="UTC")


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class Writes:
    """Writing the working database: every public method is one transaction, all or nothing."""

    def __init__(self, database: Database) -> None:
        self.database = database
        self.on_change: Callable[[], None] | None = None
        """Called after each committed batch that changed a shipment (recorded it in ``changed_shipments``, what
        the marts rebuild), from the writing thread."""

    # --- batches of shipments -------------------------------------------------------------------

    def apply_batch(
        self, run_id: str, batch: BatchWrite, *, backoff: Backoff = DEFAULT_BACKOFF, history: bool = True,
        rebuild: bool = False, write_whole: Collection[str] = (), compare: bool = False,
    ) -> WriteStats:
        """Write ``batch`` in ONE transaction (all or nothing); see :class:`BatchWrite`. ``history``: record
        its versions in ``freight_history`` (False: nothing is written there).

        ``rebuild``: the batch re-derives held shipments from their raw records (``sync.rebuild``): every
        replaced shipment is compared with its rows held even when its raw content is the one held (the
        mapping changed, not the source); the retry queue keeps its entries (a part waiting there was not
        read again); and the current versions of the history take the re-derived content in place
        (``history.retake_current``), so versions are added only for subjects that appear or vanish under the
        new mapping. A shipment's re-derived rows of a table are written only where they differ from those
        held (:meth:`_same_rows`), but in the tables ``write_whole`` names (short names), written whole
        (``WriteStats.compared`` and ``differed`` say what the comparison found).

        ``compare``: a sync's batch whose rows are written only where they differ from those held, as a
        rebuild's are (the parts re-read to find what the service changed without moving a shipment's
        last-modified instant, ``sync.freshness``); the rest is a sync's (the retry queue, the history)."""
        gone = sorted({int(i) for i in batch.deleted_ids})
        replaced = {self._unit_spec(name).qualified_name: sorted({int(i) for i in ids})
                    for name, ids in batch.replaced.items()}
        both = set(gone) & {i for ids in replaced.values() for i in ids}
        if both:
            raise ValueError(f"ids both replaced and deleted: {sorted(both)[:10]}")
        incoming = {self._unit_spec(name).qualified_name: table for name, table in batch.tables.items()}
        conflicts: list[DataProblem] = []
        for name, table in incoming.items():
            if name not in replaced:
                raise ValueError(f"rows given for {name}, which is not among the replaced tables")
            self._check_units(self.database.spec(name), table, replaced[name])
            incoming[name], left_out = _one_row_per_key(self.database.spec(name), table)
            conflicts += left_out
        stats = self.database.write(
            "apply_batch",
            lambda con: self._write_batch(con, run_id, batch, gone, replaced, incoming, backoff, history, rebuild,
                                          write_whole, compare, conflicts),
        )
        if self.on_change is not None and (stats.shipments_written or gone):
            self.on_change()
        return stats

    def _write_batch(
        self,
        con: duckdb.DuckDBPyConnection,
        run_id: str,
        batch: BatchWrite,
        gone: list[int],
        replaced: dict[str, list[int]],
        incoming: dict[str, pa.Table],
        backoff: Backoff,
        history: bool,
        rebuild: bool = False,
        write_whole: Collection[str] = (),
        compare: bool = False,
        conflicts: Sequence[DataProblem] = (),
    ) -> WriteStats:
        """:meth:`apply_batch`'s transaction, ``batch`` checked: ``replaced`` and ``incoming`` by qualified name;
        ``conflicts``: the rows left out of ``incoming`` for a key another shipment's row holds
        (:func:`_one_row_per_key`)."""
        compare = compare or rebuild
        spec = self.database.spec
        synced_at = _now()
        stats = WriteStats()
        fresh = set() if compare else set(batch.fresh_ids)  # nothing of theirs is held: nothing to delete
        raw = _raw_table(batch.raw_documents, run_id)
        unchanged, read_as_held = (set(), set()) if rebuild else self._same_content(_without(raw, "shipment_id", fresh))
        if unchanged:  # read again exactly as held: their rows stay as they are (audit columns too)
            replaced, incoming = self._leaving_out(replaced, incoming, dict.fromkeys(replaced, unchanged))
        if compare:  # re-derived or re-read: a table's rows of a shipment are written again only where they differ
            compared = {name: ids for name, ids in replaced.items() if spec(name).name not in write_whole}
            same = {name: self._same_rows(spec(name), incoming.get(name), ids) for name, ids in compared.items()}
            stats.compared = {spec(name).name: len(ids) for name, ids in compared.items()}
            stats.differed = {spec(name).name: [i for i in ids if i not in same[name]]
                              for name, ids in compared.items()}
            replaced, incoming = self._leaving_out(replaced, incoming, same)
        views: dict[tuple[int, ...], str] = {}  # one view per id set: most tables replace the same ids
        for name, ids in replaced.items():
            target = spec(name)
            stats.deleted[target.name] = self._delete_ids(target, target.replace_key or "", _held(ids, fresh), views)
        loaded = {(stream, str(i)) for stream, ids in [*batch.loaded.items(), *batch.settled.items()]
                  for i in _held(ids, fresh)}
        # a record this batch quarantines again keeps its entry: its attempts count on
        requeued = {(q.stream, q.record_key) for q in batch.quarantined}
        # an unchanged shipment's rows stay as they were loaded, and so do the data problems found in them
        unchanged_keys = {str(i) for i in unchanged}
        kept = {pair for pair in loaded if pair[1] in unchanged_keys}
        rewritten = {str(i) for ids in replaced.values() for i in ids}
        if rebuild:  # re-derived, no row of a shipment written again: the problems found in them stay as found
            kept |= {pair for pair in loaded if pair[1] not in rewritten}
        elif compare:  # a part read again as held, its shipment's rows all left: its problems too
            kept |= {pair for pair in self._parts_read_as_held(batch.raw_parts)
                     if pair in loaded and pair[1] not in rewritten}
        self._clear_records(loaded, set() if rebuild else loaded - requeued, kept)
        if gone:
            for target in self.database.unit_tables:
                removed = self._delete_ids(target, target.replace_key or "", gone, views)
                stats.deleted[target.name] = stats.deleted.get(target.name, 0) + removed
            for target in (meta.RAW_SHIPMENTS, meta.RAW_PARTS, meta.QUARANTINE, meta.DATA_PROBLEMS):
                self._delete_ids(target, "shipment_id", gone, views)
        conflicts = [*conflicts]
        for name in replaced:
            table = incoming.get(name)
            target = spec(name)
            stats[target.name] = self._insert_rows(target, table, synced_at, run_id, conflicts) \
                if table is not None else 0
            if table is not None:
                stats.written[target.name] = table
        written = {i for ids in batch.loaded.values() for i in ids} - unchanged
        if compare:
            written &= {i for ids in replaced.values() for i in ids}
        stats.shipments_written = len(written)
        self._record_changes([*written, *gone], run_id, synced_at)
        if history:  # before the documents read replace those held (their instants)
            if rebuild:
                self._retake_current(con, incoming, replaced)
            stats.versions = self._record_versions(con, run_id, batch, incoming, replaced, gone, synced_at).added
        read = _without(raw, "shipment_id", read_as_held)
        self._upsert(meta.RAW_SHIPMENTS, read, append=set(read.column("shipment_id").to_pylist()) <= fresh)
        self._upsert_raw_parts(batch.raw_parts, run_id, append=all(p.shipment_id in fresh for p in batch.raw_parts))
        self._upsert_rejects(batch.rejects, run_id, synced_at)
        self._insert_problems([p for p in [*batch.problems, *conflicts]
                               if p.shipment_id not in unchanged and (p.stream, p.record_key) not in kept],
                              run_id, synced_at)
        self._quarantine(batch.quarantined, run_id, synced_at, backoff)
        if batch.cursor is not None:
            self._set_cursor(con, batch.cursor[0], batch.cursor[1], run_id, synced_at)
        return stats

    def _record_versions(
        self, con: duckdb.DuckDBPyConnection, run_id: str, batch: BatchWrite, incoming: dict[str, pa.Table],
        replaced: dict[str, list[int]], gone: list[int], synced_at: dt.datetime,
    ) -> VersionCounts:
        """The batch's versions in ``freight_history``, dated by the last-modified instants of the documents
        read (a part read again alone: of the document held) and, for deletions, by the run's start. Before the
        batch's documents replace those held, whose instants tell a service that went back from a part changed
        under the stamp held (``VersionBatch``'s ``held_from``)."""
        stamped = sorted({i for name, ids in replaced.items() if name in SOURCE_TABLES for i in ids})
        read = {int(d.shipment_id): d.last_modified_at for d in batch.raw_documents}
        fresh = set(batch.fresh_ids)
        held: dict[int, dt.datetime | None] = {}
        if asked := [i for i in stamped if i not in fresh]:
            with self.database.registered(pa.table({"id": pa.array(asked, pa.int64())})) as view:
                held.update(run(con, f"SELECT shipment_id, last_modified_at FROM {qualified(meta.RAW_SHIPMENTS)} "
                                     f"WHERE shipment_id IN (SELECT id FROM {view})"))
        instants = {**held, **read}
        stamps = pa.table({"shipment_id": pa.array(stamped, pa.int64()),
                           "valid_from": pa.array([instants.get(i) for i in stamped], _TS),
                           "held_from": pa.array([held.get(i) for i in stamped], _TS)})
        started = first(run(con, f"SELECT min(started_at) FROM {qualified(meta.SYNC_RUNS)} WHERE run_id = ?",
                            [run_id])) if gone else None
        versions = VersionBatch(incoming, replaced, stamps, gone, started[0] if started else None)
        return record_versions(con, versions, run_id, synced_at, register=self.database.registered)

    def _retake_current(
        self, con: duckdb.DuckDBPyConnection, incoming: dict[str, pa.Table], replaced: dict[str, list[int]],
    ) -> int:
        """A rebuild's rows as the content of the current versions they continue (``history.retake_current``)."""
        rows = {name: incoming[name] for name in replaced if name in SOURCE_TABLES and name in incoming}
        return retake_current(con, rows, register=self.database.registered)

    def catch_up_history(self, run_id: str, *, chunk: int = 1000) -> VersionCounts:
        """Bring ``freight_history`` up to the rows held after runs that recorded no versions: every held
        shipment's rows compared with its current versions as a batch replacing them would be (a version
        where they differ or there is none, dated by the shipment's ``last_modified_at``), and a ``deleted``
        version for each shipment no longer held, at the start of run ``run_id``; then the
        ``history.BEHIND_STATE`` entry is cleared. One transaction per ``chunk`` shipments, the entry cleared
        in the last: after a crash the next catch-up starts again and adds nothing twice.

        The shipments that gained a version (the gone ones among them) are logged in ``changed_shipments`` in
        the same transaction, as a batch's are: the marts built from the history (the ETA marts) rebuild
        them in the next build (:attr:`on_change` is called after a transaction that logged any)."""
        con = self.database.con
        held, vanished = held_shipment_ids(con), vanished_shipment_ids(con)
        started = first(run(con, f"SELECT min(started_at) FROM {qualified(meta.SYNC_RUNS)} WHERE run_id = ?",
                            [run_id]))
        deleted_at = started[0] if started and started[0] else _now()
        pieces = [(held[at:at + chunk], []) for at in range(0, len(held), chunk)]
        pieces += [([], vanished[at:at + chunk]) for at in range(0, len(vanished), chunk)]
        pieces = pieces or [([], [])]  # nothing held or vanished: one empty piece still clears the entry
        counts = VersionCounts()

        def catch_up(con: duckdb.DuckDBPyConnection, ids: list[int], gone: list[int],
                     last: bool) -> tuple[VersionCounts, int]:
            recorded_at = _now()
            with self.database.registered(pa.table({"id": pa.array(ids, pa.int64())})) as view:
                batch = held_batch(con, ids, view, gone, deleted_at)
            found = record_versions(con, batch, run_id, recorded_at, register=self.database.registered)
            changed = sorted({*self._versioned_in(con, run_id, recorded_at), *gone}) if found.rows_added or gone else []
            if changed:
                self._record_changes(changed, run_id, recorded_at)
            if last:
                self._set_cursor(con, BEHIND_STATE, None, run_id, _now())
            return found, len(changed)

        for number, (ids, gone) in enumerate(pieces, start=1):
            last = number == len(pieces)
            found, changed = self.database.write(
                "catch_up_history", lambda con, ids=ids, gone=gone, last=last: catch_up(con, ids, gone, last))
            counts.add(found)
            if changed and self.on_change is not None:
                self.on_change()
        return counts

    @staticmethod
    def _versioned_in(con: duckdb.DuckDBPyConnection, run_id: str, recorded_at: dt.datetime) -> list[int]:
        """Shipments with a version recorded by run ``run_id`` at ``recorded_at`` (one transaction's, since
        each stamps its versions with its own instant), in any history table."""
        found = " UNION ".join(f"SELECT shipment_id FROM {qualified(spec)} WHERE run_id = $run_id "
                               "AND recorded_at = $recorded_at" for spec in HISTORY_TABLES)
        return [int(row[0]) for row in run(con, found, {"run_id": run_id, "recorded_at": recorded_at})]

    def forget_changes(self, until: dt.datetime) -> int:
        """After a complete, successful dbt build that began at ``until``: the changes it covered go."""
        return self.database.write(
            "forget_changes",
            lambda con: scalar(con, f"DELETE FROM {qualified(meta.CHANGED_SHIPMENTS)} WHERE changed_at <= ?", [until]),
        )

    def _unit_spec(self, name: str) -> TableSpec:
        spec = self.database.spec(name)
        if spec.replace_key is None or spec not in self.database.tables:
            raise ValueError(f"{spec.qualified_name} is not a per-shipment table; use replace_table()")
        return spec

    # --- full refresh ---------------------------------------------------------------------------

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
        keep_unread: bool = False,
    ) -> ReplaceOutcome:
        """Make ``spec``'s table hold exactly ``table`` (a full refresh), writing only differences; with
        ``keep_unread``, the rows of keys ``table`` lacks are kept (a record of the read could not be keyed: any
        of them may be it).

        Rows are compared on the business columns (audit columns excluded). When nothing differs,
        the table is not written at all: its rows keep their ``_synced_at`` and the publish keeps
        its Parquet file. Otherwise, in ONE transaction, rows that are no longer present (or
        changed) are deleted and new or changed rows inserted, so unchanged rows keep their audit
        columns. ``rejects`` are recorded either way; ``cursor`` (or, when only ``stream`` is given,
        ``{"rows": n}``) is set only when the table changed. ``quarantined`` and ``problems`` (given
        with ``stream``) replace that stream's whole retry queue and data problems: a full refresh
        re-reads every record, so what is not failing now has loaded.
        """
        target = self.database.spec(spec) if isinstance(spec, str) else spec
        _refuse_repeated_keys(target, table)

        def replace(con: duckdb.DuckDBPyConnection) -> ReplaceOutcome:
            return self._replace_rows(con, run_id, target, table, stream, cursor, rejects, quarantined, problems,
                                      backoff, keep_unread)

        return self.database.write("replace_table", replace)

    def _replace_rows(
        self,
        con: duckdb.DuckDBPyConnection,
        run_id: str,
        target: TableSpec,
        table: pa.Table,
        stream: str | None,
        cursor: tuple[str, str] | None,
        rejects: Sequence[Reject],
        quarantined: Sequence[Quarantined] | None,
        problems: Sequence[DataProblem] | None,
        backoff: Backoff,
        keep_unread: bool,
    ) -> ReplaceOutcome:
        """:meth:`replace_table`'s transaction."""
        cols = ", ".join(quote(c.name) for c in target.columns)
        typed = ", ".join(f"CAST({quote(c.name)} AS {c.type}) AS {quote(c.name)}" for c in target.columns)
        pk = ", ".join(quote(k) for k in target.primary_key)
        match = " AND ".join(f"t.{quote(k)} = g.{quote(k)}" for k in target.primary_key)
        synced_at = _now()
        with self.database.registered(table) as view:
            held = (f"(SELECT * FROM {qualified(target)} t WHERE EXISTS (SELECT 1 FROM {view} g WHERE {match}))"
                    if keep_unread else qualified(target))  # only the keys read are compared
            new_rows = f"SELECT {typed} FROM {view} EXCEPT SELECT {cols} FROM {qualified(target)}"
            gone_rows = f"SELECT {cols} FROM {held} EXCEPT SELECT {typed} FROM {view}"
            total_before = scalar(con, f"SELECT count(*) FROM {qualified(target)}")
            n_new = scalar(con, f"SELECT count(*) FROM ({new_rows})")
            n_gone = scalar(con, f"SELECT count(*) FROM ({gone_rows})")
            changed = n_new > 0 or n_gone > 0 or (not keep_unread and total_before != table.num_rows)
            deleted = written = 0
            if changed:
                deleted = scalar(
                    con,
                    f"DELETE FROM {qualified(target)} t USING (SELECT {pk} FROM ({gone_rows})) g WHERE {match}",
                )
                audit = ", $synced_at AS _synced_at, $run_id AS _run_id" if target.audit else ""
                params = {"synced_at": synced_at, "run_id": run_id} if target.audit else {}
                written = scalar(
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
            total = scalar(con, f"SELECT count(*) FROM {qualified(target)}")
        return ReplaceOutcome(target.qualified_name, changed, written, deleted, total)

    # --- cursors --------------------------------------------------------------------------------

    def set_cursor(self, stream: str, value: str | None, run_id: str) -> None:
        """Set a cursor on its own (e.g. an operator's reset); data batches set it themselves."""
        self.database.write("set_cursor", lambda con: self._set_cursor(con, stream, value, run_id, _now()))

    # --- the shape of the records -----------------------------------------------------------------

    def record_source_fields(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Upsert ``freight_meta.source_fields`` rows (by stream and field), in one transaction."""
        if rows:
            table = meta.SOURCE_FIELDS.to_arrow(rows)
            self.database.write("record_source_fields", lambda con: self._upsert(meta.SOURCE_FIELDS, table))

    def record_column_nulls(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Upsert ``freight_meta.column_nulls`` rows (by table and column), in one transaction."""
        if rows:
            table = meta.COLUMN_NULLS.to_arrow(rows)
            self.database.write("record_column_nulls", lambda con: self._upsert(meta.COLUMN_NULLS, table))

    # --- the statements of a transaction --------------------------------------------------------

    def _ids_view(self, ids: Sequence[int], views: dict[tuple[int, ...], str]) -> str:
        """A view of ``ids`` (column ``id``), named once per transaction (``Database.registered`` keeps
        what it names inside a transaction until the transaction ends)."""
        key = tuple(ids)
        if key not in views:
            with self.database.registered(pa.table({"id": pa.array(key, pa.int64())})) as view:
                views[key] = view
        return views[key]

    def _delete_ids(self, spec: TableSpec, key: str, ids: Sequence[int], views: dict[tuple[int, ...], str]) -> int:
        """Delete the rows of ``spec`` whose ``key`` is one of ``ids``; how many went."""
        if not ids:
            return 0
        return self._delete_keys(spec, key, self._ids_view(ids, views))

    def _same_content(self, raw: pa.Table) -> tuple[set[int], set[int]]:
        """Of the shipments of ``raw`` (:func:`_raw_table`'s rows), those written again with the content hash
        they hold (nothing changed for the marts), and of those, the ones read exactly as held: every column of
        the raw document the same but when and by which run it was read (:data:`meta.RAW_READ_INSTANT`). Their
        raw document is not written again (its row keeps the ``fetched_at`` and ``run_id`` of the read that
        wrote it), so that a run that only reads again what it holds (the walk's overlap of the ceiling's
        second) leaves ``raw_shipments`` as it was, and the publish links its Parquet file instead of
        exporting it again."""
        hashed = raw.filter(pc.is_valid(raw.column("content_hash")))
        if hashed.num_rows == 0:
            return set(), set()
        same_read = " AND ".join(f"r.{quote(c.name)} IS NOT DISTINCT FROM n.{quote(c.name)}"
                                 for c in meta.RAW_SHIPMENTS.columns
                                 if c.name not in (*meta.RAW_SHIPMENTS.primary_key, *meta.RAW_READ_INSTANT))
        with self.database.registered(hashed) as view:
            rows = run(self.database.con, f"SELECT r.shipment_id, {same_read} FROM {qualified(meta.RAW_SHIPMENTS)} r "
                                          f"JOIN {view} n USING (shipment_id) WHERE r.content_hash = n.content_hash")
        return {int(r[0]) for r in rows}, {int(r[0]) for r in rows if r[1]}

    def _leaving_out(self, replaced: dict[str, list[int]], incoming: dict[str, pa.Table],
                     kept: Mapping[str, set[int]]) -> tuple[dict[str, list[int]], dict[str, pa.Table]]:
        """``replaced`` and ``incoming`` (by qualified name) without the ids ``kept`` names for each table:
        their rows stay as they are held."""
        spec = self.database.spec
        return ({name: [i for i in ids if i not in kept.get(name, ())] for name, ids in replaced.items()},
                {name: _without(table, spec(name).replace_key or "", kept[name]) if kept.get(name) else table
                 for name, table in incoming.items()})

    def _same_rows(self, target: TableSpec, table: pa.Table | None, ids: Sequence[int]) -> set[int]:
        """Of ``ids`` (values of ``target``'s replace key), those whose rows in ``table`` (None: no rows) are
        the rows held, audit columns aside: the same count and the same sum of the rows' hashes, each side
        cast to the declared types (as an insert would store them)."""
        if not ids:
            return set()
        key = quote(target.replace_key or "")
        typed = ", ".join(f"CAST({quote(c.name)} AS {c.type})" for c in target.columns)

        def summed(source: str, where: str = "") -> str:
            return (f"SELECT {key} AS k, count(*) AS n, sum(hash({typed})::HUGEINT) AS h FROM {source} {where} "
                    "GROUP BY ALL")

        with ExitStack() as stack:
            wanted = stack.enter_context(self.database.registered(pa.table({"id": pa.array(ids, pa.int64())})))
            new = "SELECT NULL::BIGINT AS k, 0 AS n, NULL::HUGEINT AS h WHERE false"
            if table is not None and table.num_rows:
                new = summed(stack.enter_context(self.database.registered(table)))
            held = summed(qualified(target), f"WHERE {key} BETWEEN {int(ids[0])} AND {int(ids[-1])} "
                                             f"AND {key} IN (SELECT id FROM {wanted})")
            rows = run(self.database.con,
                       f"SELECT i.id FROM {wanted} i LEFT JOIN ({new}) n ON n.k = i.id "
                       f"LEFT JOIN ({held}) o ON o.k = i.id "
                       "WHERE coalesce(n.n, 0) = coalesce(o.n, 0) AND n.h IS NOT DISTINCT FROM o.h")
        return {int(r[0]) for r in rows}

    def _parts_read_as_held(self, parts: Sequence[RawPart]) -> set[tuple[str, str]]:
        """``(stream, shipment id as text)`` of the ``parts`` whose answer is byte for byte the one held (the same
        JSON text, compressed alike): normalized alike, it made the same rows and the same data problems."""
        answers = {(p.stream, int(p.shipment_id)): p.answer for p in parts}
        if not answers:
            return set()
        table = pa.table({"stream": pa.array([stream for stream, _ in answers], pa.string()),
                          "shipment_id": pa.array([i for _, i in answers], pa.int64()),
                          "answer": pa.array(list(answers.values()), pa.binary())})
        with self.database.registered(table) as view:
            found = run(self.database.con, f"SELECT i.stream, i.shipment_id FROM {view} i "
                                           f"JOIN {qualified(meta.RAW_PARTS)} t USING (stream, shipment_id) "
                                           "WHERE t.answer IS NOT DISTINCT FROM i.answer")
        return {(stream, str(shipment_id)) for stream, shipment_id in found}

    def _record_changes(self, ids: Sequence[int], run_id: str, at: dt.datetime) -> None:
        """Shipments whose rows this batch wrote or deleted: what the incremental marts rebuild."""
        unique = sorted(set(ids))
        self._upsert(
            meta.CHANGED_SHIPMENTS,
            pa.table({"shipment_id": pa.array(unique, pa.int64()), "run_id": pa.array([run_id] * len(unique)),
                      "changed_at": pa.array([at] * len(unique), _TS)}),
        )

    def _clear_records(self, loaded: set[tuple[str, str]], leaving: set[tuple[str, str]],
                       keeping_problems: Collection[tuple[str, str]] = ()) -> None:
        """Records the batch loaded (``(stream, record key)``, every stream's): their old data problems go (new
        ones follow) but those of ``keeping_problems`` (records whose rows stay as they are), and those of
        ``leaving`` leave the retry queue. One statement a table, whatever the streams (a statement per stream
        and table was a tenth of a small batch's statements)."""
        if not loaded:
            return
        pairs = sorted(loaded)
        table = pa.table({"stream": pa.array([stream for stream, _ in pairs], pa.string()),
                          "record_key": pa.array([key for _, key in pairs], pa.string()),
                          "leaving": pa.array([pair in leaving for pair in pairs], pa.bool_()),
                          "reloaded": pa.array([pair not in keeping_problems for pair in pairs], pa.bool_())})
        with self.database.registered(table) as view:
            same = f"USING {view} k WHERE t.stream = k.stream AND t.record_key = k.record_key"
            if leaving:
                run(self.database.con, f"DELETE FROM {qualified(meta.QUARANTINE)} t {same} AND k.leaving")
            run(self.database.con, f"DELETE FROM {qualified(meta.DATA_PROBLEMS)} t {same} AND k.reloaded")

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
        with self.database.registered(keys) as view:
            held = {
                (stream, key): (attempts, first_failed)
                for stream, key, attempts, first_failed in run(
                    self.database.con,
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
        return scalar(self.database.con,
                      f"DELETE FROM {qualified(spec)} WHERE {quote(key)} IN (SELECT id FROM {ids_view})")

    def _insert_rows(self, spec: TableSpec, table: pa.Table, synced_at: dt.datetime, run_id: str,
                     conflicts: list[DataProblem]) -> int:
        """Batched insert by name; rows with the same primary key are replaced first when the key
        does not contain the replace key (e.g. a memo that moved to another shipment). A row so replaced that this
        run (``run_id``) wrote for another shipment is one line answered for two shipments (a memo id repeated), not
        one that moved since an earlier run: a data problem of its shipment, added to ``conflicts``."""
        if table.num_rows == 0:
            return 0
        _refuse_repeated_keys(spec, table)
        with self.database.registered(table) as view:
            unit = spec.replace_key
            if unit is not None and unit not in spec.primary_key:
                match = " AND ".join(f"t.{quote(k)} = i.{quote(k)}" for k in spec.primary_key)
                returned = ", ".join(f"t.{quote(c.name)}" for c in spec.all_columns)
                if self.database.backend.deletes_return_rows:  # few: a changed shipment's own went before
                    replaced = run(self.database.con, f"DELETE FROM {qualified(spec)} t USING {view} i WHERE {match} "
                                                      f"RETURNING {returned}")
                else:  # the rows read, then deleted
                    replaced = run(self.database.con, f"SELECT {returned} FROM {qualified(spec)} t JOIN {view} i "
                                                      f"ON {match}")
                    if replaced:
                        run(self.database.con, f"DELETE FROM {qualified(spec)} t USING {view} i WHERE {match}")
                if replaced:
                    conflicts += _taken_from_another(spec, table, replaced, run_id)
            audit = ", $synced_at AS _synced_at, $run_id AS _run_id" if spec.audit else ""
            params = {"synced_at": synced_at, "run_id": run_id} if spec.audit else {}
            run(self.database.con, f"INSERT INTO {qualified(spec)} BY NAME SELECT *{audit} FROM {view}", params)
        return table.num_rows

    def _upsert(self, spec: TableSpec, table: pa.Table, *, append: bool = False) -> None:
        """Delete rows with the primary keys of ``table``, insert ``table`` (deduplicated by the caller);
        ``append``: the caller knows none of those keys is held (nothing is deleted)."""
        if table.num_rows == 0:
            return
        with self.database.registered(table) as view:
            if not append:
                match = " AND ".join(f"t.{quote(k)} = i.{quote(k)}" for k in spec.primary_key)
                run(self.database.con, f"DELETE FROM {qualified(spec)} t USING {view} i WHERE {match}")
            run(self.database.con, f"INSERT INTO {qualified(spec)} BY NAME SELECT * FROM {view}")

    def _upsert_raw_parts(self, parts: Sequence[RawPart], run_id: str, *, append: bool = False) -> None:
        rows = list({(p.stream, int(p.shipment_id)): p for p in parts}.values())
        self._upsert(
            meta.RAW_PARTS,
            pa.table(
                {
                    "stream": pa.array([p.stream for p in rows], pa.string()),
                    "shipment_id": pa.array([int(p.shipment_id) for p in rows], pa.int64()),
                    "answer": pa.array([p.answer for p in rows], pa.binary()),
                    "answer_bytes": pa.array([p.answer_bytes for p in rows], pa.int64()),
                    "fetched_at": pa.array([p.fetched_at for p in rows], _TS),
                    "run_id": pa.array([run_id] * len(rows), pa.string()),
                }
            ),
            append=append,
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
        writer's every batch collide with the others' (a third of the commits of three writers). The only writer
        of ``sync_state``: the cursors ``Reads.get_cursor`` keeps are read again after it, whether its transaction
        commits or not."""
        self.database.cursor_writes += 1  # in a transaction: a read until it ends keeps nothing, and one after reads
        if not self.database.backend.concurrent_writers:
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
    # on the calling thread: Arrow's thread pool cost more than the grouping of a batch's few hundred rows
    counted = (table.select(list(spec.primary_key)).group_by(list(spec.primary_key), use_threads=False)
               .aggregate([([], "count_all")]))
    if counted.num_rows == table.num_rows:
        return
    repeated = counted.filter(pc.greater(counted.column("count_all"), 1)).slice(0, 3).to_pylist()
    raise RepeatedKey(f"{spec.qualified_name}: rows repeat the key ({', '.join(spec.primary_key)}): "
                      f"{[{k: row[k] for k in spec.primary_key} for row in repeated]}")


def _one_row_per_key(spec: TableSpec, table: pa.Table) -> tuple[pa.Table, list[DataProblem]]:
    """``table`` with one row per key where the key is no shipment's (``replace_key`` outside ``primary_key``: a memo
    line's id, which the service answered for two shipments): the last row of each key; each row left out is a
    data problem of its shipment that names the one loaded. A repeated key of any other table stays, refused."""
    unit = spec.replace_key
    if unit is None or unit in spec.primary_key or table.num_rows < 2:
        return table, []
    keys = list(spec.primary_key)
    numbered = table.append_column("_row", pa.array(range(table.num_rows), pa.int64()))
    last = numbered.group_by(keys, use_threads=False).aggregate([("_row", "max")]).column("_row_max")
    if len(last) == table.num_rows:
        return table, []
    keep = pc.is_in(numbered.column("_row"), value_set=last)
    kept = _unit_by_key(spec, table.filter(keep))
    return table.filter(keep), [_conflict(spec, row, kept[tuple(row[k] for k in keys)])
                                for row in table.filter(pc.invert(keep)).to_pylist()]


def _unit_by_key(spec: TableSpec, table: pa.Table) -> dict[tuple[Any, ...], Any]:
    """Each row of ``table`` by its primary key -> the unit (``replace_key``: the shipment) it is loaded for."""
    keys, unit = list(spec.primary_key), spec.replace_key or ""
    return {tuple(row[k] for k in keys): row[unit] for row in table.select([*keys, unit]).to_pylist()}


def _taken_from_another(spec: TableSpec, table: pa.Table, replaced: list[tuple[Any, ...]],
                        run_id: str) -> list[DataProblem]:
    """Of the held rows of ``spec`` that ``table``'s rows ``replaced`` by key (each of ``spec.all_columns``), those of
    another shipment that run ``run_id`` wrote: :func:`_conflict` each."""
    unit = spec.replace_key or ""
    names = [c.name for c in spec.all_columns]
    keys = list(spec.primary_key)
    loading = _unit_by_key(spec, table)
    rows = [dict(zip(names, held, strict=True)) for held in replaced]
    return [_conflict(spec, {name: row[name] for name in spec.column_names}, loaded_for)
            for row in rows if row.get("_run_id") == run_id
            and (loaded_for := loading.get(tuple(row[k] for k in keys))) != row.get(unit)]


def _conflict(spec: TableSpec, row: Mapping[str, Any], loaded_for: Any) -> DataProblem:
    """The data problem of ``row``, not loaded because its key's row of shipment ``loaded_for`` was: its shipment's
    (a row of none: that one's, so that reading it again clears it)."""
    unit = spec.replace_key or ""
    key = ", ".join(f"{k} {row[k]}" for k in spec.primary_key)
    owner = row.get(unit)
    reason = f"{spec.name}: {key} was answered for {unit} {loaded_for} too, whose row is loaded: this one is not"
    belongs = owner if owner is not None else loaded_for
    return DataProblem(spec.name, str(belongs), belongs, f"({key})", json.dumps(row, default=str, sort_keys=True),
                       reason)


def _held(ids: list[int], fresh: set[int]) -> list[int]:
    """``ids`` but the ``fresh`` ones (of which nothing is held)."""
    return [i for i in ids if i not in fresh] if fresh else ids


def _raw_table(docs: Sequence[RawDocument], run_id: str) -> pa.Table:
    """``freight_meta.raw_shipments``' rows of ``docs``: each shipment's last document, read by ``run_id``."""
    rows = list({int(d.shipment_id): d for d in docs}.values())
    return pa.table(
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
    )


def _without(table: pa.Table, key: str, ids: set[int]) -> pa.Table:
    """``table`` without the rows whose ``key`` is one of ``ids`` (rows with a null key stay)."""
    if table.num_rows == 0 or not ids or key not in table.column_names:
        return table
    drop = pc.is_in(table.column(key), value_set=pa.array(sorted(ids), table.column(key).type))
    return table.filter(pc.invert(pc.fill_null(drop, False)))

