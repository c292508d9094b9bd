"""``AsyncDriver``: the driver half of the asyncio client, the base of
:class:`~freight_pipeline.client.async_client.AsyncFreightClient`.

It carries out the actions of the sans-I/O :class:`~freight_pipeline.client._core.ClientCore` (send
with ``httpx.AsyncClient`` on aiohttp's transport, ``asyncio.sleep``, fetch a token under a lock)
within an :class:`~freight_pipeline.client.limiter.AdaptiveLimit` (the token is checked, and renewed
if due, once a request holds its slot; the token call itself does not wait for a slot), and holds
the client's lifecycle, properties, ``authenticate`` and the shared helpers of the endpoint methods
(``_one``, ``_many``, ``_optional``, ``_page``, ``_pages``, ...). The endpoint methods are in
``async_client.py``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, Self, TypeVar

import httpx

from freight_pipeline.client._core import (
    DEFAULT_MAX_CONCURRENCY,
    DEFAULT_TIMEOUT,
    Action,
    ClientCore,
    NeedToken,
    Outcome,
    Reply,
    Send,
    Sent,
    Sleep,
    UnreadableBody,
)
from freight_pipeline.client.auth import DEFAULT_REFRESH_MARGIN_S
from freight_pipeline.client.calls import Call, lookup, scroll
from freight_pipeline.client.endpoints import Endpoint
from freight_pipeline.client.hedge import HedgePolicy, Hedger, hedgeable, race
from freight_pipeline.client.limiter import AdaptiveLimit, load_signal
from freight_pipeline.client.models.base import FreightModel
from freight_pipeline.client.models.criterion import Criterion
from freight_pipeline.client.paging import Page, PageWalk
from freight_pipeline.client.proxies import proxy_for
from freight_pipeline.client.retry import DEFAULT_RETRY_POLICY, RetryPolicy
from freight_pipeline.client.stats import ClientStats
from freight_pipeline.client.tls import default_ssl_context
from freight_pipeline.client.transport import AiohttpTransport, DirectAsyncClient
from freight_pipeline.config import ServiceSettings

Criteria = Iterable[Criterion | Mapping[str, Any]]
OrderBy = Sequence[str] | str | None
M = TypeVar("M", bound=FreightModel)


class AsyncDriver:
    """The driver of :class:`AsyncFreightClient`: one pooled ``httpx.AsyncClient``, one token and one
    limit per client; runs ``ClientCore`` calls and builds models from their replies."""

    def __init__(
        self,
        base_url: str,
        username: str,
        password: str,
        *,
        webhook_username: str | None = None,
        webhook_password: str | None = None,
        retry: RetryPolicy = DEFAULT_RETRY_POLICY,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        token_refresh_margin: float = DEFAULT_REFRESH_MARGIN_S,
        transport: httpx.AsyncBaseTransport | None = None,
        limit: AdaptiveLimit | None = None,
        # asyncio only {
        hedge: HedgePolicy | None = None,
        # }
    ) -> None:
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        self.limit = limit or AdaptiveLimit.fixed(max_concurrency)
        """Requests in flight at once: ``max_concurrency`` fixed, or an adaptive ``limit`` (AIMD)."""
        max_concurrency = self.limit.maximum
        self._core = ClientCore(
            base_url=base_url,
            username=username,
            password=password,
            webhook_username=webhook_username,
            webhook_password=webhook_password,
            retry=retry,
            token_refresh_margin=token_refresh_margin,
            proxy=proxy_for(base_url) if transport is None else None,  # a transport given sends as it will
        )
        self._http = DirectAsyncClient(
            timeout=timeout,
            limits=httpx.Limits(max_connections=max_concurrency, max_keepalive_connections=max_concurrency),
            transport=transport or AiohttpTransport(max_concurrency, self._core.retry.total_budget or None,
                                                    self._core.proxy),
            verify=default_ssl_context(),
            follow_redirects=False,
            trust_env=False,  # the proxy is the one client.proxies reads from the environment
        )
        self._token_lock = asyncio.Lock()
        self.max_concurrency = max_concurrency
        # asyncio only {
        self.hedger = Hedger(hedge, lambda: self.limit.last_push_back) if hedge is not None and hedge.on else None
        """Hedged reads (``client.hedge``): None without a ``hedge`` policy, or with its share 0."""
        # }

    @classmethod
    def from_settings(cls, settings: ServiceSettings, **kwargs: Any) -> Self:
        return cls(settings.base_url, settings.username, settings.secret, **kwargs)

    # --- lifecycle and introspection ---------------------------------------------------------

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    def __repr__(self) -> str:  # named after the client class, which adds only endpoint methods
        return (
            f"AsyncFreightClient(base_url={self._core.display_url!r}, username={self._core.username!r}, "
            f"max_concurrency={self.max_concurrency})"
        )

    @property
    def stats(self) -> ClientStats:
        return self._core.stats

    @property
    def base_url(self) -> str:
        return self._core.base_url

    @property
    def username(self) -> str:
        return self._core.username

    @property
    def retry_policy(self) -> RetryPolicy:
        return self._core.retry

    # --- driver ------------------------------------------------------------------------------

    async def _drive(self, flow: Generator[Action, Any, Reply]) -> Reply:
        try:
            action = next(flow)
            while True:
                if isinstance(action, Send):
                    result: Any = await self._sent(action)
                elif isinstance(action, Sleep):
                    await asyncio.sleep(action.seconds)
                    result = None
                elif isinstance(action, NeedToken):
                    result = await self._token(action)
                else:  # pragma: no cover
                    raise TypeError(f"unknown action {action!r}")
                action = flow.send(result)
        except StopIteration as stop:
            return stop.value
        finally:
            flow.close()

    async def _sent(self, send: Send) -> Sent:
        """Send one request once it holds a slot of the limit (the token call at once: it is not a
        business request, and a request holding a slot may be waiting for it)."""
        if not send.limited:
            return Sent(await self._send(send.request))
        # asyncio only {
        if self.hedger is not None and hedgeable(send.endpoint):  # a read: a copy if it is slow
            sent, latency = await race(self.hedger, send, self._attempt, self._core.stats)
            self._core.stats.record_latency(send.endpoint.name, latency)
            return sent
        # }
        sent, latency = await self._attempt(send, send.request, False, _nothing)
        self._core.stats.record_latency(send.endpoint.name, latency)
        return sent

    async def _attempt(
        self, send: Send, request: httpx.Request, urgent: bool, on_slot: Callable[[], object]
    ) -> tuple[Sent, float]:
        """Send ``request`` (``send``'s, or a hedged copy of it) once it holds a slot (``urgent``:
        ahead of the queue), calling ``on_slot`` then; what came back, and the seconds it took."""
        async with self.limit.slot(send.endpoint.name, urgent) as said:
            on_slot()
            token: str | None = None
            if send.bearer:  # checked now: it may have expired, or come due, while the request waited
                token = await self._token(NeedToken())
                self._core.authorize(request, token)
            began = time.monotonic()
            outcome = await self._send(request)
            said(load_signal(outcome))
        return Sent(outcome, token), time.monotonic() - began

    async def _send(self, request: httpx.Request) -> Outcome:
        """The response with its body read, an UnreadableBody, or the transport error."""
        try:
            response = await self._http.send(request, stream=True)
        except httpx.TransportError as exc:
            return exc
        try:
            await response.aread()
        except httpx.DecodingError as exc:
            return UnreadableBody(response, exc)
        except httpx.TransportError as exc:
            return exc
        finally:
            await response.aclose()
        return response

    async def _token(self, need: NeedToken) -> str:
        token = self._core.valid_token(need.force, need.stale)
        if token is not None:
            return token
        async with self._token_lock:
            token = self._core.valid_token(need.force, need.stale)
            if token is not None:
                return token
            reply = await self._drive(self._core.execute(self._core.token_call()))
            return self._core.accept_token(reply, need.force)

    async def _run(self, call: Call) -> Reply:
        return await self._drive(self._core.execute(call))

    async def _data(self, call: Call) -> Any:
        return (await self._run(call)).data

    async def _one(self, model: type[M], call: Call) -> M:
        return self._core.one(model, call, await self._run(call))

    async def _many(self, model: type[M], call: Call) -> list[M]:
        return self._core.many(model, call, await self._run(call))

    async def _many_or_names(self, model: type[M], call: Call) -> list[M | str]:
        return self._core.many_or_names(model, call, await self._run(call))

    async def _optional(self, model: type[M], call: Call) -> M | None:
        return self._core.optional(model, call, await self._run(call))

    async def _page(self, model: type[M], call: Call) -> Page[M]:
        return self._core.page(model, call, await self._run(call))

    @staticmethod
    async def _pages(fetch: Callable[[int, int], Awaitable[Page[M]]], page_size: int) -> AsyncIterator[Page[M]]:
        """Every page from page 0, as :class:`PageWalk` directs; ``await fetch(page_no, page_size)``."""
        walk = PageWalk(page_size)
        more = True
        while more:
            page = await fetch(walk.page_no, walk.page_size)
            more = walk.advance(page)
            if not walk.echoed:
                yield page

    def _lookup_pages(
        self,
        endpoint: Endpoint,
        model: type[M],
        criteria: Criteria,
        page_size: int,
        order_by: OrderBy,
        order_mode: OrderBy,
    ) -> AsyncIterator[Page[M]]:
        criteria = list(criteria)
        return self._pages(
            lambda no, size: self._page(model, lookup(endpoint, criteria, no, size, order_by, order_mode)),
            page_size,
        )

    def _scroll_pages(self, endpoint: Endpoint, model: type[M], page_size: int) -> AsyncIterator[Page[M]]:
        return self._pages(lambda no, size: self._page(model, scroll(endpoint, no, size)), page_size)

    async def authenticate(self) -> None:
        """Fetch a token now (otherwise the first call does); raises AuthenticationError early."""
        await self._token(NeedToken())


def _nothing() -> None:
    return None
