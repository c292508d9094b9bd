"""The dashboard page (Streamlit): ``freight-pipeline dashboard`` runs ``streamlit run`` on this file.

Thin: it reads the filters from the sidebar (and the URL: ``?mode=SEA&client=ACME&from=2026-01&to=2026-06``
opens a filtered page), loads everything in one short read-only connection
(:func:`queries.load_page`), then lays it out: metric tiles, one Altair chart per view, and every
chart's figures again as a small table (``st.table``). Each part sits in a container with a key
(CSS class ``st-key-<key>``) so a browser test can find it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import duckdb
import pandas as pd
import streamlit as st

from freight_pipeline.config import load_settings
from freight_pipeline.dashboard import charts, display, queries, sources
from freight_pipeline.dashboard.display import count, decimal, instant, label, month, share, whole
from freight_pipeline.lake.backend import storage_of
from freight_pipeline.lake.connect import LakeUnavailable
from freight_pipeline.text import one_line

TITLE = "Freight shipments"
PERIOD_HELP = (
    "On-time: month of the planned arrival. Transit times: month of the actual arrival. "
    "Volumes and open shipments: month the shipment was created (UTC). "
    "ETA accuracy and revisions: month of the actual arrival."
)
# Keys of the ETA section's choosers (their values live in st.session_state).
ETA_HORIZON = "eta-horizon"
ETA_SHIPMENT = "eta-shipment"
TABLE_CHOICE = "described-table"  # the "Tables and columns" section's (no docstring: Streamlit shows strings)


def main() -> None:
    st.set_page_config(page_title=TITLE, layout="wide", initial_sidebar_state="expanded")
    st.title(TITLE)
    try:
        settings = load_settings()  # this page is a process of its own: it reads its configuration
        data_dir = settings.storage.data_dir.resolve()
        backend = storage_of(settings)
    except ValueError as exc:  # BadSettings, LakeConfigError
        st.error(str(exc))
        return
    try:
        with sources.open_warehouse(data_dir, backend) as con:
            options = sources.filter_options(con)
            filters = sidebar(options)
            choice = queries.EtaChoice(_chosen(ETA_HORIZON), _chosen(ETA_SHIPMENT))
            table = st.session_state.get(TABLE_CHOICE)
            page = queries.load_page(con, filters, choice, table if isinstance(table, str) else None)
    except (sources.NoWarehouse, sources.MissingMarts, LakeUnavailable) as exc:
        st.error(str(exc))
        if isinstance(exc, sources.NoWarehouse):  # nothing published: maybe because every run so far failed
            _failed_warnings(sources.latest_runs(data_dir))
        return
    except duckdb.Error as exc:
        st.error(f"cannot read the published warehouse {backend.published_where(data_dir)}: "
                 f"{one_line(str(exc))}")
        return
    st.caption(
        f"Published warehouse {backend.published_where(data_dir)} (read-only; each page load reads the "
        f"latest publish). Page read at {instant(dt.datetime.now(dt.UTC))}."
    )
    _failed_warnings(sources.latest_runs(data_dir, page.freshness.streams))
    tiles(page)
    on_time_section(page)
    transit_section(page)
    volumes_section(page)
    open_section(page)
    eta_section(page)
    freshness_section(page)
    bad_data_section(page)
    tables_section(page)


def _failed_warnings(streams: pd.DataFrame) -> None:
    """A warning per stream whose latest run failed (:func:`display.failed_streams`), at the top of the page."""
    warnings = display.failed_streams(streams)
    if warnings:
        with st.container(key="failed-runs"):
            for warning in warnings:
                st.warning(display.literal(one_line(warning, 400)))


# --- filters --------------------------------------------------------------------------------------


def sidebar(options: sources.FilterOptions) -> sources.Filters:
    """The filter widgets, started from the URL's query parameters; the URL follows the choice."""
    params = st.query_params
    st.sidebar.header("Filters")
    modes = st.sidebar.multiselect(
        "Mode of transport", options.modes, default=_known(params.get_all("mode"), options.modes),
        placeholder="all modes", key="modes",
    )
    clients = st.sidebar.multiselect(
        "Client", options.clients, default=_known(params.get_all("client"), options.clients),
        placeholder="all clients", key="clients",
    )
    months = [month(m) for m in options.months]
    month_from = month_to = None
    if len(months) >= 2:
        start = params.get("from") if params.get("from") in months else months[0]
        end = params.get("to") if params.get("to") in months else months[-1]
        start, end = st.sidebar.select_slider(
            "Period (month)", months, value=(start, end), key="period", help=PERIOD_HELP
        )
        # the whole range means no period filter, so rows without a month (no creation instant) stay in
        month_from = None if start == months[0] else options.months[months.index(start)]
        month_to = None if end == months[-1] else options.months[months.index(end)]
    elif months:
        st.sidebar.caption(f"Period: {months[0]} (the only month with data)")
    st.query_params.from_dict(
        {k: v for k, v in {"mode": modes, "client": clients,
                           "from": month(month_from) if month_from else None,
                           "to": month(month_to) if month_to else None}.items() if v}
    )
    st.sidebar.caption(PERIOD_HELP)
    return sources.Filters(tuple(modes), tuple(clients), month_from, month_to)


def _known(values: Sequence[str], choices: Sequence[str]) -> list[str]:
    return [v for v in values if v in choices]


# --- sections -------------------------------------------------------------------------------------


# Six tiles in a row: values a size smaller than Streamlit's, so "3 h 30 min" is not cut short.
# (No bare strings at module level here: Streamlit's "magic" would print them on the page.)
TILE_STYLE = "<style>.st-key-tiles [data-testid='stMetricValue'] { font-size: 1.6rem; }</style>"


def tiles(page: queries.PageData) -> None:
    now = dt.datetime.now(dt.UTC)
    total = page.on_time_total.iloc[0]
    volume = page.volume_total.iloc[0]
    fresh = page.freshness
    quarantined = int(page.bad_data["quarantined"].sum()) if len(page.bad_data) else 0
    nulled = int(page.bad_data["values_nulled"].sum()) if len(page.bad_data) else 0
    with st.container(key="tiles"):
        st.html(TILE_STYLE)
        columns = st.columns(6)
        columns[0].metric("On-time share", share(total["on_time_share"]),
                          help=f"of {count(total['shipments_arrived'])} arrived shipments with a planned arrival")
        columns[1].metric("Shipments", count(volume["shipments"]), help="shipments created in the period")
        columns[2].metric("Open shipments", count(volume["open_shipments"]), help="of those, not closed")
        columns[3].metric("Last sync", _ago(fresh.sync_age(now)),
                          delta=instant(fresh.last_sync_at), delta_color="off", delta_arrow="off",
                          help=f"newest successful run of the {sources.MAIN_STREAM} stream "
                               f"(latest run: {fresh.last_run_status or 'none'})")
        columns[4].metric("Source lag", display.duration(fresh.source_lag(now)),
                          help=f"now minus the newest source change held ({instant(fresh.newest_source_change)})")
        columns[5].metric("Quarantined records", count(quarantined), delta=f"{count(nulled)} values nulled",
                          delta_color="off", delta_arrow="off",
                          help="records waiting in the retry queue (freight_meta.quarantine)")


def _ago(age: dt.timedelta | None) -> str:
    return "never" if age is None else f"{display.duration(age)} ago"


def _table(key: str, frame: pd.DataFrame) -> None:
    with st.container(key=key):
        st.table(display.literal_table(frame), hide_index=True)


ON_TIME_FIGURES: list[display.Column] = [
    ("shipments_arrived", "arrived", count),
    ("shipments_on_time", "on time", count),
    ("on_time_share", "on-time share", share),
]


def on_time_section(page: queries.PageData) -> None:
    with st.container(key="on-time"):
        st.subheader("On-time arrivals")
        st.caption("Arrived shipments whose actual arrival at the port of discharge was no later than planned "
                   "plus the tolerance (analytics.fct_on_time_performance).")
        st.altair_chart(charts.on_time_by_month(page.on_time_by_month_mode), width="stretch")
        _table("table-on-time-month-mode", display.on_time_pivot(page.on_time_by_month_mode, page.on_time_by_month))
        left, right = st.columns(2)
        with left:
            st.altair_chart(charts.ranked_share(page.on_time_by_lane, "lane", f"On-time share, top {queries.TOP} "
                                                "lanes by arrivals"), width="stretch")
            _table("table-on-time-lane", display.table(page.on_time_by_lane, [("lane", "lane", label),
                                                                               *ON_TIME_FIGURES]))
        with right:
            st.altair_chart(charts.ranked_share(page.on_time_by_carrier, "carrier_name", f"On-time share, top "
                                                f"{queries.TOP} carriers by arrivals"), width="stretch")
            _table("table-on-time-carrier", display.table(page.on_time_by_carrier, [
                ("carrier_name", "carrier", label), *ON_TIME_FIGURES]))


def transit_section(page: queries.PageData) -> None:
    with st.container(key="transit"):
        st.subheader("Transit times")
        st.caption(f"Hours from the actual departure at the port of loading to the actual arrival at the port "
                   f"of discharge, top {queries.TOP} lanes by shipments (analytics.fct_transit_times).")
        st.altair_chart(charts.transit_distribution(page.transit_by_lane), width="stretch")
        hours = [(f"{stat}_hours", stat, decimal) for stat in ("min", "p25", "median", "p75", "max", "mean")]
        _table("table-transit", display.table(page.transit_by_lane, [
            ("lane", "lane", label), ("shipments", "shipments", count), *hours]))


VOLUME_FIGURES: list[display.Column] = [
    ("shipments", "shipments", count),
    ("gross_weight", "gross weight", whole),
    ("volume", "volume (m³)", decimal),
]


def volumes_section(page: queries.PageData) -> None:
    with st.container(key="volumes"):
        st.subheader("Volumes")
        st.caption("Shipments, total gross weight and total volume by month created and lane "
                   "(analytics.fct_shipments).")
        st.altair_chart(charts.volumes_by_month(page.volume_by_month_lane), width="stretch")
        left, right = st.columns(2)
        with left:
            _table("table-volume-month", display.table(page.volume_by_month, [
                ("created_month", "month", month), *VOLUME_FIGURES]))
        with right:
            _table("table-volume-lane", display.table(page.volume_by_lane, [("lane", "lane", label),
                                                                             *VOLUME_FIGURES]))


def open_section(page: queries.PageData) -> None:
    with st.container(key="open"):
        st.subheader("Open shipments by next milestone")
        st.caption("Shipments not closed, by their earliest planned milestone that has no actual yet "
                   "(analytics.fct_shipment_milestones).")
        left, right = st.columns([2, 1])
        with left:
            st.altair_chart(charts.open_by_milestone(page.open_by_milestone), width="stretch")
        with right:
            _table("table-open", display.table(page.open_by_milestone, [
                ("next_milestone", "next milestone", label), ("open_shipments", "open shipments", count)]))


def _chosen(key: str) -> int | None:
    """The value a chooser of the page holds from the last run (None before the first)."""
    value = st.session_state.get(key)
    return value if isinstance(value, int) else None


def _forget_stale(key: str, options: Sequence[object]) -> None:
    """Drop a chooser's value that is no longer among its options (another filter, a new publish)."""
    if key in st.session_state and st.session_state[key] not in options:
        del st.session_state[key]


ETA_HORIZON_TABLE: list[display.Column] = [
    ("mode_of_transport", "mode", label),
    ("horizon_days", "horizon", display.days_before),
    ("arrivals", "arrivals", count),
    ("scored", "scored", count),
    ("mean_abs_error_hours", "mean abs. error (h)", decimal),
    ("mean_error_hours", "mean error (h)", display.signed),
    ("within_share", f"within ±{sources.WITHIN_HOURS} h", share),
]
ETA_RANKED_FIGURES: list[display.Column] = [
    ("shipments_scored", "scored", count),
    ("mean_abs_error_hours", "mean abs. error (h)", decimal),
    ("mean_error_hours", "mean error (h)", display.signed),
    ("within_share", f"within ±{sources.WITHIN_HOURS} h", share),
]
ETA_SHIPMENT_TABLE: list[display.Column] = [
    ("shipment_id", "shipment", label),
    ("mode_of_transport", "mode", label),
    ("lane", "lane", label),
    ("carrier_name", "carrier", label),
    ("estimate_versions", "estimates seen", count),
    ("revisions", "revisions", count),
    ("total_slip_hours", "total slip (h)", display.signed),
    ("actual_at", "actual arrival", instant),
]
ETA_VERSIONS_TABLE: list[display.Column] = [
    ("version", "version", count),
    ("valid_from", "known from", instant),
    ("estimated_at", "estimated arrival", instant),
    ("moved_hours", "moved (h)", display.change),
    ("error_hours", "error (h)", display.signed),
]


def eta_section(page: queries.PageData) -> None:
    with st.container(key="eta"):
        st.subheader("ETA accuracy")
        st.caption(
            "How far the estimated arrival at the port of discharge was from the actual arrival, h days "
            "before it: the estimate the pipeline had seen at that instant, scored against what happened "
            "(analytics.fct_eta_accuracy; the horizons are the dbt var eta_horizons_days). Error = estimate "
            "minus actual: positive when the shipment came early."
        )
        if page.eta_missing:
            st.info(page.eta_missing)
            return
        note = display.eta_note(page.eta_by_horizon)
        if note:
            st.info(note)
        else:
            st.altair_chart(charts.eta_error_by_horizon(page.eta_by_horizon), width="stretch")
            _table("table-eta-horizon", display.table(page.eta_by_horizon, ETA_HORIZON_TABLE))
            _eta_rankings(page)
        _eta_revisions(page)


def _eta_rankings(page: queries.PageData) -> None:
    horizons = queries.scored_horizons(page.eta_by_horizon)
    _forget_stale(ETA_HORIZON, horizons)
    st.selectbox(
        "Rank lanes and carriers by the estimate in force", horizons, index=horizons.index(page.eta_horizon),
        format_func=display.days_before, key=ETA_HORIZON,
        help=f"Most accurate first (smallest mean absolute error), top {queries.TOP}; only lanes and carriers "
             f"with at least {queries.RANK_MIN_SCORED} scored arrivals at that horizon.",
    )
    left, right = st.columns(2)
    for column, frame, dimension, heading, what in (
        (left, page.eta_by_lane, "lane", "lane", "lanes"),
        (right, page.eta_by_carrier, "carrier_name", "carrier", "carriers"),
    ):
        with column:
            if not len(frame):
                st.caption(f"No {heading} has {queries.RANK_MIN_SCORED} or more scored arrivals at this horizon.")
                continue
            title = f"Most accurate {what}, {display.days_before(page.eta_horizon)}"
            st.altair_chart(charts.ranked_error(frame, dimension, title), width="stretch")
            _table(f"table-eta-{heading}", display.table(frame, [(dimension, heading, label), *ETA_RANKED_FIGURES]))


def _eta_revisions(page: queries.PageData) -> None:
    st.markdown("**Revisions of one shipment's arrival estimate**")
    if page.eta_shipment_id is None:
        st.info("No arrival estimate here has moved yet (analytics.fct_estimate_revisions).")
        return
    rows = {int(r.shipment_id): r for r in page.eta_shipments.itertuples()}
    ids = list(rows)
    _forget_stale(ETA_SHIPMENT, ids)
    st.selectbox(
        "Shipment", ids, index=ids.index(page.eta_shipment_id), format_func=lambda i: display.shipment_choice(rows[i]),
        key=ETA_SHIPMENT, help="Shipments whose arrival estimate moved, the most revisions first.",
    )
    st.caption("Every arrival estimate of the shipment the pipeline saw, from when it became known "
               "(freight_history.event_versions); a revision is an estimate that differs from the one before "
               "(analytics.fct_estimate_revisions).")
    _table("table-eta-shipment", display.table(
        page.eta_shipments[page.eta_shipments["shipment_id"] == page.eta_shipment_id], ETA_SHIPMENT_TABLE))
    left, right = st.columns([3, 2])
    with left:
        st.altair_chart(charts.estimate_versions(page.eta_versions), width="stretch")
    with right:
        _table("table-eta-versions", display.table(page.eta_versions, ETA_VERSIONS_TABLE))


def freshness_section(page: queries.PageData) -> None:
    fresh = page.freshness
    with st.container(key="freshness"):
        st.subheader("Data freshness")
        st.markdown(
            f"Last successful sync of **{sources.MAIN_STREAM}**: **{instant(fresh.last_sync_at)}**; "
            f"newest source change held: **{instant(fresh.newest_source_change)}**; the events of the open "
            f"shipment read longest ago ({fresh.open_shipments:,} open): **{instant(fresh.oldest_open_events_read)}**."
        )
        if len(fresh.streams):
            _table("table-freshness", display.table(fresh.streams, [
                ("stream", "stream", label), ("last_status", "last run", label),
                ("last_started_at", "started", instant), ("last_finished_at", "finished", instant),
                ("last_success_at", "last success", instant), ("error", "error", _error)]))
        else:
            st.info("No sync run is recorded in this warehouse (freight_meta.sync_runs).")


def _error(value: object) -> str:
    text = display.label(value)
    return "" if text == display.NO_VALUE else one_line(text, 120)


def bad_data_section(page: queries.PageData) -> None:
    with st.container(key="bad-data"):
        st.subheader("Quarantine and data problems")
        if not len(page.bad_data):
            st.success("No record waits in the retry queue and no value was nulled.")
            return
        st.caption("Records that failed and wait for a retry (freight_meta.quarantine) and values nulled because "
                   "they could not be converted (freight_meta.data_problems), per stream.")
        _table("table-bad-data", display.table(page.bad_data, [
            ("stream", "stream", label), ("quarantined", "quarantined", count),
            ("failing_since", "failing since", instant), ("values_nulled", "values nulled", count)]))


COLUMNS_TABLE: list[display.Column] = [("column", "column", label), ("type", "type", label),
                                       ("description", "description", label)]


def tables_section(page: queries.PageData) -> None:
    """Every published table's description, and the columns' of the one chosen: the catalog's comments."""
    with st.container(key="tables"):
        st.subheader("Tables and columns")
        st.caption("What each table and column of the published warehouse holds, as its catalog describes them "
                   "(the descriptions DBeaver, Metabase and Superset show; docs/connecting.md).")
        if page.table is None:
            st.info("No table is published yet.")
            return
        listed = list(page.tables["table"])
        _forget_stale(TABLE_CHOICE, listed)
        st.selectbox("Table", listed, index=listed.index(page.table), key=TABLE_CHOICE)
        described = page.tables.set_index("table")["description"]
        st.markdown(f"**{page.table}**: {described[page.table] or '(no description)'}")
        _table("table-columns", display.table(page.table_columns, COLUMNS_TABLE))


if __name__ == "__main__":
    main()
