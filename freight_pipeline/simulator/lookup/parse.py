"""Criteria and paging parameters from a request, validated; every problem a ``CriteriaError`` naming it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from freight_pipeline.simulator.config import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE
from freight_pipeline.simulator.lookup.match import _json_type
from freight_pipeline.simulator.lookup.types import (
    CRITERION_FIELDS,
    MATCH_MODES,
    MAX_NESTING,
    ORDER_MODES,
    CriteriaError,
    Criterion,
    KeyKind,
    LookupSpec,
    PageRequest,
    ValueFormat,
)

# --- parsing -----------------------------------------------------------------------------------


# Under strict criteria, the one field each match mode takes (every other mode: "value").
STRICT_FIELD: dict[str, str] = {"IN": "values", "OR": "identifiers"}


def parse_criteria(body: Any, spec: LookupSpec, strict: bool = False) -> list[Criterion]:
    """The criteria of a lookup body; ``strict`` refuses the forms the spec does not name (:func:`_check_strict`)."""
    if not isinstance(body, list):
        raise CriteriaError(f"lookup body must be a JSON array of criteria, got {_json_type(body)}")
    if strict and not body and not spec.unnarrowed:
        raise CriteriaError(f"the {spec.group} lookup needs at least one criterion (strict criteria)")
    return [_parse_criterion(item, spec, f"criterion[{i}]", 0, strict) for i, item in enumerate(body)]


def _check_strict(item: Mapping[str, Any], mode: str, where: str) -> None:
    """The strict reading of the spec: ``IN`` takes ``values``, ``OR`` ``identifiers``, every other mode ``value``."""
    wanted = STRICT_FIELD.get(mode, "value")
    given = [name for name in ("value", "values", "identifiers") if item.get(name) is not None]
    key = item.get("key")
    named = f"{where} (key {key})" if isinstance(key, str) else where
    extra = [name for name in given if name != wanted]
    if extra:
        raise CriteriaError(
            f"{named}: match_mode {mode} takes {wanted!r}, not {' or '.join(repr(e) for e in extra)} (strict criteria)"
        )
    if wanted not in given:
        raise CriteriaError(f"{named}: match_mode {mode} needs {wanted!r} (strict criteria)")


def _parse_criterion(item: Any, spec: LookupSpec, where: str, depth: int, strict: bool) -> Criterion:
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
    if strict:
        _check_strict(item, mode, where)
    key = item.get("key")
    if key is not None and (not isinstance(key, str) or key not in spec.kinds):
        raise CriteriaError(f"{where}: unknown key {key!r} for the {spec.group} lookup; allowed: {spec.allowed}")

    children: tuple[Criterion, ...] = ()
    identifiers = item.get("identifiers")
    if identifiers is not None:
        if not isinstance(identifiers, list) or not identifiers:
            raise CriteriaError(f"{where}: identifiers must be a non-empty JSON array of criteria")
        children = tuple(
            _parse_criterion(sub, spec, f"{where}.identifiers[{i}]", depth + 1, strict)
            for i, sub in enumerate(identifiers)
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
