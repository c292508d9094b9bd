"""The sync's tables described in the catalog: every spec table and column has a description, each is written
once (only what the catalog lacks), and a Parquet file's metadata carries them as pyarrow reads them."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from freight_pipeline.normalize.tables import FREIGHT_TABLES
from freight_pipeline.warehouse.comments import (
    DESCRIBED_TABLES,
    TableDescriptions,
    catalog_comments,
    declared_comments,
    describe_tables,
)
from freight_pipeline.warehouse.ddl import quote, run
from freight_pipeline.warehouse.store import Warehouse


def test_every_table_and_column_of_every_spec_has_a_description() -> None:
    wanted = declared_comments(DESCRIBED_TABLES)
    assert len(wanted) > 700  # every table and column, audit columns included
    assert [target for target, text in wanted.items() if not text] == []


def test_the_described_tables_are_every_table_the_warehouse_makes(tmp_path: Path) -> None:
    with Warehouse(tmp_path, FREIGHT_TABLES) as warehouse:
        made = warehouse.con.execute(
            "SELECT schema_name, table_name FROM duckdb_tables() WHERE database_name = current_database()"
        ).fetchall()
    assert sorted(made) == sorted((spec.schema, spec.name) for spec in DESCRIBED_TABLES)


def test_only_the_descriptions_the_catalog_lacks_are_written(tmp_path: Path) -> None:
    with Warehouse(tmp_path, FREIGHT_TABLES) as warehouse:
        con = warehouse.con
        run(con, "SET threads = 3")  # written with the instance on one thread (ddl.one_thread), then given back
        wanted = declared_comments(DESCRIBED_TABLES)
        first = describe_tables(con)
        assert (first.written, first.tables) == (len(wanted), len(DESCRIBED_TABLES))
        assert run(con, "SELECT current_setting('threads')") == [(3,)]
        assert catalog_comments(con, {"freight", "freight_meta", "freight_history"}) == wanted
        assert describe_tables(con).written == 0  # held: one catalog query, nothing written

        shipments, events = FREIGHT_TABLES[0], next(s for s in FREIGHT_TABLES if s.name == "shipment_events")
        con.execute(f"COMMENT ON COLUMN {quote(shipments.schema)}.{quote(shipments.name)}.client IS 'changed'")
        con.execute(f"DROP TABLE {quote(events.schema)}.{quote(events.name)}")  # as a rebuild swaps one in
        con.execute(events.ddl())
        again = describe_tables(con)
        assert again.written == 1 + 1 + len(events.all_columns)
        assert catalog_comments(con, {"freight", "freight_meta", "freight_history"}) == wanted


def test_a_description_with_quotes_and_lines_is_written_as_declared(tmp_path: Path) -> None:
    con = duckdb.connect(str(tmp_path / "db.duckdb"))
    spec = FREIGHT_TABLES[0]
    con.execute(f"CREATE SCHEMA {spec.schema}")
    con.execute(spec.ddl())
    tricky = spec.__class__(spec.schema, spec.name, spec.columns, spec.primary_key,
                            "the shipper's \"main\" table;\nsecond line -- not SQL")
    describe_tables(con, [tricky])
    assert catalog_comments(con, {spec.schema})[(spec.schema, spec.name, None)] == tricky.description


def test_a_parquet_file_carries_the_table_s_and_each_column_s_description(tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    con = duckdb.connect()
    con.execute("CREATE TABLE t (a VARCHAR, b TIMESTAMPTZ, c JSON, d BIGINT)")
    con.execute("INSERT INTO t VALUES ('x', now(), '{\"k\": 1}', NULL)")
    con.execute(f"COPY (SELECT * FROM t LIMIT 0) TO '{path}' (FORMAT parquet)")
    read = pq.read_schema(path)
    described = TableDescriptions("rows of t", (("a", "the a"), ("b", "when"), ("c", "a document"), ("d", "")))
    pairs = described.parquet_metadata(read)
    options = ", ".join(f"'{key}': '{value}'" for key, value in pairs.items())
    con.execute(f"COPY t TO '{path}' (FORMAT parquet, KV_METADATA {{{options}}})")

    schema = pq.read_schema(path)
    assert schema.metadata == {b"description": b"rows of t"}
    assert {f.name: (f.metadata or {}).get(b"description") for f in schema} == {
        "a": b"the a", "b": b"when", "c": b"a document", "d": None}
    assert [f.type for f in schema] == [f.type for f in read]  # the types pyarrow reads without the metadata
    table = pq.read_table(path)
    assert table.column("c").type == pa.json_() and table.column("a").to_pylist() == ["x"]
    assert con.execute(f"SELECT a, d FROM '{path}'").fetchall() == [("x", None)]  # DuckDB reads it as before
