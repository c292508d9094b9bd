"""Detail streams (events, air and sea main-carriage legs, memos) of changed shipments.

The shipments stream queues every changed shipment for each detail stream in the same transaction
as its own rows and cursor (``freight_meta.pending_details``). A detail stream drains its queue in
batches: fetch concurrently, normalize, and in ONE transaction replace that shipment's rows in its
table and remove the shipment from the queue. The queue is the detail stream's cursor: a crash
leaves the unfinished shipments queued, and nothing is ever acknowledged before it is written.

A shipment that answers 404 here was deleted after the shipments stream queued it: its rows in this
stream's table are removed and a ``rejected_records`` row says why.

One shipment's failure never stops the stream (``isolation``): an answer of the wrong shape, a body
cut short, a 500 on every attempt, a memo read that never adds up to its ``X-Row-Count``: that
shipment's entry moves from the work queue to the retry queue (``freight_meta.quarantine``) in the
batch's transaction, its old rows stay, and later runs re-queue it with backoff until it loads. A
value that cannot be converted is null and one ``data_problems`` row. What is not a record's fault
raises and cancels the rest of its batch (``tasks.run_all``); the breaker stops the stream when too
many shipments fail.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from freight_pipeline.normalize import (
    Problems,
    normalize_events,
    normalize_main_carriage,
    normalize_memos,
    to_arrow_batch,
)
from freight_pipeline.sync.changes import read_complete
from freight_pipeline.sync.isolation import Breaker, RecordFailure, data_problems, json_text, record_failure
from freight_pipeline.sync.result import StreamResult
from freight_pipeline.sync.settings import SyncSettings
from freight_pipeline.sync.source import ShipmentGone, SourceAPI
from freight_pipeline.sync.tasks import run_all
from freight_pipeline.warehouse import DataProblem, PendingDetail, Quarantined, Reject, Warehouse

Progress = Callable[[str], None]
Rows = dict[str, list[dict[str, Any]]]


@dataclass(frozen=True)
class DetailStream:
    """How one detail stream fetches and normalizes the data of one queued shipment."""

    name: str
    table: str
    fetch: Callable[[SourceAPI, PendingDetail, SyncSettings], Awaitable[Any]]
    normalize: Callable[[PendingDetail, Any, Problems], Rows]
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
            lambda item, data, problems: normalize_events(item.shipment_id, data, problems),
        ),
        DetailStream(
            "air_main_carriage_legs", "air_main_carriage_legs", _fetch_air,
            lambda item, data, problems: normalize_main_carriage(item.shipment_id, data, "air", problems),
            applies=lambda item: item.mode_of_transport == "AIR",
        ),
        DetailStream(
            "sea_main_carriage_legs", "sea_main_carriage_legs", _fetch_sea,
            lambda item, data, problems: normalize_main_carriage(item.shipment_id, data, "sea", problems),
            applies=lambda item: item.mode_of_transport == "SEA",
        ),
        DetailStream(
            "shipment_memos", "shipment_memos", _fetch_memos,
            lambda item, data, problems: normalize_memos(
                data, {(item.client, item.shipment_number): item.shipment_id}, problems
            ),
        ),
    )
}


async def _fetch_one(
    stream: DetailStream, source: SourceAPI, item: PendingDetail, settings: SyncSettings
) -> tuple[PendingDetail, Any]:
    """The answer for one queued shipment, None for a 404, or its RecordFailure (others raise)."""
    if not stream.applies(item):
        return item, []
    try:
        return item, await stream.fetch(source, item, settings)
    except ShipmentGone:
        return item, None
    except Exception as exc:
        failure = record_failure(exc)
        if failure is None:
            raise
        return item, failure


def _context(item: PendingDetail) -> dict[str, Any]:
    """What a retry of ``item`` needs besides its shipment id (kept with its quarantine entry)."""
    return {"client": item.client, "shipment_number": item.shipment_number, "mode_of_transport": item.mode_of_transport}


def requeue_due(warehouse: Warehouse, stream: str, run_id: str) -> set[int]:
    """Put the quarantined shipments of ``stream`` whose next attempt is due back on its work queue
    (they stay quarantined until they load); returns their ids."""
    due = warehouse.due_quarantine(stream, run_id)
    items = []
    for entry in due:
        context = json.loads(entry["context"]) if entry.get("context") else {}
        items.append(
            PendingDetail(
                stream,
                int(entry["shipment_id"]),
                context.get("client"),
                context.get("shipment_number"),
                context.get("mode_of_transport"),
            )
        )
    warehouse.enqueue(items, run_id, replace=False)
    return {item.shipment_id for item in items}


def _request(stream: str, item: PendingDetail) -> str:
    """The request behind a detail stream's answer, for a quarantine entry."""
    if stream == "shipment_memos":
        return f"POST /service/shipment/memo/lookup (CLIENT {item.client}, SHIPMENT_NUMBER {item.shipment_number})"
    path = {"shipment_events": "events", "air_main_carriage_legs": "airmaincarriage"}.get(stream, "seamaincarriage")
    return f"GET /service/shipment/{item.shipment_id}/{path}"


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
    retried = requeue_due(warehouse, name, run_id)
    queued = warehouse.pending_count(name)
    result.extra["queued_at_start"] = queued
    result.extra["retried"] = len(retried)
    breaker = Breaker(name, settings.breaker_max_share, settings.breaker_min_failures)
    gone = 0
    while True:
        items = warehouse.pending_details(name, limit=settings.detail_batch_size)
        if not items:
            break
        fetched = await run_all(_fetch_one(stream, source, item, settings) for item in items)
        rows: Rows = {}
        unit_ids: list[int] = []
        rejects: list[Reject] = []
        quarantined: list[Quarantined] = []
        problems: list[DataProblem] = []
        for item, data in fetched:
            if data is None:  # the shipment vanished: its rows go; the shipments stream reconciles it
                gone += 1
                unit_ids.append(item.shipment_id)
                rejects.append(Reject(name, str(item.shipment_id), None, gone_reason(name)))
                continue
            failure = data if isinstance(data, RecordFailure) else None
            if failure is None:
                result.rows_read += len(data) if isinstance(data, list) else 1
                found = Problems()
                try:
                    produced = stream.normalize(item, data, found)
                except Exception as exc:  # RecordShapeError, or a bug met on this record's data
                    failure = record_failure(exc) or RecordFailure(f"{type(exc).__name__}: {exc}")
                    failure = RecordFailure(failure.reason, _request(name, item), None, json_text(data, 500))
            if failure is not None:
                quarantined.append(failure.quarantined(name, item.shipment_id, item.shipment_id, _context(item)))
                rejects.append(Reject(name, str(item.shipment_id), failure.excerpt, failure.reason))
                continue
            unit_ids.append(item.shipment_id)
            problems.extend(data_problems(name, item.shipment_id, item.shipment_id, found))
            for table, table_rows in produced.items():
                rows.setdefault(table, []).extend(table_rows)
        new_failures = sum(1 for q in quarantined if q.shipment_id not in retried)
        breaker.count(len(items) - (len(quarantined) - new_failures), new_failures)
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
            quarantined=quarantined,
            problems=problems,
            backoff=settings.backoff,
        )
        queued = remaining
        result.add_rows(counts)
        result.rejected += len(rejects)
        result.quarantined += len(quarantined)
        result.data_problems += len(problems)
        say(f"{name}: {len(items)} shipments done, {max(queued, 0)} queued, {result.rows_read} rows read")
    requests_after, retries_after = source.request_counts()
    result.requests = requests_after - requests_before
    result.retries = retries_after - retries_before
    result.extra["shipments_gone"] = gone
    result.extra["retry_queue"] = warehouse.quarantine_count(name)
    result.cursor_after = warehouse.get_cursor(name)
    return result

