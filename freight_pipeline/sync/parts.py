"""The parts of a shipment the sync reads, declared once: its document, events, air and sea
main-carriage legs, and memo lines; each with its endpoint (``client.endpoints``), the tables it
fills, how it is normalized and which shipments have it. The shipments stream (``sync.streams``)
reads every part of each changed shipment and writes them together.

Each part is also a *stream name*: the key under which a failed part waits in the retry queue
(``freight_meta.quarantine``) and its unconvertible values are reported (``data_problems``), and
the Dagster asset group of its tables. A part is fetched for a shipment only when it applies (the
air legs of an AIR shipment, the sea legs of a SEA one); where it does not apply its rows are cleared.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from freight_pipeline.client import endpoints as ep
from freight_pipeline.client.endpoints import Endpoint
from freight_pipeline.normalize.converters import code_of, text_or_none
from freight_pipeline.normalize.events import EVENT_SHAPE, normalize_events
from freight_pipeline.normalize.flatten import DOCUMENT_SHAPE, document_value, normalize_shipment
from freight_pipeline.normalize.legs import AIR_LEG_SHAPE, SEA_LEG_SHAPE, normalize_main_carriage
from freight_pipeline.normalize.problems import Problems
from freight_pipeline.normalize.records import MEMO_SHAPE, normalize_memos
from freight_pipeline.normalize.shapes import Shape
from freight_pipeline.normalize.specs.events_memos import SHIPMENT_EVENTS, SHIPMENT_MEMOS
from freight_pipeline.normalize.specs.legs import AIR_MAIN_CARRIAGE_LEGS, SEA_MAIN_CARRIAGE_LEGS
from freight_pipeline.normalize.tables import SHIPMENT_DOCUMENT_TABLES
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
        """The ref of a (base or full) shipment document, its values read as their columns read them (a number sent
        for the shipment number is its text: the memo lookup asks for it); values no column can read are unknown."""
        return cls(shipment_id, *(text_or_none(document_value(shipment, f.name)) for f in fields(cls)[1:]))

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



Fetch = Callable[["Part", SourceAPI, Ref, SyncSettings], Awaitable[Any]]
Normalize = Callable[[Ref, Any, Problems], Rows]


async def by_id(part: Part, source: SourceAPI, ref: Ref, settings: SyncSettings) -> Any:
    """The records the part's per-shipment endpoint answers with (``GET .../{id}/...``)."""
    return await source.get_shipment_records(part.endpoint, ref.shipment_id)


@dataclass(frozen=True)
class Part:
    """One part of a shipment: where it is read, what it fills, and which shipments have it."""

    stream: str
    """Its name: the key of its quarantine entries and data problems, and its Dagster metadata."""
    endpoint: Endpoint
    tables: tuple[str, ...]
    normalize: Normalize
    shape: Shape
    """The fields its records declare (each run compares the fields received with them: ``sync.drift``)."""
    fetch: Fetch = by_id
    mode: str | None = None
    """Only shipments of this mode of transport have the part (None: every shipment); elsewhere its
    rows are cleared and nothing is requested."""
    by_number: bool = False
    """Read by a lookup of the shipment's CLIENT and SHIPMENT_NUMBER (memo lines), not by its id."""
    embedded: tuple[str, ...] = ()
    """Where the shipment's document holds the part's data too (``events``; the main carriage's legs): a 404 of
    the part while the document loads says no data exists when the document holds none (:meth:`held_by`)."""

    def held_by(self, document: Any) -> int:
        """How many records of the part ``document`` (the shipment's, decoded) holds at :attr:`embedded`."""
        value = document
        for key in self.embedded:
            value = value.get(key) if isinstance(value, dict) else None
        return len(value) if isinstance(value, list) else 0

    async def read(self, source: SourceAPI, ref: Ref, settings: SyncSettings) -> Any:
        """The part's answer for one shipment, as received."""
        return await self.fetch(self, source, ref, settings)

    def applies(self, ref: Ref) -> bool:
        """False: the shipment cannot have data here (sea legs of an AIR shipment). Its mode is read as the marts read
        it (``stg_shipments``' ``upper(trim(...))``: ``code_of``): ``"sea "`` is SEA, with sea legs."""
        return self.mode is None or code_of(ref.mode_of_transport) == self.mode

    def request(self, ref: Ref) -> str:
        """The request behind the part's answer, as a quarantine entry shows it."""
        if self.by_number:
            return (f"{self.endpoint.method} {self.endpoint.path} (CLIENT {ref.client}, SHIPMENT_NUMBER "
                    f"{ref.shipment_number})")
        return f"{self.endpoint.method} {self.endpoint.format(id=ref.shipment_id)}"

    def with_mode_change(self, before: Ref, after: Ref) -> bool:
        """Whether an answer fetched for ``before`` is not the answer for ``after`` (the document
        said another mode, client or number than the lookup did): fetch it again."""
        if self.mode is not None:
            return self.applies(before) != self.applies(after)
        if self.by_number:
            return (before.client, before.shipment_number) != (after.client, after.shipment_number)
        return False

    def description(self) -> str:
        """Where its rows come from, for the asset catalog."""
        which = f"each changed {self.mode} shipment" if self.mode else "each changed shipment"
        how = " (CLIENT, SHIPMENT_NUMBER)" if self.by_number else ""
        return f"from {self.endpoint}{how} of {which}"


async def _document(part: Part, source: SourceAPI, ref: Ref, settings: SyncSettings) -> Any:
    return await source.get_shipment(ref.shipment_id)


async def _memos(part: Part, source: SourceAPI, ref: Ref, settings: SyncSettings) -> Any:
    if not ref.client or not ref.shipment_number:
        return []
    client, number = ref.client, ref.shipment_number
    return await read_complete(
        lambda: source.memo_pages(client, [number], settings.page_size),
        f"memo lookup CLIENT = {client} AND SHIPMENT_NUMBER = {number} (shipment {ref.shipment_id})",
        settings.count_attempts,
        count_required=True,
    )


DOCUMENT_PART = Part(
    DOCUMENT, ep.SHIPMENT_RETRIEVE, SHIPMENT_DOCUMENT_TABLES,
    lambda ref, doc, problems: normalize_shipment(doc, problems), DOCUMENT_SHAPE, fetch=_document,
)
MAIN_CARRIAGE_LEGS = ("main_carriage", "carriage_legs")
"""Where a shipment's document holds its main carriage's legs (the spec's Transport object)."""
DETAIL_PARTS: tuple[Part, ...] = (
    Part(EVENTS, ep.SHIPMENT_EVENTS, (SHIPMENT_EVENTS.name,),
         lambda ref, data, problems: normalize_events(ref.shipment_id, data, problems), EVENT_SHAPE,
         embedded=("events",)),
    Part(AIR_LEGS, ep.SHIPMENT_AIR_MAIN_CARRIAGE, (AIR_MAIN_CARRIAGE_LEGS.name,),
         lambda ref, data, problems: normalize_main_carriage(ref.shipment_id, data, "air", problems), AIR_LEG_SHAPE,
         mode="AIR", embedded=MAIN_CARRIAGE_LEGS),
    Part(SEA_LEGS, ep.SHIPMENT_SEA_MAIN_CARRIAGE, (SEA_MAIN_CARRIAGE_LEGS.name,),
         lambda ref, data, problems: normalize_main_carriage(ref.shipment_id, data, "sea", problems), SEA_LEG_SHAPE,
         mode="SEA", embedded=MAIN_CARRIAGE_LEGS),
    Part(MEMOS, ep.MEMO_LOOKUP, (SHIPMENT_MEMOS.name,),
         lambda ref, data, problems: normalize_memos(data, {(ref.client, ref.shipment_number): ref.shipment_id},
                                                     problems),
         MEMO_SHAPE, fetch=_memos, by_number=True),
)
"""Every part but the document, fetched once the document (or the lookup) told the shipment's ref."""
PARTS: tuple[Part, ...] = (DOCUMENT_PART, *DETAIL_PARTS)
PART_BY_STREAM: dict[str, Part] = {part.stream: part for part in PARTS}
ALL_PARTS: frozenset[str] = frozenset(PART_BY_STREAM)
PART_TABLES: tuple[str, ...] = tuple(table for part in PARTS for table in part.tables)
"""Every table the shipments stream writes, document tables first."""
PART_OF_TABLE: dict[str, Part] = {table: part for part in PARTS for table in part.tables}
"""The part that fills each of :data:`PART_TABLES`."""
