"""The code-conversions stream: the whole (small) set through the scroll endpoint, every run.

The warehouse compares the new set with what it holds and writes nothing when they are equal, so
an unchanged run leaves the table, its ``_synced_at`` and its Parquet untouched.

The table is replaced by what was read, so a truncated read would delete rows: the scroll must add
up to its ``X-Row-Count`` (every page agreeing on it), else it is read again and finally the stream
fails without writing (``changes.read_complete``). An empty answer while conversions are held fails the stream
too (:class:`EmptyScroll`): a set of hundreds does not vanish at once, an answer by mistake does.

The spec promises ``X-Row-Count`` for lookups only and shows no parameter of the scroll: a scroll that pages by
parameters of its own (or none), without headers, answers its first page to every request, which reads as the
whole set. So the code-conversion lookup without criteria is asked for its ``X-Row-Count`` (one row) before and
after the scroll, and the scroll is not taken when it gave fewer conversions than the smaller of the two
(:class:`ScrollShortOfLookup`; a conversion added or deleted while it was read moves only one of them): that lookup
is read whole instead (paged, and checked against its own ``X-Row-Count`` as every lookup), as when the scroll's
answer is no array of records (a Spring ``Page`` object, say); a lookup refused or answering none too fails the
stream, the table kept (``extra["read_by_lookup"]`` says why a run read it). A
service that refuses that lookup, or answers it without the header, leaves the check undone: the result says so
(``extra["count_check_off"]``); when the scroll sent no ``X-Row-Count`` either, nothing vouches for the read, so
the rows it lacks are kept rather than deleted (``keep_unread``: a conversion deleted at the service stays until a
read can be checked; a truncated read deletes nothing).

A record that is not an object or has no usable id is quarantined (the stream's retry queue is
replaced by this run's failures: every run re-reads every record, so a record that loads leaves it);
while one is, no held conversion is deleted (any of those the read lacks may be that record: its row
stays until a read without such a record); a value that cannot be converted is null and one
``data_problems`` row.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from freight_pipeline.client import ProtocolError
from freight_pipeline.client import endpoints as ep
from freight_pipeline.datetimes import ServiceZone
from freight_pipeline.normalize.errors import NormalizationError
from freight_pipeline.normalize.flatten import to_arrow_batch
from freight_pipeline.normalize.problems import Problems
from freight_pipeline.normalize.records import CODE_CONVERSION_SHAPE, normalize_code_conversion
from freight_pipeline.normalize.shapes import FieldTally
from freight_pipeline.normalize.specs.code_conversions import CODE_CONVERSIONS
from freight_pipeline.sync.changes import LookupResult, RowCountMismatch, read_complete
from freight_pipeline.sync.isolation import RecordFailure, data_problems, json_text
from freight_pipeline.sync.progress import Meter, Progress
from freight_pipeline.sync.result import StreamResult
from freight_pipeline.sync.settings import SyncSettings
from freight_pipeline.sync.source import LookupRefused, SourceAPI
from freight_pipeline.text import error_in_one_line
from freight_pipeline.warehouse.records import DataProblem, Quarantined, Reject
from freight_pipeline.warehouse.store import Warehouse

STREAM = "code_conversions"
TABLE = CODE_CONVERSIONS.name


class EmptyScroll(RuntimeError):
    """The scroll answered no record while the warehouse holds conversions: the stream fails, the table is kept."""


UNCHECKED = ("; the scroll sent no X-Row-Count either, so nothing vouches that it was read whole: no held "
             "conversion is deleted (one the service deleted stays until a read can be checked)")


SWITCHED_OFF = ("switched off (FREIGHT_CODE_CONVERSION_COUNT=0): the scroll is taken as whole, and what it lacks is "
                "deleted")


class ScrollShortOfLookup(RowCountMismatch):
    """The scroll gave fewer conversions than the lookup counts: the lookup is read instead; when it cannot be
    (refused, or answering none), the stream fails and the table is kept."""


@dataclass
class LookupCount:
    """What the code-conversion lookup counts (the smaller of its answers), or why it cannot count."""

    rows: int | None = None
    off: str | None = None
    """Why the scroll cannot be checked against the lookup (None: it can)."""

    async def ask(self, source: SourceAPI) -> None:
        """Ask the lookup once more (unless it already could not count): ``rows`` is the smallest count so far."""
        if self.off is not None:
            return
        try:
            rows = await source.code_conversion_count()
        except LookupRefused as exc:
            self.rows, self.off = None, f"the service refused the code-conversion lookup ({exc})"
            return
        if rows is None:
            self.rows, self.off = None, "the code-conversion lookup was answered without X-Row-Count"
        else:
            self.rows = rows if self.rows is None else min(self.rows, rows)

    def check(self, read: int) -> None:
        """Raise ScrollShortOfLookup when ``read`` conversions are fewer than the lookup counts; note a lookup that
        counts none while the scroll read some (it matches nothing without criteria: no check)."""
        if self.rows is not None and read < self.rows:
            raise ScrollShortOfLookup(
                f"the code-conversion scroll gave {read} conversions but the code-conversion lookup counts "
                f"{self.rows} (X-Row-Count): the scroll was cut short (a service paging it by parameters of its own "
                f"answers its first page to every request?), so freight.{TABLE} is kept as it is")
        if self.rows == 0 and read:
            self.off = "the code-conversion lookup without criteria counts none (it matches nothing without criteria)"


async def sync_code_conversions(
    source: SourceAPI, warehouse: Warehouse, settings: SyncSettings, run_id: str, progress: Progress | None = None
) -> StreamResult:
    say = progress or (lambda message: None)
    result = StreamResult.begun(run_id, STREAM)
    requests_before, retries_before = source.request_counts()
    meter = Meter(STREAM, source.request_counts, unit="conversions")
    result.cursor_before = warehouse.reads.get_cursor(STREAM)
    checking = settings.code_conversion_count
    counted = LookupCount() if checking else LookupCount(off=SWITCHED_OFF)
    await counted.ask(source)
    scroll_counts: set[bool] = set()  # whether each page of the scroll came with X-Row-Count

    async def scroll() -> AsyncIterator[LookupResult]:
        async for page in source.code_conversion_pages(settings.page_size):
            scroll_counts.add(page.row_count is not None)
            yield page

    try:
        records = await read_complete(scroll, "code-conversion scroll", settings.count_attempts)
        await counted.ask(source)
        _refuse_empty(records, warehouse, "scroll")
        converted = convert(records, settings.zone, result.tallies.setdefault(STREAM, tally()))
        counted.check(converted.table.num_rows + len(converted.quarantined) + converted.repeated)
    except (ProtocolError, ScrollShortOfLookup) as unread:  # the scroll cannot be read whole: the lookup instead
        records = await _read_by_lookup(source, settings, unread)
        _refuse_empty(records, warehouse, "lookup without criteria")
        result.tallies[STREAM] = tally()  # the scroll's records, when it was converted, are no part of this read
        converted = convert(records, settings.zone, result.tallies[STREAM])
        scroll_counts, counted.rows = {True}, len(records)  # counted by the lookup's own X-Row-Count
        result.extra["read_by_lookup"] = error_in_one_line(unread, 300)
        say(f"code conversions: read by the lookup without criteria, as the scroll cannot be read whole: "
            f"{result.extra['read_by_lookup']}")
    result.rows_read = len(records)
    # no count at all vouches for the read (unless the check is switched off: the scroll taken as whole, as asked)
    unchecked = checking and counted.off is not None and scroll_counts != {True}
    result.extra["lookup_row_count"] = counted.rows
    if counted.off is not None:
        result.extra["count_check_off"] = counted.off + (UNCHECKED if unchecked else "")
        say(f"code conversions: not checked against the lookup's count: {result.extra['count_check_off']}")
    outcome = warehouse.writes.replace_table(
        run_id, TABLE, converted.table, stream=STREAM, rejects=converted.rejects, quarantined=converted.quarantined,
        problems=converted.problems, backoff=settings.backoff, keep_unread=bool(converted.quarantined) or unchecked,
    )
    result.add_rows({TABLE: outcome.rows_written})
    if outcome.changed:
        result.count_nulls({TABLE: converted.table})
    else:  # the records held, read again: their shape and nulls are those compared when they were written
        result.tallies.pop(STREAM, None)
    result.rejected = len(converted.rejects)
    result.quarantined = len(converted.quarantined)
    result.data_problems = len(converted.problems)
    result.extra["changed"] = outcome.changed
    say(f"code conversions: {len(records)} read, {'changed' if outcome.changed else 'unchanged'}")
    requests_after, retries_after = source.request_counts()
    result.requests = requests_after - requests_before
    result.retries = retries_after - retries_before
    result.cursor_after = warehouse.reads.get_cursor(STREAM)
    result.extra["retry_queue"] = len(converted.quarantined)
    meter.end(len(records))
    return result


def tally() -> FieldTally:
    """A code conversion's field tally, empty (a read's own: a second read starts one anew)."""
    return FieldTally(CODE_CONVERSION_SHAPE)


def _refuse_empty(records: Sequence[Any], warehouse: Warehouse, read: str) -> None:
    """Raise :class:`EmptyScroll` when the ``read`` answered no record while the warehouse holds conversions."""
    if not records and (held := len(warehouse.reads.code_conversion_payloads())):
        raise EmptyScroll(
            f"the code-conversion {read} answered no record while the warehouse holds {held}: the table is kept "
            "(an empty answer by mistake never empties it); if the service holds none now, delete the rows of "
            f"freight.{TABLE}")


async def _read_by_lookup(source: SourceAPI, settings: SyncSettings, unread: Exception) -> list[dict[str, Any]]:
    """Every conversion by the lookup without criteria, checked against its ``X-Row-Count`` (a lookup sends it); a
    lookup refused, or answering none, fails the stream with the scroll's error, the lookup's cause added."""
    try:
        records = await read_complete(lambda: source.code_conversion_lookup_pages(settings.page_size),
                                      "code-conversion lookup without criteria", settings.count_attempts,
                                      count_required=True)
    except (LookupRefused, RowCountMismatch) as exc:
        raise type(unread)(f"{unread}; nor could the code-conversion lookup without criteria be read instead: "
                           f"{error_in_one_line(exc, 300)}") from exc
    if not records:
        raise type(unread)(f"{unread}; and the code-conversion lookup without criteria answers none (it matches "
                           "nothing without criteria)")
    return records


@dataclass
class Converted:
    """The code conversions' table of a set of records, and what became of the bad ones."""

    table: pa.Table
    rejects: list[Reject] = field(default_factory=list)
    quarantined: list[Quarantined] = field(default_factory=list)
    problems: list[DataProblem] = field(default_factory=list)
    repeated: int = 0
    """Records whose id an earlier record of another content had (the service holds two records of one id): each
    one received, not in the table. A copy of an earlier record is not counted (a scroll that shifted between its
    pages served it twice, in place of another)."""


def convert(records: Sequence[Any], zone: ServiceZone, tally: FieldTally | None = None) -> Converted:
    """The table of ``records`` (the scroll's, or the ``payload`` of each row held, for a rebuild): a record
    that is not an object or has no usable id is quarantined and rejected, a value that cannot be
    converted is null and one data problem, a repeated id keeps the later record."""
    rows: dict[int, dict[str, Any]] = {}
    rejects: list[Reject] = []
    quarantined: list[Quarantined] = []
    problems: list[DataProblem] = []
    repeated = 0
    for position, record in enumerate(records):
        if tally is not None:
            tally.see(record, record.get("id") if isinstance(record, dict) else position)
        found = Problems(zone=zone)
        try:
            row = normalize_code_conversion(record, found)
        except NormalizationError as exc:
            key = _key_of(record, position)
            failure = RecordFailure(str(exc), str(ep.CODE_CONVERSION_SCROLL), None, json_text(record, 500))
            quarantined.append(failure.quarantined(STREAM, key, None))
            rejects.append(Reject(STREAM, key, json_text(record, 100_000), str(exc)))
            continue
        if (earlier := rows.get(row["conversion_id"])) is not None:
            found.add("", None, f"id {row['conversion_id']} repeated in the scroll: the later record is loaded")
            repeated += earlier != row
        rows[row["conversion_id"]] = row
        problems.extend(data_problems(STREAM, row["conversion_id"], None, found))
    return Converted(to_arrow_batch({TABLE: list(rows.values())})[TABLE], rejects, quarantined, problems, repeated)


def _key_of(record: Any, position: int) -> str:
    """A quarantine key for a record without a usable id: its id as text, else its scroll position."""
    value = record.get("id") if isinstance(record, dict) else None
    return f"id {json_text(value, 60)}" if value is not None else f"scroll position {position}"
