"""The lookup engine's vocabulary: match modes, key kinds and value formats, a group's
``LookupSpec``, criteria, pages."""

from __future__ import annotations

import datetime as dt
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from freight_pipeline.simulator.config import DEFAULT_PAGE_SIZE

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
    unnarrowed: bool = False
    """Strict criteria still answer a lookup without a criterion (the code conversions': no key every conversion
    has can narrow it to all of them); the other groups' refuse it (400)."""

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
