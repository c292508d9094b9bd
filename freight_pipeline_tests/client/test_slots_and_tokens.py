"""Waiting for a slot of the limit: the token is checked once a request holds its slot (a token that
expired, or came due for renewal, while it waited is renewed before it leaves), and the token call
itself never waits for (nor teaches) the limit."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from freight_pipeline.client import AsyncFreightClient, FreightClient
from freight_pipeline.client.limiter import AdaptiveLimit
from freight_pipeline.simulator.config import FaultConfig, SimulatorConfig
from freight_pipeline.simulator.server import RunningSimulator, running_simulator
from freight_pipeline_tests.client.helpers import FAST_RETRY

RETRIEVE = "/service/shipment/{id}"
LIFETIME_S = 4.0
"""The simulator's tokens live 4 s (their ``exp`` is rounded up to a whole second: 4 to 5 s)."""
LATENCY_MS = 80
"""The simulator waits this long before it checks the token: the refresh margin must cover it and the moments
between the client's check and the service's (the client renews ``min(margin, lifetime / 10)`` = 0.4 to 0.5 s
before expiry: 320 ms or more to spare; with tokens of 2 s, 120 ms, which a loaded CI machine exceeded once
(2026-12-05: one request left with a token that expired on its way); with tokens of 1 s, 20 ms)."""
REQUESTS = 75
"""One at a time, 80 ms each: the last ones are sent 6 s after the first, past the first token's expiry."""


@pytest.fixture(scope="module")
def short_tokens() -> Iterator[RunningSimulator]:
    faults = FaultConfig(latency_ms=LATENCY_MS, paths=frozenset({RETRIEVE}))
    config = SimulatorConfig(token_lifetime_s=LIFETIME_S, faults=faults)
    with running_simulator(config, shipments=REQUESTS + 5, seed=5) as sim:
        yield sim


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_token_that_expired_while_the_request_waited_for_its_slot_is_renewed_before_it_leaves(
    short_tokens: RunningSimulator, kind: str
) -> None:
    sim = short_tokens
    sim.reset_stats()
    ids = sim.store.reader.live_shipment_ids()[:REQUESTS]
    assert len(ids) == REQUESTS
    kwargs: dict[str, Any] = {"retry": FAST_RETRY, "token_refresh_margin": 60.0}
    started = time.monotonic()
    if kind == "sync":
        with FreightClient(sim.base_url, sim.username, sim.password, max_concurrency=1, **kwargs) as client:
            with ThreadPoolExecutor(REQUESTS) as pool:  # all wait for the one slot at once
                got = list(pool.map(lambda i: client.get_shipment_raw(i)["id"], ids))
            stats = client.stats.snapshot()
    else:

        async def scenario() -> tuple[list[int], Any]:
            async with AsyncFreightClient(
                sim.base_url, sim.username, sim.password, limit=AdaptiveLimit.fixed(1), **kwargs
            ) as client:
                docs = await asyncio.gather(*(client.get_shipment_raw(i) for i in ids))
                return [d["id"] for d in docs], client.stats.snapshot()

        got, stats = asyncio.run(scenario())
    assert got == ids
    assert time.monotonic() - started >= REQUESTS * LATENCY_MS / 1000 * 0.9  # they did wait, one at a time
    assert sim.request_count(status=401) == 0  # no request left with an expired token
    assert stats.reauthentications == 0 and stats.retries == 0
    assert stats.token_requests >= 2  # renewed while requests waited for the slot
    assert sim.request_count(RETRIEVE) == REQUESTS


def test_the_token_call_does_not_wait_for_a_slot_nor_count_in_latency() -> None:
    """A business request holds the only slot while it needs a token: the token call goes out at once
    (were it to wait for a slot, the two would wait for each other for ever)."""
    limit = AdaptiveLimit(1, 4)
    seen: list[str] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        seen.append(f"{request.url.path} in flight {limit.in_flight}")
        if request.url.path == "/auth/token":
            return httpx.Response(200, json={"access_token": "tok-1", "expires_in": 3600})
        await asyncio.sleep(0.01)
        return httpx.Response(200, json={"id": 1})

    async def scenario() -> None:
        async with AsyncFreightClient(
            "http://freight.test", "demo", "pw", limit=limit, transport=httpx.MockTransport(handler)
        ) as client:
            await asyncio.wait_for(client.get_shipment_raw(1), 5)
            await asyncio.wait_for(client.get_shipment_raw(1), 5)

    asyncio.run(scenario())
    # the token call went out while the business request held the one slot: outside the limit
    assert seen == ["/auth/token in flight 1", "/service/shipment/1 in flight 1", "/service/shipment/1 in flight 1"]
    assert limit.stats.acquisitions == 2
    assert set(limit.baselines()) == {"shipment.retrieve"}
