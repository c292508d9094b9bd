"""Shared test settings and helpers of the client tests."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from freight_pipeline.client import RetryPolicy
from freight_pipeline.simulator.server import RunningSimulator

# Tiny delays: a test never waits long, yet every retry path runs.
FAST_RETRY = RetryPolicy(max_attempts=10, base_delay=0.001, max_delay=0.01, total_budget=10.0, retry_after_cap=0.01)

# Methods a "call every method" test need not call: construction and closing.
LIFECYCLE_METHODS = frozenset({"from_settings", "close", "aclose"})


def public_methods(cls: type) -> set[str]:
    """Names of the public methods of a client class (its API surface)."""
    names = {name for name, _ in inspect.getmembers(cls, callable) if not name.startswith("_")}
    return names - LIFECYCLE_METHODS


class SyncView:
    """One blocking interface to either client, recording which public methods were called.

    For the async client, coroutines are run to completion on a private event loop and async
    iterators are collected into lists (``list(...)`` of either gives the same).
    """

    def __init__(self, client: Any, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.client = client
        self.loop = loop
        self.called: set[str] = set()

    @classmethod
    def of_async(cls, client: Any) -> SyncView:
        return cls(client, asyncio.new_event_loop())

    @property
    def is_async(self) -> bool:
        return self.loop is not None

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.client, name)
        if name.startswith("_") or not callable(attr):
            return attr
        return self._recorded(name, attr)

    def _recorded(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            self.called.add(name)
            result = method(*args, **kwargs)
            if self.loop is not None and inspect.isawaitable(result):
                return self.loop.run_until_complete(result)
            if self.loop is not None and isinstance(result, AsyncIterator):
                return self.loop.run_until_complete(_collect(result))
            return result

        return call

    def __enter__(self) -> SyncView:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.loop is None:
            self.client.close()
            return
        self.loop.run_until_complete(self.client.aclose())
        self.loop.close()


async def _collect(items: AsyncIterator[Any]) -> list[Any]:
    return [item async for item in items]


def drained(sim: RunningSimulator, within: float = 15.0) -> None:
    """Wait until the simulator has no request in flight, at most ``within`` seconds: it counts a request once
    it has answered it, which may be after the client has read the answer."""
    deadline = time.monotonic() + within
    while sim.stats.in_flight()["in_flight"] and time.monotonic() < deadline:
        time.sleep(0.05)
