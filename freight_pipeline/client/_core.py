"""The one implementation of request building, response interpretation, auth and retries.

Sans-I/O: :meth:`ClientCore.execute` is a generator that *yields* what it needs done —
:class:`Send` (send this request, give me the response, an :class:`UnreadableBody` or the
transport exception, in a :class:`Sent`), :class:`Sleep` (wait before a retry), :class:`NeedToken`
(renew the bearer token after a 401) — and *returns* the decoded :class:`Reply`. The driver adds
the bearer token to a request (:meth:`ClientCore.authorize`) once the request holds its slot of the
limit, just before it leaves, so a request that waited for a slot never carries a token that
expired (or came due for renewal) meanwhile. ``FreightClient`` drives it with
``httpx.Client`` and ``time.sleep``, ``AsyncFreightClient`` with ``httpx.AsyncClient`` and
``asyncio.sleep``; neither contains any retry, auth or parsing logic of its own.

This module holds what the core and its drivers exchange (the actions, :class:`Sent`,
:class:`Reply`) and the decisions (tokens, attempts and retries, decoding, models). The calls it
carries out are built in ``calls``; the texts of its errors come from ``error_builder``, secrets are
kept out of texts with ``redaction``.
"""

from __future__ import annotations

import base64
import codecs
import email.message
import json
import logging
import random
import time
from collections.abc import Collection, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

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
from freight_pipeline.client.calls import ARRAY_ELEMENTS, Call, Expect
from freight_pipeline.client.endpoints import AuthScheme, Endpoint
from freight_pipeline.client.error_builder import ErrorBuilder
from freight_pipeline.client.errors import AuthenticationError, FreightError
from freight_pipeline.client.models.base import FreightModel
from freight_pipeline.client.paging import Page
from freight_pipeline.client.proxies import Proxy
from freight_pipeline.client.redaction import REDACTED, redact_url, url_passwords, written_forms
from freight_pipeline.client.retry import (
    DEFAULT_RETRY_POLICY,
    RetryPolicy,
    parse_retry_after,
    refused_before_processing,
    status_is_retryable,
    transport_error_is_retryable,
)
from freight_pipeline.client.stats import ClientStats

logger = logging.getLogger("freight_pipeline.client")

M = TypeVar("M", bound=FreightModel)

DEFAULT_TIMEOUT = httpx.Timeout(30.0, connect=10.0)
DEFAULT_MAX_CONCURRENCY = 8  # requests in flight at once (pooled connections)
USER_AGENT = "freight-pipeline-client/0.1"
NO_RECORDS = b"[]"
"""The body of a ``204 No Content`` to a call that expects an array: none of its records."""
COUNT_HEADERS = ("x-page-count", "x-row-count")
"""The counts a page's answer carries (the spec: every lookup's, both always): its pages', its rows'."""
FRESH_TOKEN_S = 30.0
"""A token younger than this, renewed because the service refused the one before, that no answer has accepted yet
and the service refuses (401) is one it does not know yet: the call waits for it (:meth:`ClientCore._not_known_yet`)."""


# --- what the core and its drivers exchange ------------------------------------------------------


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
        proxy: Proxy | None = None,
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
        self._base = _parsed_base(self.base_url)
        self.display_url = redact_url(self.base_url)
        self.proxy = proxy
        """The proxy every request goes through (:func:`~freight_pipeline.client.proxies.proxy_for`), or None."""
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
        self._unproven: dict[str, tuple[float, bool]] = {}
        """Tokens no answer has accepted yet: when each was issued (epoch seconds), and whether it was renewed
        because the service refused the one before (a 401)."""
        self._errors = ErrorBuilder(self.username, self.webhook_username, self.display_url, self.redact, proxy)
        """The texts of this client's errors; each passes through :meth:`redact` (the current secrets)."""

    # --- secrets -------------------------------------------------------------------------------

    def _secrets(self) -> list[str]:
        values = [self._password, self._webhook_password, self.token.value if self.token else None]
        values.extend(url_passwords(self.base_url))
        if self.proxy is not None:
            values.append(self.proxy.password)
        if self.webhook_username is not None and self._webhook_password:
            values.append(self._basic_credentials())
        values.extend(self._old_tokens)
        forms = {form for v in values if v and len(v) >= 3 for form in written_forms(v)}
        return sorted(forms, key=len, reverse=True)

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

    def accept_token(self, reply: Reply, forced: bool) -> str:
        """Keep the token of a token call's reply (read by :meth:`_token_reply`) and return it; ``forced``: it
        replaces a token the service refused."""
        value, expires_in = reply.data
        if self.token is not None:
            self._old_tokens = [*self._old_tokens[-3:], self.token.value]
        self.token = make_token(value, expires_in)
        self._unproven = {old: at for old, at in self._unproven.items() if old in self._old_tokens}
        self._unproven[value] = (self.token.issued_at, forced)
        logger.debug("obtained a bearer token for user %r, valid for %.0f s", self.username, self.token.lifetime)
        return value

    # --- requests ------------------------------------------------------------------------------

    def build_request(self, call: Call, token: str | None = None) -> httpx.Request:
        """The request of ``call``; a bearer call carries ``token``, or none yet (see :meth:`authorize`)."""
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        endpoint = call.endpoint
        if endpoint.auth is AuthScheme.BEARER:
            if token is not None:
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
        return httpx.Request(endpoint.method, url_of(self._base, call.path, call.params), headers=headers,
                             content=content)

    @staticmethod
    def authorize(request: httpx.Request, token: str) -> None:
        """Give a bearer call's request its token (the driver does, once the request holds its slot)."""
        request.headers["Authorization"] = f"Bearer {token}"

    def execute(self, call: Call) -> Generator[Action, Any, Reply]:
        """Run one call to completion: token, attempts, retries, decoding. See module docstring."""
        endpoint = call.endpoint
        bearer = endpoint.auth is AuthScheme.BEARER
        started = time.monotonic()
        attempt = refusals = waits = 0
        reauthenticated = False
        while True:
            attempt += 1
            request = self.build_request(call)
            sent: Sent = yield Send(request, endpoint, bearer=bearer, limited=endpoint is not ep.AUTH_TOKEN)
            self.stats.record_request(endpoint.name, endpoint is ep.AUTH_TOKEN)
            outcome = sent.outcome
            not_known_yet = self._not_known_yet(outcome, sent.token, reauthenticated)
            if not not_known_yet and self._renew_token_first(call, outcome, reauthenticated):
                reauthenticated = True
                attempt -= 1
                yield NeedToken(force=True, stale=sent.token)
                continue
            result = self._interpret(call, outcome, reauthenticated)
            if isinstance(result, Reply):
                if self._unproven and sent.token is not None:
                    self._unproven.pop(sent.token, None)  # the service knows it now
                return result
            if not_known_yet:  # not an attempt: bounded by the token's freshness and the budget
                attempt -= 1
                waits += 1
                yield Sleep(self._token_wait(call, result, waits, started))
                continue
            if result.refused:  # waiting out a Retry-After is not a failed attempt (see retry)
                attempt -= 1
                refusals += 1
            yield Sleep(self._retry_delay(call, result, attempt, refusals, started))

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

    def _not_known_yet(self, outcome: Outcome, token: str | None, reauthenticated: bool) -> bool:
        """A 401 on a token issued less than ``FRESH_TOKEN_S`` ago that no answer has accepted yet, itself a
        renewal (this call's, or another's after a 401): the service does not know it yet (its nodes learn of a
        new token late). The call is repeated after the backoff, not as an attempt, and the token is not renewed:
        a renewal would give another token the service does not know yet, and refuse the calls still waiting
        for this one. Whether it is still the current token does not matter (another call may have renewed it
        meanwhile). A first token refused at once is renewed once, as any token refused."""
        if token is None or not isinstance(outcome, httpx.Response) or outcome.status_code != 401:
            return False
        unproven = self._unproven.get(token)
        if unproven is None:
            return False
        issued, renewed = unproven
        return (renewed or reauthenticated) and time.time() - issued < FRESH_TOKEN_S

    def _token_wait(self, call: Call, failure: Failure, waits: int, started: float) -> float:
        """The wait before repeating a call refused for a token the service does not know yet: the backoff of
        the ``waits``-th such refusal; raises the refusal when the retry budget would be spent."""
        delay = self.retry.backoff(waits, self.rng)
        self._spend(call, failure, delay, started)
        logger.info("%s: 401 on a token issued moments ago, again in %.2f s", call.where, delay)
        return delay

    def _spend(self, call: Call, failure: Failure, delay: float, started: float) -> None:
        """Count a retry after ``delay`` more seconds; raises the failure's error instead when the wait would end
        after the retry budget (counted from ``started``, the call's first attempt)."""
        if time.monotonic() - started + delay > self.retry.total_budget:
            logger.warning(
                "%s: giving up, retry budget of %.1f s spent (%s)", call.where, self.retry.total_budget, failure.reason
            )
            raise failure.error
        self.stats.record_retry()

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
            error = self._errors.protocol_error(call, status, outcome.response.headers, b"", problem)
            return Failure(error, call.endpoint.retry_safe, "undecodable body")
        if isinstance(outcome, httpx.TransportError):
            self.stats.record_transport_error(outcome)
            retryable = transport_error_is_retryable(outcome, call.endpoint.retry_safe)
            return Failure(self._errors.transport_error(call, outcome), retryable, type(outcome).__name__)
        raise TypeError(f"unexpected outcome {outcome!r}")  # pragma: no cover - drivers send only these

    def _retry_delay(self, call: Call, failure: Failure, attempt: int, refusals: int, started: float) -> float:
        """The wait before the next attempt; raises the failure's error when no attempt is left.

        ``attempt`` counts the failed attempts, this one included unless it was a refusal (with
        Retry-After), which ``refusals`` counts: those are bounded by the budget only.
        """
        if not failure.retryable:
            raise failure.error
        if failure.refused and failure.retry_after is not None:
            delay = self.retry.refusal_delay(refusals, failure.retry_after, self.rng)
        elif attempt >= self.retry.max_attempts:
            logger.warning("%s: giving up after %d attempts (%s)", call.where, attempt, failure.reason)
            raise failure.error
        else:
            delay = self.retry.delay(attempt, failure.retry_after, self.rng)
        self._spend(call, failure, delay, started)
        if failure.refused:
            logger.info("%s: %s, refused (%d), again in %.2f s", call.where, failure.reason, refusals, delay)
        else:
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
        if status == 204 and expect in ARRAY_ELEMENTS:  # No Content: no record (a 200 without a body is no answer)
            return Reply(status, received([], NO_RECORDS), headers, NO_RECORDS)
        try:
            data = loads(content)
        except ValueError:
            utf8 = in_utf8(content, headers.get("content-type"))  # a body in the charset it declares (Latin-1)
            try:
                if utf8 is None:
                    raise
                data, content = loads(utf8), utf8
            except ValueError:
                error = self._errors.protocol_error(call, status, headers, content, "is not valid JSON")
                return Failure(error, call.endpoint.retry_safe, "invalid JSON body")
        problem = shape_problem(expect, data)
        if problem is not None:
            return Failure(self._errors.protocol_error(call, status, headers, content, problem), False, problem)
        return Reply(status, received(data, content), headers, content)

    def _token_reply(self, call: Call, status: int, headers: httpx.Headers, content: bytes) -> Reply | Failure:
        """A reply whose data is (token, expires_in). A body that is not valid JSON (nor a bare token)
        may be retried, one without a token never; the error holds no excerpt (it may hold a token)."""
        try:
            data = extract_token(content, headers.get("content-type"))
        except TokenMissing as exc:
            error = self._errors.token_missing(call, status, exc)
            broken = isinstance(exc, TokenBodyBroken)
            return Failure(error, broken and call.endpoint.retry_safe, "broken token body" if broken else "no token")
        return Reply(status, data, headers, content)

    def _status_failure(self, call: Call, response: httpx.Response, reauthenticated: bool) -> Failure:
        status = response.status_code
        retry_after = parse_retry_after(response.headers.get("retry-after"))
        error = self._errors.status_error(call, response, retry_after, reauthenticated)
        if call.endpoint is ep.AUTH_TOKEN and isinstance(error, AuthenticationError):
            self.auth_failure = error  # the credentials were refused: they stay refused (valid_token)
        retryable = status_is_retryable(status, call.endpoint.retry_safe, retry_after)
        return Failure(error, retryable, f"HTTP {status}", retry_after, refused_before_processing(status, retry_after))

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
            raise self._errors.protocol_error(call, reply.status, reply.headers, reply.content, problem) from None

    def one(self, model: type[M], call: Call, reply: Reply) -> M:
        return self.parse(model, call, reply, reply.data)

    def many(self, model: type[M], call: Call, reply: Reply) -> list[M]:
        return [self.parse(model, call, reply, item) for item in reply.data]

    def many_or_names(self, model: type[M], call: Call, reply: Reply) -> list[M | str]:
        """The models of an array's objects, its names (strings) as received."""
        return [item if isinstance(item, str) else self.parse(model, call, reply, item) for item in reply.data]

    def optional(self, model: type[M], call: Call, reply: Reply) -> M | None:
        """The model of an object body; None when the service answered without one."""
        return self.parse(model, call, reply, reply.data) if isinstance(reply.data, dict) else None

    def page(self, model: type[M], call: Call, reply: Reply) -> Page[M]:
        """A Page of ``model`` items; an item the model cannot read raises ProtocolError on access.

        ``204 No Content`` to page 0 without ``X-Page-Count`` and ``X-Row-Count`` (a Spring ``noContent()``): the
        query holds no row, so both count 0; to a later page it says nothing of the query's total (None), and
        counts sent with it are taken as sent."""
        params = dict(call.params)
        page_no = int(params["page_no"])
        page_count, row_count = (int_header(reply.headers, name) for name in COUNT_HEADERS)
        if reply.status == 204 and page_no == 0 and not any(name in reply.headers for name in COUNT_HEADERS):
            page_count = row_count = 0
        return Page(
            reply.data,
            page_no=page_no,
            page_size=int(params["page_size"]),
            page_count=page_count,
            row_count=row_count,
            parse=lambda item: self.parse(model, call, reply, item),
            method=call.endpoint.method,
            path=call.path,
        )


def _parsed_base(base_url: str) -> httpx.URL:
    """``base_url`` parsed, refused (naming it, its password masked) when httpx cannot read it or it has a query or
    a fragment, which every request's path would land behind."""
    try:
        base = httpx.URL(base_url)
    except httpx.InvalidURL as exc:
        raise ValueError(f"base_url {redact_url(base_url)!r} is not a URL: {exc}") from None
    if base.query or base.fragment:
        raise ValueError(f"base_url {redact_url(base_url)!r} has a query or fragment; give the service's address "
                         "without one (the requests' paths are added to it)")
    return base


def url_of(base: httpx.URL, path: str, params: Sequence[tuple[str, str]]) -> httpx.URL:
    """``base`` with ``path`` (percent-encoded by ``Endpoint.format``) appended and ``params`` as its query: the URL
    httpx makes of the text ``base + path`` with ``params``, put together from the base's parts (parsed once)
    instead of parsing that text anew, which was half the CPU of building a request (about 20 µs of a GET's 40).
    Reads httpx's parts (``URL._uri_reference``); ``client/test_core.py`` pins the result to httpx's own parse
    for every endpoint, so an httpx that changes them fails there, not on the wire."""
    url = httpx.URL.__new__(httpx.URL)
    query = str(httpx.QueryParams(list(params))) if params else None
    url._uri_reference = base._uri_reference._replace(path=base._uri_reference.path + path, query=query)
    return url


# --- reading an answer ---------------------------------------------------------------------------


def loads(content: bytes) -> Any:
    """JSON from a body: orjson (fast) first; what it refuses (NaN, integers beyond 64 bits, lone
    surrogates) is read by the standard library, so a bad value reaches normalization (which reports
    it) instead of failing the whole record. ValueError when it is not JSON at all."""
    try:
        return orjson.loads(content)
    except orjson.JSONDecodeError:
        return json.loads(content)


def in_utf8(content: bytes, content_type: str | None) -> bytes | None:
    """``content`` read in the charset its ``Content-Type`` declares and written in UTF-8 (what the rest of the
    pipeline reads); None when it declares none or UTF-8, or it cannot be read so. Only for a body that is not
    valid UTF-8: one that is stays as it is, whatever charset is declared (a service that writes UTF-8 but
    declares ISO-8859-1 would otherwise turn every ``ü`` into ``Ã¼``)."""
    if not content_type or "charset" not in content_type.lower():
        return None
    header = email.message.Message()
    header["content-type"] = content_type
    charset = header.get_content_charset()
    try:
        if charset is None or codecs.lookup(charset).name.startswith("utf-8"):
            return None
    except LookupError:  # a charset Python does not know
        return None
    try:
        content.decode("utf-8")
    except UnicodeDecodeError:
        try:
            return content.decode(charset).encode("utf-8")
        except UnicodeDecodeError:
            return None
    return None  # valid UTF-8: whatever is wrong with it, the charset is not


class ReceivedObject(dict[str, Any]):
    """A JSON object decoded from a body, which pickles as that body (:func:`received`)."""

    __slots__ = ("body",)

    def __init__(self, data: dict[str, Any], body: bytes) -> None:
        super().__init__(data)
        self.body = body

    def __reduce__(self) -> tuple[Any, tuple[bytes]]:
        return loads, (self.body,)


class ReceivedArray(list[Any]):
    """A JSON array decoded from a body, which pickles as that body (:func:`received`)."""

    __slots__ = ("body",)

    def __init__(self, data: list[Any], body: bytes) -> None:
        super().__init__(data)
        self.body = body

    def __reduce__(self) -> tuple[Any, tuple[bytes]]:
        return loads, (self.body,)


class HeldBody:
    """A reply's JSON kept as its body only (:meth:`of`), decoded where it is asked for (:meth:`decoded`), and
    pickled as itself (the bytes); an object's top-level values that are neither object nor array at hand
    (``top``: empty for an array), with the arrays and objects asked for (:meth:`of`'s ``keep``). Not a dict or a
    list: what holds one reads ``top`` or decodes it, and nothing can take it for the whole JSON by mistake.

    What a sync keeps of each part's answer while the batch it belongs to fills: holding the decoded values
    instead kept a batch's documents alive in the sync's process, for its garbage collector to walk again at
    every collection their allocations triggered; and its normalizing worker decodes one shipment's answers at a
    time (``sync.assemble``), never a whole batch's at once (docs/performance.md)."""

    __slots__ = ("body", "top")

    def __init__(self, body: bytes, top: dict[str, Any]) -> None:
        self.body = body
        self.top = top

    @classmethod
    def of(cls, data: Any, keep: Collection[str] = ()) -> Any:
        """``data`` (a reply's, as :func:`received` made it) held as its body, an object's arrays or objects named
        in ``keep`` in ``top`` too; another value as it is."""
        if type(data) is ReceivedObject:
            return cls(data.body, {key: value for key, value in data.items()
                                   if (type(value) is not dict and type(value) is not list) or key in keep})
        if type(data) is ReceivedArray:
            return cls(data.body, {})
        return data

    def decoded(self) -> Any:
        return loads(self.body)

    def __reduce__(self) -> tuple[Any, tuple[bytes, dict[str, Any]]]:
        return HeldBody, (self.body, self.top)

    def __repr__(self) -> str:
        return f"HeldBody({len(self.body):,} bytes)"


def decoded(answer: Any) -> Any:
    """``answer`` as JSON values: a :class:`HeldBody` decoded, anything else as it is."""
    return answer.decoded() if type(answer) is HeldBody else answer


def received(data: Any, body: bytes) -> Any:
    """``data`` (``loads(body)``) as a dict or list that pickles as ``body``, decoded again where it is unpickled:
    a sync hands its records to the normalizing worker as the bytes received, not as a walk of every value
    (which cost the sync's process more than its JSON decoding, docs/performance.md). Other values as they are.

    Only for data as decoded: a change made to it would not travel with the bytes (nothing changes a reply)."""
    if type(data) is dict:
        return ReceivedObject(data, body)
    if type(data) is list:
        return ReceivedArray(data, body)
    return data


def shape_problem(expect: Expect, data: Any) -> str | None:
    """What makes ``data`` not the JSON ``expect`` asks for; None when it is."""
    if expect is Expect.OBJECT and not isinstance(data, dict):
        return f"is a JSON {type(data).__name__}, expected an object"
    elements = ARRAY_ELEMENTS.get(expect)
    if elements is not None and (not isinstance(data, list) or not all(isinstance(x, elements) for x in data)):
        return f"is not {expect.value}"
    return None


def int_header(headers: httpx.Headers, name: str) -> int | None:
    """The count header ``name`` as an integer; None when it is missing, not an integer, or negative (no count:
    a service writing ``-1`` for "unknown" has said nothing, and a walk must not end on it)."""
    value = headers.get(name)
    if value is None:
        return None
    try:
        count = int(value.strip())
    except ValueError:
        logger.debug("ignoring non-integer %s header %r", name, value)
        return None
    if count < 0:
        logger.debug("ignoring negative %s header %r", name, value)
        return None
    return count
