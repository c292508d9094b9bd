"""Fixtures: one simulator per module (reset between tests), clients with tiny retry delays."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from freight_pipeline.client import FreightClient
from freight_pipeline_tests.client.helpers import FAST_RETRY


@pytest.fixture(scope="module")
def sim() -> Iterator[Any]:
    server = pytest.importorskip("freight_pipeline.simulator.server")
    pytest.importorskip("freight_pipeline.simulator.store")
    with server.running_simulator(shipments=150, seed=7) as running:
        yield running


@pytest.fixture
def fresh_sim(sim: Any) -> Any:
    """The module's simulator with no faults, default token lifetime and zeroed request counts."""
    sim.reset_faults()
    sim.set_token_lifetime(24 * 3600)
    sim.reset_stats()
    return sim


@pytest.fixture
def client(fresh_sim: Any) -> Iterator[FreightClient]:
    with FreightClient(
        fresh_sim.base_url,
        fresh_sim.username,
        fresh_sim.password,
        webhook_username=fresh_sim.webhook_username,
        webhook_password=fresh_sim.webhook_password,
        retry=FAST_RETRY,
    ) as c:
        yield c
