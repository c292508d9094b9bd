"""Reconciliation: list every live shipment id, delete what vanished, find what is missing or stale.

Deletions have no change feed, so every ``reconcile_interval`` the shipments stream lists every
live id with its last-modified stamp (``ID GT`` keyset paging, each page checked against its
``X-Row-Count``) and compares the listing with what the warehouse holds. The listing goes into a
temporary DuckDB table page by page (memory stays flat however many shipments there are) and the
comparison is one query. Last-modified stamps are compared as instants when both carry a UTC offset
(so 02:30+01:00 after a fall-back differs from 02:30+02:00 before it), and as the service's
wall-clock second when one does not (a service whose instants carry no offset, or a row stored
before stamps kept it), never as text with and without an offset (``warehouse.stamps``).

Nothing is deleted unless the whole listing was read and every page agreed with its row count
(``RowCountMismatch`` otherwise): a dropped record fails the stream instead. A page-size cap (a page
shorter than asked whose ``X-Page-Count`` is computed for the size served) is adopted, not a failure.

A service can also go back in time: data restored from a backup (the operator's test server is reset
every night) brings back older versions, below the cursor, and drops what was created since, whose ids
it may hand out again. No change feed shows that, so each run first probes
(:func:`probe_for_restore`): the shipments held with the newest last-modified instants, looked up again
by id in one lookup; one that vanished, or that the service now stamps earlier than the copy held,
means a restore, and the run reconciles at once instead of when the interval is due.
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass, field

from freight_pipeline.client.errors import BadRequestError
from freight_pipeline.datetimes import DateTimeParseError, ServiceZone, parse_iso_datetime
from freight_pipeline.normalize.flatten import LAST_MODIFIED, document_value
from freight_pipeline.sync.changes import RowCountMismatch, WalkStats, checked_lookup
from freight_pipeline.sync.cursor import BEGINNING, CursorError, ShipmentKey, listed_id
from freight_pipeline.sync.source import SourceAPI
from freight_pipeline.warehouse.stamps import stamp_earlier
from freight_pipeline.warehouse.store import Warehouse


@dataclass
class Differences:
    listed: int
    vanished: list[int]
    """Held (or waiting in the retry queue) but no longer in the source: delete."""
    stale: list[int]
    """In the source but missing from the warehouse, or held with another last-modified second:
    fetch (shipments waiting in the retry queue are left to it)."""
    before_start: int
    """Missing ones last modified before the configured start cursor: not fetched."""


@dataclass
class Probe:
    """What the restore probe found among the shipments held with the newest last-modified instants."""

    probed: int = 0
    seconds: float = 0.0
    """The probe's wall time (its one lookup and the read of the stamps held)."""
    vanished: list[int] = field(default_factory=list)
    """Held, but the service no longer has them."""
    went_back: list[int] = field(default_factory=list)
    """The service stamps them earlier than the copy held: an older version came back."""
    returned: list[int] = field(default_factory=list)
    """Deleted here (the newest deletions, asked for on the probe's page beside the shipments held), yet the
    service has them: a restore brought them back."""
    refused: str | None = None
    """Why the service would not answer the probe (it refused the ``ID IN`` lookup, or its page disagreed
    with its row count): then nothing is known, and restores wait for the reconcile interval."""

    @property
    def restored(self) -> bool:
        """Whether the service's data went back in time (a restore)."""
        return bool(self.vanished or self.went_back or self.returned)

    def figures(self) -> dict[str, object]:
        figures: dict[str, object] = {"probed": self.probed, "seconds": round(self.seconds, 4),
                                      "vanished": self.vanished[:20], "went_back": self.went_back[:20],
                                      "returned": self.returned[:20]}
        if self.refused:
            figures["refused"] = self.refused
        return figures


DELETED_SHARE = 0.2
"""The share of the restore probe's page that asks for the shipments deleted most recently."""


async def probe_for_restore(
    source: SourceAPI, warehouse: Warehouse, sample: int, page_size: int, attempts: int, stats: WalkStats,
    zone: ServiceZone,
) -> Probe:
    """Look the ``sample`` shipments held with the newest last-modified instants up again by id (one
    ``ID IN`` lookup): which vanished, and which the service now stamps earlier than the copy held. Up to a fifth
    of that page (:data:`DELETED_SHARE`) asks for the shipments deleted here most recently instead: a restore that
    only brought deleted ones back changes nothing held, and they are stamped below the cursor."""
    started = time.perf_counter()
    size = min(sample, stats.page_size(page_size))
    deleted = set(warehouse.reads.recently_deleted(int(size * DELETED_SHARE)))
    held = warehouse.reads.latest_stamps(size - len(deleted))
    if not held:
        return Probe()
    ids = sorted({*held, *deleted})
    try:
        items = await checked_lookup(
            source.lookup_shipments, [{"key": "ID", "match_mode": "IN", "values": [str(i) for i in ids]}], ["ID"],
            len(ids), stats, attempts,
        )
    except (BadRequestError, RowCountMismatch) as exc:  # a service that cannot answer it: the stream goes on
        return Probe(seconds=time.perf_counter() - started, refused=f"{type(exc).__name__}: {exc}"[:300])
    listed = {listed_id(item): latest_listed_stamp(item, zone) for item in items}
    if len(items) < len(ids) and len(items) == stats.page_size(len(ids)):  # a capped page: judge what it covers
        ids = [i for i in ids if i <= max(listed, default=0)]
    return Probe(
        probed=len(ids),
        seconds=time.perf_counter() - started,
        vanished=[i for i in ids if i in held and i not in listed],
        went_back=[i for i in ids if i in held and (stamp := listed.get(i)) is not None
                   and stamp_earlier(stamp, held[i])],
        returned=[i for i in ids if i in deleted and i in listed],
    )


LISTING_CHURN = 0.01
"""The share of the shipments counted by the listing's first page that may be deleted while it reads the rest
(:func:`compare_with_source`); more missing is a listing that skipped some (at least :data:`LISTING_CHURN_MIN`)."""
LISTING_CHURN_MIN = 10


async def compare_with_source(
    source: SourceAPI,
    warehouse: Warehouse,
    page_size: int,
    attempts: int,
    stats: WalkStats,
    floor: ShipmentKey,
    waiting_stream: str,
    zone: ServiceZone,
) -> Differences:
    """List every live id into the warehouse's temporary listing, then diff it with what is held.

    Two checks, before anything is deleted (each a :class:`RowCountMismatch`): every page's ids increase, each
    after the last one listed (a service comparing ``ID GT`` as text, ``"1000" < "999"``, repeats some and skips
    others); and the ids listed are as many as the first page's ``X-Row-Count`` counted every shipment, but for
    what changed during the listing (:data:`LISTING_CHURN`)."""
    listed = 0
    last_id = 0
    total: int | None = None
    with warehouse.reads.live_listing() as listing:
        while True:
            items = await checked_lookup(
                source.lookup_shipments, [{"key": "ID", "match_mode": "GT", "value": str(last_id)}], ["ID"],
                page_size, stats, attempts,
            )
            total = stats.row_count if total is None else total
            ids = [listed_id(item) for item in items]
            if any(later <= earlier for earlier, later in zip([last_id, *ids], ids, strict=False)):
                raise RowCountMismatch(f"id listing after id {last_id} answered ids not each after the last "
                                       f"({_ids_shown(ids)}): the service does not compare ID as a number; nothing "
                                       "deleted")
            listing.add(ids, [listed_stamp(item, zone) for item in items])
            listed += len(items)
            if len(items) < stats.page_size(page_size):  # the page size served, if the service caps it
                break
            last_id = ids[-1]
        if total is not None and total - listed > max(LISTING_CHURN_MIN, total * LISTING_CHURN):
            raise RowCountMismatch(f"the id listing read {listed} shipments where its first page counted {total}: "
                                   "too many missing to be shipments deleted meanwhile; nothing deleted")
        vanished, stale, before_start = listing.differences(
            None if floor == BEGINNING else floor.instant_text, waiting_stream
        )
    return Differences(listed, vanished, stale, before_start)


def _ids_shown(ids: list[int]) -> str:
    return ", ".join(map(str, ids[:5])) + (", ..." if len(ids) > 5 else "")


def latest_listed_stamp(item: dict[str, object], zone: ServiceZone) -> str | None:
    """The listed stamp (:func:`listed_stamp`) as the latest instant it can name: a wall-clock time sent without
    a UTC offset in the hour a fall-back repeats names two instants, and is read as the first (``fold=0``); a
    shipment changed in the second pass then looks older than the copy held from the first, which is no sign of
    a restore (the probe judges a stamp earlier only when it is, whichever instant it names)."""
    try:
        local = parse_iso_datetime(document_value(item, LAST_MODIFIED))
    except DateTimeParseError:
        return None
    if local is None or local.tzinfo is not None or zone.tz is dt.UTC:
        return listed_stamp(item, zone)
    second = local.replace(tzinfo=zone.tz, fold=1).utcoffset()
    if second is None or second == local.replace(tzinfo=zone.tz, fold=0).utcoffset():
        return listed_stamp(item, zone)
    return ShipmentKey.of_instant(0, local.replace(tzinfo=dt.timezone(second))).stamp


def listed_stamp(item: dict[str, object], zone: ServiceZone) -> str | None:
    """The listed last-modified stamp (``ShipmentKey.stamp``); None when unreadable (then the shipment
    is fetched again, never trusted)."""
    try:
        return ShipmentKey.of_instant(0, zone.parse(document_value(item, LAST_MODIFIED))).stamp
    except (CursorError, DateTimeParseError):
        return None
