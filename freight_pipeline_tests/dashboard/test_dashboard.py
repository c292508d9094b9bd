"""The dashboard: its queries against independent DuckDB queries of a published demo warehouse, then
the real ``freight-pipeline dashboard`` on a free loopback port, loaded in headless Chromium (driven
over the DevTools protocol like ``scripts/check_ui.py``, whose small client this test reuses), with
every metric tile and table on the page compared with DuckDB and the Vega charts checked rendered.

The warehouse: 200 shipments of the bundled simulator synced over HTTP, then its clock moved on
four days and its shipments brought up to it (arrivals happen, the estimates still to come are revised)
before each of six more syncs, so ``freight_history`` holds every estimate the syncs saw and the ETA
marts score real arrivals; ``dbt run`` of the project; the run log, retry queue, data problems and
raw documents' instants of ``freight_meta`` replaced by known ones; published as the pipeline does.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import html
import importlib.util
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import duckdb
import httpx
import pandas as pd
import pytest
from websockets.sync.client import connect

from freight_pipeline.client import AuthenticationError
from freight_pipeline.commands.processes import LOCALHOST, free_port, stop_child, wait_http
from freight_pipeline.config import DATA_DIR_ENV, REPO_ROOT, ServiceSettings, StorageSettings
from freight_pipeline.dashboard import display, queries, sources
from freight_pipeline.dashboard.app import (
    COLUMNS_TABLE,
    ETA_HORIZON_TABLE,
    ETA_RANKED_FIGURES,
    ETA_SHIPMENT_TABLE,
    ETA_VERSIONS_TABLE,
    TABLE_CHOICE,
)
from freight_pipeline.dashboard.queries import EtaChoice
from freight_pipeline.dashboard.sources import Filters
from freight_pipeline.simulator.server import running_simulator
from freight_pipeline.sync.runner import sync_all
from freight_pipeline.warehouse.ddl import ensure_tables
from freight_pipeline.warehouse.embedded import EmbeddedDuckDB
from freight_pipeline.warehouse.meta import META_TABLES
from freight_pipeline.warehouse.paths import read_run_log, replace_json, run_log_path, write_last_job_run
from freight_pipeline.warehouse.publish import publish
from freight_pipeline.warehouse.run_log import GONE
from freight_pipeline.warehouse.store import working_db_path
from freight_pipeline_tests.dbt.dbt_cli import run_dbt_in_worker
from freight_pipeline_tests.sync.settings import TEST_SETTINGS

SHIPMENTS = 200
SEED = 7
LATER_SYNCS = 6
DAYS_BETWEEN_SYNCS = 4
"""Six syncs four days apart after the first: 24 days of estimate history, so arrivals late in it had
an estimate 14 days before (sea arrivals are scored at every horizon, air ones at the short ones)."""
SYNC_SETTINGS = TEST_SETTINGS.replaced(page_size=500, fetch_batch_size=100)
"""The sync tests' settings with the production page and batch sizes: the syncs here build data for the
views, their batching is the sync tests' concern (TEST_SETTINGS' small batches made them 2.7 times slower)."""
CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOT_ENV = "FREIGHT_DASHBOARD_SCREENSHOT"
"""Set to a path (e.g. docs/dashboard.png) to keep a copy of the page's screenshot there."""
DESCRIPTIONS_SCREENSHOT_ENV = "FREIGHT_DESCRIPTIONS_SCREENSHOT"
"""Set to a path (docs/images/dashboard-descriptions.png) to keep the "Tables and columns" section's there."""
NOW = dt.datetime.now(dt.UTC).replace(microsecond=0)
LAST_SYNC = NOW - dt.timedelta(minutes=20)
NEWEST_CHANGE = NOW - dt.timedelta(hours=3, minutes=30)
OLDEST_EVENTS_READ = NOW - dt.timedelta(hours=5)
QUARANTINED = {"shipments": 3, "code_conversions": 1}
NULLED = {"shipments": 2}


# --- the published demo warehouse -----------------------------------------------------------------


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data, _ = built_working_database(tmp_path_factory.mktemp("dashboard"))
    publish(data, settings=StorageSettings())
    return data


def built_working_database(root: Path) -> tuple[Path, Path]:
    """(data directory, its working database) under ``root``: the freight tables and their history
    from syncs of the simulator as it moved on (:func:`_synced_with_history`), the marts dbt built on
    them and known meta rows (``_write_meta``); not yet published."""
    data = root / "data"
    _synced_with_history(data)
    work = working_db_path(data)
    result, _ = run_dbt_in_worker(["run"], root / "dbt", work, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    _write_meta(work)
    replace_json(run_log_path(data), [  # the run log says what sync_runs does: each stream's latest run
        {"run_id": f"new-{stream}", "stream": stream, "status": "success", "error": None,
         "started_at": (LAST_SYNC - dt.timedelta(minutes=1)).isoformat(), "finished_at": LAST_SYNC.isoformat()}
        for stream in META_STREAMS])
    return data, work


def _synced_with_history(data: Path) -> None:
    """A full sync of the simulator's shipments, then :data:`LATER_SYNCS` times: its clock moved on
    :data:`DAYS_BETWEEN_SYNCS` days, every open shipment brought up to it (``POST
    /_control/shipments/progress``: the actuals that came due are recorded, the estimates still to come
    are revised), and a sync. Nothing is published."""
    with running_simulator(shipments=SHIPMENTS, seed=SEED) as sim:
        service = ServiceSettings(sim.base_url, sim.username, sim.password)
        for number in range(LATER_SYNCS + 1):
            if number:
                sim.advance_clock(DAYS_BETWEEN_SYNCS * 86400)
                sim.progress_shipments()
            sync_all(service, data, SYNC_SETTINGS, backend=EmbeddedDuckDB(), run_id=f"sync-{number}",
                     publish_after=False)


META_STREAMS = ("shipments", "code_conversions")
"""The streams whose runs the known meta rows log (:func:`_write_meta`)."""


def _write_meta(path: Path) -> None:
    """The run log, retry queue and data problems the syncs left replaced by known ones: an old failed
    and a newer successful run per stream, records waiting for retry, values nulled; and the raw
    documents' last-modified instants set an hour apart up to :data:`NEWEST_CHANGE`."""
    con = duckdb.connect(str(path))
    try:
        ensure_tables(con, META_TABLES)
        for table in ("sync_runs", "quarantine", "data_problems"):
            con.execute(f"DELETE FROM freight_meta.{table}")
        for stream in META_STREAMS:
            con.execute(
                "INSERT INTO freight_meta.sync_runs (run_id, stream, started_at, finished_at, status, error) "
                "VALUES (?, ?, ?, ?, 'failed', 'ServiceUnavailable: 503'), (?, ?, ?, ?, 'success', NULL)",
                [f"old-{stream}", stream, NOW - dt.timedelta(hours=2), NOW - dt.timedelta(hours=2),
                 f"new-{stream}", stream, LAST_SYNC - dt.timedelta(minutes=1), LAST_SYNC],
            )
        for stream, n in QUARANTINED.items():
            for i in range(n):
                con.execute(
                    "INSERT INTO freight_meta.quarantine (stream, record_key, reason, first_failed_at, attempts) "
                    "VALUES (?, ?, 'HTTP 500', ?, 1)",
                    [stream, f"{stream}-{i}", NOW - dt.timedelta(hours=1 + i)],
                )
        for stream, n in NULLED.items():
            for i in range(n):
                con.execute(
                    "INSERT INTO freight_meta.data_problems (stream, record_key, json_path, reason, detected_at) "
                    "VALUES (?, ?, 'goods[0].weight', 'not a number', ?)",
                    [stream, str(i), NOW],
                )
        # every shipment's raw document changed at least an hour before the newest one
        con.execute(
            "UPDATE freight_meta.raw_shipments r "
            "SET fetched_at = ?, last_modified_at = ? - (o.n - 1) * INTERVAL 1 HOUR "
            "FROM (SELECT shipment_id, row_number() OVER (ORDER BY shipment_id) AS n FROM freight.shipments) o "
            "WHERE r.shipment_id = o.shipment_id",
            [LAST_SYNC, NEWEST_CHANGE],
        )
        assert con.execute("SELECT count(*) FROM freight_meta.raw_shipments").fetchone() == (SHIPMENTS,)
        # the events of every shipment read at the last sync, but those of the open one with the lowest id
        con.execute("UPDATE freight_meta.raw_parts SET fetched_at = CASE WHEN shipment_id = (SELECT min(shipment_id) "
                    "FROM freight.shipments WHERE shipment_closed IS NOT TRUE) THEN ? ELSE ? END "
                    "WHERE stream = 'shipment_events'", [OLDEST_EVENTS_READ, LAST_SYNC])
    finally:
        con.close()


@pytest.fixture
def con(data_dir: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    with sources.open_warehouse(data_dir) as connection:
        yield connection


def _one(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any] | None = None) -> tuple[Any, ...]:
    row = con.execute(sql, params or []).fetchone()
    assert row is not None
    return row


def _clients(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Clients by shipments, most first."""
    rows = con.execute("SELECT client FROM analytics.fct_shipments GROUP BY client ORDER BY count(*) DESC, client")
    return [r[0] for r in rows.fetchall()]


# --- queries against DuckDB -----------------------------------------------------------------------


def test_the_demo_warehouse_has_data_for_every_view(con: duckdb.DuckDBPyConnection) -> None:
    for table in sources.MARTS:
        assert _one(con, f"SELECT count(*) FROM {table}")[0] > 0, table
    options = sources.filter_options(con)
    assert set(options.modes) <= {"SEA", "AIR", "RD", "RL", "UNKNOWN"} and len(options.modes) >= 2
    assert len(options.clients) >= 2
    assert len(options.months) >= 2 and options.months == sorted(options.months)


def test_on_time_is_the_marts_figures(con: duckdb.DuckDBPyConnection) -> None:
    total = queries.on_time(con, Filters()).iloc[0]
    planned, arrived, on_time = _one(
        con, "SELECT sum(shipments_planned), sum(shipments_arrived), sum(shipments_on_time) "
             "FROM analytics.fct_on_time_performance")
    assert (total.shipments_planned, total.shipments_arrived, total.shipments_on_time) == (planned, arrived, on_time)
    assert total.on_time_share == pytest.approx(on_time / arrived)

    by_mode = queries.on_time(con, Filters(), ("mode_of_transport",))
    expected = con.execute(
        "SELECT mode_of_transport, sum(shipments_arrived), sum(shipments_on_time) "
        "FROM analytics.fct_on_time_performance GROUP BY 1"
    ).fetchall()
    assert {(r.mode_of_transport, r.shipments_arrived, r.shipments_on_time) for r in by_mode.itertuples()} == set(
        expected)

    sea = queries.on_time(con, Filters(modes=("SEA",)), ("lane",), limit=3)
    expected_lanes = con.execute(
        "SELECT lane, sum(shipments_arrived) AS arrived, sum(shipments_on_time) FROM analytics.fct_on_time_performance "
        "WHERE mode_of_transport = 'SEA' GROUP BY lane ORDER BY arrived DESC, lane NULLS LAST LIMIT 3"
    ).fetchall()
    assert [(r.lane, r.shipments_arrived, r.shipments_on_time) for r in sea.itertuples()] == expected_lanes


def test_the_on_time_table_has_a_row_per_month_and_a_column_per_mode(con: duckdb.DuckDBPyConnection) -> None:
    by_month_mode = queries.on_time(con, Filters(), ("arrival_month", "mode_of_transport"))
    pivot = display.on_time_pivot(by_month_mode, queries.on_time(con, Filters(), ("arrival_month",)))
    modes = sorted(set(by_month_mode.mode_of_transport))
    assert list(pivot.columns) == ["month", display.ALL_MODES, *modes]
    months = [display.month(m) for m in sorted(set(by_month_mode.arrival_month))]
    assert list(pivot.month) == months
    for row in by_month_mode.itertuples():
        cell = pivot.loc[pivot.month == display.month(row.arrival_month), row.mode_of_transport].item()
        expected = (f"{row.shipments_on_time / row.shipments_arrived * 100:.1f} % of {row.shipments_arrived}"
                    if row.shipments_arrived else "")
        assert cell == expected
    arrived, on_time = _one(
        con, "SELECT sum(shipments_arrived), sum(shipments_on_time) FROM analytics.fct_on_time_performance "
             "WHERE arrival_month = (SELECT min(arrival_month) FROM analytics.fct_on_time_performance)")
    assert pivot.loc[pivot.month == months[0], display.ALL_MODES].item() == display.share_of(on_time, arrived)


def test_on_time_per_shipment_applies_the_marts_rule(con: duckdb.DuckDBPyConnection) -> None:
    """A client filter reads shipments, not the mart (which has no client): with every client
    selected it gives exactly the mart's figures, in every grouping."""
    every_client = Filters(clients=tuple(_clients(con)))
    for by in [(), ("arrival_month",), ("arrival_month", "mode_of_transport", "lane", "carrier_name")]:
        from_mart = queries.on_time(con, Filters(), by)
        per_shipment = queries.on_time(con, every_client, by)
        pd.testing.assert_frame_equal(from_mart, per_shipment, check_dtype=False)


def test_filters_narrow_every_view(con: duckdb.DuckDBPyConnection) -> None:
    everything = Filters()
    client = _clients(con)[0]
    months = sources.filter_options(con).months
    narrow = Filters(clients=(client,))
    assert 0 < queries.volumes(con, narrow).iloc[0].shipments < queries.volumes(con, everything).iloc[0].shipments
    assert queries.on_time(con, narrow).iloc[0].shipments_planned < queries.on_time(con, everything).iloc[
        0].shipments_planned

    period = Filters(month_from=months[1], month_to=months[-2] if len(months) > 2 else months[1])
    (mart_arrived,) = _one(
        con, "SELECT sum(shipments_arrived) FROM analytics.fct_on_time_performance WHERE arrival_month BETWEEN ? AND ?",
        [period.month_from, period.month_to])
    assert queries.on_time(con, period).iloc[0].shipments_arrived == mart_arrived
    monthly = queries.volumes(con, period, ("created_month",))
    expected_months = con.execute(
        "SELECT DISTINCT m FROM (SELECT CAST(date_trunc('month', timezone('UTC', created_at)) AS DATE) AS m "
        "FROM analytics.fct_shipments) WHERE m BETWEEN ? AND ? ORDER BY m", [period.month_from, period.month_to]
    ).fetchall()
    assert [pd.Timestamp(m).date() for m in monthly.created_month] == [m for (m,) in expected_months]

    # values are parameters, never SQL text
    hostile = Filters(modes=("SEA' OR '1'='1",), clients=("x'); DROP TABLE analytics.fct_shipments; --",))
    assert queries.volumes(con, hostile).iloc[0].shipments == 0
    assert queries.on_time(con, hostile).iloc[0].shipments_arrived == 0
    assert _one(con, "SELECT count(*) FROM analytics.fct_shipments")[0] == SHIPMENTS


def test_volumes_match_the_shipments_mart(con: duckdb.DuckDBPyConnection) -> None:
    client = _clients(con)[0]
    filters = Filters(modes=("SEA", "AIR"), clients=(client,))
    where = ("WHERE is_known_mode_of_transport AND mode_of_transport IN ('SEA', 'AIR') AND client = ?", [client])
    shipments, weight, volume = _one(
        con, f"SELECT count(*), sum(total_gross_weight), sum(total_volume) FROM analytics.fct_shipments {where[0]}",
        where[1])
    total = queries.volumes(con, filters).iloc[0]
    assert total.shipments == shipments
    assert total.gross_weight == pytest.approx(float(weight))
    assert total.volume == pytest.approx(float(volume))
    by_lane = queries.volumes(con, Filters(), ("lane",), limit=queries.TOP)
    expected = con.execute(
        "SELECT lane, count(*) AS n, sum(total_gross_weight) FROM analytics.fct_shipments "
        "GROUP BY lane ORDER BY n DESC, lane NULLS LAST LIMIT ?", [queries.TOP]).fetchall()
    assert [(r.lane, r.shipments) for r in by_lane.itertuples()] == [(lane, n) for lane, n, _ in expected]
    assert list(by_lane.gross_weight) == pytest.approx([float(w) for _, _, w in expected])
    (open_shipments,) = _one(con, "SELECT count(*) FROM analytics.fct_shipments WHERE NOT is_closed")
    assert queries.volumes(con, Filters()).iloc[0].open_shipments == open_shipments


def test_transit_times_per_lane(con: duckdb.DuckDBPyConnection) -> None:
    stats = queries.transit_time_by_lane(con, Filters())
    assert stats.shipments.sum() == _one(con, "SELECT count(*) FROM analytics.fct_transit_times "
                                              "WHERE transit_hours IS NOT NULL")[0]
    lane = stats.iloc[0]
    hours = sorted(float(h) for (h,) in con.execute(
        "SELECT transit_hours FROM analytics.fct_transit_times WHERE lane IS NOT DISTINCT FROM ? "
        "AND transit_hours IS NOT NULL", [lane.lane]).fetchall())
    assert lane.shipments == len(hours)
    assert (lane.min_hours, lane.max_hours) == (pytest.approx(hours[0]), pytest.approx(hours[-1]))
    assert lane.median_hours == pytest.approx(float(pd.Series(hours).median()))
    assert lane.p25_hours == pytest.approx(float(pd.Series(hours).quantile(0.25)))
    assert lane.mean_hours == pytest.approx(sum(hours) / len(hours))
    sea = queries.transit_time_by_lane(con, Filters(modes=("SEA",)))
    assert sea.shipments.sum() == _one(con, "SELECT count(*) FROM analytics.fct_transit_times WHERE "
                                            "mode_of_transport = 'SEA' AND transit_hours IS NOT NULL")[0]


def test_open_shipments_by_next_milestone(con: duckdb.DuckDBPyConnection) -> None:
    """Recomputed in Python: per open shipment, the earliest planned milestone without an actual."""
    open_ids = {r[0] for r in con.execute("SELECT shipment_id FROM analytics.fct_shipments WHERE NOT is_closed")
                .fetchall()}
    pending: dict[int, list[tuple[dt.datetime, str]]] = {}
    for shipment_id, code, planned_at, planned_date in con.execute(
        "SELECT shipment_id, event_code, planned_at, planned_date FROM analytics.fct_shipment_milestones "
        "WHERE has_planned AND NOT has_actual"
    ).fetchall():
        if shipment_id in open_ids:
            when = planned_at or dt.datetime.combine(planned_date, dt.time(), dt.UTC)
            pending.setdefault(shipment_id, []).append((when, code))
    expected: dict[str, int] = {}
    for shipment_id in open_ids:
        code = min(pending[shipment_id])[1] if shipment_id in pending else queries.NO_PENDING_MILESTONE
        expected[code] = expected.get(code, 0) + 1
    result = queries.open_by_next_milestone(con, Filters())
    assert dict(zip(result.next_milestone, result.open_shipments, strict=True)) == expected
    assert list(result.open_shipments) == sorted(result.open_shipments, reverse=True)
    assert len(expected) >= 2


# --- ETA accuracy ---------------------------------------------------------------------------------

ARRIVAL_ROWS = "FROM analytics.fct_eta_accuracy WHERE milestone = 'arrival'"
MODE = "CASE WHEN is_known_mode_of_transport THEN mode_of_transport ELSE 'UNKNOWN' END"


def _history_revisions(con: duckdb.DuckDBPyConnection, shipment_id: int) -> tuple[int, int]:
    """(estimates seen, revisions) of a shipment's arrival, counted in Python from the raw history rows (those of an
    earlier shipment of a reused id, valid before its ``created_at``, left out)."""
    rows = con.execute(
        "SELECT valid_from, event, type, event_at, deleted FROM freight_history.event_versions WHERE shipment_id = ?",
        [shipment_id]).fetchall()
    (created_at,) = _one(con, "SELECT created_at FROM freight.shipments WHERE shipment_id = ?", [shipment_id])
    estimates = [at for since, event, kind, at, deleted in sorted(rows, key=lambda r: (r[0], r[3] or NOW))
                 if event.strip().upper() == "POD_ARRIVAL" and kind.strip().upper() == "ESTIMATED"
                 and not deleted and at is not None and (created_at is None or since >= created_at)]
    return len(estimates), sum(1 for before, after in itertools.pairwise(estimates) if after != before)


def _default_horizon(con: duckdb.DuckDBPyConnection) -> int:
    """The horizon with the most scored arrivals (ties: the longest), from the monthly mart."""
    rows = con.execute("SELECT horizon_days, sum(milestones_scored) AS n FROM analytics.fct_eta_accuracy_monthly "
                       "WHERE milestone = 'arrival' GROUP BY 1 HAVING n > 0").fetchall()
    return max(rows, key=lambda r: (r[1], r[0]))[0]


def test_the_history_scores_sea_and_air_arrivals(con: duckdb.DuckDBPyConnection) -> None:
    """The syncs left estimate history: arrivals of both modes scored at several horizons, estimates revised."""
    scored = dict(con.execute(f"SELECT {MODE}, count(DISTINCT horizon_days) {ARRIVAL_ROWS} AND is_scored "
                              "GROUP BY 1").fetchall())
    assert scored.get("SEA", 0) >= 2 and scored.get("AIR", 0) >= 2, scored
    (revised,) = _one(con, "SELECT count(*) FROM analytics.fct_estimate_revisions WHERE milestone = 'arrival' "
                           "AND revisions >= 2")
    assert revised >= 3


def test_eta_by_horizon_is_the_marts_figures(con: duckdb.DuckDBPyConnection) -> None:
    by_horizon = queries.eta_by_horizon(con, Filters())
    rows = con.execute(
        f"SELECT {MODE}, horizon_days, count(*), count(*) FILTER (WHERE is_scored), avg(abs_error_hours), "
        f"avg(error_hours) {ARRIVAL_ROWS} GROUP BY ALL ORDER BY 1, 2 DESC").fetchall()
    assert [(r.mode_of_transport, r.horizon_days, r.arrivals, r.scored) for r in by_horizon.itertuples()] == [
        r[:4] for r in rows]
    assert list(by_horizon.mean_abs_error_hours.fillna(-1)) == pytest.approx([-1 if r[4] is None else r[4]
                                                                                for r in rows])
    assert list(by_horizon.mean_error_hours.fillna(-1)) == pytest.approx([-1 if r[5] is None else r[5] for r in rows])
    # the monthly mart: the same counts, the same errors to its two decimals, the same share within 24 h
    monthly = {(m, h): (happened, n, within, mae) for m, h, happened, n, within, mae in con.execute(
        "SELECT mode_of_transport, horizon_days, sum(milestones_happened), sum(milestones_scored), "
        "sum(milestones_within_24h), sum(mean_abs_error_hours * milestones_scored) / nullif(sum(milestones_scored), 0) "
        "FROM analytics.fct_eta_accuracy_monthly WHERE milestone = 'arrival' GROUP BY 1, 2").fetchall()}
    assert len(monthly) == len(by_horizon)
    for r in by_horizon.itertuples():
        happened, n, within, mae = monthly[(r.mode_of_transport, r.horizon_days)]
        assert (r.arrivals, r.scored) == (happened, n)
        if n:
            assert r.within_share == pytest.approx(within / n)
            assert r.mean_abs_error_hours == pytest.approx(float(mae), abs=0.005)
        else:
            assert pd.isna(r.within_share) and pd.isna(r.mean_abs_error_hours)
    sea = queries.eta_by_horizon(con, Filters(modes=("SEA",)))
    assert set(sea.mode_of_transport) == {"SEA"}
    assert list(sea.scored) == list(by_horizon[by_horizon.mode_of_transport == "SEA"].scored)


def test_lanes_and_carriers_ranked_by_accuracy(con: duckdb.DuckDBPyConnection) -> None:
    horizon = _default_horizon(con)
    data = queries.load_page(con, Filters())
    assert data.eta_horizon == horizon
    assert queries.scored_horizons(data.eta_by_horizon) == [h for (h,) in con.execute(
        f"SELECT DISTINCT horizon_days {ARRIVAL_ROWS} AND is_scored ORDER BY 1 DESC").fetchall()]
    for dimension, frame in (("lane", data.eta_by_lane), ("carrier_name", data.eta_by_carrier)):
        expected = con.execute(
            f"SELECT {dimension}, count(*) AS n, avg(abs_error_hours) AS mae {ARRIVAL_ROWS} AND is_scored "
            f"AND horizon_days = ? AND {dimension} IS NOT NULL GROUP BY 1 HAVING n >= ? "
            f"ORDER BY mae, n DESC, 1 LIMIT ?", [horizon, queries.RANK_MIN_SCORED, queries.TOP]).fetchall()
        assert expected, dimension
        assert [(getattr(r, dimension), r.shipments_scored) for r in frame.itertuples()] == [e[:2] for e in expected]
        assert list(frame.mean_abs_error_hours) == pytest.approx([e[2] for e in expected])
    # another horizon ranks what was scored there; a filter narrows it
    longest = queries.scored_horizons(data.eta_by_horizon)[0]
    chosen = queries.load_page(con, Filters(), EtaChoice(horizon=longest))
    assert chosen.eta_horizon == longest
    assert queries.load_page(con, Filters(), EtaChoice(horizon=999)).eta_horizon == horizon
    air = queries.eta_ranked(con, Filters(modes=("AIR",)), "carrier_name", horizon, min_scored=1)
    (air_carriers,) = _one(con, f"SELECT count(DISTINCT carrier_name) {ARRIVAL_ROWS} AND is_scored "
                                "AND horizon_days = ? AND mode_of_transport = 'AIR'", [horizon])
    assert len(air) == air_carriers


def test_the_revisions_of_one_shipment_are_its_history(con: duckdb.DuckDBPyConnection) -> None:
    data = queries.load_page(con, Filters())
    shipments = data.eta_shipments
    (most,) = _one(con, "SELECT max(revisions) FROM analytics.fct_estimate_revisions WHERE milestone = 'arrival'")
    assert shipments.iloc[0].revisions == most and data.eta_shipment_id == shipments.iloc[0].shipment_id
    assert list(shipments.revisions) == sorted(shipments.revisions, reverse=True) and min(shipments.revisions) >= 1
    arrived = shipments[shipments.actual_at.notna()].iloc[0]
    for row in (shipments.iloc[0], arrived, shipments.iloc[-1]):
        versions = queries.estimate_versions(con, int(row.shipment_id))
        assert _history_revisions(con, int(row.shipment_id)) == (row.estimate_versions, row.revisions)
        assert (len(versions), int(versions.is_revision.sum())) == (row.estimate_versions, row.revisions)
        assert list(versions.valid_from) == sorted(versions.valid_from)
        assert versions.estimated_at.iloc[-1] == row.last_estimated_at
        assert versions.moved_hours.notna().sum() == row.revisions
    versions = queries.estimate_versions(con, int(arrived.shipment_id))
    last = versions.iloc[-1]
    assert last.error_hours == pytest.approx((last.estimated_at - arrived.actual_at).total_seconds() / 3600, abs=0.005)
    other = int(shipments.iloc[1].shipment_id)
    assert queries.load_page(con, Filters(), EtaChoice(shipment_id=other)).eta_shipment_id == other


def test_the_revisions_of_a_reused_id_leave_out_the_earlier_shipment_s_estimates(data_dir: Path,
                                                                                 tmp_path: Path) -> None:
    """Estimates valid before the shipment's ``created_at`` belonged to an earlier shipment of its id (a reset
    service reuses ids): the chart leaves them out, as ``fct_estimate_revisions`` does, so both say the same."""
    copy = tmp_path / "warehouse.duckdb"
    with sources.open_warehouse(data_dir) as published:
        (path,) = _one(published, "SELECT path FROM duckdb_databases() WHERE database_name = current_database()")
        shipment = queries.load_page(published, Filters()).eta_shipments.iloc[0]
        before = queries.estimate_versions(published, int(shipment.shipment_id))
    shutil.copyfile(path, copy)
    with duckdb.connect(str(copy)) as con:
        con.execute("SET TimeZone = 'UTC'")
        (created_at,) = _one(con, "SELECT created_at FROM freight.shipments WHERE shipment_id = ?",
                             [int(shipment.shipment_id)])
        for days, estimate in ((3, "2020-01-01 00:00:00+00"), (2, "2020-02-01 00:00:00+00")):
            con.execute(
                "INSERT INTO freight_history.event_versions (shipment_id, event, type, event_at, valid_from, valid_to, "
                "deleted, run_id, recorded_at) VALUES (?, 'POD_ARRIVAL', 'ESTIMATED', ?::TIMESTAMPTZ, ?, ?, false, "
                "'an-earlier-shipment', ?)",
                [int(shipment.shipment_id), estimate, created_at - dt.timedelta(days=days),
                 created_at - dt.timedelta(days=days - 1), created_at - dt.timedelta(days=days)])
        after = queries.estimate_versions(con, int(shipment.shipment_id))
        assert _history_revisions(con, int(shipment.shipment_id)) == (shipment.estimate_versions, shipment.revisions)
    pd.testing.assert_frame_equal(after, before)
    assert (len(after), int(after.is_revision.sum())) == (shipment.estimate_versions, shipment.revisions)


def test_an_eta_section_without_scores_says_why(data_dir: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """No arrival yet (the marts empty) and a warehouse published before the ETA marts: the section says
    so in a line, the rest of the page is there."""
    from streamlit.testing.v1 import AppTest

    data = tmp_path / "data"
    shutil.copytree(data_dir, data, symlinks=True)
    monkeypatch.setenv(DATA_DIR_ENV, str(data))
    app = str(REPO_ROOT / "freight_pipeline" / "dashboard" / "app.py")
    with duckdb.connect(str(working_db_path(data))) as work:
        work.execute("DELETE FROM analytics.fct_eta_accuracy")
        work.execute("DELETE FROM analytics.fct_estimate_revisions")
    publish(data, settings=StorageSettings())
    with sources.open_warehouse(data) as con:
        empty = queries.load_page(con, Filters())
    assert empty.eta_missing is None and empty.eta_horizon is None and empty.eta_shipment_id is None
    page = AppTest.from_file(app, default_timeout=60).run()
    assert not page.exception and not page.error
    assert [i.value for i in page.info] == [display.eta_note(empty.eta_by_horizon), NOT_REVISED]
    assert "No shipment here has arrived yet" in page.info[0].value
    assert [s.key for s in page.selectbox] == [TABLE_CHOICE]

    with duckdb.connect(str(working_db_path(data))) as work:
        work.execute("DROP TABLE analytics.fct_eta_accuracy_monthly")
        work.execute("DROP TABLE analytics.fct_eta_accuracy")
    publish(data, settings=StorageSettings())
    page = AppTest.from_file(app, default_timeout=60).run()
    assert not page.exception and not page.error
    assert [i.value for i in page.info] == [
        "The published warehouse has no analytics.fct_eta_accuracy: it was built before the ETA marts. "
        "The next sync's dbt build adds them."]
    assert len(page.table) == len(TABLES)


MARKDOWN_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")
"""A backslash escape of :data:`display.MARKDOWN_PUNCTUATION`: Markdown shows the character alone."""


def _as_read(frame: pd.DataFrame) -> pd.DataFrame:
    """An AppTest table as the page shows it: its Markdown escapes (``display.literal``) undone."""
    def read(text: str) -> str:
        return MARKDOWN_ESCAPE.sub(r"\1", text)

    shown = frame.map(lambda v: read(v) if isinstance(v, str) else v)
    shown.columns = [read(str(c)) for c in frame.columns]
    return shown


def _table_headed(page: Any, first_columns: list[str]) -> pd.DataFrame:
    """The AppTest table whose headings start with ``first_columns``, as the page shows it."""
    found = [_as_read(t.value) for t in page.table]
    found = [t for t in found if list(t.columns[:len(first_columns)]) == first_columns]
    assert len(found) == 1, [list(t.columns) for t in found]
    return found[0]


def test_the_eta_choosers_pick_the_horizon_and_the_shipment(
    data_dir: Path, con: duckdb.DuckDBPyConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv(DATA_DIR_ENV, str(data_dir))
    page = AppTest.from_file(str(REPO_ROOT / "freight_pipeline" / "dashboard" / "app.py"), default_timeout=60).run()
    assert not page.exception
    default = queries.load_page(con, Filters())
    assert page.selectbox(key="eta-horizon").value == default.eta_horizon
    assert page.selectbox(key="eta-shipment").value == default.eta_shipment_id

    horizon = queries.scored_horizons(default.eta_by_horizon)[0]
    shipment = int(default.eta_shipments[default.eta_shipments.actual_at.notna()].iloc[0].shipment_id)
    assert (horizon, shipment) != (default.eta_horizon, default.eta_shipment_id)
    page.selectbox(key="eta-horizon").set_value(horizon).run()
    page.selectbox(key="eta-shipment").set_value(shipment).run()
    assert not page.exception
    chosen = queries.load_page(con, Filters(), EtaChoice(horizon, shipment))
    assert (chosen.eta_horizon, chosen.eta_shipment_id) == (horizon, shipment)
    if len(chosen.eta_by_carrier):
        expected = display.table(chosen.eta_by_carrier, [("carrier_name", "carrier", display.label),
                                                         *ETA_RANKED_FIGURES])
        pd.testing.assert_frame_equal(_table_headed(page, ["carrier", "scored"]), expected)
    one = chosen.eta_shipments[chosen.eta_shipments.shipment_id == shipment]
    shown = _table_headed(page, ["shipment", "mode", "lane", "carrier", "estimates seen"])
    pd.testing.assert_frame_equal(shown, display.table(one, ETA_SHIPMENT_TABLE))
    assert shown.iloc[0]["revisions"] == str(_history_revisions(con, shipment)[1])
    assert shown.iloc[0]["actual arrival"] != display.MISSING
    pd.testing.assert_frame_equal(_table_headed(page, ["version", "known from"]),
                                  display.table(chosen.eta_versions, ETA_VERSIONS_TABLE))


def test_the_tables_section_describes_every_table_and_the_chosen_one_s_columns(
    data_dir: Path, con: duckdb.DuckDBPyConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    from streamlit.testing.v1 import AppTest

    listed = queries.described_tables(con)
    assert {"analytics.fct_shipments", "freight.shipments", "freight_history.shipment_versions",
            "freight_meta.sync_runs"} <= set(listed["table"])
    assert all(listed["description"]), listed[listed["description"] == ""]
    monkeypatch.setenv(DATA_DIR_ENV, str(data_dir))
    page = AppTest.from_file(str(REPO_ROOT / "freight_pipeline" / "dashboard" / "app.py"), default_timeout=60).run()
    assert not page.exception
    assert page.selectbox(key=TABLE_CHOICE).value == queries.DEFAULT_TABLE
    page.selectbox(key=TABLE_CHOICE).set_value("freight.shipments").run()
    assert not page.exception
    chosen = queries.load_page(con, Filters(), table="freight.shipments")
    assert chosen.table == "freight.shipments" and len(chosen.table_columns) > 50
    pd.testing.assert_frame_equal(_table_headed(page, ["column", "type", "description"]),
                                  display.table(chosen.table_columns, COLUMNS_TABLE))
    described = dict(zip(chosen.table_columns["column"], chosen.table_columns["description"], strict=True))
    assert described["house_reference"] == "house bill number" and all(described.values())
    assert queries.load_page(con, Filters(), table="freight.gone").table == queries.DEFAULT_TABLE


def test_freshness_and_bad_data(con: duckdb.DuckDBPyConnection) -> None:
    fresh = queries.freshness(con)
    assert fresh.last_sync_at == LAST_SYNC
    assert fresh.last_run_status == "success"
    assert fresh.newest_source_change == NEWEST_CHANGE
    assert fresh.source_lag(NOW) == dt.timedelta(hours=3, minutes=30)
    assert fresh.oldest_open_events_read == OLDEST_EVENTS_READ
    open_held = _one(con, "SELECT count(*) FROM freight.shipments WHERE shipment_closed IS NOT TRUE")[0]
    assert fresh.open_shipments == open_held > 0
    assert list(fresh.streams.stream) == ["shipments", "code_conversions"]
    bad = queries.bad_data(con)
    assert dict(zip(bad.stream, bad.quarantined, strict=True)) == {**dict.fromkeys(NULLED, 0), **QUARANTINED}
    assert dict(zip(bad.stream, bad.values_nulled, strict=True)) == {"code_conversions": 0, **NULLED}


def test_the_latest_run_and_last_success_are_those_recorded_last_whatever_the_clock_said(tmp_path: Path) -> None:
    """Runs in the order they ran: a success while the machine's clock was two hours ahead, then (the clock stepped
    back) a success and a failure. The latest run is the failure and the last success the second run; the clock made
    the first one both (the stream shown as fine, its data two hours fresher than it is)."""
    with duckdb.connect(str(tmp_path / "runs.duckdb")) as con:
        ensure_tables(con, META_TABLES)
        for run_id, started, status in (("run-ahead", NOW + dt.timedelta(hours=2), "success"),
                                        ("run-after-the-step", NOW, "success"),
                                        ("run-failed", NOW + dt.timedelta(minutes=10), "failed")):
            con.execute("INSERT INTO freight_meta.sync_runs (run_id, stream, started_at, finished_at, status) "
                        "VALUES (?, 'shipments', ?, ?, ?)",
                        [run_id, started, started + dt.timedelta(minutes=5), status])
        fresh = queries.freshness(con)
    assert fresh.last_run_status == "failed"
    assert fresh.last_sync_at == NOW + dt.timedelta(minutes=5)
    (row,) = fresh.streams.itertuples()
    assert pd.Timestamp(row.last_started_at) == NOW + dt.timedelta(minutes=10)


def test_a_stream_switched_off_is_no_success_and_its_last_success_the_run_that_loaded(tmp_path: Path) -> None:
    """FREIGHT_SYNC_DOCUMENTS=0 after a sync: its runs are successes that load nothing. The page must not show the
    documents as synced just now: its last run is switched off, its last success the run that loaded them."""
    with duckdb.connect(str(tmp_path / "runs.duckdb")) as con:
        ensure_tables(con, META_TABLES)
        for run_id, finished, details in (("run-on", LAST_SYNC, {"extra": {"changed": 3}}),
                                          ("run-off", NOW, {"extra": {"skipped": "the documents stream is off"}})):
            con.execute("INSERT INTO freight_meta.sync_runs (run_id, stream, started_at, finished_at, status, details) "
                        "VALUES (?, 'documents', ?, ?, 'success', ?)",
                        [run_id, finished, finished, json.dumps(details)])
        (row,) = queries.freshness(con).streams.itertuples()
    assert row.last_status == "switched off" and pd.Timestamp(row.last_success_at) == LAST_SYNC


def test_a_stream_an_upgrade_retired_is_no_warning_once_its_successor_succeeded(tmp_path: Path) -> None:
    """Events had a stream of their own (shipment_events) before the shipments stream read them; its last run failed
    before the upgrade. After the shipments stream's success the page warned for ever that it failed and had never
    loaded anything."""
    with duckdb.connect(str(tmp_path / "runs.duckdb")) as con:
        ensure_tables(con, META_TABLES)
        for run_id, stream, status in (("before", "shipment_events", "failed"), ("after", "shipments", "success")):
            con.execute("INSERT INTO freight_meta.sync_runs (run_id, stream, started_at, finished_at, status) "
                        "VALUES (?, ?, ?, ?, ?)", [run_id, stream, LAST_SYNC, LAST_SYNC, status])
        fresh = queries.freshness(con)
    assert list(fresh.streams.stream) == ["shipments"] and display.failed_streams(fresh.streams) == []


MARKUP_CARRIER = "*Korean* Air_Cargo_ $5 to $7 ![px](http://127.0.0.1:9/px.png) [Pay](https://evil.example) <b>b</b>"
"""A carrier name with Markdown (and HTML) in it, as a service may send one."""


def test_text_from_the_service_shows_as_it_is_in_the_tables(data_dir: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """``st.table`` renders each cell as Markdown: a carrier name must show as the text it is, not as emphasis,
    a formula, a link or an image the reader's browser fetches (each cell rendered here by a CommonMark parser)."""
    from markdown_it import MarkdownIt
    from streamlit.testing.v1 import AppTest

    data = tmp_path / "data"
    shutil.copytree(data_dir, data, symlinks=True)
    monkeypatch.setenv(DATA_DIR_ENV, str(data))
    with duckdb.connect(str(working_db_path(data))) as work:
        work.execute("UPDATE analytics.fct_on_time_performance SET carrier_name = ? WHERE carrier_name = "
                     "(SELECT carrier_name FROM analytics.fct_on_time_performance WHERE carrier_name IS NOT NULL "
                     "GROUP BY ALL ORDER BY sum(shipments_arrived) DESC LIMIT 1)", [MARKUP_CARRIER])
    publish(data, settings=StorageSettings())
    page = AppTest.from_file(str(REPO_ROOT / "freight_pipeline" / "dashboard" / "app.py"), default_timeout=60).run()
    assert not page.exception and not page.error
    markdown = MarkdownIt("commonmark").enable("strikethrough")
    carriers = next(t.value for t in page.table if markdown.render(str(t.value.columns[0])).strip() == "<p>carrier</p>")
    shown = [markdown.render(str(cell)).strip() for cell in carriers.iloc[:, 0]]
    assert f"<p>{html.escape(MARKUP_CARRIER, quote=False)}</p>" in shown
    cells = [markdown.render(str(cell)) for t in page.table for cell in t.value.to_numpy().ravel()]
    assert not [cell for cell in cells if re.search(r"<(em|strong|a|img|h\d|ol|ul|blockquote)\b", cell)]


def test_a_stream_whose_latest_run_failed_is_a_warning(data_dir: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The shipments stream's latest run failed (a run publishes the other streams' data anyway): the page says
    so at the top and since when its data is, rather than showing it as current with the status in a tooltip."""
    from streamlit.testing.v1 import AppTest

    data = tmp_path / "data"
    shutil.copytree(data_dir, data, symlinks=True)
    monkeypatch.setenv(DATA_DIR_ENV, str(data))
    failed_at = NOW - dt.timedelta(minutes=5)
    with duckdb.connect(str(working_db_path(data))) as work:
        work.execute("INSERT INTO freight_meta.sync_runs (run_id, stream, started_at, finished_at, status, error) "
                     "VALUES ('failed-now', 'shipments', ?, ?, 'failed', 'PermissionDeniedError: HTTP 403')",
                     [failed_at, failed_at])
    replace_json(run_log_path(data), [  # the run log says it too, as a run records it in both
        {**run, "run_id": "failed-now", "status": "failed", "started_at": failed_at.isoformat(),
         "finished_at": failed_at.isoformat(), "error": "PermissionDeniedError: HTTP 403"}
        if run["stream"] == "shipments" else run for run in read_run_log(data)])
    publish(data, settings=StorageSettings())
    page = AppTest.from_file(str(REPO_ROOT / "freight_pipeline" / "dashboard" / "app.py"), default_timeout=60).run()
    assert not page.exception and not page.error
    (warning,) = [w.value for w in page.warning]
    text = MARKDOWN_ESCAPE.sub(r"\1", warning)  # as the page shows it
    assert text == (f"The latest run of shipments failed (started {display.instant(failed_at)}): what it loads is "
                    f"as of its last successful run, {display.instant(LAST_SYNC)}. Error: PermissionDeniedError: "
                    "HTTP 403")
    with sources.open_warehouse(data) as con:
        assert display.failed_streams(queries.freshness(con).streams) == [text]


def test_a_run_after_the_last_publish_that_failed_or_was_cut_off_is_a_warning(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run that failed its dbt build, was held back by an ERROR check, or was killed never publishes: the page read
    the last publish's runs alone and showed every stream's latest run a success, while ``status`` said each. The
    working database's run log (read without opening it) says them at the top of the page too, each as of the
    last success readers see; a later run that succeeded is no warning."""
    from streamlit.testing.v1 import AppTest

    data = tmp_path / "data"
    shutil.copytree(data_dir, data, symlinks=True)
    monkeypatch.setenv(DATA_DIR_ENV, str(data))
    started = NOW - dt.timedelta(minutes=5)

    def logged(stream: str, run_id: str, status: str, error: str | None = None) -> dict[str, Any]:
        return {"run_id": run_id, "stream": stream, "status": status, "started_at": started.isoformat(),
                "finished_at": None if status == "running" else NOW.isoformat(), "error": error}

    replace_json(run_log_path(data), [
        logged("dbt_build", "after", "failed", "DbtRuntimeError: Runtime Error: Out of Memory"),
        logged("shipments", "killed", "running"), logged("code_conversions", "after", "success")])
    write_last_job_run(data, {"run_id": "after", "finished_at": NOW.isoformat(), "success": False,
                              "steps": [{"step": "checks", "status": "failed", "line": "ERROR unique_keys failed"}]})
    page = AppTest.from_file(str(REPO_ROOT / "freight_pipeline" / "dashboard" / "app.py"), default_timeout=60).run()
    assert not page.exception and not page.error
    warnings = sorted(MARKDOWN_ESCAPE.sub(r"\1", w.value) for w in page.warning)
    since = f"what it loads is as of its last successful run, {display.instant(LAST_SYNC)}"
    never = "it has never loaded anything (no successful run)"  # of what is published: no build is logged there
    assert warnings == [
        f"The latest run of dbt_build failed (started {display.instant(started)}): {never}. Error: DbtRuntimeError: "
        "Runtime Error: Out of Memory",
        f"The latest run of job checks failed (started {display.instant(NOW)}): {never}. Error: ERROR unique_keys "
        "failed",
        f"The latest run of shipments was cut off (started {display.instant(started)}): {since}. Error: {GONE}",
    ]


def test_before_the_first_publish_the_failed_runs_are_said(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing is published because every sync so far failed (a wrong password): the page says so, with the
    error of each stream's run (from the run log: the working database stays closed), not only "run a sync"."""
    from streamlit.testing.v1 import AppTest

    with running_simulator(shipments=1, seed=SEED) as sim, pytest.raises(AuthenticationError):
        sync_all(ServiceSettings(sim.base_url, sim.username, "wrong-password"), tmp_path, SYNC_SETTINGS,
                 backend=EmbeddedDuckDB(), run_id="refused")
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    page = AppTest.from_file(str(REPO_ROOT / "freight_pipeline" / "dashboard" / "app.py"), default_timeout=60).run()
    assert not page.exception
    assert [e.value for e in page.error] == [
        f"no published warehouse at {tmp_path / 'warehouse.duckdb'}; run `make demo` (or a sync) first"]
    warnings = [MARKDOWN_ESCAPE.sub(r"\1", w.value) for w in page.warning]
    shipments = next(w for w in warnings if w.startswith("The latest run of shipments failed"))
    assert "it has never loaded anything (no successful run). Error: AuthenticationError" in shipments
    assert not any("wrong-password" in w for w in warnings)


def test_a_missing_warehouse_is_a_message_not_a_traceback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from streamlit.testing.v1 import AppTest

    with pytest.raises(sources.NoWarehouse, match="run `make demo`"), sources.open_warehouse(tmp_path):
        pass
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    page = AppTest.from_file(str(REPO_ROOT / "freight_pipeline" / "dashboard" / "app.py"), default_timeout=60).run()
    assert not page.exception
    assert [m.value for m in page.markdown] == []  # nothing else on the page (no module string shown by "magic")
    assert [e.value for e in page.error] == [
        f"no published warehouse at {tmp_path / 'warehouse.duckdb'}; run `make demo` (or a sync) first"]

    duckdb.connect(str(tmp_path / "warehouse.duckdb")).close()  # published, but no dbt build in it
    with pytest.raises(sources.MissingMarts, match=r"no analytics\.fct_shipments"), sources.open_warehouse(tmp_path):
        pass
    page = AppTest.from_file(str(REPO_ROOT / "freight_pipeline" / "dashboard" / "app.py"), default_timeout=60).run()
    assert not page.exception
    assert "no dbt build has been published yet" in page.error[0].value


def test_reading_never_holds_up_a_publish(data_dir: Path, tmp_path: Path) -> None:
    """A page being read keeps its snapshot while a publish replaces the file; the next load sees the new one."""
    data = tmp_path / "data"
    shutil.copytree(data_dir, data, symlinks=True)
    with duckdb.connect(str(working_db_path(data))) as work:
        work.execute("DELETE FROM freight_meta.quarantine")
    with sources.open_warehouse(data) as reading:
        publish(data, settings=StorageSettings())
        assert queries.bad_data(reading).quarantined.sum() == sum(QUARANTINED.values())
    with sources.open_warehouse(data) as after:
        assert queries.bad_data(after).quarantined.sum() == 0


def test_the_dashboard_command_refuses_a_busy_port(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    from freight_pipeline.cli import main

    with socket.socket() as busy:
        busy.bind((LOCALHOST, 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["dashboard", "--data-dir", str(tmp_path), "--port", str(port)]) == 2
    assert f"port {port} on 127.0.0.1 is in use" in capsys.readouterr().err


# --- the page in headless Chromium ----------------------------------------------------------------

TABLES = (
    "table-on-time-month-mode", "table-on-time-lane", "table-on-time-carrier", "table-transit",
    "table-volume-month", "table-volume-lane", "table-open", "table-freshness", "table-bad-data", "table-columns",
)
CHART_SECTIONS = {"on-time": 3, "transit": 1, "volumes": 1, "open": 1}
"""Vega charts each section draws whatever the data."""
ETA_SECTION = "eta"
"""The ETA accuracy section: its tables and charts depend on the data (:func:`_layout`)."""
CHOOSERS = ("eta-horizon", "eta-shipment", TABLE_CHOICE)
READ_PAGE = """
(() => {
  const text = (el) => el ? el.innerText.trim() : null;
  const tiles = {};
  const deltas = {};
  document.querySelectorAll('[data-testid="stMetric"]').forEach((m) => {
    const name = text(m.querySelector('[data-testid="stMetricLabel"]'));
    tiles[name] = text(m.querySelector('[data-testid="stMetricValue"]'));
    deltas[name] = text(m.querySelector('[data-testid="stMetricDelta"]'));
  });
  const tables = {};
  document.querySelectorAll('[class*="st-key-table-"]').forEach((box) => {
    const key = [...box.classList].find((c) => c.startsWith('st-key-table-')).slice('st-key-'.length);
    const table = box.querySelector('table');
    if (!table) return;
    tables[key] = [...table.querySelectorAll('tr')].map((tr) => [...tr.querySelectorAll('th, td')].map(text));
  });
  const charts = {};
  for (const key of __SECTIONS__) {
    const box = document.querySelector('.st-key-' + key);
    const drawn = box ? [...box.querySelectorAll('.vega-embed')].filter((v) => {
      const mark = v.querySelector('canvas, svg.marks');
      const r = mark ? mark.getBoundingClientRect() : null;
      return r && r.width > 50 && r.height > 50;
    }) : [];
    charts[key] = drawn.length;
  }
  const notes = {};
  for (const key of __SECTIONS__) {
    const box = document.querySelector('.st-key-' + key);
    notes[key] = box ? [...box.querySelectorAll('[data-testid="stAlertContentInfo"]')].map(text) : [];
  }
  const choosers = {};
  for (const key of __CHOOSERS__) {
    const input = document.querySelector('.st-key-' + key + ' [data-testid="stSelectbox"] input[role="combobox"]');
    if (input) choosers[key] = input.value;
  }
  const running = !!document.querySelector('[data-testid="stStatusWidget"]');
  const exception = [...document.querySelectorAll('[data-testid="stException"], '
    + '[data-testid="stAlertContentError"], [data-testid="stAlertContentWarning"]')].map(text);
  return JSON.stringify({tiles, deltas, tables, charts, notes, choosers, running, exception});
})()
""".replace("__SECTIONS__", json.dumps([*CHART_SECTIONS, ETA_SECTION])).replace("__CHOOSERS__", json.dumps(CHOOSERS))


def _layout(data: queries.PageData) -> tuple[set[str], dict[str, int], set[str]]:
    """The tables (keys), the Vega charts per section and the choosers the page draws for ``data``."""
    tables, charts, choosers = set(TABLES), {**CHART_SECTIONS, ETA_SECTION: 0}, {TABLE_CHOICE}
    if data.eta_missing is None and display.eta_note(data.eta_by_horizon) is None:
        tables.add("table-eta-horizon")
        choosers.add("eta-horizon")
        charts[ETA_SECTION] += 1
        for key, frame in (("table-eta-lane", data.eta_by_lane), ("table-eta-carrier", data.eta_by_carrier)):
            if len(frame):
                tables.add(key)
                charts[ETA_SECTION] += 1
    if data.eta_shipment_id is not None:
        tables |= {"table-eta-shipment", "table-eta-versions"}
        charts[ETA_SECTION] += 1
        choosers.add("eta-shipment")
    return tables, charts, choosers


def _check_ui() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_ui", REPO_ROOT / "scripts" / "check_ui.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def dashboard(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``freight-pipeline dashboard`` on a free loopback port; its URL. Stopped after the tests."""
    with served_dashboard(data_dir, tmp_path_factory.mktemp("dashboard-log") / "dashboard.log") as url:
        yield url


@contextlib.contextmanager
def served_dashboard(data_dir: Path, log_path: Path, env: dict[str, str] | None = None) -> Iterator[str]:
    """``freight-pipeline dashboard`` over ``data_dir`` (with ``env`` added to the environment) on a free
    loopback port, its output in ``log_path``; its URL, for the block. Skips without Chromium."""
    if not CHROMIUM.is_file():
        pytest.skip(f"{CHROMIUM} is not installed (apt-get install -y chromium): the browser test needs it")
    port = free_port()
    argv = [sys.executable, "-m", "freight_pipeline.cli", "dashboard", "--data-dir", str(data_dir), "--port",
            str(port)]
    with open(log_path, "wb") as log:
        child = subprocess.Popen(argv, cwd=REPO_ROOT, env={**os.environ, **(env or {})}, stdout=log,
                                 stderr=subprocess.STDOUT, start_new_session=True)
    try:
        url = f"http://{LOCALHOST}:{port}"
        try:
            wait_http(f"{url}/_stcore/health", child, "freight-pipeline dashboard", 120)
        except (TimeoutError, RuntimeError) as exc:
            pytest.fail(f"{exc}; its log:\n{log_path.read_text(errors='replace')[-3000:]}")
        yield url
    finally:
        stop_child(child, timeout=30)
        assert child.returncode is not None


class _Browser:
    def __init__(self, check_ui: ModuleType, cdp: Any, home: Path, pid: int) -> None:
        self.check_ui = check_ui
        self.cdp = cdp
        self.home = home
        """The folder Chromium writes in (``check_ui.start_chromium``), removed after the module's tests."""
        self.pid = pid

    def load(self, url: str, data: queries.PageData, timeout: float = 90) -> dict[str, Any]:
        """Open ``url``; wait until every table and chooser ``data`` gives is there, every chart drawn and
        the script finished."""
        tables, charts, choosers = _layout(data)
        self.cdp.call("Page.navigate", url=url)
        deadline = time.monotonic() + timeout
        page: dict[str, Any] = {}
        previous = None
        while time.monotonic() < deadline:
            time.sleep(0.5)
            page = json.loads(self.cdp.evaluate(READ_PAGE) or "{}")
            ready = (not page.get("running") and tables <= set(page.get("tables", {}))
                     and choosers <= set(page.get("choosers", {}))
                     and all(page["charts"].get(k, 0) >= n for k, n in charts.items())
                     and len(page.get("tiles", {})) == 6)
            if ready and page == previous:  # twice the same: the page settled
                return page
            previous = page if ready else None
        raise AssertionError(f"the dashboard did not render within {timeout:.0f} s: {json.dumps(page)[:3000]}")

    def screenshot(self, path: Path, section: str | None = None) -> Path:
        """The whole page (the window made as tall as Streamlit's scrolling main area), or the container of key
        ``section`` only."""
        where = ("document.querySelector('[data-testid=\"stMain\"]') || document.body" if section is None
                 else f"document.querySelector('.st-key-{section}')")
        height = int(float(self.cdp.evaluate(f"String(({where}).scrollHeight)") or 1200))
        self.cdp.call("Emulation.setDeviceMetricsOverride", width=1400, height=min(height + 40, 6000),
                      deviceScaleFactor=1, mobile=False)
        time.sleep(2)  # charts re-layout to the new size
        options: dict[str, Any] = {"format": "png"}
        if section is not None:  # scrolled to the top of the window, and only it (the page's header hidden)
            box = json.loads(self.cdp.evaluate(
                "(() => { const header = document.querySelector('[data-testid=\"stHeader\"]'); "
                "if (header) header.style.display = 'none'; "  # it would cover the section's heading
                f"const box = {where}; box.scrollIntoView({{block: 'start'}}); "
                "return JSON.stringify(box.getBoundingClientRect()); })()"))
            options["clip"] = {"x": max(box["x"] - 16, 0), "y": max(box["y"] - 16, 0), "width": box["width"] + 32,
                               "height": box["height"] + 32, "scale": 1}
        path.write_bytes(base64.b64decode(self.cdp.call("Page.captureScreenshot", **options)["data"]))
        return path


@pytest.fixture(scope="module")
def browser(dashboard: str) -> Iterator[_Browser]:
    check_ui = _check_ui()
    home = Path(tempfile.mkdtemp(prefix="freight-dashboard-chromium-"))
    flags = [f for f in check_ui.CHROMIUM_FLAGS if not f.startswith("--window-size=")]
    process, profile = check_ui.start_chromium(str(CHROMIUM), [*flags, "--window-size=1400,1000"], home)
    try:
        port = check_ui._devtools_port(profile, process, 30)
        targets = httpx.get(f"http://{LOCALHOST}:{port}/json/list").json()
        page = next(t for t in targets if t.get("type") == "page")
        with connect(page["webSocketDebuggerUrl"], max_size=None, open_timeout=30) as ws:
            cdp = check_ui._Cdp(ws)
            cdp.call("Page.enable")
            yield _Browser(check_ui, cdp, home, process.pid)
    finally:
        stop_child(process, timeout=10)
        shutil.rmtree(home, ignore_errors=True)


def _rows(page: dict[str, Any], key: str) -> list[list[str]]:
    return page["tables"][key]


def _expected(frame: pd.DataFrame, columns: list[display.Column]) -> list[list[str]]:
    shown = display.table(frame, columns)
    return [list(shown.columns), *[list(map(str, row)) for row in shown.itertuples(index=False)]]


ON_TIME: list[display.Column] = [("shipments_arrived", "arrived", display.count),
                                 ("shipments_on_time", "on time", display.count),
                                 ("on_time_share", "on-time share", display.share)]
VOLUME: list[display.Column] = [("shipments", "shipments", display.count),
                                ("gross_weight", "gross weight", display.whole),
                                ("volume", "volume (m³)", display.decimal)]


def _assert_page_matches(page: dict[str, Any], con: duckdb.DuckDBPyConnection, filters: Filters,
                         before: dt.datetime, after: dt.datetime) -> None:
    assert not page["exception"], page["exception"]
    data = queries.load_page(con, filters)
    tiles = page["tiles"]
    assert tiles["On-time share"] == display.share(data.on_time_total.iloc[0].on_time_share)
    assert tiles["Shipments"] == display.count(data.volume_total.iloc[0].shipments)
    assert tiles["Open shipments"] == display.count(data.volume_total.iloc[0].open_shipments)
    assert tiles["Last sync"] in {f"{display.duration(t - LAST_SYNC)} ago" for t in (before, after)}
    assert page["deltas"]["Last sync"] == display.instant(LAST_SYNC)
    assert tiles["Source lag"] in {display.duration(t - NEWEST_CHANGE) for t in (before, after)}
    assert tiles["Quarantined records"] == display.count(sum(QUARANTINED.values()))
    assert page["deltas"]["Quarantined records"] == f"{sum(NULLED.values())} values nulled"

    label, month = display.label, display.month
    pivot = display.on_time_pivot(data.on_time_by_month_mode, data.on_time_by_month)
    assert _rows(page, "table-on-time-month-mode") == [list(pivot.columns), *map(list, pivot.itertuples(index=False))]
    assert _rows(page, "table-on-time-lane") == _expected(data.on_time_by_lane, [("lane", "lane", label), *ON_TIME])
    assert _rows(page, "table-on-time-carrier") == _expected(
        data.on_time_by_carrier, [("carrier_name", "carrier", label), *ON_TIME])
    hours = [(f"{s}_hours", s, display.decimal) for s in ("min", "p25", "median", "p75", "max", "mean")]
    assert _rows(page, "table-transit") == _expected(
        data.transit_by_lane, [("lane", "lane", label), ("shipments", "shipments", display.count), *hours])
    assert _rows(page, "table-volume-month") == _expected(data.volume_by_month,
                                                          [("created_month", "month", month), *VOLUME])
    assert _rows(page, "table-volume-lane") == _expected(data.volume_by_lane, [("lane", "lane", label), *VOLUME])
    assert _rows(page, "table-open") == _expected(
        data.open_by_milestone, [("next_milestone", "next milestone", label),
                                 ("open_shipments", "open shipments", display.count)])
    freshness = _rows(page, "table-freshness")
    assert freshness[0][:5] == ["stream", "last run", "started", "finished", "last success"]
    assert [row[:5] for row in freshness[1:]] == [
        [stream, "success", display.instant(LAST_SYNC - dt.timedelta(minutes=1)), display.instant(LAST_SYNC),
         display.instant(LAST_SYNC)] for stream in ("shipments", "code_conversions")]
    assert _rows(page, "table-bad-data")[1:] == [
        ["code_conversions", "1", display.instant(NOW - dt.timedelta(hours=1)), "0"],
        ["shipments", "3", display.instant(NOW - dt.timedelta(hours=3)), "2"]]
    _assert_eta_matches(page, data)
    assert page["choosers"][TABLE_CHOICE] == data.table == queries.DEFAULT_TABLE
    columns = _rows(page, "table-columns")
    assert columns == _expected(data.table_columns, COLUMNS_TABLE)
    assert len(columns) > 10 and all(row[2] not in ("", display.NO_VALUE) for row in columns[1:])


NOT_REVISED = "No arrival estimate here has moved yet (analytics.fct_estimate_revisions)."


def _assert_eta_matches(page: dict[str, Any], data: queries.PageData) -> None:
    """The ETA section shows ``data``'s figures, or says why it has none."""
    assert page["charts"][ETA_SECTION] == _layout(data)[1][ETA_SECTION]
    notes: list[str] = []
    if data.eta_missing is not None:
        assert page["notes"][ETA_SECTION] == [data.eta_missing]
        return
    note = display.eta_note(data.eta_by_horizon)
    if note is not None:
        notes.append(note)
    else:
        assert _rows(page, "table-eta-horizon") == _expected(data.eta_by_horizon, ETA_HORIZON_TABLE)
        assert page["choosers"]["eta-horizon"] == display.days_before(data.eta_horizon)
        for key, frame, dimension, heading in (("table-eta-lane", data.eta_by_lane, "lane", "lane"),
                                               ("table-eta-carrier", data.eta_by_carrier, "carrier_name", "carrier")):
            if len(frame):
                assert _rows(page, key) == _expected(frame, [(dimension, heading, display.label), *ETA_RANKED_FIGURES])
            else:
                assert key not in page["tables"]
    if data.eta_shipment_id is None:
        notes.append(NOT_REVISED)
    else:
        one = data.eta_shipments[data.eta_shipments.shipment_id == data.eta_shipment_id]
        assert _rows(page, "table-eta-shipment") == _expected(one, ETA_SHIPMENT_TABLE)
        assert _rows(page, "table-eta-versions") == _expected(data.eta_versions, ETA_VERSIONS_TABLE)
        assert page["choosers"]["eta-shipment"] == display.shipment_choice(next(one.itertuples()))
    assert page["notes"][ETA_SECTION] == notes


def test_the_browser_writes_only_in_the_folder_removed_after_it(browser: _Browser) -> None:
    """Chromium runs with every folder it writes in besides its profile in its own home
    (``check_ui.start_chromium``), and writes in them there, not in the system's: its SingletonSocket folder (which
    it leaves in its temporary directory when stopped), its crash reports' settings and its dconf cache."""
    environment = dict(line.split("=", 1) for line in
                       Path(f"/proc/{browser.pid}/environ").read_text().split("\0") if "=" in line)
    assert {variable: environment.get(variable) for variable in browser.check_ui.CHROMIUM_FOLDERS} == {
        variable: str(browser.home / name) for variable, name in browser.check_ui.CHROMIUM_FOLDERS.items()}
    assert [path.name for path in (browser.home / "tmp").glob("org.chromium.Chromium.*/SingletonSocket")] == \
        ["SingletonSocket"]
    assert (browser.home / "config" / "chromium" / "Crash Reports").is_dir()
    assert (browser.home / "cache" / "dconf").is_dir()


def test_the_page_shows_the_warehouses_numbers(
    browser: _Browser, dashboard: str, con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    # the headline figures straight from the marts, without the dashboard's queries
    arrived, on_time = _one(con, "SELECT sum(shipments_arrived), sum(shipments_on_time) "
                                 "FROM analytics.fct_on_time_performance")
    shipments, open_shipments = _one(con, "SELECT count(*), count(*) FILTER (WHERE NOT is_closed) "
                                          "FROM analytics.fct_shipments")
    before = dt.datetime.now(dt.UTC)
    page = browser.load(dashboard, queries.load_page(con, Filters()))
    after = dt.datetime.now(dt.UTC)
    assert page["tiles"]["On-time share"] == f"{on_time / arrived * 100:.1f} %"
    assert page["tiles"]["Shipments"] == f"{shipments:,}"
    assert page["tiles"]["Open shipments"] == f"{open_shipments:,}"
    _assert_page_matches(page, con, Filters(), before, after)
    assert all(page["charts"][k] == n for k, n in CHART_SECTIONS.items()), page["charts"]
    assert page["charts"][ETA_SECTION] == 4 and page["notes"][ETA_SECTION] == []

    # the ETA section's figures straight from the marts and the history, without the dashboard's queries
    horizons = _rows(page, "table-eta-horizon")
    heading = horizons[0]
    shown = {(row[0], row[1]): row for row in horizons[1:]}
    for mode, horizon, scored, mae in con.execute(
            f"SELECT {MODE}, horizon_days, count(*), avg(abs_error_hours) {ARRIVAL_ROWS} AND is_scored GROUP BY ALL"
    ).fetchall():
        row = shown[(mode, display.days_before(horizon))]
        assert row[heading.index("scored")] == f"{scored:,}"
        assert float(row[heading.index("mean abs. error (h)")].replace(",", "")) == pytest.approx(mae, abs=0.05)
    assert {"SEA", "AIR"} <= {mode for mode, _ in shown}
    horizon = _default_horizon(con)
    assert page["choosers"]["eta-horizon"] == display.days_before(horizon)
    for key, dimension in (("table-eta-lane", "lane"), ("table-eta-carrier", "carrier_name")):
        top, scored, mae = _one(
            con, f"SELECT {dimension}, count(*) AS n, avg(abs_error_hours) AS mae {ARRIVAL_ROWS} AND is_scored "
                 f"AND horizon_days = ? AND {dimension} IS NOT NULL GROUP BY 1 HAVING n >= ? ORDER BY mae, n DESC, 1 "
                 "LIMIT 1", [horizon, queries.RANK_MIN_SCORED])
        first = _rows(page, key)[1]
        assert first[:2] == [top, f"{scored:,}"]
        assert float(first[2].replace(",", "")) == pytest.approx(mae, abs=0.05)
    (most,) = _one(con, "SELECT max(revisions) FROM analytics.fct_estimate_revisions WHERE milestone = 'arrival'")
    heading, chosen = _rows(page, "table-eta-shipment")
    estimates, revisions = _history_revisions(con, int(chosen[heading.index("shipment")]))
    assert chosen[heading.index("revisions")] == str(most) == str(revisions) and most >= 2
    heading, *versions = _rows(page, "table-eta-versions")
    assert len(versions) == estimates
    moved = heading.index("moved (h)")
    assert sum(1 for row in versions if row[moved]) == revisions  # blank unless the estimate moved

    shot = browser.screenshot(tmp_path / "dashboard.png")
    assert shot.stat().st_size > 20_000
    print(f"dashboard screenshot: {shot}")
    if os.environ.get(SCREENSHOT_ENV):
        shutil.copy(shot, Path(os.environ[SCREENSHOT_ENV]))
    section = browser.screenshot(tmp_path / "descriptions.png", "tables")
    assert section.stat().st_size > 10_000
    if os.environ.get(DESCRIPTIONS_SCREENSHOT_ENV):
        shutil.copy(section, Path(os.environ[DESCRIPTIONS_SCREENSHOT_ENV]))


def test_the_page_opens_filtered_from_its_url(browser: _Browser, dashboard: str,
                                              con: duckdb.DuckDBPyConnection) -> None:
    client = _clients(con)[0]
    filters = Filters(modes=("SEA",), clients=(client,))
    before = dt.datetime.now(dt.UTC)
    page = browser.load(f"{dashboard}/?mode=SEA&client={client}", queries.load_page(con, filters))
    after = dt.datetime.now(dt.UTC)
    _assert_page_matches(page, con, filters, before, after)
    (shipments,) = _one(con, "SELECT count(*) FROM analytics.fct_shipments WHERE client = ? AND "
                             "mode_of_transport = 'SEA'", [client])
    assert page["tiles"]["Shipments"] == f"{shipments:,}"
    assert page["tiles"]["Shipments"] != display.count(queries.volumes(con, Filters()).iloc[0].shipments)
    assert re.fullmatch(r"[0-9.]+ %|n/a", page["tiles"]["On-time share"])
