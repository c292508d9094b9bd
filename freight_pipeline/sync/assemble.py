"""Fetched bundles -> one :class:`BatchWrite`: normalization, and what each part's outcome means.

Per shipment, in the batch's one transaction:

* its document loaded: its rows replace its old ones in every document table, its raw document is
  kept, and each detail part that loaded (or does not apply) replaces its rows too;
* a part that failed (after the client's retries, or because its answer has the wrong shape or
  cannot be normalized) is quarantined with the reason, the request and an excerpt of what came
  back; its old rows stay. A failed document holds back the whole shipment: rows of its events,
  legs or memos without the shipment row would break the warehouse's relationships;
* a 404 for the document: the shipment is deleted everywhere; for a detail part: that part's rows
  go (the shipment was deleted while it was read: the reconcile removes the rest);
* a value that cannot be converted: null in its column and one ``data_problems`` row.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
import pyarrow as pa

from freight_pipeline.datetimes import DateTimeParseError, ServiceZone, to_utc
from freight_pipeline.normalize.converters import to_json
from freight_pipeline.normalize.errors import Invalid, NormalizationError
from freight_pipeline.normalize.flatten import LAST_MODIFIED, document_value, to_arrow_batch
from freight_pipeline.normalize.problems import Problems
from freight_pipeline.normalize.records import record_id
from freight_pipeline.normalize.shapes import FieldTally
from freight_pipeline.normalize.specs.keys import RECORD_ID
from freight_pipeline.sync.bundle import GONE, NOT_APPLICABLE, Bundle
from freight_pipeline.sync.cursor import CursorError, ShipmentKey
from freight_pipeline.sync.isolation import RecordFailure, data_problems, json_text, record_failure
from freight_pipeline.sync.parts import ALL_PARTS, DETAIL_PARTS, DOCUMENT, DOCUMENT_PART, PART_BY_STREAM, Part, Ref
from freight_pipeline.warehouse.records import BatchWrite, RawDocument, RawPart, Reject

Rows = dict[str, list[dict[str, Any]]]
PAYLOAD_CHARS = 100_000
RAW_LEVEL = 6
"""zlib level of the raw parts (``freight_meta.raw_parts``)."""
ARROW_EVERY = 100
"""Shipments whose rows are turned into Arrow at once: a batch's rows are held as dicts (about 180 KB a shipment)
only that long, so the memory of its normalization does not grow with the batch's size."""


@dataclass
class PartCounts:
    """What one part did in one run (shown per table group in Dagster)."""

    read: int = 0
    loaded: int = 0
    quarantined: int = 0
    data_problems: int = 0
    rejected: int = 0

    def add(self, other: PartCounts) -> None:
        self.read += other.read
        self.loaded += other.loaded
        self.quarantined += other.quarantined
        self.data_problems += other.data_problems
        self.rejected += other.rejected


@dataclass
class Assembled:
    write: BatchWrite
    counts: dict[str, PartCounts] = field(default_factory=dict)
    tallies: dict[str, FieldTally] = field(default_factory=dict)
    """The fields of the records read, per part."""
    failed_new: int = 0
    """Shipments of the batch with a failure that were not already waiting in the retry queue."""
    attempted_new: int = 0
    failures_new: list[RecordFailure] = field(default_factory=list)
    """Each of those shipments' first failure (what the breaker names when it stops the run)."""


def gone_reason(stream: str) -> str:
    if stream == DOCUMENT:
        return "not found (404) at retrieve: deleted in the source after lookup"
    return f"not found (404) at {stream}: deleted in the source while it was read"


def last_modified(doc: dict[str, Any], zone: ServiceZone) -> tuple[dt.datetime | None, str | None]:
    """The document's last-modified instant in UTC and its stamp (the service's wall-clock second with
    its offset when it sent one, ``ShipmentKey.stamp``); either None when unreadable (its data problem
    says why)."""
    try:
        parsed = zone.parse(document_value(doc, LAST_MODIFIED))
        instant = to_utc(parsed)
    except DateTimeParseError:
        return None, None
    if parsed is None:
        return None, None
    try:
        key = ShipmentKey.of_instant(0, parsed).stamp
    except CursorError:
        key = None
    return instant, key


class _Builder:
    def __init__(self, fetched_at: dt.datetime, ceiling: str | None, zone: ServiceZone, keep_raw: bool = True) -> None:
        self.rows: Rows = {}
        self.zone = zone
        """The run's: the records' date-times without a UTC offset are read in it."""
        self.keep_raw = keep_raw
        """False: a rebuild, re-deriving the raw held (none is written again, and the fields of its records,
        tallied by the sync that read them, are not tallied again)."""
        self.write = BatchWrite()
        self.counts: dict[str, PartCounts] = {}
        self.tallies: dict[str, FieldTally] = {}
        self.fetched_at, self.ceiling = fetched_at, ceiling
        self.texts: dict[str, bytes | None] = {}
        """The bundle in hand's detail answers as JSON (``answer_text``), each written once for its raw part and
        the content hash."""

    def count(self, stream: str) -> PartCounts:
        return self.counts.setdefault(stream, PartCounts())

    def tally(self, stream: str) -> FieldTally:
        tally = self.tallies.get(stream)
        if tally is None:
            tally = self.tallies[stream] = FieldTally(PART_BY_STREAM[stream].shape)
        return tally

    def replace(self, part: Part, shipment_id: int, rows: Rows | None = None) -> None:
        for table in part.tables:
            self.write.replaced.setdefault(table, []).append(shipment_id)
            self.rows.setdefault(table, []).extend((rows or {}).get(table, ()))
        self.write.loaded.setdefault(part.stream, []).append(shipment_id)
        self.count(part.stream).loaded += 1

    def quarantine(self, part: Part, ref: Ref, failure: RecordFailure, payload: str | None) -> None:
        if failure.request is None:
            failure = RecordFailure(failure.reason, part.request(ref), failure.status_code, failure.excerpt)
        self.write.quarantined.append(failure.quarantined(part.stream, ref.shipment_id, ref.shipment_id, ref.context()))
        self.write.rejects.append(Reject(part.stream, str(ref.shipment_id), payload or failure.excerpt, failure.reason))
        self.count(part.stream).quarantined += 1
        self.count(part.stream).rejected += 1

    def problems(self, part: Part, shipment_id: int, found: Problems) -> None:
        self.write.problems.extend(data_problems(part.stream, shipment_id, shipment_id, found))
        self.count(part.stream).data_problems += len(found)

    def gone(self, part: Part, shipment_id: int) -> None:
        self.write.rejects.append(Reject(part.stream, str(shipment_id), None, gone_reason(part.stream)))
        self.count(part.stream).rejected += 1

    def document(self, bundle: Bundle, answer: Any) -> bool:
        """The document's outcome; True when it loaded (its details may follow)."""
        shipment_id, ref = bundle.work.shipment_id, bundle.ref
        if answer is GONE:
            self.write.deleted_ids.append(shipment_id)
            self.gone(DOCUMENT_PART, shipment_id)
            return False
        if isinstance(answer, RecordFailure):
            self.quarantine(DOCUMENT_PART, ref, answer, None)
            return False
        self.count(DOCUMENT).read += 1
        if self.keep_raw:
            self.tally(DOCUMENT).see(answer, shipment_id)
        found = Problems(zone=self.zone)
        try:
            raw_text = to_json(answer) if self.keep_raw else ""
            rows = DOCUMENT_PART.normalize(ref, answer, found)
            if record_id(answer, "") != shipment_id:  # its column's reading (normalize read it already)
                raise NormalizationError(f"id: document id {RECORD_ID.of(answer)!r} does not match requested "
                                         f"{shipment_id}")
        except Invalid as exc:
            self.quarantine(DOCUMENT_PART, ref, RecordFailure(f"the document cannot be stored: {exc}"), None)
            return False
        except Exception as exc:  # NormalizationError, or a bug met on this record's data
            failure = record_failure(exc) or RecordFailure(f"{type(exc).__name__}: {exc}")
            self.quarantine(DOCUMENT_PART, ref, failure, json_text(answer, PAYLOAD_CHARS))
            return False
        if self.keep_raw:
            instant, key = last_modified(answer, self.zone)
            digest = content_hash(bundle, raw_text, self.answer_text)
            self.write.raw_documents.append(
                RawDocument(shipment_id, raw_text, self.fetched_at, instant, key, self.ceiling, digest)
            )
        self.replace(DOCUMENT_PART, shipment_id, rows)
        self.problems(DOCUMENT_PART, shipment_id, found)
        return True

    def answer_text(self, stream: str, answer: Any) -> bytes | None:
        """The canonical JSON of the bundle in hand's answer of ``stream`` (None: only ``to_json``'s fallback can
        write it), written once for both its raw part and the content hash."""
        if stream not in self.texts:
            self.texts[stream] = answer_text(answer)
        return self.texts[stream]

    def raw_part(self, part: Part, shipment_id: int, answer: Any) -> None:
        """Keep the part's answer as received (compressed); None: it has no rows."""
        if not self.keep_raw:
            return
        text = self.answer_text(part.stream, answer) if answer is not None else None
        if (raw := raw_part(part.stream, shipment_id, answer, self.fetched_at, text)) is not None:
            self.write.raw_parts.append(raw)

    def detail(self, part: Part, bundle: Bundle, answer: Any) -> None:
        shipment_id, ref = bundle.work.shipment_id, bundle.ref
        if answer is NOT_APPLICABLE:
            self.replace(part, shipment_id)
            self.raw_part(part, shipment_id, None)
            return
        if answer is GONE:
            self.gone(part, shipment_id)
            self.replace(part, shipment_id)
            self.raw_part(part, shipment_id, None)
            return
        if isinstance(answer, RecordFailure):
            self.quarantine(part, ref, answer, None)
            return
        self.count(part.stream).read += len(answer) if isinstance(answer, list) else 1
        if self.keep_raw:
            self.tally(part.stream).see_all(answer, shipment_id)
        found = Problems(zone=self.zone)
        try:
            rows = part.normalize(ref, answer, found)
        except Exception as exc:  # RecordShapeError, or a bug met on this record's data
            failure = record_failure(exc) or RecordFailure(f"{type(exc).__name__}: {exc}")
            self.quarantine(part, ref, RecordFailure(failure.reason, None, None, json_text(answer, 500)), None)
            return
        self.replace(part, shipment_id, rows)
        self.raw_part(part, shipment_id, answer)
        self.problems(part, shipment_id, found)


def answer_text(answer: Any) -> bytes | None:
    """``to_json(answer)`` as bytes when its fast path writes it (None otherwise: lone surrogates, huge integers,
    deep nesting)."""
    try:
        return orjson.dumps(answer, option=orjson.OPT_SORT_KEYS)
    except (orjson.JSONEncodeError, TypeError):
        return None


def raw_part(stream: str, shipment_id: int, answer: Any, fetched_at: dt.datetime,
             text: bytes | None = None) -> RawPart | None:
    """The answer of a part (``stream``) of a shipment as kept in ``raw_parts``: its JSON text (``text`` when
    written already) zlib-compressed (None: the part has no rows); None where JSON cannot hold it (a lone
    surrogate: its rows are written, no raw copy)."""
    if text is None and answer is not None:
        try:
            text = to_json(answer).encode()
        except Invalid:
            return None
    packed = zlib.compress(text, RAW_LEVEL) if text is not None else None
    return RawPart(stream, shipment_id, packed, len(text) if text is not None else None, fetched_at)


def unpacked(packed: bytes) -> Any:
    """A raw part's answer as kept (:func:`raw_part`'s compressed JSON text), decoded."""
    return orjson.loads(zlib.decompress(packed))


def content_hash(bundle: Bundle, document_text: str,
                 text: Callable[[str, Any], bytes | None] = lambda _, answer: answer_text(answer)) -> str | None:
    """A hash of every part's answer (the document as the JSON text kept for it, each detail's as ``text``
    writes it), when the walk asked every part and none failed (else None). The reconcile's fetches get none:
    they heal what is held, so they always write. The hashed bytes are the canonical JSON of
    ``[[stream, answer or "n/a"], ...]`` (details by stream), put together from each answer's text."""
    answers = bundle.answers
    failed = any(isinstance(answer, RecordFailure) or answer is GONE for answer in answers.values())
    if bundle.work.key is None or set(answers) != ALL_PARTS or failed:
        return None
    details = []
    for stream in sorted(answers):
        if stream == DOCUMENT:
            continue
        answer = answers[stream]
        written = b'"n/a"' if answer is NOT_APPLICABLE else text(stream, answer)
        if written is None:  # what orjson cannot write (lone surrogates, huge integers): counted as changed
            return None
        details.append(b'["' + stream.encode() + b'",' + written + b"]")
    content = b"[" + b",".join(details) + b"]"
    return hashlib.blake2b(document_text.encode() + b"\0" + content, digest_size=16).hexdigest()


def _to_arrow(builder: _Builder, converted: dict[str, list[pa.Table]]) -> None:
    """The rows made so far as Arrow tables, added to ``converted`` (by table), and no longer held as dicts."""
    for name, table in to_arrow_batch(builder.rows).items():
        converted.setdefault(name, []).append(table)
    builder.rows = {}


def assemble(
    bundles: Sequence[Bundle], fetched_at: dt.datetime, ceiling: str | None, zone: ServiceZone, *,
    keep_raw: bool = True,
) -> Assembled:
    """The batch write of ``bundles`` (their rows as Arrow tables) and what each part did. ``keep_raw=False``
    (a rebuild, re-deriving rows from the raw held): no raw document or part is written again (nor
    serialized, compressed or hashed for it), and no field tallied (the sync that read them did)."""
    builder = _Builder(fetched_at, ceiling, zone, keep_raw)
    failed_new = attempted_new = 0
    failures_new: list[RecordFailure] = []
    converted: dict[str, list[pa.Table]] = {}
    for place, held in enumerate(bundles):
        if place and place % ARROW_EVERY == 0:
            _to_arrow(builder, converted)
        bundle = held.decoded()  # one at a time: a batch's decoded answers are never all held at once
        answers, work = bundle.answers, bundle.work
        if not answers:
            continue
        quarantined_before = len(builder.write.quarantined)
        builder.texts = {}
        details_wanted = True
        if DOCUMENT in answers:
            details_wanted = builder.document(bundle, answers[DOCUMENT])
        if details_wanted:
            for part in DETAIL_PARTS:
                if part.stream in answers:
                    builder.detail(part, bundle, answers[part.stream])
        if not work.retry:
            attempted_new += 1
            if len(builder.write.quarantined) > quarantined_before:
                failed_new += 1
                first = builder.write.quarantined[quarantined_before]
                failures_new.append(RecordFailure(first.reason, first.request, first.status_code))
    _to_arrow(builder, converted)
    builder.write.tables = {name: tables[0] if len(tables) == 1 else pa.concat_tables(tables)
                            for name, tables in converted.items()}
    return Assembled(builder.write, builder.counts, builder.tallies, failed_new, attempted_new, failures_new)
