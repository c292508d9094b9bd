"""The client a sync run opens (configured by the run's settings) and the event loop it runs on."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import duckdb
import pytest
import uvloop
from dagster import DagsterExecutionInterruptedError

from freight_pipeline.client import AsyncFreightClient
from freight_pipeline.client._core import HeldBody
from freight_pipeline.client.endpoints import Endpoint
from freight_pipeline.client.errors import FreightConnectionError
from freight_pipeline.client.retry import DEFAULT_RETRY_POLICY, RetryPolicy
from freight_pipeline.config import ServiceSettings
from freight_pipeline.simulator.server import running_simulator
from freight_pipeline.sync.changes import LookupResult
from freight_pipeline.sync.client_source import ClientSource
from freight_pipeline.sync.isolation import CircuitOpen
from freight_pipeline.sync.runner import STOPPED, one_line_error, open_client, run_async
from freight_pipeline.sync.settings import SyncSettings
from freight_pipeline.sync.streams import DOCUMENTS, SHIPMENTS, Stream
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
    """A service that refuses every connection once ``ANSWERED`` calls of the stream under test were answered: a
    shipment's records (the shipments stream), or a page of E-File lookups (the documents stream)."""

    ANSWERED = {SHIPMENTS.name: 150, DOCUMENTS.name: 3}

    def __init__(self, client: AsyncFreightClient, stream: str) -> None:
        super().__init__(client)
        self.stream, self.answered = stream, 0

    def _answered(self, stream: str) -> None:
        if stream == self.stream:
            self.answered += 1
            if self.answered > self.ANSWERED[stream]:
                raise FreightConnectionError("connection refused by the service")

    async def get_shipment_records(self, endpoint: Endpoint, shipment_id: int) -> HeldBody:
        self._answered(SHIPMENTS.name)
        return await super().get_shipment_records(endpoint, shipment_id)

    async def efile_pages(self, shipment_ids: list[int], page_size: int) -> AsyncIterator[LookupResult]:
        self._answered(DOCUMENTS.name)
        async for page in super().efile_pages(shipment_ids, page_size):
            yield page


@pytest.mark.parametrize("stream", [SHIPMENTS, DOCUMENTS], ids=lambda stream: stream.name)
def test_a_stream_that_fails_logs_what_it_read_and_the_rows_its_committed_batches_wrote(
    stream: Stream, tmp_path: Path
) -> None:
    """The service gone in the middle of a stream that commits batch by batch (the breaker stops it): its batches
    committed before are in the warehouse, with their cursor, and its ``sync_runs`` row said it read and wrote nothing
    (the stream's own counts were dropped with its exception)."""
    with running_simulator(shipments=200, seed=11) as sim:
        sync = syncer(sim, tmp_path, publish_after=False)
        if stream.reads_first:
            sync(streams=tuple(stream.reads_first))
        with pytest.raises(CircuitOpen):
            sync(source_factory=lambda client: GoneAfter(client, stream.name), streams=(stream.name,))
    ((run_id, status, read, written, by_table),) = query(
        work_db(tmp_path), "SELECT run_id, status, rows_read, rows_written, details->'$.rows_by_table' "
                           "FROM freight_meta.sync_runs WHERE stream = ? AND status = 'failed'", [stream.name])
    held = {table: query(work_db(tmp_path), f"SELECT count(*) FROM freight.{table} WHERE _run_id = ?", [run_id])[0][0]
            for table in stream.tables}
    assert status == "failed" and sum(held.values()) > 0
    assert json.loads(by_table) == {table: rows for table, rows in held.items() if rows}
    assert written == sum(held.values()) and read >= held.get(SHIPMENTS.name, 1)  # documents: the files read


@pytest.mark.parametrize("stop", [
    KeyboardInterrupt(), asyncio.CancelledError(), SystemExit(143), DagsterExecutionInterruptedError(),
    RuntimeError("Query interrupted"), duckdb.InterruptException("INTERRUPT Error: Interrupted!"),
], ids=lambda exc: type(exc).__name__ + (f"({exc})" if isinstance(exc, RuntimeError) else ""))
def test_every_way_a_stop_comes_is_logged_as_stopped(stop: BaseException) -> None:
    """A stop ends a run as whatever its code raises where it came: Ctrl-C's KeyboardInterrupt, a cancelled task,
    Dagster's interrupt of a terminated run (a rebuild's or a backfill partition's, in the op's main thread: logged
    ``DagsterExecutionInterruptedError``), a DuckDB query's own error for it (logged ``RuntimeError: Query
    interrupted``). Each is logged as the one stop it is; an error is logged as itself."""
    assert one_line_error(stop) == STOPPED
    assert one_line_error(RuntimeError("Query failed: no such table")) == "RuntimeError: Query failed: no such table"


class Interrupted(BaseException):
    """What another program's Ctrl-C handler raises (Dagster's ``DagsterExecutionInterruptedError``)."""


def test_a_stop_another_program_handles_stops_a_run_in_the_main_thread() -> None:
    """A lake's backfill partition runs its stream in the main thread under Dagster's handler, which uvloop ran in a
    callback of its own, where what it raised was printed and lost: the stream went on to ``sync succeeded``. The
    handler's interrupt now stops the run (its task cancelled) and is raised as it ended."""
    cancelled: list[bool] = []

    async def long_stream() -> str:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return "went on"

    def interrupt(signum: int, frame: object) -> None:
        raise Interrupted

    before = signal.signal(signal.SIGINT, interrupt)
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    try:
        timer.start()
        with pytest.raises(Interrupted):
            run_async(long_stream())
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, before)
    assert cancelled == [True]
