"""The async client's transport (``client.transport.AiohttpTransport``) over real HTTP on loopback: each way an
answer can end (whole, gzip, gzip broken, cut short, no answer, too slow) comes back as httpx says it."""

from __future__ import annotations

import asyncio
import gzip
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import aiohttp
import httpx

from freight_pipeline.client import AsyncFreightClient, FreightError, FreightTimeoutError
from freight_pipeline.client.retry import RetryPolicy
from freight_pipeline.client.transport import AiohttpTransport

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
BODY = b'{"id": 1, "client": "001", "goods": [' + b", ".join(b'{"n": %d}' % i for i in range(4000)) + b"]}"
"""A JSON body of about 40 KB: more than one of aiohttp's 16 KB chunks."""


def head(status: str, length: int, *more: str) -> bytes:
    lines = [f"HTTP/1.1 {status}", "Content-Type: application/json", f"Content-Length: {length}", *more]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


@asynccontextmanager
async def serving(answer: Handler) -> AsyncIterator[str]:
    """A server on a free loopback port whose every connection reads one request's head and gets ``answer``."""

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        try:
            await answer(reader, writer)
        finally:
            writer.close()

    server = await asyncio.start_server(connection, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/service/shipment/1"
    finally:
        server.close()
        await server.wait_closed()


async def fetched(answer: Handler, read_timeout: float = 5.0,
                  attempt_seconds: float | None = None) -> tuple[httpx.Response | None, bytes | BaseException]:
    """The transport's response to a GET and its body, or the error of sending or reading (the driver takes
    either the same way: ``_async_driver.AsyncDriver._send``)."""
    transport = AiohttpTransport(4, attempt_seconds)
    response = None
    try:
        async with serving(answer) as url:
            request = httpx.Request("GET", url, extensions={"timeout": {"connect": 5.0, "read": read_timeout,
                                                                         "pool": 5.0, "write": 5.0}})
            try:
                response = await transport.handle_async_request(request)
                return response, await response.aread()
            except httpx.HTTPError as exc:
                return response, exc
    finally:
        await transport.aclose()


def whole(body: bytes, *more: str) -> Handler:
    async def answer(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(head("200 OK", len(body), *more) + body)
        await writer.drain()

    return answer


def test_a_body_of_several_chunks_comes_whole_with_the_status_reason_and_headers() -> None:
    response, body = asyncio.run(fetched(whole(BODY, "X-Page-Count: 3")))
    assert response is not None and body == BODY and response.status_code == 200 and response.reason_phrase == "OK"
    assert response.headers["x-page-count"] == "3" and response.request.url.path == "/service/shipment/1"


def test_a_gzip_body_is_decoded_and_a_broken_one_is_httpx_s_decoding_error() -> None:
    packed = gzip.compress(BODY)
    _, body = asyncio.run(fetched(whole(packed, "Content-Encoding: gzip")))
    assert body == BODY
    _, broken = asyncio.run(fetched(whole(b"not gzip at all: " + packed, "Content-Encoding: gzip")))
    assert isinstance(broken, httpx.DecodingError)  # the driver's UnreadableBody: retried, then reported


def test_a_body_cut_short_or_no_answer_at_all_is_a_transport_error_not_a_timeout() -> None:
    async def cut_short(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(head("200 OK", len(BODY)) + BODY[:1000])
        await writer.drain()

    async def no_answer(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        return None

    _, cut = asyncio.run(fetched(cut_short))
    assert isinstance(cut, httpx.TransportError) and not isinstance(cut, httpx.TimeoutException), repr(cut)
    _, nothing = asyncio.run(fetched(no_answer))
    assert isinstance(nothing, httpx.RemoteProtocolError) and "closed the connection" in str(nothing), repr(nothing)


def test_an_answer_slower_than_the_read_timeout_is_a_read_timeout() -> None:
    async def slow(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(2)

    _, late = asyncio.run(fetched(slow, read_timeout=0.2))
    assert isinstance(late, httpx.ReadTimeout), repr(late)


async def drip(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """The head at once, then the body a byte every 50 ms: each within any read timeout, the whole in 30 minutes."""
    writer.write(head("200 OK", len(BODY)))
    for byte in BODY:
        writer.write(bytes([byte]))
        await writer.drain()
        await asyncio.sleep(0.05)


def test_an_answer_dripping_in_is_a_read_timeout_once_the_attempt_s_bound_passes() -> None:
    """Each part within the read timeout, the whole never: was no end (a sync stalled until it was killed)."""
    started = time.monotonic()
    _, late = asyncio.run(fetched(drip, read_timeout=5.0, attempt_seconds=0.5))
    assert isinstance(late, httpx.ReadTimeout) and "no whole answer within 0.5 s" in str(late), repr(late)
    assert time.monotonic() - started < 5.0


def test_the_async_client_bounds_each_attempt_by_its_retry_budget() -> None:
    async def read() -> BaseException | None:
        async with serving(drip) as url:
            base = url.removesuffix("/service/shipment/1")
            async with AsyncFreightClient(base, "demo", "pw",
                                          retry=RetryPolicy(max_attempts=1, total_budget=0.5)) as client:
                try:  # its login first, answered so
                    await client.get_shipment_raw(1)
                except FreightError as exc:
                    return exc
        return None

    failed = asyncio.run(read())
    assert isinstance(failed, FreightTimeoutError), repr(failed)


def test_a_cookie_the_service_sets_is_not_kept() -> None:
    async def run() -> int:
        transport = AiohttpTransport(4)
        try:
            async with serving(whole(BODY, "Set-Cookie: session=abc; Path=/")) as url:
                # a host name: aiohttp's default cookie jar keeps no cookie of an IP address anyway
                named = url.replace("127.0.0.1", "localhost")
                response = await transport.handle_async_request(httpx.Request("GET", named))
                await response.aread()
                assert isinstance(transport.client, aiohttp.ClientSession)
                return len(transport.client.cookie_jar)
        finally:
            await transport.aclose()

    assert asyncio.run(run()) == 0
