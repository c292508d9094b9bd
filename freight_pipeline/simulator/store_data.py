"""The simulator store's shared data (:class:`StoreData`) and the one lock that guards it.

Every part of :class:`~.store.SimulatorStore` (its reader, event writes, changes, E-Files) is given
this object and changes the data only under ``StoreData.lock``, through the primitives here where
more than one part needs them: adding a shipment, a memo line or its initial E-Files, looking a
live shipment up, and issuing a change stamp.
"""

from __future__ import annotations

import threading
from typing import Any

from freight_pipeline.simulator.clock import SimClock
from freight_pipeline.simulator.data_efile import EFileStore, documents_for
from freight_pipeline.simulator.data_format import TAG_DOCUMENTS, rng_for
from freight_pipeline.simulator.data_goods import MAX_SHIPMENT_ID
from freight_pipeline.simulator.data_identity import DAY
from freight_pipeline.simulator.generator import ShipmentState, change_stamp
from freight_pipeline.simulator.store_api import Invalid, NotFound

FIRST_SHIPMENT_ID = 10001
EventKey = tuple[str, str]
"""An event's (code, type): the key of an event override."""


class StoreData:
    """The store's shipments, memo lines, event overrides, E-Files and counters.

    Args:
        seed: everything generated derives from it.
        clock: the simulated clock (guarded by ``lock`` too).
        documents: shipments get E-Files of their own (generated, A38).
    """

    def __init__(self, seed: int, clock: SimClock, documents: bool) -> None:
        self.seed = seed
        self.lock = threading.RLock()
        self.clock = clock
        self.documents = documents
        self.efiles = EFileStore(self.lock, lambda: clock.iso(clock.epoch()), clock.iso)
        self.version = 0
        """Changes on every change of shipment data (lets lookups cache results)."""
        self.live: dict[int, ShipmentState] = {}
        self.by_number: dict[tuple[str, str], int] = {}  # (client, shipment number) -> live shipment id
        self.deleted: set[int] = set()
        self.overrides: dict[int, dict[EventKey, dict[str, Any]]] = {}  # events written through the interface
        self.memos: dict[int, tuple[int, int, str]] = {}  # memo id -> (shipment id, running number, text)
        self.memos_by_shipment: dict[int, tuple[int, ...]] = {}  # replaced, never changed (cheap snapshots)
        self.next_memo_id = 1
        self.running: dict[str, int] = {}  # client -> last running sequence number issued
        self.next_id = FIRST_SHIPMENT_ID
        self.last_stamp = 0
        """The latest last-modified second issued (see :meth:`stamp`)."""

    def add_shipment(self, state: ShipmentState) -> None:
        self.live[state.id] = state
        self.by_number[(state.client, state.shipment_number)] = state.id

    def check_id_room(self, count: int) -> None:
        """Refuse ids whose derived ids (goods, hs codes, ...) would not fit int32."""
        if self.next_id + count - 1 > MAX_SHIPMENT_ID:
            raise Invalid(
                f"shipment ids are exhausted: ids above {MAX_SHIPMENT_ID:,} would overflow int32 "
                f"derived ids (next id {self.next_id:,}, {count} requested)"
            )

    def next_running(self, client: str) -> int:
        """The client's next running sequence number."""
        self.running[client] = self.running.get(client, 0) + 1
        return self.running[client]

    def add_initial_documents(self, state: ShipmentState) -> None:
        """The E-Files a shipment has from the start (A38): its own random draw, so the shipments
        themselves are the same with or without documents."""
        if not self.documents:
            return
        rng = rng_for(self.seed, TAG_DOCUMENTS, state.id)
        for kind in documents_for(rng, state.mode):
            created = state.created + int(rng.uniform(0, 2 * DAY))
            self.efiles.generate(
                state.id, kind, min(created, state.modified), state.shipment_number, state.house_reference
            )

    def add_memo(self, shipment_id: int, text: str) -> int:
        memo_id = self.next_memo_id
        self.next_memo_id += 1 if memo_id % 17 else 2  # a few gaps, like a real sequence
        ids = self.memos_by_shipment.get(shipment_id, ())
        running = (self.memos[ids[-1]][1] + 1) if ids else 1
        self.memos[memo_id] = (shipment_id, running, text)
        self.memos_by_shipment[shipment_id] = (*ids, memo_id)
        return memo_id

    def require(self, shipment_id: int) -> ShipmentState:
        """The live shipment's state. Raises NotFound."""
        state = self.live.get(shipment_id) if isinstance(shipment_id, int) else None
        if state is None:
            raise NotFound(f"shipment {shipment_id} not found")
        return state

    def stamp(self, previous: list[int]) -> int:
        """Last-modified second of one change of shipments last modified at ``previous`` (A8).

        :func:`change_stamp`, but never earlier than any stamp issued before: a change stamped
        after a burst that ran ahead of a standing clock is not stamped back at the clock.
        """
        self.last_stamp = max(self.last_stamp, change_stamp(self.clock.epoch(), previous))
        return self.last_stamp
