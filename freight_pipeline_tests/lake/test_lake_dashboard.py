"""The dashboard in lake mode reads the lake's published snapshot, tested like the embedded one
(``freight_pipeline_tests/dashboard/test_dashboard.py``, whose warehouse, page reader and assertions
this module reuses): the same demo warehouse (200 simulator shipments synced seven times as the
simulator moved on, so with estimate history; ``dbt run``, a run log, retry queue and data problems),
here copied into a DuckLake (SQLite catalog, local Parquet) and published
as the publish asset does; then the lake changes without a publish. The views and the real
``freight-pipeline dashboard`` in headless Chromium must show the published figures, which equal the
embedded file's, not the lake's latest state.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from freight_pipeline.config import LAKE_CATALOG_URI_ENV, LAKE_DATA_URI_ENV
from freight_pipeline.dashboard import queries, sources
from freight_pipeline.dashboard.sources import Filters
from freight_pipeline.lake.backend import PUBLISHED_SNAPSHOTS, LakeBackend, publish_snapshot
from freight_pipeline.lake.connect import connect_lake
from freight_pipeline.lake.settings import LakeSettings
from freight_pipeline.warehouse.comments import describe_tables
from freight_pipeline.warehouse.ddl import literal
from freight_pipeline_tests.dashboard.test_dashboard import (  # noqa: F401 (browser: a fixture, on this module's dashboard)
    CHART_SECTIONS,
    CHROMIUM,
    QUARANTINED,
    SHIPMENTS,
    _assert_page_matches,
    _Browser,
    browser,
    built_working_database,
    served_dashboard,
)

UNPUBLISHED_DELETES = 10
"""Shipments deleted from the lake's marts after the publish: the page must not see it."""


def _lake_env(folder: Path) -> dict[str, str]:
    folder.mkdir(parents=True, exist_ok=True)
    return {LAKE_CATALOG_URI_ENV: f"sqlite:///{folder / 'catalog.sqlite'}", LAKE_DATA_URI_ENV: str(folder / "data")}


@pytest.fixture(scope="module")
def lake_data(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str], Path]:
    """(data directory, lake variables, the embedded file holding what was published)."""
    root = tmp_path_factory.mktemp("lake-dashboard")
    data, work = built_working_database(root)
    with duckdb.connect(str(work)) as described:  # as a publish leaves it: the specs' descriptions in its catalog
        describe_tables(described)
    env = _lake_env(root / "lake")
    lake = LakeSettings.configured(env)
    assert lake is not None
    con = connect_lake(lake, root / "spill", "512MB")
    try:
        con.execute(f"ATTACH '{work}' AS src (READ_ONLY)")
        tables = con.execute("SELECT schema_name, table_name FROM duckdb_tables() WHERE database_name = 'src'"
                             ).fetchall()
        con.execute("BEGIN TRANSACTION")  # one DuckLake commit, not one a table
        for schema, table in tables:
            con.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
            con.execute(f'CREATE TABLE "{schema}"."{table}" AS SELECT * FROM src."{schema}"."{table}"')
        for schema, table, column, text in con.execute(  # the descriptions too, as the lake's writers leave them
                "SELECT schema_name, table_name, NULL, comment FROM duckdb_tables() WHERE database_name = 'src' "
                "AND comment IS NOT NULL UNION ALL SELECT schema_name, table_name, column_name, comment "
                "FROM duckdb_columns() WHERE database_name = 'src' AND comment IS NOT NULL").fetchall():
            target = f'"{schema}"."{table}"' + (f'."{column}"' if column else "")
            con.execute(f"COMMENT ON {'COLUMN' if column else 'TABLE'} {target} IS {literal(text)}")
        con.execute("COMMIT")
        con.execute("DETACH src")
        publish_snapshot(con, "run-published")
        con.execute("DELETE FROM analytics.fct_shipments WHERE shipment_id IN "
                    f"(SELECT shipment_id FROM analytics.fct_shipments ORDER BY 1 LIMIT {UNPUBLISHED_DELETES})")
        con.execute("DELETE FROM freight_meta.quarantine")
        assert con.execute("SELECT count(*) FROM analytics.fct_shipments").fetchall() == [
            (SHIPMENTS - UNPUBLISHED_DELETES,)]
    finally:
        con.close()
    return data, env, work


@pytest.fixture
def embedded(lake_data: tuple[Path, dict[str, str], Path]) -> Iterator[duckdb.DuckDBPyConnection]:
    """The embedded file the lake was published from: what the page must show."""
    with duckdb.connect(str(lake_data[2]), read_only=True) as con:
        con.execute("SET TimeZone = 'UTC'")
        yield con


def test_the_views_read_the_published_snapshot_not_the_latest(
    lake_data: tuple[Path, dict[str, str], Path], embedded: duckdb.DuckDBPyConnection
) -> None:
    data, env, _ = lake_data
    lake = LakeSettings.configured(env)
    with sources.open_warehouse(data, LakeBackend(lake)) as con:
        assert con.execute("SELECT count(*) FROM analytics.fct_shipments").fetchall() == [(SHIPMENTS,)]
        assert queries.bad_data(con).quarantined.sum() == sum(QUARANTINED.values())
        for filters in (Filters(), Filters(modes=("SEA",))):
            ours, theirs = queries.load_page(con, filters), queries.load_page(embedded, filters)
            lake_only = ours.tables["table"] == PUBLISHED_SNAPSHOTS  # the lake's own record of its publishes
            assert lake_only.sum() == 1
            ours = replace(ours, tables=ours.tables[~lake_only].reset_index(drop=True))
            for name, value in vars(theirs).items():
                if isinstance(value, pd.DataFrame):
                    pd.testing.assert_frame_equal(getattr(ours, name), value, obj=name)
                elif isinstance(value, sources.Freshness):
                    pd.testing.assert_frame_equal(ours.freshness.streams, value.streams, obj=name)
                    assert replace(ours.freshness, streams=None) == replace(value, streams=None)
                else:
                    assert getattr(ours, name) == value, name


def test_a_lake_without_a_publish_is_a_message(tmp_path: Path) -> None:
    lake = LakeSettings.configured(_lake_env(tmp_path / "lake"))
    assert lake is not None
    connect_lake(lake, tmp_path / "spill", "512MB").close()  # the catalog exists, nothing published
    nothing = r"no published warehouse in the DuckLake catalog sqlite:.* \(no published snapshot\); run `make demo`"
    backend = LakeBackend(lake)
    with pytest.raises(sources.NoWarehouse, match=nothing), sources.open_warehouse(tmp_path / "data", backend):
        pass


# --- the page in headless Chromium (the embedded test's browser, on this dashboard) ----------------


@pytest.fixture(scope="module")
def dashboard(lake_data: tuple[Path, dict[str, str], Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``freight-pipeline dashboard`` in lake mode (the lake variables set) on a free loopback port."""
    data, env, _ = lake_data
    log_path = tmp_path_factory.mktemp("lake-dashboard-log") / "dashboard.log"
    with served_dashboard(data, log_path, env) as url:
        yield url
    assert "reads the published warehouse in the DuckLake catalog sqlite:" in log_path.read_text(errors="replace")


def test_the_page_shows_the_published_snapshot(
    browser: _Browser, dashboard: str, embedded: duckdb.DuckDBPyConnection  # noqa: F811 (the imported fixture)
) -> None:
    for url, filters in ((dashboard, Filters()), (f"{dashboard}/?mode=SEA", Filters(modes=("SEA",)))):
        before = dt.datetime.now(dt.UTC)
        page = browser.load(url, queries.load_page(embedded, filters))
        after = dt.datetime.now(dt.UTC)
        _assert_page_matches(page, embedded, filters, before, after)
        assert all(page["charts"][k] == n for k, n in CHART_SECTIONS.items()), page["charts"]
    assert page["tiles"]["Shipments"] != f"{SHIPMENTS - UNPUBLISHED_DELETES:,}"
