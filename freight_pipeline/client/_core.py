"""The one implementation of request building, response interpretation, auth and retries.

Sans-I/O: :meth:`ClientCore.execute` is a generator that *yields* what it needs done —
:class:`Send` (send this request, give me the response or the transport exception),
:class:`Sleep` (wait before a retry), :class:`NeedToken` (give me a valid bearer token) — and
*returns* the decoded :class:`Reply`. ``FreightClient`` drives it with ``httpx.Client`` and
``time.sleep``, ``AsyncFreightClient`` with ``httpx.AsyncClient`` and ``asyncio.sleep``; neither
contains any retry, auth or parsing logic of its own.
"""

from __future__ import annotations

import base64
import json
import logging
import random
import re
import time
from collections.abc import Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, TypeVar

import httpx
from pydantic import ValidationError

from freight_pipeline.client import endpoints as ep
from freight_pipeline.client.auth import DEFAULT_REFRESH_MARGIN_S, Token, TokenMissing, extract_token, make_token
from freight_pipeline.client.endpoints import AuthScheme, Endpoint
from freight_pipeline.client.errors import (
    BODY_EXCERPT_CHARS,
    APIStatusError,
    AuthenticationError,
    FreightConnectionError,
    FreightError,
    FreightTimeoutError,
    PermissionDeniedError,
    ProtocolError,
    RateLimitedError,
    error_class_for_status,
)
from freight_pipeline.client.models import Criterion, FreightModel
from freight_pipeline.client.paging import Page, validate_paging
from freight_pipeline.client.retry import (
    DEFAULT_RETRY_POLICY,
    RetryPolicy,
    parse_retry_after,
    status_is_retryable,
    transport_error_is_retryable,
)
from freight_pipeline.client.stats import ClientStats

logger = logging.getLogger("freight_pipeline.client")

M = TypeVar("M", bound=FreightModel)

DEFAULT_TIMEOUT = httpx.Timeout(30.0, connect=10.0)
DEFAULT_MAX_CONNECTIONS = 16
DEFAULT_MAX_CONCURRENCY = 8  # async client: requests in flight at once
USER_AGENT = "freight-pipeline-client/0.1"
REDACTED = "***"


class Expect(Enum):
    OBJECT = "a JSON object"
    ARRAY = "a JSON array of objects"
    OPTIONAL_JSON = "JSON or an empty body"
    NOTHING = "no body"
    TOKEN = "a token"


# --- what the core asks its driver for ----------------------------------------------------------


@dataclass(frozen=True)
class Send:
    request: httpx.Request
    endpoint: Endpoint


@dataclass(frozen=True)
class Sleep:
    seconds: float


@dataclass(frozen=True)
class NeedToken:
    force: bool = False
    stale: str | None = field(default=None, repr=False)


Action = Send | Sleep | NeedToken


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


@dataclass(frozen=True)
class Reply:
    status: int
    data: Any
    headers: httpx.Headers
    content: bytes = field(default=b"", repr=False)


# --- the core -----------------------------------------------------------------------------------


class ClientCore:
    """State and logic shared by the sync and async clients (one per client)."""

    def __init__(
        self,
        *,
        base_url: str,
        username: str,
        password: str,
        webhook_username: str | None = None,
        webhook_password: str | None = None,
        retry: RetryPolicy = DEFAULT_RETRY_POLICY,
        token_refresh_margin: float = DEFAULT_REFRESH_MARGIN_S,
        rng: random.Random | None = None,
    ) -> None:
        if not base_url or not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must be an http(s) URL, got {base_url!r}")
        if not username:
            raise ValueError("username is required")
        if not password:
            raise ValueError(f"password is required (user {username!r})")
        if (webhook_username is None) != (webhook_password is None):
            raise ValueError("give both webhook_username and webhook_password, or neither")
        self.base_url = base_url.rstrip("/")
        self.username = username
        self._password = password
        self.webhook_username = webhook_username
        self._webhook_password = webhook_password
        self.retry = retry
        self.token_refresh_margin = token_refresh_margin
        self.rng = rng or random.Random()
        self.stats = ClientStats()
        self.token: Token | None = None
        self.auth_failure: AuthenticationError | None = None
        self._old_tokens: list[str] = []

    # --- secrets -------------------------------------------------------------------------------

    def _secrets(self) -> list[str]:
        values = [self._password, self._webhook_password, self.token.value if self.token else None]
        if self.webhook_username is not None and self._webhook_password:
            values.append(self._basic_credentials())
        values.extend(self._old_tokens)
        return sorted({v for v in values if v and len(v) >= 3}, key=len, reverse=True)

    def _basic_credentials(self) -> str:
        pair = f"{self.webhook_username}:{self._webhook_password}".encode()
        return base64.b64encode(pair).decode("ascii")

    def redact(self, text: str) -> str:
        for secret in self._secrets():
            text = text.replace(secret, REDACTED)
        return text

    # --- tokens --------------------------------------------------------------------------------

    def valid_token(self, force: bool = False, stale: str | None = None) -> str | None:
        """The cached token when it can be used; None when a new one must be fetched.

        Raises the remembered AuthenticationError when the credentials were refused before: a
        refused password stays refused, so no further request is made.
        """
        if self.auth_failure is not None:
            failure = self.auth_failure
            raise AuthenticationError(
                failure.message,
                status_code=failure.status_code,
                method=failure.method,
                path=failure.path,
                detail=failure.detail,
            )
        token = self.token
        if token is None or token.needs_renewal(self.token_refresh_margin):
            return None
        if force and token.value == stale:
            return None
        return token.value

    def token_call(self) -> Call:
        return Call(
            ep.AUTH_TOKEN,
            Expect.TOKEN,
            json_body={"username": self.username, "password": self._password},
            has_json=True,
        )

    def accept_token(self, reply: Reply) -> str:
        try:
            value, expires_in = extract_token(reply.content, reply.headers.get("content-type"))
        except TokenMissing as exc:
            raise ProtocolError(
                f"POST /auth/token answered HTTP {reply.status} for user {self.username!r} without a usable "
                f"token: {self.redact(str(exc))}",
                status_code=reply.status,
                method="POST",
                path=ep.AUTH_TOKEN.path,
            ) from None
        if self.token is not None:
            self._old_tokens = [*self._old_tokens[-3:], self.token.value]
        self.token = make_token(value, expires_in)
        logger.debug("obtained a bearer token for user %r, valid for %.0f s", self.username, self.token.lifetime)
        return value

    # --- requests ------------------------------------------------------------------------------

    def build_request(self, call: Call, token: str | None) -> httpx.Request:
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        endpoint = call.endpoint
        if endpoint.auth is AuthScheme.BEARER:
            headers["Authorization"] = f"Bearer {token}"
        elif endpoint.auth is AuthScheme.BASIC:
            if self.webhook_username is None or self._webhook_password is None:
                raise ValueError("the webhook needs webhook_username and webhook_password on the client")
            headers["Authorization"] = "Basic " + self._basic_credentials()
        content: bytes | None = None
        if call.has_json:
            content = json.dumps(call.json_body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
            headers["Content-Type"] = "application/json"
        elif call.text_body is not None:
            content = call.text_body.encode("utf-8")
            headers["Content-Type"] = "text/plain; charset=utf-8"
        return httpx.Request(
            endpoint.method,
            self.base_url + call.path,
            params=list(call.params) or None,
            headers=headers,
            content=content,
        )

    def execute(self, call: Call) -> Generator[Action, Any, Reply]:
        """Run one call to completion: token, attempts, retries, decoding. See module docstring."""
        endpoint = call.endpoint
        started = time.monotonic()
        attempt = 0
        reauthenticated = False
        while True:
            attempt += 1
            token: str | None = None
            if endpoint.auth is AuthScheme.BEARER:
                token = yield NeedToken()
            request = self.build_request(call, token)
            self.stats.record_request(endpoint.name, endpoint is ep.AUTH_TOKEN)
            outcome = yield Send(request, endpoint)

            retry_after: float | None = None
            if isinstance(outcome, httpx.Response):
                status = outcome.status_code
                self.stats.record_status(status)
                if 200 <= status < 300:
                    return self._decode(call, outcome)
                if status == 401 and endpoint.auth is AuthScheme.BEARER and not reauthenticated:
                    reauthenticated = True
                    attempt -= 1
                    self.stats.record_reauthentication()
                    logger.info("%s %s answered 401; renewing the token and repeating once", endpoint.method, call.path)
                    yield NeedToken(force=True, stale=token)
                    continue
                retry_after = parse_retry_after(outcome.headers.get("retry-after"))
                error: FreightError = self._status_error(call, outcome, retry_after, reauthenticated)
                retryable = status_is_retryable(status, endpoint.retry_safe, retry_after)
                reason = f"HTTP {status}"
            elif isinstance(outcome, httpx.TransportError):
                self.stats.record_transport_error(outcome)
                error = self._transport_error(call, outcome)
                retryable = transport_error_is_retryable(outcome, endpoint.retry_safe)
                reason = type(outcome).__name__
            else:  # pragma: no cover - drivers only send responses or transport errors
                raise TypeError(f"unexpected outcome {outcome!r}")

            if not retryable:
                raise error
            if attempt >= self.retry.max_attempts:
                logger.warning("%s %s: giving up after %d attempts (%s)", endpoint.method, call.path, attempt, reason)
                raise error
            delay = self.retry.delay(attempt, retry_after, self.rng)
            elapsed = time.monotonic() - started
            if elapsed + delay > self.retry.total_budget:
                logger.warning(
                    "%s %s: giving up, retry budget of %.1f s spent (%s)",
                    endpoint.method,
                    call.path,
                    self.retry.total_budget,
                    reason,
                )
                raise error
            self.stats.record_retry()
            logger.info(
                "%s %s: %s, retry %d/%d in %.2f s",
                endpoint.method,
                call.path,
                reason,
                attempt,
                self.retry.max_attempts - 1,
                delay,
            )
            yield Sleep(delay)

    # --- interpreting responses ----------------------------------------------------------------

    def _decode(self, call: Call, response: httpx.Response) -> Reply:
        expect = call.expect
        content = response.content
        if expect in (Expect.NOTHING, Expect.TOKEN):
            return Reply(response.status_code, None, response.headers, content)
        if expect is Expect.OPTIONAL_JSON and not content.strip():
            return Reply(response.status_code, None, response.headers, content)
        try:
            data = json.loads(content)
        except ValueError:
            raise self._protocol_error(call, response, "is not valid JSON") from None
        if expect is Expect.OBJECT and not isinstance(data, dict):
            raise self._protocol_error(call, response, f"is a JSON {type(data).__name__}, expected an object")
        if expect is Expect.ARRAY and (not isinstance(data, list) or not all(isinstance(x, dict) for x in data)):
            raise self._protocol_error(call, response, "is not a JSON array of objects")
        return Reply(response.status_code, data, response.headers, content)

    def excerpt(self, response: httpx.Response) -> str:
        text = response.content.decode("utf-8", errors="replace")
        if "html" in response.headers.get("content-type", "").lower() or text.lstrip().startswith("<"):
            text = re.sub(r"<[^>]*>", " ", text)
        text = self.redact(" ".join(text.split()))
        if len(text) > BODY_EXCERPT_CHARS:
            text = text[: BODY_EXCERPT_CHARS - 1] + "…"
        return text

    def _detail(self, response: httpx.Response) -> str:
        try:
            data = json.loads(response.content)
        except ValueError:
            data = None
        if isinstance(data, dict):
            for key in ("message", "detail", "error_description", "error", "title"):
                value = data.get(key)
                if isinstance(value, str) and value.strip():
                    text = self.redact(" ".join(value.split()))
                    return text if len(text) <= BODY_EXCERPT_CHARS else text[: BODY_EXCERPT_CHARS - 1] + "…"
        return self.excerpt(response) or "(empty body)"

    def _protocol_error(self, call: Call, response: httpx.Response, problem: str) -> ProtocolError:
        excerpt = self.excerpt(response)
        return ProtocolError(
            f"{call.endpoint.method} {call.path} answered HTTP {response.status_code} with a body that {problem} "
            f"({call.expect.value} was expected); body: {excerpt!r}",
            status_code=response.status_code,
            method=call.endpoint.method,
            path=call.path,
            body_excerpt=excerpt,
        )

    def _status_error(
        self, call: Call, response: httpx.Response, retry_after: float | None, reauthenticated: bool
    ) -> APIStatusError:
        status = response.status_code
        endpoint = call.endpoint
        detail = self._detail(response)
        where = f"{endpoint.method} {call.path}"
        phrase = response.reason_phrase or ""
        kwargs: dict[str, Any] = {"status_code": status, "method": endpoint.method, "path": call.path, "detail": detail}
        if endpoint is ep.AUTH_TOKEN and status in (400, 401, 403):
            failure = AuthenticationError(
                f"the freight service refused the credentials of user {self.username!r} "
                f"(HTTP {status} from POST /auth/token: {detail}); check the username and password "
                "(accounts are issued by the operator's support)",
                **kwargs,
            )
            self.auth_failure = failure
            return failure
        if status == 401:
            if endpoint.auth is AuthScheme.BASIC:
                message = (
                    f"{where} refused the webhook credentials of user {self.webhook_username!r} (HTTP 401: {detail})"
                )
            else:
                again = " even after the token was renewed" if reauthenticated else ""
                message = f"{where} rejected the bearer token of user {self.username!r}{again} (HTTP 401: {detail})"
            return AuthenticationError(message, **kwargs)
        if status == 403:
            user = self.webhook_username if endpoint.auth is AuthScheme.BASIC else self.username
            return PermissionDeniedError(
                f"user {user!r} is not permitted to call {endpoint.method} {endpoint.path} "
                f"(HTTP 403 for {call.path}: {detail}). Permissions are granted per endpoint by the "
                "operator's support: ask them to grant this endpoint to the user.",
                **kwargs,
            )
        if status == 429:
            wait = f"; Retry-After {retry_after:g} s" if retry_after is not None else ""
            return RateLimitedError(
                f"{where} was rate limited (HTTP 429{wait}): {detail}", retry_after=retry_after, **kwargs
            )
        cls = error_class_for_status(status)
        unknown_outcome = (
            " — the request may or may not have been processed; check before repeating it"
            if not endpoint.retry_safe and status >= 500 and retry_after is None
            else ""
        )
        return cls(f"{where} failed with HTTP {status} {phrase}: {detail}{unknown_outcome}", **kwargs)

    def _transport_error(self, call: Call, error: httpx.TransportError) -> FreightError:
        where = f"{call.endpoint.method} {call.path}"
        text = self.redact(str(error)) or type(error).__name__
        if isinstance(error, httpx.TimeoutException):
            return FreightTimeoutError(
                f"{where} timed out ({type(error).__name__}: {text})", method=call.endpoint.method, path=call.path
            )
        maybe = (
            " — the request may or may not have been processed; check before repeating it"
            if not call.endpoint.retry_safe and not isinstance(error, httpx.ConnectError)
            else ""
        )
        return FreightConnectionError(
            f"{where} failed: {type(error).__name__}: {text} (service at {self.base_url}){maybe}",
            method=call.endpoint.method,
            path=call.path,
        )

    # --- call factories ------------------------------------------------------------------------

    def bodiless(self, endpoint: Endpoint, expect: Expect, params: Sequence[tuple[str, str]] = (), **path: Any) -> Call:
        return Call(endpoint, expect, path_params=path, params=params)

    def send_json(
        self, endpoint: Endpoint, expect: Expect, body: Any, params: Sequence[tuple[str, str]] = (), **path: Any
    ) -> Call:
        return Call(endpoint, expect, path_params=path, params=params, json_body=body, has_json=True)

    def lookup(
        self,
        endpoint: Endpoint,
        criteria: Iterable[Criterion | Mapping[str, Any]],
        page_no: int,
        page_size: int,
        order_by: Sequence[str] | str | None,
        order_mode: Sequence[str] | str | None,
    ) -> Call:
        validate_paging(page_no, page_size)
        body = criteria_payload(criteria)
        params = [("page_no", str(page_no)), ("page_size", str(page_size)), *ordering_params(order_by, order_mode)]
        return Call(endpoint, Expect.ARRAY, params=params, json_body=body, has_json=True)

    def scroll(self, endpoint: Endpoint, page_no: int, page_size: int) -> Call:
        validate_paging(page_no, page_size)
        return Call(endpoint, Expect.ARRAY, params=[("page_no", str(page_no)), ("page_size", str(page_size))])

    @staticmethod
    def page(reply: Reply, call: Call, model: type[M]) -> Page[M]:
        """A Page of ``model`` items; an item the model cannot read raises ProtocolError on access."""
        params = dict(call.params)

        def parse(item: dict[str, Any]) -> M:
            return parse_model(model, call, item)  # type: ignore[no-any-return]

        return Page(
            reply.data,
            page_no=int(params["page_no"]),
            page_size=int(params["page_size"]),
            page_count=_int_header(reply.headers, "x-page-count"),
            row_count=_int_header(reply.headers, "x-row-count"),
            parse=parse,
        )


# --- helpers ------------------------------------------------------------------------------------


def _int_header(headers: httpx.Headers, name: str) -> int | None:
    value = headers.get(name)
    if value is None:
        return None
    try:
        return int(value.strip())
    except ValueError:
        logger.debug("ignoring non-integer %s header %r", name, value)
        return None


def criteria_payload(criteria: Iterable[Criterion | Mapping[str, Any]]) -> list[dict[str, Any]]:
    if isinstance(criteria, Criterion | Mapping | str):
        raise TypeError("criteria must be a list of Criterion (or dicts), not a single criterion")
    out = []
    for criterion in criteria:
        model = criterion if isinstance(criterion, Criterion) else Criterion.model_validate(dict(criterion))
        out.append(model.to_payload())
    return out


def ordering_params(
    order_by: Sequence[str] | str | None, order_mode: Sequence[str] | str | None
) -> list[tuple[str, str]]:
    keys = [order_by] if isinstance(order_by, str) else list(order_by or [])
    modes = [order_mode] if isinstance(order_mode, str) else list(order_mode or [])
    if any(not isinstance(k, str) or not k.strip() for k in keys):
        raise ValueError(f"order_by entries must be non-empty strings, got {keys!r}")
    modes = [m.upper() if isinstance(m, str) else m for m in modes]
    if any(m not in ("ASC", "DESC") for m in modes):
        raise ValueError(f"order_mode entries must be 'ASC' or 'DESC', got {modes!r}")
    if len(modes) > len(keys):
        raise ValueError(f"{len(modes)} order_mode entries for {len(keys)} order_by keys")
    return [("order_by", k) for k in keys] + [("order_mode", m) for m in modes]


def parse_model(model: type[FreightModel], call: Call, data: Any) -> Any:
    """Build a model from a decoded body; a shape the model cannot take is a ProtocolError."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise ProtocolError(
            f"{call.endpoint.method} {call.path} answered a {model.__name__} that cannot be read: "
            f"{where}: {first.get('msg', 'invalid')} ({exc.error_count()} problem(s))",
            method=call.endpoint.method,
            path=call.path,
        ) from None


def event_type_param(event_type: str | None, event: Mapping[str, Any]) -> list[tuple[str, str]]:
    value = event_type or event.get("type")
    if not isinstance(value, str) or value.upper() not in ("ESTIMATED", "ACTUAL"):
        raise ValueError(f"event_type must be 'ESTIMATED' or 'ACTUAL' (argument or the event's type), got {value!r}")
    return [("type", value.upper())]


def as_id(value: Any, name: str = "id") -> int:
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an integer id, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    raise TypeError(f"{name} must be an integer id, got {value!r}")


def as_payload(value: FreightModel | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(value, FreightModel):
        return value.to_payload()
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"expected a model or a dict, got {type(value).__name__}")
