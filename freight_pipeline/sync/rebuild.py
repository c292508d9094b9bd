"""Rebuilding the ``freight`` tables from the raw records held, without a request to the service.

When the service changed shape and the mapping was fixed (a source alias on a column, ``normalize.specs``),
the shipments read in the new shape hold nulls where the renamed field used to land. A rebuild re-derives
the held shipments the mapping's change can touch (:mod:`~freight_pipeline.sync.derived_by`: after a fix that
only moved fields' source keys, those whose raw names one of those keys, :func:`names_any`; after any other
change, or with ``everything``, every one) from what the sync kept of them (``freight_meta.raw_shipments``:
the document; ``freight_meta.raw_parts``: events, legs, memo lines and E-Files) through the very code the sync runs:
each shipment becomes the :class:`~freight_pipeline.sync.bundle.Bundle` the sync would have fetched, and
:func:`~freight_pipeline.sync.assemble.assemble` normalizes a batch of them (its E-Files: the documents
stream's :func:`~freight_pipeline.sync.documents.file_rows`) into one
:class:`~freight_pipeline.warehouse.records.BatchWrite`, written as ONE transaction
(``Writes.apply_batch(rebuild=True)``: compared even when the raw is the one held, the retry queue kept,
the history's current versions taking the new content).

Speed: the normalization (JSON decoding included) is the cost, about 1.2-1.5 ms of CPU a shipment with the
garbage collector paused (:func:`gc_paused`; 1.7-1.8 ms without); it runs in worker processes forked at the
start (:class:`Derivers`, one per core: they run the mapping as it is in this process; by default only when
there are more than a few shipments to re-derive), each batch split into
chunks among them, the next batch normalized while this process writes the one before. Large batches
(:data:`DEFAULT_BATCH`): each transaction's statements cost about 0.3 s whatever its size. A shipment's
rows of a table are written only where they differ from those held (``Writes.apply_batch``: counts and
summed row hashes, compared in DuckDB): a mapping fix changes a few shipments, and a rebuild of 20,000 that
changed none wrote nothing (no delete, insert or history update; the publish exports no table again). A
table none of whose rows came out as held is written whole for a while (:class:`Comparison`).

The shipments are read in the order their raw documents were fetched (``Reads.raw_records``: the order the
sync wrote them in, so a batch's documents lie together). Progress is kept in ``freight_meta.sync_state``
under :data:`REBUILD_STATE` (the position of the last shipment rebuilt), set in each batch's transaction:
after a crash the next rebuild goes on from there (``restart``: from the first shipment again; a shipment a
sync wrote in between has moved past it, and is rebuilt again); the entry is cleared when the rebuild is
complete. The sync's cursors are not touched, but for one: when the documents stream had listed the E-Files of
every shipment written before the rebuild began (resumed: and every one a sync wrote since), its watermark is
moved past the rebuild's writes at the end
(they change no E-File; else the next sync would list the E-Files of every shipment again). A sync between two
rebuilds is harmless.

The code conversions are re-derived too, from the whole record each row keeps (``payload``), through their
stream's ``convert`` and full refresh (only rows that differ are written).

What a rebuild cannot restore: a part never kept raw (none held for a shipment last read before the raw
parts were kept, or whose first read failed; the E-Files of a shipment last listed before they were kept
raw, until the documents stream's next full re-listing) keeps its rows; a field the service no longer sends
is not in the raw either (the raw is the latest answer).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from freight_pipeline.config import SERVICE_TIMEZONE_ENV
from freight_pipeline.datetimes import ServiceZone
from freight_pipeline.normalize.documents import SHIPMENT_DOCUMENTS
from freight_pipeline.normalize.signature import EveryRecord, MappingSignature, current_signature
from freight_pipeline.normalize.specs.shipments import SHIPMENTS
from freight_pipeline.sync.assemble import assemble, unpacked
from freight_pipeline.sync.bundle import NOT_APPLICABLE, Answer, Bundle, Work
from freight_pipeline.sync.code_conversions import STREAM as CONVERSIONS
from freight_pipeline.sync.code_conversions import TABLE as CONVERSIONS_TABLE
from freight_pipeline.sync.code_conversions import convert
from freight_pipeline.sync.derived_by import MAPPING, DerivedBy, note_mapping
from freight_pipeline.sync.documents import STREAM as DOCUMENTS
from freight_pipeline.sync.documents import TABLE as DOCUMENTS_TABLE
from freight_pipeline.sync.documents import DocumentsCursor, file_rows
from freight_pipeline.sync.isolation import RecordFailure, record_failure
from freight_pipeline.sync.nulls import note_nulls
from freight_pipeline.sync.parts import DETAIL_PARTS, DOCUMENT, PART_BY_STREAM, Ref
from freight_pipeline.sync.progress import Progress
from freight_pipeline.sync.result import NullCounts, StreamResult, count_nulls
from freight_pipeline.sync.runner import one_line_error
from freight_pipeline.sync.settings import SyncSettings
from freight_pipeline.sync.workers import IN_PROCESS_UP_TO, Workers, can_fork, gc_paused
from freight_pipeline.warehouse import meta
from freight_pipeline.warehouse.ddl import qualified, run
from freight_pipeline.warehouse.documents import newest_shipment_write
from freight_pipeline.warehouse.history import BEHIND_STATE
from freight_pipeline.warehouse.records import BatchWrite, RawPosition, RawRecord, Reject, WriteStats
from freight_pipeline.warehouse.store import Warehouse

REBUILD_STATE = "rebuild"
"""``sync_state`` entry of a rebuild under way (JSON :class:`RebuildState`, with the run's id);
cleared (null) when it is complete. Also the rebuild's stream name in ``freight_meta.sync_runs``."""
EVERY_ONE_ASKED = "every one was asked for (--all)"
"""Why a rebuild with ``everything`` re-derives every record (the result line's words)."""
DEFAULT_BATCH = 2000
CHUNK = 250
"""Shipments a worker normalizes at a time (at most): what it holds decoded is that many shipments' records."""
PROBE_EVERY = 4
"""A table none of whose compared rows came out as held in a batch is written whole in the next batches, but
every ``PROBE_EVERY``-th, compared again (:class:`Comparison`)."""


class ZoneChanged(ValueError):
    """The rebuild's service zone is not the one the held rows' date-times without a UTC offset were read in."""


@dataclass
class RebuildResult:
    """What a rebuild did."""

    shipments: int = 0
    """Shipments re-derived (those whose raw names a key the mapping's change touched; every one read when
    ``touched`` is None)."""
    read: int = 0
    """Shipments whose raw records were read (those after the position an interrupted rebuild left)."""
    touched: tuple[str, ...] | None = None
    """The source keys the mapping's change since the rows were derived touched (None: every record may change,
    for the reason :attr:`every_one_because` gives)."""
    every_one_because: str | None = None
    """Why every record read was re-derived (the code, a column or a type changed, ``--all``, rows of a mapping
    not recorded are held); None when only those naming a :attr:`touched` key were."""
    batches: int = 0
    rows_written: int = 0
    shipments_written: int = 0
    """Shipments whose re-derived rows differ from those held in some table (only those rows are written)."""
    quarantined: int = 0
    """Records the current mapping cannot normalize (their rows stay as they were; in the retry queue)."""
    data_problems: int = 0
    resumed_after: int | None = None
    """The last shipment an interrupted rebuild had committed (None: this one started from the first)."""
    seconds: float = 0.0
    versions: dict[str, int] = field(default_factory=dict)
    """Versions added to the history (subjects the new mapping adds or drops)."""
    code_conversions: int = 0
    """Rows of ``code_conversions`` written (re-derived from their ``payload``: only those that differ)."""
    never_asked: int = 0
    """Parts of held shipments an earlier release never asked for, queued for the next sync
    (:func:`queue_never_asked`)."""
    nulls: dict[str, NullCounts] = field(default_factory=dict)
    """The rows written per table and their nulls per column, compared with the runs before as a sync's are
    (``sync.nulls``): a column whose nulls a rename made jump, its values re-derived, is usual again."""

    def line(self) -> str:
        resumed = f", resumed after shipment {self.resumed_after}" if self.resumed_after is not None else ""
        if self.touched is None:
            which = (f"rebuilt {self.shipments:,} shipments from their raw records in {self.batches:,} batches "
                     f"(every one: {self.every_one_because})")
        elif not self.touched:
            which = "rebuilt 0 shipments: every row held is the current mapping's (--all re-derives them anyway)"
        else:
            which = (f"rebuilt {self.shipments:,} of the {self.read:,} shipments read from their raw records in "
                     f"{self.batches:,} batches (those whose raw names {', '.join(self.touched)}: the keys the "
                     "mapping's change touched; the others' rows are what it derives)")
        return (f"{which}: {self.rows_written:,} rows written for the {self.shipments_written:,} whose rows changed, "
                f"{self.code_conversions:,} code conversions changed, 0 requests "
                f"({self.quarantined} quarantined, "
                f"{self.data_problems} unconvertible values nulled{resumed})"
                + (f"; {self.never_asked:,} part{'' if self.never_asked == 1 else 's'} an earlier release never asked "
                   "for queued for the next sync" if self.never_asked else ""))


@dataclass(frozen=True)
class RebuildState:
    """An unfinished rebuild: the position of the last shipment committed (:meth:`Reads.raw_records`), whether
    the documents stream had listed the E-Files of every shipment written before the rebuild began (its
    watermark is then carried past the rebuild's writes, which change no E-File), and the id of the mapping
    it derived with (a rebuild with another starts from the first shipment)."""

    after: RawPosition | None = None
    documents_caught_up: bool = False
    mapping: str | None = None
    began: dt.datetime | None = None
    """When the rebuild began (a run of another mapping since then: the next one starts from the first)."""

    @classmethod
    def held(cls, warehouse: Warehouse) -> RebuildState | None:
        """The state held; one without a position's instant (left by a version that went in id order)
        goes on from the first shipment."""
        text = warehouse.reads.get_cursor(REBUILD_STATE)
        if not text:
            return None
        try:
            data = json.loads(text)
            at, after = data.get("after_fetched_at"), data.get("after")
            position = (RawPosition(dt.datetime.fromisoformat(at), int(after))
                        if at is not None and after is not None else None)
            began = data.get("began")
            return cls(position, bool(data.get("documents_caught_up")), data.get("mapping"),
                       dt.datetime.fromisoformat(began) if began else None)
        except (ValueError, KeyError, TypeError, AttributeError):
            return None

    def text(self, run_id: str) -> str:
        after = self.after
        return json.dumps({"after": after.shipment_id if after else None,
                           "after_fetched_at": after.fetched_at.isoformat() if after else None,
                           "documents_caught_up": self.documents_caught_up, "mapping": self.mapping,
                           "began": self.began.isoformat() if self.began else None, "run_id": run_id})


def _resumable(warehouse: Warehouse, held: RebuildState, target: MappingSignature) -> bool:
    """Whether an interrupted rebuild goes on from its position: begun with ``target``, and no run of another
    mapping may have written since (it may have written a shipment before the position)."""
    if held.mapping != target.id or held.began is None:
        return False
    since = DerivedBy.since(warehouse, held.began, REBUILD_STATE)
    return not since.unknown and set(since.signatures) <= {target.id}


def _documents_caught_up(warehouse: Warehouse) -> bool:
    """Whether the documents stream's watermark covers every shipment write so far."""
    synced = DocumentsCursor.parse(warehouse.reads.get_cursor(DOCUMENTS)).synced_through
    newest = newest_shipment_write(warehouse.con)
    return synced is not None and (newest is None or newest <= synced)


def _still_caught_up(warehouse: Warehouse, began: dt.datetime | None) -> bool:
    """On resuming a rebuild begun with the documents stream caught up: whether its watermark still covers
    every shipment write but this rebuild's own (its runs since ``began``). A sync in between whose documents
    stream did not run, or failed, wrote shipments whose E-Files are still to be listed: carrying the watermark
    past them at the end would have the next sync never list them."""
    synced = DocumentsCursor.parse(warehouse.reads.get_cursor(DOCUMENTS)).synced_through
    if synced is None or began is None:
        return False
    written = newest_shipment_write(warehouse.con, but=(REBUILD_STATE, began))
    return written is None or written <= synced


def _carry_documents_watermark(warehouse: Warehouse, run_id: str) -> None:
    """After a rebuild that began with the documents stream caught up: its watermark moved past the
    rebuild's writes (they changed no E-File), so the next sync does not list every shipment's E-Files."""
    cursor = DocumentsCursor.parse(warehouse.reads.get_cursor(DOCUMENTS))
    newest = newest_shipment_write(warehouse.con)
    if newest is not None and cursor.synced_through is not None and newest > cursor.synced_through:
        warehouse.writes.set_cursor(DOCUMENTS, dataclasses.replace(cursor, synced_through=newest).text(), run_id)


def _answer(packed: bytes | None) -> Answer:
    """A raw part as the sync's fetch answered it: its records, or NOT_APPLICABLE where it had no rows."""
    if packed is None:
        return NOT_APPLICABLE
    return unpacked(packed)


def names_any(record: RawRecord, keys: frozenset[str]) -> bool:
    """Whether a shipment's raw records name one of ``keys`` (``"key"`` in their JSON text), or hold a ``\\u``
    escape (which could spell one): a record that names none derives under a mapping that differs only in
    those keys' places the rows it derived before (``normalize.signature.touched_keys``)."""
    _, document, parts = record
    texts = [f'"{key}"' for key in keys] + ["\\u"]
    if any(text in document for text in texts):
        return True
    blobs = [text.encode() for text in texts]
    for packed in parts.values():
        if packed is not None:
            plain = zlib.decompress(packed)
            if any(blob in plain for blob in blobs):
                return True
    return False


def raw_bundle(shipment_id: int, document_text: str, parts: dict[str, bytes | None]) -> Bundle:
    """The bundle the sync would have fetched for a shipment whose raw records are these: its document
    and every part kept raw (a part not kept is not in the bundle, so its rows stay)."""
    document: Any = orjson.loads(document_text)
    ref = Ref.of(document, shipment_id) if isinstance(document, dict) else Ref(shipment_id)
    answers: dict[str, Answer] = {DOCUMENT: document}
    answers.update({stream: _answer(packed) for stream, packed in parts.items() if stream in PART_BY_STREAM})
    return Bundle(Work(ref, frozenset(answers), None, retry=True), ref, answers)


def rebuild(
    warehouse: Warehouse,
    run_id: str,
    settings: SyncSettings,
    *,
    batch_size: int = DEFAULT_BATCH,
    restart: bool = False,
    progress: Progress | None = None,
    workers: int | None = None,
    everything: bool = False,
    rezone: bool = False,
) -> RebuildResult:
    """Re-derive the rows of every held shipment the mapping's change since they were derived can touch
    (:class:`~freight_pipeline.sync.derived_by.DerivedBy`; ``everything``: every one) from its raw records,
    ``batch_size`` shipments read per transaction, logged in ``sync_runs`` (stream :data:`REBUILD_STATE`).
    Resumes an interrupted rebuild of the same mapping unless ``restart``. ``workers``: processes normalizing
    (:class:`Derivers`; None: :func:`default_workers`, forked once the rebuild has more than
    :data:`~freight_pipeline.sync.workers.IN_PROCESS_UP_TO` shipments to re-derive). Refuses
    (:class:`ZoneChanged`) a service zone other than the one the held rows' date-times without a UTC offset were read
    in, unless ``rezone``: they are read in it again."""
    read_in = warehouse.reads.zone_read_in()
    if read_in is not None and read_in != settings.service_timezone and not rezone:
        raise ZoneChanged(
            f"the held rows' date-times without a UTC offset were read in {read_in}, and this rebuild's zone is "
            f"{settings.service_timezone} ({SERVICE_TIMEZONE_ENV}): set {SERVICE_TIMEZONE_ENV}={read_in} (as the "
            f"syncs had it), or pass --rezone to read them in {settings.service_timezone} from now on; nothing written")
    say = progress or (lambda line: None)
    in_process_up_to = IN_PROCESS_UP_TO if workers is None else 0
    workers = default_workers() if workers is None else workers
    clock = time.monotonic()
    target = current_signature(settings.service_timezone)
    log = StreamResult(run_id, REBUILD_STATE, dt.datetime.now(dt.UTC), cursor_before=warehouse.reads.get_cursor(
        REBUILD_STATE))
    log.extra[MAPPING] = target.id
    if read_in is not None:  # the zone the rows are derived in from now on, for the rebuild after it
        log.extra[meta.NAIVE_DATETIMES] = {"service_timezone": settings.service_timezone}
    warehouse.run_log.record_run(log)
    note_mapping(warehouse, target, run_id)  # before any row: the rows it writes are target's
    held = None if restart else RebuildState.held(warehouse)
    if held is not None and not _resumable(warehouse, held, target):
        held = None
    if held is not None and held.documents_caught_up and not _still_caught_up(warehouse, held.began):
        held = dataclasses.replace(held, documents_caught_up=False)
    state = held or RebuildState(None, _documents_caught_up(warehouse), target.id, log.started_at)
    found = RebuildResult(resumed_after=state.after.shipment_id if state.after else None)
    derived_by = DerivedBy.held(warehouse, REBUILD_STATE)
    decided = EveryRecord(EVERY_ONE_ASKED) if everything else derived_by.touched_keys(target)
    touched: frozenset[str] | None = None
    if isinstance(decided, EveryRecord):
        found.every_one_because = decided.why
    else:
        touched, found.touched = decided, tuple(sorted(decided))
    history = warehouse.reads.get_cursor(BEHIND_STATE) is None  # behind: the next sync's catch-up versions
    after = state.after

    comparison = Comparison()

    def write(batch: BatchWrite) -> WriteStats:
        stats = warehouse.writes.apply_batch(run_id, batch, backoff=settings.backoff, history=history, rebuild=True,
                                             write_whole=comparison.skipped())
        comparison.learn(stats)
        return stats

    def written(batch: BatchWrite, size: int, through: int, stats: WriteStats) -> None:
        found.shipments += size
        found.batches += 1
        found.rows_written += stats.rows_written
        found.shipments_written += stats.shipments_written
        found.quarantined += len(batch.quarantined)
        found.data_problems += len(batch.problems)
        count_nulls(found.nulls, stats.written)
        for table, count in stats.versions.items():
            found.versions[table] = found.versions.get(table, 0) + count
        say(f"rebuild: {found.shipments:,} shipments rebuilt, the last shipment {through} (in the order fetched)")

    try:
        # the parts of the next batch are normalized in the worker processes while this one writes the batch
        # before (each its own transaction, committed in id order): one batch ahead, so they never wait
        with Derivers(workers if touched != frozenset() else 0, settings.zone,
                      in_process_up_to=in_process_up_to) as derivers:
            if in_process_up_to and touched is None:  # every record read is derived: what is held is the work
                derivers.foresee(warehouse.reads.raw_shipment_count(after))
            # (with keys touched, only the records naming one are derived: counted as they are handed over)
            ahead: tuple[Callable[[], BatchWrite], int, int] | None = None
            while touched != frozenset():  # else every row held is the current mapping's: nothing to read
                records, last = warehouse.reads.raw_records(after, batch_size)
                if last is not None:
                    after = last
                    found.read += len(records)
                    cursor = RebuildState(after, state.documents_caught_up, target.id, state.began).text(run_id)
                    if touched is not None:
                        records = [record for record in records if names_any(record, touched)]
                    submitted = derivers.submit(records, cursor)
                if ahead is not None:
                    batch = ahead[0]()
                    written(batch, ahead[1], ahead[2], write(batch))
                if last is None:
                    break
                ahead = (submitted, len(records), after.shipment_id)
        found.code_conversions = _rebuild_code_conversions(warehouse, run_id, settings)
        found.never_asked = queue_never_asked(warehouse, run_id)
        if state.documents_caught_up:
            _carry_documents_watermark(warehouse, run_id)
        note_nulls(warehouse, run_id, found.nulls)
        warehouse.writes.set_cursor(REBUILD_STATE, None, run_id)
    except BaseException as exc:
        log.status, log.error = "failed", one_line_error(exc)
        _finish(warehouse, log, found)
        raise
    found.seconds = time.monotonic() - clock
    log.status = "success"
    _finish(warehouse, log, found)
    return found


@dataclass
class Comparison:
    """Which tables a rebuild writes whole rather than compare with the rows held: comparing a shipment's
    rows saves writing them when they came out as held (the usual rebuild: a mapping fix changes a few), and
    is wasted when none do (a mapping that changes every row of a table). A table whose compared rows all
    differed in a batch is written whole in the next ones, and compared again every :data:`PROBE_EVERY`."""

    waiting: dict[str, int] = field(default_factory=dict)
    """Table (short name) -> batches it is still written whole."""

    def skipped(self) -> frozenset[str]:
        return frozenset(table for table, left in self.waiting.items() if left > 0)

    def learn(self, stats: WriteStats) -> None:
        """After a batch: a table written whole counts down; one compared with none as held waits."""
        for table in self.skipped():
            self.waiting[table] -= 1
        for table, ids in stats.compared.items():
            if ids and not stats.unchanged.get(table):
                self.waiting[table] = PROBE_EVERY - 1


def queue_never_asked(warehouse: Warehouse, run_id: str) -> int:
    """Put into the retry queue, due now, the part of each held shipment that only shipments of one mode have (the main
    carriage's legs) which its mode, read as the marts read it (``Part.applies``), says it has, where an earlier
    release that compared the mode as sent (``"SEA\u00a0"``, ``" sea"``) kept no answer for it, never having asked;
    the next sync reads it (a rebuild has no answer to derive its rows from). How many."""
    queue, shipments, raw = qualified(meta.QUARANTINE), qualified(SHIPMENTS), qualified(meta.RAW_PARTS)

    def write(con: Any) -> int:
        queued = 0
        for part in DETAIL_PARTS:
            if part.mode is None:
                continue
            done = run(con, f"""
                INSERT INTO {queue} BY NAME
                SELECT p.stream, CAST(s.shipment_id AS VARCHAR) AS record_key, s.shipment_id,
                       'its mode of transport ' || to_json(s.mode_of_transport) || ' is {part.mode}, and an earlier '
                       || 'release, which read it as sent, never asked for its {part.stream}' AS reason,
                       json_object('client', s.client, 'shipment_number', s.shipment_number,
                                   'mode_of_transport', s.mode_of_transport) AS context,
                       now() AS first_failed_at, now() AS last_failed_at, 0 AS attempts, now() AS next_attempt_at,
                       ? AS run_id
                FROM {shipments} s JOIN {raw} p ON p.stream = ? AND p.shipment_id = s.shipment_id AND p.answer IS NULL
                WHERE upper(trim(s.mode_of_transport)) = ? AND s.mode_of_transport <> ?
                  AND NOT EXISTS (SELECT 1 FROM {queue} q WHERE q.stream = p.stream
                                  AND q.record_key = CAST(s.shipment_id AS VARCHAR))
                """, [run_id, part.stream, part.mode, part.mode])
            queued += int(done[0][0]) if done else 0
        return queued

    return warehouse.database.write("queue parts never asked for", write)


def _rebuild_code_conversions(warehouse: Warehouse, run_id: str, settings: SyncSettings) -> int:
    """The code conversions re-derived from the whole record each row keeps (``payload``), by the code
    their stream runs, written as its full refresh is (only what differs); how many rows were written. A
    record the new mapping cannot normalize is rejected (``rejected_records``); the retry queue is the
    stream's own (its next run reads every record again)."""
    payloads = warehouse.reads.code_conversion_payloads()
    if not payloads:
        return 0
    converted = convert([orjson.loads(payload) for payload in payloads], settings.zone)
    outcome = warehouse.writes.replace_table(run_id, CONVERSIONS_TABLE, converted.table, stream=CONVERSIONS,
                                             rejects=converted.rejects, problems=converted.problems,
                                             backoff=settings.backoff)
    return outcome.rows_written


def derive(records: Sequence[RawRecord], zone: ServiceZone) -> BatchWrite:
    """The batch write re-deriving ``records`` (:meth:`Reads.raw_records`) by the sync's ``assemble`` and, for
    the shipments whose E-Files are kept raw, the documents stream's :func:`file_rows`, without writing their
    raw again (it is what it was: only the rows change). Runs in a worker process, the garbage collector
    paused (:func:`gc_paused`: the decoded records stay alive until the batch's tables are made)."""
    with gc_paused():
        write = assemble([raw_bundle(*record) for record in records], dt.datetime.now(dt.UTC), None, zone,
                         keep_raw=False).write
        filed = [(shipment_id, parts[DOCUMENTS]) for shipment_id, _, parts in records if DOCUMENTS in parts]
        if filed:
            _add_files(write, filed, zone)
    return write


def _add_files(write: BatchWrite, filed: Sequence[tuple[int, bytes | None]], zone: ServiceZone) -> None:
    """The E-File rows of shipments (their raw files: :func:`documents.raw_files`) added to ``write``; a shipment
    whose files the mapping cannot place keeps its rows and waits in the documents stream's retry queue."""
    rows: list[dict[str, Any]] = []
    for shipment_id, packed in filed:
        files = _answer(packed)
        try:
            if not isinstance(files, list):
                raise ValueError(f"its raw E-Files are {type(files).__name__}, not a list")
            outcome = file_rows(shipment_id, files, zone)
        except Exception as exc:  # RecordShapeError, or a bug met on this record's data
            failure = record_failure(exc) or RecordFailure(f"{type(exc).__name__}: {exc}")
            write.quarantined.append(failure.quarantined(DOCUMENTS, shipment_id, shipment_id))
            write.rejects.append(Reject(DOCUMENTS, str(shipment_id), None, failure.reason))
            continue
        rows += outcome.rows
        write.problems += outcome.problems
        write.replaced.setdefault(DOCUMENTS_TABLE, []).append(shipment_id)
        write.loaded.setdefault(DOCUMENTS, []).append(shipment_id)
    if DOCUMENTS_TABLE in write.replaced:
        write.tables[DOCUMENTS_TABLE] = SHIPMENT_DOCUMENTS.to_arrow(rows)


def default_workers() -> int:
    """Worker processes of a rebuild: one per core (0 where processes cannot be forked: normalized here)."""
    return (os.cpu_count() or 1) if can_fork() else 0


class Derivers(Workers):
    """The normalization of a rebuild's batches (:func:`derive`), in ``workers`` forked processes (each batch
    split into chunks of at most :data:`CHUNK` shipments, at least one per worker; forked, they run the
    mapping as it is in this process), or here when ``workers`` is 0. The process that writes then only
    reads the raw and writes the rows."""

    def __init__(self, workers: int, zone: ServiceZone, *, in_process_up_to: int = 0) -> None:
        super().__init__(workers, in_process_up_to=in_process_up_to)
        self.zone = zone
        """The rebuild's, handed to each batch (a worker's count of what it read stays in the worker)."""

    def submit(self, records: Sequence[RawRecord], cursor: str) -> Callable[[], BatchWrite]:
        """Start deriving ``records``; what gives their batch write (with ``cursor``: the rebuild's progress)
        when it is done."""
        pool = self._handed(len(records))
        if pool is None or not records:
            write = derive(records, self.zone) if records else BatchWrite()
            write.cursor = (REBUILD_STATE, cursor)
            return lambda: write
        size = min(-(-len(records) // self.workers), CHUNK)
        futures = [pool.submit(derive, records[at:at + size], self.zone) for at in range(0, len(records), size)]

        def result() -> BatchWrite:
            write = BatchWrite.joined([future.result() for future in futures])
            write.cursor = (REBUILD_STATE, cursor)
            return write

        return result


def _finish(warehouse: Warehouse, log: StreamResult, found: RebuildResult) -> None:
    log.finished_at = dt.datetime.now(dt.UTC)
    log.rows_read, log.rows_written = found.read, found.rows_written
    log.quarantined, log.data_problems = found.quarantined, found.data_problems
    log.cursor_after = warehouse.reads.get_cursor(REBUILD_STATE)
    log.extra.update(batches=found.batches, resumed_after=found.resumed_after, versions=found.versions,
                     shipments_written=found.shipments_written, shipments_rederived=found.shipments,
                     touched_keys=None if found.touched is None else list(found.touched),
                     every_one_because=found.every_one_because)
    warehouse.run_log.record_run(log)
