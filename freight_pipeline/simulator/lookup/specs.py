"""The four lookup groups (shipments, memo lines, code conversions, E-Files), the result cache and
the criteria helpers the endpoints use."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from freight_pipeline.simulator.lookup.match import compile_criteria, order_rows, page_of
from freight_pipeline.simulator.lookup.types import (
    DATE,
    MONTH,
    TIME,
    Criterion,
    KeyKind,
    LookupSpec,
    Page,
    PageRequest,
    Row,
    _field_getter,
    one_of,
)
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
        "codeconverter": dataclasses.replace(LookupSpec.fields(
            "code conversion", kinds(CODE_CONVERSION_KEYS), {"DIRECTION": one_of(CODE_CONVERSION_DIRECTIONS)}
        ), unnarrowed=True),
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


def in_millis(criteria: Sequence[Criterion], key: str) -> list[Criterion]:
    """``criteria`` with every value of ``key`` (a time ``HH:MM:SS``) as ``HH:MM:SS.000``, nested ones too: how a
    service whose times carry milliseconds compares a whole second (``EQUALS 10:15:30`` matches ``10:15:30.000``
    only; ``GT 10:15:30`` matches ``10:15:30.250``)."""
    return [
        dataclasses.replace(
            c,
            values=tuple(f"{v}.000" for v in c.values) if c.key == key else c.values,
            children=tuple(in_millis(c.children, key)),
        )
        for c in criteria
    ]
