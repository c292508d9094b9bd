"""Fault injection and request accounting at the ASGI edge of the simulator.

:class:`FaultInjector` decides per request, from a seeded ``random.Random``: dropped connection,
429 with ``Retry-After``, 5xx (502/503/504) with an HTML body, latency with jitter, and a latency
tail (a share of requests, of some kinds of call, answered seconds later). Faults can
also be scripted (``enqueue``) for exact tests. :class:`EdgeMiddleware` is the outermost ASGI layer:
it counts requests per (method, path template, status) in :class:`RequestStats` and applies the
decided fault. The control surface (``/_control``) is never faulted nor counted.

With ``max_in_flight`` set, a request arriving while that many are inside the edge (their injected
latency included) is refused at once with 429 (``Retry-After`` unless ``in_flight_retry_after`` is
off), before any fault is decided for it; :class:`RequestStats` keeps the peak in flight and the
count of such refusals.

A ``malformed`` fault (scripted only: ``enqueue("malformed", ...)`` or ``POST /_control/faults/script``)
lets the request be processed as usual and then cuts a success body short, so the client gets a
2xx with ``content-type: application/json`` whose body is not valid JSON (a proxy or a service
dying mid-answer). Error answers pass unchanged.
"""

from __future__ import annotations

import asyncio
import collections
import http
import json
import random
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

from freight_pipeline.simulator.config import FaultConfig, call_kind

CONTROL_PREFIX = "/_control"
AUTH_PATH = "/auth/token"
DROPPED = 0  # the status recorded for a dropped connection
SERVER_ERROR_STATUSES = (502, 503, 504)
UNMATCHED = "<unmatched>"

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

FAULT_KINDS = ("drop", "rate_limit", "server_error", "malformed")


@dataclass(frozen=True)
class FaultDecision:
    kind: str | None = None  # None or one of FAULT_KINDS
    status: int | None = None
    latency_s: float = 0.0
    retry_after_s: int = 0


@dataclass
class _Scripted:
    kind: str
    status: int | None
    path: str | None
    remaining: int


class FaultInjector:
    """Thread-safe, deterministic per seed for a given sequence of requests."""

    def __init__(self, config: FaultConfig | None = None) -> None:
        self._config = config or FaultConfig()
        self._rng = random.Random(self._config.seed)
        self._paging_rng = random.Random(self._config.seed + 1)
        self._tail_rng = random.Random(self._config.seed + 2)
        self._script: list[_Scripted] = []
        self._lock = threading.Lock()

    @property
    def config(self) -> FaultConfig:
        return self._config

    def update(self, **changes: Any) -> FaultConfig:
        """Change settings; passing ``seed`` restarts the random sequences."""
        with self._lock:
            self._config = self._config.replace(**changes)
            if "seed" in changes:
                self._rng = random.Random(self._config.seed)
                self._paging_rng = random.Random(self._config.seed + 1)
                self._tail_rng = random.Random(self._config.seed + 2)
            return self._config

    def reset(self, config: FaultConfig | None = None) -> FaultConfig:
        """Back to ``config`` (default: no faults), fresh random sequences, empty script."""
        with self._lock:
            self._config = config or FaultConfig()
            self._rng = random.Random(self._config.seed)
            self._paging_rng = random.Random(self._config.seed + 1)
            self._tail_rng = random.Random(self._config.seed + 2)
            self._script.clear()
            return self._config

    def enqueue(self, kind: str, count: int = 1, path: str | None = None, status: int | None = None) -> None:
        """Script the next ``count`` faultable requests (to ``path`` template, if given).

        ``kind``: ``drop``, ``rate_limit`` (429), ``server_error`` (``status`` 5xx, default 503) or
        ``malformed`` (the real answer, its success body cut short). Only ``server_error`` takes a
        ``status``; given for another kind it is refused (ValueError), never silently dropped.
        Scripted faults come before random ones and ignore ``paths`` and ``exempt_auth``.
        """
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {kind!r}; allowed: {', '.join(FAULT_KINDS)}")
        if count < 1:
            raise ValueError("count must be at least 1")
        if status is not None and kind != "server_error":
            raise ValueError(f"status {status} given for a {kind!r} fault; only 'server_error' takes a status")
        if kind == "server_error":
            status = status or 503
            if not 500 <= status <= 599:
                raise ValueError("server_error status must be 5xx")
        elif kind == "rate_limit":
            status = 429
        else:
            status = None
        with self._lock:
            self._script.append(_Scripted(kind, status, path, count))

    def pending_script(self) -> int:
        with self._lock:
            return sum(s.remaining for s in self._script)

    def decide(self, path_template: str) -> FaultDecision:
        with self._lock:
            cfg = self._config
            scripted = self._take_scripted(path_template)
            if scripted is not None:
                return FaultDecision(scripted.kind, scripted.status, 0.0, cfg.retry_after_s)
            if cfg.exempt_auth and path_template == AUTH_PATH:
                return FaultDecision()
            if cfg.paths is not None and path_template not in cfg.paths:
                return FaultDecision()
            # Always draw the same three numbers, so settings do not shift the sequence.
            u_fault, u_status, u_latency = self._rng.random(), self._rng.random(), self._rng.random()
            tailed = self._in_tail(cfg, path_template)
        latency = 0.0
        if cfg.latency_ms or cfg.latency_jitter_ms:
            jitter = (2.0 * u_latency - 1.0) * cfg.latency_jitter_ms
            latency = max(0.0, cfg.latency_ms + jitter) / 1000.0
        if tailed:
            latency += cfg.tail_ms / 1000.0
        if u_fault < cfg.drop_rate:
            return FaultDecision("drop", None, latency, cfg.retry_after_s)
        if u_fault < cfg.drop_rate + cfg.rate_limit_rate:
            return FaultDecision("rate_limit", 429, latency, cfg.retry_after_s)
        if u_fault < cfg.drop_rate + cfg.rate_limit_rate + cfg.server_error_rate:
            status = SERVER_ERROR_STATUSES[min(int(u_status * 3), 2)]
            return FaultDecision("server_error", status, latency, cfg.retry_after_s)
        return FaultDecision(None, None, latency, cfg.retry_after_s)

    def _in_tail(self, cfg: FaultConfig, path_template: str) -> bool:
        """Whether this request is one of the tail's (its own random sequence: one draw per request
        of a kind the tail covers, so the other faults' decisions stay as they were)."""
        if cfg.tail_rate <= 0 or cfg.tail_ms <= 0:
            return False
        if cfg.tail_kinds is not None and call_kind(path_template) not in cfg.tail_kinds:
            return False
        return self._tail_rng.random() < cfg.tail_rate

    def _take_scripted(self, path_template: str) -> _Scripted | None:
        for item in self._script:
            if item.path is None or item.path == path_template:
                item.remaining -= 1
                if item.remaining <= 0:
                    self._script.remove(item)
                return item
        return None

    def paging_modification(self) -> int:
        """How many shipments to modify before answering a lookup page with ``page_no > 0``."""
        with self._lock:
            cfg = self._config
            if cfg.modify_during_paging_rate <= 0 or cfg.modify_during_paging_count <= 0:
                return 0
            hit = self._paging_rng.random() < cfg.modify_during_paging_rate
            return cfg.modify_during_paging_count if hit else 0


class RequestStats:
    """Counts of answered requests by (method, path template, status), and requests in flight. Thread-safe."""

    def __init__(self) -> None:
        self._counts: collections.Counter[tuple[str, str, int]] = collections.Counter()
        self._lock = threading.Lock()
        self._in_flight = 0
        self._in_flight_peak = 0
        self._in_flight_refused = 0

    def enter(self, limit: int | None) -> bool:
        """Admit a request unless ``limit`` requests are in flight (then it counts as refused)."""
        with self._lock:
            if limit is not None and self._in_flight >= limit:
                self._in_flight_refused += 1
                return False
            self._in_flight += 1
            self._in_flight_peak = max(self._in_flight_peak, self._in_flight)
            return True

    def leave(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def in_flight(self) -> dict[str, int]:
        """Requests in flight now, the most seen at once, and how many were refused for the limit."""
        with self._lock:
            return {
                "in_flight": self._in_flight,
                "in_flight_peak": self._in_flight_peak,
                "in_flight_refused": self._in_flight_refused,
            }

    def record(self, method: str, path: str, status: int) -> None:
        with self._lock:
            self._counts[(method, path, status)] += 1

    def count(self, path: str | None = None, method: str | None = None, status: int | None = None) -> int:
        with self._lock:
            return sum(
                n
                for (m, p, s), n in self._counts.items()
                if (path is None or p == path) and (method is None or m == method) and (status is None or s == status)
            )

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            items = sorted(self._counts.items())
        return [{"method": m, "path": p, "status": s, "count": n} for (m, p, s), n in items]

    def reset(self) -> None:
        """Clear the counts; the peak starts again from the requests in flight now."""
        with self._lock:
            self._counts.clear()
            self._in_flight_peak = self._in_flight
            self._in_flight_refused = 0


def html_error_body(status: int) -> bytes:
    phrase = http.HTTPStatus(status).phrase
    return (
        f"<html>\r\n<head><title>{status} {phrase}</title></head>\r\n<body>\r\n"
        f"<center><h1>{status} {phrase}</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
    ).encode()


class EdgeMiddleware:
    """Outermost ASGI layer: request accounting and fault injection."""

    def __init__(
        self,
        app: ASGIApp,
        injector: FaultInjector,
        stats: RequestStats,
        template_of: Callable[[Scope], str],
    ) -> None:
        self.app = app
        self.injector = injector
        self.stats = stats
        self.template_of = template_of

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith(CONTROL_PREFIX):
            await self.app(scope, receive, send)
            return
        method, template = scope["method"], self.template_of(scope)
        config = self.injector.config
        counted = not (config.exempt_auth and template == AUTH_PATH)
        if counted and not self.stats.enter(config.max_in_flight):
            self.stats.record(method, template, 429)
            retry_after = config.retry_after_s if config.in_flight_retry_after else None
            await _send_too_many(send, retry_after, f"too many requests in flight (at most {config.max_in_flight})")
            return
        try:
            await self._answer(scope, receive, send, method, template)
        finally:
            if counted:
                self.stats.leave()

    async def _answer(self, scope: Scope, receive: Receive, send: Send, method: str, template: str) -> None:
        moved_to = self.injector.config.redirect_to
        if moved_to:
            self.stats.record(method, template, 308)
            await _send_redirect(send, scope, moved_to)
            return
        decision = self.injector.decide(template)
        if decision.latency_s > 0:
            await asyncio.sleep(decision.latency_s)
        if decision.kind == "drop":
            self.stats.record(method, template, DROPPED)
            await _drop_connection(send)
            return
        if decision.kind == "malformed":
            send = _truncating(send)
        if self.injector.config.json_bom:
            send = _with_bom(send)
        if self.injector.config.json_latin1:
            send = _in_latin1(send)
        if decision.kind is not None and decision.status is not None:
            self.stats.record(method, template, decision.status)
            await _send_fault(send, decision)
            return
        status_seen: list[int] = []

        async def counting_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                status_seen.append(int(message["status"]))
            await send(message)

        try:
            await self.app(scope, receive, counting_send)
        finally:
            self.stats.record(method, template, status_seen[0] if status_seen else 500)


async def _send_fault(send: Send, decision: FaultDecision) -> None:
    assert decision.status is not None
    if decision.kind == "rate_limit":
        await _send_too_many(send, decision.retry_after_s, "rate limit exceeded; retry after the delay")
        return
    body = html_error_body(decision.status)
    headers = [(b"content-type", b"text/html; charset=utf-8"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": decision.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _send_redirect(send: Send, scope: Scope, base_url: str) -> None:
    """308 to the request's path and query at ``base_url`` (``FaultConfig.redirect_to``), without a body."""
    query = scope.get("query_string", b"").decode("latin-1")
    location = base_url.rstrip("/") + scope.get("raw_path", scope["path"].encode()).decode("latin-1")
    location += f"?{query}" if query else ""
    headers = [(b"location", location.encode("latin-1")), (b"content-length", b"0")]
    await send({"type": "http.response.start", "status": 308, "headers": headers})
    await send({"type": "http.response.body", "body": b""})


async def _send_too_many(send: Send, retry_after_s: int | None, message: str) -> None:
    """429 with the A3 JSON body, and ``Retry-After`` unless ``retry_after_s`` is None."""
    body = json.dumps({"status": 429, "error": "Too Many Requests", "message": message}).encode()
    headers = [(b"content-type", b"application/json")]
    if retry_after_s is not None:
        headers.append((b"retry-after", str(retry_after_s).encode()))
    headers.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": 429, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _truncating(send: Send) -> Send:
    """A ``send`` that holds the response back and cuts a 2xx body to half its length (at most)."""
    start: Message = {}
    chunks: list[bytes] = []

    async def truncating_send(message: Message) -> None:
        if message["type"] == "http.response.start":
            start.update(message)
            return
        chunks.append(message.get("body", b""))
        if message.get("more_body", False):
            return
        body = b"".join(chunks)
        if 200 <= int(start["status"]) < 300:
            body = body[: len(body) // 2] if len(body) > 1 else b"{"
        headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
        headers.append((b"content-length", str(len(body)).encode()))
        await send({**start, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return truncating_send


BOM = b"\xef\xbb\xbf"


def _with_bom(send: Send) -> Send:
    """A ``send`` that puts a UTF-8 byte-order mark before the body of a JSON answer (``FaultConfig.json_bom``)."""
    json_answer = False

    async def bom_send(message: Message) -> None:
        nonlocal json_answer
        if message["type"] == "http.response.start":
            headers = list(message.get("headers", []))
            json_answer = any(k.lower() == b"content-type" and b"json" in v.lower() for k, v in headers)
            if json_answer:
                headers = [(k, str(int(v) + len(BOM)).encode() if k.lower() == b"content-length" else v)
                           for k, v in headers]
                message = {**message, "headers": headers}
            await send(message)
            return
        if json_answer:
            message = {**message, "body": BOM + message.get("body", b"")}
            json_answer = False  # the first body message only
        await send(message)

    return bom_send


def _in_latin1(send: Send) -> Send:
    """A ``send`` that writes a JSON answer in ISO-8859-1 (``?`` for what it cannot hold) and says so in its
    ``Content-Type`` (``FaultConfig.json_latin1``); other answers pass unchanged."""
    start: Message = {}
    chunks: list[bytes] = []

    async def latin1_send(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = message.get("headers", [])
            if not any(k.lower() == b"content-type" and b"json" in v.lower() for k, v in headers):
                start.clear()
                await send(message)
                return
            start.update(message)
            return
        if not start:
            await send(message)
            return
        chunks.append(message.get("body", b""))
        if message.get("more_body", False):
            return
        body = b"".join(chunks).decode("utf-8", errors="replace").encode("latin-1", errors="replace")
        headers = [(k, v) for k, v in start.get("headers", []) if k.lower() not in (b"content-length", b"content-type")]
        headers += [(b"content-type", b"application/json; charset=ISO-8859-1"),
                    (b"content-length", str(len(body)).encode())]
        await send({**start, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return latin1_send


async def _drop_connection(send: Send) -> None:
    """Close the TCP connection without answering.

    uvicorn's ``send`` is a bound method of its request-response cycle, which holds the transport.
    Marking the cycle disconnected keeps uvicorn from answering 500 after we return. Elsewhere
    (another server, a test transport) we fall back to a response cut short: headers announcing a
    body that never fully comes, and an exception so the server aborts the connection.
    """
    cycle = getattr(send, "__self__", None)
    transport = getattr(cycle, "transport", None)
    if transport is not None and hasattr(transport, "abort"):
        cycle.disconnected = True  # type: ignore[union-attr]
        transport.close()
        await asyncio.sleep(0)
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"1000")]})
    await send({"type": "http.response.body", "body": b"[", "more_body": True})
    raise ConnectionAbortedError("simulated dropped connection")
