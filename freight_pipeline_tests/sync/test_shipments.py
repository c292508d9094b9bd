"""The shipments stream and its detail streams against the simulator: each rule of DESIGN.md."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from pathlib import Path

import duckdb
import pytest

from freight_pipeline.normalize import FREIGHT_TABLES
from freight_pipeline.simulator.server import RunningSimulator
from freight_pipeline.sync.changes import RowCountMismatch
from freight_pipeline.sync.cursor import ShipmentKey
from freight_pipeline.sync.runner import STREAM_ORDER
from freight_pipeline_tests.sync.conftest import SHIPMENTS, TEST_SETTINGS, SyncFn
from freight_pipeline_tests.sync.expected import assert_converged
from freight_pipeline_tests.sync.faulty_sources import (
    DeletesBeforeRetrieve,
    IgnoresIdCriterion,
    ModifiesWhilePaging,
    ShortPages,
    factory,
)


def published(data_dir: Path) -> Path:
    return data_dir / "warehouse.duckdb"


def query(database: Path, sql: str, params: list[object] | None = None) -> list[tuple]:
    with duckdb.connect(str(database), read_only=True) as con:
        return con.execute(sql, params or []).fetchall()


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
    first = sync()
    assert first["shipments"].rows_read == SHIPMENTS
    assert first["shipments"].cursor_before is None
    assert_converged(sim.store, published(tmp_path))

    sim.advance_clock(120)
    changed = sim.modify_shipments(7)
    created = sim.create_shipments(3)
    deleted = sim.delete_shipments(2)
    second = sync()

    shipments = second["shipments"]
    assert shipments.cursor_before == first["shipments"].cursor_after
    assert ShipmentKey.from_json(shipments.cursor_after) > ShipmentKey.from_json(shipments.cursor_before)
    assert len(changed) + len(created) <= shipments.rows_read < SHIPMENTS / 2  # incremental, plus overlap
    assert shipments.extra["reconcile_deleted"] == len(deleted)
    assert second["shipment_events"].extra["queued_at_start"] == shipments.rows_read
    assert_converged(sim.store, published(tmp_path))
    runs = query(published(tmp_path), "SELECT stream, status, count(*) FROM freight_meta.sync_runs GROUP BY ALL")
    assert sorted(runs) == sorted((stream, "success", 2) for stream in STREAM_ORDER)


def test_records_modified_while_paging_converge_after_a_quiet_run(
    sim: RunningSimulator, sync: SyncFn, tmp_path: Path
) -> None:
    make, built = factory(ModifiesWhilePaging, sim, every=2, count=3)
    sync(source_factory=make)
    assert len(built[0].modified) >= 9, "the run should have met several modifications"
    sync()  # quiet
    assert_converged(sim.store, published(tmp_path))
    assert duplicate_keys(published(tmp_path)) == {}


def test_more_changes_in_one_second_than_a_page_holds(sim: RunningSimulator, sync: SyncFn, tmp_path: Path) -> None:
    sync()
    sim.advance_clock(60)
    burst = sim.store.live_shipment_ids()[: TEST_SETTINGS.page_size * 3 + 7]
    sim.touch_shipments(burst)  # every one stamped with the same second
    result = sync()["shipments"]
    assert result.rows_read >= len(burst)
    assert ShipmentKey.from_json(result.cursor_after).id == max(burst)
    assert_converged(sim.store, published(tmp_path))


def test_a_service_ignoring_the_id_criterion_stops_the_run_instead_of_looping(
    sim: RunningSimulator, sync: SyncFn, tmp_path: Path
) -> None:
    sync()
    sim.advance_clock(60)
    sim.touch_shipments(sim.store.live_shipment_ids()[: TEST_SETTINGS.page_size + 5])
    make, _ = factory(IgnoresIdCriterion)
    with pytest.raises(RowCountMismatch, match="full page without progress"):
        sync(source_factory=make)


def test_overlap_rereads_leave_no_duplicate_rows(sim: RunningSimulator, sync: SyncFn, tmp_path: Path) -> None:
    sync()
    counts_before = query(published(tmp_path), "SELECT count(*) FROM freight.shipment_goods")
    everything_again = dataclasses.replace(TEST_SETTINGS, overlap=dt.timedelta(days=3650))
    again = sync(everything_again)
    assert again["shipments"].rows_read == SHIPMENTS  # the whole window was re-read...
    assert duplicate_keys(published(tmp_path)) == {}  # ...and replaced, not appended
    assert query(published(tmp_path), "SELECT count(*) FROM freight.shipment_goods") == counts_before
    assert_converged(sim.store, published(tmp_path))


def test_shipment_deleted_between_lookup_and_retrieve_is_recorded(
    sim: RunningSimulator, sync: SyncFn, tmp_path: Path
) -> None:
    victim = sim.store.live_shipment_ids()[17]
    make, _ = factory(DeletesBeforeRetrieve, sim, {victim})
    results = sync(source_factory=make)
    assert results["shipments"].rejected == 1
    rejected = query(published(tmp_path), "SELECT stream, source_key, reason FROM freight_meta.rejected_records")
    assert rejected == [("shipments", str(victim), "not found (404) at retrieve: deleted in the source after lookup")]
    assert query(published(tmp_path), "SELECT count(*) FROM freight.shipments WHERE shipment_id = ?", [victim]) == [
        (0,)
    ]
    assert_converged(sim.store, published(tmp_path))


def test_page_shorter_than_its_row_count_is_asked_again(sim: RunningSimulator, sync: SyncFn, tmp_path: Path) -> None:
    make, built = factory(ShortPages, times=1)
    result = sync(source_factory=make)["shipments"]
    assert built[0].shortened == 1
    assert result.extra["count_mismatches"] == 1
    assert_converged(sim.store, published(tmp_path))


def test_persistent_row_count_mismatch_fails_without_moving_the_cursor(
    sim: RunningSimulator, sync: SyncFn, tmp_path: Path
) -> None:
    first = sync()
    sim.advance_clock(60)
    sim.modify_shipments(5)
    make, _ = factory(ShortPages, times=None)
    with pytest.raises(RowCountMismatch, match="X-Row-Count"):
        sync(source_factory=make)
    with duckdb.connect(str(tmp_path / "work" / "warehouse.duckdb"), read_only=True) as con:
        cursor = con.execute("SELECT cursor_value FROM freight_meta.sync_state WHERE stream = 'shipments'").fetchall()
        failed = con.execute(
            "SELECT status, error FROM freight_meta.sync_runs WHERE stream = 'shipments' AND status <> 'success'"
        ).fetchall()
    assert cursor == [(first["shipments"].cursor_after,)]
    assert len(failed) == 1 and failed[0][0] == "failed" and "RowCountMismatch" in failed[0][1]
    sync()
    assert_converged(sim.store, published(tmp_path))


def test_sync_state_records_what_each_stream_covers(sim: RunningSimulator, sync: SyncFn, tmp_path: Path) -> None:
    sync()
    state = dict(query(published(tmp_path), "SELECT stream, cursor_value FROM freight_meta.sync_state"))
    newest = max(ShipmentKey.of_shipment(doc) for doc in sim.store.expected_documents())
    assert ShipmentKey.from_json(state["shipments"]) == newest
    assert json.loads(state["shipment_events"])["queue_remaining"] == 0
    assert json.loads(state["code_conversions"]) == {"rows": len(list(sim.store.code_conversion_rows()))}
    pending = query(published(tmp_path), "SELECT count(*) FROM freight_meta.pending_details")
    assert pending == [(0,)]
