"""Over HTTP against a service that refuses requests beyond an in-flight limit (the simulator's
``max_in_flight``: 429 at once, with ``Retry-After: 1``): the adaptive limit the sync uses settles at
the service's limit, every call completes, and the 429s stay few (the service's measure of where
the limit settled). Run with ``-s`` to see the figures of each case (429 count, mean in flight,
seconds)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from freight_pipeline.client import AsyncFreightClient
from freight_pipeline.simulator.config import FaultConfig, SimulatorConfig
from freight_pipeline.simulator.server import RunningSimulator, running_simulator
from freight_pipeline.sync.settings import SyncSettings

REQUESTS = 200
"""Calls per case, all at once (``asyncio.gather``), as the sync fetches shipments' parts."""


def slow_start_overshoot(service_limit: int) -> int:
    """The most refusals of the one round that crosses the service's limit in slow start: the limit
    starts at 16 and doubles each round (up to 64) until the first push-back, so that round sends at
    most ``max(16, 2 * service_limit)`` requests at once, before any answer can tell it to stop."""
    settings = SyncSettings()
    return max(0, min(settings.concurrency, max(settings.initial_concurrency, 2 * service_limit)) - service_limit)


@pytest.fixture(scope="module")
def limited() -> Iterator[RunningSimulator]:
    with running_simulator(SimulatorConfig(faults=FaultConfig(max_in_flight=12)), shipments=100, seed=9) as sim:
        yield sim


@pytest.mark.parametrize("latency_ms", [0, 30, 100])
@pytest.mark.parametrize("max_in_flight", [4, 12, 40])
def test_calls_complete_under_a_service_in_flight_limit_with_few_429s(
    limited: RunningSimulator, max_in_flight: int, latency_ms: int
) -> None:
    sim = limited
    sim.reset_faults(FaultConfig(max_in_flight=max_in_flight, latency_ms=latency_ms, retry_after_s=1))
    sim.reset_stats()
    ids = sim.store.reader.live_shipment_ids()
    ids = (ids * (REQUESTS // len(ids) + 1))[:REQUESTS]
    limit = SyncSettings().in_flight_limit()  # what a sync run uses: adaptive, from 16 up to 64

    async def scenario() -> list[object]:
        async with AsyncFreightClient(sim.base_url, sim.username, sim.password, limit=limit) as client:
            results = await asyncio.gather(*(client.get_shipment_raw(i) for i in ids), return_exceptions=True)
            assert client.stats.by_status.get(429, 0) == sim.request_count(status=429)
            return results

    started = time.monotonic()
    results = asyncio.run(scenario())
    seconds = time.monotonic() - started
    refused = sim.request_count(status=429)
    print(
        f"\nmax_in_flight {max_in_flight:>2}, {latency_ms:>3} ms: {REQUESTS} calls in {seconds:.2f} s, "
        f"{refused} x 429, mean in flight {limit.stats.mean_in_flight:.1f} (limit mean {limit.stats.mean:.1f}, "
        f"last {limit.limit:.1f}, {limit.stats.decreases} decreases)"
    )
    failed = [r for r in results if isinstance(r, BaseException)]
    assert not failed, failed[:3]
    assert [r["id"] for r in results] == ids  # type: ignore[index]
    assert refused <= slow_start_overshoot(max_in_flight) + REQUESTS // 10  # then a few probes at most
    if refused:  # the first refusal is never stale: the limit came down
        assert limit.stats.decreases >= 1 and limit.stats.lowest < limit.stats.highest
    # Where the limit settles is judged by the service, by the refusals above: a limit that stayed over
    # the service's would be refused on every probe. Not by the count on this side: on a loaded machine
    # requests wait in transit (sent here, not yet admitted there), and a CI run counted a mean of 41.4
    # in flight against a service limit of 40 with two refusals.
