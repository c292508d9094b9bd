"""Field declarations and value converters shared by every table.

A :class:`Field` maps one source key to one column: the same object gives the table spec its
:class:`Column` and gives the flattener its converter, so the declaration exists once. Converters
are plain functions on the hot path (no per-row model objects); they are lenient where the meaning
is unambiguous (``"12.5"`` for a number, ``"J"`` for true) and raise :class:`Invalid` otherwise.
The functions that apply them to a record (``copy_fields``, ``as_object``, ``as_items``, the column
groups' ``put``) never raise for a value: they turn :class:`Invalid` into a null column and one
entry in the record's :class:`Problems` sink.

Groups of columns that repeat across tables (DateTime objects, locations, contacts) are small
classes with ``columns()`` for the spec and ``put(row, value, path)`` for the flattener.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import orjson

from freight_pipeline.datetimes import (
    DateTimeParseError,
    ParsedDateTime,
    parse_date,
    parse_iso_datetime,
    parse_time,
    read_datetime_object,
    to_utc,
)
from freight_pipeline.normalize.errors import Invalid, join_path, show
from freight_pipeline.normalize.problems import Problems
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
_INT32_MAX = 2**31 - 1
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_TRUE = frozenset({"true", "t", "j", "y", "yes", "1"})
_FALSE = frozenset({"false", "f", "n", "no", "0"})


# --- converters: value (never None) -> column value; raise Invalid ---------------------------------


def is_text(value: str) -> bool:
    """Whether ``value`` can be stored as UTF-8 (a JSON ``\\ud800`` escape decodes to a lone surrogate)."""
    return value.isascii() or _LONE_SURROGATE.search(value) is None


def to_str(value: Any) -> str:
    if type(value) is str:
        if is_text(value):
            return value
        raise Invalid(f"{show(value)} is not valid Unicode text (lone surrogate)")
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
        if "_" in text:  # Python reads "1_000"; the service's numbers never have separators
            raise Invalid(f"{show(value)} is not an integer")
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


def to_int32(value: Any) -> int:
    result = to_int(value)
    if -_INT32_MAX - 1 <= result <= _INT32_MAX:
        return result
    raise Invalid(f"{show(value)} is out of the 32-bit integer range")


def to_float(value: Any) -> float:
    kind = type(value)
    if kind is float:
        number = value
    elif kind is int:
        try:
            return float(value)
        except OverflowError:
            raise Invalid(f"{show(value)} is out of the floating-point range") from None
    elif kind is str:
        try:
            if "_" in value:
                raise ValueError(value)
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
        if parsed is None or parsed.tzinfo is None:
            return None
        return to_utc(parsed)
    except DateTimeParseError as exc:
        raise Invalid(str(exc)) from None


def to_json(value: Any) -> str:
    """Canonical JSON text: keys sorted, so the same content gives the same text whatever key order
    the service sends (the code-conversions refresh compares rows, ``payload`` included).

    Lone surrogates (which no UTF-8 store accepts) become U+FFFD; a value nested too deeply to
    serialize raises :class:`Invalid`.
    """
    try:  # orjson: the fast path (it writes NaN and Infinity as null, as the fallback below does)
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    except (orjson.JSONEncodeError, TypeError):  # lone surrogates, integers beyond 64 bits, deep nesting
        pass
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True, allow_nan=False)
    except ValueError:  # NaN or Infinity, which JSON cannot carry: written as null, like JSON.stringify
        text = json.dumps(_finite(value), ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    except RecursionError:
        raise Invalid("value is nested too deeply to store as JSON") from None
    except TypeError as exc:  # keys of mixed types cannot be sorted (never from parsed JSON)
        raise Invalid(f"value cannot be stored as JSON: {exc}") from None
    return text if is_text(text) else _LONE_SURROGATE.sub("\ufffd", text)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


CONVERTERS: dict[str, Converter] = {
    VARCHAR: to_str,
    BIGINT: to_int,
    INTEGER: to_int32,
    DOUBLE: to_float,
    BOOLEAN: to_bool,
    DATE: to_date,
    TIMESTAMPTZ: to_instant,
    JSON: to_json,
}


# --- containers ------------------------------------------------------------------------------------


def as_object(value: Any, path: str, problems: Problems) -> Mapping[str, Any] | None:
    """A nested object, or None when null/absent or not an object (reported)."""
    if value is None or isinstance(value, dict):
        return value
    problems.add(path, value, f"{show(value)} is not an object")
    return None


def as_list(value: Any, path: str, problems: Problems) -> Sequence[Any]:
    """A nested array; null or absent is empty (many services send null for an empty collection:
    nothing is lost, so nothing is reported); anything else is empty and reported."""
    if isinstance(value, list):
        return value
    if value is not None:
        problems.add(path, value, f"{show(value)} is not an array (read as no items)")
    return ()


def as_items(value: Any, path: str, problems: Problems) -> Iterable[tuple[int, str, Mapping[str, Any]]]:
    """(1-based position, path, object) for each object of an array; null elements are skipped,
    other non-objects skipped and reported."""
    for index, item in enumerate(as_list(value, path, problems)):
        if item is None:
            continue
        item_path = f"{path}[{index}]"
        if not isinstance(item, dict):
            problems.add(item_path, item, f"{show(item)} is not an object")
            continue
        yield index + 1, item_path, item


def items_of(
    source: Mapping[str, Any], key: str, path: str, problems: Problems
) -> Iterable[tuple[int, str, Mapping[str, Any]]]:
    """``as_items`` of ``source[key]``."""
    return as_items(source.get(key), path, problems)


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


# Python type a value already has when no conversion is needed (skips the converter call for ASCII
# text and booleans; numbers always go through their converter for the range and finiteness checks).
_NATIVE_TYPES: dict[str, type] = {VARCHAR: str, BOOLEAN: bool}

CompiledFields = tuple[tuple[str, str, Converter, type | None], ...]


def compile_fields(fields: Iterable[Field]) -> CompiledFields:
    return tuple((f.column, f.key, CONVERTERS[f.type], _NATIVE_TYPES.get(f.type)) for f in fields)


def copy_fields(row: Row, source: Mapping[str, Any], fields: CompiledFields, path: str, problems: Problems) -> Row:
    """Convert each declared field of ``source`` into ``row``; absent and null stay absent (null);
    a value that cannot be converted stays null and is reported."""
    get = source.get
    for column, key, convert, native in fields:
        value = get(key)
        if value is None:
            continue
        if native is not None and type(value) is native and (native is bool or (native is str and value.isascii())):
            row[column] = value  # the common case, without a converter call
            continue
        if convert is to_json:
            row[column] = json_or_report(value, join_path(path, key), problems)
            continue
        try:
            row[column] = convert(value)
        except Invalid as exc:
            problems.add(join_path(path, key), value, str(exc))
    return row


def string_lines(value: Any, path: str, problems: Problems) -> list[tuple[int, str | None]]:
    """An array of strings as (1-based position, text); elements are coerced to text (null if they cannot be)."""
    lines: list[tuple[int, str | None]] = []
    for index, item in enumerate(as_list(value, path, problems)):
        if item is None:
            lines.append((index + 1, None))
            continue
        try:
            lines.append((index + 1, to_str(item)))
        except Invalid as exc:
            problems.add(f"{path}[{index}]", item, str(exc))
            lines.append((index + 1, None))
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
    """``parsed.instant`` or ``parsed.until`` in UTC; null and reported when it falls outside the calendar."""
    try:
        return to_utc(parsed.instant if which == "instant" else parsed.until)
    except DateTimeParseError as exc:
        problems.add(path, str(parsed.instant), str(exc))
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
        return text, to_instant(text)
    except Invalid:
        return text, None


def json_or_report(value: Any, path: str, problems: Problems) -> str | None:
    """``value`` as JSON text; unstorable: null and reported. NaN and Infinity inside it, which JSON
    cannot carry, are written as null and each reported at its own path."""
    try:
        text = to_json(value)
    except Invalid as exc:
        problems.add(path, show(value), str(exc))
        return None
    if "null" in text:  # cheap pre-check: a non-finite number became null
        for where, number in _non_finite(value, path):
            problems.add(where, number, f"{number} is not a finite number: null in the JSON column")
    return text


def _non_finite(value: Any, path: str) -> Iterable[tuple[str, float]]:
    if isinstance(value, float) and not math.isfinite(value):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _non_finite(item, join_path(path, str(key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _non_finite(item, f"{path}[{index}]")


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

    def put(self, row: Row, value: Any, path: str, problems: Problems) -> None:
        location = as_object(value, path, problems)
        if location is None:
            return
        for column, key, convert in (
            (self.name, "name", to_str),
            (self.latitude, "latitude", to_float),
            (self.longitude, "longitude", to_float),
        ):
            raw = location.get(key)
            if raw is not None:
                try:
                    row[column] = convert(raw)
                except Invalid as exc:
                    problems.add(join_path(path, key), raw, str(exc))
        codes = location.get("codes")
        if codes is None:
            return
        codes_path = join_path(path, "codes")
        for _, code_path, item in as_items(codes, codes_path, problems):
            code_type, code = item.get("type"), item.get("code")
            column = self.code_columns.get(code_type) if isinstance(code_type, str) else None
            if column is not None and code is not None and column not in row:
                try:
                    row[column] = to_str(code)
                except Invalid as exc:
                    problems.add(f"{code_path}.code", code, str(exc))
        if isinstance(codes, list):
            row[self.codes] = json_or_report(codes, codes_path, problems)


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

    def put(self, row: Row, value: Any, path: str, problems: Problems) -> None:
        contact = as_object(value, path, problems)
        if contact is None:
            return
        copy_fields(row, contact, self.fields, path, problems)
        row[self.json] = json_or_report(contact, path, problems)


def columns_of(*parts: Iterable[Column] | Iterable[Field]) -> tuple[Column, ...]:
    """Flatten Columns and Fields (as columns) into one tuple, in order."""
    out: list[Column] = []
    for part in parts:
        for item in part:
            out.append(item.as_column() if isinstance(item, Field) else item)
    return tuple(out)
