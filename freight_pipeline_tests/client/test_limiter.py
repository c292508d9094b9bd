"""The limit on requests in flight: fixed, or adaptive (AIMD) on push-back and latency."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Iterator

import httpx
import pytest

from freight_pipeline.client import AsyncFreightClient
from freight_pipeline.client.limiter import AdaptiveLimit, Signal, load_signal
from freight_pipeline.client.retry import RetryPolicy
from freight_pipeline.simulator.config import FaultConfig, SimulatorConfig
from freight_pipeline.simulator.server import RunningSimulator, running_simulator


class Clock:
    """Virtual time: every request (task) has its own, so each answer takes exactly the latency it
    is given, however many others are in flight; ``now`` sets the time of the calling task."""

    def __init__(self) -> None:
        self._now: contextvars.ContextVar[float] = contextvars.ContextVar("now", default=0.0)

    @property
    def now(self) -> float:
        return self._now.get()

    @now.setter
    def now(self, value: float) -> None:
        self._now.set(value)

    def __call__(self) -> float:
        return self._now.get()


async def answer(limit: AdaptiveLimit, clock: Clock, latency: float, signal: Signal = Signal.OK) -> None:
    async with limit.slot() as said:
        await asyncio.sleep(0)  # the request is out: others may take their slots meanwhile
        clock.now += latency
        said(signal)


async def saturate(limit: AdaptiveLimit, clock: Clock, rounds: int, latency: float) -> None:
    """``rounds`` rounds of 64 requests at once, more than the limit lets in: they wait for slots."""
    for _ in range(rounds):
        await asyncio.gather(*(answer(limit, clock, latency) for _ in range(64)))


def test_a_fixed_limit_never_lets_more_in_and_never_moves() -> None:
    limit = AdaptiveLimit.fixed(3)
    most = [0]

    async def request() -> None:
        async with limit.slot() as said:
            most[0] = max(most[0], limit.in_flight)
            await asyncio.sleep(0.001)
            said(Signal.OVERLOAD)

    async def scenario() -> None:
        await asyncio.gather(*(request() for _ in range(30)))

    asyncio.run(scenario())
    assert most[0] == 3 and limit.limit == 3 and limit.in_flight == 0


def test_the_limit_grows_while_latency_holds_and_stops_at_its_maximum() -> None:
    clock = Clock()
    limit = AdaptiveLimit(4, 12, clock=clock)
    asyncio.run(saturate(limit, clock, rounds=40, latency=0.05))
    assert limit.limit == 12 and limit.stats.increases > 0


def test_until_the_first_push_back_the_limit_grows_by_one_per_answer_then_by_one_per_round() -> None:
    clock = Clock()
    limit = AdaptiveLimit(4, 1000, clock=clock)

    async def answers(count: int) -> None:  # more demand than slots: requests wait for the limit
        await asyncio.gather(*(answer(limit, clock, 0.0) for _ in range(count)))

    async def scenario() -> None:
        await answers(100)
        assert limit.limit >= 30  # slow start: a slot more per answer while requests wait (additive: ~15)
        await answer(limit, clock, 0.0, Signal.OVERLOAD)
        halved = limit.limit
        await answers(200)
        # additive increase: one slot per round of `limit` answers, so about 200 / limit slots
        assert halved + 1 <= limit.limit <= halved + 200 / halved + 1

    asyncio.run(scenario())


def test_push_back_halves_the_limit_once_per_cooldown_never_below_the_minimum() -> None:
    clock = Clock()
    limit = AdaptiveLimit(16, 32, minimum=2, clock=clock)

    async def scenario() -> None:
        for _ in range(5):  # a burst of 429s within one cooldown: one halving
            await answer(limit, clock, 0.001, Signal.OVERLOAD)
        assert limit.limit == 8
        for _ in range(10):  # push-back that goes on: halved each cooldown, down to the minimum
            clock.now += limit.cooldown_s
            await answer(limit, clock, 0.001, Signal.OVERLOAD)

    asyncio.run(scenario())
    assert limit.limit == 2 and limit.stats.decreases == 3  # 16 -> 8 -> 4 -> 2


def test_rising_latency_shrinks_the_limit_and_neutral_answers_teach_nothing() -> None:
    clock = Clock()
    limit = AdaptiveLimit(16, 32, clock=clock)

    async def scenario() -> None:
        for _ in range(300):
            await answer(limit, clock, 0.050)  # a steady 50 ms
        before = limit.limit
        for _ in range(20):
            await answer(limit, clock, 0.500)  # requests start queueing somewhere
        assert limit.limit < before
        shrunk = limit.limit
        for _ in range(20):
            await answer(limit, clock, 5.0, Signal.NEUTRAL)
        assert limit.limit == shrunk

    asyncio.run(scenario())


def test_a_cancelled_waiter_passes_its_turn_on() -> None:
    limit = AdaptiveLimit.fixed(1)

    async def scenario() -> None:
        gate = asyncio.Event()

        async def holder() -> None:
            async with limit.slot():
                await gate.wait()

        held = asyncio.create_task(holder())
        await asyncio.sleep(0)
        cancelled = asyncio.create_task(answer(limit, Clock(), 0))
        waiting = asyncio.create_task(answer(limit, Clock(), 0))
        await asyncio.sleep(0)
        cancelled.cancel()
        gate.set()
        await held
        await asyncio.wait_for(waiting, 1)

    asyncio.run(scenario())
    assert limit.in_flight == 0


@pytest.mark.parametrize(
    ("outcome", "signal"),
    [
        (httpx.Response(200), Signal.OK),
        (httpx.Response(404), Signal.OK),
        (httpx.Response(500), Signal.OK),
        (httpx.Response(429), Signal.OVERLOAD),
        (httpx.Response(503), Signal.OVERLOAD),
        (httpx.ConnectError("refused"), Signal.OVERLOAD),
        (httpx.ReadTimeout("slow"), Signal.OVERLOAD),
        (httpx.RemoteProtocolError("cut"), Signal.NEUTRAL),
    ],
)
def test_what_an_answer_says_about_load(outcome: object, signal: Signal) -> None:
    assert load_signal(outcome) is signal


@pytest.fixture
def rate_limited() -> Iterator[RunningSimulator]:
    faults = FaultConfig(rate_limit_rate=0.3, retry_after_s=0, seed=3, exempt_auth=True)
    with running_simulator(SimulatorConfig(faults=faults), shipments=20, seed=3) as sim:
        yield sim


def test_a_rate_limited_service_brings_the_limit_down(rate_limited: RunningSimulator) -> None:
    limit = AdaptiveLimit(16, 64, minimum=2)
    retry = RetryPolicy(max_attempts=10, base_delay=0.001, max_delay=0.01)

    async def scenario() -> None:
        async with AsyncFreightClient(rate_limited.base_url, rate_limited.username, rate_limited.password,
                                      limit=limit, retry=retry) as client:
            ids = rate_limited.store.live_shipment_ids()
            await asyncio.gather(*(client.get_shipment_raw(i) for i in ids * 10))

    asyncio.run(scenario())
    assert limit.stats.decreases >= 1 and limit.stats.lowest < 16
    assert rate_limited.stats.count(status=429) > 0
