"""Matching rows against criteria, ordering them and cutting a page (A5-A7)."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from freight_pipeline.simulator.lookup.types import Criterion, LookupSpec, Page, PageRequest, Predicate, Row

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
