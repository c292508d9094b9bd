"""Initial data of the simulator store: the shipments, memo lines and E-Files it starts with.

Everything derives from the seed through its own random streams (``rng_for``), drawn in a fixed
order: the same seed gives the same data. The initial data contains last-modified seconds shared
by more shipments than a page holds: a nightly bulk import (more than 500 shipments from 2,000
shipments on) and a mass update shortly before the start instant.
"""

from __future__ import annotations

import bisect
from typing import Any

from freight_pipeline.simulator import data_catalog as cat
from freight_pipeline.simulator.data_format import TAG_STORE, rng_for
from freight_pipeline.simulator.data_identity import DAY, HOUR, derive_identity
from freight_pipeline.simulator.generator import ShipmentState, new_state, touched
from freight_pipeline.simulator.store_state import StoreState

FIRST_SHIPMENT_ID = 10001
HISTORY_DAYS = 150
BULK_IMPORT_MIN = 130  # shipments of the nightly bulk import in small stores (at most a third of them)
BULK_IMPORT_SHARE = 0.26  # ... growing with the store: 520 at 2,000 shipments, more than a 500-row page
BULK_IMPORT_MAX = 2600
MASS_UPDATE_SIZE = 70


class SeedingMixin(StoreState):
    """Builds the initial shipments (``_build``, called once by ``SimulatorStore.__init__``)."""

    _memo_share: float
    _max_memos: int

    def _build(self, count: int) -> None:
        rng = rng_for(self.seed, TAG_STORE, 1)
        start = self._clock.start_epoch
        created = sorted(start - 600 - int(HISTORY_DAYS * DAY * rng.random() ** 0.8) for _ in range(count))
        bulk_at = self._local_day_start(start - 2 * DAY) + 2 * HOUR  # nightly bulk import, 02:00 local
        bulk: set[int] = set()
        bulk_ids: set[int] = set()
        if count:
            size = bulk_import_size(count)
            first = min(bisect.bisect_left(created, bulk_at), count - size)
            for i in range(first, first + size):
                created[i] = bulk_at
            bulk = set(range(first, first + size))
        shipment_id = FIRST_SHIPMENT_ID
        for index, created_at in enumerate(created):
            ident = derive_identity(self.seed, shipment_id, created_at)
            modified = bulk_at if index in bulk else self._initial_modified(rng, ident, created_at, start)
            state = new_state(
                self.seed,
                ident,
                created_at,
                modified,
                ident.initial_version,
                self._next_running(ident.client),
                self._clock.tz,
            )
            self._add_state(state)
            if index in bulk:
                bulk_ids.add(shipment_id)
            self._add_initial_memos(rng, state)
            self._add_initial_documents(state)
            shipment_id += 1 if rng.random() < 0.96 else rng.randint(2, 4)
        self._next_id = shipment_id
        self._check_id_room(0)
        self._mass_update(rng, start - 5 * HOUR, bulk_ids)

    def _local_day_start(self, epoch: int) -> int:
        local = self._clock.to_local(epoch)
        return int(local.replace(hour=0, minute=0, second=0, microsecond=0).timestamp())

    @staticmethod
    def _initial_modified(rng: Any, ident: Any, created: int, start: int) -> int:
        passed = [m.actual for m in ident.milestones if m.actual < start]
        if len(passed) == len(ident.milestones):
            modified = passed[-1] + int(rng.uniform(0, 5 * DAY))
        elif passed:
            modified = passed[-1] + int(rng.uniform(0, 12 * HOUR))
        else:
            modified = created + int(rng.uniform(0, 6 * HOUR))
        if modified >= start:  # the change would lie in the future: it happened recently instead
            modified = start - int(rng.uniform(60, 12 * HOUR))
        return max(created, modified)

    def _mass_update(self, rng: Any, at: int, excluded: set[int]) -> None:
        """A mass status update: many open shipments modified in one second."""
        candidates = [
            s.id
            for s in self._live.values()
            if s.id not in excluded and not s.closed and s.modified < at and s.created < at
        ]
        for shipment_id in rng.sample(candidates, min(MASS_UPDATE_SIZE, len(candidates) // 4)):
            self._live[shipment_id] = touched(self._live[shipment_id], at)

    def _add_initial_memos(self, rng: Any, state: ShipmentState) -> None:
        if rng.random() < self._memo_share:
            for _ in range(rng.randint(1, self._max_memos)):
                self._add_memo(state.id, rng.choice(cat.MEMO_TEXTS))


def bulk_import_size(count: int) -> int:
    """Shipments of the nightly bulk import (one created and last-modified second) in a store of ``count``."""
    grown = min(BULK_IMPORT_MAX, round(count * BULK_IMPORT_SHARE))
    return min(max(1, count // 3), max(BULK_IMPORT_MIN, grown))
