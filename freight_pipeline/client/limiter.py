"""How many requests may be in flight at once: a fixed number, or one that adapts (AIMD).

An adaptive limit grows while requests wait for it: by one request per answer until the service
first pushes back (slow start: it doubles each round), then by one request per round of answers
(additive increase). It shrinks (multiplicative decrease) when the service pushes back (429, 502,
503, 504, a timeout or refused connection) or when latency rises well above its usual level, so a
rate-limited or overloaded service is never hammered, and a service across the internet gets as
many requests in flight as it answers without slowing down. It stays within ``[minimum, maximum]``.
A fixed limit (``adaptive=False``) is a plain semaphore.

Push-back: each request remembers how many were in flight when it was sent (itself included) and
which decrease was the last one then. A push-back of a request sent before the last decrease says
nothing new (that decrease answered it) and is ignored; any other shrinks the limit at once to
``decrease_factor`` times the number in flight when the refused request was sent (or times the
limit, if lower). So the limit falls once per round of requests, as often as the service keeps
refusing, and a burst of refusals of one round halves it once, not to 1; nor do the other answers
of the requests sent before a decrease grow the limit again. That number in flight is
remembered as the *ceiling*: the limit grows back by one per round up to one below it, then only by
one per ``probe_rounds`` rounds while at or above it; a push-back again at (or below) one above the
ceiling doubles ``probe_rounds`` (up to ``MAX_PROBE_ROUNDS``), so the limit rests just below a
service's own limit and asks for more ever more rarely. Growing two above the ceiling without
push-back forgets it (the service takes more now).

Latency is judged per kind of request (``slot(kind)``; the clients pass the endpoint's name, and the
token call does not go through the limit at all): a moving average of the last few dozen answers of
that kind against the lowest latency seen for it (which drifts up slowly, so a service that became
slower for good is learnt): ``average > lowest * tolerance + slack`` means requests are queueing
somewhere (the service, a proxy, the network, or this process's own event loop when its CPU is the
bottleneck): back off by ``latency_decrease_factor``, at most once per ``cooldown_s`` (the average
trails the answers, so one rise would otherwise shrink it many times). A fast endpoint therefore
never makes a slow one look congested.
"""

from __future__ import annotations

import asyncio
import collections
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from enum import Enum
from typing import Any

import httpx

OVERLOAD_STATUSES = frozenset({429, 502, 503, 504})
WARM_UP = 20
"""Answers of a kind before its latency is judged (the first ones pay for new connections)."""
DRIFT_EVERY, DRIFT = 500, 1.05
"""The lowest latency seen rises by 5 % every 500 answers, so a lasting slowdown becomes the new normal."""
OVERLOAD_ERRORS = (httpx.ConnectError, httpx.ConnectTimeout, httpx.ReadTimeout, httpx.WriteTimeout, httpx.PoolTimeout)
PROBE_ROUNDS, MAX_PROBE_ROUNDS = 4, 64
"""Rounds per slot of growth at or above the ceiling: at first, and at most (doubled on each push-back
at the same level)."""


class Signal(Enum):
    """What one answer says about the load the service takes."""

    OK = "ok"
    """Answered (any status but those below): latency counts, the limit may grow."""
    OVERLOAD = "overload"
    """The service pushed back (429, 502, 503, 504, a timeout, a refused connection): shrink."""
    NEUTRAL = "neutral"
    """Nothing learnt (e.g. a 500 of one record, a request cancelled)."""


def load_signal(outcome: Any) -> Signal:
    """What one attempt's outcome (a response, a transport error, an unreadable body) says about load."""
    if isinstance(outcome, httpx.Response):
        return Signal.OVERLOAD if outcome.status_code in OVERLOAD_STATUSES else Signal.OK
    if isinstance(outcome, OVERLOAD_ERRORS):
        return Signal.OVERLOAD
    return Signal.NEUTRAL


@dataclass
class LimitStats:
    """What the limit did: its mean over all acquisitions, its range, how often it moved, and how
    many requests were in flight (itself included) as each one was sent."""

    acquisitions: int = 0
    limit_sum: float = 0.0
    in_flight_sum: int = 0
    lowest: float = float("inf")
    highest: float = 0.0
    increases: int = 0
    decreases: int = 0
    overloads: int = 0
    """Push-back signals received (429, 503, timeouts, ...), those ignored included."""
    stale_overloads: int = 0
    """Push-back of requests sent before the last decrease: ignored, that decrease answered them."""

    @property
    def mean(self) -> float:
        """The mean limit in force when a request was sent."""
        return self.limit_sum / self.acquisitions if self.acquisitions else 0.0

    @property
    def mean_in_flight(self) -> float:
        """The mean number of requests in flight (itself included) when a request was sent."""
        return self.in_flight_sum / self.acquisitions if self.acquisitions else 0.0


@dataclass
class _Latency:
    """The latency figures of one kind of request."""

    average: float
    lowest: float
    answers: int = 0


@dataclass(frozen=True)
class _Sent:
    """What a request found when it took its slot."""

    generation: int
    """Decreases so far: a push-back of a request sent before a later decrease is not news."""
    in_flight: int
    """Requests in flight, itself included."""
    at: float


class AdaptiveLimit:
    """An asyncio limit on requests in flight; ``async with limit.slot(kind) as done: ...; done(signal)``."""

    def __init__(
        self,
        initial: int,
        maximum: int,
        *,
        minimum: int = 1,
        adaptive: bool = True,
        decrease_factor: float = 0.5,
        latency_decrease_factor: float = 0.9,
        tolerance: float = 2.0,
        slack_s: float = 0.010,
        cooldown_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not 1 <= minimum <= initial <= maximum:
            raise ValueError(f"need 1 <= minimum <= initial <= maximum, got {minimum}, {initial}, {maximum}")
        if not 0 < decrease_factor < 1 or not 0 < latency_decrease_factor < 1:
            raise ValueError("decrease factors must be within (0, 1)")
        self.minimum, self.maximum, self.adaptive = minimum, maximum, adaptive
        self.limit = float(initial)
        self.in_flight = 0
        self.decrease_factor, self.latency_decrease_factor = decrease_factor, latency_decrease_factor
        self.tolerance, self.slack_s, self.cooldown_s = tolerance, slack_s, cooldown_s
        self._clock = clock
        self._latency: dict[str, _Latency] = {}
        self._generation = 0
        self._last_latency_decrease = float("-inf")
        self._slow_start = True
        self.ceiling: int | None = None
        """Requests in flight when the service last pushed back (None: not yet, or outgrown)."""
        self.probe_rounds = PROBE_ROUNDS
        self.last_push_back = float("-inf")
        """When (``clock``) the service last pushed back (any push-back signal, stale ones included)."""
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self.stats = LimitStats()

    @classmethod
    def fixed(cls, limit: int) -> AdaptiveLimit:
        return cls(limit, limit, minimum=limit, adaptive=False)

    def __repr__(self) -> str:
        kind = "adaptive" if self.adaptive else "fixed"
        return f"AdaptiveLimit({kind}, limit={self.limit:.1f}, range=[{self.minimum}, {self.maximum}])"

    def baselines(self) -> dict[str, float]:
        """The lowest latency seen (seconds, drifted) per kind of request: what each kind is judged against."""
        return {kind: seen.lowest for kind, seen in self._latency.items()}

    @asynccontextmanager
    async def slot(self, kind: str = "", urgent: bool = False) -> AsyncIterator[Callable[[Signal], None]]:
        """Hold one of the slots for the block; call the yielded function with what the answer said.

        ``kind`` names the kind of request (the clients pass the endpoint's name): latency is judged
        against the usual latency of the same kind. ``urgent``: wait ahead of the queue (a hedged
        read's copy, ``client.hedge``), still within the limit.
        """
        await self._acquire(urgent)
        sent = _Sent(self._generation, self.in_flight, self._clock())
        said: list[Signal] = []
        try:
            yield said.append
        finally:
            self._release(kind, said[-1] if said else Signal.NEUTRAL, sent)

    async def _acquire(self, urgent: bool = False) -> None:
        while self.in_flight >= int(self.limit):
            waiter = asyncio.get_running_loop().create_future()
            if urgent:
                self._waiters.appendleft(waiter)
            else:
                self._waiters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
                self._wake()  # a slot it was woken for goes to the next one
                raise
        self.in_flight += 1
        stats = self.stats
        stats.acquisitions += 1
        stats.limit_sum += self.limit
        stats.in_flight_sum += self.in_flight
        stats.lowest = min(stats.lowest, self.limit)
        stats.highest = max(stats.highest, self.limit)

    def _release(self, kind: str, signal: Signal, sent: _Sent) -> None:
        self.in_flight -= 1
        if signal is Signal.OVERLOAD:
            self.last_push_back = self._clock()
        if self.adaptive:
            self._adapt(kind, signal, sent)
        self._wake()

    def _wake(self) -> None:
        free = int(self.limit) - self.in_flight
        while free > 0 and self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                free -= 1

    def _adapt(self, kind: str, signal: Signal, sent: _Sent) -> None:
        if signal is Signal.OVERLOAD:
            self._push_back(sent)
            return
        if signal is not Signal.OK:
            return
        now = self._clock()
        if self._congested(kind, now - sent.at):
            if now - self._last_latency_decrease >= self.cooldown_s:
                self._last_latency_decrease = now
                self._decrease(self.limit * self.latency_decrease_factor)
        elif sent.generation == self._generation and self._binding():
            self._grow()  # not on answers of requests sent before the last push-back: they tell of the old level

    def _binding(self) -> bool:
        """Whether the limit is what holds requests back (and may still grow)."""
        return bool(self._waiters or self.in_flight + 1 >= int(self.limit)) and self.limit < self.maximum

    def _congested(self, kind: str, latency_s: float) -> bool:
        """Whether the answers of this kind take well longer than usual (after learning this one)."""
        seen = self._latency.get(kind)
        if seen is None:
            self._latency[kind] = _Latency(latency_s, latency_s, 1)
            return False
        seen.average += 0.1 * (latency_s - seen.average)
        seen.answers += 1
        if latency_s < seen.lowest:
            seen.lowest = latency_s
        elif seen.answers % DRIFT_EVERY == 0:
            seen.lowest *= DRIFT
        return seen.answers >= WARM_UP and seen.average > seen.lowest * self.tolerance + self.slack_s

    def _grow(self) -> None:
        """Slow start: +1 per answer; then +1 per round of ``limit`` answers, and near the ceiling one
        per ``probe_rounds`` rounds."""
        if self._slow_start:
            step = 1.0
        else:
            step = 1.0 / self.limit
            if self.ceiling is not None and self.limit + 1.0 >= self.ceiling:
                step /= self.probe_rounds
        self.limit = min(float(self.maximum), self.limit + step)
        self.stats.increases += 1
        if self.ceiling is not None and self.limit >= self.ceiling + 2:
            self.ceiling, self.probe_rounds = None, PROBE_ROUNDS  # the service takes more now

    def _push_back(self, sent: _Sent) -> None:
        self.stats.overloads += 1
        if sent.generation != self._generation:
            self.stats.stale_overloads += 1  # sent before the last decrease, which answered it
            return
        level = sent.in_flight
        if self.ceiling is not None and level <= self.ceiling + 1:
            self.probe_rounds = min(MAX_PROBE_ROUNDS, self.probe_rounds * 2)  # refused there again: ask more rarely
        self.ceiling = level
        self._slow_start = False
        self._generation += 1  # a new round: push-back of the requests sent until now is answered
        self._decrease(min(self.limit, float(level)) * self.decrease_factor)

    def _decrease(self, target: float) -> None:
        """Lower the limit to ``target``, not below the minimum."""
        lowered = max(float(self.minimum), target)
        if lowered < self.limit:
            self.limit = lowered
            self.stats.decreases += 1


class BlockingLimit:
    """The blocking client's limit on requests in flight: a fixed number of slots that threads wait
    for. The shape of :class:`AdaptiveLimit` (``fixed``, ``maximum``, ``slot(kind)`` yielding a function
    that takes the answer's signal), so both clients are one text (``scripts/unasync.py``)."""

    def __init__(self, maximum: int) -> None:
        if maximum < 1:
            raise ValueError(f"a limit needs at least one slot, got {maximum}")
        self.maximum = maximum
        self._slots = threading.BoundedSemaphore(maximum)

    @classmethod
    def fixed(cls, limit: int) -> BlockingLimit:
        return cls(limit)

    def __repr__(self) -> str:
        return f"BlockingLimit(fixed, limit={self.maximum})"

    @contextmanager
    def slot(self, kind: str = "", urgent: bool = False) -> Iterator[Callable[[Signal], None]]:
        """Hold one of the slots for the block (the kind, urgency and what the answer said are not
        used: the limit is fixed, its threads wait in no order)."""
        with self._slots:
            yield _ignore


def _ignore(signal: Signal) -> None:
    return None
