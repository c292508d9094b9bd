"""Small building blocks of documents: seeded RNGs, DateTime objects (both forms), Locations."""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

from freight_pipeline.simulator.data_places import Place

# Purpose tags mixed into per-shipment seeds, so streams never overlap.
TAG_IDENTITY = 1
TAG_VERSION = 2
TAG_GOOD = 3
TAG_STORE = 4
TAG_MUTATION = 5
TAG_DOCUMENTS = 21
TAG_ESTIMATES = 22

STRING_FORM = "string"
OBJECT_FORM = "object"


def rng_for(seed: int, *parts: int) -> random.Random:
    """A Random seeded injectively from (seed, parts), stable across processes and platforms."""
    value = seed & 0xFFFFFFFFFFFF
    for part in parts:
        value = (value << 32) | (part & 0xFFFFFFFF)
    return random.Random(value)


def offset_text(minutes: int) -> str:
    sign = "+" if minutes >= 0 else "-"
    minutes = abs(minutes)
    return f"{sign}{minutes // 60:02d}:{minutes % 60:02d}"


def time_object(value: dt.time) -> dict[str, int]:
    return {"hour": value.hour, "minute": value.minute, "second": value.second, "nano": value.microsecond * 1000}


def zone_offset_object(minutes: int) -> dict[str, Any]:
    """What Jackson writes for a java.time.ZoneOffset serialised as a bean."""
    return {
        "totalSeconds": minutes * 60,
        "id": "Z" if minutes == 0 else offset_text(minutes),
        "rules": {"fixedOffset": True, "transitions": [], "transitionRules": []},
    }


def local_datetime(epoch: int, utc_minutes: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(epoch, dt.timezone(dt.timedelta(minutes=utc_minutes)))


def datetime_object(
    epoch: int | None,
    utc_minutes: int,
    form: str,
    until_epoch: int | None = None,
    with_until: bool = False,
    time_known: bool = True,
) -> dict[str, Any] | None:
    """A DateTime object of the spec in the local time of the place (``utc_minutes``).

    ``form`` picks the sample-payload form (strings) or the schema form (objects). ``with_until``
    adds the ``until`` key (object form of a time of day, or null). ``time_known=False`` nulls the
    time part (a date-only estimate).
    """
    if epoch is None:
        return None
    local = local_datetime(epoch, utc_minutes)
    result: dict[str, Any] = {"date": local.date().isoformat()}
    if form == OBJECT_FORM:
        result["time"] = time_object(local.time()) if time_known else None
        result["zone_offset"] = zone_offset_object(utc_minutes)
    else:
        result["time"] = local.strftime("%H:%M:%S") if time_known else None
        result["zone_offset"] = offset_text(utc_minutes)
    if with_until:
        result["until"] = time_object(local_datetime(until_epoch, utc_minutes).time()) if until_epoch else None
    elif form == OBJECT_FORM:
        result["until"] = None
    return result


def location(place: Place, kind: str) -> dict[str, Any]:
    """Location object. ``kind``: ``port``, ``airport``, ``terminal`` or ``city``."""
    codes: list[dict[str, str]] = []
    if kind == "airport" and place.iata:
        codes.append({"type": "IATA", "code": place.iata})
        codes.append({"type": "UNLOC", "code": place.unloc})
        codes.append({"type": "SERVICE", "code": place.iata})
    elif kind == "city":
        if place.postal_code:
            codes.append({"type": "POSTAL_CODE", "code": place.postal_code})
        codes.append({"type": "UN_COUNTRY", "code": place.country})
        codes.append({"type": "UNLOC", "code": place.unloc})
    else:
        codes.append({"type": "UNLOC", "code": place.unloc})
        codes.append({"type": "SERVICE", "code": place.unloc[2:]})
    return {"codes": codes, "name": place.name, "latitude": place.lat, "longitude": place.lon}


def round2(value: float) -> float:
    return round(value, 2)


def pick_weighted(rng: random.Random, items: tuple[Any, ...], weights: tuple[int, ...]) -> Any:
    return rng.choices(items, weights)[0]
