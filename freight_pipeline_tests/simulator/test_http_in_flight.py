"""``max_in_flight``: requests beyond the limit of concurrent ones are answered 429 at once."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import httpx
import pytest

from freight_pipeline.simulator.config import FaultConfig
from freight_pipeline.simulator.faults import DROPPED
from freight_pipeline.simulator.server import RunningSimulator

MEMOS = "/service/shipment/memo"
LATENCY_MS = 1000


async def _concurrently(sim: RunningSimulator, count: int, path: str = MEMOS) -> list[tuple[httpx.Response, float]]:
    """``count`` requests sent at once, each on its own connection; (answer, seconds it took) each."""
    headers = {"Authorization": f"Bearer {sim.issue_token()}"}

    async def one() -> tuple[httpx.Response, float]:
        async with httpx.AsyncClient(base_url=sim.base_url, headers=headers, timeout=20.0) as client:
            started = time.perf_counter()
            response = await client.get(path)
            return response, time.perf_counter() - started

    return list(await asyncio.gather(*(one() for _ in range(count))))


def _limited(sim_factory: Callable[..., RunningSimulator], **faults: object) -> RunningSimulator:
    return sim_factory(faults=FaultConfig(latency_ms=LATENCY_MS, retry_after_s=4, **faults), control=True)


@pytest.mark.parametrize("retry_after", [True, False])
def test_requests_beyond_the_limit_are_refused_at_once(
    sim_factory: Callable[..., RunningSimulator], retry_after: bool
) -> None:
    limit, extra = 3, 2
    sim = _limited(sim_factory, max_in_flight=limit, in_flight_retry_after=retry_after)
    answers = asyncio.run(_concurrently(sim, limit + extra))

    refused = [(r, s) for r, s in answers if r.status_code == 429]
    served = [(r, s) for r, s in answers if r.status_code == 200]
    assert (len(refused), len(served)) == (extra, limit)
    for response, _ in refused:
        assert response.json()["status"] == 429
        assert "in flight" in response.json()["message"]
        assert response.headers.get("Retry-After") == ("4" if retry_after else None)
    # refused at once: before the latency of the admitted ones ran out
    assert max(s for _, s in refused) < min(s for _, s in served)
    assert min(s for _, s in served) >= LATENCY_MS / 1000 * 0.9

    assert sim.request_count(MEMOS, status=429) == extra
    assert sim.request_count(MEMOS, status=200) == limit
    stats = httpx.get(f"{sim.base_url}/_control/stats").json()
    assert (stats["in_flight"], stats["in_flight_peak"], stats["in_flight_refused"]) == (0, limit, extra)
    assert stats["total"] == limit + extra
    assert {"method": "GET", "path": MEMOS, "status": 429, "count": extra} in stats["requests"]

    # once they are done, requests are admitted again; DELETE clears the figures
    assert [r.status_code for r, _ in asyncio.run(_concurrently(sim, limit))] == [200] * limit
    cleared = httpx.delete(f"{sim.base_url}/_control/stats").json()
    assert (cleared["in_flight_peak"], cleared["in_flight_refused"], cleared["total"]) == (0, 0, 0)


def test_without_a_limit_the_peak_is_still_counted(sim_factory: Callable[..., RunningSimulator]) -> None:
    sim = _limited(sim_factory)
    answers = asyncio.run(_concurrently(sim, 4))
    assert [r.status_code for r, _ in answers] == [200] * 4
    assert sim.stats.in_flight() == {"in_flight": 0, "in_flight_peak": 4, "in_flight_refused": 0}


@pytest.mark.parametrize(("exempt", "refused"), [(False, 2), (True, 0)])
def test_the_token_endpoint_counts_unless_exempt(
    sim_factory: Callable[..., RunningSimulator], exempt: bool, refused: int
) -> None:
    sim = _limited(sim_factory, max_in_flight=1, exempt_auth=exempt)

    async def tokens() -> list[int]:
        body = {"username": sim.username, "password": sim.password}
        async with httpx.AsyncClient(base_url=sim.base_url, timeout=20.0) as client:
            answers = await asyncio.gather(*(client.post("/auth/token", json=body) for _ in range(3)))
        return sorted(a.status_code for a in answers)

    assert asyncio.run(tokens()) == sorted([200] * (3 - refused) + [429] * refused)
    assert sim.stats.in_flight()["in_flight_refused"] == refused


def test_errors_and_dropped_connections_leave_the_count(sim_factory: Callable[..., RunningSimulator]) -> None:
    sim = sim_factory(faults=FaultConfig(max_in_flight=1))
    headers = {"Authorization": f"Bearer {sim.issue_token()}"}
    with httpx.Client(base_url=sim.base_url, headers=headers) as client:
        assert client.get("/service/shipment/999999999").status_code == 404
        sim.script_fault("drop", path=MEMOS)
        with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
            client.get(MEMOS)
        sim.script_fault("server_error", path=MEMOS)
        assert client.get(MEMOS).status_code == 503
        assert client.get(MEMOS).status_code == 200
    assert sim.request_count(MEMOS, status=DROPPED) == 1
    assert sim.stats.in_flight() == {"in_flight": 0, "in_flight_peak": 1, "in_flight_refused": 0}


def test_max_in_flight_is_validated(sim_factory: Callable[..., RunningSimulator]) -> None:
    with pytest.raises(ValueError, match="max_in_flight must be at least 1"):
        FaultConfig(max_in_flight=0)
    sim = sim_factory(control=True)
    base = f"{sim.base_url}/_control/faults"
    assert httpx.put(base, json={"max_in_flight": "2"}).status_code == 400
    assert httpx.put(base, json={"in_flight_retry_after": 0}).status_code == 400
    answer = httpx.post(base, json={"max_in_flight": 2, "in_flight_retry_after": False}).json()
    assert (answer["max_in_flight"], answer["in_flight_retry_after"]) == (2, False)
