"""The shipments stream: changed ids by keyset walk, full documents, one transaction per batch.

Each lookup page of changed shipments is fetched in batches of ``fetch_batch_size`` documents; each
batch is written in ONE warehouse transaction together with the cursor that covers it (the key of
the batch's last shipment, pages and batches being in key order) and the detail work it creates
(events, legs and memos of those shipments, queued for their own streams). A crash therefore leaves
either the old cursor with the old rows or the new cursor with the new rows (DESIGN.md rules 6, 7).

Reconciliation (every ``reconcile_interval``) lists every live id and deletes what the source no
longer has: it deletes only on the strength of a listing whose every page agreed with its
``X-Row-Count``, so a dropped record or a page-size cap fails the stream instead of deleting.

One bad record never stops the stream (``isolation``): a document that fails after the client's
retries, or cannot be normalized at all, is quarantined in the same transaction as the batch that
skipped it (the cursor still advances) and retried by later runs with backoff until it loads or
vanishes from the source; its old rows, if any, stay meanwhile. A value that cannot be converted is
null in its column and one ``data_problems`` row. What is not a record's fault re-raises, and the
breaker stops the stream when too many records fail.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from freight_pipeline.datetimes import DateTimeParseError, parse_iso_datetime, to_utc
from freight_pipeline.normalize import SHIPMENT_TABLES, NormalizationError, Problems, normalize_shipment, to_arrow_batch
from freight_pipeline.normalize.errors import Invalid
from freight_pipeline.normalize.fields import to_json
from freight_pipeline.sync.changes import RowCountMismatch, WalkStats, ceiling_of, checked_lookup, walk_changes
from freight_pipeline.sync.cursor import (
    BEGINNING,
    ShipmentKey,
    cursor_offset,
    dst_widening,
    parse_start_cursor,
)
from freight_pipeline.sync.isolation import Breaker, RecordFailure, data_problems, json_text, record_failure
from freight_pipeline.sync.result import StreamResult
from freight_pipeline.sync.settings import SyncSettings
from freight_pipeline.sync.source import ShipmentGone, SourceAPI
from freight_pipeline.sync.tasks import run_all
from freight_pipeline.warehouse import DataProblem, PendingDetail, Quarantined, RawDocument, Reject, Warehouse

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
    quarantined: list[Quarantined] = field(default_factory=list)
    problems: list[DataProblem] = field(default_factory=list)


Fetched = dict[str, Any] | RecordFailure | None
"""A retrieve's outcome: the document, the record's failure, or None for a 404."""


async def _fetch_documents(source: SourceAPI, ids: Sequence[int]) -> list[tuple[int, Fetched]]:
    """Full documents of ``ids``, concurrently (the client bounds concurrency and retries).

    A record's failure is returned, not raised; what is not a record's fault (``isolation``)
    raises and cancels the rest of the batch.
    """

    async def one(shipment_id: int) -> tuple[int, Fetched]:
        try:
            return shipment_id, await source.get_shipment(shipment_id)
        except ShipmentGone:
            return shipment_id, None
        except Exception as exc:
            failure = record_failure(exc)
            if failure is None:
                raise
            return shipment_id, failure

    return await run_all(one(i) for i in ids)


def _quarantine(batch: _Batch, shipment_id: int, failure: RecordFailure, payload: str | None) -> None:
    batch.quarantined.append(failure.quarantined(STREAM, shipment_id, shipment_id))
    batch.rejects.append(Reject(STREAM, str(shipment_id), payload or failure.excerpt, failure.reason))


def _build_batch(fetched: list[tuple[int, Fetched]], fetched_at: dt.datetime) -> _Batch:
    batch = _Batch()
    for shipment_id, doc in fetched:
        if doc is None:
            batch.gone.append(shipment_id)
            reason = "not found (404) at retrieve: deleted in the source after lookup"
            batch.rejects.append(Reject(STREAM, str(shipment_id), None, reason))
            continue
        if isinstance(doc, RecordFailure):
            _quarantine(batch, shipment_id, doc, None)
            continue
        problems = Problems()
        try:
            raw_text = to_json(doc)
            rows = normalize_shipment(doc, problems)
            if doc.get("id") != shipment_id:
                raise NormalizationError(f"id: document id {doc.get('id')!r} does not match requested {shipment_id}")
        except Invalid as exc:
            _quarantine(batch, shipment_id, RecordFailure(f"the document cannot be stored: {exc}"), None)
            continue
        except Exception as exc:  # NormalizationError, or a bug met on this record's data
            failure = record_failure(exc) or RecordFailure(f"{type(exc).__name__}: {exc}")
            _quarantine(batch, shipment_id, failure, json_text(doc, 100_000))
            continue
        batch.raw.append(RawDocument(shipment_id, raw_text, fetched_at, _last_modified(doc)))
        batch.unit_ids.append(shipment_id)
        batch.problems.extend(data_problems(STREAM, shipment_id, shipment_id, problems))
        for table, table_rows in rows.items():
            batch.rows.setdefault(table, []).extend(table_rows)
        for stream in DETAIL_STREAMS:
            batch.pending.append(
                PendingDetail(
                    stream=stream,
                    shipment_id=shipment_id,
                    client=_text(doc.get("client")),
                    shipment_number=_text(doc.get("shipment_number")),
                    mode_of_transport=_text(doc.get("mode_of_transport")),
                )
            )
    return batch


def _last_modified(doc: dict[str, Any]) -> dt.datetime | None:
    """The document's last-modified instant in UTC; None when unreadable (its data problem says why)."""
    try:
        return to_utc(parse_iso_datetime(doc.get("last_modified_date_time")))
    except DateTimeParseError:
        return None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _write(
    warehouse: Warehouse,
    run_id: str,
    batch: _Batch,
    cursor: ShipmentKey | None,
    result: StreamResult,
    settings: SyncSettings,
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
        stream=STREAM,
        quarantined=batch.quarantined,
        problems=batch.problems,
        backoff=settings.backoff,
    )
    result.add_rows(counts)
    result.rejected += len(batch.rejects)
    result.quarantined += len(batch.quarantined)
    result.data_problems += len(batch.problems)


@dataclass(frozen=True)
class _Live:
    """A live shipment as the id listing shows it."""

    key: ShipmentKey | None
    """None: the listing gave no readable ``last_modified_date_time``."""
    last_modified: dt.datetime | None


async def _list_live_shipments(
    source: SourceAPI, page_size: int, attempts: int, stats: WalkStats
) -> dict[int, _Live]:
    """Every live shipment id with its last-modified key and instant, by keyset paging over ID.

    Every page is checked against ``X-Row-Count`` (asked again, then ``RowCountMismatch``): the
    caller deletes whatever is held but not listed, so a page that lost a record, or a service
    capping the page size below ``page_size``, must fail the listing, never end it early. The walk
    ends on a page that agrees with its row count and is shorter than ``page_size`` (or empty).
    """
    live: dict[int, _Live] = {}
    last_id = 0
    while True:
        items = await checked_lookup(
            source.lookup_shipments, [{"key": "ID", "match_mode": "GT", "value": str(last_id)}], ["ID"],
            page_size, stats, attempts,
        )
        for item in items:
            shipment_id = int(item["id"])
            try:
                instant = parse_iso_datetime(item.get("last_modified_date_time"))
                live[shipment_id] = _Live(ShipmentKey.of_instant(shipment_id, instant), to_utc(instant))
            except ValueError:  # CursorError and DateTimeParseError included: refetched, never trusted
                live[shipment_id] = _Live(None, None)
        if len(items) < page_size:
            return live
        if int(items[-1]["id"]) <= last_id:
            raise RowCountMismatch(f"id listing after id {last_id} returned a full page without progress")
        last_id = int(items[-1]["id"])


def _chunks(seq: Sequence[Any], size: int) -> list[Sequence[Any]]:
    return [seq[start : start + size] for start in range(0, len(seq), size)]


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
    floor = parse_start_cursor(settings.start_cursor)
    ceiling = await ceiling_of(source.lookup_shipments)
    result.extra["ceiling"] = ceiling.instant_text if ceiling else None
    if stored:
        cursor = ShipmentKey.from_json(stored)
        # DST: when the service's offset stepped back since the cursor was set, its wall clock
        # repeated that much, so re-read that much further back (cursor.dst_widening).
        widening = dst_widening(cursor, ceiling.offset if ceiling else None)
        after = cursor.minus(settings.overlap + widening)
        covered = ceiling.offset if widening and ceiling else cursor.offset
        if widening:
            result.extra["dst_widening_minutes"] = int(widening.total_seconds() // 60)
            say(f"shipments: the service's UTC offset stepped back by {widening}: re-reading that much further")
    else:
        cursor = floor
        after = floor
        covered = None  # the first walk reads everything from the floor: no repeated hour lies below it
    say(f"shipments: reading changes after {after.instant_text} up to {ceiling.instant_text if ceiling else '-'}")

    walk = WalkStats()
    breaker = Breaker(STREAM, settings.breaker_max_share, settings.breaker_min_failures)
    if ceiling is not None and after.second() <= ceiling.second():
        async for page in walk_changes(
            source.lookup_shipments, after, ceiling, page_size=settings.page_size,
            count_attempts=settings.count_attempts, stats=walk,
        ):
            result.rows_read += len(page)
            for chunk in _chunks(page, settings.fetch_batch_size):
                # Every id is re-fetched, the overlap included: a record changed twice within one second
                # keeps its last-modified value, so comparing it with the held one would miss the change.
                fetched = await _fetch_documents(source, [int(base["id"]) for _, base in chunk])
                batch = _build_batch(fetched, dt.datetime.now(dt.UTC))
                breaker.count(len(chunk), len(batch.quarantined))
                last_key = chunk[-1][0]
                batch_cursor = last_key.with_offset(cursor_offset(last_key, covered))
                new_cursor = batch_cursor if batch_cursor > cursor else None
                _write(warehouse, run_id, batch, new_cursor, result, settings)
                if new_cursor is not None:
                    cursor = new_cursor
                moved = f"cursor at {new_cursor.instant_text}" if new_cursor else "cursor kept (overlap re-read)"
                say(f"shipments: {result.rows_read} changed read, {len(batch.unit_ids)} written in this batch, {moved}")

    await _retry_quarantined(source, warehouse, settings, run_id, result, say)
    if _reconcile_due(warehouse, settings):
        await _reconcile(source, warehouse, settings, run_id, result, say, floor, walk, breaker)
        warehouse.set_cursor(RECONCILE_STREAM, json.dumps({"at": dt.datetime.now(dt.UTC).isoformat()}), run_id)

    requests_after, retries_after = source.request_counts()
    result.requests = requests_after - requests_before
    result.retries = retries_after - retries_before
    result.extra.update(
        lookups=walk.lookups, count_mismatches=walk.count_mismatches,
        retry_queue=warehouse.quarantine_count(STREAM),
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


def _wanted(live: _Live, floor: ShipmentKey) -> bool:
    """Whether reconciliation may fetch this live shipment: last modified at or after the start floor."""
    if floor == BEGINNING:
        return True
    return live.key is not None and live.key.second() >= floor.second()


async def _reconcile(
    source: SourceAPI,
    warehouse: Warehouse,
    settings: SyncSettings,
    run_id: str,
    result: StreamResult,
    say: Progress,
    floor: ShipmentKey,
    stats: WalkStats,
    breaker: Breaker,
) -> None:
    """Self-healing pass: delete what the source no longer has, fetch what the warehouse lacks or holds stale.

    Only shipments last modified at or after ``floor`` (the configured start cursor) are fetched;
    deletions apply to every shipment held, and to quarantined shipments that vanished. Quarantined
    shipments are left to the retry queue's backoff. Nothing is deleted unless the whole listing was
    read and checked (``_list_live_shipments`` raises otherwise).
    """
    live = await _list_live_shipments(source, settings.page_size, settings.count_attempts, stats)
    held = warehouse.shipment_last_modified(None)
    quarantined = warehouse.quarantined_ids(STREAM)
    vanished = sorted((set(held) | quarantined) - set(live))
    stale = sorted(
        i for i, entry in live.items()
        if _wanted(entry, floor) and i not in quarantined and (i not in held or held[i] != entry.last_modified)
    )
    result.extra["reconcile_listed"] = len(live)
    result.extra["reconcile_deleted"] = len(vanished)
    result.extra["reconcile_refetched"] = len(stale)
    result.extra["reconcile_before_start"] = sum(1 for i, e in live.items() if i not in held and not _wanted(e, floor))
    if vanished:
        _write(warehouse, run_id, _Batch(gone=vanished), None, result, settings)
        say(f"shipments: deleted {len(vanished)} shipments no longer in the source")
    await _fetch_and_write(source, warehouse, settings, run_id, result, breaker, stale)
    if stale:
        say(f"shipments: reconcile fetched {len(stale)} missing or stale shipments")


async def _fetch_and_write(
    source: SourceAPI,
    warehouse: Warehouse,
    settings: SyncSettings,
    run_id: str,
    result: StreamResult,
    breaker: Breaker | None,
    ids: Sequence[int],
) -> None:
    """Fetch and write ``ids`` in batches, without moving the cursor (retries and reconcile).

    ``breaker`` None: failures are not counted (retries of records already quarantined: they stay
    where they are, and counting them would let a few persistently bad records stop every run).
    """
    for chunk in _chunks(ids, settings.fetch_batch_size):
        batch = _build_batch(await _fetch_documents(source, chunk), dt.datetime.now(dt.UTC))
        if breaker is not None:
            breaker.count(len(chunk), len(batch.quarantined))
        _write(warehouse, run_id, batch, None, result, settings)


async def _retry_quarantined(
    source: SourceAPI,
    warehouse: Warehouse,
    settings: SyncSettings,
    run_id: str,
    result: StreamResult,
    say: Progress,
) -> None:
    """Fetch again the quarantined shipments whose next attempt is due: they load, vanish (404), or
    stay quarantined with a longer backoff."""
    due = [int(entry["record_key"]) for entry in warehouse.due_quarantine(STREAM, run_id)]
    if not due:
        return
    quarantined_before = result.quarantined
    await _fetch_and_write(source, warehouse, settings, run_id, result, None, due)
    failed_again = result.quarantined - quarantined_before
    result.extra["retried"] = len(due)
    result.extra["retried_still_failing"] = failed_again
    say(f"shipments: retried {len(due)} quarantined shipments, {len(due) - failed_again} loaded or gone")
