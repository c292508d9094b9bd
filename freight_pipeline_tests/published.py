"""What a data directory published, comparable across runs: every table of the freight and dbt
schemas, sorted, without the columns that name the run or when it wrote."""

from __future__ import annotations

from pathlib import Path

import duckdb

from freight_pipeline.warehouse.publish import published_db_path

PIPELINE_COLUMNS = ("_run_id", "_synced_at", "run_id", "recorded_at")
"""Columns that name the run or when it wrote (a history version's ``recorded_at``)."""


def published_tables(data_dir: Path) -> dict[str, list[tuple[object, ...]]]:
    """Every published table of the freight and dbt schemas, sorted, without the columns that name the
    run or its time."""
    tables: dict[str, list[tuple[object, ...]]] = {}
    with duckdb.connect(str(published_db_path(data_dir)), read_only=True) as con:
        names = con.execute("SELECT table_schema, table_name FROM information_schema.tables WHERE table_schema IN "
                            "('freight', 'freight_history', 'staging', 'intermediate', 'analytics')").fetchall()
        for schema, table in names:
            columns = [c for (c,) in con.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = ? AND table_name = ? "
                "ORDER BY ordinal_position", [schema, table]).fetchall()
                if c not in PIPELINE_COLUMNS and not c.endswith("_synced_at")]
            selected = ", ".join(f'"{column}"' for column in columns)
            rows = con.execute(f'SELECT {selected} FROM "{schema}"."{table}"').fetchall()
            tables[f"{schema}.{table}"] = sorted(rows, key=repr)
    return tables
