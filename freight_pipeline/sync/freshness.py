"""Events, legs and memo lines a service changes without moving the shipment's last-modified instant.

The walk reads what changed by the shipment's last-modified instant (``changes``). The spec says events
"may be changed by hand or by background processes" and never that such a change moves the shipment's
stamp (assumption A37): a carrier's status feed moving an estimated arrival, a schedule feed moving a
vessel's or a flight's, are exactly such changes. So the shipments stream, after its walk, retries and
reconcile:

* **samples** every run: re-reads every part of ``freshness_sample`` open shipments held but their
  document (:data:`SAMPLED`: events, the legs of their mode, memo lines), those whose events were read
  longest ago (a rotating sample), and writes only what differs from the rows held
  (``Writes.apply_batch(compare=True)``); the document of a shipment whose legs are read is read with them (its
  ``carriage_legs`` hold a copy: ``Part.copied_in``, :func:`reread_parts`). Neither reads a shipment whose document
  waits in the retry queue (its retry reads it whole). A difference shows that the service changes them
  without moving the stamp: the first run that finds one says so, once (its line, ``status``, the run log and
  the WARN check ``no_service_notices``), and records it in ``freight_meta.sync_state`` (entry :data:`STATE`);
* **re-reads on a rolling basis** while ``events_refresh`` is ``on``, or ``auto`` and a sample found such
  changes: the open shipments whose events were read :data:`DUE_SHARE` of ``events_max_age`` ago or
  longer, nearest upcoming estimate first (by the service's clock: the run's ceiling), within a request
  budget (``events_refresh_share`` of the run's other requests, at least :data:`MIN_REFRESH_REQUESTS`),
  their legs and memo lines too once a sample found those changed. What differs is written like any other change:
  the rows, a history version as of when the run noticed it, the marts' changed shipments.

When each shipment's events were last read is ``freight_meta.raw_parts.fetched_at`` (every read keeps its
answer raw, an unchanged one too): ``status`` shows the oldest among open shipments, and the WARN check
``events_within_max_age`` fails when it is older than ``events_max_age`` while the rolling re-read is on.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from freight_pipeline.sync.parts import AIR_LEGS, DETAIL_PARTS, DOCUMENT, EVENTS, MEMOS, PART_BY_STREAM, SEA_LEGS, Ref
from freight_pipeline.sync.settings import SyncSettings
from freight_pipeline.warehouse.store import Warehouse

STATE = "events_unstamped"
"""``sync_state`` entry: whether a sample found changes without a moved stamp, and the rolling re-read's bound."""
MIN_REFRESH_REQUESTS = 200
"""The rolling re-read may always spend this many requests a run (a small run's share would starve it)."""
DUE_SHARE = 0.75
"""An open shipment's events are re-read once this share of ``events_max_age`` has passed since they were read."""
SAMPLED: tuple[str, ...] = tuple(part.stream for part in DETAIL_PARTS)
"""The parts the sample reads, in the order a notice names them: every part but the document (read again only
where a part it holds a copy of differed)."""
WHAT = {EVENTS: "events", AIR_LEGS: "air legs", SEA_LEGS: "sea legs", MEMOS: "memo lines"}
"""How a notice names each sampled part."""


@dataclass(frozen=True)
class Unstamped:
    """What the runs know of the service's unstamped changes (the :data:`STATE` entry)."""

    found_run_id: str | None = None
    """The run whose sample first found one (None: none found yet)."""
    found_at: str | None = None
    parts: tuple[str, ...] = ()
    """The parts found changed without a moved stamp (``shipment_events``, ``sea_main_carriage_legs``, ...)."""

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
        """The parts the rolling re-read reads: the events, and each other part once it or a part of its kind
        (:func:`with_kin`) was found changed unstamped."""
        return with_kin({EVENTS, *(part for part in self.parts if part in SAMPLED)})


def with_kin(streams: Collection[str]) -> frozenset[str]:
    """``streams`` and the parts of the same kind: those the document holds at the same place (``Part.embedded``:
    the air and the sea legs, each the main carriage's legs of its mode). A sample that found one mode's legs
    changed unstamped says how the service keeps legs, whichever mode the shipments it came to had."""
    places = {PART_BY_STREAM[stream].embedded for stream in streams} - {()}
    return frozenset({*streams, *(part.stream for part in DETAIL_PARTS if part.embedded in places)})


def reread_parts(ref: Ref, parts: frozenset[str]) -> frozenset[str]:
    """What a re-read of ``parts`` reads of the shipment ``ref``: ``parts``, and its document with them where one
    of them that applies to it has a copy there (``Part.copied_in``: the legs of its mode), so that the copy changes
    in the same write as the part (one write apart, a run ended between them would leave it stale for good)."""
    copied = any(PART_BY_STREAM[stream].copied_in and PART_BY_STREAM[stream].applies(ref) for stream in parts)
    return parts | {DOCUMENT} if copied else parts


def requests_of(ref: Ref, parts: frozenset[str]) -> int:
    """The requests a re-read of ``parts`` of the shipment ``ref`` makes (:func:`reread_parts`): one a part that
    applies to it (the legs of its mode only)."""
    return sum(PART_BY_STREAM[stream].applies(ref) for stream in reread_parts(ref, parts))


def requests_each(parts: frozenset[str]) -> int:
    """The requests a re-read of ``parts`` makes of one shipment at most (:func:`requests_of`, the mode that has
    the most)."""
    modes = {part.mode for part in DETAIL_PARTS}
    return max(requests_of(Ref(0, mode_of_transport=mode), parts) for mode in modes)


def _ref(row: Mapping[str, Any]) -> Ref:
    return Ref(int(row["shipment_id"]), row.get("client"), row.get("shipment_number"), row.get("mode_of_transport"))


def budget(settings: SyncSettings, other_requests: int) -> int:
    """The requests the rolling re-read may spend in a run whose other requests were ``other_requests``."""
    return max(MIN_REFRESH_REQUESTS, int(settings.events_refresh_share * other_requests))


def sample(warehouse: Warehouse, settings: SyncSettings, exclude: Collection[int] = ()) -> list[Ref]:
    """The open shipments whose events were read longest ago, ``freshness_sample`` of them, but ``exclude``
    (shipments the run wrote: read just now, so they come up last anyway)."""
    if not settings.freshness_sample:
        return []
    rows = warehouse.reads.open_shipments_by_part_age(EVENTS, settings.freshness_sample)
    return [_ref(r) for r in rows if int(r["shipment_id"]) not in exclude]


def due(warehouse: Warehouse, settings: SyncSettings, known: Unstamped, *, now: dt.datetime,
        service_now: dt.datetime | None, other_requests: int, exclude: Collection[int] = ()) -> list[Ref]:
    """The rolling re-read's shipments of this run (none while it is off): the open ones whose events were
    read :data:`DUE_SHARE` of ``events_max_age`` ago or longer, nearest upcoming estimate first (after
    ``service_now``, the service's clock), as many as the budget's requests read (:func:`budget`; each shipment
    costs what :func:`requests_of` says of its mode), but ``exclude``."""
    if not known.rolling(settings) or service_now is None:
        return []
    left, parts = budget(settings, other_requests), known.rolling_parts()
    rows = warehouse.reads.open_shipments_by_part_age(
        EVENTS, left + len(exclude), read_before=now - settings.events_max_age * DUE_SHARE,
        upcoming_after=service_now)
    chosen = []
    for ref in (_ref(r) for r in rows if int(r["shipment_id"]) not in exclude):
        left -= requests_of(ref, parts)
        if left < 0:
            break
        chosen.append(ref)
    return chosen


def found_notice(differed: Mapping[str, int], sampled: int, settings: SyncSettings) -> str:
    """``the service changes events without moving last-modified (3 of 20 sampled); re-reading ...``."""
    found = [part for part in SAMPLED if differed.get(part)]
    what = parts_named(found)
    shipments = max(differed.values())
    if settings.events_refresh == "off":
        then = "not re-read: FREIGHT_EVENTS_REFRESH=off"
    else:
        every = settings.events_max_age * DUE_SHARE
        rolling = Unstamped(parts=tuple(found)).rolling_parts()
        reread = parts_named(rolling)
        then = (f"re-reading open shipments' {reread} every {_duration(every)}, each within "
                f"{_duration(settings.events_max_age)} (FREIGHT_EVENTS_MAX_AGE_MINUTES)")
    return (f"the service changes {what} without moving last-modified ({shipments} of {sampled} sampled); "
            f"{then}")


def parts_named(parts: Collection[str]) -> str:
    """``events``, ``events and memo lines``, ``events, sea legs and memo lines``: the sampled ``parts`` in
    :data:`SAMPLED`'s order (another stream by its name, after them)."""
    names = [WHAT[part] for part in SAMPLED if part in parts] + sorted({*parts} - {*SAMPLED}) or [""]
    return names[0] if len(names) <= 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _duration(span: dt.timedelta) -> str:
    minutes = int(span.total_seconds() // 60)
    hours, rest = divmod(minutes, 60)
    if not hours:
        return f"{rest} minutes"
    return f"{hours} hours" + (f" {rest} minutes" if rest else "")
