"""Tuning of a sync run, declared once with documented defaults."""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
from dataclasses import dataclass

from freight_pipeline.client.hedge import DEFAULT_SHARE, HedgePolicy
from freight_pipeline.client.limiter import AdaptiveLimit
from freight_pipeline.client.retry import DEFAULT_RETRY_POLICY, RetryPolicy
from freight_pipeline.config import (
    CODE_CONVERSIONS_ENV,
    DOCUMENT_CONTENT_ENV,
    DOCUMENTS_ENV,
    DOCUMENTS_RELIST_ENV,
    EVENTS_MAX_AGE_ENV,
    EVENTS_REFRESH_ENV,
    EVENTS_REFRESH_SHARE_ENV,
    FRESHNESS_SAMPLE_ENV,
    HEDGE_ENV,
    HISTORY_ENV,
    RECONCILE_ENV,
    SERVICE_TIMEZONE_ENV,
    count_from_env,
    flag_from_env,
    minutes_from_env,
    share_from_env,
)
from freight_pipeline.datetimes import DEFAULT_SERVICE_TIMEZONE, ServiceZone
from freight_pipeline.sync.backfill import IdRange
from freight_pipeline.warehouse.records import Backoff

EVENTS_REFRESH_MODES = ("auto", "on", "off")


@dataclass(frozen=True)
class SyncSettings:
    page_size: int = 500
    """Lookup page size (the simulator's maximum, assumption A4)."""
    concurrency: int = 64
    """The most requests in flight at once (over one pooled connection set). The limit in force
    adapts within it (AIMD, ``client.limiter``): it starts at ``initial_concurrency``, grows by one
    per round of answers while latency holds, drops to half the number in flight when the service
    pushes back (429, 502, 503, 504, timeouts; once per round), climbs back carefully to just below
    where that happened, and shrinks when latency rises, so a rate-limited service is never hammered."""
    initial_concurrency: int = 16
    """Requests in flight at the start of a run (at most ``concurrency``): what a service across the
    internet needs."""
    adaptive_concurrency: bool = True
    """False: exactly ``concurrency`` requests in flight, never adapted."""
    request_retry: RetryPolicy = DEFAULT_RETRY_POLICY
    """How the client retries one request that failed (attempts, backoff, ``Retry-After``: ``client.retry``,
    whose defaults are documented there)."""
    hedge_share: float = DEFAULT_SHARE
    """Hedged reads (``client.hedge``): a read (GET or lookup) still unanswered after 3 x the p95 latency
    of its kind (at least 100 ms) is sent once more, the first answer wins; at most this share of the
    reads are such copies, none while the service pushes back (429, 503, ...), each within the
    in-flight limit. 0: no hedged reads (``FREIGHT_HEDGE=0``)."""
    overlap: dt.timedelta = dt.timedelta(minutes=10)
    """How far before the cursor each run re-reads, to catch late commits and clock skew."""
    offset_step_guard: dt.timedelta = dt.timedelta(hours=1)
    """How much further back each run re-reads when the service stamps UTC offsets: when its offset
    steps back (summer time ending), its wall clock repeats this much, and a change in the repeated
    hour sorts below the cursor, which a pre-switch change later in that hour may hold, until the
    clock passes it again. Cheap: the walk lists those shipments, and held copies that are current
    (compared as instants) are skipped without fetching. 0: only a step back seen at the ceiling
    widens the window (``cursor.dst_widening``)."""
    start_cursor: str | None = None
    """Sync shipments last modified at or after this ``YYYY-MM-DD[ HH:MM:SS]`` (service wall clock;
    None: all). The first run starts its walk here, and reconciliation never fetches a shipment
    last modified before it (deletions still apply to every shipment held)."""
    reconcile_interval: dt.timedelta | None = dt.timedelta(hours=6)
    """How often a run also lists every live shipment id (one lookup per ``page_size`` shipments) to
    delete what vanished from the source and refetch what is missing or stale: deletions have no
    change feed, so this bounds how long a deleted shipment lingers. 0: every run; None: never."""
    count_attempts: int = 3
    """How often one lookup (or a whole memo / code-conversion read) is asked again when what it
    returned disagrees with ``X-Row-Count``, before the stream fails without writing it."""
    fetch_batch_size: int = 100
    """Shipments (document, events, legs, memos) normalized and written per transaction, with the
    cursor of the batch's last shipment. Fetching the next batches overlaps writing this one."""
    fetch_window: int = 64
    """The most shipments being fetched at once (each is one round of concurrent requests); with
    at most two written batches waiting for the writer, this bounds the memory of a run."""
    breaker_max_share: float = 0.05
    """A stream's run stops (CircuitOpen, nothing more written) when more than this share of the
    records it read failed, and at least ``breaker_min_failures`` did: not a record's fault."""
    breaker_min_failures: int = 10
    """Failures below this count never trip the breaker (one bad record in a small run is a record's fault)."""
    retry_after: dt.timedelta = dt.timedelta(minutes=10)
    """A quarantined record is retried by the first run after this long, then after twice as long
    after each further failure, up to ``retry_after_max``."""
    retry_after_max: dt.timedelta = dt.timedelta(hours=24)
    documents: bool = True
    """Run the documents stream (E-Files of the shipments); False: it reads and writes nothing."""
    code_conversions: bool = True
    """Run the code-conversions stream; False: it reads and writes nothing (an account without the
    basic-data permission)."""
    history: bool = True
    """Record each batch's versions in ``freight_history`` (``warehouse.history``); False: nothing is
    recorded there (the tables stay as they are, the marts on them build on what they hold), and the
    first run with it on again brings the history up to the rows held first
    (``Writes.catch_up_history``)."""
    documents_chunk: int = 50
    """Shipments per E-File lookup (``SHIPMENT_ID`` any of them) of the documents stream."""
    documents_relist_interval: dt.timedelta | None = dt.timedelta(hours=24)
    """How often the documents stream lists the E-Files of every held shipment, not only of those
    written since its last run: whether storing or deleting an E-File moves a shipment's
    last-modified instant is not documented (A38), so this bounds how long such a change goes
    unseen. 0: every run; None: never (after the first)."""
    id_range: IdRange | None = None
    """A backfill partition (``sync.backfill``): the shipments stream walks only these ids, under a
    cursor of its own, and leaves retries and the reconcile to the incremental runs."""
    backfill_plan: tuple[IdRange, ...] = ()
    """Every partition of the backfill ``id_range`` belongs to (stored when it completes, so that the
    incremental stream knows which partitions it waits for)."""
    document_content: bool = False
    """Copy each document's bytes (read with ``cascade``) once by content hash under
    ``<data dir>/documents/``; False: metadata only."""
    service_timezone: str = DEFAULT_SERVICE_TIMEZONE
    """IANA time zone in which a date-time the service sends without a UTC offset is read (its
    ``last_modified_date_time``, ``created_date_time``, E-File dates, DateTime objects whose
    ``zone_offset`` is null): summer time follows the zone's rules; in the hour a fall-back repeats,
    the first of the two instants (``datetimes.ServiceZone.instant``). A run that meets such values says so."""
    zone: ServiceZone = dataclasses.field(default_factory=ServiceZone, compare=False, repr=False)
    """``service_timezone`` as the value the code that reads date-times is handed (made from it, never set
    apart): each stream's run takes one of its own (:meth:`with_own_zone`), which counts what it read."""
    restore_probe: int = 50
    """How many of the most recently changed shipments held each run looks up again by id (one lookup,
    at most ``page_size`` of them):
    one that vanished, or that the service now stamps earlier than the copy held, means the service's
    data went back (a restore, the test server's nightly reset), and the run reconciles at once. 0: off."""
    freshness_sample: int = 20
    """Each run re-reads the events and memo lines of this many open shipments held, those read longest ago
    (a rotating sample), and writes what differs from the rows held: a difference shows that the service
    changes them without moving the shipment's last-modified instant (the spec's "changed by background
    processes"; ``sync.freshness``), said once, and the rolling re-read switches on (``events_refresh``
    auto). 0: no sample."""
    events_refresh: str = "auto"
    """The rolling re-read of open shipments' events (and memo lines, once a sample found them changed
    unstamped too), nearest upcoming estimate first, within ``events_max_age``: ``auto`` (on once a sample
    found such changes), ``on``, ``off``."""
    events_max_age: dt.timedelta = dt.timedelta(hours=4)
    """With the rolling re-read on: the most an open shipment's events go unread. A run re-reads those read
    three quarters of it ago or longer; a WARN check says when the oldest is older."""
    events_refresh_share: float = 1.0
    """The rolling re-read's requests in a run: at most this share of the run's other requests, and at least
    ``sync.freshness.MIN_REFRESH_REQUESTS``."""

    def with_env(self) -> SyncSettings:
        """These settings with what the environment sets: the streams' and the history's switches
        (``FREIGHT_SYNC_DOCUMENTS``, ``FREIGHT_SYNC_CODE_CONVERSIONS``, ``FREIGHT_HISTORY``), the document
        copies, the E-File relist interval, the share of hedged reads (``FREIGHT_HEDGE``) and, when set,
        the reconcile interval (in minutes)."""
        relist = self.documents_relist_interval or dt.timedelta(0)
        reconcile = self.reconcile_interval
        if os.environ.get(RECONCILE_ENV, "").strip():
            reconcile = dt.timedelta(minutes=minutes_from_env(RECONCILE_ENV, default=0))  # set: no default used
        return dataclasses.replace(
            self,
            documents=flag_from_env(DOCUMENTS_ENV, self.documents),
            code_conversions=flag_from_env(CODE_CONVERSIONS_ENV, self.code_conversions),
            document_content=flag_from_env(DOCUMENT_CONTENT_ENV, self.document_content),
            history=flag_from_env(HISTORY_ENV, self.history),
            documents_relist_interval=dt.timedelta(
                minutes=minutes_from_env(DOCUMENTS_RELIST_ENV, int(relist.total_seconds() // 60))),
            reconcile_interval=reconcile,
            service_timezone=os.environ.get(SERVICE_TIMEZONE_ENV, "").strip() or self.service_timezone,
            hedge_share=share_from_env(HEDGE_ENV, self.hedge_share),
            freshness_sample=count_from_env(FRESHNESS_SAMPLE_ENV, self.freshness_sample),
            events_refresh=os.environ.get(EVENTS_REFRESH_ENV, "").strip().lower() or self.events_refresh,
            events_max_age=dt.timedelta(minutes=minutes_from_env(
                EVENTS_MAX_AGE_ENV, int(self.events_max_age.total_seconds() // 60))),
            events_refresh_share=share_from_env(EVENTS_REFRESH_SHARE_ENV, self.events_refresh_share),
        )

    def with_own_zone(self) -> SyncSettings:
        """These settings with a zone value of their own (its count of date-times read without an offset
        starts at 0): one per stream's run, so that runs in one process never share it."""
        return dataclasses.replace(self, zone=ServiceZone(self.service_timezone))

    def hedge_policy(self) -> HedgePolicy:
        """How reads are hedged in one run, as these settings say (``share`` 0: not at all)."""
        return HedgePolicy(share=self.hedge_share)

    def in_flight_limit(self) -> AdaptiveLimit:
        """A fresh limit on requests in flight for one run, as these settings say."""
        if not self.adaptive_concurrency:
            return AdaptiveLimit.fixed(self.concurrency)
        return AdaptiveLimit(min(self.initial_concurrency, self.concurrency), self.concurrency)

    @property
    def backoff(self) -> Backoff:
        return Backoff(self.retry_after, self.retry_after_max)

    def __post_init__(self) -> None:
        if not 1 <= self.page_size <= 500:
            raise ValueError(f"page_size must be between 1 and 500, got {self.page_size}")
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {self.concurrency}")
        if self.initial_concurrency < 1:
            raise ValueError(f"initial_concurrency must be at least 1, got {self.initial_concurrency}")
        if not 0 <= self.hedge_share <= 1:
            raise ValueError(f"hedge_share must be between 0 and 1, got {self.hedge_share}")
        if self.overlap < dt.timedelta(0):
            raise ValueError("overlap must not be negative")
        if self.reconcile_interval is not None and self.reconcile_interval < dt.timedelta(0):
            raise ValueError("reconcile_interval must not be negative")
        if self.count_attempts < 1:
            raise ValueError(f"count_attempts must be at least 1, got {self.count_attempts}")
        if self.fetch_batch_size < 1:
            raise ValueError(f"fetch_batch_size must be at least 1, got {self.fetch_batch_size}")
        if self.fetch_window < 1:
            raise ValueError(f"fetch_window must be at least 1, got {self.fetch_window}")
        if not 0 <= self.breaker_max_share <= 1:
            raise ValueError(f"breaker_max_share must be between 0 and 1, got {self.breaker_max_share}")
        if self.breaker_min_failures < 1:
            raise ValueError(f"breaker_min_failures must be at least 1, got {self.breaker_min_failures}")
        if self.documents_chunk < 1:
            raise ValueError(f"documents_chunk must be at least 1, got {self.documents_chunk}")
        if self.documents_relist_interval is not None and self.documents_relist_interval < dt.timedelta(0):
            raise ValueError("documents_relist_interval must not be negative")
        if self.id_range is not None and self.id_range not in self.backfill_plan:
            raise ValueError(f"id_range {self.id_range.key} is not one of the backfill plan's partitions")
        if self.zone.name != self.service_timezone:
            try:
                object.__setattr__(self, "zone", ServiceZone(self.service_timezone))
            except ValueError as exc:
                raise ValueError(f"{SERVICE_TIMEZONE_ENV}: {exc}") from None
        if self.freshness_sample < 0:
            raise ValueError(f"freshness_sample must not be negative, got {self.freshness_sample}")
        if self.events_refresh not in EVENTS_REFRESH_MODES:
            raise ValueError(f"{EVENTS_REFRESH_ENV} must be one of {', '.join(EVENTS_REFRESH_MODES)}, got "
                             f"{self.events_refresh!r}")
        if self.events_max_age <= dt.timedelta(0):
            raise ValueError("events_max_age must be positive")
        if not 0 <= self.events_refresh_share <= 1:
            raise ValueError(f"events_refresh_share must be between 0 and 1, got {self.events_refresh_share}")
        if self.restore_probe < 0:
            raise ValueError(f"restore_probe must not be negative, got {self.restore_probe}")
        if self.retry_after < dt.timedelta(0) or self.retry_after_max < self.retry_after:
            raise ValueError("retry_after must not be negative nor above retry_after_max")
