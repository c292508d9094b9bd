"""The client a sync run opens (configured by the run's settings) and the event loop it runs on."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest
import uvloop

from freight_pipeline.client import AsyncFreightClient
from freight_pipeline.client._core import HeldBody
from freight_pipeline.client.endpoints import Endpoint
from freight_pipeline.client.errors import FreightConnectionError
from freight_pipeline.client.retry import DEFAULT_RETRY_POLICY, RetryPolicy
from freight_pipeline.config import ServiceSettings
from freight_pipeline.simulator.server import running_simulator
from freight_pipeline.sync.client_source import ClientSource
from freight_pipeline.sync.isolation import CircuitOpen
from freight_pipeline.sync.runner import open_client, run_async
from freight_pipeline.sync.settings import SyncSettings
from freight_pipeline.sync.streams import SHIPMENTS
from freight_pipeline_tests.sync.conftest import query, syncer, work_db


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


class GoneAfter(ClientSource):
    """A service that refuses every connection once ``ANSWERED`` records of shipments have been fetched."""

    ANSWERED = 150

    def __init__(self, client: AsyncFreightClient) -> None:
        super().__init__(client)
        self.answered = 0

    async def get_shipment_records(self, endpoint: Endpoint, shipment_id: int) -> HeldBody:
        self.answered += 1
        if self.answered > self.ANSWERED:
            raise FreightConnectionError("connection refused by the service")
        return await super().get_shipment_records(endpoint, shipment_id)


def test_a_stream_that_fails_logs_what_it_read_and_the_rows_its_committed_batches_wrote(tmp_path: Path) -> None:
    """The service gone in the middle of the walk (the breaker stops the stream): its batches committed before are in
    the warehouse, with their cursor, and its ``sync_runs`` row said it read and wrote nothing (the stream's own counts
    were dropped with its exception)."""
    with running_simulator(shipments=120, seed=11) as sim, pytest.raises(CircuitOpen):
        syncer(sim, tmp_path, publish_after=False)(source_factory=GoneAfter, streams=(SHIPMENTS.name,))
    ((run_id, status, read, written, by_table),) = query(
        work_db(tmp_path), "SELECT run_id, status, rows_read, rows_written, details->'$.rows_by_table' "
                           "FROM freight_meta.sync_runs WHERE stream = 'shipments'")
    held = {table: query(work_db(tmp_path), f"SELECT count(*) FROM freight.{table} WHERE _run_id = ?", [run_id])[0][0]
            for table in SHIPMENTS.tables}
    assert status == "failed" and 0 < held["shipments"] < 120
    assert json.loads(by_table) == {table: rows for table, rows in held.items() if rows}
    assert written == sum(held.values()) and read >= held["shipments"]
