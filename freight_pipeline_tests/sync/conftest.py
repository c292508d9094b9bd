"""Fixtures of the sync tests: a fresh simulator per test and a sync that runs against it."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from freight_pipeline.config import ServiceSettings
from freight_pipeline.simulator.server import RunningSimulator, running_simulator
from freight_pipeline.sync.client_source import ClientSource
from freight_pipeline.sync.result import StreamResult
from freight_pipeline.sync.runner import sync_all
from freight_pipeline.sync.settings import SyncSettings

SHIPMENTS = 150
# Small pages so a few hundred shipments take many lookups; reconcile on every run.
TEST_SETTINGS = SyncSettings(page_size=25, concurrency=8, reconcile_interval=dt.timedelta(0), detail_batch_size=40)


@pytest.fixture
def sim() -> Iterator[RunningSimulator]:
    with running_simulator(shipments=SHIPMENTS, seed=11) as running:
        yield running


def service_of(sim: RunningSimulator) -> ServiceSettings:
    return ServiceSettings(sim.base_url, sim.username, sim.password)


SyncFn = Callable[..., dict[str, StreamResult]]


@pytest.fixture
def sync(sim: RunningSimulator, tmp_path: Path) -> SyncFn:
    """``sync(**options)`` runs every stream against ``sim`` into ``tmp_path`` and publishes."""

    def run(settings: SyncSettings = TEST_SETTINGS, source_factory: Callable[..., object] = ClientSource,
            **options: object) -> dict[str, StreamResult]:
        results, _ = sync_all(service_of(sim), tmp_path, settings, source_factory=source_factory, **options)
        return {r.stream: r for r in results}

    return run
