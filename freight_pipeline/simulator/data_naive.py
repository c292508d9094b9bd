"""Documents of a service whose clock has no UTC offset (``--naive-clock ZONE``).

Such a service keeps local date-times: its DateTime objects carry ``zone_offset: null`` and give
date, time and ``until`` as the wall clock of the service's zone (not the place's own offset, which
could not be recovered without it). :func:`without_offsets` rewrites every DateTime object of a
rendered document so; the ISO strings (``last_modified_date_time`` ...) are written without an
offset by the naive clock itself (:meth:`~.clock.SimClock.iso`). A date-only value (time null) keeps
its date. A repeated hour (summer time ending) comes out as the ambiguous wall clock it is.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from freight_pipeline.datetimes import DateTimeParseError, parse_datetime_object
from freight_pipeline.simulator.data_format import time_object

DATE_TIME_KEYS = frozenset({"date", "time", "zone_offset"})
"""The keys every DateTime object has (``until`` too on some)."""


def without_offsets(value: Any, zone: dt.tzinfo) -> Any:
    """``value`` (a JSON-ready document) with every DateTime object in the wall clock of ``zone``,
    its ``zone_offset`` null; the rest as it is (new containers, the input is not changed)."""
    if isinstance(value, list):
        return [without_offsets(item, zone) for item in value]
    if isinstance(value, dict):
        if value.keys() >= DATE_TIME_KEYS:
            return naive_datetime_object(value, zone)
        return {key: without_offsets(item, zone) for key, item in value.items()}
    return value


def naive_datetime_object(value: Mapping[str, Any], zone: dt.tzinfo) -> dict[str, Any]:
    """One DateTime object (either form) as the wall clock of ``zone``, ``zone_offset`` null.

    One without an offset is taken as it is; one that cannot be read, or has no time of day, keeps
    its parts and loses only its offset (the simulator validates what it stores, so neither occurs
    in its own documents)."""
    result = dict(value)
    result["zone_offset"] = None
    if value.get("zone_offset") is None:
        return result
    try:
        parsed = parse_datetime_object(dict(value))
        start, until = (parsed.instant, parsed.until) if parsed is not None else (None, None)
    except DateTimeParseError:
        return result
    if start is None:
        return result
    local = start.astimezone(zone)
    result["date"] = local.date().isoformat()
    result["time"] = _time_like(value.get("time"), local.time())
    if until is not None:
        result["until"] = _time_like(value.get("until"), until.astimezone(zone).time())
    return result


def _time_like(original: Any, local: dt.time) -> Any:
    """``local`` in the form of ``original``: ``"HH:MM:SS"`` or ``{"hour", "minute", "second", "nano"}``."""
    if isinstance(original, dict):
        return time_object(local)
    return local.isoformat()
