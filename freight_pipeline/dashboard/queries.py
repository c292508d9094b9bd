"""What the dashboard shows, as plain functions over a read-only connection to the PUBLISHED warehouse.

Every function takes an open DuckDB connection (:func:`.sources.open_warehouse`) and returns a pandas
DataFrame (or a small dataclass); the Streamlit page only lays them out. Filters (:class:`Filters`:
modes, clients, a month range) go into the SQL as parameters, never as text.

Reading never blocks the pipeline: :func:`.sources.open_warehouse` opens ``$FREIGHT_DATA_DIR/warehouse.duckdb``
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
  (values nulled) per stream;
* ETA accuracy of the arrival (``POD_ARRIVAL``): the mean absolute error of the estimate in force h
  days before the actual arrival, per horizon and mode, and lanes and carriers ranked by it at one
  horizon (``fct_eta_accuracy``, joined to ``fct_shipments`` for the client); the shipments whose
  arrival estimate moved (``fct_estimate_revisions``) and, for one of them, every estimate the
  pipeline saw (``freight_history.event_versions``, the rows that mart counts).

Modes are the on-time mart's buckets everywhere: SEA, AIR, RD, RL, and UNKNOWN for any other mode
(or none) the service sent, so one mode filter means the same on every view.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import duckdb
import pandas as pd

from freight_pipeline.dashboard.sources import (
    ETA,
    ETA_EVENT,
    ETA_MARTS,
    ETA_MILESTONE,
    MAIN_STREAM,
    ON_TIME_MART,
    ON_TIME_PER_SHIPMENT,
    REVISIONS,
    SHIPMENTS,
    STREAM_COLUMNS,
    TRANSIT,
    Filters,
    Freshness,
    _df,
    _where,
    has_table,
)
from freight_pipeline.normalize.specs.events_memos import SHIPMENT_EVENTS
from freight_pipeline.normalize.specs.shipments import SHIPMENTS as SHIPMENT_TABLE
from freight_pipeline.warehouse.history import EVENT_VERSIONS
from freight_pipeline.warehouse.meta import (
    DATA_PROBLEMS,
    QUARANTINE,
    RAW_PARTS,
    RAW_SHIPMENTS,
    SYNC_RUNS,
)
from freight_pipeline.warehouse.reads import oldest_part_read
from freight_pipeline.warehouse.run_log import LOADED_SUCCESS, SHOWN_STATUS, current_runs

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
    """The last run and last success of every stream (the runs recorded last: ``run_log.current_runs``; a stream
    switched off neither succeeds nor fails: ``run_log.SHOWN_STATUS``), and the newest source change held."""
    streams = pd.DataFrame(columns=STREAM_COLUMNS)
    if has_table(con, SYNC_RUNS.qualified_name):
        runs = SYNC_RUNS.qualified_name
        streams = _df(
            con,
            f"""
            WITH latest AS (SELECT stream, {SHOWN_STATUS} AS status, started_at, finished_at, error, run_id
                            FROM {current_runs(runs)}),
            success AS (SELECT stream, arg_max(finished_at, rowid) AS last_success_at FROM {runs}
                        WHERE {LOADED_SUCCESS} GROUP BY stream)
            SELECT l.stream, l.status AS last_status, l.started_at AS last_started_at,
                   l.finished_at AS last_finished_at, s.last_success_at, l.error, l.run_id AS last_run_id
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
    open_held, oldest = 0, None
    if has_table(con, RAW_PARTS.qualified_name) and has_table(con, SHIPMENT_TABLE.qualified_name):
        open_held, oldest = oldest_part_read(con, SHIPMENT_EVENTS.name)
    return Freshness(last_sync, status, newest, streams, open_held, _utc(oldest))


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


# --- ETA accuracy ---------------------------------------------------------------------------------

ETA_FIGURES = (
    "count(*) FILTER (WHERE is_scored) AS scored, "
    "avg(abs_error_hours) FILTER (WHERE is_scored) AS mean_abs_error_hours, "
    "avg(error_hours) FILTER (WHERE is_scored) AS mean_error_hours, "
    "count(*) FILTER (WHERE is_within) / nullif(count(*) FILTER (WHERE is_scored), 0) AS within_share"
)
"""Over arrivals at a horizon: how many were scored (an estimate was in force), their mean absolute
and mean signed error in hours, and the share of the scored ones within ``WITHIN_HOURS``."""
RANK_DIMENSIONS = ("lane", "carrier_name")
RANK_MIN_SCORED = 2
"""Lanes and carriers ranked need this many scored arrivals at the horizon (one estimate ranks nothing)."""


def eta_by_horizon(con: duckdb.DuckDBPyConnection, filters: Filters) -> pd.DataFrame:
    """Per mode and horizon (longest first): arrivals, those scored, mean absolute and mean signed
    error in hours, share within ``WITHIN_HOURS``."""
    where, params = _where(filters, ETA)
    return _df(
        con,
        f"SELECT mode_of_transport, horizon_days, count(*) AS arrivals, {ETA_FIGURES} FROM ({ETA.sql}) {where} "
        "GROUP BY mode_of_transport, horizon_days ORDER BY mode_of_transport, horizon_days DESC",
        params,
    )


def eta_ranked(con: duckdb.DuckDBPyConnection, filters: Filters, dimension: str, horizon: int,
               limit: int | None = None, min_scored: int = RANK_MIN_SCORED) -> pd.DataFrame:
    """Lanes or carriers (``dimension``) with at least ``min_scored`` scored arrivals at ``horizon``
    days, the most accurate first (smallest mean absolute error; ties: more arrivals scored, then by
    name). Shipments without a known lane or carrier are left out."""
    if dimension not in RANK_DIMENSIONS:
        raise ValueError(f"eta_ranked cannot rank {dimension!r}; choose from {RANK_DIMENSIONS}")
    where, params = _where(filters, ETA, "horizon_days = ?", f"{dimension} IS NOT NULL")
    params.insert(0, int(horizon))
    sql = (
        f"SELECT {dimension}, count(DISTINCT shipment_id) FILTER (WHERE is_scored) AS shipments_scored, "
        f"{ETA_FIGURES} FROM ({ETA.sql}) {where} GROUP BY {dimension} HAVING scored >= ? "
        f"ORDER BY mean_abs_error_hours, shipments_scored DESC, {dimension}"
    )
    params.append(int(min_scored))
    if limit is not None:
        sql += " LIMIT ?"
        params.append(int(limit))
    return _df(con, sql, params)


def scored_horizons(by_horizon: pd.DataFrame) -> list[int]:
    """The horizons with a scored arrival (of :func:`eta_by_horizon`), longest first."""
    scored = by_horizon[by_horizon["scored"] > 0]
    return sorted({int(h) for h in scored["horizon_days"]}, reverse=True)


def default_horizon(by_horizon: pd.DataFrame) -> int | None:
    """The horizon the rankings open at: the one with the most scored arrivals (ties: the longest);
    None when nothing was scored."""
    totals = by_horizon.groupby("horizon_days")["scored"].sum()
    totals = totals[totals > 0]
    if totals.empty:
        return None
    return int(max(totals.index, key=lambda h: (totals[h], h)))


def revised_shipments(con: duckdb.DuckDBPyConnection, filters: Filters) -> pd.DataFrame:
    """Shipments whose arrival estimate moved at least once, the most revisions first (ties: arrived
    ones first, so the default shows an actual; then more estimates seen, then the lower id): the mart's
    figures of each (``fct_estimate_revisions``)."""
    where, params = _where(filters, REVISIONS, "revisions > 0")
    return _df(
        con,
        "SELECT shipment_id, mode_of_transport, lane, carrier_name, estimate_versions, revisions, "
        "first_estimated_at, last_estimated_at, total_slip_hours, last_revised_at, actual_at "
        f"FROM ({REVISIONS.sql}) {where} "
        "ORDER BY revisions DESC, actual_at IS NULL, estimate_versions DESC, shipment_id",
        params,
    )


def estimate_versions(con: duckdb.DuckDBPyConnection, shipment_id: int) -> pd.DataFrame:
    """Every arrival estimate of ``shipment_id`` the pipeline saw, in the order they became known: the
    ``ESTIMATED`` ``POD_ARRIVAL`` versions of ``freight_history.event_versions`` that carry an instant
    (as ``fct_estimate_revisions`` counts them: event and type compared upper-cased, deleted versions
    are no estimate, nor those of an earlier shipment of a reused id, valid before its ``created_at``).
    Per version: since when and until when it stood, the estimate, whether it moved from the one before
    (a revision) and by how many hours, and its error against the actual arrival (null before the
    shipment arrived)."""
    sql = f"""
        WITH versions AS (
            SELECT v.valid_from, v.valid_to, v.event_at AS estimated_at
            FROM {EVENT_VERSIONS.qualified_name} AS v LEFT JOIN {SHIPMENT_TABLE.qualified_name} AS s USING (shipment_id)
            WHERE v.shipment_id = ? AND upper(trim(v.event)) = ? AND upper(trim(v.type)) = 'ESTIMATED'
                AND NOT v.deleted AND v.event_at IS NOT NULL AND (s.created_at IS NULL OR v.valid_from >= s.created_at)
        ),
        actual AS (
            SELECT max(actual_at) AS actual_at FROM analytics.fct_estimate_revisions
            WHERE shipment_id = ? AND milestone = ?
        ),
        sequenced AS (
            SELECT *, lag(estimated_at) OVER (ORDER BY valid_from, estimated_at) AS previous_estimated_at
            FROM versions
        )
        SELECT row_number() OVER (ORDER BY valid_from, estimated_at) AS version, valid_from, valid_to,
               estimated_at,
               previous_estimated_at IS NOT NULL AND estimated_at <> previous_estimated_at AS is_revision,
               CASE WHEN estimated_at <> previous_estimated_at
                   THEN round((epoch(estimated_at) - epoch(previous_estimated_at)) / 3600.0, 2) END AS moved_hours,
               round((epoch(estimated_at) - epoch(actual.actual_at)) / 3600.0, 2) AS error_hours,
               actual.actual_at
        FROM sequenced CROSS JOIN actual
        ORDER BY valid_from, estimated_at
    """
    return _df(con, sql, [int(shipment_id), ETA_EVENT, int(shipment_id), ETA_MILESTONE])


@dataclass(frozen=True)
class EtaChoice:
    """What the ETA section's own choosers ask for (None: the default; a value the data no longer has
    falls back to it too)."""

    horizon: int | None = None
    """The horizon (days) of the lane and carrier rankings."""
    shipment_id: int | None = None
    """The shipment whose estimate versions are drawn."""


DESCRIBED_SCHEMAS = ("analytics", "freight", "freight_history", "freight_meta")
"""The schemas whose tables the "Tables and columns" section lists (every one of their columns is described)."""
DEFAULT_TABLE = "analytics.fct_shipments"


def described_tables(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """``table`` (``schema.name``) and ``description`` of every table of :data:`DESCRIBED_SCHEMAS`, in order."""
    marks = ", ".join("?" for _ in DESCRIBED_SCHEMAS)
    return con.execute(
        "SELECT schema_name || '.' || table_name AS \"table\", coalesce(comment, '') AS description "
        f"FROM duckdb_tables() WHERE database_name = current_database() AND schema_name IN ({marks}) "
        "ORDER BY schema_name, table_name", list(DESCRIBED_SCHEMAS)).df()


def described_columns(con: duckdb.DuckDBPyConnection, table: str) -> pd.DataFrame:
    """``column``, ``type`` and ``description`` of each column of ``table`` (``schema.name``), in order."""
    schema, _, name = table.partition(".")
    return con.execute(
        "SELECT column_name AS \"column\", data_type AS type, coalesce(comment, '') AS description "
        "FROM duckdb_columns() WHERE database_name = current_database() AND schema_name = ? AND table_name = ? "
        "ORDER BY column_index", [schema, name]).df()


def missing_eta_marts(con: duckdb.DuckDBPyConnection) -> str | None:
    """Why the ETA section cannot be shown (its marts are not in the published warehouse), or None."""
    missing = [name for name in (*ETA_MARTS, EVENT_VERSIONS.qualified_name) if not has_table(con, name)]
    if not missing:
        return None
    return (f"The published warehouse has no {', '.join(missing)}: it was built before the ETA marts. "
            "The next sync's dbt build adds them.")


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
    eta_missing: str | None
    """Why the ETA section cannot be shown (:func:`missing_eta_marts`); None when it can."""
    eta_by_horizon: pd.DataFrame
    eta_horizon: int | None
    """The horizon of the rankings (the choice, or :func:`default_horizon`); None when nothing was scored."""
    eta_by_lane: pd.DataFrame
    eta_by_carrier: pd.DataFrame
    eta_shipments: pd.DataFrame
    """:func:`revised_shipments`: the shipments to choose from."""
    eta_shipment_id: int | None
    """The shipment drawn (the choice, or the one with the most revisions); None when none was revised."""
    eta_versions: pd.DataFrame
    tables: pd.DataFrame
    """:func:`described_tables`."""
    table: str | None
    """The table whose columns are shown (None: no table published)."""
    table_columns: pd.DataFrame
    """:func:`described_columns` of ``table``."""


def load_page(con: duckdb.DuckDBPyConnection, filters: Filters, eta_choice: EtaChoice | None = None,
              table: str | None = None) -> PageData:
    """``table``: the table whose columns the "Tables and columns" section shows (None, or one not published:
    :data:`DEFAULT_TABLE`, else the first)."""
    eta_choice = eta_choice or EtaChoice()
    tables = described_tables(con)
    listed = list(tables["table"])
    table = table if table in listed else (DEFAULT_TABLE if DEFAULT_TABLE in listed else (listed or [None])[0])
    eta_missing = missing_eta_marts(con)
    empty = pd.DataFrame()
    by_horizon, horizon, by_lane, by_carrier, shipments, shipment_id, versions = (
        empty, None, empty, empty, empty, None, empty)
    if eta_missing is None:
        by_horizon = eta_by_horizon(con, filters)
        horizon = (eta_choice.horizon if eta_choice.horizon in scored_horizons(by_horizon)
                   else default_horizon(by_horizon))
        if horizon is not None:
            by_lane = eta_ranked(con, filters, "lane", horizon, limit=TOP)
            by_carrier = eta_ranked(con, filters, "carrier_name", horizon, limit=TOP)
        shipments = revised_shipments(con, filters)
        ids = [int(i) for i in shipments["shipment_id"]]
        shipment_id = eta_choice.shipment_id if eta_choice.shipment_id in ids else (ids[0] if ids else None)
        if shipment_id is not None:
            versions = estimate_versions(con, shipment_id)
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
        eta_missing=eta_missing,
        eta_by_horizon=by_horizon,
        eta_horizon=horizon,
        eta_by_lane=by_lane,
        eta_by_carrier=by_carrier,
        eta_shipments=shipments,
        eta_shipment_id=shipment_id,
        eta_versions=versions,
        tables=tables,
        table=table,
        table_columns=described_columns(con, table) if table else pd.DataFrame(),
    )
