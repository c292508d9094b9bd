"""Per-client request counters (``client.stats``), safe to update from several threads."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field


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
        )


class ClientStats:
    """Live counters of one client.

    requests:          HTTP requests sent (token requests and every retry included)
    retries:           repeats after a retryable failure (not the first attempt, not token renewal)
    token_requests:    requests to ``POST /auth/token``
    reauthentications: business calls repeated after a 401 with a renewed token
    by_status:         responses per HTTP status
    by_endpoint:       requests per endpoint name (``shipment.lookup``, ``shipment.retrieve``, ...)
    transport_errors:  failures without a response, per httpx exception class name
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
            )

    def reset(self) -> None:
        with self._lock:
            self.requests = self.retries = self.token_requests = self.reauthentications = 0
            self.by_status.clear()
            self.by_endpoint.clear()
            self.transport_errors.clear()

    def __repr__(self) -> str:
        return (
            f"ClientStats(requests={self.requests}, retries={self.retries}, token_requests={self.token_requests}, "
            f"reauthentications={self.reauthentications}, by_status={dict(self.by_status)})"
        )
