"""Persistent corruption of chosen records: the bad data a real service sends, reproducible over HTTP.

Unlike the random and scripted faults (``faults.py``), which hit requests, a corruption sticks to
one record and changes every answer about it until healed, while the store keeps the true data (so
a test's oracle still knows what the record should hold). A record is named by the endpoint that
answers for it and an id:

========================  ===================================================================
endpoint                  record id, and what is corrupted
========================  ===================================================================
``shipment``              shipment id: ``GET /service/shipment/{id}``
``events``                shipment id: ``GET /service/shipment/{id}/events``
``airmaincarriage``       shipment id: ``GET /service/shipment/{id}/airmaincarriage``
``seamaincarriage``       shipment id: ``GET /service/shipment/{id}/seamaincarriage``
``memos``                 shipment id: the memo lookup of that shipment's client and number
``codeconverter``         conversion id: that record wherever it is answered (scroll, lookup, retrieve)
``efile``                 E-File id: ``GET /service/efile/{id}`` (with or without cascade)
``efilereferences``       E-File id: ``GET /service/efile/{id}/reference``
``efileroles``            E-File id: ``GET /service/efile/{id}/role``
========================  ===================================================================

Kinds: ``truncated`` (a 200 whose JSON body is cut short), ``status`` (an error status, A3 body),
``set`` (``path`` set to ``value``, null included), ``remove`` (``path`` removed), ``wrap`` (the
array answered inside an object under ``key``), ``single_object`` (the array's first item answered
alone). Paths read ``total_packages``, ``addresses[0].address_number``, ``[0].date_time.zone_offset``.
A record answered inside a list (a code conversion) takes only ``set`` and ``remove``.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

ENDPOINTS = ("shipment", "events", "airmaincarriage", "seamaincarriage", "memos", "codeconverter", "efile",
             "efilereferences", "efileroles")
KINDS = ("truncated", "status", "set", "remove", "wrap", "single_object")
ITEM_KINDS = ("set", "remove")
"""What can be done to a record answered as one item of a list."""
_STEP = re.compile(r"\[(\d+)\]|\.?([^.\[\]]+)")
_PATH = re.compile(r"(?:\[\d+\]|[^.\[\]]+)(?:\[\d+\]|\.[^.\[\]]+)*")


class CorruptionError(ValueError):
    """A corruption that cannot be planted (unknown endpoint or kind, a path the record lacks)."""


@dataclass(frozen=True)
class Answer:
    """A corrupted answer: a status and the body bytes to send as JSON."""

    status: int
    body: bytes


@dataclass(frozen=True)
class Corruption:
    endpoint: str
    record_id: int
    kind: str
    path: str | None = None
    value: Any = None
    status: int | None = None
    key: str | None = None

    def __post_init__(self) -> None:
        if self.endpoint not in ENDPOINTS:
            raise CorruptionError(f"unknown endpoint {self.endpoint!r}; allowed: {', '.join(ENDPOINTS)}")
        if self.kind not in KINDS:
            raise CorruptionError(f"unknown kind {self.kind!r}; allowed: {', '.join(KINDS)}")
        if self.endpoint == "codeconverter" and self.kind not in ITEM_KINDS:
            raise CorruptionError(f"a code conversion is answered inside lists: only {', '.join(ITEM_KINDS)}")
        if self.kind == "status" and not (isinstance(self.status, int) and 400 <= self.status <= 599):
            raise CorruptionError("kind 'status' needs a status from 400 to 599")
        if self.kind in ("set", "remove") and not self.path:
            raise CorruptionError(f"kind {self.kind!r} needs a path")
        if self.kind == "wrap" and not self.key:
            raise CorruptionError("kind 'wrap' needs a key")

    def to_dict(self) -> dict[str, Any]:
        """Its fields as given (not ``asdict``, which copies ``value`` by recursion: a goods tree 300 levels deep
        raised RecursionError, a 500)."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if getattr(self, f.name) is not None or (f.name == "value" and self.kind == "set")}

    def apply(self, payload: Any) -> Any | Answer:
        """``payload`` as this corruption answers it: a changed payload, or a whole :class:`Answer`."""
        if self.kind == "status":
            assert self.status is not None
            body = {"status": self.status, "error": "simulated", "message": f"simulated failure of {self.endpoint}"}
            return Answer(self.status, json.dumps(body).encode())
        if self.kind == "truncated":
            text = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
            return Answer(200, text[: len(text) // 2] if len(text) > 1 else b"{")
        if self.kind == "wrap":
            return {self.key: payload}
        if self.kind == "single_object":
            if not isinstance(payload, list) or not payload:
                raise CorruptionError(f"{self.endpoint} {self.record_id} answers no list item to send alone")
            return payload[0]
        assert self.path is not None
        changed = json.loads(json.dumps(payload))
        parent, last = _parent(changed, self.path)
        if self.kind == "set":
            if isinstance(parent, list):
                parent[int(last)] = self.value
            else:
                parent[last] = self.value
        else:
            del parent[int(last) if isinstance(parent, list) else last]
        return changed


def _parent(doc: Any, path: str) -> tuple[Any, str]:
    """The container holding the last step of ``path``, and that step (an index as digits)."""
    if not _PATH.fullmatch(path):
        raise CorruptionError(f"unreadable path {path!r} (write it as addresses[0].address_number)")
    steps = [index or name for index, name in _STEP.findall(path)]
    node = doc
    for step in steps[:-1]:
        node = _step(node, step, path)
    last = steps[-1]
    if isinstance(node, list):
        if not last.isdigit() or int(last) >= len(node):
            raise CorruptionError(f"path {path!r}: no item {last} in the record")
    elif not isinstance(node, dict):
        raise CorruptionError(f"path {path!r}: {type(node).__name__} has no field {last!r}")
    return node, last


def _step(node: Any, step: str, path: str) -> Any:
    if isinstance(node, list) and step.isdigit() and int(step) < len(node):
        return node[int(step)]
    if isinstance(node, dict) and not step.isdigit() and isinstance(node.get(step), dict | list):
        return node[step]
    raise CorruptionError(f"path {path!r}: the record has no {step!r} to go into")


class Corruptions:
    """The planted corruptions, by (endpoint, record id). Thread-safe."""

    def __init__(self) -> None:
        self._planted: dict[tuple[str, int], list[Corruption]] = {}
        self._lock = threading.Lock()

    def plant(self, corruption: Corruption, current: Callable[[], Any]) -> None:
        """Add ``corruption``, tried first on the record's ``current`` answer so a bad path is refused now."""
        payload = current()
        for earlier in self.of(corruption.endpoint, corruption.record_id):
            payload = earlier.apply(payload)
            if isinstance(payload, Answer):
                raise CorruptionError(f"{corruption.endpoint} {corruption.record_id} already answers a whole error")
        corruption.apply(payload)
        with self._lock:
            self._planted.setdefault((corruption.endpoint, corruption.record_id), []).append(corruption)

    def of(self, endpoint: str, record_id: int) -> list[Corruption]:
        with self._lock:
            return list(self._planted.get((endpoint, record_id), ()))

    def record_ids(self, endpoint: str) -> list[int]:
        with self._lock:
            return [i for e, i in self._planted if e == endpoint]

    def apply(self, endpoint: str, record_id: int, payload: Any) -> Any | Answer:
        """``payload`` with every corruption of the record applied (an :class:`Answer` ends it)."""
        for corruption in self.of(endpoint, record_id):
            payload = corruption.apply(payload)
            if isinstance(payload, Answer):
                return payload
        return payload

    def apply_to_items(self, endpoint: str, items: list[Any]) -> list[Any]:
        """A list answer whose items are records of ``endpoint`` (by their ``id``), each corrupted."""
        if not self.record_ids(endpoint):
            return items
        return [
            self.apply(endpoint, item["id"], item) if isinstance(item, dict) and isinstance(item.get("id"), int)
            else item
            for item in items
        ]

    def listing(self) -> list[dict[str, Any]]:
        with self._lock:
            return [c.to_dict() for planted in self._planted.values() for c in planted]

    def heal(self, endpoint: str | None = None, record_id: int | None = None) -> int:
        """Remove the corruptions of one record, one endpoint, or all; returns how many were removed."""
        with self._lock:
            keys = [k for k in self._planted if endpoint in (None, k[0]) and record_id in (None, k[1])]
            return sum(len(self._planted.pop(k)) for k in keys)
