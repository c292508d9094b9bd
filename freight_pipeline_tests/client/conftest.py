"""Fixtures: one simulator per module (reset between tests), clients with tiny retry delays.

``any_client`` is the sync ``FreightClient`` or the ``AsyncFreightClient`` behind
:class:`~freight_pipeline_tests.client.helpers.SyncView`, so one test body checks both.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from freight_pipeline.client import AsyncFreightClient, FreightClient
from freight_pipeline.simulator.server import RunningSimulator, running_simulator
from freight_pipeline_tests.client.helpers import FAST_RETRY, SyncView


@pytest.fixture(scope="module")
def sim() -> Iterator[RunningSimulator]:
    with running_simulator(shipments=150, seed=7) as running:
        yield running


@pytest.fixture
def fresh_sim(sim: RunningSimulator) -> RunningSimulator:
    """The module's simulator with no faults, default token lifetime and zeroed request counts."""
    sim.reset_faults()
    sim.set_token_lifetime(24 * 3600)
    sim.reset_stats()
    return sim


@pytest.fixture
def client_waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The seconds a sync client asked ``time.sleep`` to wait in the test's thread (the simulator serves on
    threads of its own), recorded and then waited: a test asserts the waits, not the wall time of a call,
    which a busy machine stretches."""
    waits: list[float] = []
    sleep = time.sleep

    def recorded(seconds: float) -> None:
        if threading.current_thread() is threading.main_thread():
            waits.append(seconds)
        sleep(seconds)

    monkeypatch.setattr(time, "sleep", recorded)
    return waits


def client_kwargs(sim: RunningSimulator) -> dict[str, Any]:
    return {
        "base_url": sim.base_url,
        "username": sim.username,
        "password": sim.password,
        "webhook_username": sim.webhook_username,
        "webhook_password": sim.webhook_password,
        "retry": FAST_RETRY,
    }


@pytest.fixture
def client(fresh_sim: RunningSimulator) -> Iterator[FreightClient]:
    with FreightClient(**client_kwargs(fresh_sim)) as c:
        yield c


@pytest.fixture(params=["sync", "async"])
def any_client(request: pytest.FixtureRequest, fresh_sim: RunningSimulator) -> Iterator[Any]:
    """Each test runs twice: with FreightClient and with AsyncFreightClient (through a SyncView)."""
    if request.param == "sync":
        with FreightClient(**client_kwargs(fresh_sim)) as c:
            yield SyncView(c)
        return
    with SyncView.of_async(AsyncFreightClient(**client_kwargs(fresh_sim))) as view:
        yield view
