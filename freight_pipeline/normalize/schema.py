"""Table specifications: declared once, they drive DuckDB DDL, Arrow schemas and Parquet output."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import pyarrow as pa

# DuckDB type name -> Arrow type. The only types table specs may use.
_ARROW_TYPES: dict[str, pa.DataType] = {
    "VARCHAR": pa.string(),
    "BIGINT": pa.int64(),
    "INTEGER": pa.int32(),
    "DOUBLE": pa.float64(),
    "BOOLEAN": pa.bool_(),
    "DATE": pa.date32(),
    "TIME": pa.time64("us"),
    "TIMESTAMPTZ": pa.timestamp("us", tz="UTC"),
    "JSON": pa.string(),  # stored as DuckDB JSON, carried as text in Arrow
    "BLOB": pa.binary(),
}


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    description: str = ""
    nullable: bool = True
    compression: str | None = None
    """DuckDB's storage compression of the column (``USING COMPRESSION``) where its own choice is wasted, e.g.
    ``uncompressed`` for bytes compressed already; None: DuckDB's choice."""

    def __post_init__(self) -> None:
        if self.type not in _ARROW_TYPES:
            raise ValueError(f"column {self.name!r}: unsupported type {self.type!r}")

    @property
    def arrow_type(self) -> pa.DataType:
        return _ARROW_TYPES[self.type]


AUDIT_COLUMNS: tuple[Column, ...] = (
    Column("_synced_at", "TIMESTAMPTZ", "when the pipeline wrote the row", nullable=False),
    Column("_run_id", "VARCHAR", "the run (Dagster run id or CLI run id) that wrote the row", nullable=False),
)


@dataclass(frozen=True)
class TableSpec:
    """One warehouse table.

    ``columns`` are the business columns the normaliser produces; the audit columns
    ``_synced_at`` / ``_run_id`` are appended by the warehouse. ``replace_key`` names the column
    whose value identifies a replace unit (``shipment_id`` for every child of a shipment): when a
    unit changes, all its rows are deleted and re-inserted together.
    """

    schema: str
    name: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...]
    description: str
    replace_key: str | None = "shipment_id"
    audit: bool = True
    key_constraint: bool = False
    """Declare ``primary_key`` as a DuckDB PRIMARY KEY. Off for the source tables: DuckDB keeps such a
    key as an index in memory that grows with the table (a 20,000-shipment warehouse outgrew 128 MB),
    and their writes keep keys unique anyway (rows replaced by shipment, a batch refused when it
    repeats a key) as the ``primary_key_unique`` checks and dbt's tests verify. On for the small
    ``freight_meta`` tables (not in a DuckLake, which has no keys: writes delete, then insert)."""
    column_index: Mapping[str, Column] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        index = {c.name: c for c in self.all_columns}
        if len(index) != len(self.all_columns):
            raise ValueError(f"table {self.qualified_name}: duplicate column names")
        for key in (*self.primary_key, *([self.replace_key] if self.replace_key else [])):
            if key not in index:
                raise ValueError(f"table {self.qualified_name}: key column {key!r} is not declared")
        object.__setattr__(self, "column_index", index)

    @property
    def qualified_name(self) -> str:
        return f"{self.schema}.{self.name}"

    @property
    def all_columns(self) -> tuple[Column, ...]:
        return self.columns + (AUDIT_COLUMNS if self.audit else ())

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    @cached_property
    def row_type(self) -> pa.StructType:
        """A row of the table (audit columns aside) as an Arrow struct."""
        return pa.struct(list(self.arrow_schema()))

    def arrow_schema(self, *, with_audit: bool = False) -> pa.Schema:
        cols = self.all_columns if with_audit else self.columns
        return pa.schema([pa.field(c.name, c.arrow_type, nullable=c.nullable) for c in cols])

    def ddl(self, name: str | None = None, *, key_constraint: bool = True, storage_hints: bool = True) -> str:
        """``CREATE TABLE`` of this spec (under another ``name`` in the same schema, for a rebuild);
        ``key_constraint=False`` leaves out the PRIMARY KEY even when the spec declares one, ``storage_hints=False``
        the columns' ``compression``."""
        cols = [
            f'"{c.name}" {c.type}{"" if c.nullable and c.name not in self.primary_key else " NOT NULL"}'
            f'{f" USING COMPRESSION {c.compression}" if storage_hints and c.compression else ""}'
            for c in self.all_columns
        ]
        pk = ", ".join(f'"{k}"' for k in self.primary_key)
        body = ",\n  ".join([*cols, *([f"PRIMARY KEY ({pk})"] if self.key_constraint and key_constraint else [])])
        return f"CREATE TABLE IF NOT EXISTS {self.schema}.{name or self.name} (\n  {body}\n)"

    def to_arrow(self, rows: Iterable[Mapping[str, Any]]) -> pa.Table:
        """Rows (dicts keyed by column name; missing keys are null) to an Arrow table of this schema."""
        rows = rows if isinstance(rows, list) else list(rows)
        if all(type(r) is dict for r in rows):
            # fast path: the dicts as one struct array, converted in C++ (``Table.from_pylist`` picks each
            # column's values out of the dicts in Python first: more than half of its time)
            return pa.Table.from_struct_array(pa.array(rows, type=self.row_type))
        arrays = [
            pa.array([r.get(c.name) for r in rows], type=c.arrow_type) for c in self.columns
        ]
        return pa.Table.from_arrays(arrays, schema=self.arrow_schema())
