"""``SimulatorStore``: the simulator's data, implementing :class:`~.store_api.StoreAPI`.

Only compact state is held per shipment (see :mod:`.generator`); full documents are generated on
demand and kept in a small LRU cache as JSON text (so every caller gets its own copy). One
re-entrant lock guards all state; document generation runs outside it on immutable snapshots.

Determinism: the same constructor arguments and the same sequence of calls give byte-identical
documents (with the default frozen clock). The initial data contains last-modified seconds shared
by more shipments than a page holds: a nightly bulk import (more than 500 shipments from 2,000
shipments on) and a mass update shortly before the start instant.

The class is put together from mixins, one job each (see :class:`SimulatorStore`); this module
builds it and re-exports ``bulk_import_size``.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections import OrderedDict
from typing import Any

from freight_pipeline.simulator.clock import SimClock
from freight_pipeline.simulator.config import MAX_SHIPMENTS
from freight_pipeline.simulator.data_codes import build_code_conversions
from freight_pipeline.simulator.data_efile import EFileStore
from freight_pipeline.simulator.data_format import TAG_DOCUMENTS, TAG_MUTATION, rng_for
from freight_pipeline.simulator.generator import ShipmentState
from freight_pipeline.simulator.store_changes import ChangesMixin
from freight_pipeline.simulator.store_efiles import EFilesMixin
from freight_pipeline.simulator.store_events import EventsMixin
from freight_pipeline.simulator.store_reads import ReadsMixin
from freight_pipeline.simulator.store_seed import SeedingMixin, bulk_import_size
from freight_pipeline.simulator.store_state import EventKey

__all__ = ["SimulatorStore", "bulk_import_size"]


class SimulatorStore(SeedingMixin, ReadsMixin, EventsMixin, ChangesMixin, EFilesMixin):
    """In-memory freight service data.

    Args:
        shipments: number of initial shipments, 0 to MAX_SHIPMENTS (100,000 build in about 18 s).
        seed: everything generated derives from it.
        start: the simulated clock's start instant (naive = in ``utc_offset``); default
            2026-11-01T08:00:00 in the offset.
        utc_offset: the service's UTC offset for all ``*_date_time`` values and the lookup keys.
        offset_changes: ``(instant, offset)`` pairs: from each instant on the offset is that one
            (e.g. ``(("2026-10-25T03:00:00+02:00", "+01:00"),)``, summer time ending).
        wall_clock: the clock also moves with real time (else it only moves when advanced).
        memo_share: share of shipments with memo lines.
        max_memos_per_shipment: 1..this many memo lines for those shipments.
        code_conversions: at most this many code conversion records (about 380 exist).
        cache_size: full documents kept (as JSON) in the LRU cache.

    Its parts: :mod:`.store_state` (shared primitives), :mod:`.store_seed` (initial data),
    :mod:`.store_reads` (clock, documents, memos, code conversions, test helpers),
    :mod:`.store_events` (event writes), :mod:`.store_changes` (change over time),
    :mod:`.store_efiles` (E-Files, webhooks).
    """

    def __init__(
        self,
        shipments: int = 2000,
        seed: int = 42,
        start: dt.datetime | None = None,
        utc_offset: str = "+01:00",
        memo_share: float = 0.6,
        max_memos_per_shipment: int = 5,
        code_conversions: int = 400,
        cache_size: int = 1024,
        wall_clock: bool = False,
        documents: bool = True,
        offset_changes: tuple[tuple[str, str], ...] = (),
    ) -> None:
        if not 0 <= shipments <= MAX_SHIPMENTS:
            raise ValueError(f"shipments must be between 0 and {MAX_SHIPMENTS:,}, got {shipments:,}")
        self.seed = seed
        self._lock = threading.RLock()
        self._clock = SimClock(start, utc_offset, wall_clock, offset_changes=offset_changes)
        self._memo_share = memo_share
        self._max_memos = max(1, max_memos_per_shipment)
        self._version = 0
        self._live: dict[int, ShipmentState] = {}
        self._by_number: dict[tuple[str, str], int] = {}  # (client, shipment number) -> live shipment id
        self._deleted: set[int] = set()
        self._overrides: dict[int, dict[EventKey, dict[str, Any]]] = {}
        self._memos: dict[int, tuple[int, int, str]] = {}  # memo id -> (shipment id, running number, text)
        self._memos_by_shipment: dict[int, list[int]] = {}
        self._next_memo_id = 1
        self._running: dict[str, int] = {}
        self._cache: OrderedDict[tuple[int, int], str] = OrderedDict()
        self._cache_size = cache_size
        self._webhooks: list[tuple[int, dict[str, Any]]] = []
        self._efiles = EFileStore(lambda: self._clock.iso(self._clock.epoch()), self._clock.iso)
        self._documents = documents
        self._document_rng = rng_for(seed, TAG_DOCUMENTS, 0)
        self._mutation_rng = rng_for(seed, TAG_MUTATION)
        self._build(shipments)
        self._last_stamp = max((state.modified for state in self._live.values()), default=0)
        self._code_conversions = build_code_conversions(seed, self._clock.start_epoch, self._clock.iso)[
            : max(0, code_conversions)
        ]
