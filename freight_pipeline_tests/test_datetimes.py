"""``datetimes``: the UTC offsets a DateTime object's ``zone_offset`` may come in."""

from __future__ import annotations

import datetime as dt

import pytest

from freight_pipeline.datetimes import (
    DateTimeParseError,
    ServiceZone,
    parse_datetime_object,
    parse_iso_datetime,
    read_datetime_object,
)
from freight_pipeline.normalize.groups import DATETIME
from freight_pipeline.normalize.nodes import Key

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


BERLIN_SUMMER = dt.timezone(dt.timedelta(hours=2))


@pytest.mark.parametrize(("value", "instant", "time", "offset"), [
    ({"date": "2026-10-30", "time": "15:00:00+02:00"}, dt.datetime(2026, 10, 30, 15, tzinfo=BERLIN_SUMMER),
     dt.time(15), "+02:00"),
    ({"date": "2026-10-30", "time": "15:00:00+02:00", "zone_offset": "+02:00"},
     dt.datetime(2026, 10, 30, 15, tzinfo=BERLIN_SUMMER), dt.time(15), "+02:00"),
    ({"date": "2026-10-30", "time": "15:00:00Z"}, dt.datetime(2026, 10, 30, 15, tzinfo=dt.UTC), dt.time(15), "+00:00"),
    ({"date": "2026-10-30", "time": "15:00:00"}, dt.datetime(2026, 10, 30, 17, tzinfo=BERLIN_SUMMER), dt.time(15),
     None),  # no offset anywhere: the service's zone's (UTC here)
])
def test_a_time_of_day_that_carries_its_offset_is_read_at_that_offset(
    value: dict[str, str], instant: dt.datetime, time: dt.time, offset: str | None
) -> None:
    """``"time": "15:00:00+02:00"`` (how Java writes an ``OffsetTime``), the zone_offset null: its offset was dropped
    and the time read in the service's zone, an instant hours off with no problem said. Both readers: the run's (part
    by part) and the strict one."""
    for parsed, problems in (read_datetime_object(value), (parse_datetime_object(value), [])):
        assert parsed is not None and problems == []
        assert (parsed.instant, parsed.time, parsed.offset_text) == (instant, time, offset)


def test_a_time_whose_offset_the_zone_offset_contradicts_is_no_instant_and_a_problem() -> None:
    value = {"date": "2026-10-30", "time": "15:00:00+02:00", "zone_offset": "+01:00", "until": "16:00:00+03:00"}
    parsed, problems = read_datetime_object(value)
    assert parsed is not None and parsed.instant is None and parsed.time == dt.time(15) and parsed.until_time is None
    assert [(key, raw) for key, raw, _ in problems] == [("time", "15:00:00+02:00"), ("until", "16:00:00+03:00")]
    with pytest.raises(DateTimeParseError, match="carries the offset"):
        parse_datetime_object(value)


@pytest.mark.parametrize(("value", "said"), [
    ({"date": "2026-06-24", "time": "14:00:00+20:00"}, [("time", "zone_offset '+20:00' is beyond +/-18:00")]),
    ({"date": "2026-06-24", "time": "14:00:00", "until": "16:00:00+03:00"},
     [("until", "until 16:00:00+03:00 carries the offset +03:00, its start's is none (read in the service's time "
                "zone)")]),
])
def test_an_offset_a_time_carries_is_held_to_what_a_zone_offset_is(value: dict[str, str],
                                                                   said: list[tuple[str, str]]) -> None:
    """An offset beyond +/-18:00 carried by the time is unreadable, as the same sent as zone_offset is (was: an
    instant at +20:00, no problem); an end of a range at an offset its start does not have is no end (was: read at
    the start's, its offset dropped from the text, nothing said)."""
    parsed, problems = read_datetime_object(value)
    assert parsed is not None and [(key, reason) for key, _, reason in problems] == said
    assert (parsed.instant is None) == ("until" not in value) and parsed.until is None


@pytest.mark.parametrize(("text", "instant"), [
    ("2026-11-03T13:33:00+01:00[Europe/Berlin]", dt.datetime(2026, 11, 3, 12, 33, tzinfo=dt.UTC)),
    ("2026-11-03T13:33+01:00[Europe/Berlin]", dt.datetime(2026, 11, 3, 12, 33, tzinfo=dt.UTC)),
    ("2026-11-03T12:33:00Z[UTC]", dt.datetime(2026, 11, 3, 12, 33, tzinfo=dt.UTC)),
])
def test_a_stamp_with_its_zone_s_name_after_its_offset_is_read_by_the_offset(text: str, instant: dt.datetime) -> None:
    """``2026-11-03T13:33:00+01:00[Europe/Berlin]`` (how Java writes a ``ZonedDateTime``) was unreadable: every
    shipment's stamp null, the shipments stream failed (``CursorError``). A zone's name without an offset is not
    read (its rules are the service's, not ours to guess)."""
    assert parse_iso_datetime(text) == instant
    with pytest.raises(DateTimeParseError, match="names a time zone but no UTC offset"):
        parse_iso_datetime("2026-11-03T13:33:00[Europe/Berlin]")


WHOLE = {"date": "2026-06-15", "time": "18:00:00", "zone_offset": "+08:00", "until": "19:00:00"}
"""A DateTime with every part, each under its first name."""


@pytest.mark.parametrize("part", DATETIME.keys, ids=lambda key: key.name)
def test_each_part_is_read_under_each_of_its_names_whatever_its_other_names_hold_null(part: Key) -> None:
    """A release that sent ``"zone_offset": null`` beside ``"zoneOffset": "+08:00"``: the reader took the key
    present, not the one holding a value, and read 18:00 as UTC (the watcher, reading by the declaration, said
    nothing). Every part's every name, the others sent null before it and after it, reads as the whole."""
    expected = parse_datetime_object(WHOLE)
    assert expected is not None and expected.offset == 8 * HOUR and part.name in WHOLE
    rest = {key: value for key, value in WHOLE.items() if key != part.name}
    for name in part.keys:
        nulls = dict.fromkeys((other for other in part.keys if other != name), None)
        for value in ({**nulls, name: WHOLE[part.name], **rest}, {name: WHOLE[part.name], **nulls, **rest}):
            assert parse_datetime_object(value) == expected, value
            assert read_datetime_object(value) == (expected, []), value
