"""``SyncDriver``: the driver half of the blocking client, the base of
:class:`~freight_pipeline.client.sync_client.FreightClient`.

GENERATED from ``_async_driver.py`` by ``scripts/unasync.py``: edit that file, then run the script.
It carries out the actions of the sans-I/O :class:`~freight_pipeline.client._core.ClientCore` (send
with ``httpx.Client``, ``time.sleep``, fetch a token under a lock) within a
:class:`~freight_pipeline.client.limiter.BlockingLimit` (the token is checked, and renewed if due,
once a request holds its slot; the token call itself does not wait for a slot), and holds the
client's lifecycle, properties, ``authenticate`` and the shared helpers of the endpoint methods
(``_one``, ``_many``, ``_optional``, ``_page``, ``_pages``, ...). The endpoint methods are in
``sync_client.py``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
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
from freight_pipeline.client.limiter import BlockingLimit, load_signal
from freight_pipeline.client.models.base import FreightModel
from freight_pipeline.client.models.criterion import Criterion
from freight_pipeline.client.paging import Page, PageWalk
from freight_pipeline.client.proxies import proxy_for
from freight_pipeline.client.retry import DEFAULT_RETRY_POLICY, RetryPolicy
from freight_pipeline.client.stats import ClientStats
from freight_pipeline.client.tls import default_ssl_context
from freight_pipeline.config import ServiceSettings

Criteria = Iterable[Criterion | Mapping[str, Any]]
OrderBy = Sequence[str] | str | None
M = TypeVar("M", bound=FreightModel)


class SyncDriver:
    """The driver of :class:`FreightClient`: one pooled ``httpx.Client``, one token and one
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
        transport: httpx.BaseTransport | None = None,
        limit: BlockingLimit | None = None,
    ) -> None:
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        self.limit = limit or BlockingLimit.fixed(max_concurrency)
        """Requests in flight at once: ``max_concurrency`` fixed, or a ``BlockingLimit``."""
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
        self._http = httpx.Client(
            timeout=timeout,
            limits=httpx.Limits(max_connections=max_concurrency, max_keepalive_connections=max_concurrency),
            transport=transport,
            verify=default_ssl_context(),
            follow_redirects=False,
            proxy=self._core.proxy and self._core.proxy.for_httpx(),
            trust_env=False,  # the proxy is the one client.proxies reads from the environment
        )
        self._token_lock = threading.Lock()
        self.max_concurrency = max_concurrency

    @classmethod
    def from_settings(cls, settings: ServiceSettings, **kwargs: Any) -> Self:
        return cls(settings.base_url, settings.username, settings.secret, **kwargs)

    # --- lifecycle and introspection ---------------------------------------------------------

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def __repr__(self) -> str:  # named after the client class, which adds only endpoint methods
        return (
            f"FreightClient(base_url={self._core.display_url!r}, username={self._core.username!r}, "
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

    def _drive(self, flow: Generator[Action, Any, Reply]) -> Reply:
        try:
            action = next(flow)
            while True:
                if isinstance(action, Send):
                    result: Any = self._sent(action)
                elif isinstance(action, Sleep):
                    time.sleep(action.seconds)
                    result = None
                elif isinstance(action, NeedToken):
                    result = self._token(action)
                else:  # pragma: no cover
                    raise TypeError(f"unknown action {action!r}")
                action = flow.send(result)
        except StopIteration as stop:
            return stop.value
        finally:
            flow.close()

    def _sent(self, send: Send) -> Sent:
        """Send one request once it holds a slot of the limit (the token call at once: it is not a
        business request, and a request holding a slot may be waiting for it)."""
        if not send.limited:
            return Sent(self._send(send.request))
        sent, latency = self._attempt(send, send.request, False, _nothing)
        self._core.stats.record_latency(send.endpoint.name, latency)
        return sent

    def _attempt(
        self, send: Send, request: httpx.Request, urgent: bool, on_slot: Callable[[], object]
    ) -> tuple[Sent, float]:
        """Send ``request`` (``send``'s, or a hedged copy of it) once it holds a slot (``urgent``:
        ahead of the queue), calling ``on_slot`` then; what came back, and the seconds it took."""
        with self.limit.slot(send.endpoint.name, urgent) as said:
            on_slot()
            token: str | None = None
            if send.bearer:  # checked now: it may have expired, or come due, while the request waited
                token = self._token(NeedToken())
                self._core.authorize(request, token)
            began = time.monotonic()
            outcome = self._send(request)
            said(load_signal(outcome))
        return Sent(outcome, token), time.monotonic() - began

    def _send(self, request: httpx.Request) -> Outcome:
        """The response with its body read, an UnreadableBody, or the transport error."""
        try:
            response = self._http.send(request, stream=True)
        except httpx.TransportError as exc:
            return exc
        try:
            response.read()
        except httpx.DecodingError as exc:
            return UnreadableBody(response, exc)
        except httpx.TransportError as exc:
            return exc
        finally:
            response.close()
        return response

    def _token(self, need: NeedToken) -> str:
        token = self._core.valid_token(need.force, need.stale)
        if token is not None:
            return token
        with self._token_lock:
            token = self._core.valid_token(need.force, need.stale)
            if token is not None:
                return token
            reply = self._drive(self._core.execute(self._core.token_call()))
            return self._core.accept_token(reply, need.force)

    def _run(self, call: Call) -> Reply:
        return self._drive(self._core.execute(call))

    def _data(self, call: Call) -> Any:
        return (self._run(call)).data

    def _one(self, model: type[M], call: Call) -> M:
        return self._core.one(model, call, self._run(call))

    def _many(self, model: type[M], call: Call) -> list[M]:
        return self._core.many(model, call, self._run(call))

    def _many_or_names(self, model: type[M], call: Call) -> list[M | str]:
        return self._core.many_or_names(model, call, self._run(call))

    def _optional(self, model: type[M], call: Call) -> M | None:
        return self._core.optional(model, call, self._run(call))

    def _page(self, model: type[M], call: Call) -> Page[M]:
        return self._core.page(model, call, self._run(call))

    @staticmethod
    def _pages(fetch: Callable[[int, int], Page[M]], page_size: int) -> Iterator[Page[M]]:
        """Every page from page 0, as :class:`PageWalk` directs; ``fetch(page_no, page_size)``."""
        walk = PageWalk(page_size)
        more = True
        while more:
            page = fetch(walk.page_no, walk.page_size)
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
    ) -> Iterator[Page[M]]:
        criteria = list(criteria)
        return self._pages(
            lambda no, size: self._page(model, lookup(endpoint, criteria, no, size, order_by, order_mode)),
            page_size,
        )

    def _scroll_pages(self, endpoint: Endpoint, model: type[M], page_size: int) -> Iterator[Page[M]]:
        return self._pages(lambda no, size: self._page(model, scroll(endpoint, no, size)), page_size)

    def authenticate(self) -> None:
        """Fetch a token now (otherwise the first call does); raises AuthenticationError early."""
        self._token(NeedToken())


def _nothing() -> None:
    return None
