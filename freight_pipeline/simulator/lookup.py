"""The lookup engine: criteria parsing and validation, matching, ordering and paging.

Generic over rows of mappings: a :class:`LookupSpec` names a group's identifier keys, how each is
read from a row and whether it compares as integer or string. Used for shipments (rows of
``store.shipment_key_rows()``), memo lines, code conversions and E-Files. Semantics follow
docs/assumptions.md A4-A7 (and A13, A14, A19 for the key sets).

Every problem raises :class:`CriteriaError` with a message naming it (HTTP 400).
"""

from __future__ import annotations

import datetime as dt
import math
import operator
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from freight_pipeline.simulator.config import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE
from freight_pipeline.simulator.store_api import (
    CLOSED_FLAGS,
    CODE_CONVERSION_DIRECTIONS,
    CODE_CONVERSION_KEYS,
    CUSTOMER_ADDRESS_TYPES,
    DIRECTIONS,
    MEMO_KEYS,
    MODES_OF_TRANSPORT,
    SHIPMENT_KEYS,
)

MATCH_MODES: tuple[str, ...] = ("EQUALS", "CONTAINS", "IN", "OR", "GT", "LT", "GE", "LE")
ORDER_MODES: tuple[str, ...] = ("ASC", "DESC")
CRITERION_FIELDS = frozenset({"key", "match_mode", "value", "values", "identifiers"})
MAX_NESTING = 8

Row = Mapping[str, Any]
Predicate = Callable[[Row], bool]


class CriteriaError(ValueError):
    """A lookup request is malformed; the message says what is wrong (HTTP 400)."""


class KeyKind(Enum):
    INT = "int"
    STR = "str"


@dataclass(frozen=True)
class ValueFormat:
    """What the value of a string key must look like (checked in every match mode but CONTAINS)."""

    description: str
    accepts: Callable[[str], bool]


def _parsed_format(description: str, pattern: str, parse: Callable[[str], Any]) -> ValueFormat:
    shape = re.compile(pattern)

    def accepts(value: str) -> bool:
        if not shape.fullmatch(value):
            return False
        try:
            parse(value)
        except ValueError:
            return False
        return True

    return ValueFormat(description, accepts)


def one_of(values: Sequence[str]) -> ValueFormat:
    return ValueFormat(f"one of {', '.join(values)}", frozenset(values).__contains__)


DATE = _parsed_format("a date YYYY-MM-DD", r"[0-9]{4}-[0-9]{2}-[0-9]{2}", dt.date.fromisoformat)
TIME = _parsed_format("a time HH:MM:SS", r"[0-9]{2}:[0-9]{2}:[0-9]{2}", dt.time.fromisoformat)
MONTH = _parsed_format("a month YYYY-MM", r"[0-9]{4}-[0-9]{2}", lambda v: dt.date.fromisoformat(f"{v}-01"))


@dataclass(frozen=True)
class LookupSpec:
    """A group's lookup keys: key -> (how to read it from a row, how it compares, its value format)."""

    group: str
    kinds: Mapping[str, KeyKind]
    getters: Mapping[str, Callable[[Row], Any]]
    id_getter: Callable[[Row], Any]
    formats: Mapping[str, ValueFormat] = field(default_factory=dict)

    @property
    def allowed(self) -> str:
        return ", ".join(self.kinds)

    @classmethod
    def keyed(
        cls, group: str, kinds: Mapping[str, KeyKind], formats: Mapping[str, ValueFormat], id_key: str = "ID"
    ) -> LookupSpec:
        """Rows are mappings whose keys are the identifier keys themselves."""
        return cls(group, kinds, {k: operator.itemgetter(k) for k in kinds}, operator.itemgetter(id_key), formats)

    @classmethod
    def fields(
        cls, group: str, kinds: Mapping[str, KeyKind], formats: Mapping[str, ValueFormat], id_field: str = "id"
    ) -> LookupSpec:
        """Rows are records whose field is the lower-case key (``CLIENT`` -> ``client``)."""
        getters = {k: _field_getter(k.lower()) for k in kinds}
        return cls(group, kinds, getters, _field_getter(id_field), formats)


def _field_getter(name: str) -> Callable[[Row], Any]:
    def get(row: Row) -> Any:
        return row.get(name)

    return get


@dataclass(frozen=True)
class Criterion:
    key: str | None
    mode: str
    values: tuple[Any, ...]  # coerced to the key's kind; empty for a pure group
    children: tuple[Criterion, ...]


@dataclass(frozen=True)
class PageRequest:
    page_no: int = 0
    page_size: int = DEFAULT_PAGE_SIZE
    order: tuple[tuple[str, bool], ...] = ()  # (key, descending)


@dataclass(frozen=True)
class Page:
    rows: list[Row]
    row_count: int
    page_count: int

    def headers(self) -> dict[str, str]:
        return {"X-Page-Count": str(self.page_count), "X-Row-Count": str(self.row_count)}


# --- parsing -----------------------------------------------------------------------------------


def parse_criteria(body: Any, spec: LookupSpec) -> list[Criterion]:
    if not isinstance(body, list):
        raise CriteriaError(f"lookup body must be a JSON array of criteria, got {_json_type(body)}")
    return [_parse_criterion(item, spec, f"criterion[{i}]", 0) for i, item in enumerate(body)]


def _parse_criterion(item: Any, spec: LookupSpec, where: str, depth: int) -> Criterion:
    if depth > MAX_NESTING:
        raise CriteriaError(f"{where}: identifiers nested deeper than {MAX_NESTING} levels")
    if not isinstance(item, dict):
        raise CriteriaError(f"{where} must be a JSON object, got {_json_type(item)}")
    unknown = sorted(set(item) - CRITERION_FIELDS)
    if unknown:
        raise CriteriaError(f"{where}: unknown field(s) {unknown}; allowed: {sorted(CRITERION_FIELDS)}")
    mode = item.get("match_mode")
    mode = "EQUALS" if mode is None else mode
    if mode not in MATCH_MODES:
        raise CriteriaError(f"{where}: unknown match_mode {mode!r}; allowed: {', '.join(MATCH_MODES)}")
    key = item.get("key")
    if key is not None and (not isinstance(key, str) or key not in spec.kinds):
        raise CriteriaError(f"{where}: unknown key {key!r} for the {spec.group} lookup; allowed: {spec.allowed}")

    children: tuple[Criterion, ...] = ()
    identifiers = item.get("identifiers")
    if identifiers is not None:
        if not isinstance(identifiers, list) or not identifiers:
            raise CriteriaError(f"{where}: identifiers must be a non-empty JSON array of criteria")
        children = tuple(
            _parse_criterion(sub, spec, f"{where}.identifiers[{i}]", depth + 1) for i, sub in enumerate(identifiers)
        )

    raw = _raw_values(item, mode, where)
    if key is None:
        if not children:
            raise CriteriaError(f"{where}: key is required")
        if raw:
            raise CriteriaError(f"{where}: value given without a key")
        return Criterion(None, mode, (), children)
    if not raw and not children:
        raise CriteriaError(f"{where}: missing value for key {key} (give value or values)")
    if mode == "CONTAINS":  # free text on every key
        return Criterion(key, mode, tuple(_text(v, key, where) for v in raw), children)
    values = tuple(_checked(_coerce(v, spec.kinds[key], key, where), spec.formats.get(key), key, where) for v in raw)
    return Criterion(key, mode, values, children)


def _raw_values(item: Mapping[str, Any], mode: str, where: str) -> list[Any]:
    values = item.get("values")
    if values is not None and item.get("value") is not None:
        raise CriteriaError(f"{where}: give value or values, not both")
    if values is not None:
        if not isinstance(values, list) or not values:
            raise CriteriaError(f"{where}: values must be a non-empty JSON array")
        return list(values)
    value = item.get("value")
    if value is None:
        return []
    if mode in ("IN", "OR") and isinstance(value, str):
        parts = [p.strip() for p in value.split(",")]
        return [p for p in parts if p] or [value]
    return [value]


def _text(value: Any, key: str, where: str) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise CriteriaError(f"{where}: value {value!r} for key {key} must be a string or a number")
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _checked(value: Any, value_format: ValueFormat | None, key: str, where: str) -> Any:
    if value_format is not None and not value_format.accepts(value):
        raise CriteriaError(f"{where}: value {value!r} for key {key} must be {value_format.description}")
    return value


def _coerce(value: Any, kind: KeyKind, key: str, where: str) -> Any:
    text = _text(value, key, where)
    if kind is KeyKind.INT:
        try:
            return int(text.strip())
        except ValueError:
            raise CriteriaError(f"{where}: value {value!r} for key {key} must be an integer") from None
    return text


def parse_page_request(
    page_no: str | None,
    page_size: str | None,
    order_by: Sequence[str],
    order_mode: Sequence[str],
    spec: LookupSpec | None,
) -> PageRequest:
    """Query parameters of a lookup (or, with ``spec=None`` and no ordering, of a scroll)."""
    number = _int_param("page_no", page_no, 0)
    size = _int_param("page_size", page_size, DEFAULT_PAGE_SIZE)
    if number < 0:
        raise CriteriaError(f"page_no must be 0 or greater, got {number}")
    if not 1 <= size <= MAX_PAGE_SIZE:
        raise CriteriaError(f"page_size must be between 1 and {MAX_PAGE_SIZE}, got {size}")
    keys = _split(order_by)
    modes = _split(order_mode)
    if spec is None and (keys or modes):
        raise CriteriaError("this endpoint does not take order_by or order_mode")
    if len(modes) > len(keys):
        raise CriteriaError(f"{len(modes)} order_mode values given for {len(keys)} order_by keys")
    order: list[tuple[str, bool]] = []
    for i, key in enumerate(keys):
        assert spec is not None
        if key not in spec.kinds:
            raise CriteriaError(f"unknown order_by key {key!r} for the {spec.group} lookup; allowed: {spec.allowed}")
        mode = modes[i] if i < len(modes) else "ASC"
        if mode not in ORDER_MODES:
            raise CriteriaError(f"unknown order_mode {mode!r}; allowed: ASC, DESC")
        order.append((key, mode == "DESC"))
    return PageRequest(number, size, tuple(order))


def _int_param(name: str, raw: str | None, default: int) -> int:
    if raw is None or raw == "":
        return default
    try:
        return int(raw.strip())
    except ValueError:
        raise CriteriaError(f"{name} must be an integer, got {raw!r}") from None


def _split(values: Sequence[str]) -> list[str]:
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


# --- matching ----------------------------------------------------------------------------------


def compile_criteria(criteria: Sequence[Criterion], spec: LookupSpec) -> Predicate:
    predicates = [_compile(c, spec) for c in criteria]
    if not predicates:
        return lambda row: True
    if len(predicates) == 1:
        return predicates[0]
    return lambda row: all(p(row) for p in predicates)


def _compile(criterion: Criterion, spec: LookupSpec) -> Predicate:
    members = [_compile(child, spec) for child in criterion.children]
    if criterion.key is not None and criterion.values:
        members.append(_leaf(criterion, spec))
    if len(members) == 1:
        return members[0]
    if criterion.children and criterion.mode == "OR":
        return lambda row: any(p(row) for p in members)
    return lambda row: all(p(row) for p in members)


def _leaf(criterion: Criterion, spec: LookupSpec) -> Predicate:
    assert criterion.key is not None
    get = spec.getters[criterion.key]
    test = _value_test(criterion.mode, criterion.values)

    def match(row: Row) -> bool:
        field = get(row)
        if field is None:
            return False
        if isinstance(field, tuple | list):
            return any(item is not None and test(item) for item in field)
        return test(field)

    return match


def _value_test(mode: str, values: tuple[Any, ...]) -> Callable[[Any], bool]:
    if mode in ("EQUALS", "IN", "OR"):
        wanted = frozenset(values)
        return lambda field: field in wanted
    if mode == "CONTAINS":
        needles = [str(v).lower() for v in values]
        return lambda field: any(n in str(field).lower() for n in needles)
    compare = {"GT": operator.gt, "LT": operator.lt, "GE": operator.ge, "LE": operator.le}[mode]

    def test(field: Any) -> bool:
        try:
            return any(compare(field, v) for v in values)
        except TypeError:
            return False

    return test


# --- ordering and paging -------------------------------------------------------------------------


def _sortable(value: Any) -> tuple[int, Any]:
    # None sorts first in ascending order (and so last in descending order).
    return (0, 0) if value is None else (1, value)


def order_rows(rows: list[Row], order: Sequence[tuple[str, bool]], spec: LookupSpec) -> list[Row]:
    """Sort in place by the given keys, then by id ascending (the tie-breaker of A7).

    Runs of keys with the same direction are sorted in one stable pass with a tuple key, last run
    first; the id tie-breaker joins the last run when that run is ascending.
    """
    runs: list[tuple[list[Callable[[Row], Any]], bool]] = []
    for key, descending in order:
        if runs and runs[-1][1] == descending:
            runs[-1][0].append(spec.getters[key])
        else:
            runs.append(([spec.getters[key]], descending))
    if runs and not runs[-1][1]:
        runs[-1][0].append(spec.id_getter)
    else:
        rows.sort(key=spec.id_getter)
    for getters, descending in reversed(runs):
        columns = [_sort_column(rows, g) for g in getters]
        keys: list[Any] = columns[0] if len(columns) == 1 else list(zip(*columns, strict=True))
        positions = sorted(range(len(rows)), key=keys.__getitem__, reverse=descending)
        rows[:] = [rows[i] for i in positions]
    return rows


def _sort_column(rows: list[Row], get: Callable[[Row], Any]) -> list[Any]:
    column = [get(r) for r in rows]
    return [_sortable(v) for v in column] if None in column else column


def page_of(rows: Sequence[Row], request: PageRequest) -> Page:
    total = len(rows)
    start = request.page_no * request.page_size
    selected = list(rows[start : start + request.page_size]) if start < total else []
    return Page(selected, total, math.ceil(total / request.page_size))


def run_lookup(rows: Iterable[Row], criteria: Sequence[Criterion], request: PageRequest, spec: LookupSpec) -> Page:
    predicate = compile_criteria(criteria, spec)
    found = [row for row in rows if predicate(row)]
    return page_of(order_rows(found, request.order, spec), request)


def _json_type(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    return "a number"


# --- the groups ----------------------------------------------------------------------------------


def _efile_references(row: Row) -> tuple[str, ...]:
    return tuple(str(r.get("value")) for r in row.get("references") or () if r.get("value") is not None)


def _efile_shipment_ids(row: Row) -> tuple[int, ...]:
    ids: list[int] = []
    for ref in row.get("references") or ():
        if ref.get("type") == "SHIPMENT":
            try:
                ids.append(int(str(ref.get("value")).strip()))
            except ValueError:
                continue
    return tuple(ids)


def _build_specs() -> dict[str, LookupSpec]:
    int_keys = {"ID", "RUNNING_SEQUENCE_NUMBER", "CUSTOMER_ADDRESS_NUMBER", "RUNNING_NUMBER"}

    def kinds(keys: Iterable[str]) -> dict[str, KeyKind]:
        return {k: KeyKind.INT if k in int_keys else KeyKind.STR for k in keys}

    shipment_formats = {
        "DIRECTION": one_of(DIRECTIONS),
        "MODE_OF_TRANSPORT": one_of(MODES_OF_TRANSPORT),
        "MONTH_OF_SERVICE": MONTH,
        "CREATION_DATE": DATE,
        "CUSTOMER_ADDRESS_TYPE": one_of(CUSTOMER_ADDRESS_TYPES),
        "SHIPMENT_CLOSED": one_of(CLOSED_FLAGS),
        "LAST_MODIFIED_DATE": DATE,
        "LAST_MODIFIED_TIME": TIME,
    }
    efile_kinds = {"REFERENCE": KeyKind.STR, "SHIPMENT_ID": KeyKind.INT}
    return {
        "shipment": LookupSpec.keyed("shipment", kinds(SHIPMENT_KEYS), shipment_formats),
        "memo": LookupSpec.fields("memo", kinds(MEMO_KEYS), {}),
        "codeconverter": LookupSpec.fields(
            "code conversion", kinds(CODE_CONVERSION_KEYS), {"DIRECTION": one_of(CODE_CONVERSION_DIRECTIONS)}
        ),
        "efile": LookupSpec(
            "E-File",
            efile_kinds,
            {"REFERENCE": _efile_references, "SHIPMENT_ID": _efile_shipment_ids},
            _field_getter("id"),
        ),
    }


SPECS: dict[str, LookupSpec] = _build_specs()
SHIPMENT_SPEC = SPECS["shipment"]
MEMO_SPEC = SPECS["memo"]
CODE_CONVERSION_SPEC = SPECS["codeconverter"]
EFILE_SPEC = SPECS["efile"]


class ResultCache:
    """Ordered lookup results by (criteria, order), valid while the store's data version is unchanged.

    Lets a client page through a large result without a full scan and sort per page.
    """

    def __init__(self, size: int = 16) -> None:
        self._size = size
        self._entries: dict[Any, tuple[int, list[Row]]] = {}
        self._lock = threading.Lock()

    def get(self, key: Any, version: int) -> list[Row] | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry[0] != version:
                return None
            self._entries[key] = self._entries.pop(key)  # most recently used last
            return entry[1]

    def put(self, key: Any, version: int, rows: list[Row]) -> None:
        with self._lock:
            self._entries.pop(key, None)
            self._entries[key] = (version, rows)
            while len(self._entries) > self._size:
                self._entries.pop(next(iter(self._entries)))


def cached_lookup(
    rows: Callable[[], Iterable[Row]],
    criteria: Sequence[Criterion],
    request: PageRequest,
    spec: LookupSpec,
    cache: ResultCache,
    version: int,
) -> Page:
    """:func:`run_lookup`, reusing the ordered result while ``version`` is unchanged.

    ``version`` must be read before ``rows()`` is called, so a cached result is never older than
    its version.
    """
    key = (spec.group, tuple(criteria), request.order)
    ordered = cache.get(key, version)
    if ordered is None:
        predicate = compile_criteria(criteria, spec)
        ordered = order_rows([row for row in rows() if predicate(row)], request.order, spec)
        cache.put(key, version, ordered)
    return page_of(ordered, request)


def equals_value(criteria: Sequence[Criterion], key: str) -> Any | None:
    """The value of a top-level ``key EQUALS value`` criterion (one value, no nesting), if any.

    Top-level criteria are AND-ed, so the rows holding that value are a superset of the result: a
    store can narrow the candidates with an index and :func:`run_lookup` still applies every criterion.
    """
    for c in criteria:
        if c.key == key and c.mode == "EQUALS" and len(c.values) == 1 and not c.children:
            return c.values[0]
    return None


def any_of_values(criteria: Sequence[Criterion], key: str) -> tuple[Any, ...] | None:
    """The values of a top-level ``key EQUALS value(s)`` criterion (no nesting), if any: the rows
    holding one of them are a superset of the result (top-level criteria are AND-ed)."""
    for c in criteria:
        if c.key == key and c.mode in ("EQUALS", "IN", "OR") and c.values and not c.children:
            return c.values
    return None
