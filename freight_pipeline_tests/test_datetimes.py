"""``datetimes``: the UTC offsets a DateTime object's ``zone_offset`` may come in."""

from __future__ import annotations

import datetime as dt

import pytest

from freight_pipeline.datetimes import DateTimeParseError, ServiceZone, parse_datetime_object

HOUR = dt.timedelta(hours=1)


@pytest.mark.parametrize(("offset", "expected"), [
    ("+08:00", 8 * HOUR), ("+0800", 8 * HOUR), ("+08", 8 * HOUR),  # hours alone: as PostgreSQL prints whole hours
    ("-03", -3 * HOUR), ("+05:30", 5.5 * HOUR), ("+0530", 5.5 * HOUR), ("+01:00:30", HOUR + dt.timedelta(seconds=30)),
    ("Z", dt.timedelta(0)), ("-00", dt.timedelta(0)),
])
def test_a_zone_offset_in_each_iso_form_is_read(offset: str, expected: dt.timedelta) -> None:
    """``+08`` emptied every event, leg and reference instant of a service writing whole-hour offsets so."""
    parsed = parse_datetime_object({"date": "2026-06-15", "time": "18:00:00", "zone_offset": offset})
    assert parsed is not None and parsed.offset == expected
    instant = parsed.instant_in(ServiceZone())
    assert instant == dt.datetime(2026, 6, 15, 18, tzinfo=dt.timezone(expected))


@pytest.mark.parametrize("offset", ["+8", "+8:00", "+0860", "+19", "08:00", "+08:0", "CET"])
def test_a_zone_offset_of_no_iso_form_is_unreadable(offset: str) -> None:
    with pytest.raises(DateTimeParseError):
        parse_datetime_object({"date": "2026-06-15", "time": "18:00:00", "zone_offset": offset})
