"""A connection the host refuses is reported as refused (not as a timeout), by both clients."""

from __future__ import annotations

import asyncio

import pytest

from freight_pipeline.client.async_client import AsyncFreightClient
from freight_pipeline.client.errors import FreightConnectionError
from freight_pipeline.client.sync_client import FreightClient
from freight_pipeline.lake.local import free_port
from freight_pipeline_tests.client.helpers import FAST_RETRY


def test_the_blocking_client_says_refused() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    with FreightClient(url, "demo", "pw", retry=FAST_RETRY) as client, pytest.raises(FreightConnectionError) as caught:
        client.get_shipment_raw(1)
    assert f"connection refused by {url}" in str(caught.value)
    assert "timed out" not in str(caught.value)


def test_the_async_client_says_refused() -> None:
    url = f"http://127.0.0.1:{free_port()}"

    async def fetch() -> None:
        async with AsyncFreightClient(url, "demo", "pw", retry=FAST_RETRY) as client:
            await client.get_shipment_raw(1)

    with pytest.raises(FreightConnectionError) as caught:
        asyncio.run(fetch())
    assert f"connection refused by {url}" in str(caught.value)
    assert "timed out" not in str(caught.value)
