"""The async client's transport: httpx's API on aiohttp's connection pool and HTTP parser.

httpx stays the client's interface (requests, responses, timeouts, the error types the retry policy
reads), but the default ``AsyncHTTPTransport`` is costly per request: httpcore 1.0's pool walks
every connection, polling each idle one's socket, whenever a request enters or leaves it (encode/
httpcore pull requests 924 and 928, not released), and h11 parses in pure Python. ``httpx-aiohttp``
(the transport openai-python offers for speed) sends through aiohttp instead: measured against the
simulator, 0.4 ms of CPU per shipment document instead of 0.8 ms, 0.3 instead of 0.7 for events.

:class:`AiohttpTransport` keeps one difference of ``httpx-aiohttp`` from httpx out of the client:
a connection the server closed without answering is ``httpx.RemoteProtocolError`` (as httpx says),
not a connect timeout, so a record whose request always breaks is that record's failure
(``sync.isolation``), not taken for a service that is down; and a connection the host refused (or
could not be opened: no route, unknown name) is ``httpx.ConnectError``, as httpx says, where
``httpx-aiohttp``'s table gives a connect timeout (its ``ClientConnectionError`` entry wins over the
more specific ``ClientConnectorError`` one), so an unreachable service is reported as refused, not
as timed out.

It also reads each answer whole inside aiohttp (``ClientResponse.read``) and hands httpx its bytes, not a stream
of 16 KB chunks that ``aread`` walks with an async iterator per chunk, one more layer per chunk (httpx decodes a
``Content-Encoding`` as before: a broken gzip body is still the driver's ``UnreadableBody``); an error while
reading is httpx's, as it was. Its session keeps no cookies (``DummyCookieJar``): the client never sends one back.

:class:`DirectAsyncClient` is the ``httpx.AsyncClient`` the async client sends with: its ``send`` hands the
request straight to the transport, with the client's timeouts. The client's requests are built by ``ClientCore``
(``httpx.Request``), carry their own ``Authorization`` and are never redirected, so what ``AsyncClient.send``
adds around the transport (the auth flow, redirects, the cookie store, event hooks, its log line, timing the
response) was work for nothing on the sync's hot path: about 15 % of the client's CPU a request against the
simulator (docs/performance.md). Storing each response's cookies (a ``urllib`` request built per response) had
been 5 % of the event loop's CPU in a sync; a cookie was never sent back anyway.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import httpx
import httpx_aiohttp
from httpx_aiohttp.transport import map_aiohttp_exceptions

from freight_pipeline.client.proxies import Proxy
from freight_pipeline.client.tls import default_ssl_context

DISCONNECTED = (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError)
"""What aiohttp raises for a connection closed under a request; ``httpx-aiohttp`` maps it to a connect timeout."""


class AiohttpTransport(httpx_aiohttp.AiohttpTransport):
    def __init__(self, max_connections: int, attempt_seconds: float | None = None, proxy: Proxy | None = None) -> None:
        """``attempt_seconds``: the longest one request may take whole, its answer read (None: no bound but httpx's
        timeouts, whose read timeout bounds each wait for the next bytes: an answer dripping in beats it); ``proxy``:
        the one every request goes through (None: none)."""
        super().__init__(verify=default_ssl_context(),
                         limits=httpx.Limits(max_connections=max_connections,
                                             max_keepalive_connections=max_connections))
        self._timeouts: dict[tuple[float | None, ...], aiohttp.ClientTimeout] = {}
        self.attempt_seconds = attempt_seconds
        self.proxy = None if proxy is None else proxy.url
        self.proxy_auth = (None if proxy is None or proxy.username is None
                           else aiohttp.BasicAuth(proxy.username, proxy.password or ""))

    def get_client(self) -> aiohttp.ClientSession:
        session = super().get_client()
        session._cookie_jar = aiohttp.DummyCookieJar()  # none is ever sent back: none is stored either
        # aiohttp silently sends a GET again when a kept-alive connection turns out closed; the
        # client's own retry policy decides that (and counts it), so the session must not
        session._retry_connection = False
        return session

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """The answer to ``request``, its body read whole (see the module doc)."""
        if not isinstance(self.client, aiohttp.ClientSession):
            self.client = self.get_client()
        try:
            with map_aiohttp_exceptions():
                async with self.client.request(
                    request.method,
                    str(request.url),
                    headers=request.headers,
                    data=request.content or None,
                    allow_redirects=False,
                    auto_decompress=False,
                    compress=False,
                    timeout=self._timeout(request.extensions.get("timeout") or {}),
                    server_hostname=request.extensions.get("sni_hostname"),
                    proxy=self.proxy,
                    proxy_auth=self.proxy_auth,
                ) as answer:
                    body = await answer.read()
        except TimeoutError as exc:  # aiohttp's total (its socket timeouts are mapped above): the attempt's bound
            raise httpx.ReadTimeout(f"no whole answer within {self.attempt_seconds:g} s (it came too slowly: each "
                                    "part within the read timeout, the whole not within the request's budget)",
                                    request=request) from exc
        except httpx.ConnectTimeout as exc:
            cause = exc.__cause__
            if isinstance(cause, aiohttp.ClientConnectorError) and not isinstance(cause, TimeoutError):
                raise httpx.ConnectError(str(cause)) from cause
            if isinstance(cause, DISCONNECTED):
                raise httpx.RemoteProtocolError(f"the server closed the connection: {cause}") from cause
            raise
        extensions: dict[str, Any] = {"http_version": b"HTTP/1.1"}
        if answer.reason:
            extensions["reason_phrase"] = answer.reason.encode()
        return httpx.Response(answer.status, headers=answer.raw_headers, stream=httpx.ByteStream(body),
                              request=request, extensions=extensions)

    def _timeout(self, timeouts: dict[str, float | None]) -> aiohttp.ClientTimeout:
        """aiohttp's timeouts for httpx's (as ``httpx-aiohttp`` maps them), made once for each set of values."""
        key = (timeouts.get("connect"), timeouts.get("read"), timeouts.get("pool"))
        made = self._timeouts.get(key)
        if made is None:
            made = self._timeouts[key] = aiohttp.ClientTimeout(total=self.attempt_seconds, sock_connect=key[0],
                                                               sock_read=key[1], connect=key[2])
        return made


class DirectAsyncClient(httpx.AsyncClient):
    """``httpx.AsyncClient`` whose ``send`` goes straight to its transport (see the module doc)."""

    def __init__(self, *, transport: httpx.AsyncBaseTransport, **kwargs: Any) -> None:
        super().__init__(transport=transport, **kwargs)
        self._direct = transport
        self._timeouts = self.timeout.as_dict()

    async def send(self, request: httpx.Request, *, stream: bool = False, **_: Any) -> httpx.Response:
        """The transport's response to ``request`` (its body read unless ``stream``), with the client's timeouts."""
        request.extensions.setdefault("timeout", self._timeouts)
        response = await self._direct.handle_async_request(request)
        if not stream:
            try:
                await response.aread()
            finally:
                await response.aclose()
        return response
