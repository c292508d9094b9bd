"""Finding changed shipments: keyset paging over (LAST_MODIFIED_DATE, LAST_MODIFIED_TIME, ID).

Page-number paging shifts when records change during a run, and one second can hold more records
than a page. So this never asks for ``page_no > 0``: every request is page 0 of a query that starts
strictly after the last key received, never beyond the run's ceiling (the newest last-modified
second at its start):

* A: the rest of the current second      ``DATE = d AND TIME = t AND ID > id``   order ID
* B: the rest of the current day         ``DATE = d AND TIME > t [AND TIME <= ceiling]``  order TIME, ID
* C: the following days up to the ceiling ``DATE > d AND DATE <= ceiling date``  order DATE, TIME, ID

Each step either advances the position or ends the walk, so it terminates and misses nothing that
was modified at or before the ceiling and not modified again during the run (a record modified
during the run moves beyond the ceiling and is read by the next run). Only plain AND-ed criteria
with EQUALS/GT/GE/LT/LE and ``value`` are used, so nothing depends on the spec's vague IN/OR semantics.

A service stamping fractions of a second (``2026-11-01T10:15:30.250+01:00``, as many Java services write
``last_modified_date_time``), whose ``LAST_MODIFIED_TIME`` criteria compare the fractions, finds by
``TIME = t`` only the stamps at ``t.000`` and orders one second's rows by fraction, not id. Keys stay whole
seconds (the cursor's); once the walk has seen a stamp with a fraction (the ceiling's two newest, or any row
it reads) it asks for a second as a range, ``TIME >= t AND TIME < t+1s`` (``TIME >= t`` alone in a day's
last second), the rest of a day as ``TIME >= t+1s`` up to ``TIME < ceiling+1s``, orders each page by key,
and a full page of B or C leaves out its last second, which A then walks from its start by id (its rows
on that page stand in fraction order: those of lower id may lie beyond it). A B asked by whole seconds
that answers rows of the current second with fractions (the first sign of them) has A walk that second
again as a range, leaving out the ids it yielded. A service's stamps without fractions are asked exactly
as before.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from freight_pipeline.config import SERVICE_TIMEZONE_ENV
from freight_pipeline.datetimes import DateTimeParseError, ServiceZone
from freight_pipeline.sync.cursor import CursorError, ShipmentKey, is_shipment, listed_id

Criterion = dict[str, Any]


@dataclass(frozen=True)
class LookupResult:
    """One page of a lookup or scroll: the raw records, ``X-Row-Count`` and ``X-Page-Count`` (None if absent).

    ``X-Row-Count`` counts every record of the query (all pages), not just this page's;
    ``X-Page-Count`` the pages of the page size the service actually served.
    """

    items: list[dict[str, Any]]
    row_count: int | None
    page_count: int | None = None

    def served_page_size(self, asked: int) -> int | None:
        """The page size the service used when it answered another number of rows than ``asked``: fewer because it
        caps the page size (a full-looking short page), more because it ignores ``page_size`` and serves pages of its
        own size; either way a page whose ``X-Page-Count`` is what ``X-Row-Count`` makes of that size. None when
        the difference is not explained so (or there is none)."""
        served, rows, pages = len(self.items), self.row_count, self.page_count
        if rows is None or pages is None or not 0 < served <= rows or served == min(asked, rows):
            return None  # none served, more than the query holds, or what was asked
        return served if pages == -(-rows // served) else None


# lookup(criteria, order_by, order_mode, page_size) -> page 0 of that query
LookupFn = Callable[[list[Criterion], list[str], list[str], int], Awaitable[LookupResult]]


class RowCountMismatch(RuntimeError):
    """A lookup page (or a whole paged read) disagreed with its own ``X-Row-Count`` on every attempt."""


@dataclass
class WalkStats:
    lookups: int = 0
    count_mismatches: int = 0
    seen: int = 0
    queries: list[str] = field(default_factory=list)
    served_page_size: int | None = None
    """The page size the service capped lookups to, once it did (None: it served what was asked), or the size it
    serves whatever is asked (``page_size_ignored``)."""
    page_size_ignored: bool = False
    """The service answered a page longer than asked: it ignores ``page_size``, its pages are ``served_page_size``
    rows whatever is asked."""
    row_count: int | None = None
    """``X-Row-Count`` of the last lookup answered (the rows of its whole query)."""
    total: int | None = None
    """The shipments the walk will yield, as its lookups announce them (:meth:`announce`); None before one did."""
    total_final: bool = False
    """``total`` came from a query reaching up to the ceiling (else it is a lower bound: it can grow)."""
    unstamped: dict[int, dict[str, Any]] = field(default_factory=dict)
    """Shipments a lookup of the walk answered without a ``last_modified_date_time`` that reads as an instant (by
    id): they have no place in the walk, which goes on without them; the caller reads them by id."""

    def announce(self, rows: int, *, to_ceiling: bool) -> None:
        """A lookup of the walk answered: ``rows`` (those yielded before it, plus its ``X-Row-Count``) will be
        yielded at least, and in all when its query reaches up to the ceiling."""
        if to_ceiling:
            self.total, self.total_final = rows, True
        elif not self.total_final and rows > (self.total or 0):
            self.total = rows

    def page_size(self, asked: int) -> int:
        """What to ask for next, and what a full page holds: ``asked``, or the smaller size the service was found to
        cap pages to, or the size it serves whatever is asked."""
        if self.served_page_size is None:
            return asked
        return self.served_page_size if self.page_size_ignored else min(asked, self.served_page_size)


def _crit(key: str, mode: str, value: str | int) -> Criterion:
    return {"key": key, "match_mode": mode, "value": str(value)}


EVERY_SHIPMENT: list[Criterion] = [_crit("ID", "GT", 0)]
"""The criterion every shipment meets (ids are positive; the id listing's first page asks the same): a lookup for
every shipment is never sent without one, which a service may refuse (criteria "should be as precise as possible")."""


def _described(criteria: list[Criterion]) -> str:
    return " AND ".join(f"{c['key']} {c['match_mode']} {c['value']}" for c in criteria)


async def checked_lookup(
    lookup: LookupFn,
    criteria: list[Criterion],
    order_by: list[str],
    page_size: int,
    stats: WalkStats,
    attempts: int,
) -> list[dict[str, Any]]:
    """Page 0 of a query, re-asked until its length agrees with ``X-Row-Count``.

    The spec says every lookup answer carries ``X-Row-Count``; without it a page cut short (a
    dropped record, a capped page size) looks like the end of the query, so its absence fails too.
    A page cut short by a cap on the page size, or longer than asked from a service that ignores ``page_size``
    (``X-Page-Count`` computed for the size the service served, :meth:`LookupResult.served_page_size`), is whole:
    the size is kept in ``stats``, and callers compare their pages with ``stats.page_size(page_size)`` and ask for
    that from then on.
    """
    for _ in range(attempts):
        stats.lookups += 1
        asked = stats.page_size(page_size)
        result = await lookup(criteria, order_by, ["ASC"] * len(order_by), asked)
        stats.row_count = result.row_count
        if result.row_count is None:
            raise RowCountMismatch(
                f"lookup [{_described(criteria)}] was answered without X-Row-Count, so a short page cannot be "
                "told from the end of the query"
            )
        if len(result.items) == min(asked, result.row_count):
            return result.items
        served = result.served_page_size(asked)
        if served is not None:
            stats.served_page_size, stats.page_size_ignored = served, served > asked
            return result.items
        stats.count_mismatches += 1
    raise RowCountMismatch(
        f"lookup [{_described(criteria)}] returned {len(result.items)} rows but X-Row-Count said "
        f"{result.row_count} (page size {asked}) on {attempts} attempts"
        + ("" if result.page_count is None else
           f"; its X-Page-Count {result.page_count} does not explain it as a smaller page size served")
    )


def _no_progress(pos: ShipmentKey) -> RowCountMismatch:
    """A full page holding nothing after ``pos``: the service ignored a criterion; stop instead of looping."""
    return RowCountMismatch(f"lookup after {pos.instant_text} id {pos.id} returned a full page without progress")


class LookupOrderIgnored(RuntimeError):
    """The service answered a lookup ordered DESC in another order: the newest stamp cannot be found."""


class LookupKeysDisagree(RuntimeError):
    """The shipment lookup answered a shipment whose ``last_modified_date_time`` lies outside the seconds its
    criteria on ``LAST_MODIFIED_DATE`` / ``_TIME`` asked for: the keys the service filters by are not the wall
    clock of the stamp the walk positions itself by (kept in another time zone, say), so the walk would skip
    changes."""


_KEYS_NOT_STAMPS = ("the service's LAST_MODIFIED_DATE and LAST_MODIFIED_TIME are not the wall clock of "
                    "last_modified_date_time (another time zone?), so the walk would skip changes")
Second = tuple[str, str]
_DAY_END = "99"
"""A time after every ``HH:MM:SS`` of a day (the end of a day's seconds, compared as text)."""


def _next_second(time: str) -> str | None:
    """The second after ``time`` (``HH:MM:SS``) on its day; None after a day's last second (23:59:59)."""
    moment = dt.datetime.combine(dt.date.min, dt.time.fromisoformat(time)) + dt.timedelta(seconds=1)
    return moment.time().isoformat() if moment.date() == dt.date.min else None


def _the_second(key: ShipmentKey, fractional: bool) -> list[Criterion]:
    """Criteria selecting the wall-clock second of ``key``: ``DATE = d AND TIME = t``; of a service stamping
    fractions of a second (whose ``TIME = t`` matches ``t.000`` only) ``TIME >= t AND TIME < t+1s``."""
    criteria = [_crit("LAST_MODIFIED_DATE", "EQUALS", key.date)]
    if not fractional:
        return [*criteria, _crit("LAST_MODIFIED_TIME", "EQUALS", key.time)]
    following = _next_second(key.time)
    return [*criteria, _crit("LAST_MODIFIED_TIME", "GE", key.time),
            *([_crit("LAST_MODIFIED_TIME", "LT", following)] if following else [])]


def _after_second(time: str, fractional: bool) -> list[Criterion] | None:
    """The ``LAST_MODIFIED_TIME`` criteria of a day's seconds after ``time``: ``TIME > t``; with fractions
    ``TIME >= t+1s`` (``TIME > t`` matches ``t.250``); None with fractions after a day's last second: none."""
    if not fractional:
        return [_crit("LAST_MODIFIED_TIME", "GT", time)]
    following = _next_second(time)
    return None if following is None else [_crit("LAST_MODIFIED_TIME", "GE", following)]


def _up_to_second(time: str, fractional: bool) -> list[Criterion]:
    """The ``LAST_MODIFIED_TIME`` criteria of a day's seconds up to ``time`` included: ``TIME <= t``; with
    fractions ``TIME < t+1s`` (``TIME <= t`` leaves out ``t.250``), none up to a day's last second."""
    if not fractional:
        return [_crit("LAST_MODIFIED_TIME", "LE", time)]
    following = _next_second(time)
    return [_crit("LAST_MODIFIED_TIME", "LT", following)] if following else []


def _check_window(rows: Sequence[tuple[ShipmentKey, dict[str, Any]]], criteria: list[Criterion],
                  low: Second, low_inclusive: bool, high: Second, ceiling: ShipmentKey) -> None:
    """Raise :class:`LookupKeysDisagree` for a row whose second is outside ``low``..``high`` (the seconds the
    lookup's ``criteria`` select). A row later than ``high`` at or beyond the ceiling's second is no disagreement:
    a shipment modified while it was answered (it is read by a later step or run)."""
    for key, _ in rows:
        second = key.second()
        below = second < low if low_inclusive else second <= low
        if below or high < second < ceiling.second():
            raise LookupKeysDisagree(
                f"the shipment lookup {_described(criteria)} answered shipment {key.id} last modified {key.stamp}, "
                f"outside its own criteria: {_KEYS_NOT_STAMPS}"
            )


def _check_order(rows: Sequence[tuple[ShipmentKey, dict[str, Any]]], criteria: list[Criterion],
                 ceiling: ShipmentKey) -> None:
    """Raise :class:`LookupKeysDisagree` when rows a lookup ordered by its keys answered stand out of the order of
    their seconds: the keys are not the wall clock of the stamps (a row keyed an hour late sits among those of an
    hour before, and a full page's end would pass it by, unseen). Rows beyond the ceiling's second were modified
    while the lookup answered: no order is asked of them."""
    keys = [key for key, _ in rows if key.second() <= ceiling.second()]
    for earlier, later in pairwise(keys):
        if later.second() < earlier.second():
            raise LookupKeysDisagree(
                f"the shipment lookup {_described(criteria)}, ordered by its keys, answered shipment {later.id} "
                f"last modified {later.stamp} after shipment {earlier.id} last modified {earlier.stamp}: "
                f"{_KEYS_NOT_STAMPS}")


UNSTAMPED_PAGES = (20, 50)
"""The larger pages the ceiling's lookups ask when a page held only shipments without a usable stamp (at most the
spec's default page size, which any service serves)."""


async def ceiling_of(
    lookup: LookupFn, zone: ServiceZone, page_size: int = 2, unstamped: dict[int, dict[str, Any]] | None = None
) -> ShipmentKey | None:
    """The newest (date, time) the service holds right now; None when it holds no shipment.

    Its ``offset`` is that newest shipment's UTC offset: the service's current one (see
    ``cursor.dst_widening``). The first two shipments of the answer must not come in ascending order of their
    seconds (a tie, two shipments stamped in one second, says nothing; the ids' order does not matter here): a
    service ignoring ``order_mode`` would give the oldest stamp as the ceiling and every run would read nothing
    after it, as if complete, so that raises :class:`LookupOrderIgnored`. The newest shipment must be found by
    its own stamp's keys, or by the zone's wall clock at its instant (:func:`_check_keys_match`), first. A newest
    shipment without a stamp that reads as an instant has no place in the walk: it goes to ``unstamped`` (by id, to
    be read by id), and the next one is the newest (a page of them asked again larger: a service may sort missing
    stamps first).
    """
    result, items = await _newest_stamped(lookup, EVERY_SHIPMENT, page_size, zone, unstamped)
    if not result.items:
        return None
    if not items:
        raise CursorError(f"none of the {len(result.items)} newest shipments the lookup answered has a "
                          "last_modified_date_time that reads as an instant: the newest change cannot be found")
    # the keys' clock first (the stamps' own, or the zone's): the order is the keys', which in a repeated hour is
    # not the stamps' instants
    newest = await _check_keys_match(lookup, ShipmentKey.of_shipment(items[0], zone), zone)
    if len(items) > 1:
        try:
            next_one = ShipmentKey.of_shipment(items[1], zone)
        except (CursorError, DateTimeParseError, KeyError, TypeError, ValueError):
            next_one = None
        if next_one is not None and newest.second() < next_one.second():  # a tie of seconds is no order (ids aside)
            raise LookupOrderIgnored(
                f"the shipment lookup ordered by LAST_MODIFIED_DATE, LAST_MODIFIED_TIME, ID DESC answered "
                f"{newest.instant_text} id {newest.id} before {next_one.instant_text} id {next_one.id}: the service "
                "ignores order_mode, so the newest change cannot be found and the run would miss every change"
            )
        subsecond = newest.subsecond or (next_one is not None and next_one.subsecond)
    else:
        subsecond = newest.subsecond
    return ShipmentKey(newest.date, newest.time, 2**63 - 1, newest.offset, subsecond)


async def _newest_stamped(
    lookup: LookupFn, criteria: list[Criterion], size: int, zone: ServiceZone,
    unstamped: dict[int, dict[str, Any]] | None,
) -> tuple[LookupResult, list[dict[str, Any]]]:
    """The newest ``size`` shipments matching ``criteria`` (last-modified, then id, descending), asked again larger
    (:data:`UNSTAMPED_PAGES`) while a full page holds only shipments without a usable stamp; the last answer and
    its rows with one (:func:`_stamped`: the others go to ``unstamped``)."""
    order = ["LAST_MODIFIED_DATE", "LAST_MODIFIED_TIME", "ID"]
    for asked in (size, *UNSTAMPED_PAGES):
        result = await lookup(criteria, order, ["DESC"] * 3, asked)
        items = _stamped(result.items, zone, unstamped)
        if items or len(result.items) < asked:
            break
    return result, items


def _stamped(items: Sequence[dict[str, Any]], zone: ServiceZone,
             unstamped: dict[int, dict[str, Any]] | None) -> list[dict[str, Any]]:
    """``items`` with a stamp that reads as an instant; the others go to ``unstamped`` (by id; None: they raise)."""
    kept = []
    for item in items:
        try:
            ShipmentKey.of_shipment(item, zone)
        except (CursorError, DateTimeParseError):
            if unstamped is None:
                raise
            unstamped.setdefault(listed_id(item), item)
            continue
        kept.append(item)
    return kept


async def _check_keys_match(lookup: LookupFn, newest: ShipmentKey, zone: ServiceZone) -> ShipmentKey:
    """``newest`` as the lookup's keys find it, at the clock they hold: the stamps' own (``LAST_MODIFIED_DATE`` and
    ``_TIME`` selecting the stamp's wall-clock second, :func:`_the_second`: a range when it carries a fraction), or
    the run's zone's (``FREIGHT_SERVICE_TIMEZONE``) at the same instant: a service writing its stamps in UTC while its
    keys hold its local wall clock, or the reverse. Then every key of the run is taken in that zone
    (``ServiceZone.keys_in_zone``) and ``newest`` is returned in it.

    Where the two clocks agree at ``newest`` (London's winter is UTC) or where the zone has another offset (its summer)
    they must be told apart, or confirmed, by a shipment stamped in the zone's other offset, the newest before its
    last change (:func:`_in_the_other_offset`): keys found by a clock at one and not the other are no clock the walk
    can follow. :class:`LookupKeysDisagree` when a shipment, not modified since, is found by neither clock, or the two
    shipments by different ones: the walk would skip changes (shifted either way, and a later shift shows in no
    answer). One lookup a run while the zone is UTC or its clocks never differ; up to five otherwise."""
    clock = await _clock_of(lookup, newest, zone)
    older = await _in_the_other_offset(lookup, newest, zone)
    if older is not None:
        found = await _clock_of(lookup, older, zone)
        if clock is not None and found is not None and found != clock:
            raise LookupKeysDisagree(
                f"the shipment lookup found shipment {newest.id} (last modified {newest.stamp}) by {_CLOCKS[clock]} "
                f"and shipment {older.id} (last modified {older.stamp}) by {_CLOCKS[found]}, {zone.name} "
                f"({SERVICE_TIMEZONE_ENV}) having other offsets then: {_KEYS_NOT_STAMPS}")
        clock = clock or found
    if clock == "zone":
        zone.keys_in_zone = True
        return _in_zone(newest, zone) or newest
    return newest


_CLOCKS = {"own": "its stamp's own wall clock", "zone": "the zone's wall clock"}


async def _clock_of(lookup: LookupFn, key: ShipmentKey, zone: ServiceZone) -> str | None:
    """Which clock the lookup's keys find shipment ``key`` by (its stamp's own wall clock): ``own``, ``zone``, or None
    when that tells nothing (the two agree at its instant, or it was modified or deleted since); LookupKeysDisagree
    when neither finds it."""
    local = _in_zone(key, zone)
    if await _found_by_its_second(lookup, key):
        return None if local is None else "own"
    again = await lookup([_crit("ID", "EQUALS", key.id)], ["ID"], ["ASC"], 1)
    itself = [item for item in again.items if is_shipment(item, key.id)]  # a service may ignore ID criteria
    try:
        now = ShipmentKey.of_shipment(itself[0], zone) if itself else None
    except (CursorError, DateTimeParseError, KeyError, TypeError, ValueError):
        now = None
    if now is None or now.second() != key.second():
        return None
    if local is not None and await _found_by_its_second(lookup, local):
        return "zone"
    tried = f"; nor by {zone.name}'s wall clock at that instant ({local.stamp})" if local is not None else ""
    raise LookupKeysDisagree(
        f"the shipment lookup {_described(_the_second(key, key.subsecond))} did not answer shipment {key.id}, "
        f"last modified {key.stamp} and not modified since{tried}: {_KEYS_NOT_STAMPS}; if they hold the "
        f"service's local wall clock, set {SERVICE_TIMEZONE_ENV} to its zone (now {zone.name})"
    )


async def _in_the_other_offset(lookup: LookupFn, newest: ShipmentKey, zone: ServiceZone) -> ShipmentKey | None:
    """The newest shipment stamped a day or more before the zone's offset last changed before ``newest`` (its summer
    before a winter, say: within 400 days), at its stamp's own wall clock; None when the zone is UTC or its offset did
    not change, or no shipment is that old."""
    if zone.tz is dt.UTC or newest.offset is None:
        return None
    at = dt.datetime.combine(dt.date.fromisoformat(newest.date), dt.time.fromisoformat(newest.time),
                             dt.timezone(newest.offset))
    here = at.astimezone(zone.tz).utcoffset()
    for days in range(1, 400):
        day = at - dt.timedelta(days=days)
        if day.astimezone(zone.tz).utcoffset() != here:
            bound = (day - dt.timedelta(days=1)).date().isoformat()  # a day inside it, in either clock
            _, items = await _newest_stamped(lookup, [_crit("LAST_MODIFIED_DATE", "LE", bound)], 1, zone, {})
            return ShipmentKey.of_shipment(items[0], zone) if items else None
    return None


async def _found_by_its_second(lookup: LookupFn, key: ShipmentKey) -> bool:
    """Whether the lookup of ``key``'s wall-clock second and id answers that shipment."""
    found = await lookup([*_the_second(key, key.subsecond), _crit("ID", "EQUALS", key.id)], ["ID"], ["ASC"], 1)
    return any(is_shipment(item, key.id) for item in found.items)


def _in_zone(key: ShipmentKey, zone: ServiceZone) -> ShipmentKey | None:
    """``key``'s instant at ``zone``'s wall clock; None when that is ``key``'s own (or its offset is unknown)."""
    if key.offset is None:
        return None
    at = dt.datetime.combine(dt.date.fromisoformat(key.date), dt.time.fromisoformat(key.time),
                             dt.timezone(key.offset)).astimezone(zone.tz)
    local = ShipmentKey.of_instant(key.id, at)
    if local.second() == key.second():
        return None
    return ShipmentKey(local.date, local.time, key.id, local.offset, key.subsecond)


PagesFn = Callable[[], AsyncIterator[LookupResult]]


async def read_complete(
    pages: PagesFn, what: str, attempts: int = 3, *, count_required: bool = False
) -> list[dict[str, Any]]:
    """Every record of a paged read (``pages()`` starts it from page 0), checked against ``X-Row-Count``.

    A read is complete when every page that sends ``X-Row-Count`` sends the same figure and the
    records received add up to it. Otherwise (records dropped, or the set changed while it was
    paged, which can shift page boundaries and skip a record) the whole read is done again, up to
    ``attempts`` times, then :class:`RowCountMismatch` is raised, so the caller writes nothing.
    A page without ``X-Row-Count`` fails the read when ``count_required`` (lookups: the spec says
    they always send it); otherwise (the scroll endpoints, where the spec does not say) it cannot
    be checked and the read is taken as it comes.
    """
    for _ in range(attempts):
        records: list[dict[str, Any]] = []
        counts: list[int] = []
        async for page in pages():
            records.extend(page.items)
            if page.row_count is not None:
                counts.append(page.row_count)
            elif count_required:
                raise RowCountMismatch(f"{what} was answered without X-Row-Count, so it cannot be checked")
        if not counts or (len(set(counts)) == 1 and len(records) == counts[0]):
            return records
    said = counts[0] if len(set(counts)) == 1 else f"{sorted(set(counts))} (changing between pages)"
    raise RowCountMismatch(f"{what} returned {len(records)} rows but X-Row-Count said {said} on {attempts} attempts")


async def walk_changes(
    lookup: LookupFn,
    after: ShipmentKey,
    ceiling: ShipmentKey,
    zone: ServiceZone,
    *,
    page_size: int = 500,
    count_attempts: int = 3,
    stats: WalkStats | None = None,
    only: Sequence[Criterion] = (),
) -> AsyncIterator[list[tuple[ShipmentKey, dict[str, Any]]]]:
    """Yield pages of (key, base shipment) in key order, every key > ``after`` and <= ``ceiling``;
    ``only``: criteria AND-ed to every lookup (a backfill partition's id range). With fractions of a second (module
    docstring) each page is in key order; the one walk that sees them first in B yields that second's fractional
    rows after its others."""
    stats = stats if stats is not None else WalkStats()
    pos = after
    answered = 0  # rows the last lookup answered, the unstamped among them: whether its page was full
    unstamped_top: int | None = None  # the highest id of the last lookup's unstamped rows
    fractional = ceiling.subsecond  # the service's stamps carry fractions of a second: ask by ranges of seconds
    yielded: tuple[Second, set[int]] = (pos.second(), set())  # a second and the ids yielded in it
    again: set[int] = set()  # ids A leaves out: yielded in the second it walks again

    async def fetch(
        criteria: list[Criterion], order_by: list[str], window: tuple[Second, bool, Second] | None,
        to_ceiling: bool = False,
    ) -> list[tuple[ShipmentKey, dict[str, Any]]]:
        """The page of ``criteria``, each row checked to lie in the ``window`` (low, low inclusive, high) of
        seconds they select (None: by the caller)."""
        nonlocal answered, fractional
        seen = stats.seen
        items = await checked_lookup(lookup, [*criteria, *only], order_by, page_size, stats, count_attempts)
        stats.announce(seen + (stats.row_count or 0), to_ceiling=to_ceiling)
        nonlocal unstamped_top
        rows = []
        unstamped_top = None
        for item in items:
            try:
                rows.append((ShipmentKey.of_shipment(item, zone), item))
            except (CursorError, DateTimeParseError):  # its id read (else the answer is no list of shipments)
                shipment_id = listed_id(item)
                stats.unstamped.setdefault(shipment_id, item)
                unstamped_top = max(unstamped_top or shipment_id, shipment_id)
        fractional = fractional or any(key.subsecond for key, _ in rows)
        if order_by[0] != "ID":  # B and C, ordered by the keys
            _check_order(rows, criteria, ceiling)
        if window is not None:
            _check_window(rows, criteria, *window, ceiling)
        answered = len(items)
        return rows

    def in_range(rows: Sequence[tuple[ShipmentKey, dict[str, Any]]]) -> list[tuple[ShipmentKey, dict[str, Any]]]:
        # Defensive: a record modified between count and fetch may have moved; keep order and bounds.
        kept = [(k, r) for k, r in rows if after < k and k.second() <= ceiling.second() and k > pos]
        return sorted(kept, key=lambda row: row[0]) if fractional else kept

    def next_position(rows: Sequence[tuple[ShipmentKey, dict[str, Any]]],
                      kept: list[tuple[ShipmentKey, dict[str, Any]]]) -> ShipmentKey:
        """Where a B or C page leaves the walk; a full page with fractions gives up its last second (its rows
        there are not those of lowest id), removed from ``kept``: A walks it from its start."""
        if fractional and answered == stats.page_size(page_size) and rows:
            last = max(key.second() for key, _ in rows)
            if last <= ceiling.second():
                kept[:] = [(k, r) for k, r in kept if k.second() < last]
                return ShipmentKey(last[0], last[1], 0)
        return kept[-1][0] if kept else pos

    def note(kept: Sequence[tuple[ShipmentKey, dict[str, Any]]]) -> None:
        """Remember the ids yielded in the last second yielded."""
        nonlocal yielded
        for key, _ in kept:
            if key.second() != yielded[0]:
                yielded = (key.second(), set())
            yielded[1].add(key.id)

    while True:
        # A: the rest of the current second.
        while True:
            rows = await fetch(
                [*_the_second(pos, fractional), _crit("ID", "GT", pos.id)],
                ["ID"],
                (pos.second(), True, pos.second()),
            )
            fresh = in_range(rows)
            kept = [(k, r) for k, r in fresh if k.id not in again]
            if kept:
                stats.seen += len(kept)
                yield kept
                note(kept)
            before = pos
            if fresh:
                pos = fresh[-1][0]
            if unstamped_top is not None and unstamped_top > pos.id:  # of this second (asked by it, ordered by id)
                pos = ShipmentKey(pos.date, pos.time, unstamped_top, pos.offset, pos.subsecond)
            if answered < stats.page_size(page_size):
                break
            if pos <= before:  # a full page that did not move us on: the service ignored ID > id
                raise _no_progress(pos)
        again = set()
        # B: the rest of the current day.
        asked_fractional = fractional
        rest = _after_second(pos.time, fractional)
        if rest is None:  # after a day's last second: no rest
            answered = 0
        else:
            day_criteria = [_crit("LAST_MODIFIED_DATE", "EQUALS", pos.date), *rest]
            day_end = (pos.date, _DAY_END)
            if pos.date == ceiling.date:
                day_criteria += _up_to_second(ceiling.time, fractional)
                day_end = ceiling.second()
            rows = await fetch(day_criteria, ["LAST_MODIFIED_TIME", "ID"], None, pos.date == ceiling.date)
            if not asked_fractional and any(k.second() == pos.second() and k.subsecond for k, _ in rows):
                # the first fractions, in the current second (TIME > t matched t.250): walk it again as a range
                again = yielded[1] if yielded[0] == pos.second() else set()
                pos = after if after.second() == pos.second() else ShipmentKey(pos.date, pos.time, 0)
                continue
            _check_window(rows, day_criteria, pos.second(), False, day_end, ceiling)
            kept = in_range(rows)
            moved = next_position(rows, kept)
            if kept:
                stats.seen += len(kept)
                yield kept
                note(kept)
            if answered == stats.page_size(page_size):
                if moved <= pos:
                    raise _no_progress(pos)
                pos = moved
                continue  # more in this day: finish the last second (A), then the day (B)
            pos = moved
        if pos.date >= ceiling.date:
            return
        # C: the following days up to the ceiling.
        rows = await fetch(
            [_crit("LAST_MODIFIED_DATE", "GT", pos.date), _crit("LAST_MODIFIED_DATE", "LE", ceiling.date)],
            ["LAST_MODIFIED_DATE", "LAST_MODIFIED_TIME", "ID"],
            ((pos.date, _DAY_END), False, (ceiling.date, _DAY_END)),
            True,
        )
        kept = in_range(rows)
        beyond_ceiling = any(k.second() > ceiling.second() for k, _ in rows)
        moved = next_position(rows, kept)
        if kept:
            stats.seen += len(kept)
            yield kept
            note(kept)
        if answered < stats.page_size(page_size) or beyond_ceiling:
            return
        if moved <= pos:
            raise _no_progress(pos)
        pos = moved


def wall_clock_key(at: dt.datetime, offset: dt.timedelta | None) -> ShipmentKey:
    """The instant ``at`` (aware) as the service's wall-clock second at UTC ``offset`` (None: UTC), id 0."""
    return ShipmentKey.of_instant(0, at.astimezone(dt.timezone(offset or dt.timedelta(0)))).with_offset(offset)


async def ceiling_by(
    lookup: LookupFn, ceiling: ShipmentKey, latest: dt.datetime, zone: ServiceZone,
    unstamped: dict[int, dict[str, Any]] | None = None,
) -> ShipmentKey | None:
    """``ceiling`` when it is no later than ``latest`` (the pipeline's clock plus the skew allowed), in the service's
    wall clock at the ceiling's offset; else the newest last-modified second the service holds at or before that
    (None: none). A shipment stamped in the future (an application server's clock off, a stamp typed in) must
    neither carry the cursor past every change made until its stamp comes due, nor count as proof that the service's
    clock passed the seconds before it (``warehouse.reads.current_copies``). Shipments without a usable stamp go to
    ``unstamped``, as :func:`ceiling_of` sends them."""
    bound = wall_clock_key(latest, ceiling.offset)
    if ceiling.second() <= bound.second():
        return ceiling
    day_before = (dt.date.fromisoformat(bound.date) - dt.timedelta(days=1)).isoformat()
    for criteria in ([_crit("LAST_MODIFIED_DATE", "EQUALS", bound.date), *_up_to_second(bound.time, ceiling.subsecond)],
                     [_crit("LAST_MODIFIED_DATE", "LE", day_before)]):
        _, items = await _newest_stamped(lookup, criteria, 1, zone, unstamped)
        if items:
            newest = ShipmentKey.of_shipment(items[0], zone)
            subsecond = ceiling.subsecond or newest.subsecond
            return ShipmentKey(newest.date, newest.time, 2**63 - 1, newest.offset, subsecond)
    return None
