"""The dashboard's charts as Altair (Vega-Lite) specifications, built from the query DataFrames.

Plain functions, no Streamlit: each takes a DataFrame of :mod:`freight_pipeline.dashboard.queries`
and returns a chart. Months are shown as ``YYYY-MM`` text on an ordinal axis and null dimension
values as ``(none)``, as in the tables beside the charts.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from freight_pipeline.dashboard import display

OTHER_LANES = "other lanes"
STACKED_LANES = 8
"""Lanes drawn one by one in the volume chart (most shipments first); the rest are stacked as one."""
HEIGHT = 320
"""Pixels of a chart over months. Streamlit fits the whole chart (title and axes too) into the height."""
ROW = 24
"""Pixels per bar of the charts with one bar (or box) per lane, carrier or milestone, besides ``FRAME``."""
FRAME = 100


def _rows_height(rows: int) -> int:
    return FRAME + ROW * max(rows, 3)


def _months(frame: pd.DataFrame, column: str) -> pd.DataFrame:
    frame = frame.copy()
    frame["month"] = [display.month(v) for v in frame[column]]
    return frame


def _labels(frame: pd.DataFrame, column: str) -> pd.DataFrame:
    frame = frame.copy()
    frame[column] = [display.label(v) for v in frame[column]]
    return frame


def on_time_by_month(frame: pd.DataFrame) -> alt.Chart:
    """On-time share per month of planned arrival, one line per mode (``on_time(by=month, mode)``)."""
    data = _months(frame, "arrival_month")
    data = data[data["shipments_arrived"] > 0]
    return (
        alt.Chart(data[["month", "mode_of_transport", "on_time_share", "shipments_arrived", "shipments_on_time"]])
        .mark_line(point=True)
        .encode(
            x=alt.X("month:O", title="month of planned arrival", axis=alt.Axis(labelAngle=0)),
            y=alt.Y("on_time_share:Q", title="on-time share", axis=alt.Axis(format="%"),
                    scale=alt.Scale(domain=[0, 1])),
            color=alt.Color("mode_of_transport:N", title="mode"),
            tooltip=["month", "mode_of_transport", alt.Tooltip("on_time_share:Q", format=".1%"),
                     "shipments_arrived", "shipments_on_time"],
        )
        .properties(height=HEIGHT, title="On-time share by month and mode")
    )


def ranked_share(frame: pd.DataFrame, dimension: str, title: str) -> alt.Chart:
    """On-time share per lane or carrier (``on_time(by=dimension)``), in the frame's order."""
    data = _labels(frame, dimension)
    data = data[data["shipments_arrived"] > 0]
    return (
        alt.Chart(data[[dimension, "on_time_share", "shipments_arrived", "shipments_on_time"]])
        .mark_bar()
        .encode(
            y=alt.Y(f"{dimension}:N", sort=list(data[dimension]), title=None),
            x=alt.X("on_time_share:Q", title="on-time share", axis=alt.Axis(format="%"),
                    scale=alt.Scale(domain=[0, 1])),
            tooltip=[dimension, alt.Tooltip("on_time_share:Q", format=".1%"), "shipments_arrived",
                     "shipments_on_time"],
        )
        .properties(height=_rows_height(len(data)), title=title)
    )


def transit_distribution(frame: pd.DataFrame) -> alt.LayerChart:
    """Per lane a box from the 25th to the 75th percentile of transit hours, whiskers from min to
    max, a tick at the median (``transit_time_by_lane``)."""
    data = _labels(frame, "lane")
    order = list(data["lane"])
    base = alt.Chart(data).encode(y=alt.Y("lane:N", sort=order, title=None))
    tooltip = ["lane", "shipments", "min_hours", "p25_hours", "median_hours", "p75_hours", "max_hours"]
    whiskers = base.mark_rule().encode(x=alt.X("min_hours:Q", title="transit hours"), x2="max_hours:Q")
    box = base.mark_bar(size=14).encode(x="p25_hours:Q", x2="p75_hours:Q", tooltip=tooltip)
    median = base.mark_tick(color="white", size=14, thickness=2).encode(x="median_hours:Q")
    return alt.layer(whiskers, box, median).properties(
        height=_rows_height(len(data)), title="Transit hours per lane (min, quartiles, max)"
    )


def volumes_by_month(frame: pd.DataFrame) -> alt.Chart:
    """Shipments per month created, stacked by lane (``volumes(by=month, lane)``); lanes beyond the
    :data:`STACKED_LANES` busiest are stacked together as :data:`OTHER_LANES`."""
    data = _labels(_months(frame, "created_month"), "lane")
    busiest = data.groupby("lane")["shipments"].sum().sort_values(ascending=False, kind="stable")
    kept = set(busiest.index[:STACKED_LANES])
    data["lane"] = [lane if lane in kept else OTHER_LANES for lane in data["lane"]]
    data = data.groupby(["month", "lane"], as_index=False)[["shipments", "gross_weight", "volume"]].sum()
    return (
        alt.Chart(data)
        .mark_bar()
        .encode(
            x=alt.X("month:O", title="month created", axis=alt.Axis(labelAngle=0)),
            y=alt.Y("shipments:Q", title="shipments", stack="zero"),
            color=alt.Color("lane:N", title="lane"),
            tooltip=["month", "lane", "shipments", alt.Tooltip("gross_weight:Q", format=",.0f"),
                     alt.Tooltip("volume:Q", format=",.1f")],
        )
        .properties(height=HEIGHT, title="Shipments by month created and lane")
    )


def open_by_milestone(frame: pd.DataFrame) -> alt.Chart:
    """Open shipments per next milestone (``open_by_next_milestone``)."""
    return (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            y=alt.Y("next_milestone:N", sort=list(frame["next_milestone"]), title=None),
            x=alt.X("open_shipments:Q", title="open shipments"),
            tooltip=["next_milestone", "open_shipments"],
        )
        .properties(height=_rows_height(len(frame)), title="Open shipments by next milestone")
    )


def eta_error_by_horizon(frame: pd.DataFrame) -> alt.Chart:
    """Mean absolute error of the arrival estimate per horizon, one line per mode, the longest horizon
    on the left (``eta_by_horizon``; horizons nothing was scored at are left out)."""
    data = frame[frame["scored"] > 0]
    order = sorted({int(h) for h in data["horizon_days"]}, reverse=True)
    return (
        alt.Chart(data[["mode_of_transport", "horizon_days", "scored", "mean_abs_error_hours", "mean_error_hours",
                        "within_share"]])
        .mark_line(point=True)
        .encode(
            x=alt.X("horizon_days:O", sort=order, title="days before the actual arrival",
                    axis=alt.Axis(labelAngle=0)),
            y=alt.Y("mean_abs_error_hours:Q", title="mean absolute error (hours)"),
            color=alt.Color("mode_of_transport:N", title="mode"),
            tooltip=["mode_of_transport", "horizon_days", "scored",
                     alt.Tooltip("mean_abs_error_hours:Q", format=".1f"),
                     alt.Tooltip("mean_error_hours:Q", format="+.1f"),
                     alt.Tooltip("within_share:Q", format=".1%")],
        )
        .properties(height=HEIGHT, title="Arrival estimate error by horizon and mode")
    )


def ranked_error(frame: pd.DataFrame, dimension: str, title: str) -> alt.Chart:
    """Mean absolute error per lane or carrier (``eta_ranked``), in the frame's order (most accurate first)."""
    data = _labels(frame, dimension)
    return (
        alt.Chart(data[[dimension, "shipments_scored", "mean_abs_error_hours", "within_share"]])
        .mark_bar()
        .encode(
            y=alt.Y(f"{dimension}:N", sort=list(data[dimension]), title=None),
            x=alt.X("mean_abs_error_hours:Q", title="mean absolute error (hours)"),
            tooltip=[dimension, "shipments_scored", alt.Tooltip("mean_abs_error_hours:Q", format=".1f"),
                     alt.Tooltip("within_share:Q", format=".1%")],
        )
        .properties(height=_rows_height(len(data)), title=title)
    )


def estimate_versions(versions: pd.DataFrame) -> alt.LayerChart:
    """One shipment's arrival estimates as a step line over the instants they became known
    (``estimate_versions``), and its actual arrival as a dashed rule once it happened. Times in UTC."""
    utc = alt.Scale(type="utc")
    data = versions[["version", "valid_from", "estimated_at", "moved_hours"]]
    base = alt.Chart(data).encode(
        x=alt.X("valid_from:T", scale=utc, title="estimate known from (UTC)"),
        y=alt.Y("estimated_at:T", scale=utc, title="estimated arrival (UTC)"),
    )
    line = base.mark_line(interpolate="step-after")
    points = base.mark_point(filled=True, size=60).encode(
        tooltip=["version", _utc_tooltip("valid_from", "known from"), _utc_tooltip("estimated_at", "estimate"),
                 alt.Tooltip("moved_hours:Q", format="+.1f", title="moved (h)")],
    )
    layers: list[alt.Chart] = [line, points]
    actual = versions["actual_at"].dropna()
    if len(actual):
        rule = pd.DataFrame({"actual_at": [actual.iloc[0]], "what": ["actual arrival"]})
        layers.append(
            alt.Chart(rule).mark_rule(strokeDash=[6, 4], color="firebrick").encode(
                y=alt.Y("actual_at:T", scale=utc), tooltip=["what", _utc_tooltip("actual_at", "when")]
            )
        )
    return alt.layer(*layers).properties(height=HEIGHT, title="Arrival estimate by when it became known")


def _utc_tooltip(field: str, title: str) -> alt.Tooltip:
    return alt.Tooltip(f"{field}:T", format="%Y-%m-%d %H:%M UTC", formatType="utc", title=title)
