"""Detail streams (events, air and sea main-carriage legs, memos) of changed shipments.

The shipments stream queues every changed shipment for each detail stream in the same transaction
as its own rows and cursor (``freight_meta.pending_details``). A detail stream drains its queue in
batches: fetch concurrently, normalize, and in ONE transaction replace that shipment's rows in its
table and remove the shipment from the queue. The queue is the detail stream's cursor: a crash
leaves the unfinished shipments queued, and nothing is ever acknowledged before it is written.

A shipment that answers 404 here was deleted after the shipments stream queued it: its rows in this
stream's table are removed and a ``rejected_records`` row says why. A memo read that does not add up
to its ``X-Row-Count`` fails the stream before the batch is written, so its shipments stay queued.
A failed request cancels the rest of its batch (``tasks.run_all``).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from freight_pipeline.normalize import (
    NormalizationError,
    normalize_events,
    normalize_main_carriage,
    normalize_memos,
    to_arrow_batch,
)
from freight_pipeline.sync.changes import read_complete
from freight_pipeline.sync.result import StreamResult
from freight_pipeline.sync.settings import SyncSettings
from freight_pipeline.sync.source import ShipmentGone, SourceAPI
from freight_pipeline.sync.tasks import run_all
from freight_pipeline.warehouse import PendingDetail, Reject, Warehouse

Progress = Callable[[str], None]
Rows = dict[str, list[dict[str, Any]]]


@dataclass(frozen=True)
class DetailStream:
    """How one detail stream fetches and normalizes the data of one queued shipment."""

    name: str
    table: str
    fetch: Callable[[SourceAPI, PendingDetail, SyncSettings], Awaitable[Any]]
    normalize: Callable[[PendingDetail, Any], Rows]
    applies: Callable[[PendingDetail], bool] = lambda item: True
    """False: the shipment cannot have data in this stream (e.g. air legs of a sea shipment):
    its rows are cleared without a request."""


async def _fetch_events(source: SourceAPI, item: PendingDetail, settings: SyncSettings) -> Any:
    return await source.get_events(item.shipment_id)


async def _fetch_air(source: SourceAPI, item: PendingDetail, settings: SyncSettings) -> Any:
    return await source.get_air_legs(item.shipment_id)


async def _fetch_sea(source: SourceAPI, item: PendingDetail, settings: SyncSettings) -> Any:
    return await source.get_sea_legs(item.shipment_id)


async def _fetch_memos(source: SourceAPI, item: PendingDetail, settings: SyncSettings) -> Any:
    if not item.client or not item.shipment_number:
        return []
    client, number = item.client, item.shipment_number
    return await read_complete(
        lambda: source.memo_pages(client, number),
        f"memo lookup CLIENT = {client} AND SHIPMENT_NUMBER = {number} (shipment {item.shipment_id})",
        settings.count_attempts,
        count_required=True,
    )


STREAMS: dict[str, DetailStream] = {
    s.name: s
    for s in (
        DetailStream(
            "shipment_events", "shipment_events", _fetch_events,
            lambda item, data: normalize_events(item.shipment_id, data),
        ),
        DetailStream(
            "air_main_carriage_legs", "air_main_carriage_legs", _fetch_air,
            lambda item, data: normalize_main_carriage(item.shipment_id, data, kind="air"),
            applies=lambda item: item.mode_of_transport == "AIR",
        ),
        DetailStream(
            "sea_main_carriage_legs", "sea_main_carriage_legs", _fetch_sea,
            lambda item, data: normalize_main_carriage(item.shipment_id, data, kind="sea"),
            applies=lambda item: item.mode_of_transport == "SEA",
        ),
        DetailStream(
            "shipment_memos", "shipment_memos", _fetch_memos,
            lambda item, data: normalize_memos(data, {(item.client, item.shipment_number): item.shipment_id}),
        ),
    )
}


async def _fetch_one(
    stream: DetailStream, source: SourceAPI, item: PendingDetail, settings: SyncSettings
) -> tuple[PendingDetail, Any]:
    if not stream.applies(item):
        return item, []
    try:
        return item, await stream.fetch(source, item, settings)
    except ShipmentGone:
        return item, None


def gone_reason(stream: str) -> str:
    return f"not found (404) at {stream}: deleted in the source after the shipments stream queued it"


async def sync_detail_stream(
    name: str,
    source: SourceAPI,
    warehouse: Warehouse,
    settings: SyncSettings,
    run_id: str,
    progress: Progress | None = None,
) -> StreamResult:
    """Drain this stream's queue of changed shipments."""
    stream = STREAMS[name]
    say = progress or (lambda message: None)
    result = StreamResult(name, run_id, dt.datetime.now(dt.UTC))
    requests_before, retries_before = source.request_counts()
    result.cursor_before = warehouse.get_cursor(name)
    queued = warehouse.pending_count(name)
    result.extra["queued_at_start"] = queued
    gone = 0
    while True:
        items = warehouse.pending_details(name, limit=settings.detail_batch_size)
        if not items:
            break
        fetched = await run_all(_fetch_one(stream, source, item, settings) for item in items)
        rows: Rows = {}
        unit_ids: list[int] = []
        rejects: list[Reject] = []
        for item, data in fetched:
            if data is None:  # the shipment vanished: its rows go; the shipments stream reconciles it
                gone += 1
                unit_ids.append(item.shipment_id)
                rejects.append(Reject(name, str(item.shipment_id), None, gone_reason(name)))
                continue
            result.rows_read += len(data) if isinstance(data, list) else 1
            try:
                produced = stream.normalize(item, data)
            except NormalizationError as exc:
                rejects.append(Reject(name, str(item.shipment_id), json.dumps(data, default=str), str(exc)))
                continue
            unit_ids.append(item.shipment_id)
            for table, table_rows in produced.items():
                rows.setdefault(table, []).extend(table_rows)
        remaining = queued - len(items)
        cursor = json.dumps({"queue_remaining": max(remaining, 0), "run_id": run_id}, sort_keys=True)
        counts = warehouse.apply_detail_batch(
            run_id=run_id,
            stream=name,
            tables=to_arrow_batch(rows),
            replaced_tables=(stream.table,),
            unit_ids=unit_ids,
            done=[(item.shipment_id, item.enqueued_at) for item in items],
            rejects=rejects,
            cursor=cursor,
        )
        queued = remaining
        result.add_rows(counts)
        result.rejected += len(rejects)
        say(f"{name}: {len(items)} shipments done, {max(queued, 0)} queued, {result.rows_read} rows read")
    requests_after, retries_after = source.request_counts()
    result.requests = requests_after - requests_before
    result.retries = retries_after - retries_before
    result.extra["shipments_gone"] = gone
    result.cursor_after = warehouse.get_cursor(name)
    return result

