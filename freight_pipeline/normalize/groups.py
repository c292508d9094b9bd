"""Column groups that repeat across tables: DateTime objects, locations, contacts.

Each group is a small class with ``columns()`` for the table spec and ``put(row, value, path,
problems)`` for the flattener; like the plain fields, ``put`` never raises for a value (an
unreadable part is null and reported). ``read_datetime``, ``utc_instant`` and ``loose_datetime``
are the DateTime helpers the flatteners use directly.
"""

from __future__ import annotations

import datetime as dt
import operator
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from freight_pipeline.datetimes import (
    DATE_KEYS,
    OFFSET_KEYS,
    TIME_KEYS,
    UNTIL_KEYS,
    DateTimeParseError,
    ParsedDateTime,
    parse_date,
    parse_datetime_object,
    parse_offset,
    parse_time,
    read_datetime_object,
    to_utc,
)
from freight_pipeline.normalize.converters import (
    DATE,
    DOUBLE,
    JSON,
    TIMESTAMPTZ,
    VARCHAR,
    Row,
    json_or_report,
    to_instant,
    to_int,
    to_json,
    to_str,
)
from freight_pipeline.normalize.errors import Invalid, join_path, show
from freight_pipeline.normalize.nodes import NUMBER, OBJECT, TEXT, Key, Node
from freight_pipeline.normalize.plain_fields import Field, as_items, as_object, compile_fields, copy_fields
from freight_pipeline.normalize.problems import Problems
from freight_pipeline.normalize.schema import Column

# --- DateTime objects ------------------------------------------------------------------------------


_TEXT_OR_OBJECT = frozenset({TEXT, OBJECT})
TIME_PARTS = Node.of(
    (), *(Key(part, kinds=frozenset({NUMBER}), reads=to_int) for part in ("hour", "minute", "second", "nano"))
)
"""A time of day sent as an object (the schema's form of ``time`` and ``until``)."""
OFFSET_PARTS = Node.of(
    (), Key(("totalSeconds", "total_seconds"), kinds=frozenset({NUMBER}), reads=to_int),
    Key("id", kinds=frozenset({TEXT}), reads=parse_offset), known=("rules",),
)
"""A UTC offset sent as an object (the schema's form of ``zone_offset``; its ``rules`` are not read)."""
DATETIME = Node.of(
    (),
    Key(DATE_KEYS, kinds=frozenset({TEXT}), reads=parse_date),
    Key(TIME_KEYS, TIME_PARTS, kinds=_TEXT_OR_OBJECT, reads=parse_time),
    Key(OFFSET_KEYS, OFFSET_PARTS, kinds=_TEXT_OR_OBJECT, reads=parse_offset),
    Key(UNTIL_KEYS, TIME_PARTS, kinds=_TEXT_OR_OBJECT, reads=parse_time),
)
"""A DateTime object, in both of the spec's forms (``datetimes``: its parts are read under these names)."""
TIME_OR_DATETIME = Node(keys=(*TIME_PARTS.keys, *DATETIME.keys))
"""A separate end of a time range (``estimated_datetime_until``): a time of day's parts, or a whole DateTime."""


def loose_datetime_key(source: str) -> Key:
    """The key of a field typed only as "string" that should hold a date-time (:func:`loose_datetime`)."""
    return Key(source, DATETIME, kinds=_TEXT_OR_OBJECT, reads=to_str)


def _time_text(value: dt.time | None) -> str | None:
    return value.isoformat() if value is not None else None


class DateTimeGroup:
    """A DateTime object -> ``<stem>_at`` (UTC instant) + raw ``_date`` / ``_time`` / ``_offset``.

    With ``until=True`` also ``<stem>_until`` (instant) and ``<stem>_until_time`` (raw time of day).
    ``source``: the key it is read from (or every name it may come under).
    """

    def __init__(self, stem: str, label: str, *, source: str | tuple[str, ...], until: bool = False) -> None:
        self.stem = stem
        self.label = label
        self.until = until
        self.key = Key(source, DATETIME, reads=parse_datetime_object)
        """The DateTime object's key (an ISO 8601 text in its place is read too)."""
        self.at = f"{stem}_at"
        self.date = f"{stem}_date"
        self.time = f"{stem}_time"
        self.offset = f"{stem}_offset"
        self.until_at = f"{stem}_until"
        self.until_time = f"{stem}_until_time"

    def columns(self) -> list[Column]:
        cols = [
            Column(
                self.at,
                TIMESTAMPTZ,
                f"{self.label}: the instant (UTC) of the date and time at the offset sent, or, when the service "
                "sends none, in its time zone (FREIGHT_SERVICE_TIMEZONE); null when the date or time is missing "
                "or the offset sent is unreadable",
            ),
            Column(self.date, DATE, f"{self.label}: date part as sent"),
            Column(self.time, VARCHAR, f"{self.label}: time-of-day part as sent (HH:MM:SS[.ffffff])"),
            Column(self.offset, VARCHAR, f"{self.label}: UTC offset part as sent (+HH:MM)"),
        ]
        if self.until:
            cols += [
                Column(
                    self.until_at,
                    TIMESTAMPTZ,
                    f"{self.label}: end of the time range (UTC); next day if before start",
                ),
                Column(self.until_time, VARCHAR, f"{self.label}: end of the time range, time of day as sent"),
            ]
        return cols

    def put_in(self, row: Row, record: Mapping[str, Any], path: str, problems: Problems) -> ParsedDateTime | None:
        """:meth:`put` the value of its key in ``record`` (at ``path``)."""
        return self.put(row, self.key.of(record), join_path(path, self.key.name), problems)

    def put(self, row: Row, value: Any, path: str, problems: Problems) -> ParsedDateTime | None:
        """Flatten ``value`` into ``row`` (each unreadable part null and reported); returns the parsed
        object (for a separate ``*_until``)."""
        parsed = read_datetime(value, path, problems)
        if parsed is None:
            return None
        row[self.at] = utc_instant(parsed, "instant", path, problems)
        row[self.date] = parsed.date
        row[self.time] = _time_text(parsed.time)
        row[self.offset] = parsed.offset_text
        if parsed.until_time is not None:
            if self.until:
                row[self.until_at] = utc_instant(parsed, "until", join_path(path, "until"), problems)
                row[self.until_time] = _time_text(parsed.until_time)
            else:  # nowhere to put it: said, not dropped unseen
                reason = f"{self.label} has no end of a time range (until): not loaded, kept in the raw document"
                problems.add(join_path(path, "until"), value.get("until") if isinstance(value, dict) else value, reason)
        return parsed

    def put_until(self, row: Row, start: ParsedDateTime | None, value: Any, path: str, problems: Problems) -> None:
        """A separate ``*_until`` object: a time of day on the start's date and offset, or a full DateTime."""
        if value is None:
            return
        if isinstance(value, dict) and "date" not in value and "time" not in value:
            try:
                until_time = parse_time(value)
            except DateTimeParseError as exc:
                problems.add(path, value, str(exc))
                return
            if until_time is None:
                return
            row[self.until_time] = _time_text(until_time)
            if start is not None:
                row[self.until_at] = utc_instant(replace(start, until_time=until_time), "until", path, problems)
            return
        parsed = read_datetime(value, path, problems)
        if parsed is not None:
            row[self.until_at] = utc_instant(parsed, "instant", path, problems)
            row[self.until_time] = _time_text(parsed.time)


def read_datetime(value: Any, path: str, problems: Problems) -> ParsedDateTime | None:
    """A DateTime object part by part: unreadable parts are None and reported under their own path."""
    parsed, part_problems = read_datetime_object(value)
    for key, raw, reason in part_problems:
        problems.add(join_path(path, key), raw, reason)
    return parsed


def utc_instant(parsed: ParsedDateTime, which: str, path: str, problems: Problems) -> dt.datetime | None:
    """``parsed``'s instant or its ``until`` in the record's zone (``problems.zone``), in UTC; null and reported
    when it falls outside the calendar."""
    try:
        return to_utc(parsed.instant_in(problems.zone) if which == "instant" else parsed.until_in(problems.zone))
    except DateTimeParseError as exc:
        problems.add(path, str(parsed.instant_in(problems.zone)), str(exc))
        return None


def loose_datetime(value: Any, path: str, problems: Problems) -> tuple[str | None, dt.datetime | None]:
    """A field typed only as "string" that should hold a date-time: (raw text, UTC instant or null).

    The format is not specified, so an unreadable string is kept as text (its instant null) rather
    than reported; a DateTime object is read part by part.
    """
    if value is None:
        return None, None
    if isinstance(value, dict):
        parsed = read_datetime(value, path, problems)
        instant = utc_instant(parsed, "instant", path, problems) if parsed else None
        return json_or_report(value, path, problems), instant
    try:
        text = to_str(value)
    except Invalid as exc:
        problems.add(path, value, str(exc))
        return None, None
    try:
        return text, to_instant(text, problems.zone)
    except Invalid:
        return text, None


# --- Location --------------------------------------------------------------------------------------

# Location code type -> column suffix (the first code of each type; all codes stay in *_location_codes).
LOCATION_CODE_TYPES: dict[str, str] = {
    "SERVICE": "service_code",
    "UNLOC": "unloc",
    "IATA": "iata",
    "FOREIGN": "foreign_code",
    "POSTAL_CODE": "postal_code",
    "UN_COUNTRY": "un_country",
}


_CODE_TYPE = Key("type", kinds=frozenset({TEXT}), reads=to_str)
_CODE = Key("code", kinds=frozenset({TEXT}), reads=to_str)


class LocationGroup:
    """A Location -> ``<p>location_name``, one column per code type, lat/long, ``<p>location_codes`` JSON."""

    def __init__(self, prefix: str, label: str, *, source: str | tuple[str, ...] = "location") -> None:
        p = f"{prefix}_" if prefix else ""
        self.label = label
        self.name = f"{p}location_name"
        self.latitude = f"{p}latitude"
        self.longitude = f"{p}longitude"
        self.codes = f"{p}location_codes"
        self.code_columns = {code_type: f"{p}{suffix}" for code_type, suffix in LOCATION_CODE_TYPES.items()}
        fields = (Field(self.name, VARCHAR, source="name"), Field(self.latitude, DOUBLE, source="latitude"),
                  Field(self.longitude, DOUBLE, source="longitude"))
        self.fields = compile_fields(fields)
        self.codes_key = Key("codes", Node.of((), _CODE_TYPE, _CODE), array=True)
        self.key = Key(source, Node.of(fields, self.codes_key))

    def columns(self) -> list[Column]:
        cols = [Column(self.name, VARCHAR, f"{self.label}: location name")]
        cols += [
            Column(col, VARCHAR, f"{self.label}: the location code of type {code_type} first in the codes' order "
                   "(by code: the same whatever order they came in)")
            for code_type, col in self.code_columns.items()
        ]
        cols += [
            Column(self.latitude, DOUBLE, f"{self.label}: latitude"),
            Column(self.longitude, DOUBLE, f"{self.label}: longitude"),
            Column(self.codes, JSON, f"{self.label}: all location codes as sent ([{{type, code}}], ordered by code, "
                   "then type: the same codes in any order are the same value)"),
        ]
        return cols

    def put_in(self, row: Row, record: Mapping[str, Any], path: str, problems: Problems) -> None:
        """:meth:`put` the value of its key in ``record`` (at ``path``)."""
        self.put(row, self.key.of(record), join_path(path, self.key.name), problems)

    def put(self, row: Row, value: Any, path: str, problems: Problems) -> None:
        location = as_object(value, path, problems)
        if location is None:
            return
        copy_fields(row, location, self.fields, path, problems)
        codes = self.codes_key.of(location)
        if codes is None:
            return
        codes_path = join_path(path, self.codes_key.name)
        items = list(as_items(codes, codes_path, problems))
        if len(items) > 1:
            types = [kind for _, _, item in items if isinstance(kind := _CODE_TYPE.of(item), str)]
            if len(set(types)) < len(types):  # a type twice: which is its first depends on the order
                items.sort(key=lambda each: _code_order(each[2]))  # the first of each type in the canonical order
        for _, code_path, item in items:
            code_type, code = _CODE_TYPE.of(item), _CODE.of(item)
            column = self.code_columns.get(code_type) if isinstance(code_type, str) else None
            if column is not None and code is not None and column not in row:
                try:
                    row[column] = to_str(code)
                except Invalid as exc:
                    problems.add(f"{code_path}.code", code, str(exc))
        if isinstance(codes, list):
            try:
                ordered = codes_in_canonical_order(codes) if len(codes) > 1 else None
            except Invalid:  # nested too deeply: the whole said so below
                ordered = None
            # its problems named at the positions as sent
            row[self.codes] = json_or_report(codes, codes_path, problems, text=ordered)


def codes_in_canonical_order(codes: list[Any]) -> str:
    """``codes`` as JSON text (:func:`to_json`), in their canonical order (:func:`_code_order`): the spec promises no
    order of a location's codes (a service may answer them from a set, in another order each time), so the same
    codes make the same text and a re-read that only reordered them changes no row."""
    plain = all(type(code) is dict and len(code) == 2 and type(code.get("code")) is str
                and type(code.get("type")) is str for code in codes)
    return to_json(sorted(codes, key=_BY_CODE_AND_TYPE if plain else _code_order))  # the same order, quicker


_BY_CODE_AND_TYPE = operator.itemgetter("code", "type")
"""The canonical order of codes all of the spec's form (:func:`_code_order`'s, without a call for each)."""


def _code_order(code: Any) -> tuple[int, str, str, str]:
    """A location code's place in their canonical order: codes of the spec's form (``{"type", "code"}``, both text)
    by code, then type; after them anything else, by its JSON text (shown, when it cannot be written)."""
    if isinstance(code, dict) and len(code) == 2:
        value, kind = code.get("code"), code.get("type")
        if isinstance(value, str) and isinstance(kind, str):
            return 0, value, kind, ""
    try:
        return 1, "", "", to_json(code)
    except Invalid:  # nested too deeply to write
        return 1, "", "", show(code)


# --- contact ---------------------------------------------------------------------------------------


class ContactGroup:
    """A contact object -> ``contact_name``, ``contact_phone_number``, ``contact_fax_number``,
    ``contact_email`` and the whole object in ``contact_json`` (its fields are not fully specified)."""

    KEYS = ("name", "phone_number", "fax_number", "email")

    def __init__(self, prefix: str = "contact", *, source: str | tuple[str, ...] = "contact") -> None:
        self.prefix = prefix
        fields = tuple(Field(f"{prefix}_{key}", VARCHAR, source=key) for key in self.KEYS)
        self.fields = compile_fields(fields)
        self.json = f"{prefix}_json"
        self.key = Key(source, Node.of(fields))

    def columns(self) -> list[Column]:
        cols = [Column(f"{self.prefix}_{key}", VARCHAR, f"contact {key.replace('_', ' ')}") for key in self.KEYS]
        cols.append(Column(self.json, JSON, "the whole contact object as sent (fields beyond these are not specified)"))
        return cols

    def put_in(self, row: Row, record: Mapping[str, Any], path: str, problems: Problems) -> None:
        """:meth:`put` the value of its key in ``record`` (at ``path``)."""
        self.put(row, self.key.of(record), join_path(path, self.key.name), problems)

    def put(self, row: Row, value: Any, path: str, problems: Problems) -> None:
        contact = as_object(value, path, problems)
        if contact is None:
            return
        copy_fields(row, contact, self.fields, path, problems)
        row[self.json] = json_or_report(contact, path, problems)
