"""What the dashboard shows, as plain functions over a read-only connection to the PUBLISHED warehouse.

Every function takes an open DuckDB connection (:func:`open_warehouse`) and returns a pandas
DataFrame (or a small dataclass); the Streamlit page only lays them out. Filters (:class:`Filters`:
modes, clients, a month range) go into the SQL as parameters, never as text.

Reading never blocks the pipeline: :func:`open_warehouse` opens ``$FREIGHT_DATA_DIR/warehouse.duckdb``
read-only for one page load and closes it. A publish renames a new file over that path; a page
being read keeps the snapshot it opened (its inode), the next page load opens the new file.

The views and where they come from (schema ``analytics`` unless said otherwise):

* on-time share by month, mode, lane and carrier: ``fct_on_time_performance``. That mart has no
  client column, so with a client filter the same rule is applied per shipment instead
  (``fct_shipment_milestones`` POD_ARRIVAL joined to ``fct_shipments``, the tolerance the mart was
  built with); the tests check that both give the mart's figures when every client is selected;
* transit-time distribution per lane: ``fct_transit_times`` (quartiles computed here, in SQL);
* volumes (shipments, gross weight, volume) by lane and month of creation: ``fct_shipments``;
* open shipments (not closed) by next milestone: the earliest planned milestone of
  ``fct_shipment_milestones`` that has no actual yet;
* freshness: ``freight_meta.sync_runs`` (last run and last success per stream) and the newest
  source change held (``freight_meta.raw_shipments.last_modified_at``, as the Dagster asset metadata
  computes its ``source_lag_seconds``);
* bad data: ``freight_meta.quarantine`` (records waiting for retry) and ``freight_meta.data_problems``
  (values nulled) per stream.

Modes are the on-time mart's buckets everywhere: SEA, AIR, RD, RL, and UNKNOWN for any other mode
(or none) the service sent, so one mode filter means the same on every view.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from freight_pipeline.warehouse.meta import (
    DATA_PROBLEMS,
    LATEST_RUN_PER_STREAM,
    QUARANTINE,
    RAW_SHIPMENTS,
    SYNC_RUNS,
)
from freight_pipeline.warehouse.publish import published_db_path

MARTS = (
    "analytics.fct_shipments",
    "analytics.fct_shipment_milestones",
    "analytics.fct_transit_times",
    "analytics.fct_on_time_performance",
)
"""The marts every page needs; a warehouse without one of them gets :class:`MissingMarts`."""

MAIN_STREAM = "shipments"
"""The stream whose last successful run is "the last sync" (the code conversions run daily)."""

UNKNOWN_MODE = "UNKNOWN"


def mode_bucket(alias: str = "") -> str:
    """A mart row's mode as the on-time mart buckets it (``alias.``: the table alias, if any)."""
    prefix = f"{alias}." if alias else ""
    return (f"CASE WHEN {prefix}is_known_mode_of_transport THEN {prefix}mode_of_transport "
            f"ELSE '{UNKNOWN_MODE}' END")


class NoWarehouse(FileNotFoundError):
    """Nothing is published at the expected path yet."""

    def __init__(self, path: Path) -> None:
        super().__init__(f"no published warehouse at {path}; run `make demo` (or a sync) first")
        self.path = path


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
    """Per stream: last run (status, started, finished, error) and last success."""

    def source_lag(self, now: dt.datetime) -> dt.timedelta | None:
        """``now`` minus the newest source change held (what Dagster reports as ``source_lag_seconds``)."""
        return None if self.newest_source_change is None else now - self.newest_source_change

    def sync_age(self, now: dt.datetime) -> dt.timedelta | None:
        return None if self.last_sync_at is None else now - self.last_sync_at


def first_of_month(day: dt.date) -> dt.date:
    return dt.date(day.year, day.month, 1)


# --- connection -----------------------------------------------------------------------------------


@contextmanager
def open_warehouse(data_dir: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-only connection to ``<data_dir>/warehouse.duckdb`` for one page load, closed after it.

    NoWarehouse when the file is absent, MissingMarts when it has no marts. The session time zone
    is UTC, so instants come back in UTC and months are UTC months.
    """
    path = published_db_path(Path(data_dir))
    if not path.is_file():
        raise NoWarehouse(path)
    con = duckdb.connect(str(path), read_only=True)
    try:
        con.execute("SET TimeZone = 'UTC'")
        missing = [name for name in MARTS if not has_table(con, name)]
        if missing:
            raise MissingMarts(
                f"the published warehouse at {path} has no {', '.join(missing)}: "
                "no dbt build has been published yet (run `make demo` or a sync)"
            )
        yield con
    finally:
        con.close()


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

ON_TIME_DIMENSIONS = ("arrival_month", "mode_of_transport", "lane", "carrier_name")


def on_time(con: duckdb.DuckDBPyConnection, filters: Filters, by: Sequence[str] = (),
            limit: int | None = None) -> pd.DataFrame:
    """Shipments planned, arrived, on time and the on-time share, grouped ``by`` dimensions of
    :data:`ON_TIME_DIMENSIONS` (none: one total row). Ordered by the dimensions when one is the
    month, else by arrived shipments, most first; ``limit`` keeps the first rows."""
    unknown = [d for d in by if d not in ON_TIME_DIMENSIONS]
    if unknown:
        raise ValueError(f"on_time cannot group by {unknown}; choose from {ON_TIME_DIMENSIONS}")
    source = ON_TIME_PER_SHIPMENT if filters.clients else ON_TIME_MART
    where, params = _where(filters, source)
    dims = ", ".join(by)
    figures = (
        "CAST(coalesce(sum(planned), 0) AS BIGINT) AS shipments_planned, "
        "CAST(coalesce(sum(arrived), 0) AS BIGINT) AS shipments_arrived, "
        "CAST(coalesce(sum(on_time), 0) AS BIGINT) AS shipments_on_time, "
        "sum(on_time) / nullif(sum(arrived), 0) AS on_time_share"
    )
    select = f"SELECT {dims + ', ' if dims else ''}{figures} FROM ({source.sql}) {where}"
    if not by:
        return _df(con, select, params)
    order = dims if "arrival_month" in by else f"shipments_arrived DESC, {dims}"
    sql = f"{select} GROUP BY {dims} ORDER BY {order} NULLS LAST"
    if limit is not None:
        sql += " LIMIT ?"
        params.append(int(limit))
    return _df(con, sql, params)


# --- transit times --------------------------------------------------------------------------------


def transit_time_by_lane(con: duckdb.DuckDBPyConnection, filters: Filters, limit: int | None = None) -> pd.DataFrame:
    """Per lane: shipments with an actual departure and arrival and the distribution of their transit
    hours (min, quartiles, max, mean); lanes with the most shipments first."""
    where, params = _where(filters, TRANSIT, "transit_hours IS NOT NULL")
    sql = (
        "SELECT lane, count(*) AS shipments, min(transit_hours) AS min_hours, "
        "quantile_cont(transit_hours, 0.25) AS p25_hours, median(transit_hours) AS median_hours, "
        "quantile_cont(transit_hours, 0.75) AS p75_hours, max(transit_hours) AS max_hours, "
        f"avg(transit_hours) AS mean_hours FROM ({TRANSIT.sql}) {where} "
        "GROUP BY lane ORDER BY shipments DESC, lane NULLS LAST"
    )
    if limit is not None:
        sql += " LIMIT ?"
        params.append(int(limit))
    return _df(con, sql, params)


# --- volumes --------------------------------------------------------------------------------------

VOLUME_DIMENSIONS = ("created_month", "lane", "mode_of_transport")


def volumes(con: duckdb.DuckDBPyConnection, filters: Filters, by: Sequence[str] = (),
            limit: int | None = None) -> pd.DataFrame:
    """Shipments, total gross weight and total volume grouped ``by`` dimensions of
    :data:`VOLUME_DIMENSIONS` (none: one total row, with the open shipments too). Ordered by month
    when grouped by it, else by shipments, most first."""
    unknown = [d for d in by if d not in VOLUME_DIMENSIONS]
    if unknown:
        raise ValueError(f"volumes cannot group by {unknown}; choose from {VOLUME_DIMENSIONS}")
    where, params = _where(filters, SHIPMENTS)
    dims = ", ".join(by)
    figures = (
        "count(*) AS shipments, coalesce(sum(total_gross_weight), 0) AS gross_weight, "
        "coalesce(sum(total_volume), 0) AS volume"
    )
    if not by:
        figures += ", count(*) FILTER (WHERE NOT is_closed) AS open_shipments"
        return _df(con, f"SELECT {figures} FROM ({SHIPMENTS.sql}) {where}", params)
    order = f"{dims}, shipments DESC" if "created_month" in by else f"shipments DESC, {dims}"
    sql = f"SELECT {dims}, {figures} FROM ({SHIPMENTS.sql}) {where} GROUP BY {dims} ORDER BY {order} NULLS LAST"
    if limit is not None:
        sql += " LIMIT ?"
        params.append(int(limit))
    return _df(con, sql, params)


# --- open shipments -------------------------------------------------------------------------------

NO_PENDING_MILESTONE = "(none planned)"


def open_by_next_milestone(con: duckdb.DuckDBPyConnection, filters: Filters) -> pd.DataFrame:
    """Open (not closed) shipments by their next milestone: the earliest planned milestone without an
    actual (by planned instant, a date-only plan at midnight UTC of its date; ties by event code).
    Open shipments with no such milestone count under :data:`NO_PENDING_MILESTONE`."""
    where, params = _where(filters, SHIPMENTS, "NOT is_closed")
    sql = f"""
        WITH open_shipments AS (SELECT shipment_id FROM ({SHIPMENTS.sql}) {where}),
        pending AS (
            SELECT m.shipment_id, m.event_code,
                   coalesce(m.planned_at, timezone('UTC', CAST(m.planned_date AS TIMESTAMP))) AS planned_for
            FROM analytics.fct_shipment_milestones m
            JOIN open_shipments o ON o.shipment_id = m.shipment_id
            WHERE m.has_planned AND NOT m.has_actual
        ),
        next_milestone AS (
            SELECT shipment_id, event_code FROM pending
            QUALIFY row_number() OVER (PARTITION BY shipment_id ORDER BY planned_for, event_code) = 1
        )
        SELECT coalesce(n.event_code, ?) AS next_milestone, count(*) AS open_shipments
        FROM open_shipments o LEFT JOIN next_milestone n ON n.shipment_id = o.shipment_id
        GROUP BY ALL ORDER BY open_shipments DESC, next_milestone
    """
    return _df(con, sql, [*params, NO_PENDING_MILESTONE])


# --- freshness and bad data -----------------------------------------------------------------------


def freshness(con: duckdb.DuckDBPyConnection) -> Freshness:
    """The last run and last success of every stream, and the newest source change held."""
    streams = pd.DataFrame(
        columns=["stream", "last_status", "last_started_at", "last_finished_at", "last_success_at", "error"]
    )
    if has_table(con, SYNC_RUNS.qualified_name):
        runs = SYNC_RUNS.qualified_name
        streams = _df(
            con,
            f"""
            WITH latest AS (SELECT stream, status, started_at, finished_at, error FROM {runs} {LATEST_RUN_PER_STREAM}),
            success AS (SELECT stream, max(finished_at) AS last_success_at FROM {runs}
                        WHERE status = 'success' GROUP BY stream)
            SELECT l.stream, l.status AS last_status, l.started_at AS last_started_at,
                   l.finished_at AS last_finished_at, s.last_success_at, l.error
            FROM latest l LEFT JOIN success s ON s.stream = l.stream
            ORDER BY l.stream = ? DESC, l.stream
            """,
            [MAIN_STREAM],
        )
    newest = None
    if has_table(con, RAW_SHIPMENTS.qualified_name):
        row = con.execute(f"SELECT max(last_modified_at) FROM {RAW_SHIPMENTS.qualified_name}").fetchone()
        newest = _utc(row[0] if row else None)
    main = streams[streams["stream"] == MAIN_STREAM]
    last_sync = _utc(main["last_success_at"].iloc[0]) if len(main) else None
    status = str(main["last_status"].iloc[0]) if len(main) else None
    return Freshness(last_sync, status, newest, streams)


def bad_data(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """Per stream: records waiting in the retry queue (quarantined), since when, and values nulled."""
    parts = []
    if has_table(con, QUARANTINE.qualified_name):
        parts.append(
            f"SELECT stream, count(*) AS quarantined, min(first_failed_at) AS failing_since, 0 AS values_nulled "
            f"FROM {QUARANTINE.qualified_name} GROUP BY stream"
        )
    if has_table(con, DATA_PROBLEMS.qualified_name):
        parts.append(
            "SELECT stream, 0, CAST(NULL AS TIMESTAMPTZ), count(*) "
            f"FROM {DATA_PROBLEMS.qualified_name} GROUP BY stream"
        )
    if not parts:
        return pd.DataFrame(columns=["stream", "quarantined", "failing_since", "values_nulled"])
    return _df(
        con,
        "SELECT stream, CAST(sum(quarantined) AS BIGINT) AS quarantined, min(failing_since) AS failing_since, "
        f"CAST(sum(values_nulled) AS BIGINT) AS values_nulled FROM ({' UNION ALL '.join(parts)}) "
        "GROUP BY stream ORDER BY stream",
    )


def _utc(value: Any) -> dt.datetime | None:
    if value is None or value is pd.NaT or (isinstance(value, float) and pd.isna(value)):
        return None
    if isinstance(value, pd.Timestamp):
        value = value.to_pydatetime()
    if not isinstance(value, dt.datetime):
        return None
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


# --- one page load --------------------------------------------------------------------------------

TOP = 10
"""Lanes and carriers shown in the ranked views (the most arrived or moved first)."""


@dataclass(frozen=True)
class PageData:
    """Everything one page load shows, read in one short connection."""

    filters: Filters
    on_time_total: pd.DataFrame
    on_time_by_month_mode: pd.DataFrame
    on_time_by_month: pd.DataFrame
    on_time_by_lane: pd.DataFrame
    on_time_by_carrier: pd.DataFrame
    transit_by_lane: pd.DataFrame
    volume_total: pd.DataFrame
    volume_by_month_lane: pd.DataFrame
    volume_by_month: pd.DataFrame
    volume_by_lane: pd.DataFrame
    open_by_milestone: pd.DataFrame
    freshness: Freshness
    bad_data: pd.DataFrame


def load_page(con: duckdb.DuckDBPyConnection, filters: Filters) -> PageData:
    return PageData(
        filters=filters,
        on_time_total=on_time(con, filters),
        on_time_by_month_mode=on_time(con, filters, ("arrival_month", "mode_of_transport")),
        on_time_by_month=on_time(con, filters, ("arrival_month",)),
        on_time_by_lane=on_time(con, filters, ("lane",), limit=TOP),
        on_time_by_carrier=on_time(con, filters, ("carrier_name",), limit=TOP),
        transit_by_lane=transit_time_by_lane(con, filters, limit=TOP),
        volume_total=volumes(con, filters),
        volume_by_month_lane=volumes(con, filters, ("created_month", "lane")),
        volume_by_month=volumes(con, filters, ("created_month",)),
        volume_by_lane=volumes(con, filters, ("lane",), limit=TOP),
        open_by_milestone=open_by_next_milestone(con, filters),
        freshness=freshness(con),
        bad_data=bad_data(con),
    )
