"""Reads of the simulator store (:class:`StoreReader`): shipment documents, memo lines, code
conversions, and the helpers tests use to compare a warehouse with the source.

Full documents are generated on demand from compact state and kept in a small LRU cache as JSON
text (so every caller gets its own copy): each version's document and, written from it once, the answers
of its lookup row and detail endpoints (:class:`Rendered`; a request for one used to read the whole document's
JSON again, a quarter of the simulator's CPU in a full sync); generation runs outside the lock on immutable
snapshots. A naive clock's documents have their DateTime objects in its zone's wall clock (:mod:`.data_naive`).
With fractional stamps (:meth:`~.clock.SimClock.stamp_millis`) a document's ``last_modified_date_time`` and its
lookup key ``LAST_MODIFIED_TIME`` carry the version's milliseconds (:class:`FractionalKeys`).
"""

from __future__ import annotations

import copy
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from freight_pipeline.simulator.data_naive import without_offsets
from freight_pipeline.simulator.data_transport import AIR_LEG_FIELDS, SEA_LEG_FIELDS, carriage_subset
from freight_pipeline.simulator.generator import ShipmentState, base_shipment, build_document
from freight_pipeline.simulator.json_text import dumps, loads
from freight_pipeline.simulator.store_api import NotFound
from freight_pipeline.simulator.store_data import EventKey, StoreData


@dataclass(frozen=True)
class Rendered:
    """One version of a shipment as the simulator answers it, as JSON (``json_text.dumps``): its document, the
    base shipment of a lookup page, and the answer of each detail endpoint, by its name (:data:`RECORD_ANSWERS`)."""

    document: bytes
    base: bytes
    events: bytes
    air_legs: bytes
    sea_legs: bytes

    def answer(self, endpoint: str) -> bytes:
        return getattr(self, RECORD_ANSWERS[endpoint])


RECORD_ANSWERS = {"shipment": "document", "events": "events", "airmaincarriage": "air_legs",
                  "seamaincarriage": "sea_legs"}
"""The record endpoints (by their corruptions name) -> the :class:`Rendered` field of their answer."""


def rendered(doc: dict[str, Any]) -> Rendered:
    """``doc``'s answers (:class:`Rendered`): the document, its base shipment (assumption A9), its events and
    its air and sea main-carriage legs (none unless the shipment goes by that mode)."""
    mode, carriage = doc["mode_of_transport"], doc["main_carriage"]
    return Rendered(
        dumps(doc), dumps(base_shipment(doc)), dumps(doc["events"]),
        dumps(carriage_subset(carriage["carriage_legs"], AIR_LEG_FIELDS) if mode == "AIR" else []),
        dumps(carriage_subset(carriage["carriage_legs"], SEA_LEG_FIELDS) if mode == "SEA" else []),
    )


class FractionalKeys(Mapping[str, Any]):
    """The lookup key row of a shipment whose stamp carries milliseconds: its state's keys, with
    ``LAST_MODIFIED_TIME`` as ``HH:MM:SS.fff`` (text that orders and compares as the time it is)."""

    __slots__ = ("_state", "_time")

    def __init__(self, state: ShipmentState, millis: int) -> None:
        self._state = state
        self._time = f"{state.lm_time}.{millis:03d}"

    def __getitem__(self, key: str) -> Any:
        return self._time if key == "LAST_MODIFIED_TIME" else self._state[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._state)

    def __len__(self) -> int:
        return len(self._state)


class StoreReader:
    """The read side of the store, over its ``data`` (read under its lock).

    Args:
        data: the store's shared data.
        code_conversions: the code conversion records (fixed for the store's life), ordered by id.
        cache_size: shipment versions kept (:class:`Rendered`) in the LRU cache.
    """

    def __init__(self, data: StoreData, code_conversions: list[dict[str, Any]], cache_size: int) -> None:
        self._data = data
        self._code_conversions = code_conversions
        self._cache: OrderedDict[tuple[int, int], Rendered] = OrderedDict()  # (id, version) -> its answers
        self._cache_size = cache_size

    # ============================================================================================
    # shipments
    # ============================================================================================
    def version(self) -> int:
        with self._data.lock:
            return self._data.version

    def shipment_key_rows(self) -> Iterator[Mapping[str, Any]]:
        """The states themselves (immutable Mappings over SHIPMENT_KEYS), snapshot at call time; with fractional
        stamps each as :class:`FractionalKeys`."""
        with self._data.lock:
            states = list(self._data.live.values())
        clock = self._data.clock
        if not clock.fractional_stamps:
            return iter(states)
        return iter([FractionalKeys(state, clock.stamp_millis(state.id, state.modified)) for state in states])

    def get_shipment(self, shipment_id: int) -> dict[str, Any]:
        return loads(self._rendered(shipment_id).document)

    def get_base_shipment(self, shipment_id: int) -> dict[str, Any]:
        return loads(self._rendered(shipment_id).base)

    def get_events(self, shipment_id: int) -> list[dict[str, Any]]:
        return loads(self._rendered(shipment_id).events)

    def get_air_main_carriage(self, shipment_id: int) -> list[dict[str, Any]]:
        return loads(self._rendered(shipment_id).air_legs)

    def get_sea_main_carriage(self, shipment_id: int) -> list[dict[str, Any]]:
        return loads(self._rendered(shipment_id).sea_legs)

    def record_json(self, endpoint: str, shipment_id: int) -> bytes:
        return self._rendered(shipment_id).answer(endpoint)

    # ============================================================================================
    # memos and code conversions
    # ============================================================================================
    def memo_rows(self) -> Iterator[dict[str, Any]]:
        with self._data.lock:
            return iter([self._memo_row(memo_id, entry) for memo_id, entry in self._data.memos.items()])

    def memo_rows_of(self, client: str, shipment_number: str) -> list[dict[str, Any]]:
        with self._data.lock:
            shipment_id = self._data.by_number.get((client, shipment_number))
            memo_ids = self._data.memos_by_shipment.get(shipment_id, ()) if shipment_id is not None else ()
            return [self._memo_row(memo_id, self._data.memos[memo_id]) for memo_id in memo_ids]

    def get_memo(self, memo_id: int) -> dict[str, Any]:
        with self._data.lock:
            entry = self._data.memos.get(memo_id)
            if entry is None:
                raise NotFound(f"memo line {memo_id} not found")
            return self._memo_row(memo_id, entry)

    def _memo_row(self, memo_id: int, entry: tuple[int, int, str]) -> dict[str, Any]:
        state = self._data.live[entry[0]]
        return {
            "id": memo_id,
            "client": state.client,
            "memo": entry[2],
            "shipment_number": state.shipment_number,
            "running_number": entry[1],
        }

    def code_conversion_rows(self) -> Iterator[dict[str, Any]]:
        return iter([dict(r) for r in self._code_conversions])

    def get_code_conversion(self, conversion_id: int) -> dict[str, Any]:
        for record in self._code_conversions:
            if record["id"] == conversion_id:
                return dict(record)
        raise NotFound(f"code conversion {conversion_id} not found")

    # ============================================================================================
    # helpers for tests (compare a warehouse with the source)
    # ============================================================================================
    def live_shipment_ids(self) -> list[int]:
        with self._data.lock:
            return sorted(self._data.live)

    def deleted_shipment_ids(self) -> list[int]:
        with self._data.lock:
            return sorted(self._data.deleted)

    def snapshot_ids_and_versions(self) -> dict[int, tuple[int, str]]:
        """id -> (version, last_modified_date_time) of every live shipment."""
        with self._data.lock:
            stamp_iso = self._data.clock.stamp_iso
            return {i: (s.version, stamp_iso(i, s.modified)) for i, s in sorted(self._data.live.items())}

    def shipment_state(self, shipment_id: int) -> ShipmentState:
        """The compact state (also the lookup key row) of a live shipment."""
        with self._data.lock:
            return self._data.require(shipment_id)

    def expected_documents(self) -> Iterator[dict[str, Any]]:
        """Full documents of every live shipment at call time, by id (generated lazily)."""
        with self._data.lock:
            ids = sorted(self._data.live)
            snapshot = [self._snapshot(i) for i in ids]
        for state, memos, overrides in snapshot:
            yield loads(dumps(self._document(state, memos, overrides)))  # its values as the answers' JSON reads them

    def cache_info(self) -> dict[str, int]:
        with self._data.lock:
            return {"documents": len(self._cache), "max": self._cache_size}

    def forget(self, shipment_id: int) -> None:
        """Forget the cached documents of a shipment changed without a new version (a background change)."""
        with self._data.lock:
            for key in [key for key in self._cache if key[0] == shipment_id]:
                del self._cache[key]

    def clear_cache(self) -> None:
        """Forget every cached document (after a reset an id may come back with another shipment)."""
        with self._data.lock:
            self._cache.clear()

    # ============================================================================================
    # document rendering
    # ============================================================================================
    def _snapshot(self, shipment_id: int) -> tuple[ShipmentState, list[dict[str, Any]], dict[EventKey, Any]]:
        state = self._data.require(shipment_id)
        memos = [self._memo_row(m, self._data.memos[m]) for m in self._data.memos_by_shipment.get(shipment_id, ())]
        return state, memos, copy.deepcopy(self._data.overrides.get(shipment_id, {}))

    def _document(self, state: ShipmentState, memos: list[dict[str, Any]],
                  overrides: dict[EventKey, Any]) -> dict[str, Any]:
        clock = self._data.clock
        doc = build_document(self._data.seed, state, memos, overrides, clock.iso)
        if clock.fractional_stamps:
            doc["last_modified_date_time"] = clock.stamp_iso(state.id, state.modified)
        zone = self._data.clock.naive_zone
        return without_offsets(doc, zone) if zone is not None else doc

    def _rendered(self, shipment_id: int) -> Rendered:
        with self._data.lock:
            state, memos, overrides = self._snapshot(shipment_id)
            key = (shipment_id, state.version)
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
                return cached
        answers = rendered(self._document(state, memos, overrides))
        with self._data.lock:
            if self._data.live.get(shipment_id) is not state:
                return answers  # changed (or reset) meanwhile: not kept under a key another state may take
            self._cache[key] = answers
            self._cache.move_to_end(key)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return answers
