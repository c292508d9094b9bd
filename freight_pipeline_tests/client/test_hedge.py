"""Hedged reads over HTTP against the simulator's latency tail (``client.hedge``): copies of slow reads
are sent and win with exact answers; without a tail almost none are sent; switched off, none; and a
storm of 429s is not amplified by them."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from freight_pipeline.client import AsyncFreightClient
from freight_pipeline.client import endpoints as ep
from freight_pipeline.client._core import Send, Sent
from freight_pipeline.client.hedge import HedgePolicy, Hedger, hedgeable, race
from freight_pipeline.client.limiter import AdaptiveLimit
from freight_pipeline.client.stats import ClientStats, StatsSnapshot
from freight_pipeline.simulator.server import RunningSimulator
from freight_pipeline_tests.client.conftest import client_kwargs
from freight_pipeline_tests.client.helpers import drained

SHIPMENT = "/service/shipment/{id}"


async def read_all(sim: RunningSimulator, ids: list[int], hedge: HedgePolicy | None,
                   limit: AdaptiveLimit | None = None) -> tuple[list[dict[str, Any]], StatsSnapshot, float]:
    async with AsyncFreightClient(**client_kwargs(sim), limit=limit or AdaptiveLimit.fixed(8), hedge=hedge) as client:
        began = time.monotonic()
        docs = list(await asyncio.gather(*(client.get_shipment_raw(i) for i in ids)))
        return docs, client.stats.snapshot(), time.monotonic() - began


async def listed_ids(sim: RunningSimulator, count: int) -> list[int]:
    async with AsyncFreightClient(**client_kwargs(sim)) as client:
        page = await client.lookup_shipments([], page_size=count, order_by=["ID"])
        return [int(row["id"]) for row in page.raw]


@pytest.fixture
def ids_and_truth(fresh_sim: RunningSimulator) -> tuple[list[int], list[dict[str, Any]]]:
    ids = asyncio.run(listed_ids(fresh_sim, 120))
    truth, _, _ = asyncio.run(read_all(fresh_sim, ids, None))
    fresh_sim.reset_stats()
    return ids, truth


def test_slow_reads_get_a_copy_that_wins_with_the_exact_answer(
    fresh_sim: RunningSimulator, ids_and_truth: tuple[list[int], list[dict[str, Any]]]
) -> None:
    ids, truth = ids_and_truth
    fresh_sim.set_faults(tail_rate=0.1, tail_ms=3000, tail_kinds=["shipment"], seed=11)
    # the deadline from the median: a tail of 10 % is above the default p95, which the reads sent before the
    # warm-up (hedged by no one) reach once they answer before about 20 times as many fast ones did, as on a
    # busy machine (1 copy sent where 5 are asserted: the CI of f8b6af9)
    policy = HedgePolicy(share=0.3, warm_up=5, percentile=0.5)
    docs, made, seconds = asyncio.run(read_all(fresh_sim, ids + ids, policy))
    assert docs == truth + truth  # exact, whichever copy answered
    assert made.hedges.get("shipment.retrieve", 0) >= 5
    assert made.hedges_won.get("shipment.retrieve", 0) >= 5
    assert made.requests == len(ids) * 2 + made.hedges["shipment.retrieve"] + made.token_requests
    figures = made.hedge_figures()
    assert figures["hedges_sent"] == sum(made.hedges.values())
    assert figures["latency_ms"]["shipment.retrieve"]["calls"] == 2 * len(ids)
    # the simulator saw every copy (a cancelled loser is still answered there, to nobody, once its tail has
    # passed: counted then; 17 of 23 were still sleeping when counted at once, in the CI of 6a5a101)
    drained(fresh_sim)
    assert fresh_sim.request_count(SHIPMENT) >= len(ids) * 2 + made.hedges["shipment.retrieve"] - 8
    print(f"\ntail 10 % at 3 s: {2 * len(ids)} reads in {seconds:.1f} s, hedges {figures['hedges_sent']} "
          f"won {figures['hedges_won']}, latency {figures['latency_ms']['shipment.retrieve']}")


def test_without_a_tail_almost_no_read_is_hedged(
    fresh_sim: RunningSimulator, ids_and_truth: tuple[list[int], list[dict[str, Any]]]
) -> None:
    ids, truth = ids_and_truth
    docs, made, _ = asyncio.run(read_all(fresh_sim, ids * 3, HedgePolicy(share=0.5)))  # a budget far above
    assert docs == truth * 3
    reads = 3 * len(ids)
    assert sum(made.hedges.values()) <= 0.03 * reads, made.hedges


def test_hedging_off_sends_no_copy(
    fresh_sim: RunningSimulator, ids_and_truth: tuple[list[int], list[dict[str, Any]]]
) -> None:
    ids, truth = ids_and_truth
    fresh_sim.set_faults(tail_rate=0.1, tail_ms=300, tail_kinds=["shipment"], seed=11)
    for policy in (None, HedgePolicy(share=0.0)):
        fresh_sim.reset_stats()
        docs, made, _ = asyncio.run(read_all(fresh_sim, ids, policy))
        assert docs == truth
        assert made.hedges == {} and made.requests == len(ids) + made.token_requests
        assert fresh_sim.request_count(SHIPMENT) == len(ids)


def test_a_storm_of_429s_is_not_amplified(
    fresh_sim: RunningSimulator, ids_and_truth: tuple[list[int], list[dict[str, Any]]]
) -> None:
    ids, truth = ids_and_truth
    fresh_sim.set_faults(tail_rate=0.2, tail_ms=300, tail_kinds=["shipment"], rate_limit_rate=0.3,
                         retry_after_s=0, exempt_auth=True, seed=5)
    policy = HedgePolicy(share=0.5, warm_up=5)  # a budget far above the tail: only the 429s hold hedges back
    docs, made, _ = asyncio.run(read_all(fresh_sim, ids[:80], policy, AdaptiveLimit(8, 16, minimum=4)))
    assert docs == truth[:80]
    assert made.by_status.get(429, 0) > 10  # the storm happened
    assert sum(made.hedges.values()) <= 2, made.hedges  # ... and hedges stayed out of it
    assert made.requests == 80 + made.by_status[429] + sum(made.hedges.values()) + made.token_requests


def test_a_copy_takes_a_slot_of_the_limit(
    fresh_sim: RunningSimulator, ids_and_truth: tuple[list[int], list[dict[str, Any]]]
) -> None:
    ids, _ = ids_and_truth
    fresh_sim.set_faults(tail_rate=0.2, tail_ms=1000, tail_kinds=["shipment"], seed=3)
    limit = AdaptiveLimit.fixed(4)
    _, made, _ = asyncio.run(read_all(fresh_sim, ids, HedgePolicy(share=0.5, warm_up=5), limit))
    assert sum(made.hedges.values()) > 0
    # every copy waited for a slot like any request (one whose original answered first may never get one)
    assert len(ids) < limit.stats.acquisitions <= len(ids) + sum(made.hedges.values())
    assert limit.stats.mean_in_flight <= 4 and limit.in_flight == 0


def test_the_deadline_is_a_percentile_with_a_floor_and_the_budget_a_share() -> None:
    now = [100.0]
    pushed = [float("-inf")]
    policy = HedgePolicy(share=0.1, warm_up=20, floor_s=0.05, factor=1.0, quiet_s=2.0)
    hedger = Hedger(policy, lambda: pushed[0], lambda: now[0])
    for _ in range(19):
        hedger.learn("k", 0.010)
    assert hedger.deadline("k") is None  # still warming up
    hedger.learn("k", 0.010)
    assert hedger.deadline("k") == 0.05  # the floor: 10 ms answers are no tail
    for i in range(100):
        hedger.learn("k", 0.2 if i % 10 == 0 else 0.1)
    assert hedger.deadline("k") == pytest.approx(0.2)  # p95 of answers of which 10 % took 200 ms
    tripled = Hedger(HedgePolicy(), lambda: pushed[0], lambda: now[0])
    for i in range(100):
        tripled.learn("k", 0.2 if i % 10 == 0 else 0.1)
    assert tripled.deadline("k") == pytest.approx(0.6)  # the default: 3 x p95
    hedger.reads = 100
    assert hedger.may_hedge()
    hedger.sent = 10
    assert not hedger.may_hedge()  # the budget: 10 % of 100 reads
    hedger.sent = 0
    pushed[0] = 99.0
    assert not hedger.may_hedge()  # pushed back a second ago
    now[0] = 101.5
    assert hedger.may_hedge()
    assert hedgeable(ep.SHIPMENT_RETRIEVE) and hedgeable(ep.MEMO_LOOKUP) and hedgeable(ep.SHIPMENT_LOOKUP)
    assert not hedgeable(ep.SHIPMENT_EVENT_CREATE) and not hedgeable(ep.EFILE_DELETE)
    assert not hedgeable(ep.SHIPMENT_EVENT_UPDATE)  # a PUT: repeatable, but not a read


def test_a_read_cancelled_while_its_beaten_original_winds_down_ends_cancelled() -> None:
    """A read whose copy won and whose run is stopping meanwhile (cancelled while the beaten original
    still winds down) ends cancelled once the original ended: it does not hand the copy's answer on as if
    nothing happened, and leaves no request running behind it."""
    hedger = Hedger(HedgePolicy(share=1.0, warm_up=1, floor_s=0.01, factor=1.0), lambda: float("-inf"))
    hedger.learn(ep.SHIPMENT_RETRIEVE.name, 0.01)
    hedger.reads = 10
    send = Send(httpx.Request("GET", "http://127.0.0.1/service/shipment/1"), ep.SHIPMENT_RETRIEVE)
    ended: list[str] = []

    async def main() -> None:
        winding_down = asyncio.Event()

        async def attempt(send: Send, request: httpx.Request, urgent: bool,
                          left: Callable[[], object]) -> tuple[Sent, float]:
            left()
            if not urgent:  # the original: slow to answer, and slow to wind down once cancelled
                try:
                    await asyncio.sleep(10)
                except asyncio.CancelledError:
                    winding_down.set()
                    await asyncio.sleep(0.1)
                    ended.append("original")
                    raise
            return Sent(httpx.Response(200, json={"id": 1})), 0.0

        racing = asyncio.ensure_future(race(hedger, send, attempt, ClientStats()))
        await winding_down.wait()
        racing.cancel()
        with pytest.raises(asyncio.CancelledError):
            await racing

    asyncio.run(main())
    assert ended == ["original"] and hedger.sent == 1


@pytest.mark.parametrize("stalled", [False, True])
def test_a_read_past_its_deadline_for_a_stalled_event_loop_gets_no_copy(stalled: bool) -> None:
    """A deadline's timer that fires late (this process held the event loop) gives the read one deadline more
    before a copy; on time, the slow read gets its copy."""
    hedger = Hedger(HedgePolicy(share=1.0, warm_up=1, floor_s=0.01, factor=1.0), lambda: float("-inf"))
    hedger.learn(ep.SHIPMENT_RETRIEVE.name, 0.1)  # a deadline of 0.1 s
    hedger.reads = 10
    send = Send(httpx.Request("GET", "http://127.0.0.1/service/shipment/1"), ep.SHIPMENT_RETRIEVE)

    async def attempt(send: Send, request: httpx.Request, urgent: bool,
                      left: Callable[[], object]) -> tuple[Sent, float]:
        left()
        await asyncio.sleep(0.0 if urgent else 0.45)
        return Sent(httpx.Response(200, json={"id": 1})), 0.0

    async def main() -> None:
        racing = asyncio.ensure_future(race(hedger, send, attempt, ClientStats()))
        await asyncio.sleep(0.02)  # the request left; its deadline's timer is set
        if stalled:
            time.sleep(0.4)  # the event loop held past the deadline, as by a long synchronous step
        await racing

    asyncio.run(main())
    assert hedger.sent == (0 if stalled else 1)
