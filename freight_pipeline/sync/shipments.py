"""The shipments stream: changed ids by keyset walk, full documents, one transaction per page.

Each page of changed shipments is written in ONE warehouse transaction together with the cursor
that covers it (the key of the page's last shipment) and the detail work it creates (events, legs
and memos of those shipments, queued for their own streams). A crash therefore leaves either the
old cursor with the old rows or the new cursor with the new rows (DESIGN.md rules 6 and 7).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from freight_pipeline.datetimes import parse_iso_datetime, to_utc
from freight_pipeline.normalize import SHIPMENT_TABLES, NormalizationError, normalize_shipment, to_arrow_batch
from freight_pipeline.sync.changes import RowCountMismatch, WalkStats, ceiling_of, walk_changes
from freight_pipeline.sync.cursor import ShipmentKey, parse_start_cursor
from freight_pipeline.sync.result import StreamResult
from freight_pipeline.sync.settings import SyncSettings
from freight_pipeline.sync.source import ShipmentGone, SourceAPI
from freight_pipeline.warehouse import PendingDetail, RawDocument, Reject, Warehouse

log = logging.getLogger(__name__)

STREAM = "shipments"
RECONCILE_STREAM = "shipments_reconcile"
"""``sync_state`` entry holding when the last full id reconciliation finished."""
DETAIL_STREAMS = ("shipment_events", "air_main_carriage_legs", "sea_main_carriage_legs", "shipment_memos")

Progress = Callable[[str], None]


@dataclass
class _Batch:
    rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    unit_ids: list[int] = field(default_factory=list)
    raw: list[RawDocument] = field(default_factory=list)
    gone: list[int] = field(default_factory=list)
    rejects: list[Reject] = field(default_factory=list)
    pending: list[PendingDetail] = field(default_factory=list)


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)


async def _fetch_documents(source: SourceAPI, ids: Sequence[int]) -> list[tuple[int, dict[str, Any] | None]]:
    """Full documents of ``ids``, concurrently (the client bounds concurrency); None for a 404."""

    async def one(shipment_id: int) -> tuple[int, dict[str, Any] | None]:
        try:
            return shipment_id, await source.get_shipment(shipment_id)
        except ShipmentGone:
            return shipment_id, None

    return list(await asyncio.gather(*(one(i) for i in ids)))


def _build_batch(run_id: str, fetched: list[tuple[int, dict[str, Any] | None]], fetched_at: dt.datetime) -> _Batch:
    batch = _Batch()
    for shipment_id, doc in fetched:
        if doc is None:
            batch.gone.append(shipment_id)
            reason = "not found (404) at retrieve: deleted in the source after lookup"
            batch.rejects.append(Reject(STREAM, str(shipment_id), None, reason))
            continue
        raw_text = _json(doc)
        last_modified = to_utc(parse_iso_datetime(doc.get("last_modified_date_time")))
        batch.raw.append(RawDocument(shipment_id, raw_text, fetched_at, last_modified))
        try:
            if doc.get("id") != shipment_id:
                raise NormalizationError(f"id: document id {doc.get('id')!r} does not match requested {shipment_id}")
            rows = normalize_shipment(doc)
        except NormalizationError as exc:
            batch.rejects.append(Reject(STREAM, str(shipment_id), raw_text, str(exc)))
            continue
        batch.unit_ids.append(shipment_id)
        for table, table_rows in rows.items():
            batch.rows.setdefault(table, []).extend(table_rows)
        for stream in DETAIL_STREAMS:
            batch.pending.append(
                PendingDetail(
                    stream=stream,
                    shipment_id=shipment_id,
                    client=doc.get("client"),
                    shipment_number=doc.get("shipment_number"),
                    mode_of_transport=doc.get("mode_of_transport"),
                )
            )
    return batch


def _write(
    warehouse: Warehouse, run_id: str, batch: _Batch, cursor: ShipmentKey | None, result: StreamResult
) -> None:
    counts = warehouse.apply_shipment_batch(
        run_id=run_id,
        tables=to_arrow_batch(batch.rows),
        replaced_tables=SHIPMENT_TABLES,
        unit_ids=batch.unit_ids,
        raw_documents=batch.raw,
        deleted_ids=batch.gone,
        rejects=batch.rejects,
        pending=batch.pending,
        cursor=(STREAM, cursor.to_json()) if cursor is not None else None,
    )
    result.add_rows(counts)
    result.rejected += len(batch.rejects)


async def _list_live_shipments(source: SourceAPI, page_size: int) -> dict[int, dt.datetime | None]:
    """Every live shipment id with its last-modified instant, by keyset paging over ID."""
    live: dict[int, dt.datetime | None] = {}
    last_id = 0
    while True:
        page = await source.lookup_shipments(
            [{"key": "ID", "match_mode": "GT", "value": str(last_id)}], ["ID"], ["ASC"], page_size
        )
        for item in page.items:
            live[int(item["id"])] = to_utc(parse_iso_datetime(item.get("last_modified_date_time")))
        if len(page.items) < page_size:
            return live
        if int(page.items[-1]["id"]) <= last_id:
            raise RowCountMismatch(f"id listing after id {last_id} returned a full page without progress")
        last_id = int(page.items[-1]["id"])


async def sync_shipments(
    source: SourceAPI,
    warehouse: Warehouse,
    settings: SyncSettings,
    run_id: str,
    progress: Progress | None = None,
) -> StreamResult:
    """Bring ``freight.shipments`` and every table embedded in the document up to the service."""
    say = progress or (lambda message: None)
    result = StreamResult(STREAM, run_id, dt.datetime.now(dt.UTC))
    requests_before, retries_before = source.request_counts()
    stored = warehouse.get_cursor(STREAM)
    result.cursor_before = stored
    if stored:
        cursor = ShipmentKey.from_json(stored)
        after = cursor.minus(settings.overlap)
    else:
        cursor = parse_start_cursor(settings.start_cursor)
        after = cursor
    ceiling = await ceiling_of(source.lookup_shipments)
    result.extra["ceiling"] = ceiling.instant_text if ceiling else None
    say(f"shipments: reading changes after {after.instant_text} up to {ceiling.instant_text if ceiling else '-'}")

    walk = WalkStats()
    if ceiling is not None and after.second() <= ceiling.second():
        async for page in walk_changes(
            source.lookup_shipments, after, ceiling, page_size=settings.page_size,
            count_attempts=settings.count_attempts, stats=walk,
        ):
            result.rows_read += len(page)
            # Every id is re-fetched, the overlap included: a record changed twice within one second
            # keeps its last-modified value, so comparing it with the held one would miss the change.
            wanted = [int(base["id"]) for _, base in page]
            fetched = await _fetch_documents(source, wanted)
            batch = _build_batch(run_id, fetched, dt.datetime.now(dt.UTC))
            page_cursor = page[-1][0]
            new_cursor = page_cursor if page_cursor > cursor else None
            _write(warehouse, run_id, batch, new_cursor, result)
            if new_cursor is not None:
                cursor = new_cursor
            say(f"shipments: {result.rows_read} changed read, {len(batch.unit_ids)} written in this page")

    if _reconcile_due(warehouse, settings):
        await _reconcile(source, warehouse, settings, run_id, result, say)
        warehouse.set_cursor(RECONCILE_STREAM, json.dumps({"at": dt.datetime.now(dt.UTC).isoformat()}), run_id)

    requests_after, retries_after = source.request_counts()
    result.requests = requests_after - requests_before
    result.retries = retries_after - retries_before
    result.extra.update(
        lookups=walk.lookups, count_mismatches=walk.count_mismatches,
    )
    stored_after = warehouse.get_cursor(STREAM)
    result.cursor_after = stored_after
    if stored_after:
        last = ShipmentKey.from_json(stored_after)
        result.extra["cursor_instant"] = last.instant_text
    return result


def _reconcile_due(warehouse: Warehouse, settings: SyncSettings) -> bool:
    if settings.reconcile_interval is None:
        return False
    stored = warehouse.get_cursor(RECONCILE_STREAM)
    if not stored:
        return True
    try:
        last = dt.datetime.fromisoformat(json.loads(stored)["at"])
    except (ValueError, KeyError, TypeError):
        return True
    return dt.datetime.now(dt.UTC) - last >= settings.reconcile_interval


async def _reconcile(
    source: SourceAPI, warehouse: Warehouse, settings: SyncSettings, run_id: str, result: StreamResult, say: Progress
) -> None:
    """Self-healing pass: delete what the source no longer has, fetch what the warehouse lacks or holds stale."""
    live = await _list_live_shipments(source, settings.page_size)
    held = warehouse.shipment_last_modified(None)
    vanished = sorted(set(held) - set(live))
    stale = sorted(i for i, lm in live.items() if i not in held or held[i] != lm)
    result.extra["reconcile_deleted"] = len(vanished)
    result.extra["reconcile_refetched"] = len(stale)
    if vanished:
        say(f"shipments: {len(vanished)} shipments no longer in the source: deleting")
        _write(warehouse, run_id, _Batch(gone=vanished), None, result)
    for start in range(0, len(stale), settings.page_size):
        chunk = stale[start : start + settings.page_size]
        fetched = await _fetch_documents(source, chunk)
        _write(warehouse, run_id, _build_batch(run_id, fetched, dt.datetime.now(dt.UTC)), None, result)
    if stale:
        say(f"shipments: reconciled {len(stale)} missing or stale shipments")
