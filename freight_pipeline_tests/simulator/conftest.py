"""Fixtures for the simulator's HTTP tests: real servers on free 127.0.0.1 ports.

``shared_sim`` is one server for the whole session, for tests that do not change data or faults;
``sim`` is a fresh server per test. Both serve the real generated store (``make_test_store``).
``reference_match`` / ``reference_ids`` give expectations computed from the key rows without the
lookup engine.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import httpx
import pytest

from freight_pipeline.client.tls import default_ssl_context
from freight_pipeline.simulator.config import SimulatorConfig
from freight_pipeline.simulator.server import RunningSimulator, running_simulator
from freight_pipeline.simulator.store import SimulatorStore
from freight_pipeline.simulator.store_api import StoreAPI

SMALL_SHIPMENTS = 120


def make_test_store() -> SimulatorStore:
    return SimulatorStore(shipments=SMALL_SHIPMENTS, seed=7)


def token_for(sim: RunningSimulator, username: str | None = None, password: str | None = None) -> str:
    response = httpx.post(
        f"{sim.base_url}/auth/token",
        json={"username": username or sim.username, "password": password or sim.password},
        verify=default_ssl_context(),
    )
    assert response.status_code == 200, response.text
    return str(response.json()["access_token"])


def authed_client(sim: RunningSimulator) -> httpx.Client:
    return httpx.Client(base_url=sim.base_url, headers={"Authorization": f"Bearer {token_for(sim)}"}, timeout=10.0)


@pytest.fixture(scope="session")
def shared_sim() -> Iterator[RunningSimulator]:
    with running_simulator(make_test_store()) as server:
        yield server


@pytest.fixture(scope="session")
def shared_client(shared_sim: RunningSimulator) -> Iterator[httpx.Client]:
    with authed_client(shared_sim) as client:
        yield client


@pytest.fixture
def sim_factory() -> Iterator[Callable[..., RunningSimulator]]:
    """Start extra servers (``config=...``, ``store=...``); all stopped at the end of the test."""
    started: list[Any] = []

    def start(store: StoreAPI | None = None, config: SimulatorConfig | None = None, **kw: Any) -> RunningSimulator:
        manager = running_simulator(store if store is not None else make_test_store(), config, **kw)
        server = manager.__enter__()
        started.append(manager)
        return server

    yield start
    for manager in reversed(started):
        manager.__exit__(None, None, None)


@pytest.fixture
def sim(sim_factory: Callable[..., RunningSimulator]) -> RunningSimulator:
    return sim_factory()


@pytest.fixture
def client(sim: RunningSimulator) -> Iterator[httpx.Client]:
    with authed_client(sim) as c:
        yield c


# --- a reference implementation of matching, for expectations ----------------------------------------


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, tuple | list) else [value]


def reference_match(row: Mapping[str, Any], key: str, mode: str, values: list[Any]) -> bool:
    fields = [f for f in _as_list(row[key]) if f is not None]
    for field in fields:
        for value in values:
            if mode in ("EQUALS", "IN", "OR") and field == value:
                return True
            if mode == "CONTAINS" and str(value).lower() in str(field).lower():
                return True
            if (mode == "GT" and field > value) or (mode == "LT" and field < value):
                return True
            if (mode == "GE" and field >= value) or (mode == "LE" and field <= value):
                return True
    return False


def reference_ids(store: StoreAPI, predicate: Callable[[Mapping[str, Any]], bool]) -> list[int]:
    return sorted(int(row["ID"]) for row in store.reader.shipment_key_rows() if predicate(row))


def lookup_all(client: httpx.Client, path: str, criteria: list[Any], **params: Any) -> list[dict[str, Any]]:
    """Every page of a lookup (page_size 500)."""
    items: list[dict[str, Any]] = []
    page_no = 0
    while True:
        response = client.post(path, json=criteria, params={"page_size": 500, "page_no": page_no, **params})
        assert response.status_code == 200, response.text
        items += response.json()
        page_no += 1
        if page_no >= int(response.headers["X-Page-Count"]):
            return items
