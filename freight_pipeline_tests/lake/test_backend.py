"""``LakeBackend``: a new lake's tables are written once and emptied (``prime_tables``), so that DuckLake 1.5.5 plans
their scans from statistics instead of asking its catalog once per column at every statement; no snapshot holds the
row and no change feed shows it. The sync's connection runs on the sync's DuckDB threads, a reader's on DuckDB's."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from freight_pipeline.config import LAKE_CATALOG_URI_ENV, LAKE_DATA_URI_ENV
from freight_pipeline.lake.backend import _UNWRITTEN_TABLES, PUBLISHED_SNAPSHOTS_TABLE, LakeBackend, _placeholder
from freight_pipeline.lake.settings import LAKE_ALIAS, LakeSettings
from freight_pipeline.normalize.schema import Column, TableSpec
from freight_pipeline.normalize.tables import FREIGHT_TABLES
from freight_pipeline.warehouse import meta
from freight_pipeline.warehouse.ddl import SYNC_THREADS, qualified
from freight_pipeline.warehouse.history import HISTORY_TABLES
from freight_pipeline.warehouse.records import BatchWrite, Quarantined
from freight_pipeline.warehouse.store import open_warehouse

DECLARED = (*FREIGHT_TABLES, *meta.META_TABLES, *HISTORY_TABLES, PUBLISHED_SNAPSHOTS_TABLE)


def new_lake(tmp_path: Path) -> LakeBackend:
    settings = LakeSettings.configured({LAKE_CATALOG_URI_ENV: f"sqlite:///{tmp_path}/catalog/lake.sqlite",
                                        LAKE_DATA_URI_ENV: str(tmp_path / "lake-data")})
    assert settings is not None
    return LakeBackend(settings)


def without_statistics(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The tables the lake's catalog holds no statistics of (the query :meth:`LakeBackend.prime_tables` reads)."""
    return sorted(f"{schema}.{table}" for schema, table in con.execute(_UNWRITTEN_TABLES).fetchall())


@pytest.mark.parametrize("kind", sorted({c.type for spec in DECLARED for c in spec.all_columns if not c.nullable}))
def test_every_type_of_a_declared_not_null_column_has_a_placeholder(kind: str) -> None:
    with duckdb.connect() as con:
        assert con.execute(f"SELECT {_placeholder(kind)}").fetchone() != (None,), kind


def test_a_new_lake_s_tables_have_statistics_and_hold_nothing_of_the_placeholder_row(tmp_path: Path) -> None:
    backend = new_lake(tmp_path)
    with open_warehouse(tmp_path / "data", backend) as wh:
        con = wh.con
        specs = (*wh.database.tables, *wh.database.meta_tables, *HISTORY_TABLES)
        assert without_statistics(con) == []
        latest = con.execute(f"SELECT max(snapshot_id) FROM ducklake_snapshots('{LAKE_ALIAS}')").fetchone()
        assert latest is not None
        written = {meta.SYNC_STATE.qualified_name: 1}  # the schema's signature (``store.SCHEMA_STATE``), no other
        for spec in specs:  # no placeholder in the latest snapshot, nor in any change feed
            held = written.get(spec.qualified_name, 0)
            assert con.execute(f"SELECT count(*) FROM {qualified(spec)}").fetchone() == (held,), spec.qualified_name
            changes = con.execute(f"SELECT count(*) FROM ducklake_table_changes('{LAKE_ALIAS}', '{spec.schema}', "
                                  f"'{spec.name}', 0, {latest[0]})").fetchone()
            assert changes == (held,), spec.qualified_name
        assert backend.prime_tables(con, specs) == []  # nothing left to prime

        # a row written later is read as written, also by a filter the placeholders' statistics could prune
        wh.writes.apply_batch("r1", BatchWrite(quarantined=[Quarantined("shipments", "7", 7, "refused")]))
        assert con.execute(f"SELECT record_key, attempts FROM {qualified(meta.QUARANTINE)} WHERE shipment_id > 1"
                           ).fetchall() == [("7", 1)]
        assert wh.reads.quarantine_counts() == {"shipments": 1}


def test_a_table_an_earlier_version_created_without_statistics_is_primed_once(tmp_path: Path) -> None:
    backend = new_lake(tmp_path)
    columns = (Column("id", "BIGINT", "an id", nullable=False), Column("at", "TIMESTAMPTZ", "when", nullable=False),
               Column("note", "VARCHAR", "a note"))
    spec = TableSpec("freight_meta", "made_earlier", columns, ("id",), "a table", replace_key=None, audit=False)
    with open_warehouse(tmp_path / "data", backend) as wh:
        wh.con.execute(spec.ddl(key_constraint=False, storage_hints=False))
        assert without_statistics(wh.con) == ["freight_meta.made_earlier"]
        primed = wh.database.write("prime", lambda con: backend.prime_tables(con, [spec]))
        assert primed == ["freight_meta.made_earlier"]
        assert without_statistics(wh.con) == []
        assert wh.con.execute(f"SELECT count(*) FROM {qualified(spec)}").fetchone() == (0,)


def test_the_sync_s_connection_runs_on_the_sync_s_threads_and_a_reader_s_on_duckdb_s(tmp_path: Path) -> None:
    backend = new_lake(tmp_path)

    def threads(con: duckdb.DuckDBPyConnection) -> int:
        return int(con.execute("SELECT current_setting('threads')").fetchall()[0][0])

    with duckdb.connect() as default:
        duckdb_s = threads(default)
    with open_warehouse(tmp_path / "data", backend) as wh:
        assert threads(wh.con) == SYNC_THREADS
    reader = backend.connect_read_only(tmp_path / "data")
    try:
        assert threads(reader) == duckdb_s
    finally:
        reader.close()
