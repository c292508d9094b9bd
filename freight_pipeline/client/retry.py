"""Retry policy: which failures are retried, how long to wait, when to give up. Declared once.

Retried (for a request that may be repeated, ``Endpoint.retry_safe``):

* HTTP 408, 429 and 5xx except 501/505;
* timeouts (connect, read, write, pool) and transport failures (connection refused, reset or
  dropped: ``httpx.ConnectError``, ``ReadError``, ``WriteError``, ``RemoteProtocolError``, ...).

A request that creates something (``retry_safe=False``: event create, E-File store, reference and
role add, webhook) is retried only when the service provably did not process it:

* it never left the client: ``httpx.ConnectError``, ``ConnectTimeout``, ``PoolTimeout``;
* the service said so: 429, or 503 *with* ``Retry-After`` (the service refused it up front).

Anything else (a read timeout, a dropped connection, a 500) leaves it unknown whether the record
was created, so the error is raised for the caller to check and decide.

Waits: exponential backoff ``base_delay * 2**(attempt-1)`` capped at ``max_delay``, with full jitter
(uniform in ``[0, that]``). A ``Retry-After`` header (seconds or HTTP-date) replaces the backoff:
it is waited for in full, capped at ``retry_after_cap``, plus up to 10 % jitter so that concurrent
callers told the same Retry-After do not return in lockstep. The whole call, waits included, stops
retrying once the next wait would end beyond ``total_budget`` seconds after the first attempt. A
401 on a business call renews the token and repeats the call once; that repeat does not count as an
attempt.

Refusals are not failed attempts: a request the service refused before processing it and told when
to come back (429 with ``Retry-After``, or 503 with ``Retry-After``) waits that long and is sent
again without using up one of ``max_attempts``; a service that only wants fewer requests at once
(an in-flight limit) must not make a request fail that would have been answered a moment later.
Refusals are bounded by ``total_budget`` only, so a service that always refuses still ends the call
with ``RateLimitedError`` (or ``ServerError`` for the 503). From the ``max_attempts``-th refusal of one
call on, the wait is at least the backoff of the refusals beyond that number, so a ``Retry-After: 0``
that never ends does not make a tight loop. A 429 without ``Retry-After`` is an ordinary failed
attempt. ``RetryPolicy.none()`` retries nothing, refusals included (its ``total_budget`` is 0).

A 2xx whose body cannot be read (not valid JSON, or a content encoding that fails to decode) is
retried like a transient failure for ``retry_safe`` requests (reads: the next answer may be whole);
never for the others, which the service did process.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import random
from dataclasses import dataclass

import httpx

from freight_pipeline.config import SyncTuning

# 408, 429 and every 5xx except these two, which will not change on a repeat.
NON_TRANSIENT_5XX: frozenset[int] = frozenset({501, 505})
# Extra wait after a Retry-After, as a share of it, so that callers told the same Retry-After do not
# all come back in the same instant.
RETRY_AFTER_JITTER = 0.1
# Statuses that mean "refused before processing" when they carry Retry-After (429 always does).
NOT_PROCESSED_STATUSES: frozenset[int] = frozenset({429, 503})
# Transport failures where the request provably never reached the service.
NOT_SENT_ERRORS: tuple[type[Exception], ...] = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
RETRY_TRANSPORT_ERRORS: tuple[type[Exception], ...] = (
    httpx.TimeoutException,
    httpx.NetworkError,
    httpx.RemoteProtocolError,
)


_SETTINGS = SyncTuning.model_construct()
"""The defaults, declared with the settings of the same name (``config.SyncTuning``'s ``request_*``)."""


@dataclass(frozen=True)
class RetryPolicy:
    """How the client retries. The defaults are the settings' (``request_attempts``, ...).

    max_attempts:    attempts per call, the first included (1 disables retries of failures;
                     refusals with ``Retry-After`` are not attempts, see the module docstring).
    base_delay:      seconds; backoff of the first retry before jitter.
    max_delay:       seconds; cap of the exponential backoff.
    jitter:          full jitter (uniform in [0, backoff]) when True, else the exact backoff.
    total_budget:    seconds; no retry is started whose wait would end later than this after the
                     first attempt began.
    retry_after_cap: seconds; the longest ``Retry-After`` honoured (longer ones are shortened); with
                     ``jitter`` up to 10 % of the (capped) Retry-After is added.
    """

    max_attempts: int = _SETTINGS.request_attempts
    base_delay: float = _SETTINGS.request_base_delay_seconds
    max_delay: float = _SETTINGS.request_max_delay_seconds
    jitter: bool = _SETTINGS.request_jitter
    total_budget: float = _SETTINGS.request_budget_seconds
    retry_after_cap: float = _SETTINGS.request_retry_after_cap_seconds

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.base_delay < 0 or self.max_delay < 0 or self.total_budget < 0 or self.retry_after_cap < 0:
            raise ValueError("delays and budgets must not be negative")

    @classmethod
    def none(cls) -> RetryPolicy:
        """One attempt, no retries (not even after a refusal with ``Retry-After``)."""
        return cls(max_attempts=1, total_budget=0.0)

    def backoff(self, attempt: int, rng: random.Random | None = None) -> float:
        """Wait before attempt ``attempt + 1`` after failed attempt ``attempt`` (1-based)."""
        ceiling = min(self.max_delay, self.base_delay * (2 ** max(0, attempt - 1)))
        if not self.jitter:
            return ceiling
        return (rng or random).uniform(0.0, ceiling)

    def delay(self, attempt: int, retry_after: float | None, rng: random.Random | None = None) -> float:
        """The wait to use: ``Retry-After`` (capped, plus jitter) when the service sent one, else the backoff."""
        if retry_after is None:
            return self.backoff(attempt, rng)
        wait = min(max(0.0, retry_after), self.retry_after_cap)
        if not self.jitter:
            return wait
        return wait + (rng or random).uniform(0.0, wait * RETRY_AFTER_JITTER)

    def refusal_delay(self, refusals: int, retry_after: float, rng: random.Random | None = None) -> float:
        """The wait after the ``refusals``-th refusal (with ``Retry-After``) of one call: the Retry-After
        (capped, plus jitter); from the ``max_attempts``-th refusal on at least the backoff of the
        refusals beyond ``max_attempts - 1``."""
        wait = self.delay(1, retry_after, rng)
        beyond = refusals - self.max_attempts + 1
        return max(wait, self.backoff(beyond, rng)) if beyond > 0 else wait


DEFAULT_RETRY_POLICY = RetryPolicy()


def retry_policy_of(tuning: SyncTuning) -> RetryPolicy:
    """The policy the ``request_*`` settings of ``tuning`` describe."""
    return RetryPolicy(max_attempts=tuning.request_attempts, base_delay=tuning.request_base_delay_seconds,
                       max_delay=tuning.request_max_delay_seconds, jitter=tuning.request_jitter,
                       total_budget=tuning.request_budget_seconds,
                       retry_after_cap=tuning.request_retry_after_cap_seconds)


def parse_retry_after(value: str | None, now: dt.datetime | None = None) -> float | None:
    """Seconds from a ``Retry-After`` header: delta-seconds or an HTTP-date; None when absent/invalid."""
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return max(0.0, seconds) if seconds == seconds else None  # NaN guard
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    current = now or dt.datetime.now(dt.UTC)
    return max(0.0, (when - current).total_seconds())


def is_transient_status(status: int) -> bool:
    return status in (408, 429) or (500 <= status < 600 and status not in NON_TRANSIENT_5XX)


def status_is_retryable(status: int, retry_safe: bool, retry_after: float | None) -> bool:
    if not is_transient_status(status):
        return False
    if retry_safe:
        return True
    return status == 429 or (status in NOT_PROCESSED_STATUSES and retry_after is not None)


def refused_before_processing(status: int, retry_after: float | None) -> bool:
    """The service refused the request up front and said when to come back (429 or 503 with Retry-After)."""
    return status in NOT_PROCESSED_STATUSES and retry_after is not None


def transport_error_is_retryable(error: Exception, retry_safe: bool) -> bool:
    if isinstance(error, NOT_SENT_ERRORS):
        return True
    return retry_safe and isinstance(error, RETRY_TRANSPORT_ERRORS)
