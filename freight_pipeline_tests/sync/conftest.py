"""Fixtures of the sync tests: a fresh simulator per test and a sync that runs against it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pytest

from freight_pipeline.client.tls import default_ssl_context
from freight_pipeline.config import ServiceSettings
from freight_pipeline.lake.backend import storage_from_env
from freight_pipeline.simulator.server import RunningSimulator, running_simulator
from freight_pipeline.sync.client_source import ClientSource
from freight_pipeline.sync.result import StreamResult
from freight_pipeline.sync.runner import sync_all
from freight_pipeline.sync.settings import SyncSettings
from freight_pipeline.sync.shipments import FROM_SCRATCH
from freight_pipeline_tests.sync.settings import TEST_SETTINGS

SHIPMENTS = 150
SMALL_SHIPMENTS = 40
"""For tests of one fault or one setting, which need data but not much of it."""


@pytest.fixture
def sim() -> Iterator[RunningSimulator]:
    with running_simulator(shipments=SHIPMENTS, seed=11) as running:
        yield running


def service_of(sim: RunningSimulator) -> ServiceSettings:
    return ServiceSettings(sim.base_url, sim.username, sim.password)


SyncFn = Callable[..., dict[str, StreamResult]]


@pytest.fixture
def small_sim() -> Iterator[RunningSimulator]:
    with running_simulator(shipments=SMALL_SHIPMENTS, seed=7) as running:
        yield running


def syncer(sim: RunningSimulator, data_dir: Path, publish_after: bool = True) -> SyncFn:
    """``sync(settings, source_factory, **options)``: every stream (or ``streams=``) against ``sim``
    into ``data_dir``, then publish (unless ``publish_after=False``); returns the results by stream."""

    def run(settings: SyncSettings = TEST_SETTINGS, source_factory: Callable[..., object] = ClientSource,
            **options: object) -> dict[str, StreamResult]:
        options.setdefault("publish_after", publish_after)
        results, _ = sync_all(service_of(sim), data_dir, settings, backend=storage_from_env(),
                              source_factory=source_factory, **options)
        for result in results:
            assert_every_document_counted_read(result)
        return {r.stream: r for r in results}

    return run


def assert_every_document_counted_read(result: StreamResult) -> None:
    """A shipments run's ``rows_read`` counts every shipment document it received, however it was listed (the
    walk, the retry queue, the lookup's unstamped, the reconcile: ``extra["read"]``)."""
    if result.stream == "shipments" and "parts" in result.extra:
        documents = result.extra["parts"]["shipments"]["read"]
        assert documents <= result.rows_read, (result.rows_read, result.extra.get("read"), documents)


def query(database: Path, sql: str, params: list[object] | None = None) -> list[tuple]:
    """Rows of ``sql`` on a DuckDB file, opened read-only."""
    with duckdb.connect(str(database), read_only=True) as con:
        return con.execute(sql, params or []).fetchall()


def work_db(data_dir: Path) -> Path:
    """The sync's working database (what it writes; the publish copies it)."""
    return data_dir / "work" / "warehouse.duckdb"


@pytest.fixture
def sync(sim: RunningSimulator, tmp_path: Path) -> SyncFn:
    return syncer(sim, tmp_path)


@pytest.fixture
def small_sync(small_sim: RunningSimulator, tmp_path: Path) -> SyncFn:
    return syncer(small_sim, tmp_path)


@pytest.fixture
def work_sync(small_sim: RunningSimulator, tmp_path: Path) -> SyncFn:
    """Like ``small_sync`` without the publish: for tests that check the working database."""
    return syncer(small_sim, tmp_path, publish_after=False)


def assert_nothing_healed(result: StreamResult) -> None:
    """The reconcile pass of ``result`` (a shipments run with reconciliation) found the warehouse
    already complete: nothing missing, stale or vanished that the walk should have handled."""
    if result.extra.get("reconcile") == FROM_SCRATCH:  # a first walk from the beginning lists everything
        return
    assert "reconcile_refetched" in result.extra, "this run did not reconcile"
    healed = {k: result.extra[k] for k in ("reconcile_refetched", "reconcile_deleted")}
    assert healed == {"reconcile_refetched": 0, "reconcile_deleted": 0}, f"reconcile had to heal: {healed}"


def corrupt(sim: RunningSimulator, endpoint: str, record_id: int, kind: str, **fields: Any) -> None:
    """Plant a corruption of one record's answers at ``sim`` (started with ``control``; ``/_control/corruptions``:
    every answer, until :func:`heal`)."""
    answer = httpx.post(
        f"{sim.base_url}/_control/corruptions",
        json={"endpoint": endpoint, "id": record_id, "kind": kind, **fields},
        timeout=10,
        verify=default_ssl_context(),
    )
    assert answer.status_code == 200, answer.text


def heal(sim: RunningSimulator) -> None:
    """Every corruption planted at ``sim`` removed."""
    assert httpx.delete(f"{sim.base_url}/_control/corruptions", timeout=10).status_code == 200
