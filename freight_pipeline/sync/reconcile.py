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
"""

from __future__ import annotations

from dataclasses import dataclass

from freight_pipeline.datetimes import DateTimeParseError, parse_service_datetime
from freight_pipeline.sync.changes import RowCountMismatch, WalkStats, checked_lookup
from freight_pipeline.sync.cursor import BEGINNING, CursorError, ShipmentKey
from freight_pipeline.sync.source import SourceAPI
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


async def compare_with_source(
    source: SourceAPI,
    warehouse: Warehouse,
    page_size: int,
    attempts: int,
    stats: WalkStats,
    floor: ShipmentKey,
    waiting_stream: str,
) -> Differences:
    """List every live id into the warehouse's temporary listing, then diff it with what is held."""
    listed = 0
    last_id = 0
    with warehouse.reads.live_listing() as listing:
        while True:
            items = await checked_lookup(
                source.lookup_shipments, [{"key": "ID", "match_mode": "GT", "value": str(last_id)}], ["ID"],
                page_size, stats, attempts,
            )
            listing.add([int(item["id"]) for item in items], [_key_text(item) for item in items])
            listed += len(items)
            if len(items) < stats.page_size(page_size):  # the page size served, if the service caps it
                break
            if int(items[-1]["id"]) <= last_id:
                raise RowCountMismatch(f"id listing after id {last_id} returned a full page without progress")
            last_id = int(items[-1]["id"])
        vanished, stale, before_start = listing.differences(
            None if floor == BEGINNING else floor.instant_text, waiting_stream
        )
    return Differences(listed, vanished, stale, before_start)


def _key_text(item: dict[str, object]) -> str | None:
    """The listed last-modified stamp (``ShipmentKey.stamp``); None when unreadable (then the shipment
    is fetched again, never trusted)."""
    try:
        return ShipmentKey.of_instant(0, parse_service_datetime(item.get("last_modified_date_time"))).stamp
    except (CursorError, DateTimeParseError):
        return None
