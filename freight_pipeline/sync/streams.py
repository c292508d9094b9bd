"""Every sync stream, declared once: its name, what it reads and writes, what it waits for, whether it
can be switched off, and how it runs.

The runner's order and dispatch, the Dagster assets (their tables, descriptions and dependencies),
the warehouse checks, ``table_freshness`` and the tests derive from :data:`STREAMS`. The parts of a
shipment (document, events, legs, memos) that the shipments stream reads are declared in
:mod:`freight_pipeline.sync.parts`; a new per-shipment endpoint is one more ``Part`` there
(docs/adding-a-stream.md).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from freight_pipeline.client import endpoints as ep
from freight_pipeline.client.endpoints import Endpoint
from freight_pipeline.config import CODE_CONVERSIONS_ENV, DOCUMENTS_ENV
from freight_pipeline.normalize.documents import SHIPMENT_DOCUMENTS
from freight_pipeline.normalize.specs.code_conversions import CODE_CONVERSIONS as CODE_CONVERSIONS_TABLE
from freight_pipeline.sync.code_conversions import sync_code_conversions
from freight_pipeline.sync.documents import sync_documents
from freight_pipeline.sync.parts import PART_TABLES, PARTS, Part
from freight_pipeline.sync.progress import Progress
from freight_pipeline.sync.result import StreamResult
from freight_pipeline.sync.settings import SyncSettings
from freight_pipeline.sync.shipments import sync_shipments
from freight_pipeline.sync.source import SourceAPI
from freight_pipeline.warehouse.store import Warehouse

StreamRun = Callable[[SourceAPI, Warehouse, SyncSettings, str, Progress | None], Awaitable[StreamResult]]


class UnknownStream(ValueError):
    pass


@dataclass(frozen=True)
class Switch:
    """How a stream is switched off: a ``SyncSettings`` flag, set from an environment variable."""

    setting: str
    variable: str

    def is_on(self, settings: SyncSettings) -> bool:
        return bool(getattr(settings, self.setting))


@dataclass(frozen=True)
class Stream:
    name: str
    description: str
    """What the stream does, for the asset catalog."""
    tables: tuple[str, ...]
    """The ``freight`` tables it writes (the shipments stream: every part's, document tables first)."""
    endpoints: tuple[Endpoint, ...]
    run: StreamRun
    reads_first: tuple[str, ...] = ()
    """Streams whose tables it reads before it writes: it runs after them."""
    switch: Switch | None = None
    """None: the stream cannot be switched off (the others follow the shipments stream)."""
    parts: tuple[Part, ...] = ()
    """The parts of each shipment it reads (the shipments stream only)."""


SHIPMENTS = Stream(
    name="shipments",
    description="Changed shipments since the cursor (lookup), each read in one pass: its document "
    "(flattened into every embedded table), events, air or sea main-carriage legs and memo lines, "
    "written together with the cursor.",
    tables=PART_TABLES,
    endpoints=(ep.SHIPMENT_LOOKUP, *(part.endpoint for part in PARTS)),
    run=sync_shipments,
    parts=PARTS,
)
CODE_CONVERSIONS = Stream(
    name="code_conversions",
    description="The whole set of EDI code conversions, replaced each run.",
    tables=(CODE_CONVERSIONS_TABLE.name,),
    endpoints=(ep.CODE_CONVERSION_SCROLL,),
    run=sync_code_conversions,
    switch=Switch("code_conversions", CODE_CONVERSIONS_ENV),
)
DOCUMENTS = Stream(
    name="documents",
    description="The E-File documents of the shipments written since the last run (and of every shipment "
    "once a day): E-File lookup by SHIPMENT_ID, references and roles of each file; rows replaced per "
    "shipment when they changed.",
    tables=(SHIPMENT_DOCUMENTS.name,),
    endpoints=(ep.EFILE_LOOKUP, ep.EFILE_RETRIEVE, ep.EFILE_REFERENCES, ep.EFILE_ROLES),
    run=sync_documents,
    reads_first=(SHIPMENTS.name,),
    switch=Switch("documents", DOCUMENTS_ENV),
)

STREAMS: tuple[Stream, ...] = (SHIPMENTS, CODE_CONVERSIONS, DOCUMENTS)
"""Every stream, in the order a run executes them: each after the streams it reads first, and the
documents stream last, so that its failure (an account without E-File permissions, say) leaves the
other streams' work done."""
STREAM_NAMES: tuple[str, ...] = tuple(stream.name for stream in STREAMS)
STREAM_BY_NAME: Mapping[str, Stream] = {stream.name: stream for stream in STREAMS}
TABLE_WRITER: Mapping[str, Stream] = {table: stream for stream in STREAMS for table in stream.tables}
"""Each ``freight`` table's stream: the one whose runs write it (and keep its ``table_freshness``)."""
RECORD_SOURCES: Mapping[str, tuple[str, ...]] = {
    **{part.stream: part.tables for part in PARTS},
    **{stream.name: stream.tables for stream in STREAMS if not stream.parts},
}
"""Each source of records and the tables it fills: a part of a shipment (``shipments``,
``shipment_events``, ...) or a stream of its own (``code_conversions``, ``documents``). Its name is
the ``stream`` of its quarantine entries, rejected records and data problems."""
TABLE_SOURCE: Mapping[str, str] = {table: source for source, tables in RECORD_SOURCES.items() for table in tables}


def runs_of(source: str) -> str:
    """The stream whose runs read the record source ``source`` (``shipment_events``: ``shipments``), in whose
    ``sync_runs`` rows its rejected records and problems are counted."""
    return TABLE_WRITER[RECORD_SOURCES[source][0]].name


def stream_step(stream: str) -> str:
    """The step of a stream in a run (``job.run``; also its Dagster asset's name and step key)."""
    return f"sync_{stream}"


STREAM_OF_STEP = {stream_step(stream): stream for stream in STREAM_NAMES}
"""A stream's step -> the stream."""


def stream_named(name: str) -> Stream:
    try:
        return STREAM_BY_NAME[name]
    except KeyError:
        raise UnknownStream(f"unknown stream {name!r}; streams are {', '.join(STREAM_NAMES)}") from None
