"""The parts of a shipment the sync reads, declared once: its document, events, air and sea
main-carriage legs, and memo lines; each with its endpoint, the tables it fills and how it is
normalized.

Each part is also a *stream name*: the key under which a failed part waits in the retry queue
(``freight_meta.quarantine``) and its unconvertible values are reported (``data_problems``), and
the Dagster asset group of its tables. A part is fetched for a shipment only when it applies (the
air legs of an AIR shipment, the sea legs of a SEA one); where it does not apply its rows are cleared.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from freight_pipeline.normalize import (
    STREAM_TABLES,
    Problems,
    normalize_events,
    normalize_main_carriage,
    normalize_memos,
    normalize_shipment,
)
from freight_pipeline.sync.changes import read_complete
from freight_pipeline.sync.settings import SyncSettings
from freight_pipeline.sync.source import SourceAPI

Rows = dict[str, list[dict[str, Any]]]

DOCUMENT = "shipments"
EVENTS = "shipment_events"
AIR_LEGS = "air_main_carriage_legs"
SEA_LEGS = "sea_main_carriage_legs"
MEMOS = "shipment_memos"


@dataclass(frozen=True)
class Ref:
    """What fetching the parts of one shipment needs: its id, and for the memo lookup and the choice
    of legs, its client, number and mode (from the lookup, the document, or a retry's context)."""

    shipment_id: int
    client: str | None = None
    shipment_number: str | None = None
    mode_of_transport: str | None = None

    @classmethod
    def of(cls, shipment: Mapping[str, Any], shipment_id: int) -> Ref:
        """The ref of a (base or full) shipment document; values that are not text are unknown."""
        return cls(shipment_id, _text(shipment.get("client")), _text(shipment.get("shipment_number")),
                   _text(shipment.get("mode_of_transport")))

    def or_else(self, other: Ref) -> Ref:
        """This ref, with what it does not know (an unreadable value) taken from ``other``."""
        return Ref(self.shipment_id, self.client or other.client, self.shipment_number or other.shipment_number,
                   self.mode_of_transport or other.mode_of_transport)

    def context(self) -> dict[str, Any]:
        """What a retry needs besides the id (kept with a quarantine entry)."""
        return {"client": self.client, "shipment_number": self.shipment_number,
                "mode_of_transport": self.mode_of_transport}

    @classmethod
    def from_context(cls, shipment_id: int, context: Mapping[str, Any] | None) -> Ref:
        return cls.of(context or {}, shipment_id)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


Fetch = Callable[[SourceAPI, Ref, SyncSettings], Awaitable[Any]]
Normalize = Callable[[Ref, Any, Problems], Rows]


@dataclass(frozen=True)
class Part:
    stream: str
    tables: tuple[str, ...]
    fetch: Fetch
    normalize: Normalize
    request: Callable[[Ref], str]
    """The request behind the part's answer, as a quarantine entry shows it."""
    applies: Callable[[Ref], bool] = lambda ref: True
    """False: the shipment cannot have data here (sea legs of an AIR shipment): rows cleared, no request."""

    def with_mode_change(self, before: Ref, after: Ref) -> bool:
        """Whether an answer fetched for ``before`` is not the answer for ``after`` (the document
        said another mode, client or number than the lookup did): fetch it again."""
        if self.stream in (AIR_LEGS, SEA_LEGS):
            return self.applies(before) != self.applies(after)
        if self.stream == MEMOS:
            return (before.client, before.shipment_number) != (after.client, after.shipment_number)
        return False


async def _document(source: SourceAPI, ref: Ref, settings: SyncSettings) -> Any:
    return await source.get_shipment(ref.shipment_id)


async def _events(source: SourceAPI, ref: Ref, settings: SyncSettings) -> Any:
    return await source.get_events(ref.shipment_id)


async def _air(source: SourceAPI, ref: Ref, settings: SyncSettings) -> Any:
    return await source.get_air_legs(ref.shipment_id)


async def _sea(source: SourceAPI, ref: Ref, settings: SyncSettings) -> Any:
    return await source.get_sea_legs(ref.shipment_id)


async def _memos(source: SourceAPI, ref: Ref, settings: SyncSettings) -> Any:
    if not ref.client or not ref.shipment_number:
        return []
    client, number = ref.client, ref.shipment_number
    return await read_complete(
        lambda: source.memo_pages(client, number),
        f"memo lookup CLIENT = {client} AND SHIPMENT_NUMBER = {number} (shipment {ref.shipment_id})",
        settings.count_attempts,
        count_required=True,
    )


def _get(path: str) -> Callable[[Ref], str]:
    return lambda ref: f"GET /service/shipment/{ref.shipment_id}{path}"


DOCUMENT_PART = Part(
    DOCUMENT, STREAM_TABLES[DOCUMENT], _document, lambda ref, doc, problems: normalize_shipment(doc, problems), _get("")
)
DETAIL_PARTS: tuple[Part, ...] = (
    Part(EVENTS, STREAM_TABLES[EVENTS], _events,
         lambda ref, data, problems: normalize_events(ref.shipment_id, data, problems), _get("/events")),
    Part(AIR_LEGS, STREAM_TABLES[AIR_LEGS], _air,
         lambda ref, data, problems: normalize_main_carriage(ref.shipment_id, data, "air", problems),
         _get("/airmaincarriage"), applies=lambda ref: ref.mode_of_transport == "AIR"),
    Part(SEA_LEGS, STREAM_TABLES[SEA_LEGS], _sea,
         lambda ref, data, problems: normalize_main_carriage(ref.shipment_id, data, "sea", problems),
         _get("/seamaincarriage"), applies=lambda ref: ref.mode_of_transport == "SEA"),
    Part(MEMOS, STREAM_TABLES[MEMOS], _memos,
         lambda ref, data, problems: normalize_memos(
             data, {(ref.client, ref.shipment_number): ref.shipment_id}, problems),
         lambda ref: f"POST /service/shipment/memo/lookup (CLIENT {ref.client}, SHIPMENT_NUMBER "
                     f"{ref.shipment_number})"),
)
PARTS: tuple[Part, ...] = (DOCUMENT_PART, *DETAIL_PARTS)
PART_BY_STREAM: dict[str, Part] = {part.stream: part for part in PARTS}
ALL_PARTS: frozenset[str] = frozenset(PART_BY_STREAM)
PART_TABLES: tuple[str, ...] = tuple(table for part in PARTS for table in part.tables)
"""Every table the shipments stream writes, document tables first."""
