"""Versioned history: every version of a shipment's header, events and main-carriage legs the sync saw.

Schema ``freight_history``, written by the batch write in the same transaction as the batch's rows and
its cursor (so a crash, a rerun or an overlap re-read never duplicates or drops a version), independent
of dbt. One table per subject, one row per version: the subject's key, its content columns, then

* ``valid_from``: the service's last-modified instant (UTC) of the shipment version that carried the
  content; for a shipment deleted at the service, and for content that cannot be dated by its instant
  (below), the start of the run that noticed (never at or before the shipment's last recorded version: a
  service clock ahead of the pipeline's puts it just after);
* ``valid_to``: the next version's ``valid_from`` (NULL while current);
* ``deleted``: from ``valid_from`` on the subject does not exist (content NULL);
* ``run_id``, ``recorded_at``: the run that saw it and when its batch was written.

A version is a change of content: a row is added only when a subject's ``deleted`` flag or content
columns differ (IS DISTINCT FROM) from its current version, or it has none. Append-only but for
closing ``valid_to``. The lake has no keys, so every rule is in the SQL: rerunning a batch adds
nothing (its content equals the current versions). The history follows the service, also backwards,
so that after every write its current versions equal the rows held (a warehouse check,
``checks.warehouse.history_check``): a copy older than a version already recorded (the service's
data went back: a restore, the test server's nightly reset), a shipment whose last-modified instant
could not be read (its data problem says why) and content that changed under the same
``valid_from`` (a service that changed a shipment without moving its last-modified instant) are
versions dated when the run noticed them, and counted (:class:`VersionCounts`).

The point-in-time table macros ``freight_history.<subject>_as_of(at)`` give the non-deleted versions
in force at an instant (their content columns and ``valid_from``). Their bodies name the tables
without a catalog: call them with the warehouse as the default catalog (the file opened, or ``USE``).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass, field

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from freight_pipeline.normalize.schema import Column, TableSpec
from freight_pipeline.normalize.specs.events_memos import SHIPMENT_EVENTS
from freight_pipeline.normalize.specs.legs import AIR_MAIN_CARRIAGE_LEGS, LEG_ORDER, SEA_MAIN_CARRIAGE_LEGS
from freight_pipeline.normalize.specs.shipments import SHIPMENTS
from freight_pipeline.warehouse.ddl import (
    Catalog,
    arrow_input,
    arrow_result,
    ensure_tables,
    first,
    qualified,
    quote,
    run,
    table_names,
)

log = logging.getLogger(__name__)

HISTORY_SCHEMA = "freight_history"
SHIPMENT_ID = "shipment_id"
_TS = pa.timestamp("us", tz="UTC")

VERSION_COLUMNS: tuple[Column, ...] = (
    Column("valid_from", "TIMESTAMPTZ",
           "the service's last-modified instant (UTC) of the shipment version that carried this content; for "
           "a shipment deleted at the service, the start of the run that noticed", nullable=False),
    Column("valid_to", "TIMESTAMPTZ", "the next version's valid_from; NULL while current"),
    Column("deleted", "BOOLEAN",
           "true: from valid_from on the subject does not exist (vanished from its shipment, or the shipment "
           "was deleted); its content columns are NULL", nullable=False),
    Column("run_id", "VARCHAR", "the sync run that saw this version", nullable=False),
    Column("recorded_at", "TIMESTAMPTZ", "when that run wrote it (its batch's commit time)", nullable=False),
)


@dataclass(frozen=True)
class Source:
    """A ``freight`` table feeding a subject: which of its columns fill which history column, and the
    constants it adds (a leg's ``mode``)."""

    table: TableSpec
    columns: Mapping[str, str]
    """history column -> the source table's column (only where the names differ)."""
    constants: Mapping[str, str] = field(default_factory=dict)
    """history column -> its value for every row of this source; part of what a replace covers."""

    def column_of(self, history_column: str) -> str:
        return self.columns.get(history_column, history_column)


@dataclass(frozen=True)
class Subject:
    """One history table (its subject's key, content and version columns) and the tables feeding it."""

    spec: TableSpec
    sources: tuple[Source, ...]
    macro: str
    """Name of its point-in-time table macro (in schema ``freight_history``)."""

    @property
    def key(self) -> tuple[str, ...]:
        """The subject's key: the table's primary key without ``valid_from``."""
        return self.spec.primary_key[:-1]

    @property
    def content(self) -> tuple[str, ...]:
        """The columns whose change makes a version: every column between the key and the version columns."""
        return tuple(c.name for c in self.spec.columns[len(self.key):-len(VERSION_COLUMNS)])

    @property
    def scope(self) -> tuple[str, ...]:
        """What one replace covers: the shipment, and the constants of the source (a leg's mode)."""
        return (SHIPMENT_ID, *[c for c in self.key if c in self.sources[0].constants])

    def type_of(self, column: str) -> str:
        return self.spec.column_index[column].type


def _history_table(name: str, key: Sequence[Column], content: Sequence[Column], description: str) -> TableSpec:
    return TableSpec(
        HISTORY_SCHEMA, name, (*key, *content, *VERSION_COLUMNS),
        (*(c.name for c in key), "valid_from"), description,
        replace_key=None, audit=False, key_constraint=False,
    )


def _like(spec: TableSpec, name: str) -> Column:
    """Column ``name`` of ``spec`` as a content column (nullable: a deleted version has none)."""
    column = spec.column_index[name]
    return Column(name, column.type, column.description)


def _key(name: str, type_: str, description: str) -> Column:
    return Column(name, type_, description, nullable=False)


SHIPMENT_NOT_VERSIONED = frozenset({
    "_synced_at", "_run_id", "last_modified_at", "last_modified_date", "last_modified_time",
    "last_modified_offset", "last_modified_employee_matchcode",
})
"""Columns of ``freight.shipments`` that are no content of a header version (``last_modified_at`` is its
``valid_from``; the audit columns say who wrote the row)."""

_SHIPMENT_KEY = (_key(SHIPMENT_ID, "BIGINT", "id of the shipment"),)
_SHIPMENT_CONTENT = tuple(_like(SHIPMENTS, c.name) for c in SHIPMENTS.columns
                          if c.name != SHIPMENT_ID and c.name not in SHIPMENT_NOT_VERSIONED)
SHIPMENT_VERSIONS = _history_table(
    "shipment_versions", _SHIPMENT_KEY, _SHIPMENT_CONTENT,
    "Every version of each shipment's header (the scalar fields of freight.shipments) the sync saw.",
)

_EVENT_KEY = (
    _key(SHIPMENT_ID, "BIGINT", "id of the shipment"),
    _key("event", "VARCHAR", "event code"),
    _key("type", "VARCHAR", "ESTIMATED or ACTUAL"),
)
_EVENT_CONTENT = tuple(_like(SHIPMENT_EVENTS, name) for name in
                       ("event_at", "event_until", "location_name", "unloc", "iata", "un_country"))
EVENT_VERSIONS = _history_table(
    "event_versions", _EVENT_KEY, _EVENT_CONTENT,
    "Every version of each shipment event (freight.shipment_events, one per event and type) the sync saw.",
)

_LEG_KEY = (
    _key(SHIPMENT_ID, "BIGINT", "id of the shipment"),
    _key("mode", "VARCHAR", "AIR (freight.air_main_carriage_legs) or SEA (freight.sea_main_carriage_legs)"),
    _key("position", "BIGINT", f"of the leg in its main carriage: {LEG_ORDER}"),
)
_LEG_ENDS = ("origin", "destination")
_LEG_TIMES = tuple(f"{end}_{kind}_at" for end in _LEG_ENDS for kind in ("estimated", "actual", "revised"))
_LEG_CONTENT = (
    _like(AIR_MAIN_CARRIAGE_LEGS, "leg_no"),
    Column("carrier_code", "VARCHAR", "air: airline_awb_code; sea: imo_code"),
    Column("carrier_name", "VARCHAR", "air: airline_name; sea: vessel_name"),
    Column("voyage", "VARCHAR", "air: flight_no; sea: voyage_no"),
    *(_like(AIR_MAIN_CARRIAGE_LEGS, f"{end}_{code}") for end in _LEG_ENDS for code in ("unloc", "iata")),
    *(_like(AIR_MAIN_CARRIAGE_LEGS, name) for name in _LEG_TIMES),
)
LEG_VERSIONS = _history_table(
    "leg_versions", _LEG_KEY, _LEG_CONTENT,
    "Every version of each main-carriage leg (air and sea, their own columns mapped to shared ones) the sync saw.",
)

SUBJECTS: tuple[Subject, ...] = (
    Subject(SHIPMENT_VERSIONS, (Source(SHIPMENTS, {}),), "shipments_as_of"),
    Subject(EVENT_VERSIONS, (Source(SHIPMENT_EVENTS, {}),), "events_as_of"),
    Subject(
        LEG_VERSIONS,
        (
            Source(AIR_MAIN_CARRIAGE_LEGS,
                   {"carrier_code": "airline_awb_code", "carrier_name": "airline_name", "voyage": "flight_no"},
                   {"mode": "AIR"}),
            Source(SEA_MAIN_CARRIAGE_LEGS,
                   {"carrier_code": "imo_code", "carrier_name": "vessel_name", "voyage": "voyage_no"},
                   {"mode": "SEA"}),
        ),
        "legs_as_of",
    ),
)
HISTORY_TABLES: tuple[TableSpec, ...] = tuple(subject.spec for subject in SUBJECTS)
SOURCE_TABLES: frozenset[str] = frozenset(s.table.qualified_name for subject in SUBJECTS for s in subject.sources)
"""The ``freight`` tables whose rows the history versions (qualified names)."""

DELETION_AFTER_LAST = "INTERVAL 1 MICROSECOND"
"""How far after a shipment's last recorded version its deletion is placed when the run's start is
not later (a service clock ahead of the pipeline's)."""


# --- schema ----------------------------------------------------------------------------------------


def macro_sql(subject: Subject, *, name: str | None = None, temporary: bool = False) -> str:
    """``CREATE OR REPLACE MACRO`` of ``subject``'s point-in-time table macro (``temporary``: in the
    temp catalog under ``name``, to compare definitions)."""
    at = 'CAST("at" AS TIMESTAMPTZ)'
    columns = ", ".join(quote(c) for c in (*subject.key, *subject.content, "valid_from"))
    target = f"TEMP MACRO {quote(name or subject.macro)}" if temporary else (
        f"MACRO {quote(HISTORY_SCHEMA)}.{quote(name or subject.macro)}")
    return (f'CREATE OR REPLACE {target}("at") AS TABLE SELECT {columns} FROM {qualified(subject.spec)} '
            f"WHERE NOT deleted AND valid_from <= {at} AND (valid_to IS NULL OR valid_to > {at})")


def ensure_macros(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Create (or bring up to date) the point-in-time macros; writes nothing when they are as declared
    (so that writers opening the lake at once do not collide on the catalog). The declared definitions
    are read back from temporary copies: DuckDB keeps a macro's body in its own normalized form."""
    database = str(first(run(con, "SELECT current_database()"))[0])
    probes = {subject.macro: f"_{subject.macro}_probe" for subject in SUBJECTS}
    for subject in SUBJECTS:
        run(con, macro_sql(subject, name=probes[subject.macro], temporary=True))
    held = {(catalog, name): definition for catalog, name, definition in run(
        con, "SELECT database_name, function_name, macro_definition FROM duckdb_functions() "
             "WHERE function_type = 'table_macro' AND (database_name = 'temp' AND schema_name = 'main' "
             "OR database_name = ? AND schema_name = ?)", [database, HISTORY_SCHEMA])}
    for probe in probes.values():
        run(con, f"DROP MACRO TABLE temp.main.{quote(probe)}")
    steps = []
    for subject in SUBJECTS:
        if held.get((database, subject.macro)) != held[("temp", probes[subject.macro])]:
            run(con, macro_sql(subject))
            steps.append(f"{HISTORY_SCHEMA}.{subject.macro}: created")
    return steps


def ensure_history(con: duckdb.DuckDBPyConnection, *, key_constraints: bool = True,
                   storage_hints: bool = True, catalog: Catalog | None = None) -> list[str]:
    """Create the history tables and macros where missing (inside the caller's transaction); returns the
    steps taken. Tables created beside ``freight`` tables that already hold rows (a warehouse from before
    the history) start with their current rows as first versions (:func:`seed_from_current`). ``catalog``:
    as :func:`~freight_pipeline.warehouse.ddl.ensure_tables` takes it."""
    catalog = catalog or Catalog.read(con)
    created = (SHIPMENT_VERSIONS.schema, SHIPMENT_VERSIONS.name) not in catalog.columns
    steps = ensure_tables(con, HISTORY_TABLES, key_constraints=key_constraints, storage_hints=storage_hints,
                          catalog=catalog)
    steps += ensure_macros(con)
    if created:
        seeded = seed_from_current(con)
        if seeded:
            steps.append(f"{HISTORY_SCHEMA}: first versions from the rows held ({seeded} rows)")
    return steps


def seed_from_current(con: duckdb.DuckDBPyConnection) -> int:
    """First versions from the ``freight`` rows held: each shipment's rows as of its ``last_modified_at`` (one
    without, whose instant could not be read, as of when its row was written: its current versions must equal
    the rows held, as a sync dates such a shipment when it noticed it), with the run and time that wrote them.
    Returns rows added."""
    present = set(table_names(con))
    if SHIPMENTS.qualified_name not in present:
        return 0
    added = 0
    for subject in SUBJECTS:
        for source in subject.sources:
            if source.table.qualified_name not in present:
                continue
            mapped = _mapped_columns(subject, source, "r")
            added += _count(run(con, f"""
                INSERT INTO {qualified(subject.spec)} BY NAME
                SELECT {mapped}, false AS deleted, coalesce(s.last_modified_at, s._synced_at) AS valid_from,
                       CAST(NULL AS TIMESTAMPTZ) AS valid_to, r._run_id AS run_id, r._synced_at AS recorded_at
                FROM {qualified(source.table)} r JOIN {qualified(SHIPMENTS)} s ON s.shipment_id = r.shipment_id"""))
    return added


# --- catching up after runs that recorded none -----------------------------------------------------

BEHIND_STATE = "freight_history_behind"
"""``sync_state`` entry (JSON ``{"since": instant}``) set by the first run that records no versions
(``SyncSettings.history`` off) and cleared by the catch-up that brings the history up to the rows held
(``Writes.catch_up_history``, with :func:`held_shipment_ids`, :func:`vanished_shipment_ids`, :func:`held_batch`)."""


def disagreeing_sql(subject: Subject, shipments: str | None = None) -> str:
    """SQL: ``shipment_id`` of each row where the subject's current versions (neither closed nor deleted)
    and the rows held in its ``freight`` tables differ, once per differing row of either side; of the
    shipments the query ``shipments`` selects (one column of ids), or every one (None). Empty after
    every write while the history is recorded: it follows the service, also backwards."""
    columns = ", ".join(quote(c) for c in (*subject.key, *subject.content))
    among = f" AND shipment_id IN ({shipments})" if shipments else ""
    current = (f"SELECT {columns}, 1 AS side FROM {qualified(subject.spec)} "
               f"WHERE valid_to IS NULL AND NOT deleted{among}")
    held = " UNION ALL ".join(
        f"SELECT {_mapped_columns(subject, source, 'r')}, -1 FROM {qualified(source.table)} r"
        + (f" WHERE r.{quote(source.column_of(SHIPMENT_ID))} IN ({shipments})" if shipments else "")
        for source in subject.sources)
    # one aggregate over both sides (each distinct row: how many more of it one side has) in place of the two
    # EXCEPT ALLs it equals, NULLs alike as there: about a fifth of their time
    surplus = f"SELECT shipment_id, abs(sum(side))::BIGINT AS surplus FROM ({current} UNION ALL {held})"
    return f"SELECT shipment_id FROM ({surplus} GROUP BY {columns} HAVING sum(side) <> 0), range(surplus)"


def held_shipment_ids(con: duckdb.DuckDBPyConnection) -> list[int]:
    """Every shipment ``freight.shipments`` holds, in id order."""
    return [int(row[0]) for row in run(con, f"SELECT shipment_id FROM {qualified(SHIPMENTS)} ORDER BY 1")]


def vanished_shipment_ids(con: duckdb.DuckDBPyConnection) -> list[int]:
    """Shipments with a current version that is not ``deleted`` but no row in ``freight.shipments``:
    deleted while no versions were recorded."""
    current = " UNION ".join(f"SELECT shipment_id FROM {qualified(s.spec)} WHERE valid_to IS NULL AND NOT deleted"
                             for s in SUBJECTS)
    return [int(row[0]) for row in run(con, f"SELECT shipment_id FROM ({current}) WHERE shipment_id NOT IN "
                                           f"(SELECT shipment_id FROM {qualified(SHIPMENTS)}) ORDER BY 1")]


def held_batch(
    con: duckdb.DuckDBPyConnection, ids: Sequence[int], ids_view: str, gone: Sequence[int], deleted_at: dt.datetime,
) -> VersionBatch:
    """The rows held of ``ids`` (registered as ``ids_view``, column ``id``) as a batch replacing them, each
    shipment dated by its ``last_modified_at``, and ``gone`` deleted at ``deleted_at``: what a catch-up
    compares with the current versions (the rules of :func:`record_versions` apply unchanged)."""
    rows = {}
    for subject in SUBJECTS:
        for source in subject.sources:
            key = quote(source.table.replace_key or SHIPMENT_ID)
            rows[source.table.qualified_name] = arrow_result(
                con, f"SELECT * FROM {qualified(source.table)} WHERE {key} IN (SELECT id FROM {ids_view})")
    stamps = arrow_result(con, f"SELECT shipment_id, last_modified_at AS valid_from FROM {qualified(SHIPMENTS)} "
                               f"WHERE shipment_id IN (SELECT id FROM {ids_view})")
    return VersionBatch(rows, {name: list(ids) for name in rows}, stamps, list(gone), deleted_at)


# --- writing versions ------------------------------------------------------------------------------


@dataclass
class VersionBatch:
    """What one batch write tells the history.

    ``rows``: per ``freight`` table (qualified name), the rows replacing those of ``replaced[table]``'s
    shipments (a shipment there without rows lost every row of that table). ``stamps``: table of
    ``shipment_id`` and ``valid_from`` (the last-modified instant of the version read; null when
    unreadable) for every replaced shipment, and optionally ``held_from``: the instant of the document held
    before this batch (null: none held, or not known), which tells a service that went back (a copy older than
    the one held) from content changed under the stamp held (a part changed without the stamp, read again: as
    old as the versions of such changes noticed before, and no restore). ``deleted_ids``: shipments deleted
    at the service, ``deleted_at`` when the run that noticed began (None: ``recorded_at``).
    """

    rows: Mapping[str, pa.Table]
    replaced: Mapping[str, Sequence[int]]
    stamps: pa.Table
    deleted_ids: Sequence[int] = ()
    deleted_at: dt.datetime | None = None


@dataclass
class VersionCounts:
    """What :func:`record_versions` did."""

    added: dict[str, int] = field(default_factory=dict)
    """History table (short name) -> versions added (a version it follows was closed for each that had one)."""
    stale: list[int] = field(default_factory=list)
    """Shipments whose copy was older than a version already recorded for them and than the document held, when
    known (the service went back), and differed from it: versioned as of when the run noticed. (A copy as held
    adds no version and is not counted: a rebuild's, whose current versions took its content, says nothing of
    the service.)"""
    unstamped: list[int] = field(default_factory=list)
    """Replaced shipments without a readable last-modified instant, first seen or differing from their current
    versions: versioned as of when the run noticed."""
    same_instant: int = 0
    """Subjects whose content differed from their current version under the same ``valid_from``, or under the
    instant of the document held once an earlier such change was versioned as of when noticed (the service
    changed them without moving the shipment's last-modified instant): versioned as of when the run noticed."""

    @property
    def rows_added(self) -> int:
        return sum(self.added.values())

    def add(self, other: VersionCounts) -> None:
        """Count ``other``'s figures in too (a catch-up's transactions, one after the other)."""
        for table, count in other.added.items():
            self.added[table] = self.added.get(table, 0) + count
        self.stale += other.stale
        self.unstamped += other.unstamped
        self.same_instant += other.same_instant


Register = Callable[[pa.Table], AbstractContextManager[str]]


def record_versions(
    con: duckdb.DuckDBPyConnection,
    batch: VersionBatch,
    run_id: str,
    recorded_at: dt.datetime,
    *,
    register: Register | None = None,
) -> VersionCounts:
    """Record the versions of one batch, inside the caller's open transaction (see the module doc for the
    rules). Set-based, in few statements whatever the batch's size, since each is planned anew: one for
    the instants of the batch's shipments; per history table, for shipments with no version yet, one
    insert; for the others (and deleted ones), one finding the new versions and, when there are any, one
    closing the versions they follow and one inserting them."""
    replaced = {name: sorted({int(i) for i in ids}) for name, ids in batch.replaced.items()
                if name in SOURCE_TABLES and ids}
    gone = sorted({int(i) for i in batch.deleted_ids})
    counts = VersionCounts()
    if not replaced and not gone:
        return counts
    register = register or (lambda table: arrow_input(con, table, "_hist"))
    replaced_ids = sorted({i for ids in replaced.values() for i in ids})
    with ExitStack() as stack:
        def view(table: pa.Table) -> str:
            return stack.enter_context(register(table))

        latest = _latest_versions(view(pa.table({SHIPMENT_ID: pa.array(sorted({*replaced_ids, *gone}), pa.int64())})))
        noticed = batch.deleted_at or recorded_at
        first_seen, followed, again = _usable_stamps(con, batch.stamps, replaced_ids, latest, view, counts, noticed)
        redated = set(again)
        gone_at = arrow_result(con, (
            f"SELECT g.shipment_id, greatest($deleted_at, coalesce(l.latest + {DELETION_AFTER_LAST}, $deleted_at)) "
            f"AS valid_from FROM {view(pa.table({SHIPMENT_ID: pa.array(gone, pa.int64())}))} g "
            f"LEFT JOIN ({latest}) l USING (shipment_id)"
        ), {"deleted_at": batch.deleted_at or recorded_at}) if gone else NO_STAMPS
        first_view = view(first_seen) if first_seen.num_rows else ""
        compared: dict[str, str] = {}
        versioned = set(first_seen[SHIPMENT_ID].to_pylist())
        if followed.num_rows or gone_at.num_rows:
            ids = pa.concat_arrays([followed[SHIPMENT_ID].combine_chunks(), gone_at[SHIPMENT_ID].combine_chunks()])
            compared = {"followed": view(followed), "gone_at": view(gone_at),
                        "compared": view(pa.table({SHIPMENT_ID: ids}))}
        for subject in SUBJECTS:
            sources = [s for s in subject.sources if s.table.qualified_name in replaced]
            if not sources and not gone:
                continue
            incoming = [(source, view(_rows_of(batch, source))) for source in sources]
            added = 0
            if incoming and first_view:
                added += _insert_first_versions(con, subject, incoming, first_view, run_id, recorded_at)
            if compared and ((incoming and followed.num_rows) or gone_at.num_rows):
                scope = view(_scope(subject, sources, replaced))
                found = arrow_result(con, _new_versions_sql(subject, incoming, scope, compared))
                versioned.update(found[SHIPMENT_ID].to_pylist())
                counts.same_instant += sum(1 for i in found[SHIPMENT_ID].to_pylist() if i in redated)
                added += _write_versions(con, subject, found, view, run_id, recorded_at, counts, noticed)
            counts.added[subject.spec.name] = added
    counts.stale = [i for i in counts.stale if i in versioned]
    counts.unstamped = [i for i in counts.unstamped if i in versioned]
    if counts.stale or counts.unstamped or counts.same_instant:
        log.warning("history: %d copies older than the version recorded (the service went back: %s), %d shipments "
                    "without a last-modified instant (%s), %d contents changed under the same last-modified instant: "
                    "versioned as of when the run noticed", len(counts.stale), counts.stale[:10],
                    len(counts.unstamped), counts.unstamped[:10], counts.same_instant)
    return counts


def retake_current(
    con: duckdb.DuckDBPyConnection, rows: Mapping[str, pa.Table], *, register: Register | None = None,
) -> int:
    """A rebuild's rows (per ``freight`` table, qualified name) as the content of the current versions they
    continue, in place, inside the caller's transaction; returns the versions changed. A rebuild re-derives
    what was read with a changed mapping: the versions recorded earlier keep what they said, but the current
    one of each subject still held takes the re-derived content (its ``valid_from``, run and ``recorded_at``
    stay), so the current versions equal the rows held without a version the source never made. Subjects the
    new mapping adds or drops are left to :func:`record_versions`, which the same batch runs next."""
    register = register or (lambda table: arrow_input(con, table, "_hist"))
    changed = 0
    for subject in SUBJECTS:
        for source in subject.sources:
            table = rows.get(source.table.qualified_name)
            if table is None or table.num_rows == 0:
                continue
            with register(table) as view:
                mapped = f"SELECT {_mapped_columns(subject, source, 'r')} FROM {view} r"
                on = " AND ".join(f"h.{quote(k)} = n.{quote(k)}" for k in subject.key)
                content = [quote(c) for c in subject.content]
                assign = ", ".join(f"{c} = n.{c}" for c in content)
                differ = (f"({', '.join(f'h.{c}' for c in content)}) IS DISTINCT FROM "
                          f"({', '.join(f'n.{c}' for c in content)})")
                changed += _count(run(con, f"UPDATE {qualified(subject.spec)} AS h SET {assign} FROM ({mapped}) n "
                                           f"WHERE {on} AND h.valid_to IS NULL AND NOT h.deleted AND {differ}"))
    return changed


NO_STAMPS = pa.table({SHIPMENT_ID: pa.array([], pa.int64()), "valid_from": pa.array([], _TS)})
"""No shipments, no instants: the ``stamps`` of a batch that only deletes."""


def _rows_of(batch: VersionBatch, source: Source) -> pa.Table:
    """The batch's rows of ``source`` (an empty table when it brought none)."""
    table = batch.rows.get(source.table.qualified_name)
    return table if table is not None else source.table.arrow_schema().empty_table()


def _scope(subject: Subject, sources: Sequence[Source], replaced: Mapping[str, Sequence[int]]) -> pa.Table:
    """(shipment id, constants) of what this batch replaces of ``subject``: its subjects not among the
    new rows vanished."""
    columns: dict[str, list[object]] = {c: [] for c in subject.scope}
    for source in sources:
        ids = replaced[source.table.qualified_name]
        columns[SHIPMENT_ID].extend(ids)
        for name in subject.scope[1:]:
            columns[name].extend([source.constants[name]] * len(ids))
    return pa.table({name: pa.array(values, pa.int64() if name == SHIPMENT_ID else pa.string())
                     for name, values in columns.items()})


def _latest_versions(ids: str) -> str:
    """SQL: (shipment_id, latest) of ``ids``: the newest version recorded of any of each one's subjects."""
    current = " UNION ALL ".join(
        f"SELECT shipment_id, valid_from FROM {qualified(s.spec)} WHERE valid_to IS NULL "
        f"AND shipment_id IN (SELECT shipment_id FROM {ids})" for s in SUBJECTS)
    return f"SELECT shipment_id, max(valid_from) AS latest FROM ({current}) GROUP BY shipment_id"


def _usable_stamps(
    con: duckdb.DuckDBPyConnection, stamps: pa.Table, replaced_ids: Sequence[int], latest: str,
    view: Callable[[pa.Table], str], counts: VersionCounts, noticed: dt.datetime,
) -> tuple[pa.Table, pa.Table, list[int]]:
    """(shipment_id, valid_from) of the replaced shipments to version, those with no version recorded yet
    and those with one; and the shipments whose copy, as old as the document held, is older than a version
    recorded (content changed under the stamp held, again). The history follows the service, also backwards:
    a copy older than a version already recorded (the service went back: a restore, when it is older than the
    document held too) and one without a readable instant are dated when the run noticed them, as a deletion
    is (never at or before the latest version); both are counted."""
    if "held_from" not in stamps.column_names:
        stamps = stamps.append_column("held_from", pa.nulls(stamps.num_rows, _TS))
    given = view(stamps.select([SHIPMENT_ID, "valid_from", "held_from"]).cast(
        pa.schema([(SHIPMENT_ID, pa.int64()), ("valid_from", _TS), ("held_from", _TS)])))
    ids = view(pa.table({SHIPMENT_ID: pa.array(replaced_ids, pa.int64())}))
    held = arrow_result(con, (
        f"SELECT DISTINCT i.shipment_id, CASE WHEN s.valid_from IS NULL OR s.valid_from < l.latest "
        f"THEN greatest($noticed, coalesce(l.latest + {DELETION_AFTER_LAST}, $noticed)) ELSE s.valid_from END "
        f"AS valid_from, l.latest IS NULL AS first_seen, s.valid_from IS NULL AS unstamped, "
        f"coalesce(s.valid_from < coalesce(s.held_from, l.latest), false) AS stale, "
        f"coalesce(s.valid_from < l.latest AND s.valid_from = s.held_from, false) AS redated "
        f"FROM {ids} i LEFT JOIN {given} s USING (shipment_id) LEFT JOIN ({latest}) l USING (shipment_id)"
    ), {"noticed": noticed})
    counts.unstamped = sorted(held.filter(held["unstamped"])[SHIPMENT_ID].to_pylist())
    counts.stale = sorted(held.filter(held["stale"])[SHIPMENT_ID].to_pylist())
    columns = [SHIPMENT_ID, "valid_from"]
    return (held.filter(held["first_seen"]).select(columns),
            held.filter(pc.invert(held["first_seen"])).select(columns),
            held.filter(held["redated"])[SHIPMENT_ID].to_pylist())


def _insert_first_versions(
    con: duckdb.DuckDBPyConnection, subject: Subject, incoming: Sequence[tuple[Source, str]], first_seen: str,
    run_id: str, recorded_at: dt.datetime,
) -> int:
    """The rows of shipments with no version recorded yet: first versions, nothing to compare."""
    rows = " UNION ALL ".join(
        f"SELECT {_mapped_columns(subject, source, 'r')}, false AS deleted, s.valid_from "
        f"FROM {view} r JOIN {first_seen} s ON s.shipment_id = r.shipment_id" for source, view in incoming)
    return _count(run(con, f"INSERT INTO {qualified(subject.spec)} BY NAME SELECT *, "
                           "CAST(NULL AS TIMESTAMPTZ) AS valid_to, $run_id AS run_id, $recorded_at AS recorded_at "
                           f"FROM ({rows})", {"run_id": run_id, "recorded_at": recorded_at}))


def _mapped_columns(subject: Subject, source: Source, alias: str) -> str:
    """The subject's key and content columns selected from a row of ``source`` (aliased ``alias``), cast
    only where the types differ (fewer expressions: the statement is planned for every batch)."""
    parts = []
    for name in (*subject.key, *subject.content):
        want = subject.type_of(name)
        if name in source.constants:
            value = source.constants[name].replace("'", "''")
            parts.append(f"CAST('{value}' AS {want}) AS {quote(name)}")
            continue
        column = source.column_of(name)
        value = f"{alias}.{quote(column)}"
        cast = value if source.table.column_index[column].type == want else f"CAST({value} AS {want})"
        parts.append(cast if column == name and cast == value else f"{cast} AS {quote(name)}")
    return ", ".join(parts)


def _new_versions_sql(
    subject: Subject, incoming: Sequence[tuple[Source, str]], scope: str, views: Mapping[str, str],
) -> str:
    """SQL of the subject's new versions for the shipments that have versions (``views['followed']``) and
    those deleted (``views['gone_at']``): key, content, ``deleted``, ``valid_from``, ``closes`` (it follows
    a current version), ``same_instant`` (it differs from one under the same instant). They are the changed
    or new rows, the vanished subjects of replaced shipments and every subject of deleted shipments."""
    stamps, gone_at, ids = views["followed"], views["gone_at"], views["compared"]
    table = qualified(subject.spec)
    key = [quote(k) for k in subject.key]
    content = [quote(c) for c in subject.content]
    columns = ", ".join([*key, *content, "deleted", "valid_from"])
    same_key = lambda a, b: " AND ".join(f"{a}.{k} = {b}.{k}" for k in key)  # noqa: E731
    nothing = ", ".join("NULL" for _ in content)  # typed by the first branch of the union
    kept = ", ".join(f"c.{k}" for k in key)
    row = lambda a: f"({a}.deleted, {', '.join(f'{a}.{c}' for c in content)})"  # noqa: E731
    arriving = " UNION ALL ".join(
        f"SELECT {_mapped_columns(subject, source, 'r')}, false AS deleted, s.valid_from "
        f"FROM {view} r JOIN {stamps} s ON s.shipment_id = r.shipment_id" for source, view in incoming
    ) or f"SELECT {columns} FROM {table} WHERE false"  # deletions only
    in_scope = " AND ".join(f"p.{quote(c)} = c.{quote(c)}" for c in subject.scope)
    return f"""
        WITH cur AS (
            SELECT {columns} FROM {table} WHERE valid_to IS NULL AND shipment_id IN (SELECT shipment_id FROM {ids})
        ),
        arriving AS ({arriving}),
        proposed AS (
            SELECT * FROM arriving
            UNION ALL
            SELECT {kept}, {nothing}, true AS deleted, s.valid_from
            FROM cur c JOIN {scope} p ON {in_scope} JOIN {stamps} s ON s.shipment_id = c.shipment_id
            WHERE NOT c.deleted AND NOT EXISTS (SELECT 1 FROM arriving i WHERE {same_key('i', 'c')})
            UNION ALL
            SELECT {kept}, {nothing}, true AS deleted, g.valid_from
            FROM cur c JOIN {gone_at} g ON g.shipment_id = c.shipment_id WHERE NOT c.deleted
        )
        SELECT p.*, c.valid_from IS NOT NULL AS closes, c.valid_from IS NOT NULL AND p.valid_from <= c.valid_from
               AS same_instant, c.valid_from AS current_from
        FROM proposed p LEFT JOIN cur c ON {same_key('p', 'c')}
        WHERE c.valid_from IS NULL OR {row('p')} IS DISTINCT FROM {row('c')}"""


def _write_versions(
    con: duckdb.DuckDBPyConnection, subject: Subject, found: pa.Table, view: Callable[[pa.Table], str],
    run_id: str, recorded_at: dt.datetime, counts: VersionCounts, noticed: dt.datetime,
) -> int:
    """Close the versions the new ones follow, insert the new ones; returns how many. Content that changed
    under the same last-modified instant is a version too, dated when the run noticed it."""
    if found.num_rows == 0:
        return 0
    same_instant = pc.sum(found["same_instant"]).as_py() or 0
    counts.same_instant += same_instant
    table = qualified(subject.spec)
    rows = view(found)
    if same_instant:
        rows = view(arrow_result(con, "SELECT * REPLACE (CASE WHEN same_instant THEN greatest($noticed, "
                                      f"current_from + {DELETION_AFTER_LAST}) ELSE valid_from END AS valid_from) "
                                      f"FROM {rows}", {"noticed": noticed}))
    if pc.any(found["closes"]).as_py():
        on = " AND ".join(f"h.{quote(k)} = n.{quote(k)}" for k in subject.key)
        run(con, f"UPDATE {table} AS h SET valid_to = n.valid_from FROM {rows} n "
                 f"WHERE n.closes AND h.valid_to IS NULL AND {on}")
    columns = ", ".join(quote(c) for c in (*subject.key, *subject.content, "deleted", "valid_from"))
    run(con, f"INSERT INTO {table} BY NAME SELECT {columns}, CAST(NULL AS TIMESTAMPTZ) AS valid_to, "
             "$run_id AS run_id, $recorded_at AS recorded_at FROM " + rows,
        {"run_id": run_id, "recorded_at": recorded_at})
    return found.num_rows


def _count(rows: list[tuple[object, ...]]) -> int:
    return int(rows[0][0]) if rows and rows[0][0] is not None else 0
