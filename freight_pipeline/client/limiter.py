"""How many requests may be in flight at once: a fixed number, or one that adapts (AIMD).

An adaptive limit grows while requests wait for it: by one request per answer until the service
first pushes back (slow start: it doubles each round), then by one request per round of answers
(additive increase) while latency holds. It shrinks by a factor (multiplicative decrease) when the
service pushes back (429, 502, 503, 504, a timeout or refused connection) or when latency rises
well above its long-run level, so a rate-limited or overloaded service is never hammered, and a
service across the internet gets as many requests in flight as it answers without slowing down.
It stays within ``[minimum, maximum]``. A fixed limit (``adaptive=False``) is a plain semaphore.

Latency is judged by a moving average of the last few dozen answers against the lowest latency
seen (which drifts up slowly, so a service that became slower for good is learnt):
``average > lowest * tolerance + slack`` means requests are queueing somewhere (the service, a
proxy, the network, or this process's own event loop when its CPU is the bottleneck): back off.
More requests in flight would then only wait longer, not finish sooner. Decreases happen at most
once per ``cooldown_s``, so one burst of errors halves the limit once, not to 1.
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
"""Answers before latency is judged (the first ones pay for new connections)."""
DRIFT_EVERY, DRIFT = 500, 1.05
"""The lowest latency seen rises by 5 % every 500 answers, so a lasting slowdown becomes the new normal."""
OVERLOAD_ERRORS = (httpx.ConnectError, httpx.ConnectTimeout, httpx.ReadTimeout, httpx.WriteTimeout, httpx.PoolTimeout)


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
    """What the limit did: its mean over all acquisitions, its range, and how often it moved."""

    acquisitions: int = 0
    limit_sum: float = 0.0
    lowest: float = float("inf")
    highest: float = 0.0
    increases: int = 0
    decreases: int = 0

    @property
    def mean(self) -> float:
        return self.limit_sum / self.acquisitions if self.acquisitions else 0.0


class AdaptiveLimit:
    """An asyncio limit on requests in flight; ``async with limit.slot() as done: ...; done(signal)``."""

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
        self.minimum, self.maximum, self.adaptive = minimum, maximum, adaptive
        self.limit = float(initial)
        self.in_flight = 0
        self.decrease_factor, self.latency_decrease_factor = decrease_factor, latency_decrease_factor
        self.tolerance, self.slack_s, self.cooldown_s = tolerance, slack_s, cooldown_s
        self._clock = clock
        self._short: float | None = None
        self._lowest: float | None = None
        self._answers = 0
        self._last_decrease = float("-inf")
        self._slow_start = True
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self.stats = LimitStats()

    @classmethod
    def fixed(cls, limit: int) -> AdaptiveLimit:
        return cls(limit, limit, minimum=limit, adaptive=False)

    def __repr__(self) -> str:
        kind = "adaptive" if self.adaptive else "fixed"
        return f"AdaptiveLimit({kind}, limit={self.limit:.1f}, range=[{self.minimum}, {self.maximum}])"

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[Callable[[Signal], None]]:
        """Hold one of the slots for the block; call the yielded function with what the answer said."""
        await self._acquire()
        started = self._clock()
        said: list[Signal] = []
        try:
            yield said.append
        finally:
            self._release(said[-1] if said else Signal.NEUTRAL, self._clock() - started)

    async def _acquire(self) -> None:
        while self.in_flight >= int(self.limit):
            waiter = asyncio.get_running_loop().create_future()
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
        stats.lowest = min(stats.lowest, self.limit)
        stats.highest = max(stats.highest, self.limit)

    def _release(self, signal: Signal, latency_s: float) -> None:
        self.in_flight -= 1
        if self.adaptive:
            self._adapt(signal, latency_s)
        self._wake()

    def _wake(self) -> None:
        free = int(self.limit) - self.in_flight
        while free > 0 and self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                free -= 1

    def _adapt(self, signal: Signal, latency_s: float) -> None:
        if signal is Signal.OVERLOAD:
            self._decrease(self.decrease_factor)
            return
        if signal is not Signal.OK:
            return
        self._short = latency_s if self._short is None else self._short + 0.1 * (latency_s - self._short)
        self._answers += 1
        if self._lowest is None or latency_s < self._lowest:
            self._lowest = latency_s
        elif self._answers % DRIFT_EVERY == 0:
            self._lowest *= DRIFT
        if self._answers >= WARM_UP and self._short > self._lowest * self.tolerance + self.slack_s:
            self._decrease(self.latency_decrease_factor)
        elif (self._waiters or self.in_flight + 1 >= int(self.limit)) and self.limit < self.maximum:
            # grow only while the limit is what holds requests back: until the first push-back +1 per
            # answer (slow start: doubling each round), then +1 per round of `limit` answers
            step = 1.0 if self._slow_start else 1.0 / self.limit
            self.limit = min(self.maximum, self.limit + step)
            self.stats.increases += 1

    def _decrease(self, factor: float) -> None:
        now = self._clock()
        if now - self._last_decrease < self.cooldown_s:
            return
        self._last_decrease = now
        self._slow_start = False
        lowered = max(float(self.minimum), self.limit * factor)
        if lowered < self.limit:
            self.limit = lowered
            self.stats.decreases += 1


class BlockingLimit:
    """The blocking client's limit on requests in flight: a fixed number of slots that threads wait
    for. The shape of :class:`AdaptiveLimit` (``fixed``, ``maximum``, ``slot()`` yielding a function
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
    def slot(self) -> Iterator[Callable[[Signal], None]]:
        """Hold one of the slots for the block (what the answer said is not used: the limit is fixed)."""
        with self._slots:
            yield _ignore


def _ignore(signal: Signal) -> None:
    return None
