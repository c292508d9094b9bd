"""The shipments stream and its detail streams against the simulator: each rule of finding changes
without missing any (docs/sync.md), the cursor never ahead of its rows, one transaction per batch.

These runs do not reconcile (``TEST_SETTINGS``): the keyset walk alone must find every change.
Where a run reconciles (to remove deleted shipments), it asserts the pass healed nothing else.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import re
from pathlib import Path

import duckdb
import pytest

from bench.expected_rows import expected_rows
from freight_pipeline.client import AsyncFreightClient, PermissionDeniedError
from freight_pipeline.client._core import HeldBody
from freight_pipeline.config import DUCKDB_MEMORY_LIMIT_ENV
from freight_pipeline.datetimes import ServiceZone
from freight_pipeline.normalize.tables import FREIGHT_TABLES
from freight_pipeline.simulator.config import SimulatorConfig
from freight_pipeline.simulator.generator import touched
from freight_pipeline.simulator.server import RunningSimulator, running_simulator
from freight_pipeline.sync.backfill import id_ranges_between
from freight_pipeline.sync.changes import (
    EVERY_SHIPMENT,
    Criterion,
    LookupKeysDisagree,
    LookupOrderIgnored,
    LookupResult,
    RowCountMismatch,
    ceiling_of,
    walk_changes,
)
from freight_pipeline.sync.client_source import ClientSource
from freight_pipeline.sync.cursor import ShipmentKey
from freight_pipeline.sync.result import StreamResult
from freight_pipeline.sync.streams import STREAM_NAMES
from freight_pipeline.warehouse.ddl import WarehouseOutOfMemory
from freight_pipeline_tests.sync.conftest import (
    SHIPMENTS,
    SMALL_SHIPMENTS,
    SyncFn,
    assert_nothing_healed,
    query,
    syncer,
    work_db,
)
from freight_pipeline_tests.sync.expected import assert_converged, rows_differences
from freight_pipeline_tests.sync.faulty_sources import (
    ChangesAgainWhatItListed,
    DeletesBeforeRetrieve,
    FailingRetrieve,
    IgnoresIdCriterion,
    ModifiesWhilePaging,
    ShortPages,
    factory,
)
from freight_pipeline_tests.sync.settings import RECONCILE_SETTINGS, TEST_SETTINGS

UTC = ServiceZone()
"""Date-times without an offset read as UTC (the simulator's default clock)."""


def published(data_dir: Path) -> Path:
    return data_dir / "warehouse.duckdb"


def duplicate_keys(database: Path) -> dict[str, int]:
    found = {}
    for spec in FREIGHT_TABLES:
        keys = ", ".join(spec.primary_key)
        rows = query(database, f"SELECT count(*) FROM (SELECT {keys} FROM {spec.qualified_name} "
                               f"GROUP BY ALL HAVING count(*) > 1)")
        if rows[0][0]:
            found[spec.name] = rows[0][0]
    return found


def test_full_then_incremental_sync_equals_the_source(sim: RunningSimulator, sync: SyncFn, tmp_path: Path) -> None:
    first = sync(RECONCILE_SETTINGS)
    assert first["shipments"].rows_read == SHIPMENTS
    assert first["shipments"].cursor_before is None
    assert_nothing_healed(first["shipments"])  # the walk alone fetched everything
    assert first["shipments"].extra["appended"] is True  # nothing held: every first read appended
    assert_converged(sim.store, published(tmp_path))

    sim.advance_clock(120)
    changed = sim.modify_shipments(7)
    created = sim.create_shipments(3)
    deleted = sim.delete_shipments(2)
    second = sync(RECONCILE_SETTINGS)

    shipments = second["shipments"]
    assert shipments.cursor_before == first["shipments"].cursor_after
    assert ShipmentKey.from_json(shipments.cursor_after) > ShipmentKey.from_json(shipments.cursor_before)
    assert len(changed) + len(created) <= shipments.rows_read < SHIPMENTS / 2  # incremental, plus overlap
    # Deletions have no change feed: only the reconcile pass finds them; the walk found every change.
    assert shipments.extra["reconcile_deleted"] == len(deleted)
    assert shipments.extra["reconcile_refetched"] == 0
    assert shipments.extra["appended"] is False
    parts = shipments.extra["parts"]  # one pass: every fetched shipment brought its events, legs and memos
    fetched = shipments.rows_read - shipments.extra["overlap_current_skipped"]
    assert parts["shipments"]["loaded"] == parts["shipment_events"]["loaded"] == parts["shipment_memos"]["loaded"] \
        == fetched
    assert_converged(sim.store, published(tmp_path))
    runs = query(published(tmp_path), "SELECT stream, status, count(*) FROM freight_meta.sync_runs GROUP BY ALL")
    assert sorted(runs) == sorted((stream, "success", 2) for stream in STREAM_NAMES)


def test_records_modified_while_paging_converge_after_a_quiet_run(
    sim: RunningSimulator, sync: SyncFn, tmp_path: Path
) -> None:
    make, built = factory(ModifiesWhilePaging, sim, every=2, count=3)
    sync(source_factory=make)
    assert len(built[0].modified) >= 9, "the run should have met several modifications"
    sync()  # TEST_SETTINGS reconcile never: the walk alone must pick up what moved during the first run
    assert_converged(sim.store, published(tmp_path))
    assert duplicate_keys(published(tmp_path)) == {}


def test_a_shipment_changed_again_while_the_walk_runs_is_listed_twice_and_written_once_as_last_read(
    small_sim: RunningSimulator, small_sync: SyncFn, tmp_path: Path
) -> None:
    """A shipment the walk listed is changed again within the second of the run's ceiling: the walk lists it again
    there, and both copies can land in one batch. The later is written (was: ``RepeatedKey: freight.shipments: rows
    repeat the key``, the whole run failed, on a service with steady traffic now and then)."""
    small_sync()
    live = small_sim.store.reader.live_shipment_ids()
    small_sim.advance_clock(60)
    small_sim.touch_shipments([victim := live[3], *live[4:6]])  # the victim's page holds none of the next second
    small_sim.advance_clock(60)
    small_sim.touch_shipments(live[10:13])  # the ceiling's second
    make, built = factory(ChangesAgainWhatItListed, small_sim, victim)
    pages_of_two = TEST_SETTINGS.replaced(page_size=2)
    result = small_sync(pages_of_two, source_factory=make, streams=["shipments"])["shipments"]
    assert (built[0].times_listed, result.status) == (2, "success")
    assert_converged(small_sim.store, published(tmp_path))
    assert duplicate_keys(published(tmp_path)) == {}


def test_more_changes_in_one_second_than_a_page_holds(
    small_sim: RunningSimulator, small_sync: SyncFn, tmp_path: Path
) -> None:
    settings = TEST_SETTINGS.replaced(page_size=10)
    small_sync(settings)
    small_sim.advance_clock(60)
    burst = small_sim.store.reader.live_shipment_ids()[: settings.page_size * 3 + 7]
    small_sim.touch_shipments(burst)  # every one stamped with the same second
    result = small_sync(settings)["shipments"]
    assert result.rows_read >= len(burst)
    assert ShipmentKey.from_json(result.cursor_after).id == max(burst)
    assert_converged(small_sim.store, published(tmp_path))


def test_a_service_ignoring_the_id_criterion_stops_the_run_instead_of_looping(
    small_sim: RunningSimulator, small_sync: SyncFn, tmp_path: Path
) -> None:
    small_sync()
    small_sim.advance_clock(60)
    small_sim.touch_shipments(small_sim.store.reader.live_shipment_ids()[: TEST_SETTINGS.page_size + 5])
    make, _ = factory(IgnoresIdCriterion)
    with pytest.raises(RowCountMismatch, match="full page without progress"):
        small_sync(source_factory=make)


class IgnoresOrderMode(ClientSource):
    """A service that answers every shipment lookup in ascending order, whatever ``order_mode`` asks."""

    async def lookup_shipments(
        self, criteria: list[Criterion], order_by: list[str], order_mode: list[str], page_size: int
    ) -> LookupResult:
        return await super().lookup_shipments(criteria, order_by, ["ASC"] * len(order_by), page_size)


def test_a_service_ignoring_the_descending_order_fails_the_run_instead_of_reading_nothing(
    small_sim: RunningSimulator, work_sync: SyncFn, tmp_path: Path
) -> None:
    # the ceiling (the newest stamp) is asked in descending order: answered ascending, it was the oldest stamp,
    # and every run read the one oldest shipment and nothing after it, as if complete
    with pytest.raises(LookupOrderIgnored, match="ignores order_mode"):
        work_sync(source_factory=IgnoresOrderMode)
    assert query(work_db(tmp_path), "SELECT count(*) FROM freight.shipments") == [(0,)]


class StampsInAnotherZone(ClientSource):
    """A service whose lookup writes each ``last_modified_date_time`` at another UTC offset than the one its
    ``LAST_MODIFIED_DATE`` / ``_TIME`` keys are kept in (the same instants: keys local, stamps in UTC, say)."""

    shift = dt.timedelta(hours=1)

    async def lookup_shipments(
        self, criteria: list[Criterion], order_by: list[str], order_mode: list[str], page_size: int
    ) -> LookupResult:
        result = await super().lookup_shipments(criteria, order_by, order_mode, page_size)
        return LookupResult([self._moved(item) for item in result.items], result.row_count, result.page_count)

    def _moved(self, item: dict[str, object]) -> dict[str, object]:
        at = dt.datetime.fromisoformat(str(item["last_modified_date_time"]))
        offset = at.utcoffset()
        assert offset is not None
        return {**item, "last_modified_date_time": at.astimezone(dt.timezone(offset + self.shift)).isoformat()}


class StampsInAnEarlierZone(StampsInAnotherZone):
    shift = -dt.timedelta(hours=1)


@pytest.mark.parametrize("source", [StampsInAnotherZone, StampsInAnEarlierZone])
def test_stamps_outside_the_lookups_own_criteria_fail_the_walk_instead_of_being_dropped(
    small_sim: RunningSimulator, work_sync: SyncFn, source: type[ClientSource]
) -> None:
    # the walk positions itself by the stamps and asks by the keys: an hour apart, each query's answer lay outside
    # the seconds it asked for, and was dropped as "moved" while the walk skipped an hour at every step
    with pytest.raises(LookupKeysDisagree, match=r"not the wall clock of last_modified_date_time.*set "
                       r"FREIGHT_SERVICE_TIMEZONE to its zone \(now UTC\)"):
        work_sync(source_factory=source)


KEYS_ZONE = "Etc/GMT-1"
"""The simulator's wall clock (+01:00, the IANA name's sign inverted), which its lookup keys hold."""


@pytest.mark.parametrize("source", [StampsInAnotherZone, StampsInAnEarlierZone])
def test_keys_in_the_zone_set_are_found_whatever_offset_the_stamps_are_written_at(
    small_sim: RunningSimulator, work_sync: SyncFn, tmp_path: Path, source: type[ClientSource]
) -> None:
    # the keys hold the zone's wall clock (FREIGHT_SERVICE_TIMEZONE), the stamps another offset: was LookupKeysDisagree
    settings = TEST_SETTINGS.replaced(service_timezone=KEYS_ZONE)
    first = work_sync(settings, source_factory=source)["shipments"]
    assert first.extra["lookup_keys_zone"] == KEYS_ZONE
    assert_converged(small_sim.store, work_db(tmp_path))
    small_sim.advance_clock(60)
    small_sim.touch_shipments(small_sim.store.reader.live_shipment_ids()[:7])
    again = work_sync(settings, source_factory=source)["shipments"]
    assert again.rows_read >= 7 and again.extra["lookup_keys_zone"] == KEYS_ZONE  # the overlap's re-reads beside
    assert_converged(small_sim.store, work_db(tmp_path))


def test_keys_in_another_zone_than_the_one_set_fail_naming_both(
    small_sim: RunningSimulator, work_sync: SyncFn
) -> None:
    with pytest.raises(LookupKeysDisagree, match=r"nor by Etc/GMT-3's wall clock at that instant .*now Etc/GMT-3"):
        work_sync(TEST_SETTINGS.replaced(service_timezone="Etc/GMT-3"), source_factory=StampsInAnotherZone)


class StamplessInTheLookup(ClientSource):
    """A lookup answering one shipment (``victim``; None: the newest, the ceiling's first answer) without
    ``last_modified_date_time``; its document keeps it."""

    victim: int | None = None

    async def lookup_shipments(
        self, criteria: list[Criterion], order_by: list[str], order_mode: list[str], page_size: int
    ) -> LookupResult:
        result = await super().lookup_shipments(criteria, order_by, order_mode, page_size)
        if self.victim is None and criteria == EVERY_SHIPMENT and result.items:  # the ceiling's: the newest first
            type(self).victim = int(result.items[0]["id"])
        items = [{k: v for k, v in item.items() if k != "last_modified_date_time"} if item["id"] == self.victim
                 else item for item in result.items]
        return LookupResult(items, result.row_count, result.page_count)


@pytest.mark.parametrize("newest", [False, True])
def test_a_shipment_the_lookup_answers_without_a_stamp_is_read_by_id_and_the_walk_goes_on(
    small_sim: RunningSimulator, work_sync: SyncFn, tmp_path: Path, newest: bool
) -> None:
    # it failed the stream (CursorError: "has no last_modified_date_time"), every run, for every shipment
    source = type("Stampless", (StamplessInTheLookup,), {"victim": None if newest else
                                                         small_sim.store.reader.live_shipment_ids()[5]})
    result = work_sync(source_factory=source)["shipments"]
    assert source.victim is not None
    assert result.extra["unstamped_in_lookup"] == {"count": 1, "ids": [source.victim]}
    assert_converged(small_sim.store, work_db(tmp_path))  # the victim too, stamped by its document


AFTER = ShipmentKey("2026-12-01", "10:00:00", 0)
CEILING = ShipmentKey("2026-12-06", "12:00:00", 2**63 - 1)


async def _walked_answering(stamp: str) -> list[int]:
    """The ids a walk from ``AFTER`` to ``CEILING`` yields when every lookup answers one shipment stamped ``stamp``."""
    async def lookup(criteria: list[Criterion], order_by: list[str], order_mode: list[str],
                     page_size: int) -> LookupResult:
        return LookupResult([{"id": 7, "last_modified_date_time": stamp}], 1)

    return [key.id async for page in walk_changes(lookup, AFTER, CEILING, ServiceZone(), page_size=25)
            for key, _ in page]


@pytest.mark.parametrize(("stamp", "query"), [
    ("2026-11-30T09:00:00+01:00", "LAST_MODIFIED_TIME EQUALS 10:00:00 AND ID GT 0"),  # before the second asked
    ("2026-12-01T11:00:00+01:00", "LAST_MODIFIED_TIME EQUALS 10:00:00 AND ID GT 0"),  # after it, before the ceiling
    ("2026-12-01T10:00:00+01:00", "LAST_MODIFIED_TIME GT 10:00:00"),  # right for the first query, not the next
])
def test_a_row_outside_the_seconds_its_query_asked_for_fails_the_walk(stamp: str, query: str) -> None:
    # the keys another clock than the stamps: the row was dropped as "moved", and the walk skipped what it missed
    with pytest.raises(LookupKeysDisagree, match=query):
        asyncio.run(_walked_answering(stamp))


def test_rows_a_lookup_ordered_by_its_keys_answers_out_of_their_order_fail_the_walk() -> None:
    """The keys another clock than the stamps, the rows inside the day asked for: one keyed an hour later than it is
    stamped sits among those of the hour before it, and a full page's end could pass it by (a page of stamps with
    fractions gives up its last second), in silence; the order of the rows' seconds tells."""
    rows = [{"id": 1, "last_modified_date_time": "2026-12-01T11:00:00+01:00"},
            {"id": 2, "last_modified_date_time": "2026-12-01T10:30:00+01:00"}]

    async def lookup(criteria: list[Criterion], order_by: list[str], order_mode: list[str],
                     page_size: int) -> LookupResult:
        by_keys = order_by[0] != "ID"
        return LookupResult(rows if by_keys else [], len(rows) if by_keys else 0)

    async def walked() -> list[int]:
        return [key.id async for page in walk_changes(lookup, AFTER, CEILING, ServiceZone(), page_size=25)
                for key, _ in page]

    with pytest.raises(LookupKeysDisagree, match="ordered by its keys, answered shipment 2 last modified "
                                                 "2026-12-01 10:30:00"):
        asyncio.run(walked())


def test_a_row_modified_past_the_ceiling_while_answered_is_left_to_the_next_run() -> None:
    assert asyncio.run(_walked_answering("2026-12-06T12:00:01+01:00")) == []


def test_two_newest_shipments_stamped_in_one_second_are_no_sign_of_an_order_ignored() -> None:
    """A service sorting the stamp DESC but its ties by id ASC (it applies the first ``order_mode`` only): after a
    bulk update that stamps many shipments in one second, the ceiling is that second, not a refused run."""
    tie = [{"id": 5, "last_modified_date_time": "2026-12-06T12:00:00+01:00"},
           {"id": 9, "last_modified_date_time": "2026-12-06T12:00:00+01:00"}]

    async def lookup(criteria: list[Criterion], order_by: list[str], order_mode: list[str],
                     page_size: int) -> LookupResult:
        return LookupResult(tie[:page_size], len(tie))

    ceiling = asyncio.run(ceiling_of(lookup, ServiceZone()))
    assert ceiling is not None and ceiling.instant_text == "2026-12-06 12:00:00"
    with pytest.raises(LookupOrderIgnored):  # a later second after an earlier one still is
        asyncio.run(ceiling_of(lambda *_: _answered([tie[0], {**tie[1], "last_modified_date_time":
                                                              "2026-12-06T12:00:01+01:00"}]), ServiceZone()))


async def _answered(items: list[dict[str, object]]) -> LookupResult:
    return LookupResult(items, len(items))


def test_overlap_rereads_leave_no_duplicate_rows(
    small_sim: RunningSimulator, small_sync: SyncFn, tmp_path: Path
) -> None:
    small_sync()
    counts_before = query(published(tmp_path), "SELECT count(*) FROM freight.shipment_goods")
    everything_again = TEST_SETTINGS.replaced(overlap=dt.timedelta(days=3650))
    again = small_sync(everything_again)
    assert again["shipments"].rows_read == SMALL_SHIPMENTS  # the whole window was re-read...
    assert duplicate_keys(published(tmp_path)) == {}  # ...and replaced, not appended
    assert query(published(tmp_path), "SELECT count(*) FROM freight.shipment_goods") == counts_before
    assert_converged(small_sim.store, published(tmp_path))


def test_shipment_deleted_between_lookup_and_retrieve_is_recorded(
    small_sim: RunningSimulator, small_sync: SyncFn, tmp_path: Path
) -> None:
    victim = small_sim.store.reader.live_shipment_ids()[17]
    make, _ = factory(DeletesBeforeRetrieve, small_sim, {victim})
    results = small_sync(source_factory=make)
    assert results["shipments"].rejected == 1
    rejected = query(published(tmp_path), "SELECT stream, source_key, reason FROM freight_meta.rejected_records")
    assert rejected == [("shipments", str(victim), "not found (404) at retrieve: deleted in the source after lookup")]
    assert query(published(tmp_path), "SELECT count(*) FROM freight.shipments WHERE shipment_id = ?", [victim]) == [
        (0,)
    ]
    assert_converged(small_sim.store, published(tmp_path))


def test_page_shorter_than_its_row_count_is_asked_again(
    small_sim: RunningSimulator, small_sync: SyncFn, tmp_path: Path
) -> None:
    # the first page of two rows or more is the ceiling's (its two newest, checked for their order), cut short
    # harmlessly (only its first row is read); the second is the walk's first page
    make, built = factory(ShortPages, times=2)
    result = small_sync(source_factory=make)["shipments"]
    assert built[0].shortened == 2
    assert result.extra["count_mismatches"] == 1
    assert_converged(small_sim.store, published(tmp_path))


def test_persistent_row_count_mismatch_fails_without_moving_the_cursor(
    small_sim: RunningSimulator, small_sync: SyncFn, tmp_path: Path
) -> None:
    first = small_sync()
    small_sim.advance_clock(60)
    small_sim.modify_shipments(5)
    make, _ = factory(ShortPages, times=None)
    with pytest.raises(RowCountMismatch, match="X-Row-Count"):
        small_sync(source_factory=make)
    with duckdb.connect(str(tmp_path / "work" / "warehouse.duckdb"), read_only=True) as con:
        cursor = con.execute("SELECT cursor_value FROM freight_meta.sync_state WHERE stream = 'shipments'").fetchall()
        failed = con.execute(
            "SELECT status, error FROM freight_meta.sync_runs WHERE stream = 'shipments' AND status <> 'success'"
        ).fetchall()
    assert cursor == [(first["shipments"].cursor_after,)]
    assert len(failed) == 1 and failed[0][0] == "failed" and "RowCountMismatch" in failed[0][1]
    small_sync()
    assert_converged(small_sim.store, published(tmp_path))


def test_sync_state_records_what_each_stream_covers(
    small_sim: RunningSimulator, small_sync: SyncFn, tmp_path: Path
) -> None:
    small_sync()
    state = dict(query(published(tmp_path), "SELECT stream, cursor_value FROM freight_meta.sync_state"))
    newest = max(ShipmentKey.of_shipment(doc, UTC) for doc in small_sim.store.reader.expected_documents())
    assert ShipmentKey.from_json(state["shipments"]) == newest
    assert json.loads(state["code_conversions"]) == {"rows": len(list(small_sim.store.reader.code_conversion_rows()))}


def test_documents_are_fetched_and_committed_in_batches_and_never_a_whole_page_is_held(
    small_sim: RunningSimulator, small_sync: SyncFn, tmp_path: Path
) -> None:
    settings = TEST_SETTINGS.replaced(page_size=50, fetch_batch_size=5, fetch_window=6)
    fetched, written, most_held = [0], [0], [0]
    batch_lines: list[str] = []

    class Counting(ClientSource):
        async def get_shipment(self, shipment_id: int) -> dict[str, object] | HeldBody:
            fetched[0] += 1
            most_held[0] = max(most_held[0], fetched[0] - written[0])
            return await super().get_shipment(shipment_id)

    def progress(line: str) -> None:
        match = re.search(r"(\d+) written in this batch", line)
        if match:  # called right after the batch's transaction committed
            batch_lines.append(line)
            written[0] += int(match.group(1))

    result = small_sync(settings, source_factory=Counting, progress=progress)["shipments"]
    assert result.rows_read == SMALL_SHIPMENTS
    assert len(batch_lines) >= SMALL_SHIPMENTS / settings.fetch_batch_size
    # held at once: the fetch window (being fetched, or finished and not yet in a batch), the batch of
    # finished ones being filled, one waiting, one being prepared, one being written; never the page
    assert most_held[0] <= settings.fetch_window + 4 * settings.fetch_batch_size < settings.page_size
    assert_converged(small_sim.store, published(tmp_path))


def test_the_shipments_a_batch_says_it_wrote_are_those_the_run_log_says_it_wrote(
    small_sim: RunningSimulator, small_sync: SyncFn
) -> None:
    """An incremental run reads again the shipments stamped in its cursor's second (the overlap) and writes only
    those that changed: ``sync -v``'s batch lines said every shipment read was written, against the run log's
    figure (17 written of 17 read, 5 in ``sync_runs``)."""
    small_sync()
    small_sim.modify_shipments(3)
    said: list[int] = []
    result = small_sync(progress=lambda line: said.extend(
        int(found.group(1)) for found in [re.search(r"(\d+) written in this batch", line)] if found))["shipments"]
    assert said and sum(said) == result.rows_by_table["shipments"] < result.rows_read, (said, result.rows_read)


def test_a_retrieve_failure_that_is_not_the_records_fault_surfaces_as_itself_and_writes_nothing_of_its_batch(
    small_sim: RunningSimulator, small_sync: SyncFn, tmp_path: Path
) -> None:
    in_walk_order = sorted(small_sim.store.reader.expected_documents(),
                           key=lambda doc: ShipmentKey.of_shipment(doc, UTC))
    victim = in_walk_order[3]["id"]  # in the first fetch batch
    error = PermissionDeniedError(
        "injected: permission withdrawn", status_code=403, method="GET", path=f"/service/shipment/{victim}"
    )

    def make(client: AsyncFreightClient) -> FailingRetrieve:
        built.append(FailingRetrieve(client, victim, error))
        return built[0]

    built: list[FailingRetrieve] = []
    with pytest.raises(PermissionDeniedError, match="injected: permission withdrawn") as raised:
        small_sync(source_factory=make)
    assert raised.value is error  # the original error, not an ExceptionGroup wrapping it
    assert built[0].completed == 0 and built[0].cancelled > 0  # its batch siblings were stopped, not finished
    with duckdb.connect(str(tmp_path / "work" / "warehouse.duckdb"), read_only=True) as con:
        failed = con.execute("SELECT error FROM freight_meta.sync_runs WHERE stream = 'shipments'").fetchall()
        held = con.execute("SELECT count(*) FROM freight_meta.raw_shipments").fetchall()
    assert failed == [("PermissionDeniedError: injected: permission withdrawn",)]
    assert held == [(0,)]


def test_running_out_of_duckdb_memory_fails_naming_the_setting_and_a_rerun_converges(
    small_sim: RunningSimulator, work_sync: SyncFn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DUCKDB_MEMORY_LIMIT_ENV, "1MB")
    with pytest.raises(WarehouseOutOfMemory, match=rf"ran out of DuckDB memory .*; the limit is 1MB: "
                       rf"raise {DUCKDB_MEMORY_LIMIT_ENV}"):
        work_sync()
    monkeypatch.delenv(DUCKDB_MEMORY_LIMIT_ENV)
    work_sync()
    assert_converged(small_sim.store, work_db(tmp_path))


def test_a_backfill_partition_appends_only_while_its_id_range_holds_nothing(
    small_sim: RunningSimulator, tmp_path: Path
) -> None:
    """Each partition's first run appends though the other partitions' rows are held; a partition run over rows of
    its range already held (a plan run again over a warehouse synced before) deletes and replaces them."""
    sync = syncer(small_sim, tmp_path, publish_after=False)
    ids = sorted(small_sim.store.reader.live_shipment_ids())
    plan = id_ranges_between([ids[len(ids) // 2]])
    expected = expected_rows(small_sim.store)
    expected["code_conversions"], expected["shipment_documents"] = [], []  # only the shipments stream runs

    def partition(index: int) -> StreamResult:
        settings = TEST_SETTINGS.replaced(id_range=plan[index], backfill_plan=plan)
        return sync(settings, streams=["shipments"])["shipments"]

    first, second = partition(0), partition(1)
    assert first.extra["appended"] is True and second.extra["appended"] is True  # the other range's rows held
    assert first.rows_read + second.rows_read == len(ids)
    assert rows_differences(expected, work_db(tmp_path)) == {}
    with duckdb.connect(str(work_db(tmp_path))) as con:  # the plan run again: its cursors gone, its rows held
        con.execute("DELETE FROM freight_meta.sync_state WHERE stream LIKE 'shipments@%'")
    again = partition(1)
    assert again.extra["appended"] is False and again.rows_read == second.rows_read
    assert rows_differences(expected, work_db(tmp_path)) == {} and duplicate_keys(work_db(tmp_path)) == {}


def test_a_shipment_stamped_in_the_future_does_not_carry_the_cursor_past_later_changes(tmp_path: Path) -> None:
    # the service's clock is ours (the simulator's default clock lies a month back); one shipment is stamped two
    # days ahead of it (an application server's clock off, a stamp typed in): the walk reads it, but the changes
    # made after it, stamped now, must still be found by the next run's walk
    start = (dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)).isoformat(timespec="seconds")
    with running_simulator(SimulatorConfig(shipments=SMALL_SHIPMENTS, seed=7, start=start)) as sim:
        sync = syncer(sim, tmp_path, publish_after=False)
        sync()
        data = sim.store.data
        with data.lock:  # the clock and the stamps issued after it stay where they are
            ahead = sorted(data.live)[0]
            data.live[ahead] = touched(data.live[ahead], data.clock.epoch() + 2 * 86400)
            data.version += 1
        second = sync()["shipments"]
        changed = sim.modify_shipments(5)
        third = sync()["shipments"]
        assert_converged(sim.store, work_db(tmp_path))
        assert third.rows_read >= len(changed) + 1  # the changes, and the one ahead read again
        due = second.extra["ceiling_due"]  # the newest stamp not in the future: the cursor stayed there
        assert ShipmentKey.from_json(second.cursor_after).instant_text == due < second.extra["ceiling"]
