"""The client's errors for failed calls: what happened, to whom, and a body excerpt, secrets redacted."""

from __future__ import annotations

import email.message
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from freight_pipeline.client import endpoints as ep
from freight_pipeline.client.auth import TokenMissing
from freight_pipeline.client.calls import Call
from freight_pipeline.client.endpoints import AuthScheme
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
from freight_pipeline.client.proxies import Proxy
from freight_pipeline.client.redaction import redact_url

MAYBE_PROCESSED = " — the request may or may not have been processed; check before repeating it"


def body_text(content: bytes, content_type: str = "") -> str:
    """A body as text: UTF-8, else in the charset its ``Content-Type`` declares, else ISO-8859-1 (every byte one
    character), so that a secret a service echoes in a charset of its own is whole when it is redacted (read as UTF-8
    with replacements, ``Zürich`` in ISO-8859-1 became ``Z\ufffdrich`` and escaped the redaction)."""
    try:
        return content.decode("utf-8")
    except UnicodeDecodeError:
        pass
    header = email.message.Message()
    header["content-type"] = content_type
    for charset in (header.get_content_charset(), "iso-8859-1"):
        try:
            return content.decode(charset or "iso-8859-1")
        except (LookupError, UnicodeDecodeError):
            continue
    return content.decode("iso-8859-1")


@dataclass(frozen=True)
class ErrorBuilder:
    """Builds the error of a failed call for one client's user; every text passes through ``redact``."""

    username: str
    webhook_username: str | None
    display_url: str
    redact: Callable[[str], str] = field(repr=False)
    proxy: Proxy | None = None

    def excerpt(self, content: bytes, content_type: str = "") -> str:
        """At most BODY_EXCERPT_CHARS of a body: tags stripped, whitespace collapsed, secrets redacted."""
        text = self.redact(body_text(content, content_type))  # before tags or spaces can split a secret
        if "html" in content_type.lower() or text.lstrip().startswith("<"):
            text = re.sub(r"<[^>]*>", " ", text)
        return _shorten(self.redact(" ".join(text.split())))

    def detail(self, response: httpx.Response) -> str:
        try:
            data = json.loads(body_text(response.content, response.headers.get("content-type", "")))
        except ValueError:
            data = None
        if isinstance(data, dict):
            for key in ("message", "detail", "error_description", "error", "title"):
                value = data.get(key)
                if isinstance(value, str) and value.strip():
                    return _shorten(self.redact(" ".join(self.redact(value).split())))
        return self.excerpt(response.content, response.headers.get("content-type", "")) or "(empty body)"

    def protocol_error(
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

    def status_error(
        self, call: Call, response: httpx.Response, retry_after: float | None, reauthenticated: bool
    ) -> APIStatusError:
        status = response.status_code
        endpoint = call.endpoint
        detail = self.detail(response)
        kwargs: dict[str, Any] = {"status_code": status, "method": endpoint.method, "path": call.path, "detail": detail}
        if endpoint is ep.AUTH_TOKEN and status in (400, 401, 403, 422):
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
        if status == 407:  # a proxy's answer, not the service's
            proxy = self.proxy or "a proxy between this machine and the service"
            hint = (f"check the user and password {self.proxy.variable} gives it (percent-encoded)" if self.proxy
                    else "its credentials go in HTTPS_PROXY or HTTP_PROXY: http://user:password@host:port")
            return cls(f"{call.where}: {proxy} refused its credentials (HTTP 407 {phrase}): {hint}", **kwargs)
        if 300 <= status < 400:
            return cls(f"{call.where} failed with HTTP {status} {phrase}{self._redirected(response)}: {detail}",
                       **kwargs)
        return cls(f"{call.where} failed with HTTP {status} {phrase}: {detail}{unknown_outcome}", **kwargs)

    def _redirected(self, response: httpx.Response) -> str:
        """Where a 3xx points, and what to do about it (the client follows no redirect)."""
        location = response.headers.get("location")
        target = f" to {_shorten(self.redact(redact_url(location)))!r}" if location else ""
        return (f"{target} (the client follows no redirect: if the service moved, or answers only https, give "
                f"its new address as the base URL instead of {self.display_url!r})")

    def _token_refused(self, status: int, detail: str, kwargs: dict[str, Any]) -> APIStatusError:
        """401/403: the credentials were refused (the core remembers). 400, 422: the request shape."""
        if status in (400, 422):
            return BadRequestError(
                f"POST /auth/token answered HTTP {status} for user {self.username!r}: {detail}. The client sends "
                'a JSON body {"username": ..., "password": ...}; the spec does not show the token request\'s '
                "fields (assumption A1, docs/assumptions.md), so the service may expect another shape — check the "
                "operator's documentation",
                **kwargs,
            )
        return AuthenticationError(
            f"the freight service refused the credentials of user {self.username!r} "
            f"(HTTP {status} from POST /auth/token: {detail}); check the username and password "
            "(accounts are issued by the operator's support)",
            **kwargs,
        )

    def _unauthorized_message(self, call: Call, detail: str, reauthenticated: bool) -> str:
        if call.endpoint.auth is AuthScheme.BASIC:
            return (
                f"{call.where} refused the webhook credentials of user {self.webhook_username!r} (HTTP 401: {detail})"
            )
        again = " even after the token was renewed" if reauthenticated else ""
        return f"{call.where} rejected the bearer token of user {self.username!r}{again} (HTTP 401: {detail})"

    def transport_error(self, call: Call, error: httpx.TransportError) -> FreightError:
        text = self.redact(str(error)) or type(error).__name__
        where = call.where
        failure: FreightError
        if isinstance(error, httpx.TimeoutException):
            failure = FreightTimeoutError(
                f"{where} timed out{self._through} ({type(error).__name__}: {text})", method=call.endpoint.method,
                path=call.path
            )
        elif isinstance(error, httpx.ConnectError) and refused(error) and self.proxy is not None:
            failure = FreightConnectionError(
                f"{where}: connection refused by {self.proxy}, the way to {self.display_url} (nothing listens "
                f"there: is the proxy up, and is {self.proxy.variable} right?)",
                method=call.endpoint.method,
                path=call.path,
            )
        elif isinstance(error, httpx.ConnectError) and refused(error):
            failure = FreightConnectionError(
                f"{where}: connection refused by {self.display_url} (nothing listens there: is the service "
                "up, and is the base URL right?)",
                method=call.endpoint.method,
                path=call.path,
            )
        else:
            sent = call.endpoint.retry_safe or isinstance(error, httpx.ConnectError)
            maybe = "" if sent else MAYBE_PROCESSED
            failure = FreightConnectionError(
                f"{where} failed: {type(error).__name__}: {text} (service at {self.display_url}{self._through}){maybe}",
                method=call.endpoint.method,
                path=call.path,
            )
        failure.__cause__ = error  # callers tell "cannot connect" from "one answer broke off"
        return failure

    @property
    def _through(self) -> str:
        return "" if self.proxy is None else f" through {self.proxy}"

    def token_missing(self, call: Call, status: int, exc: TokenMissing) -> ProtocolError:
        """A token call's answer without a usable token; no excerpt (the body may hold a token)."""
        return ProtocolError(
            f"{call.where} answered HTTP {status} for user {self.username!r} without a usable "
            f"token: {self.redact(str(exc))}",
            status_code=status,
            method=call.endpoint.method,
            path=call.path,
        )


def refused(error: BaseException) -> bool:
    """Whether the host refused the connection (``ConnectionRefusedError`` somewhere under ``error``:
    its causes, or aiohttp's ``os_error``)."""
    seen: set[int] = set()
    pending: list[BaseException | None] = [error]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        if isinstance(current, ConnectionRefusedError):
            return True
        seen.add(id(current))
        os_error = getattr(current, "os_error", None)
        pending.extend([current.__cause__, current.__context__,
                        os_error if isinstance(os_error, BaseException) else None])
    return False


def _shorten(text: str) -> str:
    return text if len(text) <= BODY_EXCERPT_CHARS else text[: BODY_EXCERPT_CHARS - 1] + "…"
