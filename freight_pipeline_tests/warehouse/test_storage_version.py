"""The published file's storage version: DuckDB 1.5 opens it by default, whatever format the working
database is in; ``FREIGHT_PUBLISH_STORAGE_VERSION`` chooses another, and one DuckDB cannot write is refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pytest

from freight_pipeline.config import PUBLISH_STORAGE_VERSION_ENV, StorageSettings
from freight_pipeline.warehouse import meta
from freight_pipeline.warehouse.embedded import EmbeddedDuckDB
from freight_pipeline.warehouse.paths import working_db_path
from freight_pipeline.warehouse.publish import parquet_root, publish, published_db_path
from freight_pipeline.warehouse.store import Warehouse
from freight_pipeline_tests.warehouse.helpers import TABLES, apply_shipment_batch, shipment_batch
from freight_pipeline_tests.warehouse.older import OLDEST_READER, read_once, rows_here, storage_tag_of, version_of


def _filled(data_dir: Path) -> None:
    with Warehouse(data_dir, TABLES, backend=EmbeddedDuckDB(StorageSettings.configured())) as wh:
        tables, raw = shipment_batch([1, 2, 3], lines=2, marks=1)
        apply_shipment_batch(wh, "run", tables, [1, 2, 3], raw_documents=raw, cursor=("shipments", "3"))


def _catalog(db: Path) -> dict[str, list[Any]]:
    """Everything a reader sees of the schema: tables and columns with comments, constraints, views, ..."""
    queries = {
        "tables": "SELECT schema_name, table_name, comment FROM duckdb_tables()",
        "columns": "SELECT schema_name, table_name, column_name, data_type, is_nullable, column_default, comment "
                   "FROM duckdb_columns()",
        "constraints": "SELECT schema_name, table_name, constraint_type, constraint_text FROM duckdb_constraints()",
        "views": "SELECT schema_name, view_name, sql FROM duckdb_views() WHERE NOT internal",
        "sequences": "SELECT schema_name, sequence_name FROM duckdb_sequences()",
        "macros": "SELECT schema_name, function_name, macro_definition FROM duckdb_functions() "
                  "WHERE NOT internal AND function_type = 'macro'",
    }
    with duckdb.connect(str(db), read_only=True) as con:
        return {name: sorted(con.execute(sql).fetchall(), key=str) for name, sql in queries.items()}


def _same_rows(a: Path, b: Path) -> None:
    with duckdb.connect() as con:
        con.execute(f"ATTACH '{a}' AS a (READ_ONLY)")
        con.execute(f"ATTACH '{b}' AS b (READ_ONLY)")
        tables = con.execute("SELECT schema_name, table_name FROM duckdb_tables() WHERE database_name = 'a'").fetchall()
        assert tables
        for schema, table in tables:
            for x, y in (("a", "b"), ("b", "a")):
                differ = con.execute(f"SELECT count(*) FROM (SELECT * FROM {x}.{schema}.{table} EXCEPT ALL "
                                     f"SELECT * FROM {y}.{schema}.{table})").fetchall()[0][0]
                assert differ == 0, f"{schema}.{table}: {differ} rows of {x} not in {y}"


def _legacy_working_database(data_dir: Path) -> Path:
    """A working database in duckdb 2.0's own format, as every one made before the setting existed, holding
    what a publish must carry over: keys, NOT NULL, defaults, comments, a view naming the catalog, a macro."""
    work = working_db_path(data_dir)
    work.parent.mkdir(parents=True)
    with duckdb.connect(str(work)) as con:
        con.execute("CREATE SCHEMA freight")
        con.execute("CREATE TABLE freight.parents (shipment_id BIGINT PRIMARY KEY, name VARCHAR NOT NULL, "
                    "modified_at TIMESTAMPTZ, payload JSON, weight DECIMAL(12, 3) DEFAULT 0, tags VARCHAR[])")
        con.execute("INSERT INTO freight.parents SELECT i, 'n' || i, TIMESTAMPTZ '2026-11-01 08:00:00+00' "
                    "+ i * INTERVAL 1 HOUR, json_object('i', i), i / 7, ['a', 'b'] FROM range(500) t(i)")
        con.execute("COMMENT ON TABLE freight.parents IS 'one row per shipment'")
        con.execute("COMMENT ON COLUMN freight.parents.name IS 'the shipment''s name'")
        con.execute("CREATE SCHEMA analytics")
        con.execute("CREATE TABLE analytics.mart AS SELECT shipment_id, weight FROM freight.parents WHERE weight > 10")
        con.execute("CREATE VIEW analytics.heavy AS SELECT * FROM warehouse.freight.parents WHERE weight > 50")
        con.execute("CREATE MACRO analytics.kg(x) AS x * 1000")
        con.execute("CREATE SEQUENCE analytics.ids")
        con.execute("CREATE SCHEMA scratch")
        con.execute("CREATE TABLE scratch.notes AS SELECT 1 AS x")
    assert storage_tag_of(work) == "v2.0.0+"
    return work


def test_the_published_file_opens_in_duckdb_1_5_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fails when the default storage version is raised past what DuckDB 1.5, the BI tools' engine, reads."""
    monkeypatch.delenv(PUBLISH_STORAGE_VERSION_ENV, raising=False)
    _filled(tmp_path)
    result = publish(tmp_path, settings=StorageSettings.configured())
    db = published_db_path(tmp_path)
    assert result.storage_version == storage_tag_of(db) == storage_tag_of(working_db_path(tmp_path))
    assert version_of(result.storage_version) <= OLDEST_READER, (StorageSettings().storage_version, result)
    assert not result.converted  # a new working database is made in the published format: a byte copy
    manifest = json.loads((parquet_root(tmp_path) / "_manifest.json").read_text())
    assert manifest["storage_version"] == result.storage_version
    expected = rows_here(db)
    assert expected["freight.parents"] == 3
    for mode in ("duckdb", "sqlalchemy"):
        read = read_once(db, mode)
        assert "error" not in read, read
        assert version_of(read["duckdb"])[:2] == OLDEST_READER[:2]
        assert read["rows"] == expected, mode


def test_a_working_database_in_another_format_is_converted_whole(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PUBLISH_STORAGE_VERSION_ENV, raising=False)
    work = _legacy_working_database(tmp_path)
    result = publish(tmp_path, settings=StorageSettings.configured())
    db = published_db_path(tmp_path)
    assert result.converted and result.storage_version == storage_tag_of(db) == "v1.5.0+"
    assert storage_tag_of(work) == "v2.0.0+"  # the working database keeps its format
    assert _catalog(db) == _catalog(work)
    _same_rows(work, db)
    used = "SELECT count(*), max(analytics.kg(weight)) FROM analytics.heavy"  # the view and the macro
    with duckdb.connect(str(db), read_only=True) as con, duckdb.connect(str(work), read_only=True) as source:
        assert con.execute(used).fetchall() == source.execute(used).fetchall() == [(149, 71286)]
    read = read_once(db, "duckdb")
    assert read["rows"] == rows_here(db) and read["rows"]["analytics.heavy"] == 149
    assert not list(tmp_path.glob(".publish-tmp-*"))

    narrowed = publish(tmp_path, ("freight", "analytics"), settings=StorageSettings.configured())
    assert narrowed.converted and "scratch.notes" not in narrowed.tables
    assert "scratch.notes" not in rows_here(db) and rows_here(db)["analytics.heavy"] == 149

    monkeypatch.setenv(PUBLISH_STORAGE_VERSION_ENV, "latest")  # duckdb 2.0's own: a byte copy, 1.5 cannot open it
    latest = publish(tmp_path, settings=StorageSettings.configured())
    assert not latest.converted and storage_tag_of(db) == latest.storage_version == "v2.0.0+"
    refused = read_once(db, "duckdb")
    assert "created with an newer version of DuckDB" in refused.get("error", ""), refused


def test_a_new_working_database_follows_the_setting_and_an_old_one_keeps_its_format(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(PUBLISH_STORAGE_VERSION_ENV, "latest")
    _filled(tmp_path)
    assert storage_tag_of(working_db_path(tmp_path)) == "v2.0.0+"
    monkeypatch.setenv(PUBLISH_STORAGE_VERSION_ENV, "v1.4.0")
    _filled(tmp_path)  # opened again under another setting: the file stays as it is
    assert storage_tag_of(working_db_path(tmp_path)) == "v2.0.0+"
    result = publish(tmp_path, settings=StorageSettings.configured())
    assert result.converted and storage_tag_of(published_db_path(tmp_path)) == "v1.4.0+"
    _same_rows(working_db_path(tmp_path), published_db_path(tmp_path))


@pytest.mark.parametrize("value", ["v9.9.9", "2.0", "newest", "v1.5.0'; DROP SCHEMA freight; --"])
def test_a_storage_version_duckdb_cannot_write_is_refused_before_anything_is_copied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.delenv(PUBLISH_STORAGE_VERSION_ENV, raising=False)
    _filled(tmp_path)
    first = publish(tmp_path, settings=StorageSettings.configured())
    monkeypatch.setenv(PUBLISH_STORAGE_VERSION_ENV, value)
    with pytest.raises(ValueError, match=rf"^{PUBLISH_STORAGE_VERSION_ENV}=.* is not a storage version duckdb "):
        publish(tmp_path, settings=StorageSettings.configured())
    assert not list(tmp_path.glob(".publish-tmp-*"))
    assert parquet_root(tmp_path).resolve() == first.parquet_dir
    assert rows_here(published_db_path(tmp_path))["freight.parents"] == 3


def test_a_converted_publish_keeps_the_order_the_runs_were_recorded_in(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The runs of a working database in another format, more than two row groups of them (122,880 rows each: a
    year of runs): the converted copy holds them in the order they were recorded, so each stream's latest run
    (``meta.latest_runs``, by rowid) is the same as in the working database. The copy ran with insertion order off:
    its row groups came out in another order, and readers were shown an older run as a stream's latest (a
    failure hidden behind a success before it); twice published, at least one was out of order nearly always."""
    monkeypatch.delenv(PUBLISH_STORAGE_VERSION_ENV, raising=False)
    work = working_db_path(tmp_path)
    work.parent.mkdir(parents=True)
    runs = meta.SYNC_RUNS.qualified_name
    with duckdb.connect(str(work)) as con:  # duckdb 2.0's own format: converted at every publish
        con.execute(f"CREATE SCHEMA {meta.SYNC_RUNS.schema}")
        con.execute(meta.SYNC_RUNS.ddl())
        con.execute(f"INSERT INTO {runs} (run_id, stream, started_at, status) "
                    "SELECT 'r' || lpad(i::VARCHAR, 6, '0'), 's' || (i % 3), "
                    "TIMESTAMPTZ '2026-01-01 00:00:00+00' + i * INTERVAL 1 MINUTE, "
                    "CASE WHEN i = 259_999 THEN 'failed' ELSE 'success' END FROM range(260_000) t(i) ORDER BY i")
    # the run ids go up in the order recorded: how many rows follow one recorded after them
    out_of_order = (f"SELECT count(*) FROM (SELECT run_id < lag(run_id) OVER (ORDER BY rowid) AS back FROM {runs}) "
                    "WHERE back")
    latest = f"SELECT stream, run_id, status FROM {meta.latest_runs(runs)} ORDER BY stream"
    with duckdb.connect(str(work), read_only=True) as con:
        assert con.execute(out_of_order).fetchall() == [(0,)]
        expected = con.execute(latest).fetchall()
    assert expected == [("s0", "r259998", "success"), ("s1", "r259999", "failed"), ("s2", "r259997", "success")]
    for _ in range(2):
        assert publish(tmp_path, settings=StorageSettings.configured()).converted
        with duckdb.connect(str(published_db_path(tmp_path)), read_only=True) as con:
            assert con.execute(latest).fetchall() == expected
            assert con.execute(out_of_order).fetchall() == [(0,)]
