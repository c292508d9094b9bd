"""The reconcile pass of the shipments stream: it lists every live id (deletions have no change feed),
deletes what vanished, refetches what is missing or stale, and never deletes on an incomplete listing.
It never fetches a shipment last modified before the configured start cursor."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from freight_pipeline.config import ServiceSettings
from freight_pipeline.datetimes import ServiceZone
from freight_pipeline.simulator.config import SimulatorConfig
from freight_pipeline.simulator.server import RunningSimulator, running_simulator
from freight_pipeline.sync.changes import Criterion, LookupResult, RowCountMismatch, WalkStats
from freight_pipeline.sync.client_source import ClientSource
from freight_pipeline.sync.cursor import BEGINNING, ShipmentKey
from freight_pipeline.sync.reconcile import compare_with_source
from freight_pipeline.sync.result import StreamResult
from freight_pipeline.sync.runner import sync_all
from freight_pipeline.sync.shipments import RECONCILE_STREAM
from freight_pipeline.sync.shipments import STREAM as SHIPMENTS_STREAM
from freight_pipeline.warehouse.embedded import EmbeddedDuckDB
from freight_pipeline.warehouse.store import open_warehouse
from freight_pipeline_tests.sync.conftest import (
    SMALL_SHIPMENTS,
    SyncFn,
    query,
    work_db,
)
from freight_pipeline_tests.sync.expected import assert_converged
from freight_pipeline_tests.sync.faulty_sources import (
    CapsListingPageSize,
    GarbledListingInstant,
    InstantsWithoutOffset,
    NoRowCount,
    ShortListingPages,
    factory,
)
from freight_pipeline_tests.sync.settings import RECONCILE_SETTINGS, TEST_SETTINGS
from freight_pipeline_tests.warehouse.helpers import apply_shipment_batch

UTC = ServiceZone()
"""Date-times without an offset read as UTC (the simulator's default clock)."""

# Pages of 10 so the listing of SMALL_SHIPMENTS ids takes several pages.
LISTING = RECONCILE_SETTINGS.replaced(page_size=10)
NO_RECONCILE = TEST_SETTINGS.replaced(page_size=10)


def held_ids(database: Path) -> set[int]:
    raw = {r[0] for r in query(database, "SELECT shipment_id FROM freight_meta.raw_shipments")}
    rows = {r[0] for r in query(database, "SELECT shipment_id FROM freight.shipments")}
    assert raw == rows
    return raw


def test_deleted_shipments_leave_the_warehouse_when_reconcile_is_due(
    small_sim: RunningSimulator, work_sync: SyncFn, tmp_path: Path
) -> None:
    work_sync(NO_RECONCILE)
    deleted = small_sim.delete_shipments(3)
    lingering = work_sync(NO_RECONCILE)["shipments"]
    assert "reconcile_deleted" not in lingering.extra
    assert set(deleted) <= held_ids(work_db(tmp_path))  # no change feed: the walk cannot see a deletion

    result = work_sync(LISTING)["shipments"]
    assert result.extra["reconcile_listed"] == SMALL_SHIPMENTS - 3
    assert result.extra["reconcile_deleted"] == 3
    assert result.extra["reconcile_refetched"] == 0
    assert held_ids(work_db(tmp_path)).isdisjoint(deleted)
    assert_converged(small_sim.store, work_db(tmp_path))


def test_a_missing_and_a_stale_shipment_are_refetched(
    small_sim: RunningSimulator, work_sync: SyncFn, tmp_path: Path
) -> None:
    work_sync(NO_RECONCILE)
    oldest = sorted(ShipmentKey.of_shipment(doc, UTC) for doc in small_sim.store.reader.expected_documents())
    missing, stale = oldest[0].id, oldest[1].id  # far below the overlap window of the next run
    with open_warehouse(tmp_path, EmbeddedDuckDB()) as warehouse:  # damage the working database behind the sync's back
        apply_shipment_batch(warehouse, run_id="damage", tables={}, unit_ids=[], deleted_ids=[missing])
        warehouse.con.execute(
            "UPDATE freight_meta.raw_shipments SET last_modified_at = last_modified_at - INTERVAL 1 DAY, "
            "last_modified_key = '2000-01-01 00:00:00' WHERE shipment_id = ?", [stale])
        warehouse.con.execute("UPDATE freight.shipments SET shipment_number = 'damaged' WHERE shipment_id = ?", [stale])

    quiet = work_sync(NO_RECONCILE)["shipments"]  # the walk has no reason to look at either
    assert missing not in held_ids(work_db(tmp_path)) and quiet.rows_read < SMALL_SHIPMENTS

    result = work_sync(LISTING)["shipments"]
    assert result.extra["reconcile_refetched"] == 2
    assert result.rows_read == quiet.rows_read + 2  # the walk's, as the quiet run's, and the two read by id
    assert result.extra["reconcile_deleted"] == 0
    assert_converged(small_sim.store, work_db(tmp_path))  # events, legs, memos of `missing` too


def test_a_listing_page_short_of_its_row_count_is_asked_again_and_deletes_only_what_vanished(
    small_sim: RunningSimulator, work_sync: SyncFn, tmp_path: Path
) -> None:
    work_sync(NO_RECONCILE)
    deleted = small_sim.delete_shipments(2)
    make, built = factory(ShortListingPages, times=1)
    result = work_sync(LISTING, source_factory=make)["shipments"]
    assert built[0].shortened == 1
    assert result.extra["count_mismatches"] == 1
    assert result.extra["reconcile_deleted"] == len(deleted)
    assert built[0].dropped[0] in held_ids(work_db(tmp_path))  # the record the fault dropped was not deleted
    assert_converged(small_sim.store, work_db(tmp_path))


def test_a_listing_that_keeps_losing_a_record_fails_and_deletes_nothing(
    small_sim: RunningSimulator, work_sync: SyncFn, tmp_path: Path
) -> None:
    work_sync(NO_RECONCILE)
    small_sim.delete_shipments(2)  # genuinely gone: still not deleted on an unchecked listing
    before = held_ids(work_db(tmp_path))
    reconciled = "SELECT cursor_value FROM freight_meta.sync_state WHERE stream = ?"
    last_reconciled = query(work_db(tmp_path), reconciled, [RECONCILE_STREAM])  # by the first walk
    make, built = factory(ShortListingPages, times=None)
    with pytest.raises(RowCountMismatch, match=r"returned 9 rows but X-Row-Count said \d+ \(page size 10\)"):
        work_sync(LISTING, source_factory=make)
    assert built[0].shortened == LISTING.count_attempts  # asked again, then gave up on the first page
    assert held_ids(work_db(tmp_path)) == before
    failed = query(work_db(tmp_path), "SELECT error FROM freight_meta.sync_runs WHERE status = 'failed'")
    assert len(failed) == 1 and failed[0][0].startswith("RowCountMismatch: lookup [ID GT 0]")
    assert query(work_db(tmp_path), reconciled, [RECONCILE_STREAM]) == last_reconciled  # not done now


@pytest.mark.parametrize(
    ("fault", "options", "error"),
    [
        (CapsListingPageSize, {"cap": 4}, r"returned 4 rows but X-Row-Count said \d+ \(page size 10\)"),
        (NoRowCount, {}, r"lookup \[.*\] was answered without X-Row-Count"),
    ],
    ids=["capped-page-size", "no-row-count"],
)
def test_an_unverifiable_listing_fails_loudly_and_deletes_nothing(
    small_sim: RunningSimulator, work_sync: SyncFn, tmp_path: Path,
    fault: type[ClientSource], options: dict[str, int], error: str,
) -> None:
    work_sync(NO_RECONCILE)
    small_sim.delete_shipments(1)
    before = held_ids(work_db(tmp_path))
    cursor_sql = "SELECT cursor_value FROM freight_meta.sync_state WHERE stream = 'shipments'"
    cursor = query(work_db(tmp_path), cursor_sql)
    make, _ = factory(fault, **options)
    with pytest.raises(RowCountMismatch, match=error):
        work_sync(LISTING, source_factory=make)
    assert held_ids(work_db(tmp_path)) == before
    assert query(work_db(tmp_path), cursor_sql) == cursor


def test_an_unreadable_instant_in_the_listing_is_refetched_not_fatal(
    small_sim: RunningSimulator, work_sync: SyncFn, tmp_path: Path
) -> None:
    work_sync(NO_RECONCILE)
    make, built = factory(GarbledListingInstant)
    result = work_sync(LISTING, source_factory=make)["shipments"]
    garbled = built[0].garbled
    assert len(garbled) == -(-SMALL_SHIPMENTS // LISTING.page_size)  # one per listing page
    assert result.extra["reconcile_refetched"] == len(garbled)  # held, but the listing says nothing trustworthy
    assert result.extra["reconcile_deleted"] == 0
    assert_converged(small_sim.store, work_db(tmp_path))


def test_start_cursor_bounds_what_is_fetched_on_the_first_run_and_when_reconcile_is_due(
    small_sim: RunningSimulator, work_sync: SyncFn, tmp_path: Path
) -> None:
    keys = sorted(ShipmentKey.of_shipment(doc, UTC) for doc in small_sim.store.reader.expected_documents())
    start = keys[len(keys) // 2]
    if start.second() == keys[0].second():
        pytest.fail("the simulator stamped half of its shipments with one second; pick another seed")
    settings = LISTING.replaced(start_cursor=start.instant_text)
    at_or_after = {k.id for k in keys if k.second() >= start.second()}
    before = {k.id for k in keys} - at_or_after

    first = work_sync(settings)["shipments"]  # the first run reconciles too (never reconciled before)
    assert held_ids(work_db(tmp_path)) == at_or_after
    assert first.rows_read == len(at_or_after)
    assert first.extra["reconcile_refetched"] == 0
    assert first.extra["reconcile_before_start"] == len(before)

    small_sim.advance_clock(60)
    old = min(before)
    small_sim.touch_shipments([old])  # modified now: at or after the start cursor from now on
    later = work_sync(settings)["shipments"]
    assert later.extra["reconcile_before_start"] == len(before) - 1
    assert later.extra["reconcile_refetched"] == 0
    assert held_ids(work_db(tmp_path)) == at_or_after | {old}


def test_instants_without_a_utc_offset_compare_as_the_services_wall_clock_and_nothing_is_refetched(
    small_sim: RunningSimulator, work_sync: SyncFn, tmp_path: Path
) -> None:
    make, _ = factory(InstantsWithoutOffset)
    work_sync(NO_RECONCILE, source_factory=make)
    later = work_sync(LISTING, source_factory=make)["shipments"]
    assert later.extra["reconcile_listed"] == SMALL_SHIPMENTS
    assert later.extra["reconcile_refetched"] == 0  # the walk's copies are current, offset or not
    assert held_ids(work_db(tmp_path)) == set(small_sim.store.reader.live_shipment_ids())


def test_a_change_in_the_second_pass_of_a_naive_clocks_repeated_hour_is_no_restore(tmp_path: Path) -> None:
    """A service whose clock sends no UTC offset (Berlin): a shipment changed at 02:50 summer time, synced, then
    changed at 02:10 winter time (20 minutes later, an earlier wall clock): the restore probe must not say the
    service's data went back (nor reconcile for it)."""
    settings = TEST_SETTINGS.replaced(restore_probe=20, service_timezone="Europe/Berlin")
    config = SimulatorConfig(shipments=12, seed=5, control=True, naive_clock="Europe/Berlin",
                             start="2026-10-25T02:40:00")
    with running_simulator(config) as sim:
        shipment = sim.store.reader.live_shipment_ids()[0]
        service = ServiceSettings(sim.base_url, sim.username, sim.password)

        def changed_then_synced(at: str) -> StreamResult:
            touched = httpx.post(f"{sim.base_url}/_control/shipments/touch", json={"ids": [shipment], "at": at})
            assert touched.status_code == 200, touched.text
            results, _ = sync_all(service, tmp_path, settings, backend=EmbeddedDuckDB(), publish_after=False,
                                  streams=(SHIPMENTS_STREAM,))
            return next(r for r in results if r.stream == SHIPMENTS_STREAM)

        changed_then_synced("2026-10-25T02:50:00+02:00")
        second = changed_then_synced("2026-10-25T02:10:00+01:00")
    assert second.extra["restore_probe"]["went_back"] == []
    assert not any("went back" in notice for notice in second.extra.get("notices", []))


class _Listing:
    """The warehouse's side of a listing, held: ids 1..2000."""

    def __init__(self) -> None:
        self.ids: list[int] = []

    def add(self, ids: list[int], stamps: list[str | None]) -> None:
        self.ids += ids

    def differences(self, floor: str | None, waiting: str) -> tuple[list[int], list[int], int]:
        return sorted(set(range(1, 2001)) - set(self.ids)), [], 0


class _Held:
    def __init__(self) -> None:
        self.reads = self
        self.listing = _Listing()

    @contextlib.contextmanager
    def live_listing(self) -> Iterator[_Listing]:
        yield self.listing


class _IdService:
    """A service of ids 1..2000 (fewer ``dropped``) ordering by id as a number; ``as_text``: comparing ``ID GT`` as
    text (the spec gives the value as a string and says nothing of how it compares): ``"1000" > "999"`` is false."""

    def __init__(self, as_text: bool, counted: int = 2000, dropped: frozenset[int] = frozenset()) -> None:
        self.as_text, self.counted, self.dropped = as_text, counted, dropped

    async def lookup_shipments(self, criteria: list[Criterion], order_by: list[str], order_mode: list[str],
                               page_size: int) -> LookupResult:
        (criterion,) = criteria
        after = criterion["value"]
        rows = [i for i in range(1, 2001) if i not in self.dropped
                and (str(i) > after if self.as_text else i > int(after))]
        items = [{"id": i, "last_modified_date_time": "2026-11-01T10:00:00+01:00"} for i in rows[:page_size]]
        return LookupResult(items, self.counted if after == "0" else len(rows))


@pytest.mark.parametrize(("service", "said"), [
    (_IdService(as_text=True), "answered ids not each after the last"),
    (_IdService(as_text=False, dropped=frozenset(range(1500, 1600))), "read 1900 shipments where its first page "
                                                                       "counted 2000"),
], ids=["ids compared as text", "a hundred missing from the listing"])
def test_a_listing_that_skipped_shipments_deletes_nothing(service: _IdService, said: str) -> None:
    """The reconcile deletes what the listing did not list: a listing that skipped some (a service comparing ids as
    text, one whose pages lost rows while each agreed with its own count) must fail, not delete live shipments."""
    with pytest.raises(RowCountMismatch, match=said):
        asyncio.run(compare_with_source(service, _Held(), 500, 3, WalkStats(), BEGINNING, "shipments",
                                        ServiceZone()))
    # a few deleted while the listing reads (the count taken at its first page): vanished, as they are
    few = _IdService(as_text=False, counted=2000, dropped=frozenset({1999, 2000}))
    held = _Held()
    found = asyncio.run(compare_with_source(few, held, 500, 3, WalkStats(), BEGINNING, "shipments", ServiceZone()))
    assert (found.listed, found.vanished) == (1998, [1999, 2000])
