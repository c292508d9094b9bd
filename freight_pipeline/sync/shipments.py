"""The shipments stream: one pass per changed shipment, streamed from the change walk to the writer.

The walk finds changed shipments by keyset paging over (last-modified date, time, id) up to the
run's ceiling (``changes``). For each, its document, events, the legs of its mode and its memo
lines are fetched together (``bundle``, one round of concurrent requests), normalized together and
written in batches of ``fetch_batch_size`` shipments whose reads have finished (one still being read
never holds back the others: ``pipeline.stream_as_finished``), each ONE warehouse transaction
holding every table's rows of its shipments and the cursor of the last shipment of the walk's prefix
written whole (``assemble``): never past a shipment not yet written. Fetching the next batches
overlaps normalizing one and writing the one before it, with bounded queues (``pipeline``), and the
requests in flight adapt to the service (``client.limiter``). A crash leaves the old cursor with the
old rows or the new cursor with the new rows: the cursor never runs ahead of the rows it covers, and
no batch is half written.

Overlap re-reads skip a shipment whose held copy is provably current (the same last-modified
instant, fetched after it: compared as instants with their UTC offsets, so a change at 02:30 after a
fall-back is not mistaken for the one at 02:30 before it; ``warehouse.stamps``).
After the walk: records waiting in the retry queue whose
next attempt is due are fetched again (a failed document brings its whole shipment, a failed
detail part only that part); then, every ``reconcile_interval``, the reconcile pass (``reconcile``),
at once when the probe before the walk found that the service's data went back (a restore:
``reconcile.probe_for_restore``); then the events and memo lines of open shipments re-read to find what
the service changes without moving their stamp, and keep them within a bound once it does
(``freshness``); one whose events answer 404 there is read for its document: gone too, it is deleted as a
document's 404 deletes it (no difference counted), else its rows are left as held.

One bad record never stops the stream (``isolation``); what is not a record's fault re-raises and
writes nothing of the batch in hand; the breaker stops the stream when too many shipments fail.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from freight_pipeline.config import SERVICE_TIMEZONE_ENV
from freight_pipeline.datetimes import DateTimeParseError, ServiceZone, format_offset, to_utc
from freight_pipeline.normalize.shapes import FieldTally, fields_lost, values_changed
from freight_pipeline.normalize.specs.shipments import SHIPMENTS
from freight_pipeline.sync import freshness, memo_batch
from freight_pipeline.sync.assemble import Assembled, PartCounts
from freight_pipeline.sync.backfill import CURSOR_PREFIX as BACKFILL_PREFIX
from freight_pipeline.sync.backfill import completed_cursor, takeover_cursor
from freight_pipeline.sync.bundle import GONE, Bundle, Work, fetch_bundle
from freight_pipeline.sync.changes import WalkStats, ceiling_by, ceiling_of, walk_changes, wall_clock_key
from freight_pipeline.sync.cursor import BEGINNING, ShipmentKey, cursor_offset, dst_widening, parse_start_cursor
from freight_pipeline.sync.freshness import Unstamped
from freight_pipeline.sync.isolation import Breaker, RecordFailure
from freight_pipeline.sync.memo_batch import BatchingOff, MemoBatches
from freight_pipeline.sync.parts import ALL_PARTS, DOCUMENT, EVENTS, MEMOS, PART_OF_TABLE, PART_TABLES, PARTS, Ref
from freight_pipeline.sync.pipeline import Finished, read_ahead, stream_as_finished
from freight_pipeline.sync.progress import Meter, Progress, loop_safe
from freight_pipeline.sync.reconcile import Probe, compare_with_source, probe_for_restore
from freight_pipeline.sync.result import NoticeKind, StreamResult
from freight_pipeline.sync.settings import SyncSettings
from freight_pipeline.sync.source import SourceAPI
from freight_pipeline.sync.workers import IN_PROCESS_UP_TO, Assembler, sync_workers
from freight_pipeline.warehouse.history import BEHIND_STATE
from freight_pipeline.warehouse.records import BatchWrite
from freight_pipeline.warehouse.stamps import WALL_CLOCK_CHARS
from freight_pipeline.warehouse.store import Warehouse

STREAM = DOCUMENT
RECONCILE_STREAM = "shipments_reconcile"
"""``sync_state`` entry holding when the last full id reconciliation finished."""
PART_STREAMS: tuple[str, ...] = tuple(part.stream for part in PARTS)
READ = "read"
"""``extra`` key: the shipments the run read, by how each was listed (:data:`WALK`, then the reads by id: the retry
queue's, the lookup's unstamped, the reconcile's); their sum is ``rows_read``."""
WALK, RETRY_QUEUE, UNSTAMPED, RECONCILE = "walk", "retry_queue", "unstamped", "reconcile"
KEPT_IDS_SHOWN = 100
"""The ids of shipments left as held a run's ``extra.kept_as_held`` names (the lowest; its count says how many)."""
FROM_SCRATCH = "done by the first walk from the beginning"
"""The first run of an empty warehouse, walking from the beginning, lists every shipment: it counts as
a reconciliation (there is nothing held that could have vanished, nothing it could have missed)."""



@dataclass
class _Run:
    """One run of the stream: what it writes with, and what it counted."""

    source: SourceAPI
    warehouse: Warehouse
    settings: SyncSettings
    run_id: str
    result: StreamResult
    say: Progress
    ceiling_text: str | None
    breaker: Breaker
    assemble: Assembler
    """Where the batches are normalized (``assemble``: here, or in a worker process)."""
    meter: Meter
    """Shipments written of those the walk announced and the work listed after it (a progress bar's)."""
    counts: dict[str, PartCounts] = field(default_factory=dict)
    cursor_stream: str = STREAM
    """Where the cursor goes: ``shipments``, or a backfill partition's own ``shipments@<range>``."""
    cursor: ShipmentKey | None = None
    covered: dt.timedelta | None = None
    cursor_cap: ShipmentKey | None = None
    """The furthest the cursor may go: the newest stamp due by the pipeline's clock (None: the ceiling's), so
    shipments stamped in the future are read without carrying it past every change made until they come due."""
    compare: bool = False
    """Write only the rows that differ from those held (a re-read of parts: ``freshness``)."""
    differed: dict[str, int] = field(default_factory=dict)
    """While ``compare``: per table, the shipments whose rows differed (and were written), but those of
    :attr:`reshaped` and :attr:`rederived`."""
    rederived: dict[str, int] = field(default_factory=dict)
    """While ``compare``: per table, the shipments whose rows differed while their part was answered exactly as held
    (``freshness.answered_as_held``): the rows held were derived by another mapping (an upgrade's), and are written
    as this one derives them; no change without the stamp."""
    reshaped: dict[str, int] = field(default_factory=dict)
    """While ``compare``: per table, the shipments whose rows differed as their part's answer lost fields the held
    answer had (``freshness.reshaped``: a release, not a change without the stamp)."""
    fields_lost: dict[str, set[str]] = field(default_factory=dict)
    """While ``compare``: per part, the fields :attr:`reshaped`'s answers lost."""
    gone: list[int] = field(default_factory=list)
    """While ``compare``: the shipments found deleted at the service (their events and document answered 404)."""
    written: set[int] = field(default_factory=set)
    """The shipments the run's batches wrote."""
    kept_as_held: dict[int, list[str]] = field(default_factory=dict)
    """Shipments read again under the stamp held whose answers lost fields the held ones had, left as held (by id,
    the fields: :meth:`_reshaped_under_the_stamp_held`)."""
    fresh: bool = False
    """The warehouse held no row of any shipment when the run began (a first sync; a backfill partition's first
    run: no row of its id range): a shipment the walk brings for the first time in the run is appended
    (``BatchWrite.fresh_ids``)."""
    prepared: set[int] = field(default_factory=set)
    """While ``fresh``: the shipments of the batches prepared so far."""
    read: dict[str, int] = field(default_factory=dict)
    """The shipments read so far, by how each was listed (:data:`READ`)."""
    memos: MemoBatches = field(init=False)
    """The walk pages' batched memo lookups (``memo_batch``)."""

    def __post_init__(self) -> None:
        kept = BatchingOff.parse(self.warehouse.reads.get_cursor(memo_batch.STATE))
        self.memos = MemoBatches(self.source, self.settings.count_attempts, self.settings.page_size, kept=kept,
                                 began=self.result.started_at)

    async def fetch(self, work: Work) -> Bundle:
        bundle = await fetch_bundle(self.source, work, self.settings, self.memos)
        if self.compare:
            await self._confirm_gone(bundle)
        return bundle

    async def _confirm_gone(self, bundle: Bundle) -> None:
        """A re-read of parts (``compare``) whose events answered 404: the document, read now, says whether the
        shipment is gone. Gone (404): the bundle is the document's 404 alone, so the shipment is deleted as a
        walk's document 404 deletes it (every row, a ``deleted`` version), not counted as differing; its memo
        lookup's empty answer is not taken as memo lines removed. Otherwise (live, or its read failed) its events
        and, unless the document loaded, its memo lines are left as held, to be read again."""
        if DOCUMENT in bundle.work.parts or bundle.answers.get(EVENTS) is not GONE:
            return
        read = await fetch_bundle(self.source, Work(bundle.ref, frozenset({DOCUMENT})), self.settings)
        document = read.answers.get(DOCUMENT)
        if document is GONE:
            bundle.answers = {DOCUMENT: GONE}
            self.gone.append(bundle.work.shipment_id)
            return
        live = not isinstance(document, RecordFailure)
        bundle.answers = {stream: answer for stream, answer in bundle.answers.items()
                          if stream != EVENTS and (live or stream != MEMOS)}

    def prepare(self, finished: Finished[Work, Bundle]) -> tuple[Assembled, str, int]:
        """Normalize one batch of finished shipments (in the preparing thread, while the batch before it
        is written), count it towards the breaker, give it the cursor of the last shipment of the walk's
        prefix written whole with it (``pipeline.stream_as_finished``: never past a shipment still
        being fetched); with what its progress line says of the cursor, and how many shipments it holds."""
        bundles = _latest_of_each(finished.results)
        assembled = self.assemble(bundles, dt.datetime.now(dt.UTC), self.ceiling_text)
        if self.fresh:
            walked = (b.work.shipment_id for b in bundles if b.work.key is not None and not b.work.retry)
            assembled.write.fresh_ids = [i for i in dict.fromkeys(walked) if i not in self.prepared]
            self.prepared.update(b.work.shipment_id for b in bundles)
        self.breaker.note(assembled.failures_new)  # their reasons, for the line of a run the breaker stops
        self.breaker.count(assembled.attempted_new, assembled.failed_new)
        moved = ""
        key = finished.covered.key if finished.covered is not None else None
        if key is not None and self.cursor is not None:
            if self.cursor_cap is not None and key > self.cursor_cap:
                key = self.cursor_cap
            batch_cursor = key.with_offset(cursor_offset(key, self.covered))
            if batch_cursor > self.cursor:
                assembled.write.cursor = (self.cursor_stream, batch_cursor.to_json())
                self.cursor = batch_cursor
                moved = f", cursor at {batch_cursor.instant_text}"
            else:
                moved = ", cursor kept (overlap re-read)"
        return assembled, moved, len(finished.results)

    def write(self, prepared: tuple[Assembled, str, int]) -> None:
        """Write one prepared batch as ONE transaction (in the writer thread)."""
        assembled, moved, shipments = prepared
        if not self.compare and not self.fresh:
            kept = self._reshaped_under_the_stamp_held(assembled.write)
            if kept:
                assembled.write = assembled.write.without_shipments(kept)
                self.kept_as_held.update(kept)
                self.result.extra["kept_as_held"] = {
                    "shipments": len(self.kept_as_held), "ids": sorted(self.kept_as_held)[:KEPT_IDS_SHOWN],
                    "fields": sorted({name for names in self.kept_as_held.values() for name in names})[:20]}
                self.say(f"shipments: {len(kept)} read again under the last-modified instant held, answered in "
                         f"another shape (lost {', '.join(sorted({n for ns in kept.values() for n in ns})[:5])}): "
                         "left as held")
        read = assembled.write.raw_parts
        held = (self.warehouse.reads.raw_part_answers([(p.stream, p.shipment_id) for p in read]) if self.compare
                else {})  # read before the batch writes the answers read now
        lost, as_held = freshness.reshaped(held, read), freshness.answered_as_held(held, read)
        stats = self.warehouse.writes.apply_batch(self.run_id, assembled.write, backoff=self.settings.backoff,
                                                  history=self.settings.history, compare=self.compare)
        for table, ids in stats.differed.items():
            stream = PART_OF_TABLE[table].stream
            lost_in, same_in = lost.get(stream, {}), as_held.get(stream, set())
            reshaped = [i for i in ids if i in lost_in]
            rederived = [i for i in ids if i in same_in]
            self.differed[table] = self.differed.get(table, 0) + len(ids) - len(reshaped) - len(rederived)
            if rederived:
                self.rederived[table] = self.rederived.get(table, 0) + len(rederived)
            if reshaped:
                self.reshaped[table] = self.reshaped.get(table, 0) + len(reshaped)
                self.fields_lost.setdefault(stream, set()).update(name for i in reshaped for name in lost_in[i])
        self.written.update(i for ids in assembled.write.loaded.values() for i in ids)
        self.result.add_rows(stats)
        self.result.add_versions(stats.versions)
        for stream, counted in assembled.counts.items():
            self.counts.setdefault(stream, PartCounts()).add(counted)
        for stream, tally in assembled.tallies.items():
            self.result.tallies.setdefault(stream, FieldTally(tally.shape)).add(tally)
        self.result.count_nulls(stats.written)
        written = stats.get(SHIPMENTS.name, 0)  # not those read again as held (the overlap), nor left as held
        self.say(f"shipments: {self.result.rows_read} read so far, {written} written in this batch{moved}")
        self.meter.advance(shipments)

    def _reshaped_under_the_stamp_held(self, batch: BatchWrite) -> dict[int, list[str]]:
        """Of ``batch``'s shipments the walk read again under the last-modified stamp held (its overlap of the
        cursor's second; the reconcile's and the retry queue's reads carry no content hash: they heal, always
        written) and answered otherwise, those whose document or a part lost
        fields the answers held had (``shapes.fields_lost``) while every field both answers have holds the values
        held (``shapes.values_changed``): a release (or one rolled back) reshaped the answers, the shipment did not
        change. Written, its rows would take the nulls of the fields the mapping does not read yet, its history a
        version the service never made, and kept so after a rollback until the shipment changes again; left as
        held, the next change writes it whole. A value changed besides (an edit in the stamp's own second, a field
        it cleared left out) is a change: written. By id, the fields lost (``shipment_events: location``). A stamp
        without an offset in an hour the zone repeats names two instants: never judged the same."""
        zone = self.settings.zone
        read = [d for d in batch.raw_documents if d.shipment_id not in batch.fresh_ids and not (
            d.last_modified_key is not None and len(d.last_modified_key) == WALL_CLOCK_CHARS  # no offset
            and _in_a_repeated_hour(d.last_modified_key, zone))]
        held = self.warehouse.reads.held_under_the_same_stamp(read)
        if not held:
            return {}
        answers: list[tuple[int, str, Any, Any]] = [  # (id, what, the answer held, the answer read), decoded
            (d.shipment_id, STREAM, json.loads(held[d.shipment_id]), json.loads(d.document))
            for d in read if d.shipment_id in held]
        parts = [p for p in batch.raw_parts if p.shipment_id in held]
        was = self.warehouse.reads.raw_part_answers([(p.stream, p.shipment_id) for p in parts])
        answers += [(p.shipment_id, p.stream, before, after)
                    for p, before, after in freshness.answered_otherwise(was, parts)]
        lost: dict[int, list[str]] = {}
        changed: set[int] = set()
        for shipment_id, what, before, after in answers:
            names = fields_lost(before, after)
            lost.setdefault(shipment_id, []).extend(f"{what}: {name}" for name in names)
            if values_changed(before, after, names):
                changed.add(shipment_id)
        return {i: names for i, names in lost.items() if names and i not in changed}

    def announce(self, total: int | None, *, final: bool) -> None:
        """The walk's total as it knows it so far (``Meter.announce``); the worker forked now if the work listed
        passes its share (``Assembler.foresee``)."""
        self.meter.announce(total, final=final)
        self.assemble.foresee(self.meter.tally.total or 0)

    def count_read(self, how: str, shipments: int) -> None:
        """``shipments`` read, listed ``how`` (:data:`READ`): in ``rows_read`` (records received) and apart."""
        if shipments:
            self.result.rows_read += shipments
            self.read[how] = self.read.get(how, 0) + shipments

    async def read_by_id(self, how: str, works: Sequence[Work]) -> None:
        """Read the shipments of ``works``, listed outside the walk (``how``), each counted read."""
        self.count_read(how, len(works))
        self.expect(len(works))
        await self.run(_listed(works))

    def expect(self, more: int) -> None:
        """``more`` listed after the walk (``Meter.expect``: retries, a re-read, the reconcile's), as
        :meth:`announce`."""
        self.meter.expect(more)
        self.assemble.foresee(self.meter.tally.total or 0)

    async def run(self, works: AsyncIterator[Work]) -> None:
        try:
            await stream_as_finished(
                works, self.fetch, self.write, batch_size=self.settings.fetch_batch_size,
                window=self.settings.fetch_window, prepare=self.prepare, hold=_failed_new,
            )
        finally:
            self.memos.close()


def _failed_new(bundle: Bundle) -> bool:
    """A shipment with a part that failed, not already waiting in the retry queue: kept for the run's last
    batch, so the breaker has seen every failure of the run before one is quarantined (an outage that
    fails many is not quarantined, and the cursor does not pass it)."""
    return not bundle.work.retry and any(isinstance(answer, RecordFailure) for answer in bundle.answers.values())


def _in_a_repeated_hour(stamp: str, zone: ServiceZone) -> bool:
    """A stamp (its wall-clock second, ``YYYY-MM-DD HH:MM:SS``, first) in an hour the service's zone repeats: sent
    without a UTC offset, the same wall-clock second held and listed may be two changes an hour apart (the zone gives
    both the first instant), so its held copy is never provably current (the walk's overlap asks it of every stamp:
    a service that sends offsets loses a re-read of a few shipments, twice a year)."""
    return zone.repeats(dt.datetime.fromisoformat(stamp[:WALL_CLOCK_CHARS]))


def _latest_of_each(bundles: list[Bundle]) -> list[Bundle]:
    """``bundles`` with one a shipment, in their order: a shipment changed again while the walk ran, within the
    second of its ceiling, is listed there again and both copies can land in one batch; the later in the walk (the
    greater key; of two without one, the later) is the one written."""
    if len({bundle.work.shipment_id for bundle in bundles}) == len(bundles):
        return bundles
    kept: dict[int, Bundle] = {}
    for bundle in bundles:
        held = kept.get(bundle.work.shipment_id)
        if held is None or held.work.key is None or (bundle.work.key is not None and bundle.work.key > held.work.key):
            kept[bundle.work.shipment_id] = bundle
    return [bundle for bundle in bundles if kept[bundle.work.shipment_id] is bundle]


async def _listed(works: Iterable[Work]) -> AsyncIterator[Work]:
    for work in works:
        yield work


async def sync_shipments(
    source: SourceAPI,
    warehouse: Warehouse,
    settings: SyncSettings,
    run_id: str,
    progress: Progress | None = None,
) -> StreamResult:
    """Bring ``freight.shipments``, every table embedded in it, its events, legs and memos up to the service; the
    batches normalized in a worker process where there is a second core and the run has more than a few
    (``sync.workers``)."""
    chosen = settings.normalize_workers  # None: the default, forked once the run has more than a few shipments
    with Assembler(settings.zone, sync_workers() if chosen is None else chosen,
                   in_process_up_to=IN_PROCESS_UP_TO if chosen is None else 0) as assembler:
        result = await _sync(source, warehouse, settings, run_id, assembler, progress)
    result.extra["normalize_workers"] = assembler.forked
    return result


async def _sync(
    source: SourceAPI,
    warehouse: Warehouse,
    settings: SyncSettings,
    run_id: str,
    assembler: Assembler,
    progress: Progress | None,
) -> StreamResult:
    say = loop_safe(progress) if progress else (lambda message: None)
    result = StreamResult.begun(run_id, STREAM)
    requests_before, retries_before = source.request_counts()
    meter = Meter(STREAM, source.request_counts)
    partition = settings.id_range
    cursor_stream = partition.cursor_stream if partition else STREAM
    stored = warehouse.reads.get_cursor(cursor_stream)
    if partition is None and not stored:  # after a backfill: from the lowest ceiling its partitions reached
        takeover = takeover_cursor(warehouse.reads.cursors_with_prefix(BACKFILL_PREFIX))
        if takeover is not None:  # stored as the stream's own cursor: valid for every range
            stored = takeover.to_json()
            warehouse.writes.set_cursor(STREAM, stored, run_id)
            result.extra["backfill_takeover"] = takeover.instant_text
            say(f"shipments: taking over from the backfill partitions at {takeover.instant_text}")
    result.cursor_before = stored
    floor = parse_start_cursor(settings.start_cursor)
    naive_before = settings.zone.naive_read
    walk = WalkStats()
    ceiling = await ceiling_of(source.lookup_shipments, settings.zone, unstamped=walk.unstamped)
    result.extra["ceiling"] = ceiling.instant_text if ceiling else None
    if settings.zone.keys_in_zone:
        result.extra["lookup_keys_zone"] = settings.zone.name
        say(f"shipments: the service's LAST_MODIFIED_DATE / _TIME hold {settings.zone.name}'s wall clock, its stamps "
            f"another offset: the walk keys every stamp in {settings.zone.name} ({SERVICE_TIMEZONE_ENV})")
    due, cap = ceiling, None
    if ceiling is not None:
        latest = dt.datetime.now(dt.UTC) + settings.overlap
        due = await ceiling_by(source.lookup_shipments, ceiling, latest, settings.zone, walk.unstamped)
        if due is not ceiling:  # stamps in the future: read them, but keep the cursor at what is due
            cap = due or wall_clock_key(latest, ceiling.offset)
            result.extra["ceiling_due"] = due.instant_text if due else None
            # a stamp without an offset is read in the zone set: a wrong one puts every recent change in the future
            zone_hint = (f" (its stamps carry no UTC offset and are read as {settings.zone.name}: if the service's "
                         f"clock is another zone's, set {SERVICE_TIMEZONE_ENV})"
                         if settings.zone.naive_read > naive_before else "")
            say(f"shipments: the service holds shipments stamped up to {ceiling.instant_text}, in the future by this "
                f"clock{zone_hint}: the cursor stays at {cap.instant_text}, and what is stamped after it is read again "
                "by the next run")
    if partition:
        result.extra["partition"] = partition.key
    if stored:
        cursor = ShipmentKey.from_json(stored)
        # DST: when the service's offset stepped back since the cursor was set, its wall clock
        # repeated that much, so re-read that much further back (cursor.dst_widening).
        widening = dst_widening(cursor, ceiling.offset if ceiling else None)
        # a step back not yet seen at the ceiling (the newest wall-clock time may still be a change
        # from before the switch): the guard re-reads the hour that may repeat, whenever offsets are sent
        guard = settings.offset_step_guard if cursor.offset is not None else dt.timedelta(0)
        after = cursor.minus(settings.overlap + max(widening, guard))
        covered = ceiling.offset if widening and ceiling else cursor.offset
        if widening:
            result.extra["dst_widening_minutes"] = int(widening.total_seconds() // 60)
            say(f"shipments: the service's UTC offset stepped back by {widening}: re-reading that much further")
    else:
        cursor = floor
        after = floor
        covered = None  # the first walk reads everything from the floor: no repeated hour lies below it
    say(f"shipments: reading changes stamped after {after.instant_text} up to "
        f"{ceiling.instant_text if ceiling else '-'} (the service's wall clock)")

    _keep_history_in_step(warehouse, settings, run_id, result, say)
    probe = Probe()
    if stored and partition is None and settings.restore_probe:
        probe = await probe_for_restore(source, warehouse, settings.restore_probe, settings.page_size,
                                        settings.count_attempts, walk, settings.zone)
        result.extra["restore_probe"] = probe.figures()
        if probe.refused:
            result.add_notice(NoticeKind.RESTORE_PROBE_REFUSED,
                              f"the service refused the restore probe's ID IN lookup ({probe.refused}): a restore "
                              "is noticed by the reconcile interval only")
        if probe.restored:
            say(f"shipments: the service's data went back ({len(probe.went_back)} of the {probe.probed} probed are "
                f"stamped earlier now, {len(probe.vanished)} vanished, {len(probe.returned)} deleted here came "
                "back): reconciling in this run")
    from_scratch = (not stored and floor == BEGINNING and ceiling is not None and partition is None
                    and not warehouse.reads.holds_shipments())
    run = _Run(source, warehouse, settings, run_id, result, say, due.stamp if due else None,
               Breaker(STREAM, settings.breaker_max_share, settings.breaker_min_failures),
               assembler, meter, cursor_stream=cursor_stream, cursor=cursor,
               covered=covered, cursor_cap=cap,
               fresh=not stored and not warehouse.reads.holds_shipment_rows(
                   PART_TABLES, (partition.low, partition.high) if partition else None))
    result.extra["appended"] = run.fresh
    if ceiling is not None and after.second() <= ceiling.second():
        overlap_end = cursor if stored else None
        await run.run(_walked(run, after, ceiling, walk, overlap_end))
    if walk.unstamped:
        await _read_unstamped(run, walk.unstamped)

    if partition is not None:  # retries and the reconcile are the incremental runs' (they span every range)
        # complete: everything of the range up to the ceiling is written (what changes during the run
        # moves beyond it); an empty service completes at the beginning
        done = max(run.cursor or BEGINNING, cap or ceiling) if ceiling is not None else BEGINNING
        warehouse.writes.set_cursor(cursor_stream, completed_cursor(done, settings.backfill_plan), run_id)
    else:
        await run.read_by_id(RETRY_QUEUE, _due_retries(warehouse, run_id))
        if from_scratch:  # the walk listed every shipment there was: nothing held can have vanished
            _reconciled(warehouse, result.started_at, run_id)
            result.extra["reconcile"] = FROM_SCRATCH
        elif probe.restored or _reconcile_due(warehouse, settings):
            started = dt.datetime.now(dt.UTC)
            await _reconcile(run, floor, walk)
            _reconciled(warehouse, started, run_id)
            if probe.restored:
                result.add_notice(NoticeKind.RESTORE, restore_notice(probe, result.extra))
        await _refresh(run, due, requests_before)

    _memo_batching(run)
    requests_after, retries_after = source.request_counts()
    result.requests = requests_after - requests_before
    result.retries = retries_after - retries_before
    result.rejected = sum(c.rejected for c in run.counts.values())
    result.quarantined = sum(c.quarantined for c in run.counts.values())
    result.data_problems = sum(c.data_problems for c in run.counts.values())
    waiting = warehouse.reads.quarantine_counts()
    parts = {stream: {**vars(run.counts.get(stream, PartCounts())), "retry_queue": waiting.get(stream, 0)}
             for stream in PART_STREAMS}
    result.extra.update(
        read=run.read, lookups=walk.lookups, count_mismatches=walk.count_mismatches,
        retry_queue=sum(part["retry_queue"] for part in parts.values()), parts=parts, **source.in_flight_figures(),
    )
    stored_after = warehouse.reads.get_cursor(cursor_stream)
    result.cursor_after = stored_after
    if stored_after:
        result.extra["cursor_instant"] = ShipmentKey.from_json(stored_after).instant_text
    run.meter.end()
    return result


async def _walked(
    run: _Run, after: ShipmentKey, ceiling: ShipmentKey, walk: WalkStats, overlap_end: ShipmentKey | None
) -> AsyncIterator[Work]:
    """The walk's shipments as work, in key order; in the overlap window (keys up to the stored cursor),
    a shipment whose held copy is provably current is passed on with nothing to fetch."""
    reader = run.warehouse.reads.reader()
    skipped = 0
    try:
        async for page in read_ahead(walk_changes(
            run.source.lookup_shipments, after, ceiling, run.settings.zone, page_size=run.settings.page_size,
            count_attempts=run.settings.count_attempts, stats=walk,
            only=run.settings.id_range.criteria() if run.settings.id_range else (),
        )):
            run.count_read(WALK, len(page))
            run.announce(walk.total, final=walk.total_final)
            overlapping = {k.id: k.stamp for k, _ in page if overlap_end is not None and k <= overlap_end
                           and not _in_a_repeated_hour(k.instant_text, run.settings.zone)}
            current = run.warehouse.reads.current_copies(reader, overlapping)
            skipped += len(current)
            works = [Work(Ref.of(base, key.id), frozenset() if key.id in current else ALL_PARTS, key)
                     for key, base in page]
            run.memos.plan((work.ref, work.parts) for work in works)
            for work in works:
                yield work
    finally:
        reader.close()
        run.result.extra["overlap_current_skipped"] = skipped


async def _read_unstamped(run: _Run, unstamped: Mapping[int, Mapping[str, Any]]) -> None:
    """Read by id the shipments the walk's lookups answered without a stamp that reads as an instant (``extra`` and
    a line say which): no place in the walk, but listed, so changed; their documents' stamps date their rows (a
    document without one is a data problem of its own)."""
    ids = sorted(i for i in unstamped if run.settings.id_range is None or i in run.settings.id_range)  # its own
    if not ids:
        return
    run.result.extra["unstamped_in_lookup"] = {"count": len(ids), "ids": ids[:20]}
    run.say(f"shipments: the lookup answered {len(ids)} shipment(s) without a last_modified_date_time that reads as "
            f"an instant ({', '.join(map(str, ids[:20]))}{', ...' if len(ids) > 20 else ''}): read by id")
    await run.read_by_id(UNSTAMPED, [Work(Ref.of(unstamped[i], i)) for i in ids])


def _memo_batching(run: _Run) -> None:
    """What the batched memo lookups did (``extra.memo_batches``), and the stop of batching kept for the runs after
    (``memo_batch.STATE``), said by every run that ends with one kept (:attr:`NoticeKind.lasts`)."""
    memos, figures = run.memos, run.memos.figures
    if figures.lookups or figures.held_off:
        run.result.extra["memo_batches"] = figures.as_dict()
    if run.source.memo_unordered is not None:
        run.result.extra["memo_lookup_unordered"] = run.source.memo_unordered
    kept = memos.kept_after(run.run_id)
    if kept != memos.kept:
        run.warehouse.writes.set_cursor(memo_batch.STATE, kept.text() if kept is not None else None, run.run_id)
    if kept is not None:
        run.result.add_notice(NoticeKind.MEMO_BATCH_OFF, kept.notice())


def _due_retries(warehouse: Warehouse, run_id: str) -> list[Work]:
    """Work for what waits in the retry queue and is due (not what failed in this run); a waiting
    document brings its whole shipment."""
    wanted: dict[int, set[str]] = {}
    refs: dict[int, Ref] = {}
    for entry in warehouse.reads.due_retries(PART_STREAMS, run_id):
        shipment_id = entry.shipment_id if entry.shipment_id is not None else int(entry.record_key)  # a part's key
        context = json.loads(entry.context) if entry.context else None
        refs.setdefault(shipment_id, Ref.from_context(shipment_id, context))
        wanted.setdefault(shipment_id, set()).update(ALL_PARTS if entry.stream == STREAM else {entry.stream})
    return [Work(refs[shipment_id], frozenset(wanted[shipment_id]), None, retry=True) for shipment_id in sorted(wanted)]


async def _refresh(run: _Run, ceiling: ShipmentKey | None, requests_before: int) -> None:
    """The sample of open shipments' events and memo lines, then the rolling re-read (``freshness``): only what
    differs from the rows held is written; the first difference a sample finds is said once and recorded."""
    settings, warehouse, result = run.settings, run.warehouse, run.result
    known = Unstamped.parse(warehouse.reads.get_cursor(freshness.STATE))
    before = run.source.request_counts()[0]
    sampled = freshness.sample(warehouse, settings, exclude=run.written)
    figures: dict[str, object] = {"sampled": len(sampled)}
    if sampled:
        differed, reshaped, rederived = await _reread(run, sampled, freshness.SAMPLED_PARTS)
        figures.update(sample_differed=differed, sample_reshaped=reshaped)
        if any(rederived.values()):
            figures["sample_rederived"] = rederived
        if run.fields_lost:
            figures["sample_fields_lost"] = {stream: sorted(names) for stream, names in run.fields_lost.items()}
        if run.gone:
            figures["sample_gone"] = sorted(run.gone)[:20]
        found = tuple(part for part in freshness.WHAT if differed.get(part))
        if found and not set(found) <= set(known.parts):
            if not known.parts:
                result.add_notice(NoticeKind.CHANGES_WITHOUT_STAMP,
                                  freshness.found_notice(differed, len(sampled), settings))
            known = Unstamped(known.found_run_id or run.run_id,
                              known.found_at or dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                              tuple(sorted({*known.parts, *found})))
    rolling = freshness.due(warehouse, settings, known, now=dt.datetime.now(dt.UTC),
                            service_now=_instant(ceiling, settings.zone), other_requests=before - requests_before,
                            exclude=run.written)
    figures["rolling"] = known.rolling(settings)
    if rolling:
        differed, reshaped, rederived = await _reread(run, rolling, known.rolling_parts())
        figures.update(refreshed=len(rolling), refreshed_differed=differed, refreshed_reshaped=reshaped)
        if any(rederived.values()):
            figures["refreshed_rederived"] = rederived
        if run.gone:
            figures["refreshed_gone"] = sorted(run.gone)[:20]
    open_held, oldest = warehouse.reads.oldest_part_read(EVENTS)
    figures.update(requests=run.source.request_counts()[0] - before, open_shipments=open_held,
                   oldest_events_read_at=oldest.isoformat() if oldest else None,
                   max_age_minutes=int(settings.events_max_age.total_seconds() // 60))
    result.extra["freshness"] = figures
    warehouse.writes.set_cursor(freshness.STATE, known.text(known.rolling(settings), settings.events_max_age),
                                run.run_id)


async def _reread(run: _Run, refs: list[Ref], parts: frozenset[str]) -> tuple[dict[str, int], ...]:
    """Read ``parts`` of the shipments ``refs`` again, writing only what differs from the rows held; per part,
    the shipments whose rows differed, and apart those whose rows differed as their answer lost fields the held one
    had (``run.reshaped``), and those whose rows differed while their answer was the one held (``run.rederived``: an
    older mapping's rows); a shipment found deleted at the service is deleted, in none: ``run.gone``."""
    run.compare, run.differed, run.reshaped, run.rederived, run.fields_lost, run.gone = True, {}, {}, {}, {}, []
    run.expect(len(refs))
    try:
        await run.run(_listed(Work(ref, parts) for ref in refs))
    finally:
        run.compare = False
    tables = {part.stream: part.tables for part in PARTS if part.stream in parts}

    def by_part(counts: Mapping[str, int]) -> dict[str, int]:
        return {stream: max((counts.get(table, 0) for table in names), default=0) for stream, names in tables.items()}

    return by_part(run.differed), by_part(run.reshaped), by_part(run.rederived)


def _instant(key: ShipmentKey | None, zone: ServiceZone) -> dt.datetime | None:
    """A key's wall-clock second as an instant (in the service's zone when it came without an offset)."""
    if key is None:
        return None
    offset = format_offset(key.offset) if key.offset is not None else ""
    try:
        return to_utc(zone.parse(f"{key.date}T{key.time}{offset}"))
    except DateTimeParseError:
        return None


def _keep_history_in_step(
    warehouse: Warehouse, settings: SyncSettings, run_id: str, result: StreamResult, say: Progress
) -> None:
    """History off: the history falls behind the rows held, so say so in ``sync_state`` before anything is
    written (once). On, and behind: bring it up to the rows held before this run's batches (the incremental
    run does; a backfill partition leaves it to that)."""
    behind = warehouse.reads.get_cursor(BEHIND_STATE) is not None
    if not settings.history:
        result.extra["history"] = "off"
        if not behind:
            warehouse.writes.set_cursor(BEHIND_STATE, json.dumps({"since": result.started_at.isoformat()}), run_id)
        return
    if behind and settings.id_range is None:
        say("shipments: the history is behind the rows held (runs without it): catching up")
        counts = warehouse.writes.catch_up_history(run_id)
        result.add_versions(counts.added)
        result.extra["history_caught_up"] = counts.added


def restore_notice(probe: Probe, extra: dict[str, object]) -> str:
    """What a run says after the reconcile its probe started: the service's data went back (some of the newest
    shipments held are stamped earlier now, or some deleted here came back), or some of them vanished (deleted, or
    a restore that only dropped what was created since)."""
    found = f"{extra.get('reconcile_refetched', 0)} shipments read again, {extra.get('reconcile_deleted', 0)} deleted"
    if probe.went_back or probe.returned:
        return (f"the service's data went back: {extra.get('reconcile_refetched', 0)} shipments returned to older "
                f"versions (or came back), {extra.get('reconcile_deleted', 0)} vanished; reconciled")
    return (f"{len(probe.vanished)} of the {probe.probed} newest shipments held vanished from the service (deleted, "
            f"or its data went back): reconciled in this run ({found})")


def _reconciled(warehouse: Warehouse, listing_began: dt.datetime, run_id: str) -> None:
    """Record a complete id reconciliation as of ``listing_began`` (the next is due an interval later)."""
    warehouse.writes.set_cursor(RECONCILE_STREAM, json.dumps({"at": listing_began.isoformat()}), run_id)


def _reconcile_due(warehouse: Warehouse, settings: SyncSettings) -> bool:
    if settings.reconcile_interval is None:
        return False
    stored = warehouse.reads.get_cursor(RECONCILE_STREAM)
    if not stored:
        return True
    try:
        last = dt.datetime.fromisoformat(json.loads(stored)["at"])
    except (ValueError, KeyError, TypeError):
        return True
    return dt.datetime.now(dt.UTC) - last >= settings.reconcile_interval


def _chunks(seq: Sequence[int], size: int) -> list[Sequence[int]]:
    return [seq[start : start + size] for start in range(0, len(seq), size)]


async def _reconcile(run: _Run, floor: ShipmentKey, walk: WalkStats) -> None:
    """Delete what the source no longer has; fetch what the warehouse lacks or holds stale (only
    shipments last modified at or after the configured start cursor)."""
    found = await compare_with_source(
        run.source, run.warehouse, run.settings.page_size, run.settings.count_attempts, walk, floor, STREAM,
        run.settings.zone,
    )
    extra = run.result.extra
    extra.update(reconcile_listed=found.listed, reconcile_deleted=len(found.vanished),
                 reconcile_refetched=len(found.stale), reconcile_before_start=found.before_start)
    for chunk in _chunks(found.vanished, run.settings.fetch_batch_size):
        stats = run.warehouse.writes.apply_batch(run.run_id, BatchWrite(deleted_ids=list(chunk)),
                                                 backoff=run.settings.backoff, history=run.settings.history)
        run.result.add_rows(stats)
        run.result.add_versions(stats.versions)
    if found.vanished:
        run.say(f"shipments: deleted {len(found.vanished)} shipments no longer in the source")
    await run.read_by_id(RECONCILE, [Work(Ref(i)) for i in found.stale])
    if found.stale:
        run.say(f"shipments: reconcile fetched {len(found.stale)} missing or stale shipments")
