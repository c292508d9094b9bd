"""The client a sync run opens: configured by the run's settings."""

from __future__ import annotations

import asyncio

from freight_pipeline.client.retry import DEFAULT_RETRY_POLICY, RetryPolicy
from freight_pipeline.config import ServiceSettings
from freight_pipeline.sync.runner import open_client
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
