"""``SimulatorStore``: the simulator's data, implementing :class:`~.store_api.StoreAPI`.

Only compact state is held per shipment (see :mod:`.generator`); full documents are generated on
demand and kept in a small LRU cache as JSON text (so every caller gets its own copy). One
re-entrant lock guards all state; document generation runs outside it on immutable snapshots.

Determinism: the same constructor arguments and the same sequence of calls give byte-identical
documents (with the default frozen clock). The initial data contains last-modified seconds shared
by more shipments than a page holds: a nightly bulk import (more than 500 shipments from 2,000
shipments on) and a mass update shortly before the start instant.
"""

from __future__ import annotations

import datetime as dt

from freight_pipeline.simulator.clock import SimClock, StoreClock
from freight_pipeline.simulator.config import MAX_SHIPMENTS
from freight_pipeline.simulator.data_codes import build_code_conversions
from freight_pipeline.simulator.store_changes import StoreChanges
from freight_pipeline.simulator.store_data import StoreData
from freight_pipeline.simulator.store_events import EventWriter
from freight_pipeline.simulator.store_reads import StoreReader
from freight_pipeline.simulator.store_seed import seed_shipments
from freight_pipeline.simulator.store_snapshot import StoreSnapshots
from freight_pipeline.simulator.store_webhooks import WebhookRecorder


class SimulatorStore:
    """In-memory freight service data, seeded with its initial shipments.

    Args:
        shipments: number of initial shipments, 0 to MAX_SHIPMENTS (100,000 build in about 18 s).
        seed: everything generated derives from it.
        start: the simulated clock's start instant (naive = in ``utc_offset``); default
            2026-11-01T08:00:00 in the offset.
        utc_offset: the service's UTC offset for all ``*_date_time`` values and the lookup keys.
        offset_changes: ``(instant, offset)`` pairs: from each instant on the offset is that one
            (e.g. ``(("2026-10-25T03:00:00+02:00", "+01:00"),)``, summer time ending).
        naive_clock: an IANA zone name (``Europe/Berlin``): the clock follows that zone's rules instead
            of ``utc_offset`` and every date-time is written as its wall clock without a UTC offset
            (:mod:`.data_naive`); the lookup keys are its wall-clock parts. None: with offsets.
        fractional_stamps: shipments' ``last_modified_date_time`` and ``LAST_MODIFIED_TIME`` carry milliseconds
            (:meth:`~.clock.SimClock.stamp_millis`), and the lookup's criteria on ``LAST_MODIFIED_TIME`` compare them.
        utc_stamps: every date-time is written in UTC (``2026-11-01T09:15:30Z``) while the lookup keys stay the
            wall clock at ``utc_offset`` (a service serialising instants as UTC, its keys local).
        wall_clock: the clock also moves with real time (else it only moves when advanced).
        memo_share: share of shipments with memo lines.
        max_memos_per_shipment: 1..this many memo lines for those shipments.
        code_conversions: at most this many code conversion records (about 380 exist).
        cache_size: shipment versions whose answers are kept (as JSON) in the LRU cache: two lookup pages of the
            most the spec serves (500) and more, since a sync asks for a page's shipments while it reads the
            next page (with 1,024, a full sync of 4,000 generated 375 documents twice).
        documents: shipments get E-Files of their own (generated, A38).

    Its parts, each given what it uses: ``data`` (:class:`~.store_data.StoreData`: the shared data
    and its lock), ``clock`` (:class:`~.clock.StoreClock`), ``reader``
    (:class:`~.store_reads.StoreReader`: documents, memo lines, code conversions, test helpers),
    ``events`` (:class:`~.store_events.EventWriter`), ``changes``
    (:class:`~.store_changes.StoreChanges`: change over time), ``efiles``
    (:class:`~.data_efile.EFileStore`), ``webhooks`` (:class:`~.store_webhooks.WebhookRecorder`)
    and ``snapshots`` (:class:`~.store_snapshot.StoreSnapshots`: one taken at the start; a reset goes
    back to it).
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
        cache_size: int = 2048,
        wall_clock: bool = False,
        documents: bool = True,
        offset_changes: tuple[tuple[str, str], ...] = (),
        naive_clock: str | None = None,
        fractional_stamps: bool = False,
        utc_stamps: bool = False,
    ) -> None:
        if not 0 <= shipments <= MAX_SHIPMENTS:
            raise ValueError(f"shipments must be between 0 and {MAX_SHIPMENTS:,}, got {shipments:,}")
        self.seed = seed
        clock = SimClock(start, utc_offset, wall_clock, offset_changes=offset_changes, naive_zone=naive_clock,
                         fractional_stamps=fractional_stamps, utc_stamps=utc_stamps)
        self.data = StoreData(seed, clock, documents)
        seed_shipments(self.data, shipments, memo_share, max(1, max_memos_per_shipment))
        conversions = build_code_conversions(seed, clock.start_epoch, clock.iso)[: max(0, code_conversions)]
        self.clock = StoreClock(clock, self.data.lock)
        self.reader = StoreReader(self.data, conversions, cache_size)
        self.events = EventWriter(self.data, self.reader)
        self.changes = StoreChanges(self.data, memo_share, self.reader)
        self.efiles = self.data.efiles
        self.webhooks = WebhookRecorder(self.data.lock)
        self.snapshots = StoreSnapshots(self.data, self.reader)
