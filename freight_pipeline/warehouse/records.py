"""Value types the warehouse accepts and returns."""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

if TYPE_CHECKING:
    import pyarrow as pa


class RawDocument(NamedTuple):
    """A shipment document as received, kept in ``freight_meta.raw_shipments``."""

    shipment_id: int
    document: str
    """JSON text."""
    fetched_at: dt.datetime
    last_modified_at: dt.datetime | None
    last_modified_key: str | None = None
    """The last-modified stamp: the service's wall-clock second (``YYYY-MM-DD HH:MM:SS``) with its UTC
    offset when sent (``sync.cursor.ShipmentKey.stamp``); compared as an instant (``warehouse.stamps``)."""
    fetched_ceiling: str | None = None
    """The ceiling (newest last-modified stamp the service held) of the run that fetched it. A copy
    whose ``last_modified_key`` is an earlier instant was fetched after its last change: while the
    service still shows that last-modified instant, the copy is current."""
    content_hash: str | None = None
    """A hash of everything read for the shipment in one pass (document, events, legs, memos); None
    when not all of it loaded. Writing the same content again is no change for the marts."""


RawRecord = tuple[int, str, dict[str, bytes | None]]
"""A shipment held raw: its id, raw document (JSON text) and raw parts (stream -> compressed answer)."""


class RunMapping(NamedTuple):
    """A ``sync_runs`` row's stream, instants, status and the mapping it names (``Reads.run_mappings``)."""

    stream: str
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    status: str | None
    mapping: str | None


class RawPosition(NamedTuple):
    """Where a shipment stands in the order a rebuild reads the raw in (:meth:`Reads.raw_records`)."""

    fetched_at: dt.datetime
    """Its raw document's ``fetched_at`` (:data:`EARLIEST_FETCH` where none is recorded)."""
    shipment_id: int


EARLIEST_FETCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
"""The ``fetched_at`` a raw document without one is ordered by (before every other; a year every time zone can
show)."""


class RawBatch(NamedTuple):
    """The raw records of a batch of shipments, and the position of its last (None: no record)."""

    records: list[RawRecord]
    last: RawPosition | None


class RawPart(NamedTuple):
    """A part of a shipment as received (events, legs, memo lines), kept in ``freight_meta.raw_parts``."""

    stream: str
    shipment_id: int
    answer: bytes | None
    """The answer's JSON text, zlib-compressed; None: the part does not apply (or is gone): no rows."""
    answer_bytes: int | None
    fetched_at: dt.datetime


class Reject(NamedTuple):
    """A record that could not be normalized, kept in ``freight_meta.rejected_records``."""

    stream: str
    source_key: str
    payload: str | None
    """JSON text of the raw record (non-JSON text is stored as a JSON string), or None."""
    reason: str


class Quarantined(NamedTuple):
    """A record that failed after the client's retries, for ``freight_meta.quarantine``."""

    stream: str
    record_key: str
    shipment_id: int | None
    reason: str
    request: str | None = None
    status_code: int | None = None
    response_excerpt: str | None = None
    context: str | None = None
    """JSON text: what a retry needs besides the key."""


class DueRetry(NamedTuple):
    """An entry of the retry queue whose next attempt is due (``Reads.due_retries``): what a retry needs."""

    stream: str
    record_key: str
    shipment_id: int | None
    context: str | None
    """JSON text, as :class:`Quarantined` gave it."""


class DataProblem(NamedTuple):
    """A value of a loaded record that could not be converted, for ``freight_meta.data_problems``."""

    stream: str
    record_key: str
    shipment_id: int | None
    json_path: str
    raw_value: str | None
    """JSON text."""
    reason: str


@dataclass(frozen=True)
class Backoff:
    """When a quarantined record is retried: ``base`` after its first failure, doubling up to ``cap``."""

    base: dt.timedelta
    cap: dt.timedelta

    def delay(self, attempts: int) -> dt.timedelta:
        if attempts <= 1:
            return min(self.base, self.cap)
        return min(self.base * 2 ** min(attempts - 1, 40), self.cap)


DEFAULT_BACKOFF = Backoff(dt.timedelta(minutes=10), dt.timedelta(hours=24))
"""The retry queue's wait after a failure when the caller gives none: 10 minutes, doubling, at most a day."""


@dataclass
class BatchWrite:
    """Everything one batch writes, in ONE transaction (``Writes.apply_batch``).

    ``replaced``: per table, the shipments whose rows in it are replaced by the rows of ``tables``
    (a shipment with no rows there loses its old ones). ``loaded``: per stream, the records that
    loaded, which leave its retry queue and whose old data problems go (``problems`` brings the new
    ones). ``deleted_ids``: shipments gone from the source, removed from every per-shipment table
    and every ``freight_meta`` table that holds shipments.
    """

    tables: dict[str, Any] = field(default_factory=dict)
    """Arrow tables by table name."""
    replaced: dict[str, list[int]] = field(default_factory=dict)
    loaded: dict[str, list[int]] = field(default_factory=dict)
    settled: dict[str, list[int]] = field(default_factory=dict)
    """Per stream, records read again with nothing new: they leave its retry queue (their old data
    problems go) like ``loaded`` ones, but no row is written and no change is logged for the marts."""
    deleted_ids: list[int] = field(default_factory=list)
    raw_documents: list[RawDocument] = field(default_factory=list)
    raw_parts: list[RawPart] = field(default_factory=list)
    rejects: list[Reject] = field(default_factory=list)
    quarantined: list[Quarantined] = field(default_factory=list)
    problems: list[DataProblem] = field(default_factory=list)
    cursor: tuple[str, str] | None = None
    """(stream, cursor JSON) set in the same transaction, so it never runs ahead of the rows."""
    fresh_ids: list[int] = field(default_factory=list)
    """Shipments of which the warehouse holds no row (a first sync's, not yet written in its run:
    ``Reads.holds_shipment_rows``): their rows are appended, with nothing of them deleted or compared first."""

    @classmethod
    def joined(cls, parts: Sequence[BatchWrite]) -> BatchWrite:
        """One batch write of ``parts`` (disjoint shipments, in their order): every field of each, so a field
        added here is never dropped; each table's rows concatenated, the last cursor set."""
        import pyarrow as pa

        whole = cls()
        for part in parts:
            for name, table in part.tables.items():
                held = whole.tables.get(name)
                whole.tables[name] = table if held is None else pa.concat_tables([held, table])
            for each in fields(cls):
                if each.name == "tables":
                    continue
                mine, theirs = getattr(whole, each.name), getattr(part, each.name)
                if isinstance(mine, dict):
                    for key, ids in theirs.items():
                        mine.setdefault(key, []).extend(ids)
                elif isinstance(mine, list):
                    mine.extend(theirs)
                elif theirs is not None:
                    setattr(whole, each.name, theirs)
        return whole

    def without_shipments(self, ids: Collection[int]) -> BatchWrite:
        """This batch without anything of the shipments ``ids`` (their rows, raw document and parts, the records
        that loaded, their data problems): what it writes leaves theirs as they are held. Their rejects and
        quarantined records stay (a failure is said whatever else is left)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if not ids:
            return self
        left = pa.array(sorted({int(i) for i in ids}), pa.int64())

        def kept(table: Any) -> Any:
            if "shipment_id" not in table.column_names:
                return table
            return table.filter(pc.invert(pc.fill_null(pc.is_in(table.column("shipment_id"), value_set=left), False)))

        out = {int(i) for i in ids}
        return replace(
            self,
            tables={name: kept(table) for name, table in self.tables.items()},
            replaced={name: [i for i in each if i not in out] for name, each in self.replaced.items()},
            loaded={name: [i for i in each if i not in out] for name, each in self.loaded.items()},
            settled={name: [i for i in each if i not in out] for name, each in self.settled.items()},
            raw_documents=[d for d in self.raw_documents if d.shipment_id not in out],
            raw_parts=[p for p in self.raw_parts if p.shipment_id not in out],
            problems=[p for p in self.problems if p.shipment_id not in out],
            fresh_ids=[i for i in self.fresh_ids if i not in out],
        )


class WriteStats(dict[str, int]):
    """Rows inserted per table (by short name, as in the ``tables`` argument) in one transaction: a
    plain ``dict``; every replaced table appears, with 0 when it got no rows. ``deleted``: rows deleted;
    ``versions``: versions recorded in ``freight_history``."""

    def __init__(self, inserted: dict[str, int] | None = None, deleted: dict[str, int] | None = None) -> None:
        super().__init__(inserted or {})
        self.deleted: dict[str, int] = dict(deleted or {})
        self.versions: dict[str, int] = {}
        """Versions added to each ``freight_history`` table (by short name)."""
        self.shipments_written = 0
        """Shipments whose rows were written (a rebuild's whose re-derived rows are those held are not)."""
        self.compared: dict[str, int] = {}
        """A comparing write's (a rebuild's, a re-read of parts): ids of each table whose rows were compared with
        those held."""
        self.differed: dict[str, list[int]] = {}
        """A comparing write's: of those, the ids whose rows differed from those held (written)."""
        self.written: dict[str, pa.Table] = {}
        """The rows given to each table's insert (by short name; audit columns aside): a shipment's read again as
        held, or compared and found the same, left out."""

    @property
    def unchanged(self) -> dict[str, int]:
        """A comparing write's: of the ids compared of each table, how many had the rows held (not written)."""
        return {table: count - len(self.differed.get(table, ())) for table, count in self.compared.items()}

    @property
    def rows_written(self) -> int:
        return sum(self.values())

    @property
    def rows_deleted(self) -> int:
        return sum(self.deleted.values())


@dataclass(frozen=True)
class ReplaceOutcome:
    """What a full refresh did: ``changed`` False means nothing at all was written to the table."""

    table: str
    changed: bool
    rows_written: int
    rows_deleted: int
    rows_total: int


class RunLike(Protocol):
    """What ``RunLog.record_run`` reads (``sync.result.StreamResult`` fits)."""

    run_id: str
    stream: str
    started_at: dt.datetime
    finished_at: dt.datetime | None
    status: str
    rows_read: int
    rows_written: int
    requests: int
    retries: int
    rejected: int
    error: str | None
    cursor_before: str | None
    cursor_after: str | None


@dataclass
class RunRecord:
    """A plain :class:`RunLike` for callers without a ``StreamResult``."""

    run_id: str
    stream: str
    started_at: dt.datetime
    finished_at: dt.datetime | None = None
    status: str = "running"
    rows_read: int = 0
    rows_written: int = 0
    requests: int = 0
    retries: int = 0
    rejected: int = 0
    error: str | None = None
    cursor_before: str | None = None
    cursor_after: str | None = None
    rows_by_table: dict[str, int] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
