"""DDL from table specs: create what is missing, migrate what a spec changed (columns gained, nullable, retyped)."""

from __future__ import annotations

import logging
import re
import uuid
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from freight_pipeline.config import (
    DUCKDB_MEMORY_LIMIT_ENV,
    PUBLISH_MEMORY_LIMIT_ENV,
    PUBLISH_STORAGE_VERSION_ENV,
    StorageSettings,
)
from freight_pipeline.normalize.schema import TableSpec

MEMORY_LIMIT_VARIABLES = {"sync": DUCKDB_MEMORY_LIMIT_ENV, "publish": PUBLISH_MEMORY_LIMIT_ENV}
"""What a DuckDB connection is for -> the variable of its memory limit (named in messages)."""
log = logging.getLogger(__name__)

# How duckdb_columns() spells the spec type names that differ.
_CATALOG_TYPE = {"TIMESTAMPTZ": "TIMESTAMP WITH TIME ZONE", "TIME": "TIME"}


class WarehouseOutOfMemory(RuntimeError):
    """DuckDB hit the pipeline's memory limit; the message names the setting to raise."""


@cache
def checked_storage_version(value: str) -> str:
    """``value`` (the configured storage version of the published file) when this DuckDB writes it,
    else ValueError naming ``FREIGHT_PUBLISH_STORAGE_VERSION``. Asked once a process for each value
    (an in-memory database attaching one: tens of milliseconds, each publish otherwise); a refusal is asked again."""
    problem = storage_version_problem(value)
    if problem is not None:
        raise ValueError(f"{PUBLISH_STORAGE_VERSION_ENV}={value!r}: {problem}")
    return value


def storage_version_problem(value: str) -> str | None:
    """Why this DuckDB does not write storage version ``value`` (None: it does)."""
    problem = None if re.fullmatch(r"latest|v\d+\.\d+\.\d+", value) else "not of the form v1.5.0 or latest"
    if problem is None:
        try:
            with duckdb.connect() as probe:
                probe.execute(f"ATTACH ':memory:' AS probe (STORAGE_VERSION '{value}')")
        except duckdb.Error as exc:
            problem = str(exc).strip().splitlines()[0][:200]
    return None if problem is None else f"is not a storage version duckdb {duckdb.__version__} writes ({problem})"


def storage_tag(con: duckdb.DuckDBPyConnection, database: str) -> str:
    """The storage version of an attached database file as DuckDB names it (``v1.5.0+``: read by 1.5.0 and later)."""
    row = first(run(con, "SELECT tags['storage_version'] FROM duckdb_databases() WHERE database_name = ?", [database]))
    return str(row[0]) if row and row[0] is not None else ""


@contextmanager
def explained_out_of_memory(doing: str, settings: StorageSettings, purpose: str = "sync") -> Iterator[None]:
    """Turn DuckDB's out-of-memory error (whose advice is ``SET memory_limit``, which a pipeline user
    cannot do) into :class:`WarehouseOutOfMemory` naming the limit in force (``settings``' for
    ``purpose``) and its variable."""
    try:
        yield
    except duckdb.OutOfMemoryException as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else "out of memory"
        raise WarehouseOutOfMemory(
            f"{doing} ran out of DuckDB memory ({first_line}); the limit is {settings.memory_limit(purpose)}: "
            f"raise {MEMORY_LIMIT_VARIABLES[purpose]} (e.g. 1GB)"
        ) from exc


SYNC_THREADS = 1
"""DuckDB threads of the sync's connection, to the working database or to the lake (``lake.connect``): a batch's
statements are too small to share, and scheduling them on DuckDB's pool cost a tenth of the writes' CPU, on a
machine whose other core runs the event loop; in a lake, where each statement also reads the catalog, a full
sync of 2,000 took 8.7-8.9 s of the process's CPU on one thread against 12.1-13.0 s on two, and 9.0-9.4 s of
wall against 10.9-11.8 s (docs/performance.md)."""
SYNC_CONFIG: Mapping[str, str | int] = {"checkpoint_threshold": "256MB", "threads": SYNC_THREADS}
"""DuckDB settings of the sync's connection to the working database, beside its memory limit. The sync writes
many small transactions (one per batch of 100 shipments: a few dozen statements of a few hundred rows each):
with the default 16 MB, a checkpoint every few batches rewrote each table's last, growing row group (at 20,000
shipments: 89 s of the batch writes' 118 s of CPU; with 256 MB: 57 s, the few checkpoints left at the end). A
checkpoint threshold is no durability setting: every commit is in the WAL, fsynced. :data:`SYNC_THREADS`."""


def connect(
    path: Path | str, settings: StorageSettings, purpose: str = "sync", *, new_storage_version: str | None = None
) -> duckdb.DuckDBPyConnection:
    """A read-write connection as the pipeline uses them: bounded memory (``settings``' limit for
    ``purpose``), no insertion order; the sync's with :data:`SYNC_CONFIG`.

    DuckDB's default memory limit is 80 % of the machine's RAM, and its buffer pool keeps what it
    read and wrote, so without a limit the pipeline's memory grows with the warehouse; with one it
    evicts and spills (to a ``.tmp`` folder beside the file). Nothing reads rows in insertion
    order, and keeping it would hold whole Parquet row groups in memory at publish.
    ``new_storage_version``: the storage version of the file if this creates it (an existing file keeps its own).
    """
    limit = settings.memory_limit(purpose)
    config: dict[str, str | bool | int] = {"memory_limit": limit, "preserve_insertion_order": False}
    if purpose == "sync":
        config.update(SYNC_CONFIG)
    if new_storage_version is not None and not Path(path).exists():
        config["storage_compatibility_version"] = new_storage_version
    try:
        return duckdb.connect(str(path), config=config)
    except (duckdb.InvalidInputException, duckdb.ParserException) as exc:
        raise ValueError(f"{MEMORY_LIMIT_VARIABLES[purpose]}={limit!r} is not a DuckDB memory limit: {exc}") from None


def run(con: duckdb.DuckDBPyConnection, sql: str, params: Any = None) -> list[Any]:
    """Execute and fetch everything (duckdb 2.0 refuses other work on a connection with an unfinished result);
    the Arrow tables :func:`arrow_input` names for ``con`` are readable by their names."""
    rows: list[Any] = _executed(con, _ROWS, sql, params)
    return rows


def arrow_result(con: duckdb.DuckDBPyConnection, sql: str, params: Mapping[str, Any] | None = None) -> pa.Table:
    """The result of ``sql`` as an Arrow table, reading the Arrow tables :func:`arrow_input` names as :func:`run`
    does."""
    table: pa.Table = _executed(con, _ARROW, sql, dict(params) if params else None)
    return table


_ROWS = compile("_result = (_con.execute(_sql, _params) if _params is not None else _con.execute(_sql)).fetchall()",
                "<warehouse.ddl.run>", "exec")
_ARROW = compile("_result = (_con.execute(_sql, _params) if _params is not None else _con.execute(_sql))"
                 ".to_arrow_table()", "<warehouse.ddl.arrow_result>", "exec")
"""Executed, not ``_con.sql(...)``: duckdb 2.0's relation binds a statement once to describe it and again to run it,
which for the history's comparisons was a third of their CPU (13 ms against 19-20 ms, a query of 60 columns;
duckdb 1.5.5 the same either way). Its warning that this result's rows are copied once more is silenced below:
a small result costs less so, and 10,000 rows of 60 columns about 10 % more."""
warnings.filterwarnings("ignore", message="Arrow output on a DB-API result makes an extra copy", category=UserWarning)
_ARROW_INPUTS: dict[int, dict[str, pa.Table]] = {}
"""``id(connection)`` -> name -> Arrow table, while :func:`arrow_input` blocks last."""


def _executed(con: duckdb.DuckDBPyConnection, statement: Any, sql: str, params: Any) -> Any:
    """``statement`` (``_ROWS``, ``_ARROW``) executed in a frame whose variables are ``con``'s Arrow inputs, where
    DuckDB's replacement scan finds a name no catalog holds."""
    scope = {**_ARROW_INPUTS.get(id(con), {}), "_con": con, "_sql": sql, "_params": params}
    exec(statement, {}, scope)  # a constant statement, run in a frame whose variables are ``scope``
    return scope["_result"]


@contextmanager
def arrow_input(con: duckdb.DuckDBPyConnection, table: pa.Table, prefix: str = "_arrow") -> Iterator[str]:
    """``table`` (Arrow) readable under a unique name by the statements :func:`run` executes on ``con`` during the
    block: a variable of the frame that executes them, which DuckDB's replacement scan reads, not a view in the
    catalog (``register`` and ``unregister`` cost 0.4 ms a table more, duckdb 2.0, and changed the catalog in
    the transaction; an aborted transaction refused ``unregister``)."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    inputs = _ARROW_INPUTS.setdefault(id(con), {})
    inputs[name] = table
    try:
        yield name
    finally:
        del inputs[name]
        if not inputs:
            _ARROW_INPUTS.pop(id(con), None)


VALUES_PER_STATEMENT = 500
"""Rows an :func:`insert_values` statement carries at most (its SQL text and parameters grow with each)."""


def insert_values(con: duckdb.DuckDBPyConnection, insert: str, row: str, rows: Sequence[Sequence[Any]]) -> None:
    """``insert`` (``INSERT INTO t (columns) VALUES``) of ``rows``, each bound to the placeholders of ``row``
    (``(?, ?, NULL)``), in one statement per :data:`VALUES_PER_STATEMENT` rows: ``executemany`` plans and
    runs its statement once a row (22 rows of ``table_freshness``: 12.6 ms against 3.5 ms)."""
    width = row.count("?")
    wrong = [i for i, values in enumerate(rows) if len(values) != width]
    if wrong:
        raise ValueError(f"insert_values: row {wrong[0]} has {len(rows[wrong[0]])} values for the {width} "
                         f"placeholders of {row}")
    for start in range(0, len(rows), VALUES_PER_STATEMENT):
        chunk = rows[start:start + VALUES_PER_STATEMENT]
        run(con, f"{insert} {', '.join(row for _ in chunk)}", [value for values in chunk for value in values])


def catalog_cursors(con: duckdb.DuckDBPyConnection) -> Callable[[], duckdb.DuckDBPyConnection]:
    """New cursors of ``con`` (connections of their own to its database instance, for other threads), each in
    the catalog ``con`` uses now: a new cursor starts in the instance's default catalog, which a lake's is not."""
    catalog = str(first(run(con, "SELECT current_database()"))[0])

    def cursor() -> duckdb.DuckDBPyConnection:
        new = con.cursor()
        run(new, f"USE {quote(catalog)}")
        return new

    return cursor


@contextmanager
def one_thread(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """The block run with ``con``'s DuckDB instance on one thread, its setting as it was afterwards. For a run of many
    small statements, which DuckDB's scheduler of several threads costs more than the statements themselves (a
    new warehouse's 762 ``COMMENT ON``: 0.22-0.27 s of CPU on two threads, 0.11-0.15 s on one, a new file each).
    The setting is the instance's: its other connections run on one thread meanwhile too."""
    threads = int(first(run(con, "SELECT current_setting('threads')"))[0])
    if threads == 1:
        yield
        return
    run(con, "SET threads = 1")
    try:
        yield
    finally:
        run(con, f"SET threads = {threads}")


def first(rows: list[Any]) -> Any:
    """The first row of a result, or None."""
    return rows[0] if rows else None


def scalar(con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> int:
    """The first column of the first row as an int (0 when there is none or it is NULL): counts."""
    row = first(run(con, sql, params))
    return int(row[0]) if row and row[0] is not None else 0


def any_row(con: duckdb.DuckDBPyConnection, sources: Sequence[str], params: Sequence[Any] = ()) -> bool:
    """Whether any of ``sources`` (``FROM ... [WHERE ...]`` clauses, each taking ``params``) has a row.

    One ``UNION ALL`` of ``LIMIT 1`` scans: an ``OR`` of ``EXISTS`` has DuckDB's join-order optimizer read
    every table's statistics, which a DuckLake reads from its catalog (26 empty tables of a new lake: 1.2 s
    against 0.4 s; with data 0.10-0.16 s against 0.05 s).
    """
    if not sources:
        return False
    sql = " UNION ALL ".join(f"(SELECT 1 {source} LIMIT 1)" for source in sources)
    return bool(run(con, f"{sql} LIMIT 1", list(params) * len(sources)))


def row_counts(con: duckdb.DuckDBPyConnection, specs: Sequence[TableSpec]) -> dict[str, int]:
    """Rows of each of ``specs``, keyed by qualified name (``freight.shipments``), in one statement: in a lake,
    where each statement reads its catalog, a ``count(*)`` a table took about twice as long (38 tables: 0.36-0.66 s
    against 0.20-0.25 s)."""
    if not specs:
        return {}
    row = first(run(con, "SELECT " + ", ".join(f"(SELECT count(*) FROM {qualified(spec)})" for spec in specs)))
    return {spec.qualified_name: int(count) for spec, count in zip(specs, row, strict=True)}


def quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def literal(text: str) -> str:
    """``text`` as an SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def qualified(spec: TableSpec) -> str:
    return f"{quote(spec.schema)}.{quote(spec.name)}"


def table_names(con: duckdb.DuckDBPyConnection) -> list[str]:
    """``schema.table`` of every table of the current database, in order."""
    rows = run(con, "SELECT schema_name, table_name FROM duckdb_tables() WHERE database_name = current_database() "
                    "ORDER BY schema_name, table_name")
    return [f"{schema}.{table}" for schema, table in rows]


def existing_columns(con: duckdb.DuckDBPyConnection, spec: TableSpec) -> dict[str, tuple[str, bool]]:
    """Column name -> (catalog type, nullable) of the table as it exists (empty: no table)."""
    rows = run(
        con,
        "SELECT column_name, data_type, is_nullable FROM duckdb_columns() "
        "WHERE database_name = current_database() AND schema_name = ? AND table_name = ?",
        [spec.schema, spec.name],
    )
    return {name: (type_, bool(nullable)) for name, type_, nullable in rows}


@dataclass(frozen=True)
class Catalog:
    """The tables of the current database as they exist, read with three catalog queries (one per
    table cost about 2 ms each, a hundred queries at every opening of the warehouse)."""

    schemas: set[str]
    columns: dict[tuple[str, str], dict[str, tuple[str, bool]]]
    """(schema, table) -> column name -> (catalog type, nullable)."""
    keyed: dict[tuple[str, str], set[str]]
    """(schema, table) of the tables with a PRIMARY KEY -> its columns (which DuckDB keeps NOT NULL)."""

    @classmethod
    def read(cls, con: duckdb.DuckDBPyConnection) -> Catalog:
        here = "WHERE database_name = current_database()"
        columns: dict[tuple[str, str], dict[str, tuple[str, bool]]] = {}
        for schema, table, name, type_, nullable in run(
            con, f"SELECT schema_name, table_name, column_name, data_type, is_nullable FROM duckdb_columns() {here}"
        ):
            columns.setdefault((schema, table), {})[name] = (type_, bool(nullable))
        keyed: dict[tuple[str, str], set[str]] = {}
        for schema, table, key in run(con, f"SELECT schema_name, table_name, constraint_column_names "
                                           f"FROM duckdb_constraints() {here} AND constraint_type = 'PRIMARY KEY'"):
            keyed.setdefault((schema, table), set()).update(key)
        schemas = run(con, f"SELECT schema_name FROM duckdb_schemas() {here}")
        return cls({name for (name,) in schemas}, columns, keyed)


def rebuild_without_key(con: duckdb.DuckDBPyConnection, spec: TableSpec, have: dict[str, tuple[str, bool]]) -> None:
    """Copy a table written by an earlier version into one without the PRIMARY KEY (DuckDB cannot
    drop a constraint): the spec's columns as declared, plus any it no longer declares (nullable)."""
    temporary = f"{spec.name}__rebuild"
    target = f"{quote(spec.schema)}.{quote(temporary)}"
    run(con, f"DROP TABLE IF EXISTS {target}")
    run(con, spec.ddl(temporary))
    declared = {c.name for c in spec.all_columns}
    for name, (type_, _) in have.items():
        if name not in declared:
            run(con, f"ALTER TABLE {target} ADD COLUMN {quote(name)} {type_}")
    run(con, f"INSERT INTO {target} BY NAME SELECT * FROM {qualified(spec)}")
    run(con, f"DROP TABLE {qualified(spec)}")
    run(con, f"ALTER TABLE {target} RENAME TO {quote(spec.name)}")


def _why_not_retyped(con: duckdb.DuckDBPyConnection, spec: TableSpec, column: str, declared: str, held: str,
                     key_constraints: bool, catalog: Catalog) -> str | None:
    """Why the column ``column`` of ``spec``'s table cannot take its ``declared`` type from its ``held`` one (None: it
    can, keeping every value): a DuckLake (no ``key_constraints``) alters few types; DuckDB alters no key column's; a
    value held that does not convert, or converts to another value (1.5 to BIGINT is 2, '007' to INTEGER 7: it does
    not come back as it was), would be lost or changed."""
    if not key_constraints:
        return "a DuckLake's column types are left as they are"
    if column in catalog.keyed.get((spec.schema, spec.name), set()):
        return "a column of the table's PRIMARY KEY"
    name = quote(column)
    unconverted = scalar(con, f"SELECT count(*) FROM {qualified(spec)} WHERE {name} IS NOT NULL AND "
                              f"TRY_CAST(TRY_CAST({name} AS {declared}) AS {held}) IS DISTINCT FROM {name}")
    return f"{unconverted} values held do not convert to it unchanged" if unconverted else None


def ensure_tables(
    con: duckdb.DuckDBPyConnection, specs: Iterable[TableSpec], *, key_constraints: bool = True,
    storage_hints: bool = True, catalog: Catalog | None = None,
) -> list[str]:
    """Create schemas and tables, add missing columns; returns the migration steps taken.

    Idempotent. Migration keeps every row: a column the spec gained is added (nullable, since
    existing rows have no value); a column the spec no longer declares is kept but made nullable
    so inserts by name keep working, and so is one it now declares nullable (out of the key), which
    an earlier version made NOT NULL; a column the spec declares in another type is converted when every
    value it holds converts unchanged, in a DuckDB file (``key_constraints``), else logged and kept
    (:func:`_why_not_retyped`).
    The caller runs this inside a transaction. ``key_constraints=False`` (a DuckLake, which has no
    keys) creates every table without its PRIMARY KEY, ``storage_hints=False`` (a DuckLake, which stores
    Parquet) without its columns' ``compression``; an existing table keeps the storage it was created with.
    ``catalog``: the database's as read at the start of the caller's transaction (None: read here), for callers
    that ensure several groups of tables (each group's tables its own).
    """
    steps: list[str] = []
    catalog = catalog or Catalog.read(con)
    for spec in specs:
        if spec.schema not in catalog.schemas:
            run(con, f"CREATE SCHEMA IF NOT EXISTS {quote(spec.schema)}")
            catalog.schemas.add(spec.schema)
        have = catalog.columns.get((spec.schema, spec.name), {})
        if not have:
            run(con, spec.ddl(key_constraint=key_constraints, storage_hints=storage_hints))
            continue
        if not spec.key_constraint and (spec.schema, spec.name) in catalog.keyed:
            rebuild_without_key(con, spec, have)
            have = existing_columns(con, spec)
            steps.append(f"{spec.qualified_name}: rebuilt without its PRIMARY KEY index")
        declared = {c.name for c in spec.all_columns}
        for column in spec.all_columns:
            if column.name not in have:
                run(con, f"ALTER TABLE {qualified(spec)} ADD COLUMN {quote(column.name)} {column.type}")
                steps.append(f"{spec.qualified_name}: added column {column.name} {column.type}")
                continue
            want = _CATALOG_TYPE.get(column.type, column.type)
            held = have[column.name][0]
            if held == want:
                continue
            why_not = _why_not_retyped(con, spec, column.name, column.type, held, key_constraints, catalog)
            if why_not is None:
                run(con, f"ALTER TABLE {qualified(spec)} ALTER COLUMN {quote(column.name)} TYPE {column.type}")
                steps.append(f"{spec.qualified_name}: column {column.name} retyped from {held} to {want}")
            else:
                log.warning("%s.%s is %s in the database but %s in the spec; not altered (%s)",
                            spec.qualified_name, column.name, held, want, why_not)
        required = {c.name for c in spec.all_columns if not c.nullable} | set(spec.primary_key)
        held_key = catalog.keyed.get((spec.schema, spec.name), set()) if spec.key_constraint else set()
        for name, (_, nullable) in have.items():
            if nullable or name in required or name in held_key:  # DuckDB keeps a key's columns NOT NULL
                continue
            run(con, f"ALTER TABLE {qualified(spec)} ALTER COLUMN {quote(name)} DROP NOT NULL")
            steps.append(f"{spec.qualified_name}: column {name} "
                         f"{'declared nullable now' if name in declared else 'no longer declared'}, made nullable")
    for step in steps:
        log.info("schema migration: %s", step)
    return steps
