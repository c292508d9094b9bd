"""The shared core of :class:`~.store.SimulatorStore`: the primitives every part of it uses.

``SimulatorStore.__init__`` (in :mod:`.store`) sets up every attribute; the mixins of
:mod:`.store_seed`, :mod:`.store_reads`, :mod:`.store_events`, :mod:`.store_changes` and
:mod:`.store_efiles` add the methods, each on this base: adding a shipment, a memo line or its
initial E-Files, looking a live shipment up, and issuing a change stamp.
"""

from __future__ import annotations

import threading

from freight_pipeline.simulator.clock import SimClock
from freight_pipeline.simulator.data_efile import EFileStore, documents_for
from freight_pipeline.simulator.data_format import TAG_DOCUMENTS, rng_for
from freight_pipeline.simulator.data_goods import MAX_SHIPMENT_ID
from freight_pipeline.simulator.data_identity import DAY
from freight_pipeline.simulator.generator import ShipmentState, change_stamp
from freight_pipeline.simulator.store_api import Invalid, NotFound

EventKey = tuple[str, str]


class StoreState:
    """Base of the store's mixins; the attributes are those ``SimulatorStore.__init__`` sets."""

    seed: int
    _lock: threading.RLock
    _live: dict[int, ShipmentState]
    _by_number: dict[tuple[str, str], int]
    _running: dict[str, int]
    _memos: dict[int, tuple[int, int, str]]
    _memos_by_shipment: dict[int, list[int]]
    _next_memo_id: int
    _next_id: int
    _last_stamp: int
    _documents: bool
    _efiles: EFileStore
    _clock: SimClock

    def _add_state(self, state: ShipmentState) -> None:
        self._live[state.id] = state
        self._by_number[(state.client, state.shipment_number)] = state.id

    def _check_id_room(self, count: int) -> None:
        """Refuse ids whose derived ids (goods, hs codes, ...) would not fit int32."""
        if self._next_id + count - 1 > MAX_SHIPMENT_ID:
            raise Invalid(
                f"shipment ids are exhausted: ids above {MAX_SHIPMENT_ID:,} would overflow int32 "
                f"derived ids (next id {self._next_id:,}, {count} requested)"
            )

    def _next_running(self, client: str) -> int:
        self._running[client] = self._running.get(client, 0) + 1
        return self._running[client]

    def _add_initial_documents(self, state: ShipmentState) -> None:
        """The E-Files a shipment has from the start (A38): its own random draw, so the shipments
        themselves are the same with or without documents."""
        if not self._documents:
            return
        rng = rng_for(self.seed, TAG_DOCUMENTS, state.id)
        for kind in documents_for(rng, state.mode):
            created = state.created + int(rng.uniform(0, 2 * DAY))
            self._efiles.generate(
                state.id, kind, min(created, state.modified), state.shipment_number, state.house_reference
            )

    def _add_memo(self, shipment_id: int, text: str) -> int:
        memo_id = self._next_memo_id
        self._next_memo_id += 1 if memo_id % 17 else 2  # a few gaps, like a real sequence
        ids = self._memos_by_shipment.setdefault(shipment_id, [])
        running = (self._memos[ids[-1]][1] + 1) if ids else 1
        self._memos[memo_id] = (shipment_id, running, text)
        ids.append(memo_id)
        return memo_id

    def _require(self, shipment_id: int) -> ShipmentState:
        state = self._live.get(shipment_id) if isinstance(shipment_id, int) else None
        if state is None:
            raise NotFound(f"shipment {shipment_id} not found")
        return state

    def _stamp(self, previous: list[int]) -> int:
        """Last-modified second of one change of shipments last modified at ``previous`` (A8).

        :func:`change_stamp`, but never earlier than any stamp issued before: a change stamped
        after a burst that ran ahead of a standing clock is not stamped back at the clock.
        """
        self._last_stamp = max(self._last_stamp, change_stamp(self._clock.epoch(), previous))
        return self._last_stamp
