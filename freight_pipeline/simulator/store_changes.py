"""Change over time in the simulator store: shipments modified, created, deleted and touched.

Every change draws from the store's mutation (and document) random streams in a fixed order, so
the same sequence of calls gives the same changes.
"""

from __future__ import annotations

import random
from typing import Any

from freight_pipeline.simulator import data_catalog as cat
from freight_pipeline.simulator.data_efile import DOCUMENT_KINDS
from freight_pipeline.simulator.data_identity import derive_identity
from freight_pipeline.simulator.generator import ShipmentState, identity_of, mutated, new_state, touched
from freight_pipeline.simulator.store_api import Invalid
from freight_pipeline.simulator.store_state import EventKey, StoreState

DOCUMENT_ON_CHANGE_SHARE = 0.15  # a changed shipment gets a new E-File this often (filed with the change)


class ChangesMixin(StoreState):
    """The simulated service's own changes (the control API and the tests drive them)."""

    _version: int
    _deleted: set[int]
    _overrides: dict[int, dict[EventKey, dict[str, Any]]]
    _memo_share: float
    _mutation_rng: random.Random
    _document_rng: random.Random

    def modify_shipments(self, count: int) -> list[int]:
        """Change ``count`` live shipments (open ones first), all stamped with one second (A8)."""
        _check_count(count)
        with self._lock:
            rng = self._mutation_rng
            open_ids = [i for i, s in self._live.items() if not s.closed]
            pool = open_ids if len(open_ids) >= count else list(self._live)
            chosen = sorted(rng.sample(pool, min(count, len(pool))))
            stamp = self._stamp([self._live[i].modified for i in chosen])
            for shipment_id in chosen:
                state = self._live[shipment_id]
                self._live[shipment_id] = mutated(state, identity_of(self.seed, state), stamp, rng)
                if rng.random() < 0.25:
                    self._add_memo(shipment_id, rng.choice(cat.MEMO_TEXTS))
                if self._documents and self._document_rng.random() < DOCUMENT_ON_CHANGE_SHARE:
                    self._add_document(self._live[shipment_id], stamp)
            self._version += 1
            return chosen

    def create_shipments(self, count: int) -> list[int]:
        """New shipments with ids above every id issued so far, created now, modified at one new stamp (A8)."""
        _check_count(count)
        with self._lock:
            self._check_id_room(count)
            now = self._clock.epoch()
            stamp = self._stamp([])
            rng = self._mutation_rng
            created = []
            for _ in range(count):
                shipment_id = self._next_id
                self._next_id += 1
                ident = derive_identity(self.seed, shipment_id, now)
                state = new_state(self.seed, ident, now, stamp, 1, self._next_running(ident.client), self._clock.tz)
                self._add_state(state)
                if rng.random() < self._memo_share / 2:
                    self._add_memo(shipment_id, rng.choice(cat.MEMO_TEXTS))
                self._add_initial_documents(state)
                created.append(shipment_id)
            self._version += 1
            return created

    def delete_shipments(self, count: int) -> list[int]:
        """Delete ``count`` random live shipments (with their memo lines and event overrides)."""
        _check_count(count)
        with self._lock:
            chosen = sorted(self._mutation_rng.sample(list(self._live), min(count, len(self._live))))
            return self.delete_shipment_ids(chosen)

    def delete_shipment_ids(self, shipment_ids: list[int]) -> list[int]:
        """Delete exactly these shipments. Raises NotFound (and deletes none) for an unknown id."""
        with self._lock:
            ids = list(dict.fromkeys(shipment_ids))
            for shipment_id in ids:
                self._require(shipment_id)
            for shipment_id in ids:
                state = self._live.pop(shipment_id)
                del self._by_number[(state.client, state.shipment_number)]
                self._deleted.add(shipment_id)
                self._overrides.pop(shipment_id, None)
                for memo_id in self._memos_by_shipment.pop(shipment_id, []):
                    del self._memos[memo_id]
            self._version += 1
            return ids

    def touch_shipments(self, shipment_ids: list[int]) -> None:
        """A new version of each, all stamped with one second (A8)."""
        with self._lock:
            ids = list(dict.fromkeys(shipment_ids))
            states = [self._require(shipment_id) for shipment_id in ids]
            stamp = self._stamp([state.modified for state in states])
            for state in states:
                self._live[state.id] = touched(state, stamp)
            self._version += 1

    def _add_document(self, state: ShipmentState, at: int) -> None:
        """A document filed with a shipment later on (one of the kinds its mode has)."""
        kinds = [i for i, kind in enumerate(DOCUMENT_KINDS) if state.mode in kind.modes]
        self._efiles.generate(
            state.id, self._document_rng.choice(kinds), at, state.shipment_number, state.house_reference
        )


def _check_count(count: int) -> None:
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise Invalid(f"count must be a non-negative integer, got {count!r}")
