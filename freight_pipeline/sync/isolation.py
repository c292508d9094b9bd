"""Per-record isolation: what is one record's fault (quarantined, the run goes on) and what is not
(the run fails loudly and advances nothing), and the circuit breaker between the two.

A record's fault, after the client's retries: a 2xx whose body is not what the endpoint promises
(cut short, not JSON, the wrong shape), a 500 or other error status for that record only (a 4xx
but 401/403/404/429; a 5xx but 502/503/504), a read that broke off or timed out, a document that
cannot be normalized at all. Not a record's fault: refused credentials or permissions (401, 403),
rate limiting beyond the retries (429), a service that says it is unavailable (502, 503, 504), a
service that cannot be connected to. Those re-raise. And when the failures of one stream in one run
pass both ``breaker_min_failures`` and ``breaker_max_share`` of its records, :class:`CircuitOpen`
is raised before the batch that tipped it is written: a whole outage is never quarantined.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from freight_pipeline.client import (
    APIStatusError,
    AuthenticationError,
    FreightError,
    PermissionDeniedError,
    ProtocolError,
    RateLimitedError,
)
from freight_pipeline.client.endpoints import AUTH_TOKEN
from freight_pipeline.normalize.converters import to_json
from freight_pipeline.normalize.errors import Invalid, NormalizationError, show
from freight_pipeline.normalize.problems import Problems
from freight_pipeline.sync.changes import RowCountMismatch
from freight_pipeline.warehouse.records import DataProblem, Quarantined

EXCERPT_CHARS = 500
RAW_VALUE_CHARS = 2000
UNAVAILABLE = frozenset({502, 503, 504})


class CircuitOpen(RuntimeError):
    """Too many records of one stream failed in one run: not a record's fault; nothing more is written."""


UNREACHABLE_STATUSES = frozenset({403, 404})
"""Answers that, on every call of a stream, mean the account cannot reach its endpoints."""


class StreamUnreachable(RuntimeError):
    """The account cannot reach a stream's endpoints (403 or 404 on every call): a permission the
    operator did not grant, or an endpoint this service does not offer. The stream fails on its own."""

    def __init__(self, stream: str, status: int | None, request: str | None, switch: str | None) -> None:
        self.stream, self.status, self.request, self.switch = stream, status, request, switch
        off = (f"or switch the stream off with {switch}=0" if switch
               else "(this stream cannot be switched off: the others depend on it)")
        answered = f"{status} on every call" if status else "refused on every call"
        super().__init__(
            f"the account cannot reach the {stream} stream's endpoints ({answered}"
            f"{f', e.g. {request}' if request else ''}): ask the service's operator for the permission, {off}"
        )


@dataclass(frozen=True)
class RecordFailure:
    """Why one record could not be loaded, with the request and what came back."""

    reason: str
    request: str | None = None
    status_code: int | None = None
    excerpt: str | None = None

    def quarantined(
        self, stream: str, key: int | str, shipment_id: int | None, context: dict[str, Any] | None = None
    ) -> Quarantined:
        return Quarantined(
            stream=stream,
            record_key=str(key),
            shipment_id=shipment_id,
            reason=self.reason[:2000],
            request=self.request,
            status_code=self.status_code,
            response_excerpt=self.excerpt[:EXCERPT_CHARS] if self.excerpt else None,
            context=json.dumps(context, sort_keys=True) if context else None,
        )


def record_failure(exc: BaseException) -> RecordFailure | None:
    """``exc`` as one record's failure, or None when it is not the record's fault (the caller re-raises)."""
    if isinstance(exc, AuthenticationError | PermissionDeniedError | RateLimitedError):
        return None
    if isinstance(exc, APIStatusError) and exc.status_code in UNAVAILABLE:
        return None
    if isinstance(exc, FreightError):
        if isinstance(exc.__cause__, httpx.ConnectError | httpx.ConnectTimeout):
            return None
        if exc.path == AUTH_TOKEN.path:  # the login renewed within a record's call: never that record's fault
            return None
        request = f"{exc.method} {exc.path}" if exc.method and exc.path else None
        if isinstance(exc, ProtocolError):
            return RecordFailure(_first_line(exc), request, exc.status_code, exc.body_excerpt or None)
        if isinstance(exc, APIStatusError):
            return RecordFailure(_first_line(exc), request, exc.status_code, exc.detail)
        return RecordFailure(_first_line(exc), request)
    if isinstance(exc, RowCountMismatch):
        return RecordFailure(_first_line(exc))
    if isinstance(exc, NormalizationError):
        return RecordFailure(f"{type(exc).__name__}: {_first_line(exc)}")
    if isinstance(exc, OSError):  # the machine's (a disk full, a folder unwritable, no file descriptor left), or its
        return None  # network's: never one record's, whose run would say it succeeded with that record put aside
    if isinstance(exc, Exception):  # a bug met on one record's data: isolated too, the breaker guards the rest
        return RecordFailure(f"unexpected {type(exc).__name__} while reading the record: {_first_line(exc)}")
    return None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def json_text(value: Any, limit: int) -> str:
    """``value`` as JSON text; longer than ``limit``: the start of that text, as a JSON string marked cut."""
    try:
        text = to_json(value)
    except Invalid:
        text = json.dumps(show(value, limit))
    return text if len(text) <= limit else json.dumps(text[:limit] + " ... (cut)")


@dataclass
class Breaker:
    """Counts one stream's records and failures in one run; trips past both thresholds."""

    stream: str
    max_share: float
    min_failures: int
    attempted: int = 0
    failed: int = 0
    unreachable: RecordFailure | None = None
    """While every record so far failed with a 403 or 404: the first such failure (else None)."""
    switch: str | None = None
    """The setting that switches the stream off (named when it cannot reach its endpoints)."""
    reasons: dict[str, tuple[int, str, str | None]] = field(default_factory=dict)
    """Each reason the run's failed records failed for, its numbers aside (a record's id, its path's): how many,
    the first one's reason (cut to a line) and its request."""

    def count(self, attempted: int, failed: int, failures: Sequence[RecordFailure] = ()) -> None:
        """Add a batch's figures (``failures``: the batch's failed records, when known), and raise
        CircuitOpen (before the batch is written) when tripped: StreamUnreachable when every record
        of the run failed with a 403 or 404."""
        first = self.attempted == 0
        self.note(failures)
        self.attempted += attempted
        self.failed += failed
        all_refused = failed == attempted and len(failures) == failed and all(
            f.status_code in UNREACHABLE_STATUSES for f in failures)
        if all_refused and (first or self.unreachable is not None) and failures:
            self.unreachable = self.unreachable or failures[0]
        elif attempted:
            self.unreachable = None
        if self.failed >= self.min_failures and self.failed > self.max_share * self.attempted:
            if self.unreachable is not None:
                raise StreamUnreachable(self.stream, self.unreachable.status_code, self.unreachable.request,
                                        self.switch)
            raise CircuitOpen(
                f"{self.stream}: {self.failed} of {self.attempted} records failed in this run "
                f"({self.failed / max(self.attempted, 1):.0%}, more than {self.max_share:.0%} and at least "
                f"{self.min_failures}): this looks like the service, not bad records, so the run stops and "
                "the batch that tipped it is not written (settings breaker_max_share, breaker_min_failures)"
                f"{self._commonest()}"
            )

    def note(self, failures: Sequence[RecordFailure]) -> None:
        """Keep the reasons of failed records the run counts (:meth:`count` notes those it is given)."""
        for failure in failures:
            reason = failure.reason.splitlines()[0][:300] if failure.reason else "no reason given"
            kind = re.sub(r"\d+", "#", reason)
            seen, first, request = self.reasons.get(kind, (0, reason, failure.request))
            self.reasons[kind] = (seen + 1, first, request)

    def _commonest(self) -> str:
        """The commonest reason the records failed for, as the stopped run's line ends with it (what to look at)."""
        if not self.reasons:
            return ""
        seen, reason, request = max(self.reasons.values(), key=lambda counted: counted[0])
        return f"; the commonest failure ({seen} of {self.failed}): {reason}" + (f" ({request})" if request else "")


def data_problems(stream: str, key: int | str, shipment_id: int | None, problems: Problems) -> list[DataProblem]:
    """The problems of one loaded record as ``data_problems`` rows (raw values as JSON, long ones cut)."""
    return [
        DataProblem(
            stream,
            str(key),
            shipment_id,
            problem.path or "(record)",
            json_text(problem.value, RAW_VALUE_CHARS) if problem.value is not None else None,
            problem.reason,
        )
        for problem in problems
    ]
