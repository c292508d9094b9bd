"""Fetching the parts of one shipment together: one round of concurrent requests per shipment.

A :class:`Work` names a shipment and the parts to read. Its document, events, the legs of its mode
and its memo lines are requested at once (the lookup already tells its mode, client and number; the memo
lines come from a batched lookup of its walk page instead where one was made and its document agrees with it:
``memo_batch``);
only when the document says otherwise than the lookup did (the shipment changed in between) are
the affected parts asked again for what the document says. Each part's outcome is its answer,
:data:`GONE` (404), :data:`NOT_APPLICABLE` (nothing to ask), or the record's :class:`RecordFailure`;
what is not a record's fault (``isolation``) raises and cancels the rest (``tasks.run_all``).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from freight_pipeline.client._core import HeldBody, decoded
from freight_pipeline.sync.cursor import ShipmentKey, is_shipment
from freight_pipeline.sync.isolation import RecordFailure, record_failure
from freight_pipeline.sync.memo_batch import MemoBatches
from freight_pipeline.sync.parts import ALL_PARTS, DETAIL_PARTS, DOCUMENT, MEMOS, PART_BY_STREAM, PARTS, Part, Ref
from freight_pipeline.sync.settings import SyncSettings
from freight_pipeline.sync.source import ShipmentGone, SourceAPI
from freight_pipeline.sync.tasks import run_all


class Outcome(enum.Enum):
    GONE = "gone"
    """The service answered 404: the shipment was deleted."""
    NOT_APPLICABLE = "not applicable"
    """Nothing to ask (the sea legs of an AIR shipment): the part has no rows."""


GONE = Outcome.GONE
NOT_APPLICABLE = Outcome.NOT_APPLICABLE
Answer = Any | RecordFailure | Outcome


@dataclass(frozen=True)
class Work:
    """One shipment to read: which parts, and where it stands in the change walk."""

    ref: Ref
    parts: frozenset[str] = ALL_PARTS
    key: ShipmentKey | None = None
    """Its position in the change walk (None: a retry or a reconcile fetch, which moves no cursor)."""
    retry: bool = False
    """A record already waiting in the retry queue: its failure does not count towards the breaker."""

    @property
    def shipment_id(self) -> int:
        return self.ref.shipment_id


@dataclass
class Bundle:
    """What came back for one :class:`Work`: an answer per part, for the ref that was asked last."""

    work: Work
    ref: Ref
    answers: dict[str, Answer] = field(default_factory=dict)

    def decoded(self) -> Bundle:
        """This bundle with every answer held as its body (``HeldBody``) decoded (the same bundle when none is
        held)."""
        if not any(type(answer) is HeldBody for answer in self.answers.values()):
            return self
        return Bundle(self.work, self.ref, {stream: decoded(answer) for stream, answer in self.answers.items()})


async def _answer(part: Part, source: SourceAPI, ref: Ref, settings: SyncSettings) -> Answer:
    """One part's answer; a document's 404 is confirmed by the lookup (:func:`_listed`), another part's judged with
    the document's answer (:func:`_part_not_found`)."""
    if not part.applies(ref):
        return NOT_APPLICABLE
    try:
        return await part.read(source, ref, settings)
    except ShipmentGone:
        if part.stream != DOCUMENT:
            return GONE
        listed = await _listed(source, ref.shipment_id)
        if listed is True:  # a permission on that record missing, a node that has not got it yet
            return RecordFailure(f"not found (404) at retrieve, yet the shipment lookup still lists shipment "
                                 f"{ref.shipment_id}: not deleted (a permission on the record, or a node that has not "
                                 "got it yet)", part.request(ref), 404)
        return GONE if listed is False else listed
    except Exception as exc:
        failure = record_failure(exc)
        if failure is None:
            raise
        return failure


async def _listed(source: SourceAPI, shipment_id: int) -> bool | RecordFailure:
    """Whether the shipment lookup still lists the shipment whose document or part answered 404 (False: deleted;
    True: it waits in the retry queue instead of being deleted here and forgotten by the walk); the lookup's own
    failure as the record's."""
    try:
        found = await source.lookup_shipments([{"key": "ID", "match_mode": "EQUALS", "value": str(shipment_id)}],
                                              ["ID"], ["ASC"], 1)
    except Exception as exc:
        failure = record_failure(exc)
        if failure is None:
            raise
        return failure
    return any(is_shipment(item, shipment_id) for item in found.items)


async def _part_not_found(part: Part, source: SourceAPI, ref: Ref, document: Any) -> Answer:
    """A part's 404 while the shipment's document, read with it, loaded. :data:`GONE` only when the lookup no longer
    lists the shipment either (deleted meanwhile). Else no deletion: the spec's "unless no data exists" when the
    document holds none of the part (an empty answer), or a part the service would not give now (a permission, a
    node behind): the record's failure, read again with its rows kept."""
    listed = await _listed(source, ref.shipment_id)
    if listed is not True:
        return GONE if listed is False else listed
    held = part.held_by(document.decoded() if isinstance(document, HeldBody) else document)
    if not held:
        return []
    return RecordFailure(f"not found (404) at {part.stream}, yet the shipment is listed and its document, read with "
                         f"it, holds {held}: not deleted (a permission on the part, or a node behind); read again",
                         part.request(ref), 404)


async def _answers(parts: Iterable[Part], source: SourceAPI, ref: Ref, settings: SyncSettings) -> dict[str, Answer]:
    chosen = list(parts)
    found = await run_all(_answer(part, source, ref, settings) for part in chosen)
    return {part.stream: answer for part, answer in zip(chosen, found, strict=True)}


async def fetch_bundle(
    source: SourceAPI, work: Work, settings: SyncSettings, memos: MemoBatches | None = None
) -> Bundle:
    """Every part of ``work``, requested concurrently (the client bounds requests in flight); its memo lines from
    the batched lookup ``memos`` planned for it when its document agrees (``memo_batch``), else asked alone once
    the document is in. A document's 404 is :data:`GONE` only when the lookup no longer lists the shipment either;
    another part's, while the document loaded, as :func:`_part_not_found` says."""
    bundle = Bundle(work, work.ref)
    if not work.parts:
        return bundle
    batch = memos.batch_of(work.shipment_id) if memos is not None and {DOCUMENT, MEMOS} <= work.parts else None
    bundle.answers = await _answers((p for p in PARTS if p.stream in work.parts and not (batch and p.stream == MEMOS)),
                                    source, work.ref, settings)
    document = bundle.answers.get(DOCUMENT)
    top = document.top if isinstance(document, HeldBody) else document
    if isinstance(top, dict):
        told = Ref.of(top, work.shipment_id).or_else(work.ref)
        again = [PART_BY_STREAM[s] for s in bundle.answers if PART_BY_STREAM[s].with_mode_change(work.ref, told)]
        bundle.ref = told
        if again:
            bundle.answers.update(await _answers(again, source, bundle.ref, settings))
        for part in DETAIL_PARTS:
            if bundle.answers.get(part.stream) is GONE:  # the document, read with it, loaded
                bundle.answers[part.stream] = await _part_not_found(part, source, bundle.ref, document)
    if batch is not None and memos is not None:  # the document is in: its memo lines from the batch, or alone
        lines = await memos.lines_for(batch, work.ref, bundle.ref, top)
        bundle.answers[MEMOS] = (lines if lines is not None
                                 else (await _answers([PART_BY_STREAM[MEMOS]], source, bundle.ref, settings))[MEMOS])
    return bundle
