"""Per-client request counters (``client.stats``), safe to update from several threads."""

from __future__ import annotations

import math
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

LATENCY_BASE_MS, LATENCY_GROWTH = 0.1, 1.1
"""Latencies are counted in buckets growing by 10 % from 0.1 ms: bucket k holds
[0.1 * 1.1**k, 0.1 * 1.1**(k+1)) ms, so a percentile read from them is at most 10 % high."""
PERCENTILES = (0.5, 0.95, 0.99)


def latency_bucket(seconds: float) -> int:
    return max(0, int(math.log(max(seconds * 1000.0, LATENCY_BASE_MS) / LATENCY_BASE_MS, LATENCY_GROWTH)))


def _bucket_ms(bucket: int) -> float:
    """The upper end of a bucket, in ms."""
    return LATENCY_BASE_MS * LATENCY_GROWTH ** (bucket + 1)


@dataclass(frozen=True)
class StatsSnapshot:
    """A frozen copy of the counters; subtract two to get the counts of a stretch of work."""

    requests: int = 0
    retries: int = 0
    token_requests: int = 0
    reauthentications: int = 0
    by_status: dict[int, int] = field(default_factory=dict)
    by_endpoint: dict[str, int] = field(default_factory=dict)
    transport_errors: dict[str, int] = field(default_factory=dict)
    hedges: dict[str, int] = field(default_factory=dict)
    hedges_won: dict[str, int] = field(default_factory=dict)
    latency: dict[tuple[str, int], int] = field(default_factory=dict)
    """Answers per (endpoint name, ``latency_bucket``): the time from a request leaving to its answer
    (for a hedged read, to the first good answer of the two)."""

    def __sub__(self, other: StatsSnapshot) -> StatsSnapshot:
        def diff(a: dict, b: dict) -> dict:  # type: ignore[type-arg]
            keys = set(a) | set(b)
            return {k: a.get(k, 0) - b.get(k, 0) for k in sorted(keys) if a.get(k, 0) - b.get(k, 0)}

        return StatsSnapshot(
            requests=self.requests - other.requests,
            retries=self.retries - other.retries,
            token_requests=self.token_requests - other.token_requests,
            reauthentications=self.reauthentications - other.reauthentications,
            by_status=diff(self.by_status, other.by_status),
            by_endpoint=diff(self.by_endpoint, other.by_endpoint),
            transport_errors=diff(self.transport_errors, other.transport_errors),
            hedges=diff(self.hedges, other.hedges),
            hedges_won=diff(self.hedges_won, other.hedges_won),
            latency=diff(self.latency, other.latency),
        )

    def latency_percentiles(self) -> dict[str, dict[str, float]]:
        """Per endpoint name: the answers counted and their p50, p95, p99 and largest latency (ms,
        each at most 10 % high: the upper end of its bucket)."""
        by_kind: dict[str, list[tuple[int, int]]] = {}
        for (kind, bucket), count in self.latency.items():
            if count > 0:
                by_kind.setdefault(kind, []).append((bucket, count))
        figures: dict[str, dict[str, float]] = {}
        for kind, buckets in sorted(by_kind.items()):
            buckets.sort()
            total = sum(count for _, count in buckets)
            row: dict[str, float] = {"calls": total}
            for share in PERCENTILES:
                wanted, seen = math.ceil(share * total), 0
                for bucket, count in buckets:
                    seen += count
                    if seen >= wanted:
                        row[f"p{round(share * 100)}_ms"] = round(_bucket_ms(bucket), 1)
                        break
            row["max_ms"] = round(_bucket_ms(buckets[-1][0]), 1)
            figures[kind] = row
        return figures

    def hedge_figures(self) -> dict[str, Any]:
        """What hedged reads did (copies sent and won, per endpoint name) and the latency percentiles
        of every kind of call: what a run records of them."""
        return {
            "hedges_sent": sum(self.hedges.values()),
            "hedges_won": sum(self.hedges_won.values()),
            "hedges_by_kind": {kind: {"sent": sent, "won": self.hedges_won.get(kind, 0)}
                               for kind, sent in sorted(self.hedges.items())},
            "latency_ms": self.latency_percentiles(),
        }


class ClientStats:
    """Live counters of one client.

    requests:          HTTP requests sent (token requests and every retry included)
    retries:           repeats after a retryable failure (not the first attempt, not token renewal)
    token_requests:    requests to ``POST /auth/token``
    reauthentications: business calls repeated after a 401 with a renewed token
    by_status:         responses per HTTP status
    by_endpoint:       requests per endpoint name (``shipment.lookup``, ``shipment.retrieve``, ...)
    transport_errors:  failures without a response, per httpx exception class name
    hedges:            copies of slow reads sent, per endpoint name (``client.hedge``; counted in requests too)
    hedges_won:        copies that answered first
    latency:           answers per (endpoint name, latency bucket) (``StatsSnapshot.latency_percentiles``)
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests = 0
        self.retries = 0
        self.token_requests = 0
        self.reauthentications = 0
        self.by_status: Counter[int] = Counter()
        self.by_endpoint: Counter[str] = Counter()
        self.transport_errors: Counter[str] = Counter()
        self.hedges: Counter[str] = Counter()
        self.hedges_won: Counter[str] = Counter()
        self.latency: Counter[tuple[str, int]] = Counter()

    def record_hedge(self, endpoint_name: str) -> None:
        """A copy of a slow read was sent: one request more."""
        with self._lock:
            self.requests += 1
            self.by_endpoint[endpoint_name] += 1
            self.hedges[endpoint_name] += 1

    def record_hedge_won(self, endpoint_name: str) -> None:
        with self._lock:
            self.hedges_won[endpoint_name] += 1

    def record_latency(self, endpoint_name: str, seconds: float) -> None:
        with self._lock:
            self.latency[(endpoint_name, latency_bucket(seconds))] += 1

    def record_request(self, endpoint_name: str, is_token: bool) -> None:
        with self._lock:
            self.requests += 1
            self.by_endpoint[endpoint_name] += 1
            if is_token:
                self.token_requests += 1

    def record_status(self, status: int) -> None:
        with self._lock:
            self.by_status[status] += 1

    def record_transport_error(self, error: BaseException) -> None:
        with self._lock:
            self.transport_errors[type(error).__name__] += 1

    def record_retry(self) -> None:
        with self._lock:
            self.retries += 1

    def record_reauthentication(self) -> None:
        with self._lock:
            self.reauthentications += 1

    def snapshot(self) -> StatsSnapshot:
        with self._lock:
            return StatsSnapshot(
                requests=self.requests,
                retries=self.retries,
                token_requests=self.token_requests,
                reauthentications=self.reauthentications,
                by_status=dict(self.by_status),
                by_endpoint=dict(self.by_endpoint),
                transport_errors=dict(self.transport_errors),
                hedges=dict(self.hedges),
                hedges_won=dict(self.hedges_won),
                latency=dict(self.latency),
            )

    def reset(self) -> None:
        with self._lock:
            self.requests = self.retries = self.token_requests = self.reauthentications = 0
            self.by_status.clear()
            self.by_endpoint.clear()
            self.transport_errors.clear()
            self.hedges.clear()
            self.hedges_won.clear()
            self.latency.clear()

    def __repr__(self) -> str:
        return (
            f"ClientStats(requests={self.requests}, retries={self.retries}, token_requests={self.token_requests}, "
            f"reauthentications={self.reauthentications}, by_status={dict(self.by_status)})"
        )
