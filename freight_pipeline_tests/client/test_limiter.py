"""The limit on requests in flight: fixed, or adaptive (AIMD) on push-back and latency."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Iterator

import httpx
import pytest

from freight_pipeline.client import AsyncFreightClient
from freight_pipeline.client.limiter import MAX_PROBE_ROUNDS, AdaptiveLimit, Signal, load_signal
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


class Requests:
    """Requests started and answered one by one, in any order, with the virtual clock: each holds its
    slot until ``answer`` is called, so a test says exactly what was in flight when each was sent."""

    def __init__(self, limit: AdaptiveLimit, clock: Clock) -> None:
        self.limit, self.clock = limit, clock
        self._pending: list[tuple[asyncio.Future[tuple[Signal, float]], asyncio.Task[None]]] = []

    async def send(self, count: int = 1) -> None:
        """Start ``count`` requests; each takes its slot (they must not have to wait)."""
        for _ in range(count):
            answered: asyncio.Future[tuple[Signal, float]] = asyncio.get_running_loop().create_future()
            task = asyncio.create_task(self._request(answered))
            self._pending.append((answered, task))
            await asyncio.sleep(0)
            assert not task.done()

    async def _request(self, answered: asyncio.Future[tuple[Signal, float]]) -> None:
        async with self.limit.slot("get") as said:
            signal, latency = await answered
            self.clock.now += latency
            said(signal)

    async def answer(self, signal: Signal = Signal.OK, latency: float = 0.01, *, first: bool = True) -> None:
        """Answer the oldest (or the newest) request still in flight."""
        answered, task = self._pending.pop(0 if first else -1)
        answered.set_result((signal, latency))
        await asyncio.wait_for(task, 1)  # a request still waiting for its slot would never end

    async def answer_all(self, signal: Signal = Signal.OK) -> None:
        while self._pending:
            await self.answer(signal)


def test_push_back_takes_the_limit_to_half_the_number_in_flight_when_the_refused_request_was_sent() -> None:
    clock = Clock()
    limit = AdaptiveLimit(16, 64, clock=clock)

    async def scenario() -> None:
        requests = Requests(limit, clock)
        await requests.send(10)  # demand well below the limit: the limit is not what holds them back
        await requests.answer(Signal.OVERLOAD, first=False)  # the 10th, sent with 10 in flight
        assert limit.limit == 5.0 and limit.ceiling == 10  # half of 10, not half of 16
        await requests.answer_all()

    asyncio.run(scenario())
    assert limit.stats.decreases == 1


def test_a_round_of_refusals_shrinks_the_limit_once_and_the_next_round_again() -> None:
    clock = Clock()
    limit = AdaptiveLimit(16, 64, minimum=2, clock=clock)

    async def scenario() -> None:
        requests = Requests(limit, clock)
        await requests.send(16)
        for _ in range(6):  # a burst of refusals of requests all sent before the first decrease: one decrease
            await requests.answer(Signal.OVERLOAD, first=False)  # the service refuses the newcomers
        assert limit.limit == 8.0 and limit.stats.decreases == 1 and limit.stats.stale_overloads == 5
        await requests.answer_all()
        await requests.send(8)  # the next round, sent after that decrease: its refusal counts (no cooldown)
        await requests.answer(Signal.OVERLOAD, first=False)
        assert limit.limit == 4.0 and limit.stats.decreases == 2
        await requests.answer_all(Signal.OVERLOAD)  # the rest of that round: sent before, ignored
        assert limit.limit == 4.0
        for _ in range(5):  # refusal upon refusal, each of a new round: down to the minimum, not below
            await requests.send(1)
            await requests.answer(Signal.OVERLOAD)
        assert limit.limit == 2.0

    asyncio.run(scenario())
    assert (limit.stats.decreases, limit.stats.overloads, limit.stats.stale_overloads) == (3, 19, 12)


def test_the_first_push_back_ends_slow_start() -> None:
    clock = Clock()
    limit = AdaptiveLimit(4, 1000, clock=clock)

    async def scenario() -> None:
        requests = Requests(limit, clock)
        await requests.send(4)
        for _ in range(4):  # slow start: +1 per answer while the limit holds requests back
            await requests.answer()
            await requests.send(2)
        assert limit.limit == 8.0
        await requests.answer(Signal.OVERLOAD, first=False)  # sent with 8 in flight
        assert limit.limit == 4.0
        await requests.answer_all()
        for _ in range(8):  # now additive: a slot per round of `limit` answers
            await requests.send(4)
            await requests.answer_all()
        assert 5.0 <= limit.limit <= 7.0

    asyncio.run(scenario())


async def rounds_until(requests: Requests, limit: AdaptiveLimit, level: float) -> int:
    """Rounds of ``limit`` answers, with more requests waiting for slots all along, until the limit
    reaches ``level``; how many it took."""
    count = 0
    await requests.send(int(limit.limit))  # a backlog: the limit is what holds requests back
    while limit.limit < level:
        count += 1
        answers = int(limit.limit)
        await requests.send(answers)
        for _ in range(answers):
            await requests.answer()
        assert count < 1000
    await requests.answer_all()
    return count


async def refused_at(requests: Requests, level: int) -> None:
    """``level`` requests in flight, the last one refused, the others answered."""
    assert requests.limit.in_flight + level <= int(requests.limit.limit)
    await requests.send(level)
    await requests.answer(Signal.OVERLOAD, first=False)
    await requests.answer_all()


def test_after_push_back_the_limit_climbs_to_just_below_the_ceiling_then_probes_slowly() -> None:
    clock = Clock()
    limit = AdaptiveLimit(16, 64, clock=clock)

    async def scenario() -> None:
        requests = Requests(limit, clock)
        await refused_at(requests, 13)
        assert limit.limit == 6.5 and limit.ceiling == 13
        assert await rounds_until(requests, limit, 12.0) <= 8  # about a slot per round up to one below the ceiling
        assert 3 <= await rounds_until(requests, limit, 13.0) <= 5  # then one per `probe_rounds` (4) rounds
        await refused_at(requests, 13)  # refused at the same level again
        assert limit.limit == 6.5 and limit.probe_rounds == 8
        await rounds_until(requests, limit, 12.0)
        assert 7 <= await rounds_until(requests, limit, 13.0) <= 9  # probing more rarely
        for _ in range(5):  # refused again and again at (or below) the ceiling
            await refused_at(requests, int(limit.limit))
        assert limit.probe_rounds == MAX_PROBE_ROUNDS  # doubled each time, up to its maximum

    asyncio.run(scenario())


def test_growing_two_above_the_ceiling_without_push_back_forgets_it() -> None:
    clock = Clock()
    limit = AdaptiveLimit(16, 64, clock=clock)

    async def scenario() -> None:
        requests = Requests(limit, clock)
        await refused_at(requests, 8)
        assert limit.ceiling == 8 and limit.limit == 4.0
        await rounds_until(requests, limit, 7.0)
        assert limit.ceiling == 8
        await rounds_until(requests, limit, 10.0)  # the service takes more now: no push-back at 8, 9, 10
        assert limit.ceiling is None and limit.probe_rounds == 4
        assert await rounds_until(requests, limit, 15.0) <= 7  # about a slot per round again

    asyncio.run(scenario())


def test_latency_is_judged_per_kind_so_a_fast_kind_never_makes_a_slow_one_look_congested() -> None:
    clock = Clock()
    limit = AdaptiveLimit(8, 32, clock=clock)

    async def answer_kind(kind: str, latency: float) -> None:
        async with limit.slot(kind) as said:
            await asyncio.sleep(0)
            clock.now += latency
            said(Signal.OK)

    async def scenario() -> None:
        for _ in range(100):
            await answer_kind("token-like", 0.002)  # fast answers of one kind
            await answer_kind("document", 0.100)  # and slow, steady answers of another
        assert limit.stats.decreases == 0 and limit.limit == 8.0
        assert limit.baselines() == pytest.approx({"token-like": 0.002, "document": 0.100})
        for _ in range(30):
            await answer_kind("document", 0.500)  # the slow kind now queues somewhere
        assert limit.stats.decreases >= 1

    asyncio.run(scenario())


def test_latency_decreases_wait_for_the_cooldown() -> None:
    clock = Clock()
    limit = AdaptiveLimit(16, 32, clock=clock, cooldown_s=1.0)

    async def scenario() -> None:
        for _ in range(50):
            await answer(limit, clock, 0.010)
        for _ in range(8):  # 0.92 virtual seconds of slow answers: one decrease however slow they stay
            await answer(limit, clock, 0.115)
        assert limit.stats.decreases == 1 and limit.limit == pytest.approx(16 * 0.9)
        for _ in range(10):  # 1.15 s more: one more
            await answer(limit, clock, 0.115)
        assert limit.stats.decreases == 2

    asyncio.run(scenario())


def test_limit_stats_tell_the_mean_in_flight() -> None:
    clock = Clock()
    limit = AdaptiveLimit.fixed(4)

    async def scenario() -> None:
        requests = Requests(limit, clock)
        await requests.send(4)  # 1, 2, 3, 4 in flight as each was sent
        await requests.answer_all()
        await requests.send(2)  # 1, 2
        await requests.answer_all()

    asyncio.run(scenario())
    stats = limit.stats
    assert (stats.acquisitions, stats.in_flight_sum) == (6, 13)
    assert stats.mean_in_flight == pytest.approx(13 / 6) and stats.mean == 4.0


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
        (httpx.Response(503, headers={"Retry-After": "1"}), Signal.OVERLOAD),
        (httpx.Response(429, headers={"Retry-After": "1"}), Signal.OVERLOAD),
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
            ids = rate_limited.store.reader.live_shipment_ids()
            await asyncio.gather(*(client.get_shipment_raw(i) for i in ids * 10))

    asyncio.run(scenario())
    assert limit.stats.decreases >= 1 and limit.stats.lowest < 16
    assert rate_limited.stats.count(status=429) > 0
