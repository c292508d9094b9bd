"""The one implementation of request building, response interpretation, auth and retries.

Sans-I/O: :meth:`ClientCore.execute` is a generator that *yields* what it needs done —
:class:`Send` (send this request, give me the response, an :class:`UnreadableBody` or the
transport exception), :class:`Sleep` (wait before a retry), :class:`NeedToken` (give me a valid
bearer token) — and *returns* the decoded :class:`Reply`. ``FreightClient`` drives it with
``httpx.Client`` and ``time.sleep``, ``AsyncFreightClient`` with ``httpx.AsyncClient`` and
``asyncio.sleep``; neither contains any retry, auth or parsing logic of its own.
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
from urllib.parse import unquote, urlsplit, urlunsplit

import httpx
import orjson
from pydantic import ValidationError

from freight_pipeline.client import endpoints as ep
from freight_pipeline.client.auth import (
    DEFAULT_REFRESH_MARGIN_S,
    Token,
    TokenBodyBroken,
    TokenMissing,
    extract_token,
    make_token,
)
from freight_pipeline.client.endpoints import AuthScheme, Endpoint
from freight_pipeline.client.errors import (
    BODY_EXCERPT_CHARS,
    APIStatusError,
    AuthenticationError,
    BadRequestError,
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
DEFAULT_MAX_CONCURRENCY = 8  # requests in flight at once (pooled connections)
USER_AGENT = "freight-pipeline-client/0.1"
REDACTED = "***"
MAYBE_PROCESSED = " — the request may or may not have been processed; check before repeating it"


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
class UnreadableBody:
    """A response whose body could not be decoded (``httpx.DecodingError``, e.g. a broken gzip stream)."""

    response: httpx.Response
    error: httpx.DecodingError


Outcome = httpx.Response | UnreadableBody | httpx.TransportError


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
            raise ValueError(f"base_url must be an http(s) URL, got {redact_url(base_url or '')!r}")
        if not username:
            raise ValueError("username is required")
        if not password:
            raise ValueError(f"password is required (user {username!r})")
        if (webhook_username is None) != (webhook_password is None):
            raise ValueError("give both webhook_username and webhook_password, or neither")
        self.base_url = base_url.rstrip("/")
        self.display_url = redact_url(self.base_url)
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
        values.extend(url_passwords(self.base_url))
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
        """Keep the token of a token call's reply (read by :meth:`_token_reply`) and return it."""
        value, expires_in = reply.data
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
            if self._renew_token_first(call, outcome, reauthenticated):
                reauthenticated = True
                attempt -= 1
                yield NeedToken(force=True, stale=token)
                continue
            result = self._interpret(call, outcome, reauthenticated)
            if isinstance(result, Reply):
                return result
            yield Sleep(self._retry_delay(call, result, attempt, started))

    def _renew_token_first(self, call: Call, outcome: Outcome, reauthenticated: bool) -> bool:
        """A first 401 on a bearer call: renew the token and repeat the call once (not an attempt)."""
        if reauthenticated or call.endpoint.auth is not AuthScheme.BEARER:
            return False
        if not isinstance(outcome, httpx.Response) or outcome.status_code != 401:
            return False
        self.stats.record_status(401)
        self.stats.record_reauthentication()
        logger.info("%s answered 401; renewing the token and repeating once", call.where)
        return True

    def _interpret(self, call: Call, outcome: Outcome, reauthenticated: bool) -> Reply | Failure:
        if isinstance(outcome, httpx.Response):
            self.stats.record_status(outcome.status_code)
            if outcome.is_success:
                return self._decode(call, outcome.status_code, outcome.headers, outcome.content)
            return self._status_failure(call, outcome, reauthenticated)
        if isinstance(outcome, UnreadableBody):
            status = outcome.response.status_code
            self.stats.record_status(status)
            problem = f"could not be decoded ({type(outcome.error).__name__}: {self.redact(str(outcome.error))})"
            error = self._protocol_error(call, status, outcome.response.headers, b"", problem)
            return Failure(error, call.endpoint.retry_safe, "undecodable body")
        if isinstance(outcome, httpx.TransportError):
            self.stats.record_transport_error(outcome)
            retryable = transport_error_is_retryable(outcome, call.endpoint.retry_safe)
            return Failure(self._transport_error(call, outcome), retryable, type(outcome).__name__)
        raise TypeError(f"unexpected outcome {outcome!r}")  # pragma: no cover - drivers send only these

    def _retry_delay(self, call: Call, failure: Failure, attempt: int, started: float) -> float:
        """The wait before the next attempt; raises the failure's error when no attempt is left."""
        if not failure.retryable:
            raise failure.error
        if attempt >= self.retry.max_attempts:
            logger.warning("%s: giving up after %d attempts (%s)", call.where, attempt, failure.reason)
            raise failure.error
        delay = self.retry.delay(attempt, failure.retry_after, self.rng)
        if time.monotonic() - started + delay > self.retry.total_budget:
            logger.warning(
                "%s: giving up, retry budget of %.1f s spent (%s)", call.where, self.retry.total_budget, failure.reason
            )
            raise failure.error
        self.stats.record_retry()
        logger.info(
            "%s: %s, retry %d/%d in %.2f s", call.where, failure.reason, attempt, self.retry.max_attempts - 1, delay
        )
        return delay

    # --- interpreting responses ----------------------------------------------------------------

    def _decode(self, call: Call, status: int, headers: httpx.Headers, content: bytes) -> Reply | Failure:
        """The reply of a 2xx; a body that is not valid JSON may be retried, a wrong shape never."""
        expect = call.expect
        if expect is Expect.TOKEN:
            return self._token_reply(call, status, headers, content)
        if expect is Expect.NOTHING or (expect is Expect.OPTIONAL_JSON and not content.strip()):
            return Reply(status, None, headers, content)
        try:
            data = loads(content)
        except ValueError:
            error = self._protocol_error(call, status, headers, content, "is not valid JSON")
            return Failure(error, call.endpoint.retry_safe, "invalid JSON body")
        problem = _shape_problem(expect, data)
        if problem is not None:
            return Failure(self._protocol_error(call, status, headers, content, problem), False, problem)
        return Reply(status, data, headers, content)

    def _token_reply(self, call: Call, status: int, headers: httpx.Headers, content: bytes) -> Reply | Failure:
        """A reply whose data is (token, expires_in). A body that is not valid JSON (nor a bare token)
        may be retried, one without a token never; the error holds no excerpt (it may hold a token)."""
        try:
            data = extract_token(content, headers.get("content-type"))
        except TokenMissing as exc:
            error = ProtocolError(
                f"{call.where} answered HTTP {status} for user {self.username!r} without a usable "
                f"token: {self.redact(str(exc))}",
                status_code=status,
                method=call.endpoint.method,
                path=call.path,
            )
            broken = isinstance(exc, TokenBodyBroken)
            return Failure(error, broken and call.endpoint.retry_safe, "broken token body" if broken else "no token")
        return Reply(status, data, headers, content)

    def excerpt(self, content: bytes, content_type: str = "") -> str:
        """At most BODY_EXCERPT_CHARS of a body: tags stripped, whitespace collapsed, secrets redacted."""
        text = content.decode("utf-8", errors="replace")
        if "html" in content_type.lower() or text.lstrip().startswith("<"):
            text = re.sub(r"<[^>]*>", " ", text)
        return _shorten(self.redact(" ".join(text.split())))

    def _detail(self, response: httpx.Response) -> str:
        try:
            data = json.loads(response.content)
        except ValueError:
            data = None
        if isinstance(data, dict):
            for key in ("message", "detail", "error_description", "error", "title"):
                value = data.get(key)
                if isinstance(value, str) and value.strip():
                    return _shorten(self.redact(" ".join(value.split())))
        return self.excerpt(response.content, response.headers.get("content-type", "")) or "(empty body)"

    def _protocol_error(
        self, call: Call, status: int, headers: httpx.Headers, content: bytes, problem: str
    ) -> ProtocolError:
        excerpt = self.excerpt(content, headers.get("content-type", ""))
        processed = (
            f" — the service did process the request (HTTP {status}): do not repeat it blindly"
            if not call.endpoint.retry_safe
            else ""
        )
        return ProtocolError(
            f"{call.where} answered HTTP {status} with a body that {problem} "
            f"({call.expect.value} was expected); body: {excerpt!r}{processed}",
            status_code=status,
            method=call.endpoint.method,
            path=call.path,
            body_excerpt=excerpt,
        )

    def _status_failure(self, call: Call, response: httpx.Response, reauthenticated: bool) -> Failure:
        status = response.status_code
        retry_after = parse_retry_after(response.headers.get("retry-after"))
        error = self._status_error(call, response, retry_after, reauthenticated)
        retryable = status_is_retryable(status, call.endpoint.retry_safe, retry_after)
        return Failure(error, retryable, f"HTTP {status}", retry_after)

    def _status_error(
        self, call: Call, response: httpx.Response, retry_after: float | None, reauthenticated: bool
    ) -> APIStatusError:
        status = response.status_code
        endpoint = call.endpoint
        detail = self._detail(response)
        kwargs: dict[str, Any] = {"status_code": status, "method": endpoint.method, "path": call.path, "detail": detail}
        if endpoint is ep.AUTH_TOKEN and status in (400, 401, 403):
            return self._token_refused(status, detail, kwargs)
        if status == 401:
            return AuthenticationError(self._unauthorized_message(call, detail, reauthenticated), **kwargs)
        if status == 403:
            user = self.webhook_username if endpoint.auth is AuthScheme.BASIC else self.username
            return PermissionDeniedError(
                f"user {user!r} is not permitted to call {endpoint} "
                f"(HTTP 403 for {call.path}: {detail}). Permissions are granted per endpoint by the "
                "operator's support: ask them to grant this endpoint to the user.",
                **kwargs,
            )
        if status == 429:
            wait = f"; Retry-After {retry_after:g} s" if retry_after is not None else ""
            return RateLimitedError(
                f"{call.where} was rate limited (HTTP 429{wait}): {detail}", retry_after=retry_after, **kwargs
            )
        unknown_outcome = MAYBE_PROCESSED if not endpoint.retry_safe and status >= 500 and retry_after is None else ""
        phrase = response.reason_phrase or ""
        cls = error_class_for_status(status)
        return cls(f"{call.where} failed with HTTP {status} {phrase}: {detail}{unknown_outcome}", **kwargs)

    def _token_refused(self, status: int, detail: str, kwargs: dict[str, Any]) -> APIStatusError:
        """401/403: the credentials were refused (remembered). 400: the request shape, not remembered."""
        if status == 400:
            return BadRequestError(
                f"POST /auth/token answered HTTP 400 for user {self.username!r}: {detail}. The client sends "
                'a JSON body {"username": ..., "password": ...}; the spec does not show the token request\'s '
                "fields (assumption A1, docs/assumptions.md), so the service may expect another shape — check the "
                "operator's documentation",
                **kwargs,
            )
        failure = AuthenticationError(
            f"the freight service refused the credentials of user {self.username!r} "
            f"(HTTP {status} from POST /auth/token: {detail}); check the username and password "
            "(accounts are issued by the operator's support)",
            **kwargs,
        )
        self.auth_failure = failure
        return failure

    def _unauthorized_message(self, call: Call, detail: str, reauthenticated: bool) -> str:
        if call.endpoint.auth is AuthScheme.BASIC:
            return (
                f"{call.where} refused the webhook credentials of user {self.webhook_username!r} (HTTP 401: {detail})"
            )
        again = " even after the token was renewed" if reauthenticated else ""
        return f"{call.where} rejected the bearer token of user {self.username!r}{again} (HTTP 401: {detail})"

    def _transport_error(self, call: Call, error: httpx.TransportError) -> FreightError:
        text = self.redact(str(error)) or type(error).__name__
        where = call.where
        failure: FreightError
        if isinstance(error, httpx.TimeoutException):
            failure = FreightTimeoutError(
                f"{where} timed out ({type(error).__name__}: {text})", method=call.endpoint.method, path=call.path
            )
        else:
            sent = call.endpoint.retry_safe or isinstance(error, httpx.ConnectError)
            maybe = "" if sent else MAYBE_PROCESSED
            failure = FreightConnectionError(
                f"{where} failed: {type(error).__name__}: {text} (service at {self.display_url}){maybe}",
                method=call.endpoint.method,
                path=call.path,
            )
        failure.__cause__ = error  # callers tell "cannot connect" from "one answer broke off"
        return failure

    # --- models from replies -------------------------------------------------------------------

    def parse(self, model: type[M], call: Call, reply: Reply, data: Any) -> M:
        """Build a model from (part of) a reply; a shape the model cannot take is a ProtocolError."""
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0] if exc.errors() else {}
            where = ".".join(str(p) for p in first.get("loc", ())) or "(the record)"
            problem = (
                f"holds a {model.__name__} that cannot be read: {where}: {first.get('msg', 'invalid')} "
                f"({exc.error_count()} problem(s))"
            )
            raise self._protocol_error(call, reply.status, reply.headers, reply.content, problem) from None

    def one(self, model: type[M], call: Call, reply: Reply) -> M:
        return self.parse(model, call, reply, reply.data)

    def many(self, model: type[M], call: Call, reply: Reply) -> list[M]:
        return [self.parse(model, call, reply, item) for item in reply.data]

    def optional(self, model: type[M], call: Call, reply: Reply) -> M | None:
        """The model of an object body; None when the service answered without one."""
        return self.parse(model, call, reply, reply.data) if isinstance(reply.data, dict) else None

    def page(self, model: type[M], call: Call, reply: Reply) -> Page[M]:
        """A Page of ``model`` items; an item the model cannot read raises ProtocolError on access."""
        params = dict(call.params)
        return Page(
            reply.data,
            page_no=int(params["page_no"]),
            page_size=int(params["page_size"]),
            page_count=_int_header(reply.headers, "x-page-count"),
            row_count=_int_header(reply.headers, "x-row-count"),
            parse=lambda item: self.parse(model, call, reply, item),
            method=call.endpoint.method,
            path=call.path,
        )

    # --- call factories ------------------------------------------------------------------------

    def by_id(self, endpoint: Endpoint, expect: Expect, record_id: Any, params: Sequence[tuple[str, str]] = ()) -> Call:
        """A call without a body to ``endpoint`` with the path parameter ``{id}``."""
        return Call(endpoint, expect, path_params={"id": as_id(record_id)}, params=params)

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

    def event_write(
        self,
        endpoint: Endpoint,
        shipment_id: Any,
        event: FreightModel | Mapping[str, Any],
        event_type: str | None,
        **path: Any,
    ) -> Call:
        """Create or update a shipment event: the event as body, its type as the ``type`` query parameter."""
        body = as_payload(event)
        params = event_type_param(event_type, body)
        return self.send_json(
            endpoint, Expect.OPTIONAL_JSON, body, params, shipmentId=as_id(shipment_id, "shipment_id"), **path
        )

    def efile_retrieve(self, efile_id: Any, cascade: bool) -> Call:
        return self.by_id(ep.EFILE_RETRIEVE, Expect.OBJECT, efile_id, [("cascade", "true" if cascade else "false")])

    def efile_reference(self, endpoint: Endpoint, efile_id: Any, reference: FreightModel | Mapping[str, Any]) -> Call:
        """Add or delete a reference: the EFileReference is the body."""
        return self.send_json(endpoint, Expect.NOTHING, as_payload(reference), id=as_id(efile_id))

    def efile_role_add(self, efile_id: Any, role: str) -> Call:
        """Link a role; the spec sends it as a ``text/plain`` body."""
        if not isinstance(role, str) or not role.strip():
            raise ValueError(f"role must be a non-empty string, got {role!r}")
        return Call(ep.EFILE_ROLE_ADD, Expect.NOTHING, path_params={"id": as_id(efile_id)}, text_body=role)

    def efile_role_delete(self, efile_id: Any, role: FreightModel | Mapping[str, Any] | str) -> Call:
        """Unlink a role; the body is an EFileRole (a plain name is sent as ``{"role": name}``)."""
        body = {"role": role} if isinstance(role, str) else as_payload(role)
        return self.send_json(ep.EFILE_ROLE_DELETE, Expect.NOTHING, body, id=as_id(efile_id))

    def webhook(self, payload: Mapping[str, Any]) -> Call:
        if not isinstance(payload, Mapping):
            raise TypeError("the webhook payload must be a JSON object (a mapping)")
        return self.send_json(ep.WEBHOOK, Expect.OPTIONAL_JSON, dict(payload))


# --- helpers ------------------------------------------------------------------------------------


def _shorten(text: str) -> str:
    return text if len(text) <= BODY_EXCERPT_CHARS else text[: BODY_EXCERPT_CHARS - 1] + "…"


def loads(content: bytes) -> Any:
    """JSON from a body: orjson (fast) first; what it refuses (NaN, integers beyond 64 bits, lone
    surrogates) is read by the standard library, so a bad value reaches normalization (which reports
    it) instead of failing the whole record. ValueError when it is not JSON at all."""
    try:
        return orjson.loads(content)
    except orjson.JSONDecodeError:
        return json.loads(content)


def _shape_problem(expect: Expect, data: Any) -> str | None:
    if expect is Expect.OBJECT and not isinstance(data, dict):
        return f"is a JSON {type(data).__name__}, expected an object"
    if expect is Expect.ARRAY and (not isinstance(data, list) or not all(isinstance(x, dict) for x in data)):
        return "is not a JSON array of objects"
    return None


def _int_header(headers: httpx.Headers, name: str) -> int | None:
    value = headers.get(name)
    if value is None:
        return None
    try:
        return int(value.strip())
    except ValueError:
        logger.debug("ignoring non-integer %s header %r", name, value)
        return None


def redact_url(url: str) -> str:
    """``url`` with the password of a ``user:password@`` part replaced by ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{parts.username}:{REDACTED}@{host}"))


def url_passwords(url: str) -> list[str]:
    """The password of a ``user:password@`` URL as written and decoded (secrets to scrub from texts)."""
    password = urlsplit(url).password
    return [] if password is None else [password, unquote(password)]


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
