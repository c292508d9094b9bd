"""The ``lake`` target's dbt-duckdb plugin: each dbt connection has the lake attached and runs on the plugin's DuckDB
threads (a connection of its own, made as dbt-duckdb makes it: in memory, then ``configure_connection``)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from freight_pipeline.config import LAKE_CATALOG_URI_ENV, LAKE_DATA_URI_ENV
from freight_pipeline.lake.dbt_plugin import DUCKDB_THREADS, Plugin
from freight_pipeline.lake.settings import LAKE_ALIAS


def test_a_dbt_connection_has_the_lake_attached_and_runs_on_the_plugin_s_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LAKE_CATALOG_URI_ENV, f"sqlite:///{tmp_path}/catalog/lake.sqlite")
    monkeypatch.setenv(LAKE_DATA_URI_ENV, str(tmp_path / "lake-data"))
    (tmp_path / "catalog").mkdir()
    plugin = Plugin("freight_pipeline.lake.dbt_plugin", {})
    with duckdb.connect(config={"threads": DUCKDB_THREADS + 1}) as con:
        plugin.configure_connection(con)
        assert con.execute("SELECT current_setting('threads')").fetchall() == [(DUCKDB_THREADS,)]
        attached = con.execute("SELECT type FROM duckdb_databases() WHERE database_name = ?", [LAKE_ALIAS]).fetchall()
        assert attached == [("ducklake",)]
