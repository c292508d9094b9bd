"""Events (and memo lines) a service changes without moving the shipment's last-modified instant.

The walk reads what changed by the shipment's last-modified instant (``changes``). The spec says events
"may be changed by hand or by background processes" and never that such a change moves the shipment's
stamp (assumption A37): a carrier's status feed moving an estimated arrival is exactly such a change. So
the shipments stream, after its walk, retries and reconcile:

* **samples** every run: re-reads the events and memo lines of ``freshness_sample`` open shipments held,
  those read longest ago (by the older of the two reads: a rotating sample), and writes only what differs from the
  rows held
  (``Writes.apply_batch(compare=True)``). A difference shows that the service changes them without moving
  the stamp: the first run that finds one says so, once (its line, ``status``, the run log and the WARN
  check ``no_service_notices``), and records it in ``freight_meta.sync_state`` (entry :data:`STATE`);
* **re-reads on a rolling basis** while ``events_refresh`` is ``on``, or ``auto`` and a sample found such
  changes: the open shipments whose events were read :data:`DUE_SHARE` of ``events_max_age`` ago or
  longer, nearest upcoming estimate first (by the service's clock: the run's ceiling), within a request
  budget (``events_refresh_share`` of the run's other requests, at least :data:`MIN_REFRESH_REQUESTS`),
  their memo lines too once a sample found those changed. What differs is written like any other change:
  the rows, a history version as of when the run noticed it, the marts' changed shipments.

A re-read answer that lost fields the held answer had (:func:`reshaped`: a release renamed, dropped or retyped
them, which the run's shape comparison names: ``sync.drift``) differs by its shape, not by a change the stamp
missed: its rows are written as they now read, but it is not counted as differing (the sample's figures count it
apart), so a release alone never says the service changes events without moving the stamp, nor starts the rolling
re-read. Once written, the next reads of it compare answers of one shape again.

When each shipment's events were last read is ``freight_meta.raw_parts.fetched_at`` (every read keeps its
answer raw, an unchanged one too): ``status`` shows the oldest among open shipments, and the WARN check
``events_within_max_age`` fails when it is older than ``events_max_age`` while the rolling re-read is on.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from freight_pipeline.normalize.shapes import fields_lost
from freight_pipeline.sync.assemble import unpacked
from freight_pipeline.sync.parts import EVENTS, MEMOS, Ref
from freight_pipeline.sync.settings import SyncSettings
from freight_pipeline.warehouse.records import RawPart
from freight_pipeline.warehouse.store import Warehouse

STATE = "events_unstamped"
"""``sync_state`` entry: whether a sample found changes without a moved stamp, and the rolling re-read's bound."""
MIN_REFRESH_REQUESTS = 200
"""The rolling re-read may always spend this many requests a run (a small run's share would starve it)."""
DUE_SHARE = 0.75
"""An open shipment's events are re-read once this share of ``events_max_age`` has passed since they were read."""
WHAT = {EVENTS: "events", MEMOS: "memo lines"}
"""The parts the sample reads, each as a notice names it, in the order it names them."""
SAMPLED_PARTS: frozenset[str] = frozenset(WHAT)


@dataclass(frozen=True)
class Unstamped:
    """What the runs know of the service's unstamped changes (the :data:`STATE` entry)."""

    found_run_id: str | None = None
    """The run whose sample first found one (None: none found yet)."""
    found_at: str | None = None
    parts: tuple[str, ...] = ()
    """The parts found changed without a moved stamp (``shipment_events``, ``shipment_memos``)."""

    @classmethod
    def parse(cls, text: str | None) -> Unstamped:
        if not text:
            return cls()
        try:
            data = json.loads(text)
            return cls(data.get("found_run_id"), data.get("found_at"), tuple(data.get("parts") or ()))
        except (ValueError, AttributeError, TypeError):
            return cls()

    def text(self, rolling: bool, max_age: dt.timedelta) -> str:
        return json.dumps({"found_run_id": self.found_run_id, "found_at": self.found_at, "parts": list(self.parts),
                           "rolling": rolling, "max_age_minutes": int(max_age.total_seconds() // 60)})

    def rolling(self, settings: SyncSettings) -> bool:
        """Whether the rolling re-read runs under ``settings``."""
        return settings.events_refresh == "on" or (settings.events_refresh == "auto" and bool(self.parts))

    def rolling_parts(self) -> frozenset[str]:
        """The parts the rolling re-read reads: the events, and the memo lines once found changed unstamped."""
        return frozenset({EVENTS, *(part for part in self.parts if part == MEMOS)})


def _ref(row: Mapping[str, Any]) -> Ref:
    return Ref(int(row["shipment_id"]), row.get("client"), row.get("shipment_number"), row.get("mode_of_transport"))


def budget(settings: SyncSettings, other_requests: int) -> int:
    """The requests the rolling re-read may spend in a run whose other requests were ``other_requests``."""
    return max(MIN_REFRESH_REQUESTS, int(settings.events_refresh_share * other_requests))


def sample(warehouse: Warehouse, settings: SyncSettings, exclude: Collection[int] = ()) -> list[Ref]:
    """The open shipments whose events or memo lines (:data:`SAMPLED_PARTS`) were read longest ago,
    ``freshness_sample`` of them, but ``exclude`` (shipments the run wrote: read just now, so they come up last
    anyway); by the older of the two, which the rolling re-read (events alone until memo lines were found changed)
    leaves behind."""
    if not settings.freshness_sample:
        return []
    rows = warehouse.reads.open_shipments_by_part_age(SAMPLED_PARTS, settings.freshness_sample)
    return [_ref(r) for r in rows if int(r["shipment_id"]) not in exclude]


def due(warehouse: Warehouse, settings: SyncSettings, known: Unstamped, *, now: dt.datetime,
        service_now: dt.datetime | None, other_requests: int, exclude: Collection[int] = ()) -> list[Ref]:
    """The rolling re-read's shipments of this run (none while it is off): the open ones whose parts it reads
    (:meth:`Unstamped.rolling_parts`) were read :data:`DUE_SHARE` of ``events_max_age`` ago or longer, nearest
    upcoming estimate first (after ``service_now``, the service's clock), as many as the budget's requests read
    (:func:`budget`), but ``exclude``."""
    if not known.rolling(settings) or service_now is None:
        return []
    wanted = budget(settings, other_requests) // len(known.rolling_parts())
    rows = warehouse.reads.open_shipments_by_part_age(
        known.rolling_parts(), wanted + len(exclude), read_before=now - settings.events_max_age * DUE_SHARE,
        upcoming_after=service_now)
    return [_ref(r) for r in rows if int(r["shipment_id"]) not in exclude][:wanted]


def reshaped(held: Mapping[tuple[str, int], bytes | None], read: Iterable[RawPart]) -> dict[str, dict[int, list[str]]]:
    """Of the parts ``read`` again, those whose answer lost fields the answer ``held`` (by stream and shipment id, as
    kept in ``raw_parts``) had (``shapes.fields_lost``: a release's rename, drop or retype), by stream and shipment:
    the fields. Their rows differ by the shape of the answer, which says nothing of a change without the stamp."""
    lost: dict[str, dict[int, list[str]]] = {}
    for part, before, after in answered_otherwise(held, read):
        fields = fields_lost(before, after)
        if fields:
            lost.setdefault(part.stream, {})[part.shipment_id] = fields
    return lost


def answered_otherwise(held: Mapping[tuple[str, int], bytes | None],
                       read: Iterable[RawPart]) -> Iterator[tuple[RawPart, Any, Any]]:
    """Of the parts ``read`` again, each answered otherwise than the answer ``held`` (by stream and shipment id, as
    kept in ``raw_parts``; a part with no answer either side aside), with the answer held and the one read decoded."""
    for part in read:
        before = held.get((part.stream, part.shipment_id))
        if before is None or part.answer is None or before == part.answer:
            continue
        yield part, unpacked(before), unpacked(part.answer)


def answered_as_held(held: Mapping[tuple[str, int], bytes | None], read: Iterable[RawPart]) -> dict[str, set[int]]:
    """Of the parts ``read`` again, those answered exactly as the answer ``held`` (by stream and shipment id, as kept
    in ``raw_parts``), by stream: rows of theirs that differ from those held were derived by another mapping (an
    upgrade's, a fix's), which says nothing of a change without the stamp."""
    same: dict[str, set[int]] = {}
    for part in read:
        key = (part.stream, part.shipment_id)
        if key in held and held[key] == part.answer:
            same.setdefault(part.stream, set()).add(part.shipment_id)
    return same


def found_notice(differed: Mapping[str, int], sampled: int, settings: SyncSettings) -> str:
    """``the service changes events without moving last-modified (3 of 20 sampled); re-reading ...``."""
    what = parts_named([part for part in WHAT if differed.get(part)])
    shipments = max(differed.values())
    if settings.events_refresh == "off":
        then = "not re-read: FREIGHT_EVENTS_REFRESH=off"
    else:
        every = settings.events_max_age * DUE_SHARE
        then = (f"re-reading open shipments' {what} every {_duration(every)}, each within "
                f"{_duration(settings.events_max_age)} (FREIGHT_EVENTS_MAX_AGE_MINUTES)")
    return (f"the service changes {what} without moving last-modified ({shipments} of {sampled} sampled); "
            f"{then}")


def parts_named(parts: Collection[str]) -> str:
    """``events``, ``memo lines``, ``events and memo lines``: the parts found changed (:data:`WHAT`'s names; another
    stream by its own, after them)."""
    names = [WHAT[part] for part in WHAT if part in parts] + sorted({*parts} - {*WHAT})
    return " and ".join(names)


def _duration(span: dt.timedelta) -> str:
    minutes = int(span.total_seconds() // 60)
    hours, rest = divmod(minutes, 60)
    if not hours:
        return f"{rest} minutes"
    return f"{hours} hours" + (f" {rest} minutes" if rest else "")
