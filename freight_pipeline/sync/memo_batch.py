"""The memo lines of a walk page's shipments read by one lookup per client, each shipment's share checked against
its own document.

A shipment's memo lines are otherwise one lookup of its own (``CLIENT`` and ``SHIPMENT_NUMBER`` equal: ``parts``),
a quarter of a sync's requests. For each page of the change walk, the shipments of one client (up to
:data:`MEMO_BATCH_SIZE`) are looked up together (``SHIPMENT_NUMBER IN (...)``), as soon as the page is read, and
each shipment takes its share of the answer only when the memo ids its document lists (the document's ``memos``,
kept with its held body: ``source.KEPT_DOCUMENT_ARRAYS``) are exactly the ids of that share. Every other case is
looked up alone, as before: a document without a readable ``memos``, a share that differs from it (a line added or
removed in between, a service that reads ``IN`` otherwise), a document that names another client or number than
the walk did, a batch that failed or held a line it cannot place (another client's or number's, or not a record).
So a batched answer never decides a shipment's lines against its own document, and a service that reads the batch
otherwise costs requests, not lines.

The service's first refusal of the batched form (a 4xx: a service that does not take ``IN`` there), or a run where
more shipments disagreed with their documents than agreed (:data:`DISAGREEMENTS_BEFORE_GIVING_UP` at least),
stops batching. The stop is kept for the runs after it (``freight_meta.sync_state`` entry :data:`STATE`): they
look each shipment up alone without asking again, until the first run after :data:`RETRY_AFTER` tries batching
again (a service may come to take ``IN``), which clears the entry once a batch was read and renews it when the
service still refuses. Every run that ends with a stop kept says so (``NoticeKind.MEMO_BATCH_OFF``, a kind that
lasts): its alert stays open until a run reads a batch.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from freight_pipeline.client import BadRequestError
from freight_pipeline.normalize.records import memo_key
from freight_pipeline.sync.changes import read_complete
from freight_pipeline.sync.parts import DOCUMENT, MEMOS, Ref
from freight_pipeline.sync.source import DOCUMENT_MEMOS, SourceAPI
from freight_pipeline.text import one_line

MEMO_BATCH_SIZE = 100
"""Shipment numbers in one batched memo lookup (its answer fits a page of 500 lines for most pages)."""
DISAGREEMENTS_BEFORE_GIVING_UP = 20
"""Shipments whose document disagreed with their batched share before a run may stop batching (when they
outnumber the shipments with memo lines whose share agreed)."""

STATE = "memo_batch_off"
"""``sync_state`` entry: the stop of batching a run kept (JSON of :class:`BatchingOff`); absent or null while on."""
RETRY_AFTER = dt.timedelta(days=1)
"""How long a kept stop holds: the first run after it tries batching again."""

Lines = list[dict[str, Any]]


@dataclass(frozen=True)
class BatchingOff:
    """A run's stop of batching, as the runs after it keep it (:data:`STATE`)."""

    since: dt.datetime
    """When the run that stopped began (an instant)."""
    why: str
    run_id: str

    @classmethod
    def parse(cls, text: str | None) -> BatchingOff | None:
        """The kept stop; None when there is none or it cannot be read (batching is then tried: an unreadable
        entry costs requests, never lines)."""
        if not text:
            return None
        try:
            data = json.loads(text)
            since = dt.datetime.fromisoformat(data["since"])
            why, run_id = data["why"], data["run_id"]
        except (ValueError, KeyError, TypeError):
            return None
        if since.utcoffset() is None or not isinstance(why, str) or not isinstance(run_id, str):
            return None
        return cls(since, why, run_id)

    def text(self) -> str:
        return json.dumps({"since": self.since.isoformat(), "why": self.why, "run_id": self.run_id})

    @property
    def until(self) -> dt.datetime:
        """When the stop ends: the first run that begins after it tries batching again."""
        return self.since + RETRY_AFTER

    def notice(self) -> str:
        """What each run says while the stop is kept (``NoticeKind.MEMO_BATCH_OFF``)."""
        return (f"memo lines looked up one shipment at a time since {self.since.isoformat(timespec='seconds')} "
                f"(run {self.run_id}); the first run after {self.until.isoformat(timespec='seconds')} tries "
                f"batching again: {self.why}")


@dataclass
class MemoBatchFigures:
    """What the batched memo lookups did in a run (``extra.memo_batches``)."""

    lookups: int = 0
    """Batched lookups read."""
    failed: int = 0
    """Of them, those that failed or held a line they could not place (their shipments looked up alone)."""
    taken: int = 0
    """Shipments whose memo lines came from a batch (their document listed the same ids)."""
    agreed_with_lines: int = 0
    """Of them, those with at least one line."""
    alone: int = 0
    """Shipments of a batch looked up alone (their document disagreed or listed none, or the batch failed)."""
    disagreed: int = 0
    """Of them, those whose document's memo ids differed from the batch's share."""
    off: str | None = None
    """Why batching stopped in this run (None: it did not)."""
    held_off: str | None = None
    """Batching was off from the run's start: the stop an earlier run kept, and until when it holds."""

    def as_dict(self) -> dict[str, Any]:
        return {key: value for key, value in vars(self).items() if value is not None}


class MemoBatch:
    """One batched lookup (one client, several shipment numbers), read in its own task from when it is made."""

    def __init__(self, batches: MemoBatches, client: str, numbers: Sequence[str]) -> None:
        self.client, self.numbers = client, tuple(numbers)
        self._task = asyncio.get_running_loop().create_task(batches.read(client, self.numbers))

    async def share(self, number: str) -> Lines | None:
        """The lines of ``number`` in the answer (None: the batch failed or held a line it cannot place)."""
        by_number = await asyncio.shield(self._task)
        return by_number.get(number) if by_number is not None else None

    def cancel(self) -> None:
        self._task.cancel()


def sorted_ids(records: Sequence[Any]) -> list[int] | None:
    """The ids of ``records`` sorted; None when one is not an object with an integer ``id`` (a line answered twice
    keeps both: it never matches a document that lists it once)."""
    ids = [record.get("id") if isinstance(record, Mapping) else None for record in records]
    return sorted(ids) if all(type(record_id) is int for record_id in ids) else None  # type: ignore[type-var]


def document_memo_ids(document: Any) -> list[int] | None:
    """The memo ids a document (or its held body's ``top``) lists, sorted; None when it lists none readably
    (no ``memos`` array, an item that is not an object with an integer ``id``)."""
    memos = document.get(DOCUMENT_MEMOS) if isinstance(document, Mapping) else None
    return sorted_ids(memos) if isinstance(memos, list) else None


def split_by_number(lines: Iterable[Any], client: str, numbers: Sequence[str]) -> dict[str, Lines] | None:
    """The lines of a batched answer by shipment number (every number asked, empty where none came); None when a
    line is not an object of ``client`` and one of ``numbers`` (it cannot be placed: the whole answer is doubtful)."""
    by_number: dict[str, Lines] = {number: [] for number in numbers}
    asked = {number.strip(): number for number in numbers}
    for line in lines:
        if not isinstance(line, dict):
            return None
        line_client, number = memo_key(line)  # read as the lines are filed (normalize_memos)
        if line_client != client.strip():
            return None
        share = by_number.get(asked.get(number))  # type: ignore[arg-type]
        if share is None:
            return None
        share.append(line)
    return by_number


@dataclass
class MemoBatches:
    """A run's batched memo lookups: made for each walk page (:meth:`plan`), each taken by its shipment's fetch
    (:meth:`batch_of`) and checked against its document (:meth:`lines_for`)."""

    source: SourceAPI
    count_attempts: int
    page_size: int
    """Rows asked per page of a batched lookup (``SyncSettings.page_size``)."""
    figures: MemoBatchFigures = field(default_factory=MemoBatchFigures)
    planned: dict[int, MemoBatch] = field(default_factory=dict)
    """The batch of each shipment whose fetch has not taken it yet (a taken one is held by its fetch only)."""
    kept: BatchingOff | None = None
    """The stop an earlier run kept (:data:`STATE`), as the run began."""
    began: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC))
    """When the run began: a kept stop holds in a run that began before its end."""

    def __post_init__(self) -> None:
        kept = self.kept
        if kept is not None and self.began < kept.until:
            self.figures.held_off = (f"since {kept.since.isoformat(timespec='seconds')} (run {kept.run_id}): "
                                     f"{kept.why}; tried again after {kept.until.isoformat(timespec='seconds')}")

    def plan(self, refs: Iterable[tuple[Ref, frozenset[str]]]) -> None:
        """Start the batched lookups of one walk page: the shipments to read whole (document and memo lines) whose
        client and number the walk knows, one lookup per client and :data:`MEMO_BATCH_SIZE` numbers (a client
        with one shipment on the page is looked up alone, as a batch would cost as much)."""
        if self.figures.off is not None or self.figures.held_off is not None:
            return
        by_client: dict[str, dict[str, int]] = {}
        for ref, parts in refs:
            if DOCUMENT in parts and MEMOS in parts and ref.client and ref.shipment_number:
                by_client.setdefault(ref.client, {}).setdefault(ref.shipment_number, ref.shipment_id)
        for client, numbers in by_client.items():
            listed = list(numbers)
            for start in range(0, len(listed), MEMO_BATCH_SIZE):
                chunk = listed[start:start + MEMO_BATCH_SIZE]
                if len(chunk) < 2:
                    continue
                batch = MemoBatch(self, client, chunk)
                for number in chunk:
                    self.planned[numbers[number]] = batch

    def batch_of(self, shipment_id: int) -> MemoBatch | None:
        """The batch planned for the shipment (once: a second fetch of it looks up alone)."""
        return self.planned.pop(shipment_id, None)

    async def read(self, client: str, numbers: Sequence[str]) -> dict[str, Lines] | None:
        """Every line of ``client``'s ``numbers`` by number (checked against ``X-Row-Count``); None when the lookup
        failed or held a line it cannot place. A refusal stops batching for the run."""
        what = f"batched memo lookup CLIENT = {client} AND SHIPMENT_NUMBER IN ({len(numbers)} numbers)"
        try:
            lines = await read_complete(lambda: self.source.memo_pages(client, numbers, self.page_size), what,
                                        self.count_attempts, count_required=True)
        except BadRequestError as exc:
            self.figures.failed += 1
            self.give_up(f"the service refused the batched memo lookup ({one_line(str(exc))})")
            return None
        except Exception:  # each shipment is then looked up alone, where a failure is its own
            self.figures.failed += 1
            return None
        finally:
            self.figures.lookups += 1
        by_number = split_by_number(lines, client, numbers)
        if by_number is None:
            self.figures.failed += 1
        return by_number

    async def lines_for(self, batch: MemoBatch, asked: Ref, told: Ref, document: Any) -> Lines | None:
        """The shipment's memo lines from ``batch`` when its document (``told``: what the document says of it)
        lists exactly their ids, else None (look it up alone)."""
        expected = document_memo_ids(document)
        same = (told.client, told.shipment_number) == (asked.client, asked.shipment_number)
        share = await batch.share(told.shipment_number) if expected is not None and same and told.shipment_number \
            else None
        if expected is not None and share is not None and sorted_ids(share) == expected:
            self.figures.taken += 1
            self.figures.agreed_with_lines += bool(share)
            return share
        self.figures.alone += 1
        if expected is not None and share is not None:
            self.figures.disagreed += 1
            agreed = self.figures.agreed_with_lines
            if self.figures.disagreed >= DISAGREEMENTS_BEFORE_GIVING_UP and self.figures.disagreed > agreed:
                self.give_up(f"{self.figures.disagreed} shipments' documents listed other memo lines than the "
                             f"batched lookup answered (against {agreed} that agreed)")
        return None

    def give_up(self, why: str) -> None:
        """No more batches in this run (those already made are still checked and taken)."""
        if self.figures.off is None:
            self.figures.off = why

    def kept_after(self, run_id: str) -> BatchingOff | None:
        """The stop to keep once the run is over: its own, the earlier one while it holds or while a batch tried
        again has not been read yet (no shipment to batch, or each failed), else none (batching is on)."""
        if self.figures.off is not None:
            return BatchingOff(self.began, self.figures.off, run_id)
        if self.figures.held_off is not None or self.figures.lookups == self.figures.failed:
            return self.kept
        return None

    def close(self) -> None:
        """Cancel the lookups no fetch took (a run that ended early)."""
        for batch in set(self.planned.values()):
            batch.cancel()
        self.planned.clear()
