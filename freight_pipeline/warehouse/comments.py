"""The tables' and columns' descriptions in the database's catalog (``COMMENT ON``), where BI tools show them.

The sync's tables (``freight``, ``freight_meta``, ``freight_history``) are described by their specs; the
marts by their dbt YAML, which dbt writes itself (``persist_docs``, ``dbt_models/macros/persist_docs.sql``).
:func:`describe_tables` writes only the descriptions the catalog does not hold yet: a ``COMMENT ON`` costs
DuckDB a quarter of a millisecond (a new catalog entry of the table): in a first publish 0.14-0.20 s of CPU for a
new warehouse's 762 on one thread (0.24-0.27 s on two: ``ddl.one_thread``), and nothing once they are held (one
catalog query). It runs before each publish, so whatever made a table (created, migrated, swapped in by a rebuild)
its published description is the spec's.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import duckdb
import pyarrow as pa

from freight_pipeline.normalize.schema import TableSpec
from freight_pipeline.normalize.tables import FREIGHT_TABLES
from freight_pipeline.warehouse.ddl import literal, one_thread, quote, run
from freight_pipeline.warehouse.history import HISTORY_TABLES
from freight_pipeline.warehouse.meta import META_TABLES

DESCRIBED_TABLES: tuple[TableSpec, ...] = (*FREIGHT_TABLES, *META_TABLES, *HISTORY_TABLES)
"""Every table the sync writes, described by its spec."""

DESCRIPTION_KEY = "description"
"""The key of a description in a Parquet file's metadata (the table's) and in an Arrow field's (a column's)."""
ARROW_SCHEMA_KEY = "ARROW:schema"
"""The Parquet metadata key under which pyarrow keeps the Arrow schema (base64 of its IPC form)."""

Target = tuple[str, str, str | None]
"""(schema, table, column), column None for the table itself."""


@dataclass(frozen=True)
class Described:
    """What :func:`describe_tables` wrote."""

    written: int
    """Comments written (0 when the catalog held every description)."""
    tables: int
    """Tables described (those that exist)."""


@dataclass(frozen=True)
class TableDescriptions:
    """One table's description and its columns', as its catalog holds them ('' when none)."""

    table: str
    columns: tuple[tuple[str, str], ...]
    """(column, description) in the table's order."""

    @classmethod
    def of(cls, held: Mapping[Target, str], schema: str, table: str, columns: Iterable[str]) -> TableDescriptions:
        return cls(held.get((schema, table, None), ""),
                   tuple((name, held.get((schema, table, name), "")) for name in columns))

    @property
    def empty(self) -> bool:
        return not self.table and not any(text for _, text in self.columns)

    def parquet_metadata(self, schema: pa.Schema) -> dict[str, str]:
        """A Parquet file's key-value metadata for these descriptions, ``schema`` being the Arrow schema pyarrow
        reads from the file: ``description`` (the table's), and ``ARROW:schema``, that schema with each field's
        description, where pyarrow (and pandas, Polars) find a field's metadata."""
        texts = dict(self.columns)
        fields = [f.with_metadata({DESCRIPTION_KEY: texts[f.name]}) if texts.get(f.name) else f for f in schema]
        described = pa.schema(fields, metadata={DESCRIPTION_KEY: self.table} if self.table else None)
        pairs = {ARROW_SCHEMA_KEY: base64.b64encode(described.serialize().to_pybytes()).decode("ascii")}
        return {**({DESCRIPTION_KEY: self.table} if self.table else {}), **pairs}


def declared_comments(specs: Iterable[TableSpec]) -> dict[Target, str]:
    """Each table's and column's description, audit columns included."""
    wanted: dict[Target, str] = {}
    for spec in specs:
        wanted[(spec.schema, spec.name, None)] = spec.description.strip()
        for column in spec.all_columns:
            wanted[(spec.schema, spec.name, column.name)] = column.description.strip()
    return wanted


def catalog_comments(con: duckdb.DuckDBPyConnection, schemas: Iterable[str]) -> dict[Target, str]:
    """The comments the current database holds for the tables of ``schemas`` and their columns ('' when none)."""
    listed = sorted(set(schemas))
    if not listed:
        return {}
    marks = ", ".join("?" for _ in listed)
    here = f"database_name = current_database() AND schema_name IN ({marks})"
    rows = run(con, f"SELECT schema_name, table_name, NULL, coalesce(comment, '') FROM duckdb_tables() WHERE {here} "
                    "UNION ALL SELECT schema_name, table_name, column_name, coalesce(comment, '') "
                    f"FROM duckdb_columns() WHERE {here}", [*listed, *listed])
    return {(schema, table, column): comment for schema, table, column, comment in rows}


def comment_statements(wanted: Mapping[Target, str], held: Mapping[Target, str]) -> list[str]:
    """``COMMENT ON`` statements for the descriptions of ``wanted`` that exist in ``held`` with another text."""
    statements = []
    for (schema, table, column), text in wanted.items():
        have = held.get((schema, table, column))
        if have is None or have == text or not text:
            continue
        target = f"{quote(schema)}.{quote(table)}"
        statements.append(f"COMMENT ON TABLE {target} IS {literal(text)}" if column is None
                          else f"COMMENT ON COLUMN {target}.{quote(column)} IS {literal(text)}")
    return statements


def describe_tables(con: duckdb.DuckDBPyConnection, specs: Iterable[TableSpec] = DESCRIBED_TABLES) -> Described:
    """Write the descriptions of ``specs`` the catalog lacks, in one transaction (the caller holds none)."""
    wanted = declared_comments(specs)
    held = catalog_comments(con, {schema for schema, _, _ in wanted})
    statements = comment_statements(wanted, held)
    if statements:
        with one_thread(con):
            run(con, "BEGIN TRANSACTION")
            try:
                for statement in statements:
                    run(con, statement)
                run(con, "COMMIT")
            except BaseException:
                run(con, "ROLLBACK")
                raise
    tables = sum(1 for (schema, table, column) in wanted if column is None and (schema, table, None) in held)
    return Described(len(statements), tables)
