"""The documents stream: the E-Files linked to each shipment, in ``freight.shipment_documents``.

Which shipments: those the shipments stream wrote since this stream's last run (their
``_synced_at`` is past its watermark), plus those waiting in its retry queue; and every held
shipment on the first run and then every ``documents_relist_interval`` (the full re-listing:
whether storing or deleting an E-File moves a shipment's last-modified instant is not documented,
A38, so a change that does not is found by the next re-listing at the latest).

How: per chunk of ``documents_chunk`` shipments one E-File lookup (``SHIPMENT_ID`` any of them,
ordered, every page, checked against ``X-Row-Count``), then each listed E-File's references and
roles (two small GETs; with ``document_content`` one ``cascade`` GET that brings the document too).
An E-File's rows go to the shipments its ``SHIPMENT`` references name. A shipment's rows are
replaced only when they differ from those held (its change is then logged for the marts).

One bad record never stops the stream: when anything of a chunk fails, its shipments are read again
one by one (a lookup by one shipment id needs no references to place its files), and a shipment
that still fails keeps its old rows and waits in the retry queue. A document whose bytes are not
valid base64 is written without content and quarantined for another try. An E-File the chunk's lookup lists whose
reads answer 403 (the account may not read that file) or 404 (listed again by a second lookup: a node behind, a
permission answered as 404) fails its shipment so; only one the second lookup no longer lists is gone. When no
E-File's reads have answered in the run and one is refused, the account lacks the endpoint's permission: the stream
fails (``StreamUnreachable``, by the runner), no shipment is quarantined for it. When more shipments fail
than ``breaker_max_share`` (and at least ``breaker_min_failures``), the run stops before writing
the chunk that tipped it (``CircuitOpen``): an outage is not quarantined shipment by shipment.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import datetime as dt
import hashlib
import json
import os
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from freight_pipeline.client import PermissionDeniedError
from freight_pipeline.config import DOCUMENTS_ENV
from freight_pipeline.datetimes import ServiceZone
from freight_pipeline.normalize.documents import EFILE_SHAPE, SHIPMENT_DOCUMENTS, document_row, shipment_ids_of
from freight_pipeline.normalize.errors import RecordShapeError
from freight_pipeline.normalize.problems import Problem, Problems
from freight_pipeline.normalize.shapes import FieldTally
from freight_pipeline.sync.assemble import raw_part
from freight_pipeline.sync.changes import LookupResult, read_complete
from freight_pipeline.sync.isolation import Breaker, RecordFailure, data_problems, record_failure
from freight_pipeline.sync.progress import Meter, Progress
from freight_pipeline.sync.result import StreamResult
from freight_pipeline.sync.settings import SyncSettings
from freight_pipeline.sync.source import DocumentGone, SourceAPI
from freight_pipeline.sync.tasks import run_all
from freight_pipeline.warehouse.documents import (
    COMPARED,
    held_documents,
    newest_shipment_write,
    row_key,
    sharing_shipments,
    shipments_written_after,
)
from freight_pipeline.warehouse.records import BatchWrite, DataProblem, Quarantined
from freight_pipeline.warehouse.store import Warehouse

STREAM = "documents"
TABLE = SHIPMENT_DOCUMENTS.name
CONTENT_DIR = "documents"
"""Copied document bytes: ``<data dir>/documents/<first two hex digits>/<sha256>``, once per content."""
PART_PREFIX = ".part-"
"""The name's start of a copy being written (renamed to its hash once whole)."""
FILES_A_SHIPMENT = 2
"""E-Files a chunk of shipments is sized for: its lookup's listing fits one page (``page_size``) at up to this many a
shipment (a listing of several pages is read again in halves: a smaller page made every chunk be read thrice)."""



@dataclass(frozen=True)
class DocumentsCursor:
    """How far the stream got: the last shipment write it covered, its last full re-listing, and whether it copied
    the documents' bytes (``document_content``)."""

    synced_through: dt.datetime | None = None
    relisted_at: dt.datetime | None = None
    content: bool = False
    """A run of the other ``document_content`` re-lists every shipment: the rows held have their copies (or none)
    as the setting was, and only the re-listing reads every file again (switched on, the files of unchanged
    shipments stayed without a copy until the next daily re-listing, for ever with ``relist=never``)."""

    @classmethod
    def parse(cls, text: str | None) -> DocumentsCursor:
        if not text:
            return cls()
        data = json.loads(text)
        synced, relisted = (dt.datetime.fromisoformat(data[k]) if data.get(k) else None
                            for k in ("synced_through", "relisted_at"))
        return cls(synced, relisted, data.get("content") is True)

    def text(self) -> str:
        return json.dumps({"synced_through": self.synced_through.isoformat() if self.synced_through else None,
                           "relisted_at": self.relisted_at.isoformat() if self.relisted_at else None,
                           "content": self.content})

    def relist_due(self, interval: dt.timedelta | None, now: dt.datetime, content: bool) -> bool:
        """Whether every shipment's E-Files are listed again: never listed, ``interval`` since the last re-listing,
        or the ``content`` setting other than the last run's."""
        if self.relisted_at is None or content != self.content:
            return True
        return interval is not None and now - self.relisted_at >= interval


@dataclass
class Detail:
    """What was read of one E-File besides the lookup: references, roles, maybe its content."""

    references: list[Any]
    roles: list[Any]
    content: tuple[str, int, str] | None = None
    content_failure: RecordFailure | None = None


GONE = "gone"
"""An E-File deleted between the lookup and its reads: it has no rows."""


@dataclass
class ShipmentDocuments:
    """One shipment's outcome: its rows (and problems), or why it could not be read."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    problems: list[DataProblem] = field(default_factory=list)
    quarantined: list[Quarantined] = field(default_factory=list)
    failure: RecordFailure | None = None
    files: list[dict[str, Any]] = field(default_factory=list)
    """Each row's E-File as read (:func:`file_rows`), the content copy taken from the row when written."""


def file_rows(shipment_id: int, files: Sequence[Mapping[str, Any]], zone: ServiceZone) -> ShipmentDocuments:
    """The rows of a shipment's E-Files and their data problems, each file as kept raw (``raw_parts``, stream
    :data:`STREAM`): ``efile`` (its record in the lookup), ``references``, ``roles`` and ``content`` (the copy
    of its document: sha256, size, path; null: none). The stream and a rebuild both place them so; ``zone``:
    the run's, for dates without a UTC offset."""
    outcome = ShipmentDocuments(files=list(files))
    for file in files:
        found = Problems(zone=zone)
        content = file.get("content")
        outcome.rows.append(document_row(shipment_id, file["efile"], file["references"], file["roles"], found,
                                         (content[0], content[1], content[2]) if content else None))
        # one record per shipment: the path names the file, so two files' problems stay apart
        named = Problems(Problem(f"efile[{file['efile'].get('id')}].{p.path}", p.value, p.reason) for p in found)
        outcome.problems.extend(data_problems(STREAM, shipment_id, shipment_id, named))
    return outcome


def raw_files(outcome: ShipmentDocuments) -> list[dict[str, Any]]:
    """A shipment's E-Files as kept raw: as read, each with the content copy its row was written with."""
    return [{**file, "content": [row[c] for c in CONTENT_COLUMNS] if row["content_sha256"] is not None else None}
            for file, row in zip(outcome.files, outcome.rows, strict=True)]


class DocumentReader:
    """Reads the E-Files of chunks of shipments; each E-File's details once per run."""

    def __init__(self, source: SourceAPI, settings: SyncSettings, data_dir: Path) -> None:
        self.source = source
        self.settings = settings
        self.content_root = data_dir / CONTENT_DIR
        self.details: dict[int, Detail | RecordFailure | str] = {}
        self.files_read = 0
        self.single_lookups = 0
        """Lookups of one shipment made because something of its chunk failed or stayed unplaced."""
        self.unplaced_files = 0
        """Files a chunk's lookup listed whose references named none of the chunk's shipments."""
        self.details_answered = 0
        """E-Files whose reads answered in this run."""
        self.refusal: PermissionDeniedError | None = None
        """The first 403 an E-File's reads met in this run."""

    async def read(self, ids: Sequence[int]) -> dict[int, ShipmentDocuments]:
        """The documents of ``ids``; a chunk where anything failed is read again one shipment at a time."""
        pages: list[int] = []
        try:
            files = await self._listing(ids, pages)
            listed = _by_id(files)
        except Exception as exc:
            failure = record_failure(exc)
            if failure is None:
                raise
            return await self._one_by_one(ids, failure)
        if len(ids) == 1 and pages[-1] > 1 and len(listed) < len(files):
            # one shipment's lookup lists each of its files once: a repeat over pages ordered by SHIPMENT_ID
            # alone (ties in the service's order, which may differ from one page's query to the next) means
            # they overlapped, and as many files were listed on none (its rows are kept, the next run asks again)
            return await self._one_by_one(ids, RecordFailure(
                f"its E-File lookup listed {len(files) - len(listed)} file(s) twice over {pages[-1]} pages, so as "
                "many on none: the pages overlapped (the lookup orders by SHIPMENT_ID only)"))
        if pages[-1] > 1 and len(ids) > 1:
            # ordered by SHIPMENT_ID only (the lookup offers no file id to order by), a listing of
            # several pages (of the size the service served) could shift a file between pages:
            # halves until each fits one page
            half = len(ids) // 2
            return {**await self.read(ids[:half]), **await self.read(ids[half:])}
        await run_all(self._detail(efile_id) for efile_id in listed if efile_id not in self.details)
        if self.refusal is not None and not self.details_answered:
            raise self.refusal  # no E-File's reads answered in this run: the endpoint's permission, not a file's
        if gone := [i for i in listed if self.details[i] == GONE]:
            await self._confirm_gone(ids, gone)
        failed = {i: d for i in listed if isinstance(d := self.details[i], RecordFailure)}
        if len(ids) > 1:
            unplaced = [i for i in listed if isinstance(d := self.details[i], Detail)
                        and not set(shipment_ids_of(d.references)) & set(ids)]
            if unplaced:  # listed for the chunk, yet its references name none of it: ask each shipment
                self.unplaced_files += len(unplaced)
                failed.update({i: RecordFailure(f"its references name none of shipments {_ids_text(ids)}")
                               for i in unplaced})
        if failed:
            return await self._one_by_one(ids, next(iter(failed.values())), failed)
        self.files_read += len(listed)
        return self._place(ids, listed)

    async def _one_by_one(self, ids: Sequence[int], failure: RecordFailure,
                          failed: Mapping[int, RecordFailure] | None = None) -> dict[int, ShipmentDocuments]:
        if len(ids) > 1:
            self.single_lookups += len(ids)
            results: dict[int, ShipmentDocuments] = {}
            for shipment_id in ids:
                results.update(await self.read([shipment_id]))
            return results
        shipment_id = ids[0]
        if failed:
            efile_id, first = next(iter(failed.items()))
            failure = RecordFailure(f"E-File {efile_id}: {first.reason}", first.request, first.status_code,
                                    first.excerpt)
        return {shipment_id: ShipmentDocuments(failure=failure)}

    def _place(self, ids: Sequence[int], listed: Mapping[int, dict[str, Any]]) -> dict[int, ShipmentDocuments]:
        """Each listed E-File's rows under the shipments of ``ids`` it is linked to."""
        files: dict[int, list[dict[str, Any]]] = {i: [] for i in ids}
        contents: dict[int, list[RecordFailure]] = {i: [] for i in ids}
        wanted = set(ids)
        for efile_id, efile in listed.items():
            detail = self.details[efile_id]
            if not isinstance(detail, Detail):
                continue  # gone since it was listed
            # one shipment asked: the lookup itself says the file is linked to it
            linked = list(ids) if len(ids) == 1 else [i for i in shipment_ids_of(detail.references) if i in wanted]
            for shipment_id in linked:
                files[shipment_id].append({"efile": efile, "references": detail.references, "roles": detail.roles,
                                           "content": list(detail.content) if detail.content else None})
                if detail.content_failure is not None:
                    contents[shipment_id].append(detail.content_failure)
        results = {i: file_rows(i, files[i], self.settings.zone) for i in ids}
        for shipment_id, failures in contents.items():
            results[shipment_id].quarantined.extend(f.quarantined(STREAM, shipment_id, shipment_id) for f in failures)
        return results

    async def _listing(self, ids: Sequence[int], pages: list[int], *, again: bool = False) -> list[Any]:
        """The E-Files the lookup of ``ids`` lists, every page, checked against ``X-Row-Count`` (``pages``: each
        page's count of pages, as the service answered it)."""
        size = self.settings.page_size
        return await read_complete(lambda: _counted(self.source.efile_pages(list(ids), size), pages),
                                   f"E-File lookup of shipments {_ids_text(ids)}{', again' if again else ''}",
                                   self.settings.count_attempts, count_required=True)

    async def _confirm_gone(self, ids: Sequence[int], gone: Sequence[int]) -> None:
        """The E-Files of ``gone`` (listed by the lookup of ``ids``, their reads 404) that a second lookup lists
        still are there: their reads failed (a node behind, a permission on the record answered as 404), so their
        shipments keep their rows and are asked again; the others were deleted meanwhile (no rows)."""
        try:
            relisted = _by_id(await self._listing(ids, [], again=True))
        except Exception as exc:
            if (failure := record_failure(exc)) is None:
                raise
            self.details.update(dict.fromkeys(gone, failure))  # not known to be gone: failed
            return
        for efile_id in gone:
            if efile_id in relisted:
                self.details[efile_id] = RecordFailure(
                    "listed by the E-File lookup, but its reads answer 404 (a node behind, or a permission on the "
                    "record answered as 404): its shipment keeps its rows and is asked again",
                    f"GET /service/efile/{efile_id}", 404)

    async def _detail(self, efile_id: int) -> None:
        try:
            if self.settings.document_content:
                self.details[efile_id] = self._with_content(efile_id, await self.source.get_efile(efile_id))
            else:
                references, roles = await self._references_and_roles(efile_id)
                self.details[efile_id] = Detail(_list(references, "references", efile_id),
                                                _list(roles, "roles", efile_id))
            self.details_answered += 1
        except DocumentGone:
            self.details[efile_id] = GONE
        except PermissionDeniedError as exc:  # this file's: the stream's when none answers (``read``)
            self.refusal = self.refusal or exc
            self.details[efile_id] = RecordFailure(
                "its reads were refused (403): the account may not read this E-File (a role it lacks?); its shipment "
                "keeps its rows and is asked again", f"{exc.method} {exc.path}" if exc.method and exc.path else None,
                403)
        except Exception as exc:
            failure = record_failure(exc)
            if failure is None:
                raise
            self.details[efile_id] = failure

    async def _references_and_roles(self, efile_id: int) -> tuple[Any, Any]:
        """An E-File's references and roles, each from its own request. A 404 of either is confirmed by the E-File's
        own read (with both in it): the E-File gone too raises :class:`DocumentGone`; one that is there is listed as
        that read says (a service whose sub-resource answers 404 for none, or a moment's inconsistency), not
        dropped as deleted."""
        try:
            references, roles = await run_all([self.source.get_efile_references(efile_id),
                                               self.source.get_efile_roles(efile_id)])
        except DocumentGone:
            efile = await self.source.get_efile(efile_id)
            if not isinstance(efile, Mapping):
                raise RecordShapeError(
                    f"E-File {efile_id} was answered with {type(efile).__name__}, not an object") from None
            return efile.get("references"), efile.get("roles")
        return references, roles

    def _with_content(self, efile_id: int, efile: Any) -> Detail:
        if not isinstance(efile, Mapping):
            raise RecordShapeError(f"E-File {efile_id} was answered with {type(efile).__name__}, not an object")
        detail = Detail(_list(efile.get("references"), "references", efile_id),
                        _list(efile.get("roles"), "roles", efile_id))
        document = efile.get("document")
        try:
            if not isinstance(document, str):
                raise ValueError(f"document is {type(document).__name__}, not a base64 string")
            # MIME's form too: lines of 76 characters (Java's getMimeEncoder), whitespace no part of the data
            data = base64.b64decode("".join(document.split()), validate=True)
        except (binascii.Error, ValueError) as exc:
            detail.content_failure = RecordFailure(
                f"E-File {efile_id}: the document is not valid base64 ({exc}); its row is written without content",
                f"GET /service/efile/{efile_id}?cascade=true", 200, str(document)[:200])
            return detail
        detail.content = self._store(data)
        return detail

    def _store(self, data: bytes) -> tuple[str, int, str]:
        """Write ``data`` once under its hash (an existing copy is kept); (sha256, size, relative path)."""
        digest = hashlib.sha256(data).hexdigest()
        relative = Path(CONTENT_DIR) / digest[:2] / digest
        target = self.content_root.parent / relative
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=target.parent, prefix=PART_PREFIX, delete=False) as part:
                try:
                    part.write(data)
                    part.close()
                    os.replace(part.name, target)
                except BaseException:  # a disk full, a stop: no part left behind
                    with contextlib.suppress(OSError):
                        os.unlink(part.name)
                    raise
        return digest, len(data), relative.as_posix()

    def sweep_parts(self) -> int:
        """Remove the parts of copies a process ended in the middle of (killed as it wrote one): the run holds the
        writer lock, so none is being written; how many."""
        swept = 0
        for part in self.content_root.glob(f"*/{PART_PREFIX}*"):
            with contextlib.suppress(FileNotFoundError):
                part.unlink()
                swept += 1
        return swept


async def sync_documents(
    source: SourceAPI, warehouse: Warehouse, settings: SyncSettings, run_id: str, progress: Progress | None = None
) -> StreamResult:
    say = progress or (lambda message: None)
    result = StreamResult.begun(run_id, STREAM)
    requests_before, retries_before = source.request_counts()
    meter = Meter(STREAM, source.request_counts)
    result.cursor_before = warehouse.reads.get_cursor(STREAM)
    now = dt.datetime.now(dt.UTC)
    cursor = DocumentsCursor.parse(result.cursor_before)
    relist = cursor.relist_due(settings.documents_relist_interval, now, settings.document_content)
    watermark = newest_shipment_write(warehouse.con)
    since = None if relist else cursor.synced_through
    targets = shipments_written_after(warehouse.con, since)  # since None: every held shipment, none sharing besides
    due = {due.shipment_id for due in warehouse.reads.due_retries([STREAM], run_id) if due.shipment_id is not None}
    waiting = warehouse.reads.quarantined_ids(STREAM)  # due or not: their failures do not count again
    if due - set(targets):
        held = set(shipments_written_after(warehouse.con, None))
        targets = sorted(set(targets) | (due & held))
    say(f"documents: {'re-listing the E-Files of every' if relist else 'listing the E-Files of'} "
        f"{len(targets)} shipments" + (f" ({len(due)} from the retry queue)" if due else ""))
    meter.announce(len(targets), final=True)
    reader = DocumentReader(source, settings, warehouse.data_dir)
    if settings.document_content and (swept := reader.sweep_parts()):
        say(f"removed {swept} part{'s' if swept != 1 else ''} of E-File copies an earlier run left unfinished")
    breaker = Breaker(STREAM, settings.breaker_max_share, settings.breaker_min_failures, switch=DOCUMENTS_ENV)
    counts = {"changed": 0, "unchanged": 0, "failed": 0}
    chunk = max(1, min(settings.documents_chunk, settings.page_size // FILES_A_SHIPMENT))
    listed, pending, sharing = set(targets), list(targets), 0
    while pending:
        ids, pending = pending[:chunk], pending[chunk:]
        outcomes = await reader.read(ids)
        new = [i for i in outcomes if i not in waiting]
        failures = [f for i in new if (f := outcomes[i].failure) is not None]
        breaker.count(len(new), len(failures), failures)
        shared: list[int] = []
        if since is not None:  # an E-File shared with a held shipment not listed (holding its row, or named by it):
            # its row there is listed in this run too (read before this chunk's rows replace those held: an E-File a
            # shipment lost counts)
            read = [row["efile_id"] for o in outcomes.values() for row in o.rows]
            named = [i for o in outcomes.values() for file in o.files for i in shipment_ids_of(file["references"])]
            shared = sorted(sharing_shipments(warehouse.con, ids, read, named) - listed)
        _write(warehouse, run_id, settings, outcomes, counts, result)
        result.rows_read = reader.files_read  # so far: what a run that fails later logs
        meter.advance(len(ids))
        if shared:
            targets, pending = [*targets, *shared], [*pending, *shared]
            listed.update(shared)
            sharing += len(shared)
            meter.announce(len(targets), final=True)
    result.rows_read = reader.files_read
    warehouse.writes.set_cursor(STREAM, DocumentsCursor(watermark, now if relist else cursor.relisted_at,
                                                        settings.document_content).text(), run_id)
    if settings.document_content != cursor.content:
        result.extra["content_switched"] = "on" if settings.document_content else "off"
    result.extra.update(counts, relisted=relist, shipments=len(targets), sharing_an_efile=sharing,
                        files_per_shipment=round(reader.files_read / len(targets), 2) if targets else 0,
                        single_shipment_lookups=reader.single_lookups, unplaced_files=reader.unplaced_files)
    result.extra["retry_queue"] = warehouse.reads.quarantine_counts().get(STREAM, 0)
    say(f"documents: {len(targets)} shipments, {reader.files_read} E-Files; rows of {counts['changed']} shipments "
        f"changed, {counts['unchanged']} unchanged, {counts['failed']} failed")
    requests_after, retries_after = source.request_counts()
    result.requests = requests_after - requests_before
    result.retries = retries_after - retries_before
    result.cursor_after = warehouse.reads.get_cursor(STREAM)
    meter.end()
    return result


def _write(warehouse: Warehouse, run_id: str, settings: SyncSettings, outcomes: Mapping[int, ShipmentDocuments],
           counts: dict[str, int], result: StreamResult) -> None:
    """One transaction for a chunk: changed shipments' rows replaced, the rest settled or quarantined."""
    loaded = {i: o for i, o in outcomes.items() if o.failure is None}
    held = held_documents(warehouse.con, list(loaded))
    if settings.document_content:
        _keep_held_content(loaded, held)
    changed = [i for i, o in loaded.items() if {row_key(r) for r in o.rows} != held.get(i, set())]
    unchanged = [i for i in loaded if i not in set(changed)]
    rows = [r for i in changed for r in loaded[i].rows]
    quarantined = [o.failure.quarantined(STREAM, i, i) for i, o in outcomes.items() if o.failure is not None]
    quarantined += [q for o in loaded.values() for q in o.quarantined]
    problems = [p for o in loaded.values() for p in o.problems]  # unchanged ones' too: they are replaced
    tally = result.tallies.setdefault(STREAM, FieldTally(EFILE_SHAPE))
    for shipment_id, outcome in loaded.items():  # each file as its row was derived: its references and roles
        for file in outcome.files:
            tally.see({**file["efile"], "references": file["references"], "roles": file["roles"]}, shipment_id)
    read_at = dt.datetime.now(dt.UTC)  # every file as read (unchanged rows too: a field no row holds may have changed)
    raw = [raw_part(STREAM, i, raw_files(o), read_at) for i, o in loaded.items()]
    tables = {TABLE: SHIPMENT_DOCUMENTS.to_arrow(rows)}
    stats = warehouse.writes.apply_batch(
        run_id,
        BatchWrite(tables=tables, replaced={TABLE: changed},
                   loaded={STREAM: changed}, settled={STREAM: unchanged}, quarantined=quarantined,
                   problems=problems, raw_parts=[r for r in raw if r is not None]),
        backoff=settings.backoff, history=settings.history,
    )
    result.add_rows({TABLE: stats.get(TABLE, 0)})
    result.count_nulls(stats.written)
    result.quarantined += len(quarantined)
    result.data_problems += len(problems)
    counts["changed"] += len(changed)
    counts["unchanged"] += len(unchanged)
    counts["failed"] += len(outcomes) - len(loaded)


CONTENT_COLUMNS = ("content_sha256", "content_size_bytes", "content_path")


def _keep_held_content(loaded: Mapping[int, ShipmentDocuments], held: Mapping[int, set[tuple[Any, ...]]]) -> None:
    """A file whose bytes could not be read this time keeps the copy it has (an E-File's document
    does not change: a good copy stays good)."""
    at = [COMPARED.index(c) for c in ("efile_id", *CONTENT_COLUMNS)]
    copies = {(i, row[at[0]]): tuple(row[k] for k in at[1:]) for i, rows in held.items() for row in rows
              if row[at[1]] is not None}
    for shipment_id, outcome in loaded.items():
        for row in outcome.rows:
            copy = copies.get((shipment_id, row["efile_id"]))
            if row["content_sha256"] is None and copy is not None:
                row.update(zip(CONTENT_COLUMNS, copy, strict=True))


async def _counted(pages: AsyncIterator[LookupResult], counts: list[int]) -> AsyncIterator[LookupResult]:
    """``pages`` passed on; how many there were is appended to ``counts`` once they are all read."""
    read = 0
    async for page in pages:
        read += 1
        yield page
    counts.append(read)


def _by_id(files: Sequence[Any]) -> dict[int, dict[str, Any]]:
    """The listed E-Files by id (one entry per file: a file linked to two shipments is listed twice)."""
    listed: dict[int, dict[str, Any]] = {}
    for position, efile in enumerate(files):
        efile_id = efile.get("id") if isinstance(efile, Mapping) else None
        if isinstance(efile_id, bool) or not isinstance(efile_id, int):
            raise RecordShapeError(f"E-File lookup item {position} has no usable id: {str(efile)[:200]}")
        listed[efile_id] = dict(efile)
    return listed


def _list(value: Any, what: str, efile_id: int) -> list[Any]:
    if not isinstance(value, list):
        raise RecordShapeError(f"the {what} of E-File {efile_id} came as {type(value).__name__}, not a list")
    return value


def _ids_text(ids: Sequence[int]) -> str:
    return f"{ids[0]}" if len(ids) == 1 else f"{ids[0]}..{ids[-1]} ({len(ids)})"
