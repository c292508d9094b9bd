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
from freight_pipeline.simulator.clock import SimClock
from freight_pipeline.simulator.data_format import TAG_STORE, rng_for
from freight_pipeline.simulator.data_identity import DAY, HOUR, derive_identity
from freight_pipeline.simulator.generator import ShipmentState, drawn_revised_dates, identity_of, new_state, touched
from freight_pipeline.simulator.store_data import StoreData

HISTORY_DAYS = 150
BULK_IMPORT_MIN = 130  # shipments of the nightly bulk import in small stores (at most a third of them)
BULK_IMPORT_SHARE = 0.26  # ... growing with the store: 520 at 2,000 shipments, more than a 500-row page
BULK_IMPORT_MAX = 2600
MASS_UPDATE_SIZE = 70


def seed_shipments(data: StoreData, count: int, memo_share: float, max_memos: int) -> None:
    """Give a new store's ``data`` its ``count`` initial shipments (ids from ``data.next_id`` on),
    their memo lines (``memo_share`` of them, 1..``max_memos`` each) and E-Files; before it is shared."""
    rng = rng_for(data.seed, TAG_STORE, 1)
    start = data.clock.start_epoch
    created = sorted(start - 600 - int(HISTORY_DAYS * DAY * rng.random() ** 0.8) for _ in range(count))
    bulk_at = _local_day_start(data.clock, start - 2 * DAY) + 2 * HOUR  # nightly bulk import, 02:00 local
    bulk: set[int] = set()
    bulk_ids: set[int] = set()
    if count:
        size = bulk_import_size(count)
        first = min(bisect.bisect_left(created, bulk_at), count - size)
        for i in range(first, first + size):
            created[i] = bulk_at
        bulk = set(range(first, first + size))
    shipment_id = data.next_id
    for index, created_at in enumerate(created):
        ident = derive_identity(data.seed, shipment_id, created_at)
        modified = bulk_at if index in bulk else _initial_modified(rng, ident, created_at, start)
        state = new_state(
            data.seed,
            ident,
            created_at,
            modified,
            ident.initial_version,
            data.next_running(ident.client),
            data.clock.tz,
        )
        data.add_shipment(state)
        if index in bulk:
            bulk_ids.add(shipment_id)
        _add_initial_memos(data, rng, state, memo_share, max_memos)
        data.add_initial_documents(state)
        shipment_id += 1 if rng.random() < 0.96 else rng.randint(2, 4)
    data.next_id = shipment_id
    data.check_id_room(0)
    _mass_update(data, rng, start - 5 * HOUR, bulk_ids)
    data.last_stamp = max((state.modified for state in data.live.values()), default=0)


def bulk_import_size(count: int) -> int:
    """Shipments of the nightly bulk import (one created and last-modified second) in a store of ``count``."""
    grown = min(BULK_IMPORT_MAX, round(count * BULK_IMPORT_SHARE))
    return min(max(1, count // 3), max(BULK_IMPORT_MIN, grown))


def _local_day_start(clock: SimClock, epoch: int) -> int:
    local = clock.to_local(epoch)
    return int(local.replace(hour=0, minute=0, second=0, microsecond=0).timestamp())


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


def _mass_update(data: StoreData, rng: Any, at: int, excluded: set[int]) -> None:
    """A mass status update: many open shipments modified in one second.

    It happened before the start, so its shipments are generated as of their new version: their revised
    dates are drawn for it (:func:`~.generator.drawn_revised_dates`, as for every shipment's version at
    the start; the same seed keeps giving the same initial data)."""
    candidates = [
        s.id
        for s in data.live.values()
        if s.id not in excluded and not s.closed and s.modified < at and s.created < at
    ]
    for shipment_id in rng.sample(candidates, min(MASS_UPDATE_SIZE, len(candidates) // 4)):
        state = touched(data.live[shipment_id], at)
        revised = drawn_revised_dates(data.seed, identity_of(data.seed, state), state.version, at)
        data.live[shipment_id] = state.evolve(revised=revised)


def _add_initial_memos(data: StoreData, rng: Any, state: ShipmentState, memo_share: float, max_memos: int) -> None:
    if rng.random() < memo_share:
        for _ in range(rng.randint(1, max_memos)):
            data.add_memo(state.id, rng.choice(cat.MEMO_TEXTS))
