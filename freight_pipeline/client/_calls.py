"""What the sans-I/O core and its drivers exchange: calls, the actions the core yields, replies, failures."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import httpx

from freight_pipeline.client.endpoints import Endpoint
from freight_pipeline.client.errors import FreightError


class Expect(Enum):
    OBJECT = "a JSON object"
    ARRAY = "a JSON array of objects"
    OPTIONAL_JSON = "JSON or an empty body"
    NOTHING = "no body"
    TOKEN = "a token"


# --- what the core asks its driver for ----------------------------------------------------------


@dataclass(frozen=True)
class Send:
    """Send this request once a slot of the limit is free; answer with a :class:`Sent`.

    ``bearer``: the request needs the bearer token, which the driver adds (``ClientCore.authorize``)
    only once the request has its slot, just before it leaves, so that a token that expired (or came
    due for renewal) while the request waited is renewed first. ``limited``: False for the token call,
    which is not a business request and does not wait for (nor teach) the limit.
    """

    request: httpx.Request
    endpoint: Endpoint
    bearer: bool = False
    limited: bool = True


@dataclass(frozen=True)
class Sleep:
    seconds: float


@dataclass(frozen=True)
class NeedToken:
    force: bool = False
    stale: str | None = field(default=None, repr=False)


Action = Send | Sleep | NeedToken


@dataclass(frozen=True)
class UnreadableBody:
    """A response whose body could not be decoded (``httpx.DecodingError``, e.g. a broken gzip stream)."""

    response: httpx.Response
    error: httpx.DecodingError


Outcome = httpx.Response | UnreadableBody | httpx.TransportError


@dataclass(frozen=True)
class Sent:
    """The driver's answer to a :class:`Send`: what came back, and the bearer token the request carried."""

    outcome: Outcome
    token: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Call:
    """One logical call: endpoint, path parameters, query, body and the expected response."""

    endpoint: Endpoint
    expect: Expect
    path_params: Mapping[str, Any] = field(default_factory=dict)
    params: Sequence[tuple[str, str]] = ()
    json_body: Any = field(default=None, repr=False)  # the token request carries the password
    has_json: bool = False
    text_body: str | None = field(default=None, repr=False)

    @property
    def path(self) -> str:
        return self.endpoint.format(**self.path_params)

    @property
    def where(self) -> str:
        return f"{self.endpoint.method} {self.path}"


@dataclass(frozen=True)
class Reply:
    status: int
    data: Any
    headers: httpx.Headers
    content: bytes = field(default=b"", repr=False)


@dataclass(frozen=True)
class Failure:
    """An attempt that failed: the error to raise, and whether another attempt may be made."""

    error: FreightError
    retryable: bool
    reason: str
    retry_after: float | None = None
    refused: bool = False
    """Refused before processing with a ``Retry-After`` (429, 503): waiting it out is not an attempt."""
