"""Hedged reads: a read that has not answered within the usual time of its kind gets one copy.

Dean and Barroso, "The Tail at Scale" (CACM 2013): most answers come in milliseconds, a few take
seconds, and a run that waits for every one of them waits for the slowest. A read (a GET, or a
lookup, which only reads: ``Endpoint.retry_safe``) still unanswered after the deadline of its kind
is sent once more; the first good answer (2xx) wins and the other request is cancelled. When the
first to end failed, the other is waited for: the retry policy sees a failure only when both failed
(the original's outcome, so retries behave as without hedging).

The deadline of a kind (the endpoint's name) is ``factor`` (3) times a high percentile (``percentile``,
p95) of the latencies of its last ``window`` answers, never below ``floor_s`` (100 ms); before
``warm_up`` answers of a kind there is no deadline and no hedge. The factor keeps a clean run nearly
free of copies (the p95 alone is passed by one read in twenty by definition, and a busy event loop
stretches the body of the distribution, not only its tail), while a tail of seconds is still cut
to a fraction of a second. The deadline counts from the moment the request left (it held its
slot of the in-flight limit), so a request that waited for a slot is not hedged for that wait; and
when its timer fires late (the event loop itself was stalled: this process busy, or its core taken),
the read waits one deadline more before its copy, as every read in flight passed its deadline at
once for the client's own stall, their answers most likely waiting in the socket.

Hedges are bounded three ways, so that they never add load a service refuses:

* a copy takes a slot of the same :class:`~freight_pipeline.client.limiter.AdaptiveLimit` as every
  request (ahead of the queue, but within the limit): what it answers (a 429, a 503) teaches the
  limit as any answer does;
* no hedge is sent while the service pushes back: within ``quiet_s`` of the limit's last push-back
  signal (429, 502, 503, 504, a timeout), so a storm of 429s is not amplified;
* at most ``share`` of the reads sent are copies (a budget: a slow service does not double its load).

``share`` 0 turns hedging off (``FREIGHT_HEDGE=0``; ``sync.settings.SyncSettings.hedge_share``).
What it did is counted in :class:`~freight_pipeline.client.stats.ClientStats` (``hedges``,
``hedges_won`` per endpoint) beside the latency histogram of every kind of call.
"""

from __future__ import annotations

import asyncio
import collections
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import httpx

from freight_pipeline.client._core import Send, Sent
from freight_pipeline.client.endpoints import Endpoint
from freight_pipeline.client.stats import ClientStats

DEFAULT_SHARE = 0.05
"""At most 5 % of reads are hedged (Dean and Barroso: p95 hedging costs about 5 % more requests)."""


@dataclass(frozen=True)
class HedgePolicy:
    """When a read gets a copy; ``share=0`` turns hedging off."""

    share: float = DEFAULT_SHARE
    """The most copies, as a share of the reads sent."""
    percentile: float = 0.95
    """The deadline of a kind: ``factor`` times this percentile of its recent latencies."""
    factor: float = 3.0
    floor_s: float = 0.1
    """The deadline is never shorter (a fast service's jitter is no tail)."""
    warm_up: int = 20
    """Answers of a kind before it is hedged at all."""
    window: int = 512
    """Latencies of a kind the percentile is taken over (the most recent)."""
    quiet_s: float = 2.0
    """No hedge this long after the service last pushed back (429, 503, a timeout, ...)."""

    def __post_init__(self) -> None:
        if not 0 <= self.share <= 1:
            raise ValueError(f"hedge share must be within [0, 1], got {self.share}")
        if not 0 < self.percentile < 1:
            raise ValueError(f"hedge percentile must be within (0, 1), got {self.percentile}")
        if self.factor < 1:
            raise ValueError(f"hedge factor must be at least 1, got {self.factor}")
        if self.floor_s < 0 or self.quiet_s < 0 or self.warm_up < 1 or self.window < self.warm_up:
            raise ValueError("need floor_s >= 0, quiet_s >= 0, 1 <= warm_up <= window")

    @property
    def on(self) -> bool:
        return self.share > 0


def hedgeable(endpoint: Endpoint) -> bool:
    """A read that may be sent twice: a GET or a lookup (POST ``.../lookup``), retry-safe."""
    return endpoint.retry_safe and (endpoint.method == "GET" or endpoint.path.endswith("/lookup"))


@dataclass
class _Kind:
    latencies: collections.deque[float]
    deadline: float | None = None
    since_computed: int = 0


class Hedger:
    """The deadlines and the budget of one client's hedges (asyncio: used from one event loop)."""

    RECOMPUTE_EVERY = 16

    def __init__(self, policy: HedgePolicy, last_push_back: Callable[[], float],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.policy = policy
        self._last_push_back = last_push_back
        self._clock = clock
        self._kinds: dict[str, _Kind] = {}
        self.reads = 0
        self.sent = 0

    def learn(self, kind: str, latency_s: float) -> None:
        """The latency of an answered read of ``kind`` (what the deadline is taken from)."""
        seen = self._kinds.get(kind)
        if seen is None:
            seen = self._kinds[kind] = _Kind(collections.deque(maxlen=self.policy.window))
        seen.latencies.append(latency_s)
        seen.since_computed += 1
        if len(seen.latencies) >= self.policy.warm_up and (
            seen.deadline is None or seen.since_computed >= self.RECOMPUTE_EVERY
        ):
            ordered = sorted(seen.latencies)
            at = min(len(ordered) - 1, math.ceil(self.policy.percentile * len(ordered)) - 1)
            seen.deadline = max(self.policy.floor_s, self.policy.factor * ordered[at])
            seen.since_computed = 0

    def deadline(self, kind: str) -> float | None:
        """How long a read of ``kind`` may take before it gets a copy; None: not hedged (yet)."""
        seen = self._kinds.get(kind)
        return seen.deadline if seen is not None else None

    def deadlines(self) -> dict[str, float]:
        return {kind: seen.deadline for kind, seen in self._kinds.items() if seen.deadline is not None}

    def may_hedge(self) -> bool:
        """Whether a copy may be sent now: within the budget, and the service not pushing back."""
        if self.sent + 1 > self.policy.share * self.reads:
            return False
        return self._clock() - self._last_push_back() >= self.policy.quiet_s


Attempt = Callable[[Send, httpx.Request, bool, Callable[[], object]], Awaitable[tuple[Sent, float]]]
"""The driver's: send one request (``urgent``: ahead of the queue for a slot), calling the callback
once it holds its slot; returns what came back and the seconds from leaving to the answer."""


def copy_of(request: httpx.Request) -> httpx.Request:
    """The same read again (a GET has no body; a lookup's is bytes already read)."""
    return httpx.Request(request.method, request.url, headers=request.headers.copy(), content=request.content)


def _good(sent: Sent) -> bool:
    return isinstance(sent.outcome, httpx.Response) and sent.outcome.is_success


STALL_SHARE = 0.5
"""A deadline's timer that fires later than this share of the deadline past its time found the event loop
stalled (this process busy: a batch being written, another process on the core), not the service slow."""


def _loop_stalled(left_at: float, deadline: float) -> bool:
    """Whether the timer of ``deadline`` from ``left_at`` fired late by more than :data:`STALL_SHARE` of it:
    then every read in flight passed its deadline at once, their answers most likely waiting in the socket
    for the loop, and copies of them would double the load for the client's own stall."""
    return time.monotonic() - left_at > deadline * (1 + STALL_SHARE)


async def race(hedger: Hedger, send: Send, attempt: Attempt, stats: ClientStats) -> tuple[Sent, float]:
    """Send ``send``'s request; past the deadline of its kind, a copy (if allowed); the first good
    answer wins, the other is cancelled. Returns what came back and the seconds from the first
    request leaving to that answer (learnt as the kind's latency when it is a good answer)."""
    kind = send.endpoint.name
    hedger.reads += 1
    sent, latency = await _race(hedger, send, attempt, stats)
    if _good(sent):
        hedger.learn(kind, latency)
    return sent, latency


class _Deadline:
    """The deadline of one read, from the moment its request left (:meth:`start`, the attempt's ``on_slot``) as
    learnt by then; :meth:`passed` waits for it or for the read's end, whichever comes first. A timer and a
    callback on one future: a race costs no task of its own (the read's CPU on a fast service, issue 56)."""

    def __init__(self, hedger: Hedger, kind: str) -> None:
        self.hedger, self.kind = hedger, kind
        self.read: asyncio.Future[tuple[Sent, float]] | None = None
        """The read's task (set once it is made: it calls :meth:`start`)."""
        self.seconds: float | None = None
        """None: no deadline (not yet learnt, or the request has not left)."""
        self.left_at = 0.0
        self._due: asyncio.Future[bool] | None = None
        self._timer: asyncio.TimerHandle | None = None

    def start(self) -> None:
        self.left_at = time.monotonic()
        self.seconds = self.hedger.deadline(self.kind)
        self._arm()

    def _arm(self) -> None:
        if self.seconds is not None and self._due is not None and not self._due.done():
            self._timer = asyncio.get_running_loop().call_later(self.seconds, self._resolve, True)

    def _resolve(self, passed: bool) -> None:
        if self._due is not None and not self._due.done():
            self._due.set_result(passed)

    def _ended(self, _: object) -> None:
        self._resolve(False)

    async def passed(self) -> bool:
        """Whether the deadline passed (from the start, or from now when waited again) before the read ended."""
        assert self.read is not None
        if self.read.done():
            return False
        self._due = asyncio.get_running_loop().create_future()
        if self.left_at:  # waited again: a deadline more from now
            self._arm()
        self.read.add_done_callback(self._ended)
        try:  # a read that ended in the same turn of the loop as its timer fired is no read to hedge
            return await self._due and not self.read.done()
        finally:
            self.read.remove_done_callback(self._ended)
            self.cancel()

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


async def _race(hedger: Hedger, send: Send, attempt: Attempt, stats: ClientStats) -> tuple[Sent, float]:
    kind = send.endpoint.name
    deadline = _Deadline(hedger, kind)
    first = deadline.read = asyncio.ensure_future(attempt(send, send.request, False, deadline.start))
    tasks = [first]
    try:
        passed = await deadline.passed()
        if passed and deadline.seconds is not None and _loop_stalled(deadline.left_at, deadline.seconds):
            passed = await deadline.passed()  # the wait was ours: the read gets its deadline again
        if not passed or not hedger.may_hedge():
            return await first
        left_at = deadline.left_at
        hedger.sent += 1
        stats.record_hedge(kind)
        second = asyncio.ensure_future(attempt(send, copy_of(send.request), True, _nothing))
        tasks.append(second)
        pending: set[asyncio.Future[tuple[Sent, float]]] = {first, second}
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in (t for t in (first, second) if t in done):  # the original first when both ended
                answer, _ = task.result()
                if _good(answer):
                    if task is second:
                        stats.record_hedge_won(kind)
                    return answer, time.monotonic() - left_at
        return first.result()  # both failed: the original's failure goes to the retry policy
    finally:
        await _cancelled_to_the_end([task for task in tasks if not task.done()])


async def _cancelled_to_the_end(tasks: list[asyncio.Future[tuple[Sent, float]]]) -> None:
    """Cancel ``tasks`` and wait until they ended, even when this task is cancelled meanwhile (a copy never
    outlives its read), whose cancellation then goes on: not ``await task`` under a suppressed
    CancelledError, which could not tell the loser's cancellation from this task's and returned the winner's
    answer to a run that was stopping."""
    if not tasks:
        return
    for task in tasks:
        task.cancel()
    try:
        await asyncio.wait(tasks)
    except asyncio.CancelledError:
        await asyncio.wait(tasks)
        raise
    finally:
        for task in tasks:
            if task.done() and not task.cancelled():
                task.exception()  # a loser's failure while winding down is no one's: retrieved, not logged


def _nothing() -> None:
    return None
