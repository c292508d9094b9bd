"""The published warehouse as docs/connecting.md says to read it: every Parquet table reads back with the
same rows and types, the file (converted at publish from a working database in duckdb 2.0's format, with
every mart) opens in duckdb 1.5, and the page's Python, SQLAlchemy URL and CLI line run against it.

The page's examples name ``/srv/freight``; here it is the published ``data/`` directory of the dbt
fixtures (a warehouse built by ``dbt build`` and published as the pipeline does).
"""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import sqlalchemy as sa

from freight_pipeline.config import REPO_ROOT
from freight_pipeline_tests.warehouse.older import (
    OLDEST_READER,
    read_once,
    rows_here,
    storage_tag_of,
    version_of,
)

PAGE = REPO_ROOT / "docs" / "connecting.md"
EXAMPLE_DIR = "/srv/freight"


def _blocks(language: str) -> list[str]:
    return [body for lang, body in re.findall(r"^```(\w*)\n(.*?)^```", PAGE.read_text(), flags=re.DOTALL | re.MULTILINE)
            if lang == language]


def _here(text: str, data_dir: Path) -> str:
    return text.replace(EXAMPLE_DIR, str(data_dir))


@pytest.fixture(scope="module")
def data_dir(published: Path) -> Path:
    return published / "data"


@pytest.fixture
def con(data_dir: Path) -> Any:
    """Closed after each test: DuckDB refuses a second connection of another configuration in one process."""
    with duckdb.connect(str(data_dir / "warehouse.duckdb"), read_only=True) as connection:
        connection.execute("SET TimeZone = 'UTC'")  # Arrow timestamps in UTC, as Parquet stores them
        yield connection


def _tables(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str]]:
    return con.execute("SELECT schema_name, table_name FROM duckdb_tables() ORDER BY ALL").fetchall()


def test_every_table_has_a_parquet_file_that_duckdb_reads_back_with_the_same_rows_and_types(
    con: duckdb.DuckDBPyConnection, data_dir: Path
) -> None:
    manifest = json.loads((data_dir / "parquet" / "_manifest.json").read_text())
    tables = _tables(con)
    assert sorted(manifest["tables"]) == [f"{s}.{t}" for s, t in tables]
    assert {"analytics", "freight"} <= {s for s, _ in tables}  # (the dbt fixtures write no freight_meta)
    for schema, table in tables:
        path = data_dir / "parquet" / schema / table / "data.parquet"
        parquet = f"read_parquet('{path}')"
        columns = "SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM {})"
        assert con.execute(columns.format(parquet)).fetchall() == \
            con.execute(columns.format(f'"{schema}"."{table}"')).fetchall(), f"{schema}.{table}"
        for a, b in ((f'"{schema}"."{table}"', parquet), (parquet, f'"{schema}"."{table}"')):
            extra = con.execute(f"SELECT count(*) FROM (SELECT * FROM {a} EXCEPT ALL SELECT * FROM {b})").fetchall()
            assert extra == [(0,)], f"{schema}.{table}: rows of {a} not in {b}"
        assert con.execute(f"SELECT count(*) FROM {parquet}").fetchall()[0][0] == manifest["tables"][
            f"{schema}.{table}"]["rows"]


def test_pyarrow_reads_every_parquet_table_with_duckdb_s_rows_and_arrow_types(
    con: duckdb.DuckDBPyConnection, data_dir: Path
) -> None:
    """An engine other than DuckDB: the types are DuckDB's Arrow types, JSON annotated as ``arrow.json``."""
    json_columns = 0
    for schema, table in _tables(con):
        ours = con.sql(f'SELECT * FROM "{schema}"."{table}"').to_arrow_table()
        theirs = pq.read_table(data_dir / "parquet" / schema / table / "data.parquet")
        assert theirs.column_names == ours.column_names, f"{schema}.{table}"
        kinds = dict(con.execute("SELECT column_name, data_type FROM duckdb_columns() WHERE schema_name = ? "
                                 "AND table_name = ?", [schema, table]).fetchall())
        for field in ours.schema:
            expected = pa.json_() if kinds[field.name] == "JSON" else field.type
            json_columns += kinds[field.name] == "JSON"
            assert theirs.schema.field(field.name).type == expected, (schema, table, field.name)
        assert sorted(map(repr, theirs.cast(ours.schema).to_pylist())) == sorted(map(repr, ours.to_pylist())), \
            f"{schema}.{table}"
    assert json_columns > 0  # the JSON rule above was exercised


def test_every_parquet_file_carries_its_table_s_and_columns_descriptions(
    con: duckdb.DuckDBPyConnection, data_dir: Path
) -> None:
    """As pyarrow (and so pandas, Polars) reads them: the table's in the file's metadata, each column's in its
    field's, the text the published file's catalog holds (the specs' for the sync's tables, the YAML's for
    the marts)."""
    tables = _tables(con)
    assert {("freight", "shipments"), ("analytics", "fct_shipments")} <= set(tables)
    for schema, table in tables:
        comment = con.execute("SELECT comment FROM duckdb_tables() WHERE schema_name = ? AND table_name = ?",
                              [schema, table]).fetchall()[0][0]
        columns = dict(con.execute("SELECT column_name, comment FROM duckdb_columns() WHERE schema_name = ? "
                                   "AND table_name = ?", [schema, table]).fetchall())
        read = pq.read_schema(data_dir / "parquet" / schema / table / "data.parquet")
        assert comment and all(columns.values()), f"{schema}.{table}: a hole in the catalog"
        assert (read.metadata or {}).get(b"description", b"").decode() == comment, f"{schema}.{table}"
        assert {f.name: (f.metadata or {}).get(b"description", b"").decode() for f in read} == columns, \
            f"{schema}.{table}"


def test_the_converted_file_opens_in_duckdb_1_5_with_every_mart(warehouse: dict[str, Any], data_dir: Path) -> None:
    """The dbt fixtures build the working database with plain duckdb 2.0, so the publish converted it."""
    assert storage_tag_of(warehouse["path"]) == "v2.0.0+"
    db = data_dir / "warehouse.duckdb"
    assert version_of(storage_tag_of(db)) <= OLDEST_READER
    expected = rows_here(db)
    assert expected["analytics.fct_shipments"] == warehouse["shipments"]
    assert any(name.startswith("staging.") for name in expected)  # dbt's views, read through
    for mode in ("duckdb", "sqlalchemy"):
        read = read_once(db, mode)
        assert read.get("rows") == expected, (mode, read.get("error"))


def test_the_page_s_python_runs(data_dir: Path) -> None:
    blocks = _blocks("python")
    assert len(blocks) == 2 and "pandas" in blocks[0] and "polars" in blocks[1]  # the page's shape
    frames = 0
    for block in blocks:
        modules = re.findall(r"^import (\w+)", block, flags=re.MULTILINE)
        if any(importlib.util.find_spec(module) is None for module in modules):
            assert "polars" in modules, modules  # only polars may be absent: not a dependency
            continue
        namespace: dict[str, Any] = {}
        exec(compile(_here(block, data_dir), str(PAGE), "exec"), namespace)  # the page's own example
        for value in namespace.values():
            if isinstance(value, pd.DataFrame) or type(value).__name__ == "DataFrame":
                assert len(value) > 0
                frames += 1
    assert frames >= 2


def test_the_page_s_superset_url_reads_and_refuses_writes(data_dir: Path) -> None:
    (block,) = _blocks("text")[:1]
    url = _here(block.strip(), data_dir)
    assert url.startswith("duckdb:////") and url.endswith("?access_mode=read_only")
    engine = sa.create_engine(url)
    try:
        assert "warehouse.analytics" in sa.inspect(engine).get_schema_names()
        with engine.connect() as connection:
            assert connection.execute(sa.text("select count(*) from analytics.fct_shipments")).scalar_one() > 0
            with pytest.raises(sa.exc.DBAPIError, match="read-only"):
                connection.execute(sa.text("create table main.scratch (x integer)"))
    finally:
        engine.dispose()


def test_the_page_s_cli_line(data_dir: Path) -> None:
    """The ``duckdb -readonly`` line opens the file when a DuckDB CLI is installed (it is no dependency)."""
    (block,) = [b for b in _blocks("sh") if b.startswith("duckdb ")]
    command = shlex.split(_here(block, data_dir))
    assert command[:2] == ["duckdb", "-readonly"] and Path(command[2]).is_file()
    if shutil.which("duckdb") is None:
        pytest.skip("no DuckDB CLI on PATH")
    done = subprocess.run([*command, "-c", "select count(*) from analytics.fct_shipments"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
