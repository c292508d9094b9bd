"""The service's DateTime object, in both of its forms, turned into timezone-aware instants.

The spec describes one DateTime object with two shapes for its parts:

* sample payloads: ``{"date": "2026-11-01", "time": "10:15:30", "zone_offset": "+01:00"}``
* the schema: ``{"date": ..., "time": {"hour", "minute", "second", "nano"},
  "zone_offset": {"totalSeconds": 3600, "id": "+01:00", "rules": {...}}}``

``until`` (only on PICKUP and FINAL_DESTINATION events) is a time of day in either shape, on the
same date and offset; an ``until`` earlier than ``time`` is taken to fall on the next day.
Every part may be null. An instant is produced when date and time are known: with the offset sent, or
without one in the run's time zone (:class:`ServiceZone`, ``FREIGHT_SERVICE_TIMEZONE``, UTC by
default: services built on local date-times send none); the raw parts are returned too, so nothing is lost.

No function here raises anything but :class:`DateTimeParseError` for any input value (impossible
dates, times or offsets, wrong types, instants outside the representable range):
``read_datetime_object`` goes further and reads each part on its own, returning the parts it could
read and one problem per part it could not.

Plain Python with no dependencies: used by the client models, the normaliser and the simulator.
"""

from __future__ import annotations

import datetime as dt
import re
import zoneinfo
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

_OFFSET_RE = re.compile(r"^(?P<sign>[+-])(?P<h>\d{2})(?::?(?P<m>\d{2})(?::?(?P<s>\d{2}))?)?$")
"""A UTC offset as ISO 8601 and Java write it: ``+HH:MM``, ``+HHMM`` or ``+HH`` (the hours alone, as PostgreSQL
prints whole hours), with seconds after the minutes maybe."""
MAX_OFFSET = dt.timedelta(hours=18)
"""The widest UTC offset there is (ISO 8601 and Java's ``ZoneOffset``, which the service's schema names)."""


class DateTimeParseError(ValueError):
    """A DateTime part that is present but cannot be read."""


# --- the service's time zone: what a date-time without a UTC offset is read in ----------------------

DEFAULT_SERVICE_TIMEZONE = "UTC"


def service_zone(name: str) -> dt.tzinfo:
    """The IANA zone ``name`` (``Europe/Berlin``, ``UTC``); ValueError naming it when there is none."""
    try:
        return dt.UTC if name == "UTC" else zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, TypeError):
        raise ValueError(f"{name!r} is not an IANA time zone (such as Europe/Berlin or UTC)") from None


class ServiceZone:
    """The time zone in which one run reads the date-times the service sends without a UTC offset
    (``SyncSettings.service_timezone``), and how many it read. A value that travels with the run's settings
    (``SyncSettings.zone``) into the code that reads date-times: each run has its own, so two runs in one
    process never read each other's zone nor count each other's values. Equal when the zone is."""

    __slots__ = ("aware_read", "keys_in_zone", "naive_read", "name", "tz")

    def __init__(self, name: str = DEFAULT_SERVICE_TIMEZONE) -> None:
        self.name = name
        self.tz = service_zone(name)
        self.naive_read = 0
        """Date-times read without a UTC offset (:meth:`instant`)."""
        self.aware_read = 0
        """Date-times read with one: with :attr:`naive_read`, whether a run read any date-time at all."""
        self.keys_in_zone = False
        """The service's shipment lookup keys (``LAST_MODIFIED_DATE`` / ``_TIME``) hold this zone's wall clock while
        its stamps are written at another offset (UTC, say): found by the run's ceiling (``sync.changes``), and from
        then on every stamp is keyed in this zone (:meth:`key_instant`)."""

    def counts(self) -> tuple[int, int]:
        """(:attr:`naive_read`, :attr:`aware_read`), to add to another value's (:meth:`add_counts`)."""
        return self.naive_read, self.aware_read

    def add_counts(self, counts: tuple[int, int]) -> None:
        self.naive_read += counts[0]
        self.aware_read += counts[1]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ServiceZone) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return f"ServiceZone({self.name!r})"

    def repeats(self, local: dt.datetime) -> bool:
        """Whether the wall-clock ``local`` falls in an hour this zone's fall-back repeats: it names two instants
        (not counted as a read)."""
        zone = self.tz
        if zone is dt.UTC:
            return False
        first, second = local.replace(tzinfo=zone, fold=0).utcoffset(), local.replace(tzinfo=zone, fold=1).utcoffset()
        return first is not None and second is not None and first > second  # a gap's (skipped) go the other way

    def instant(self, local: dt.datetime) -> dt.datetime:
        """A wall-clock date-time sent without a UTC offset, as the instant it names in this zone.

        The zone's rules apply (summer time included). The one ambiguity, the hour a fall-back repeats, is
        resolved as Python's ``fold=0`` does: the first of the two instants (the offset before the step),
        which for the sync cursor errs towards re-reading; a wall-clock time that a spring-forward skips is
        read with the offset before the gap. Counted (``naive_read``)."""
        self.naive_read += 1
        zone = self.tz
        if zone is dt.UTC:
            return local.replace(tzinfo=dt.UTC)
        offset = local.replace(tzinfo=zone, fold=0).utcoffset()
        return local.replace(tzinfo=dt.timezone(offset) if offset is not None else dt.UTC)

    def parse(self, value: Any) -> dt.datetime | None:
        """An ISO 8601 date-time string as an aware instant: its own offset when it has one, else read in
        this zone (:meth:`instant`). DateTimeParseError when unreadable."""
        parsed = parse_iso_datetime(value)
        if parsed is None:
            return None
        if parsed.tzinfo is not None:
            self.aware_read += 1
            return parsed
        return self.instant(parsed)

    def key_instant(self, value: Any) -> dt.datetime | None:
        """A shipment's ``last_modified_date_time`` (:meth:`parse`) at the wall clock its lookup keys hold: its own,
        or this zone's once the run found the keys kept there (:attr:`keys_in_zone`)."""
        parsed = self.parse(value)
        return parsed.astimezone(self.tz) if parsed is not None and self.keys_in_zone else parsed


@dataclass(frozen=True)
class ParsedDateTime:
    """A DateTime object read into typed parts and, where complete, an aware instant."""

    date: dt.date | None
    time: dt.time | None
    offset: dt.timedelta | None
    until_time: dt.time | None
    offset_unreadable: bool = False
    """An offset was sent but could not be read (its problem is reported): no instant, rather than a guess."""

    def instant_in(self, zone: ServiceZone) -> dt.datetime | None:
        """Date and time at the offset sent; without one, in the run's ``zone`` (:meth:`ServiceZone.instant`)."""
        if self.date is None or self.time is None or self.offset_unreadable:
            return None
        if self.offset is None:
            return zone.instant(dt.datetime.combine(self.date, self.time))
        zone.aware_read += 1
        return dt.datetime.combine(self.date, self.time, tzinfo=dt.timezone(self.offset))

    def until_in(self, zone: ServiceZone) -> dt.datetime | None:
        """The end of the window (``until``) on the start's date and offset; earlier than the start: the next day."""
        start = self.instant_in(zone)
        if start is None or self.until_time is None:
            return None
        end = dt.datetime.combine(start.date(), self.until_time, tzinfo=start.tzinfo)
        if end >= start:
            return end
        try:
            return end + dt.timedelta(days=1)
        except OverflowError:
            raise DateTimeParseError(f"until {self.until_time} after {start} falls beyond year 9999") from None

    @property
    def instant(self) -> dt.datetime | None:
        """:meth:`instant_in` UTC (a value without an offset read as UTC): for readers outside a run (the
        simulator, the client models); a run reads them in its zone."""
        return self.instant_in(ServiceZone())

    @property
    def until(self) -> dt.datetime | None:
        """:meth:`until_in` UTC, as :attr:`instant`."""
        return self.until_in(ServiceZone())

    @property
    def offset_text(self) -> str | None:
        return format_offset(self.offset) if self.offset is not None else None


@lru_cache(maxsize=1024)
def format_offset(offset: dt.timedelta) -> str:
    total = int(offset.total_seconds())
    sign = "+" if total >= 0 else "-"
    total = abs(total)
    return f"{sign}{total // 3600:02d}:{(total % 3600) // 60:02d}"


def parse_date(value: Any) -> dt.date | None:
    if value is None or value == "":
        return None
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    if isinstance(value, str):
        return _date_of_text(value)
    raise DateTimeParseError(f"date {_short(value)} is neither a string nor null")


@lru_cache(maxsize=8192)
def _date_of_text(value: str) -> dt.date:
    try:
        return dt.date.fromisoformat(value[:10])
    except ValueError as exc:
        raise DateTimeParseError(f"date {_short(value)} is not an ISO 8601 date") from exc


def parse_time(value: Any) -> dt.time | None:
    """Time of day from ``"HH:MM[:SS[.fff]]"`` or ``{"hour", "minute", "second", "nano"}``.

    None for a null or empty value and for an object without an hour (the spec lets every part be
    null: an object of null parts is no time of day, not midnight).
    """
    if value is None or value == "":
        return None
    if isinstance(value, dt.time):
        return value
    if isinstance(value, str):
        return _time_of_text(value)
    if isinstance(value, dict):
        return _time_from_parts(value)
    raise DateTimeParseError(f"time {_short(value)} is neither a string nor an object")


@lru_cache(maxsize=8192)
def _time_of_text(value: str) -> dt.time:
    try:
        return dt.time.fromisoformat(value)
    except ValueError as exc:
        raise DateTimeParseError(f"time {_short(value)} is not HH:MM:SS") from exc


def _time_from_parts(value: dict[str, Any]) -> dt.time | None:
    """``{"hour", "minute", "second", "nano"}``: no time without an hour; missing smaller parts are 0."""
    if value.get("hour") is None:
        return None
    try:
        parts = [_whole_number(_or_zero(value.get(name))) for name in ("hour", "minute", "second", "nano")]
        return dt.time(parts[0], parts[1], parts[2], parts[3] // 1000)
    except (TypeError, ValueError, OverflowError) as exc:
        raise DateTimeParseError(f"time object {_short(value)} has invalid parts") from exc


def _or_zero(value: Any) -> Any:
    """A missing part of a time object is 0; any other value is read as it is (``False`` is no number)."""
    return 0 if value is None else value


def _whole_number(value: Any) -> int:
    """An integer, or an integral float or numeric string; TypeError/ValueError otherwise (bool included)."""
    if isinstance(value, bool):
        raise TypeError("a boolean is not a number")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        return int(value.strip())
    raise TypeError(f"{type(value).__name__} is not an integer")


def _short(value: Any, limit: int = 80) -> str:
    try:
        text = repr(value)
    except RecursionError:
        text = f"<{type(value).__name__} nested too deeply to show>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def parse_offset(value: Any) -> dt.timedelta | None:
    """UTC offset from ``"+HH:MM"`` / ``"Z"`` or ``{"totalSeconds", "id", "rules"}``."""
    if value is None or value == "":
        return None
    if isinstance(value, dt.timedelta):
        return _in_range(value, value)
    if isinstance(value, str):
        return _offset_of_text(value)
    if isinstance(value, dict):
        total = value.get("totalSeconds", value.get("total_seconds"))
        if total is not None:
            try:
                return _in_range(dt.timedelta(seconds=_whole_number(total)), total)
            except (TypeError, ValueError, OverflowError) as exc:
                raise DateTimeParseError(f"zone_offset totalSeconds {_short(total)} is not an integer") from exc
        if value.get("id"):
            return parse_offset(value["id"])
        return None
    raise DateTimeParseError(f"zone_offset {_short(value)} is neither a string nor an object")


@lru_cache(maxsize=1024)
def _offset_of_text(value: str) -> dt.timedelta:
    if value in ("Z", "z", "UTC"):
        return dt.timedelta(0)
    match = _OFFSET_RE.match(value)
    if not match or int(match["m"] or 0) > 59 or int(match["s"] or 0) > 59:
        raise DateTimeParseError(f"zone_offset {_short(value)} is not of the form +HH:MM")
    seconds = int(match["h"]) * 3600 + int(match["m"] or 0) * 60 + int(match["s"] or 0)
    return _in_range(dt.timedelta(seconds=-seconds if match["sign"] == "-" else seconds), value)


def _in_range(offset: dt.timedelta, raw: Any) -> dt.timedelta:
    if abs(offset) > MAX_OFFSET:
        raise DateTimeParseError(f"zone_offset {_short(raw)} is beyond +/-18:00")
    return offset


DATE_KEYS = ("date",)
TIME_KEYS = ("time",)
OFFSET_KEYS = ("zone_offset", "zoneOffset")
UNTIL_KEYS = ("until",)
"""The names each part of a DateTime object comes under, a renamed part's old and new (the shape watcher's
declaration, ``normalize.groups.DATETIME``, is made of these): the first that holds a value is read."""


def parse_datetime_object(value: Any) -> ParsedDateTime | None:
    """Read one DateTime object; ``None`` for a null/absent object."""
    if value is None:
        return None
    if isinstance(value, str):
        # Tolerate a plain ISO 8601 timestamp where an object was expected.
        instant = parse_iso_datetime(value)
        if instant is None:
            return None
        return ParsedDateTime(instant.date(), instant.timetz().replace(tzinfo=None), instant.utcoffset(), None)
    if not isinstance(value, dict):
        raise DateTimeParseError(f"DateTime {_short(value)} is not an object")
    time, offset = _offset_carried(parse_time(_part(value, TIME_KEYS)[1]), parse_offset(_part(value, OFFSET_KEYS)[1]))
    until = _until_carried(parse_time(_part(value, UNTIL_KEYS)[1]), offset)
    return ParsedDateTime(date=parse_date(_part(value, DATE_KEYS)[1]), time=time, offset=offset, until_time=until)


def _plain(time: dt.time | None) -> dt.time | None:
    return time.replace(tzinfo=None) if time is not None else None


def _offset_carried(time: dt.time | None, offset: dt.timedelta | None) -> tuple[dt.time | None, dt.timedelta | None]:
    """A time of day that carries its own UTC offset (``"15:00:00+02:00"``, as Java writes an ``OffsetTime``) as a
    plain time, and the offset: the one it carries when the object sends none; DateTimeParseError when both are sent
    and disagree (no instant is better than a guess)."""
    if time is None or time.tzinfo is None:
        return time, offset
    carried = time.utcoffset() or dt.timedelta(0)
    _in_range(carried, format_offset(carried))  # as a zone_offset sent: none beyond +/-18:00
    if offset is not None and carried != offset:
        raise DateTimeParseError(f"time {time.isoformat()} carries the offset {format_offset(carried)}, the "
                                 f"zone_offset says {format_offset(offset)}")
    return time.replace(tzinfo=None), offset if offset is not None else carried


def _until_carried(until: dt.time | None, offset: dt.timedelta | None) -> dt.time | None:
    """The end of a time range (``until``, read on its start's date and offset) as a plain time; DateTimeParseError
    when it carries an offset other than its start's (none for a start read in the service's zone)."""
    if until is None or until.tzinfo is None:
        return until
    carried = until.utcoffset() or dt.timedelta(0)
    if carried != offset:
        start = format_offset(offset) if offset is not None else "none (read in the service's time zone)"
        raise DateTimeParseError(f"until {until.isoformat()} carries the offset {format_offset(carried)}, its "
                                 f"start's is {start}")
    return until.replace(tzinfo=None)


def _part(value: dict[str, Any], keys: tuple[str, ...]) -> tuple[str, Any]:
    """The key of a DateTime object's part and its value: the first of ``keys`` that holds one (``Key.of``'s rule: a
    ``zone_offset`` sent null beside a ``zoneOffset`` holding the offset is read by the latter), else the first."""
    for key in keys:
        raw = value.get(key)
        if raw is not None:
            return key, raw
    return keys[0], None


PartProblem = tuple[str, Any, str]
"""(part key, raw value, reason): a part of a DateTime object that could not be read."""


def read_datetime_object(value: Any) -> tuple[ParsedDateTime | None, list[PartProblem]]:
    """Read a DateTime object part by part: the parts that could be read, and a problem per part
    that could not (key ``""`` when the object as a whole is unreadable). Never raises."""
    if value is None:
        return None, []
    if not isinstance(value, dict):
        try:
            return parse_datetime_object(value), []
        except DateTimeParseError as exc:
            return None, [("", value, str(exc))]
    problems: list[PartProblem] = []

    def part(keys: tuple[str, ...], parse: Any) -> Any:
        key, raw = _part(value, keys)
        try:
            return parse(raw)
        except DateTimeParseError as exc:
            problems.append((key, raw, str(exc)))
            return None

    date, time = part(DATE_KEYS, parse_date), part(TIME_KEYS, parse_time)
    offset_problems = len(problems)
    offset = part(OFFSET_KEYS, parse_offset)
    unreadable = len(problems) > offset_problems
    try:
        time, offset = _offset_carried(time, offset) if not unreadable else (_plain(time), offset)
    except DateTimeParseError as exc:  # the time's own offset and the zone_offset disagree: no instant
        problems.append((*_part(value, TIME_KEYS), str(exc)))
        time, unreadable = _plain(time), True
    until = part(UNTIL_KEYS, parse_time)
    try:
        until = _until_carried(until, offset)
    except DateTimeParseError as exc:  # an end at another offset than its start's: no end
        problems.append((*_part(value, UNTIL_KEYS), str(exc)))
        until = None
    return ParsedDateTime(date, time, offset, until, offset_unreadable=unreadable), problems


def parse_iso_datetime(value: Any) -> dt.datetime | None:
    """An ISO 8601 date-time string (``last_modified_date_time`` and friends); naive values stay naive."""
    if value is None or value == "":
        return None
    if isinstance(value, dt.datetime):
        return value
    if not isinstance(value, str):
        raise DateTimeParseError(f"date-time {_short(value)} is not a string")
    text = value
    if text.endswith("]") and "[" in text:  # "...+01:00[Europe/Berlin]", as Java writes a ZonedDateTime: the offset
        text = text[:text.rindex("[")]  # says the instant (without one, the zone's name alone is not read)
    try:
        parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    except ValueError as exc:
        raise DateTimeParseError(f"date-time {_short(value)} is not ISO 8601") from exc
    if text is not value and parsed.tzinfo is None:
        raise DateTimeParseError(f"date-time {_short(value)} names a time zone but no UTC offset")
    offset = parsed.utcoffset()
    if offset is not None:
        _in_range(offset, value)
    return parsed


def to_utc(value: dt.datetime | None) -> dt.datetime | None:
    """``value`` in UTC (naive values stay as they are); DateTimeParseError when UTC is out of range."""
    if value is None or value.tzinfo is None:
        return value
    try:
        return value.astimezone(dt.UTC)
    except OverflowError:
        raise DateTimeParseError(f"date-time {value.isoformat()} is out of range in UTC") from None
