"""An httpx transport that spreads requests over several small connection pools.

httpcore 1.0's connection pool walks every connection of the pool, and polls each idle one's
socket, whenever a request enters or leaves it (``_assign_requests_to_connections``; see
encode/httpcore pull requests 924 and 928, not released). With 64 connections that walk was half of
the sync's CPU. Several pools of a few connections each do the same work per request at a fraction
of the cost: :class:`ShardedTransport` holds ``shards`` ordinary ``httpx.AsyncHTTPTransport`` s and
sends each request through the one with the fewest requests in flight.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Callable

import httpx

CONNECTIONS_PER_SHARD = 8


class _Counted(httpx.AsyncByteStream):
    """A response body stream that reports when it is closed (the request has left its pool)."""

    def __init__(self, inner: httpx.AsyncByteStream, done: Callable[[], None]) -> None:
        self._inner, self._done, self._open = inner, done, True

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            yield chunk

    async def aclose(self) -> None:
        try:
            await self._inner.aclose()
        finally:
            if self._open:
                self._open = False
                self._done()


class ShardedTransport(httpx.AsyncBaseTransport):
    def __init__(self, max_connections: int, per_shard: int = CONNECTIONS_PER_SHARD) -> None:
        count = max(1, math.ceil(max_connections / per_shard))
        size = math.ceil(max_connections / count)
        limits = httpx.Limits(max_connections=size, max_keepalive_connections=size)
        self.shards = [httpx.AsyncHTTPTransport(limits=limits) for _ in range(count)]
        self.in_flight = [0] * count

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        index = min(range(len(self.shards)), key=self.in_flight.__getitem__)
        self.in_flight[index] += 1

        def done() -> None:
            self.in_flight[index] -= 1

        try:
            response = await self.shards[index].handle_async_request(request)
        except BaseException:
            done()
            raise
        assert isinstance(response.stream, httpx.AsyncByteStream)
        response.stream = _Counted(response.stream, done)
        return response

    async def aclose(self) -> None:
        for shard in self.shards:
            await shard.aclose()
