"""The client a sync run opens (configured by the run's settings) and the event loop it runs on."""

from __future__ import annotations

import asyncio
import sys

import pytest
import uvloop

from freight_pipeline.client.retry import DEFAULT_RETRY_POLICY, RetryPolicy
from freight_pipeline.config import ServiceSettings
from freight_pipeline.sync.runner import open_client, run_async
from freight_pipeline.sync.settings import SyncSettings


def test_the_run_s_client_retries_as_its_settings_say() -> None:
    quick = RetryPolicy(max_attempts=2, base_delay=0.01, max_delay=0.02)

    async def policies() -> list[RetryPolicy]:
        found = []
        for settings in (SyncSettings(), SyncSettings(request_retry=quick)):
            async with open_client(ServiceSettings("http://127.0.0.1:9", "user", "secret"), settings) as client:
                found.append(client.retry_policy)
        return found

    assert asyncio.run(policies()) == [DEFAULT_RETRY_POLICY, quick]


async def _loop_type() -> type[asyncio.AbstractEventLoop]:
    await asyncio.sleep(0)
    return type(asyncio.get_running_loop())


def test_a_run_s_event_loop_is_uvloop_s_where_it_is_installed_else_asyncio_s(monkeypatch: pytest.MonkeyPatch) -> None:
    assert run_async(_loop_type()) is uvloop.Loop
    monkeypatch.setitem(sys.modules, "uvloop", None)  # what a platform without its build sees
    assert issubclass(run_async(_loop_type()), asyncio.BaseEventLoop)
