"""A reader of the published warehouse in a process (and environment) of its own: the tests run it with
the lake environment's duckdb 1.5.5, the engine today's BI tools bundle.

``python older_reader.py DB duckdb|sqlalchemy [STOP]``: opens DB read-only (DuckDB's Python API, or
SQLAlchemy through duckdb-engine with the URL Superset takes), fetches every row of every table and
view it lists, closes it and prints one JSON line: ``{"duckdb": "1.5.5", "rows": {"freight.shipments":
100, ...}}``, or ``{"error": "..."}``. Modes ``comments`` and ``sqlalchemy-comments`` print every table's
(and with DuckDB's API, every column's) comment instead (``{"comments": {"freight.shipments.client": "...", ...}}``).
With STOP: pass after pass until that file exists. Imports only
duckdb, SQLAlchemy and duckdb-engine.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import duckdb

LISTING = (
    "SELECT schema_name, table_name FROM duckdb_tables() WHERE database_name = current_database() "
    "UNION ALL SELECT schema_name, view_name FROM duckdb_views() WHERE database_name = current_database() "
    "AND NOT internal"
)
PAUSE_S = 0.2
"""Between passes: the sync beside it shares two cores."""


def _quoted(schema: str, name: str) -> str:
    return ".".join('"' + part.replace('"', '""') + '"' for part in (schema, name))


def with_duckdb(db: str) -> dict[str, int]:
    con = duckdb.connect(db, read_only=True)
    try:
        return {f"{schema}.{name}": len(con.execute(f"SELECT * FROM {_quoted(schema, name)}").fetchall())
                for schema, name in con.execute(LISTING).fetchall()}
    finally:
        con.close()


def with_sqlalchemy(db: str) -> dict[str, int]:
    """As Superset does: the URL, the dialect's listing of schemas, tables and views, SQL over them."""
    import sqlalchemy as sa

    engine = sa.create_engine(f"duckdb:///{db}?access_mode=read_only")
    try:
        inspector = sa.inspect(engine)
        rows: dict[str, int] = {}
        with engine.connect() as con:
            for qualified in inspector.get_schema_names():  # "warehouse.freight", "system.main", ...
                catalog, _, schema = qualified.partition(".")
                if catalog != "warehouse":
                    continue
                for name in (*inspector.get_table_names(schema=schema), *inspector.get_view_names(schema=schema)):
                    rows[f"{schema}.{name}"] = len(con.execute(sa.text(f"SELECT * FROM {_quoted(schema, name)}"))
                                                   .fetchall())
        return rows
    finally:
        engine.dispose()


def comments_with_duckdb(db: str) -> dict[str, str]:
    """``schema.table`` and ``schema.table.column`` -> its comment ('' when none), of every table."""
    con = duckdb.connect(db, read_only=True)
    try:
        return {name: comment or "" for name, comment in con.execute(
            "SELECT schema_name || '.' || table_name, comment FROM duckdb_tables() UNION ALL "
            "SELECT schema_name || '.' || table_name || '.' || column_name, comment FROM duckdb_columns() "
            "WHERE (schema_name, table_name) IN (SELECT (schema_name, table_name) FROM duckdb_tables())").fetchall()}
    finally:
        con.close()


def comments_with_sqlalchemy(db: str) -> dict[str, str]:
    """Every table's comment as SQLAlchemy's inspector reflects it (Superset's dataset editor). Not the columns':
    duckdb-engine 0.17.0 cannot reflect columns under SQLAlchemy 2.0.45 or later (duckdb-engine issue 1379)."""
    import sqlalchemy as sa

    engine = sa.create_engine(f"duckdb:///{db}?access_mode=read_only")
    try:
        inspector = sa.inspect(engine)
        found: dict[str, str] = {}
        for qualified in inspector.get_schema_names():
            catalog, _, schema = qualified.partition(".")
            if catalog != "warehouse":
                continue
            for table in inspector.get_table_names(schema=schema):
                found[f"{schema}.{table}"] = inspector.get_table_comment(table, schema=schema)["text"] or ""
        return found
    finally:
        engine.dispose()


READS = {"duckdb": ("rows", with_duckdb), "sqlalchemy": ("rows", with_sqlalchemy),
         "comments": ("comments", comments_with_duckdb), "sqlalchemy-comments": ("comments", comments_with_sqlalchemy)}
"""Mode -> what it prints and how it reads it."""


def main() -> None:
    db, mode = sys.argv[1], sys.argv[2]
    stop = Path(sys.argv[3]) if len(sys.argv) > 3 else None
    key, read = READS[mode]
    while True:
        try:
            print(json.dumps({"duckdb": duckdb.__version__, key: read(db)}), flush=True)
        except Exception as exc:  # reported, not raised: the test asserts there were none
            print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
        if stop is None or stop.exists():
            return
        time.sleep(PAUSE_S)


if __name__ == "__main__":
    main()
