"""The dashboard's access to the published warehouse and its filters: the read-only connection for
one page load (the published file, or in lake mode the lake's published snapshot), what the page
needs to be there, the filter values and the marts each view reads (with the SQL ``WHERE`` a filter
makes for it). The views themselves: :mod:`.queries`."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from freight_pipeline.warehouse.backend import StorageBackend
from freight_pipeline.warehouse.embedded import EmbeddedDuckDB
from freight_pipeline.warehouse.paths import DASHBOARD_SCRATCH
from freight_pipeline.warehouse.run_log import runs_after_publish

MARTS = (
    "analytics.fct_shipments",
    "analytics.fct_shipment_milestones",
    "analytics.fct_transit_times",
    "analytics.fct_on_time_performance",
)
"""The marts every page needs; a warehouse without one of them gets :class:`MissingMarts`."""

ETA_MARTS = ("analytics.fct_eta_accuracy", "analytics.fct_estimate_revisions")
"""The marts of the ETA accuracy section (with ``freight_history.event_versions``). Optional: a warehouse
published before them shows the rest of the page and says so in that section."""

ETA_MILESTONE = "arrival"
"""The milestone the ETA section scores: the arrival at the port of discharge (``POD_ARRIVAL``)."""
ETA_EVENT = "POD_ARRIVAL"
"""Its event code in ``freight_history.event_versions`` (whose ``ESTIMATED`` versions are the estimates)."""
WITHIN_HOURS = 24
"""An estimate within this many hours of the actual, either side, counts as accurate (as in
``fct_eta_accuracy_monthly.within_24h_share``)."""

MAIN_STREAM = "shipments"
"""The stream whose last successful run is "the last sync" (the code conversions run daily)."""

UNKNOWN_MODE = "UNKNOWN"


def mode_bucket(alias: str = "") -> str:
    """A mart row's mode as the on-time mart buckets it (``alias.``: the table alias, if any)."""
    prefix = f"{alias}." if alias else ""
    return (f"CASE WHEN {prefix}is_known_mode_of_transport THEN {prefix}mode_of_transport "
            f"ELSE '{UNKNOWN_MODE}' END")


class NoWarehouse(FileNotFoundError):
    """Nothing is published where the page reads yet (the file, or the lake's published snapshot)."""

    def __init__(self, where: str) -> None:
        super().__init__(f"no published warehouse {where}; run `make demo` (or a sync) first")
        self.where = where


class MissingMarts(LookupError):
    """The published warehouse lacks marts the dashboard reads (no dbt build was published yet)."""


@dataclass(frozen=True)
class Filters:
    """What the page is narrowed to; an empty tuple or None means "all"."""

    modes: tuple[str, ...] = ()
    clients: tuple[str, ...] = ()
    month_from: dt.date | None = None
    """First month of the period (any day of it)."""
    month_to: dt.date | None = None
    """Last month of the period, included (any day of it)."""

    def __post_init__(self) -> None:
        for name in ("month_from", "month_to"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, first_of_month(value))


@dataclass(frozen=True)
class FilterOptions:
    modes: list[str]
    clients: list[str]
    months: list[dt.date]
    """Every month some view has data for, ascending (first day of the month)."""


@dataclass(frozen=True)
class Freshness:
    last_sync_at: dt.datetime | None
    """When the newest successful run of the shipments stream finished (UTC)."""
    last_run_status: str | None
    """Status of the newest run of the shipments stream (success, failed, running)."""
    newest_source_change: dt.datetime | None
    """Newest last-modified instant of a shipment the warehouse holds (UTC)."""
    streams: pd.DataFrame = field(repr=False)
    """Per stream (:data:`STREAM_COLUMNS`): last run (status, started, finished, error) and last success."""
    open_shipments: int = 0
    oldest_open_events_read: dt.datetime | None = None
    """When the events of the open shipment read longest ago were read (UTC; ``sync.freshness``)."""

    def source_lag(self, now: dt.datetime) -> dt.timedelta | None:
        """``now`` minus the newest source change held (what Dagster reports as ``source_lag_seconds``)."""
        return None if self.newest_source_change is None else now - self.newest_source_change

    def sync_age(self, now: dt.datetime) -> dt.timedelta | None:
        return None if self.last_sync_at is None else now - self.last_sync_at


def first_of_month(day: dt.date) -> dt.date:
    return dt.date(day.year, day.month, 1)


# --- connection -----------------------------------------------------------------------------------


@contextmanager
def open_warehouse(
    data_dir: Path, backend: StorageBackend | None = None
) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-only connection for one page load, closed after it, to what ``backend`` (default: the
    embedded file) published: ``<data_dir>/warehouse.duckdb``, or a lake as of its published snapshot
    (the marts and source tables of one whole, successful build, as the file holds them; never a
    build half committed).

    NoWarehouse when nothing is published, MissingMarts when it has no marts. The session time zone
    is UTC, so instants come back in UTC and months are UTC months.
    """
    con, where = _connect_published(Path(data_dir), backend or EmbeddedDuckDB())
    try:
        con.execute("SET TimeZone = 'UTC'")
        missing = [name for name in MARTS if not has_table(con, name)]
        if missing:
            raise MissingMarts(
                f"the published warehouse {where} has no {', '.join(missing)}: "
                "no dbt build has been published yet (run `make demo` or a sync)"
            )
        yield con
    finally:
        con.close()


def _connect_published(data_dir: Path, backend: StorageBackend) -> tuple[duckdb.DuckDBPyConnection, str]:
    """The published state's connection and where it is in words; NoWarehouse when nothing is published."""
    state = backend.open_published(data_dir, DASHBOARD_SCRATCH)
    if state is None:
        raise NoWarehouse(backend.published_where(data_dir))
    if not state.is_published:  # the connection reads the latest snapshot: maybe a build half committed
        state.con.close()
        raise NoWarehouse(f"{state.where} (no published snapshot)")
    return state.con, state.where


STREAM_COLUMNS = ["stream", "last_status", "last_started_at", "last_finished_at", "last_success_at", "error",
                  "last_run_id"]
"""Per stream: its last run (status, started, finished, error, id) and last success (``Freshness.streams``)."""


def latest_runs(data_dir: Path, published: pd.DataFrame | None = None) -> pd.DataFrame:
    """Each stream's latest run, as ``Freshness.streams``: those of ``published`` (the last publish's; None: nothing
    published), each replaced by the stream's later run the working database logged (its run log file, read without
    opening the database: a run that failed or was cut off never publishes; :func:`~freight_pipeline.warehouse.
    run_log.runs_after_publish`), with the last success readers see; then the job's own steps that did not publish
    (``job checks``, ``job publish``)."""
    def instant(text: Any) -> dt.datetime | None:
        return dt.datetime.fromisoformat(text) if isinstance(text, str) else None

    published = pd.DataFrame(columns=STREAM_COLUMNS) if published is None else published
    shown = dict(zip(published["stream"], published["last_run_id"], strict=True))
    success = dict(zip(published["stream"], published["last_success_at"], strict=True))
    later = pd.DataFrame([[r.get("stream"), r.get("status"), instant(r.get("started_at") or r.get("finished_at")),
                           instant(r.get("finished_at")), success.get(r.get("stream")), r.get("error"), r.get("run_id")]
                          for r in runs_after_publish(Path(data_dir), shown)],
                         columns=STREAM_COLUMNS)
    kept = published[~published["stream"].isin(later["stream"])]
    return later if kept.empty else pd.concat([kept, later], ignore_index=True)


def has_table(con: duckdb.DuckDBPyConnection, qualified: str) -> bool:
    schema, name = qualified.split(".", 1)
    row = con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE database_name = current_database() "
        "AND schema_name = ? AND table_name = ?",
        [schema, name],
    ).fetchone()
    return bool(row and row[0])


def _df(con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any] = ()) -> pd.DataFrame:
    return con.execute(sql, list(params)).df()


# --- sources and filters --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Source:
    """A subquery with the columns ``mode_of_transport``, ``client`` and a month column to filter."""

    sql: str
    month: str


SHIPMENTS = _Source(
    f"""
    SELECT shipment_id, client, {mode_bucket()} AS mode_of_transport, lane, carrier_name,
           total_gross_weight, total_volume, is_closed,
           CAST(date_trunc('month', timezone('UTC', created_at)) AS DATE) AS created_month
    FROM analytics.fct_shipments
    """,
    month="created_month",
)
"""One row per shipment; the period applies to the UTC month it was created in."""

TRANSIT = _Source(
    f"""
    SELECT t.shipment_id, s.client, {mode_bucket("t")} AS mode_of_transport, t.lane, t.carrier_name, t.transit_hours,
           CAST(date_trunc('month', timezone('UTC', t.arrived_at)) AS DATE) AS arrival_month
    FROM analytics.fct_transit_times t
    LEFT JOIN analytics.fct_shipments s ON s.shipment_id = t.shipment_id
    """,
    month="arrival_month",
)
"""One row per shipment with actual departure and arrival; the period applies to the month it arrived."""

ON_TIME_MART = _Source(
    """
    SELECT arrival_month, mode_of_transport, lane, carrier_name, CAST(NULL AS VARCHAR) AS client,
           shipments_planned AS planned, shipments_arrived AS arrived, shipments_on_time AS on_time
    FROM analytics.fct_on_time_performance
    """,
    month="arrival_month",
)
"""The on-time mart as it is (no client column: used when no client filter is set)."""

ON_TIME_PER_SHIPMENT = _Source(
    f"""
    WITH arrivals AS (
        SELECT shipment_id, planned_at, planned_date, actual_at, actual_date
        FROM analytics.fct_shipment_milestones
        WHERE event_code = 'POD_ARRIVAL' AND (planned_at IS NOT NULL OR planned_date IS NOT NULL)
    ),
    tolerance AS (
        SELECT coalesce(max(on_time_tolerance_minutes), 60) AS minutes FROM analytics.fct_on_time_performance
    ),
    judged AS (
        SELECT
            CASE WHEN a.planned_at IS NOT NULL
                THEN CAST(date_trunc('month', timezone('UTC', a.planned_at)) AS DATE)
                ELSE CAST(date_trunc('month', a.planned_date) AS DATE)
            END AS arrival_month,
            {mode_bucket("s")} AS mode_of_transport,
            s.lane, s.carrier_name, s.client,
            a.actual_at IS NOT NULL OR a.actual_date IS NOT NULL AS has_arrived,
            CASE
                WHEN a.planned_at IS NOT NULL AND a.actual_at IS NOT NULL
                    THEN epoch(a.actual_at) - epoch(a.planned_at) <= tolerance.minutes * 60
                WHEN a.planned_date IS NOT NULL AND a.actual_date IS NOT NULL
                    THEN a.actual_date <= a.planned_date
            END AS is_on_time
        FROM arrivals a
        JOIN analytics.fct_shipments s ON s.shipment_id = a.shipment_id
        CROSS JOIN tolerance
    )
    SELECT arrival_month, mode_of_transport, lane, carrier_name, client,
           1 AS planned, CAST(has_arrived AS INTEGER) AS arrived,
           CAST(has_arrived AND coalesce(is_on_time, false) AS INTEGER) AS on_time
    FROM judged
    """,
    month="arrival_month",
)
"""The mart's rule per shipment, with its client (used when a client filter is set)."""


ETA = _Source(
    f"""
    SELECT a.shipment_id, s.client, {mode_bucket("a")} AS mode_of_transport, a.lane, a.carrier_name,
           a.horizon_days, a.is_scored, a.error_hours, a.abs_error_hours,
           a.is_scored AND abs(epoch(a.estimated_at) - epoch(a.actual_at)) <= {WITHIN_HOURS * 3600} AS is_within,
           CAST(date_trunc('month', timezone('UTC', a.actual_at)) AS DATE) AS actual_month
    FROM analytics.fct_eta_accuracy a
    LEFT JOIN analytics.fct_shipments s ON s.shipment_id = a.shipment_id
    WHERE a.milestone = '{ETA_MILESTONE}'
    """,
    month="actual_month",
)
"""One row per arrived shipment and horizon: the arrival estimate in force that long before, scored
against the actual (``fct_eta_accuracy``); the period applies to the UTC month of the actual arrival.
Mode bucketed as in ``fct_eta_accuracy_monthly``; "within" compares the unrounded instants, as it does."""

REVISIONS = _Source(
    f"""
    SELECT r.shipment_id, s.client, {mode_bucket("s")} AS mode_of_transport, r.lane, r.carrier_name,
           r.estimate_versions, r.revisions, r.first_estimated_at, r.last_estimated_at, r.total_slip_hours,
           r.last_revised_at, r.actual_at,
           CAST(date_trunc('month', timezone('UTC', r.actual_at)) AS DATE) AS actual_month
    FROM analytics.fct_estimate_revisions r
    JOIN analytics.fct_shipments s ON s.shipment_id = r.shipment_id
    WHERE r.milestone = '{ETA_MILESTONE}'
    """,
    month="actual_month",
)
"""One row per shipment with an arrival estimate (``fct_estimate_revisions``); the period applies to
the UTC month of the actual arrival (a shipment not arrived yet has none: it shows without a period only)."""


def _where(filters: Filters, source: _Source, *extra: str) -> tuple[str, list[Any]]:
    """``WHERE ...`` over ``source``'s columns for ``filters`` (values as parameters), and the parameters."""
    clauses = list(extra)
    params: list[Any] = []
    if filters.modes:
        clauses.append("list_contains(?::VARCHAR[], mode_of_transport)")
        params.append(list(filters.modes))
    if filters.clients:
        clauses.append("list_contains(?::VARCHAR[], client)")
        params.append(list(filters.clients))
    if filters.month_from is not None:
        clauses.append(f"{source.month} >= ?")
        params.append(filters.month_from)
    if filters.month_to is not None:
        clauses.append(f"{source.month} <= ?")
        params.append(filters.month_to)
    return ("WHERE " + " AND ".join(clauses)) if clauses else "", params


# --- filter choices -------------------------------------------------------------------------------


def filter_options(con: duckdb.DuckDBPyConnection) -> FilterOptions:
    modes = [r[0] for r in con.execute(f"SELECT DISTINCT mode_of_transport FROM ({SHIPMENTS.sql}) ORDER BY 1")
             .fetchall()]
    clients = [r[0] for r in con.execute(
        "SELECT DISTINCT client FROM analytics.fct_shipments WHERE client IS NOT NULL ORDER BY 1"
    ).fetchall()]
    months = [r[0] for r in con.execute(
        f"SELECT DISTINCT m FROM (SELECT created_month AS m FROM ({SHIPMENTS.sql}) "
        f"UNION SELECT arrival_month FROM ({TRANSIT.sql}) "
        "UNION SELECT arrival_month FROM analytics.fct_on_time_performance) WHERE m IS NOT NULL ORDER BY 1"
    ).fetchall()]
    return FilterOptions(modes, clients, months)


# --- on-time performance --------------------------------------------------------------------------
