"""Field declarations and value converters shared by every table.

A :class:`Field` maps one source key to one column: the same object gives the table spec its
:class:`Column` and gives the flattener its converter, so the declaration exists once. Converters
are plain functions on the hot path (no per-row model objects); they are lenient where the meaning
is unambiguous (``"12.5"`` for a number, ``"J"`` for true) and raise :class:`Invalid` otherwise.

Groups of columns that repeat across tables (DateTime objects, locations, contacts) are small
classes with ``columns()`` for the spec and ``put(row, value, path)`` for the flattener.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from freight_pipeline.datetimes import (
    DateTimeParseError,
    ParsedDateTime,
    parse_date,
    parse_datetime_object,
    parse_iso_datetime,
    parse_time,
    to_utc,
)
from freight_pipeline.normalize.errors import Invalid, NormalizationError, join_path, show
from freight_pipeline.normalize.schema import Column

VARCHAR = "VARCHAR"
BIGINT = "BIGINT"
INTEGER = "INTEGER"
DOUBLE = "DOUBLE"
BOOLEAN = "BOOLEAN"
DATE = "DATE"
TIMESTAMPTZ = "TIMESTAMPTZ"
JSON = "JSON"

Row = dict[str, Any]
Rows = dict[str, list[Row]]
Converter = Callable[[Any], Any]

_INT64_MAX = 2**63 - 1
_TRUE = frozenset({"true", "t", "j", "y", "yes", "1"})
_FALSE = frozenset({"false", "f", "n", "no", "0"})


# --- converters: value (never None) -> column value; raise Invalid ---------------------------------


def to_str(value: Any) -> str:
    if type(value) is str:
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    raise Invalid(f"{show(value)} is not a string")


def to_int(value: Any) -> int:
    kind = type(value)
    if kind is int:
        result = value
    elif kind is float and value.is_integer():
        result = int(value)
    elif kind is str:
        text = value.strip()
        try:
            result = int(text)
        except ValueError:
            try:
                number = float(text)
            except ValueError:
                raise Invalid(f"{show(value)} is not an integer") from None
            if not number.is_integer():
                raise Invalid(f"{show(value)} is not an integer") from None
            result = int(number)
    else:
        raise Invalid(f"{show(value)} is not an integer")
    if -_INT64_MAX - 1 <= result <= _INT64_MAX:
        return result
    raise Invalid(f"{show(value)} is out of the 64-bit integer range")


def to_float(value: Any) -> float:
    kind = type(value)
    if kind is float:
        number = value
    elif kind is int:
        return float(value)
    elif kind is str:
        try:
            number = float(value.strip())
        except ValueError:
            raise Invalid(f"{show(value)} is not a number") from None
    else:
        raise Invalid(f"{show(value)} is not a number")
    if math.isfinite(number):
        return number
    raise Invalid(f"{show(value)} is not a finite number")


def to_bool(value: Any) -> bool:
    if value is True or value is False:
        return value
    if type(value) is str:
        text = value.strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
    elif type(value) is int and value in (0, 1):
        return bool(value)
    raise Invalid(f"{show(value)} is not a boolean")


def to_date(value: Any) -> dt.date | None:
    try:
        return parse_date(value)
    except DateTimeParseError as exc:
        raise Invalid(str(exc)) from None


def to_instant(value: Any) -> dt.datetime | None:
    """An ISO 8601 date-time string to a UTC instant; a value without offset gives null (not a guess)."""
    try:
        parsed = parse_iso_datetime(value)
    except DateTimeParseError as exc:
        raise Invalid(str(exc)) from None
    if parsed is None or parsed.tzinfo is None:
        return None
    return parsed.astimezone(dt.UTC)


def to_json(value: Any) -> str:
    """Canonical JSON text: keys sorted, so the same content gives the same text whatever key order
    the service sends (the code-conversions refresh compares rows, ``payload`` included)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


CONVERTERS: dict[str, Converter] = {
    VARCHAR: to_str,
    BIGINT: to_int,
    INTEGER: to_int,
    DOUBLE: to_float,
    BOOLEAN: to_bool,
    DATE: to_date,
    TIMESTAMPTZ: to_instant,
    JSON: to_json,
}


# --- containers ------------------------------------------------------------------------------------


def as_object(value: Any, path: str) -> Mapping[str, Any] | None:
    """A nested object, or None when null/absent."""
    if value is None or isinstance(value, dict):
        return value
    raise NormalizationError(f"{path}: {show(value)} is not an object")


def as_list(value: Any, path: str) -> Sequence[Any]:
    """A nested array; null/absent is empty."""
    if value is None:
        return ()
    if isinstance(value, list):
        return value
    raise NormalizationError(f"{path}: {show(value)} is not an array")


def as_items(value: Any, path: str) -> Iterable[tuple[int, str, Mapping[str, Any]]]:
    """(1-based position, path, object) for each object of an array; null elements are skipped."""
    for index, item in enumerate(as_list(value, path)):
        if item is None:
            continue
        item_path = f"{path}[{index}]"
        if not isinstance(item, dict):
            raise NormalizationError(f"{item_path}: {show(item)} is not an object")
        yield index + 1, item_path, item


# --- plain fields ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Field:
    """One source key -> one column. ``source`` defaults to the column name."""

    column: str
    type: str
    description: str = ""
    source: str | None = None

    @property
    def key(self) -> str:
        return self.source or self.column

    def as_column(self) -> Column:
        return Column(self.column, self.type, self.description)


# Python type a value already has when no conversion is needed (skips the converter call).
_NATIVE_TYPES: dict[str, type] = {VARCHAR: str, BIGINT: int, INTEGER: int, DOUBLE: float, BOOLEAN: bool}

CompiledFields = tuple[tuple[str, str, Converter, type | None], ...]


def compile_fields(fields: Iterable[Field]) -> CompiledFields:
    return tuple((f.column, f.key, CONVERTERS[f.type], _NATIVE_TYPES.get(f.type)) for f in fields)


def copy_fields(row: Row, source: Mapping[str, Any], fields: CompiledFields, path: str) -> Row:
    """Convert each declared field of ``source`` into ``row``; absent and null stay absent (null)."""
    get = source.get
    for column, key, convert, native in fields:
        value = get(key)
        if value is None:
            continue
        if type(value) is native and native is not int:  # ints still need the 64-bit range check
            row[column] = value
            continue
        try:
            row[column] = convert(value)
        except Invalid as exc:
            raise NormalizationError(f"{join_path(path, key)}: {exc}") from None
    return row


def string_lines(value: Any, path: str) -> list[tuple[int, str | None]]:
    """An array of strings as (1-based position, text); elements are coerced to text."""
    lines: list[tuple[int, str | None]] = []
    for index, item in enumerate(as_list(value, path)):
        if item is None:
            lines.append((index + 1, None))
            continue
        try:
            lines.append((index + 1, to_str(item)))
        except Invalid as exc:
            raise NormalizationError(f"{path}[{index}]: {exc}") from None
    return lines


# --- DateTime objects ------------------------------------------------------------------------------


def _time_text(value: dt.time | None) -> str | None:
    return value.isoformat() if value is not None else None


class DateTimeGroup:
    """A DateTime object -> ``<stem>_at`` (UTC instant) + raw ``_date`` / ``_time`` / ``_offset``.

    With ``until=True`` also ``<stem>_until`` (instant) and ``<stem>_until_time`` (raw time of day).
    """

    def __init__(self, stem: str, label: str, *, until: bool = False, source: str | None = None) -> None:
        self.stem = stem
        self.label = label
        self.until = until
        self.source = source
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
                f"{self.label}: the instant (UTC); null unless date, time and offset are known",
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

    def put(self, row: Row, value: Any, path: str) -> ParsedDateTime | None:
        """Flatten ``value`` into ``row``; returns the parsed object (for a separate ``*_until``)."""
        if value is None:
            return None
        try:
            parsed = parse_datetime_object(value)
        except DateTimeParseError as exc:
            raise NormalizationError(f"{path}: {exc}") from None
        if parsed is None:
            return None
        row[self.at] = to_utc(parsed.instant)
        row[self.date] = parsed.date
        row[self.time] = _time_text(parsed.time)
        row[self.offset] = parsed.offset_text
        if self.until and parsed.until_time is not None:
            row[self.until_at] = to_utc(parsed.until)
            row[self.until_time] = _time_text(parsed.until_time)
        return parsed

    def put_until(self, row: Row, start: ParsedDateTime | None, value: Any, path: str) -> None:
        """A separate ``*_until`` object: a time of day on the start's date and offset, or a full DateTime."""
        if value is None:
            return
        try:
            if isinstance(value, dict) and "date" not in value and "time" not in value:
                until_time = parse_time(value)
                if until_time is None:
                    return
                row[self.until_time] = _time_text(until_time)
                if start is not None:
                    row[self.until_at] = to_utc(replace(start, until_time=until_time).until)
                return
            parsed = parse_datetime_object(value)
        except DateTimeParseError as exc:
            raise NormalizationError(f"{path}: {exc}") from None
        if parsed is not None:
            row[self.until_at] = to_utc(parsed.instant)
            row[self.until_time] = _time_text(parsed.time)


def loose_datetime(value: Any, path: str) -> tuple[str | None, dt.datetime | None]:
    """A field typed only as "string" that should hold a date-time: (raw text, UTC instant or null).

    The format is not specified, so an unreadable value is kept as text rather than rejected.
    """
    if value is None:
        return None, None
    if isinstance(value, dict):
        try:
            parsed = parse_datetime_object(value)
        except DateTimeParseError as exc:
            raise NormalizationError(f"{path}: {exc}") from None
        return to_json(value), to_utc(parsed.instant) if parsed else None
    try:
        text = to_str(value)
    except Invalid as exc:
        raise NormalizationError(f"{path}: {exc}") from None
    try:
        return text, to_instant(text)
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


class LocationGroup:
    """A Location -> ``<p>location_name``, one column per code type, lat/long, ``<p>location_codes`` JSON."""

    def __init__(self, prefix: str, label: str) -> None:
        p = f"{prefix}_" if prefix else ""
        self.label = label
        self.name = f"{p}location_name"
        self.latitude = f"{p}latitude"
        self.longitude = f"{p}longitude"
        self.codes = f"{p}location_codes"
        self.code_columns = {code_type: f"{p}{suffix}" for code_type, suffix in LOCATION_CODE_TYPES.items()}

    def columns(self) -> list[Column]:
        cols = [Column(self.name, VARCHAR, f"{self.label}: location name")]
        cols += [
            Column(col, VARCHAR, f"{self.label}: first location code of type {code_type}")
            for code_type, col in self.code_columns.items()
        ]
        cols += [
            Column(self.latitude, DOUBLE, f"{self.label}: latitude"),
            Column(self.longitude, DOUBLE, f"{self.label}: longitude"),
            Column(self.codes, JSON, f"{self.label}: all location codes as sent ([{{type, code}}])"),
        ]
        return cols

    def put(self, row: Row, value: Any, path: str) -> None:
        location = as_object(value, path)
        if location is None:
            return
        try:
            for column, key, convert in (
                (self.name, "name", to_str),
                (self.latitude, "latitude", to_float),
                (self.longitude, "longitude", to_float),
            ):
                raw = location.get(key)
                if raw is not None:
                    row[column] = convert(raw)
        except Invalid as exc:
            raise NormalizationError(f"{join_path(path, key)}: {exc}") from None
        codes = location.get("codes")
        if codes is None:
            return
        codes_path = join_path(path, "codes")
        for _, code_path, item in as_items(codes, codes_path):
            code_type, code = item.get("type"), item.get("code")
            column = self.code_columns.get(code_type) if isinstance(code_type, str) else None
            if column is not None and code is not None and column not in row:
                try:
                    row[column] = to_str(code)
                except Invalid as exc:
                    raise NormalizationError(f"{code_path}.code: {exc}") from None
        row[self.codes] = to_json(codes)


# --- contact ---------------------------------------------------------------------------------------


class ContactGroup:
    """A contact object -> ``contact_name``, ``contact_phone_number``, ``contact_fax_number``,
    ``contact_email`` and the whole object in ``contact_json`` (its fields are not fully specified)."""

    KEYS = ("name", "phone_number", "fax_number", "email")

    def __init__(self, prefix: str = "contact") -> None:
        self.prefix = prefix
        self.fields = compile_fields(Field(f"{prefix}_{key}", VARCHAR, source=key) for key in self.KEYS)
        self.json = f"{prefix}_json"

    def columns(self) -> list[Column]:
        cols = [
            Column(f"{self.prefix}_{key}", VARCHAR, f"contact {key.replace('_', ' ')}") for key in self.KEYS
        ]
        cols.append(
            Column(
                self.json, JSON, "the whole contact object as sent (fields beyond these are not specified)"
            )
        )
        return cols

    def put(self, row: Row, value: Any, path: str) -> None:
        contact = as_object(value, path)
        if contact is None:
            return
        copy_fields(row, contact, self.fields, path)
        row[self.json] = to_json(contact)


def columns_of(*parts: Iterable[Column] | Iterable[Field]) -> tuple[Column, ...]:
    """Flatten Columns and Fields (as columns) into one tuple, in order."""
    out: list[Column] = []
    for part in parts:
        for item in part:
            out.append(item.as_column() if isinstance(item, Field) else item)
    return tuple(out)
