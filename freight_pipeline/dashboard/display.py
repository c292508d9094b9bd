"""How the dashboard writes numbers, instants and durations (plain functions, no Streamlit).

The page shows every figure of a chart in a table too, formatted here; the browser test reads
those tables back and compares them with DuckDB, to the precision written here.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd

from freight_pipeline.warehouse.run_log import INTERRUPTED

MISSING = "n/a"
"""A figure that does not exist (no arrivals, no run yet)."""
NO_VALUE = "(none)"
"""A dimension value that is null (a shipment without a known lane or carrier)."""


def _absent(value: Any) -> bool:
    if value is None or value is pd.NaT:
        return True
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def count(value: Any) -> str:
    """``1,234``."""
    return MISSING if _absent(value) else f"{int(value):,}"


def share(value: Any) -> str:
    """A fraction as a percentage with one decimal: ``0.8754`` -> ``87.5 %``."""
    return MISSING if _absent(value) else f"{float(value) * 100:.1f} %"


def decimal(value: Any, places: int = 1) -> str:
    """``1,234.5`` (hours, cubic metres)."""
    return MISSING if _absent(value) else f"{float(value):,.{places}f}"


def whole(value: Any) -> str:
    """A measure rounded to a whole number: ``12,346`` (kilograms)."""
    return MISSING if _absent(value) else f"{round(float(value)):,}"


def month(value: Any) -> str:
    """``2026-03``."""
    if _absent(value):
        return NO_VALUE
    if isinstance(value, pd.Timestamp):
        value = value.date()
    return f"{value.year:04d}-{value.month:02d}"


def instant(value: Any) -> str:
    """``2026-11-01 08:00 UTC`` (to the minute)."""
    if _absent(value):
        return MISSING
    if isinstance(value, pd.Timestamp):
        value = value.to_pydatetime()
    value = value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)
    return value.strftime("%Y-%m-%d %H:%M UTC")


def duration(value: dt.timedelta | None) -> str:
    """``45 s``, ``12 min``, ``3 h 5 min``, ``2 d 4 h`` (a negative one, from clocks apart, as ``0 s``)."""
    if value is None:
        return MISSING
    seconds = max(0, math.floor(value.total_seconds()))
    if seconds < 60:
        return f"{seconds} s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


def label(value: Any) -> str:
    """A dimension value as text; null as :data:`NO_VALUE`."""
    return NO_VALUE if _absent(value) else str(value)


Column = tuple[str, str, Callable[[Any], str]]
"""(source column, heading, formatter)."""


MARKDOWN_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")
"""Every ASCII punctuation character: each one Markdown (CommonMark) shows as it is when escaped with a backslash."""


def literal(text: str) -> str:
    """``text`` as Markdown that shows it as it is (``st.table`` renders every cell and heading as Markdown: a
    carrier, lane or error from the service with ``*``, ``_``, ``$``, ``[..](..)`` or ``![..](..)`` would show
    as emphasis, a formula, a link or an image fetched by the reader's browser)."""
    return MARKDOWN_PUNCTUATION.sub(r"\\\1", text)


def literal_table(frame: pd.DataFrame) -> pd.DataFrame:
    """A text table of :func:`table` with every heading and cell :func:`literal`, for ``st.table``."""
    shown = frame.map(lambda v: literal(v) if isinstance(v, str) else v)
    shown.columns = [literal(str(c)) for c in frame.columns]
    return shown


def table(frame: pd.DataFrame, columns: Sequence[Column]) -> pd.DataFrame:
    """``frame``'s ``columns`` formatted as text under their headings, for ``st.table``."""
    return pd.DataFrame(
        {heading: [fmt(v) for v in frame[source]] for source, heading, fmt in columns},
        columns=[heading for _, heading, _ in columns],
    )


ALL_MODES = "all modes"


FAILED = "failed"
"""The status of a failed run in ``freight_meta.sync_runs`` (and the run log)."""
NOT_FINISHED = {FAILED: "failed", INTERRUPTED: "was cut off"}
"""The statuses of a run that did not finish its work, and how a warning says it."""


def failed_streams(streams: pd.DataFrame) -> list[str]:
    """A warning per stream whose latest run failed or was cut off (of ``Freshness.streams``): its data is older than
    its last run, as of its last success (or never loaded), however current the rest of the page is."""
    return [
        f"The latest run of {label(r.stream)} {NOT_FINISHED[r.last_status]} (started {instant(r.last_started_at)}): "
        + (f"what it loads is as of its last successful run, {instant(r.last_success_at)}"
           if not _absent(r.last_success_at) else "it has never loaded anything (no successful run)")
        + (f". Error: {r.error}" if not _absent(r.error) else ".")
        for r in streams.itertuples() if r.last_status in NOT_FINISHED
    ]


def share_of(on_time: Any, arrived: Any) -> str:
    """``33.3 % of 12``: the on-time share of the arrived shipments, and how many arrived; blank for none."""
    if _absent(arrived) or int(arrived) == 0:
        return ""
    return f"{share(int(on_time) / int(arrived))} of {count(arrived)}"


def on_time_pivot(by_month_mode: pd.DataFrame, by_month: pd.DataFrame) -> pd.DataFrame:
    """One row per month: the on-time share of all modes, then of each mode (``share_of``)."""
    modes = sorted({label(m) for m in by_month_mode["mode_of_transport"]})
    cells = {
        (month(r.arrival_month), label(r.mode_of_transport)): share_of(r.shipments_on_time, r.shipments_arrived)
        for r in by_month_mode.itertuples()
    }
    rows = [
        [month(r.arrival_month), share_of(r.shipments_on_time, r.shipments_arrived),
         *(cells.get((month(r.arrival_month), m), "") for m in modes)]
        for r in by_month.itertuples()
    ]
    return pd.DataFrame(rows, columns=["month", ALL_MODES, *modes])


def signed(value: Any) -> str:
    """Hours with their sign: ``+10.0``, ``-2.5`` (an error: estimate minus actual)."""
    return MISSING if _absent(value) else f"{float(value):+,.1f}"


def change(value: Any) -> str:
    """A move in hours with its sign, blank for none (the first estimate, or one that did not move)."""
    return "" if _absent(value) else signed(value)


def days_before(horizon: Any) -> str:
    """``7 days before``; ``1 day before``."""
    days = int(horizon)
    return f"{days} day{'' if days == 1 else 's'} before"


def shipment_choice(row: Any) -> str:
    """One shipment of the revisions chooser: ``10158 · SEA NLRTM-USLAX · 3 revisions``."""
    revisions = int(row.revisions)
    return (f"{row.shipment_id} · {label(row.mode_of_transport)} {label(row.lane)} · "
            f"{revisions} revision{'' if revisions == 1 else 's'}")


def eta_note(by_horizon: pd.DataFrame) -> str | None:
    """What the ETA section says instead of figures (of ``queries.eta_by_horizon``): no arrival yet,
    or arrivals none of which had an estimate in force at a horizon; None when some were scored."""
    if not len(by_horizon):
        return ("No shipment here has arrived yet: the arrival estimates are scored against the actual "
                "arrival, so there is nothing to score.")
    if int(by_horizon["scored"].sum()) == 0:
        arrived = int(by_horizon.groupby("mode_of_transport")["arrivals"].max().sum())
        horizons = ", ".join(str(h) for h in sorted({int(h) for h in by_horizon["horizon_days"]}, reverse=True))
        shipments = "1 shipment" if arrived == 1 else f"{count(arrived)} shipments"
        return (f"{shipments} arrived, but none had an arrival estimate in force {horizons} days before it: the "
                "estimate history starts with the warehouse's first sync.")
    return None
