"""Column types and value converters: a source value (never None) -> a column value.

Converters are plain functions on the hot path (no per-row model objects); they are lenient where
the meaning is unambiguous (``"12.5"`` for a number, ``"J"`` for true) and raise :class:`Invalid`
otherwise. :func:`json_or_report` is the form of :func:`to_json` that never raises: an unstorable
value becomes null and one entry in the record's :class:`Problems` sink.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Callable, Iterable
from typing import Any

import orjson

from freight_pipeline.datetimes import DateTimeParseError, ServiceZone, parse_date, to_utc
from freight_pipeline.normalize.errors import Invalid, join_path, show
from freight_pipeline.normalize.problems import Problems

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
_BEYOND_INT64 = float(2**63)
"""The least float magnitude no 64-bit integer reaches: a whole float there in a text field was an integer literal
beyond 64 bits, which orjson reads as a float instead of refusing it."""
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_TRUE = frozenset({"true", "t", "j", "y", "yes", "1"})
_FALSE = frozenset({"false", "f", "n", "no", "0"})


# --- converters: value (never None) -> column value; raise Invalid ---------------------------------


def is_text(value: str) -> bool:
    """Whether ``value`` can be stored as UTF-8 (a JSON ``\\ud800`` escape decodes to a lone surrogate)."""
    return value.isascii() or _LONE_SURROGATE.search(value) is None


SPACE_SEPARATORS = ("\u0020\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f"
                    "\u205f\u3000")
"""Unicode's space separators (category Zs: the space, the no-break space, the ideographic space that pads fixed-width
fields, ...): what DuckDB's ``trim`` takes off, and so the marts' ``upper(trim(...))`` (a test holds it to both)."""


def code_of(text: str | None) -> str:
    """A code the service sent (a mode of transport) as the marts read it, ``upper(trim(...))``: its
    space separators trimmed, in upper case (``"sea\u00a0"`` is ``SEA``; none: ``""``)."""
    return (text or "").strip(SPACE_SEPARATORS).upper()


def text_or_none(value: Any) -> str | None:
    """``value`` as a text column reads it (:func:`to_str`: a number as its digits); None when none can."""
    if value is None:
        return None
    try:
        return to_str(value)
    except Invalid:
        return None


def to_str(value: Any) -> str:
    if type(value) is str:
        if is_text(value):
            return value
        raise Invalid(f"{show(value)} is not valid Unicode text (lone surrogate)")
    if isinstance(value, bool):
        return "true" if value else "false"
    if type(value) is float and value.is_integer() and abs(value) >= _BEYOND_INT64:
        # orjson reads an integer beyond 64 bits as a float: its text would lose digits (the raw record keeps them)
        raise Invalid(f"{show(value)} is a number beyond 64 bits, read as a float: its digits are lost as text")
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


def to_instant(value: Any, zone: ServiceZone | None = None) -> dt.datetime | None:
    """An ISO 8601 date-time string to a UTC instant; a value without an offset is read in the run's ``zone``
    (``copy_fields`` passes the record's; alone, as in shape probing, UTC)."""
    try:
        return to_utc((zone or ServiceZone()).parse(value))
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


# --- JSON with problems reported -------------------------------------------------------------------


def json_or_report(value: Any, path: str, problems: Problems, text: str | None = None) -> str | None:
    """``value`` as JSON text (``text``: already written, as :func:`to_json` writes it, its parts in another order
    maybe); unstorable: null and reported. What JSON or UTF-8 cannot carry inside it is written otherwise and each
    reported at its own path in ``value``: NaN and Infinity as null, text with a lone surrogate with U+FFFD in its
    place, an integer beyond 64 bits (which the parser read as a float) with its digits lost."""
    try:
        text = to_json(value) if text is None else text
    except Invalid as exc:
        problems.add(path, show(value), str(exc))
        return None
    # cheap pre-checks: a non-finite number became null, a surrogate U+FFFD, a number of 19 digits or more an
    # exponent; only then is the value walked, for what it has of each
    floats, texts = "null" in text or _LARGE_EXPONENT.search(text) is not None, "\ufffd" in text
    if floats or texts:
        found = list(_unstorable(value, path, floats, texts))
        said = {p.path for p in problems} if found else set()  # a field read into a column too: said there
        for where, bad, reason in found:
            if where not in said:
                problems.add(where, bad, reason)
    return text


_LARGE_EXPONENT = re.compile(r"\d[eE]\+?\d\d")
"""How a float of 19 digits or more (one beyond 64 bits among them) is written in JSON text (``3.4e+23``)."""


def _unstorable(value: Any, path: str, floats: bool, texts: bool) -> Iterable[tuple[str, Any, str]]:
    """(path, value, reason) of each value inside ``value`` that ``to_json`` writes otherwise than it came: a
    non-finite number or an integer beyond 64 bits read as a float (``floats``), a text or key with a lone
    surrogate (``texts``)."""
    if isinstance(value, float):
        if floats and not math.isfinite(value):
            yield path, value, f"{value} is not a finite number: null in the JSON column"
        elif floats and value.is_integer() and abs(value) >= _BEYOND_INT64:
            yield path, value, f"{value} is a number beyond 64 bits, read as a float: its digits are lost in the " \
                "JSON column"
    elif isinstance(value, str):
        if texts and not is_text(value):
            yield path, value, f"{show(value)} is not valid Unicode text (lone surrogate): U+FFFD in the JSON column"
    elif isinstance(value, dict):
        for key, item in value.items():
            name = str(key)
            if texts and not is_text(name):  # the path is stored too: as the key is written
                name = _LONE_SURROGATE.sub("\ufffd", name)
                yield join_path(path, name), key, f"key {show(key)} is not valid Unicode text (lone surrogate): " \
                    "U+FFFD in the JSON column"
            yield from _unstorable(item, join_path(path, name), floats, texts)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _unstorable(item, f"{path}[{index}]", floats, texts)
