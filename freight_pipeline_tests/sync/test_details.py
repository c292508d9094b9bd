"""Detail streams (events, air and sea legs, memos) and the concurrency helper they share."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from freight_pipeline.simulator.server import RunningSimulator
from freight_pipeline.sync.details import gone_reason
from freight_pipeline.sync.shipments import DETAIL_STREAMS
from freight_pipeline.sync.tasks import run_all
from freight_pipeline_tests.sync.conftest import SyncFn, query, work_db
from freight_pipeline_tests.sync.expected import assert_converged
from freight_pipeline_tests.sync.settings import RECONCILE_SETTINGS


def test_a_shipment_deleted_before_its_detail_streams_is_recorded_as_rejected(
    small_sim: RunningSimulator, work_sync: SyncFn, tmp_path: Path
) -> None:
    work_sync()
    victim = next(doc for doc in small_sim.store.expected_documents() if doc.get("mode_of_transport") == "AIR")
    small_sim.advance_clock(60)
    small_sim.touch_shipments([victim["id"]])
    work_sync(streams=["shipments"])  # queued for its detail streams...
    small_sim.store.delete_shipment_ids([victim["id"]])  # ...then deleted in the source

    results = work_sync(streams=list(DETAIL_STREAMS))
    work = work_db(tmp_path)
    rejected = query(work, "SELECT stream, source_key, payload, reason FROM freight_meta.rejected_records "
                           "ORDER BY stream")
    gone = ["air_main_carriage_legs", "shipment_events"]  # the memo lookup finds nothing rather than 404
    assert rejected == [(stream, str(victim["id"]), None, gone_reason(stream)) for stream in gone]
    for stream in gone:
        assert results[stream].extra["shipments_gone"] == 1 and results[stream].rejected == 1
    for table in ("shipment_events", "air_main_carriage_legs", "shipment_memos"):
        assert query(work, f"SELECT count(*) FROM freight.{table} WHERE shipment_id = ?", [victim["id"]]) == [(0,)]
    assert query(work, "SELECT count(*) FROM freight_meta.pending_details") == [(0,)]
    # The shipment row itself goes with the shipments stream's next reconcile pass.
    assert work_sync(RECONCILE_SETTINGS)["shipments"].extra["reconcile_deleted"] == 1
    assert_converged(small_sim.store, work_db(tmp_path))


def test_run_all_cancels_the_siblings_of_a_failure_and_raises_the_original_error() -> None:
    seen: dict[str, object] = {}

    async def fails() -> int:
        await asyncio.sleep(0)
        raise LookupError("the one that failed")

    async def slow(name: str) -> int:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            seen[name] = "cancelled"
            raise
        return 1

    async def scenario() -> None:
        with pytest.raises(LookupError, match="the one that failed") as raised:
            await run_all([slow("a"), fails(), slow("b")])
        seen["siblings when it surfaced"] = dict(seen)
        seen["error"] = raised.value

    asyncio.run(scenario())
    assert type(seen["error"]) is LookupError  # not an ExceptionGroup
    assert seen["siblings when it surfaced"] == {"a": "cancelled", "b": "cancelled"}


def test_run_all_reports_simultaneous_failures_on_the_first_one() -> None:
    async def fails(message: str) -> int:
        raise ValueError(message)

    with pytest.raises(ValueError, match="first") as raised:
        asyncio.run(run_all([fails("first"), fails("second")]))
    assert raised.value.__notes__ == ["failed at the same time: ValueError: second"]


def test_run_all_returns_results_in_order() -> None:
    async def value(n: int) -> int:
        await asyncio.sleep(0.001 * (5 - n))
        return n

    assert asyncio.run(run_all(value(n) for n in range(5))) == [0, 1, 2, 3, 4]
