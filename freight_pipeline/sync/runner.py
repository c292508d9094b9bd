"""Running streams: open the client and the working warehouse, log each stream in ``sync_runs``.

``run_stream`` runs one stream (what one Dagster asset does); ``sync_all`` runs every stream in
order with one client and publishes at the end (what tests, the crash trials and the benchmark use).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import gc
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from freight_pipeline.client import AsyncFreightClient, PermissionDeniedError
from freight_pipeline.config import CODE_CONVERSIONS_ENV, DOCUMENTS_ENV, ServiceSettings
from freight_pipeline.lake.settings import LakeSettings
from freight_pipeline.normalize import FREIGHT_TABLES, STREAM_TABLES
from freight_pipeline.sync.client_source import ClientSource
from freight_pipeline.sync.code_conversions import STREAM as CODE_CONVERSIONS
from freight_pipeline.sync.code_conversions import sync_code_conversions
from freight_pipeline.sync.documents import STREAM as DOCUMENTS
from freight_pipeline.sync.documents import sync_documents
from freight_pipeline.sync.isolation import StreamUnreachable
from freight_pipeline.sync.parts import PART_TABLES
from freight_pipeline.sync.result import StreamResult
from freight_pipeline.sync.settings import SyncSettings
from freight_pipeline.sync.shipments import STREAM as SHIPMENTS
from freight_pipeline.sync.shipments import sync_shipments
from freight_pipeline.sync.source import SourceAPI
from freight_pipeline.warehouse import PublishResult, Warehouse, explained_out_of_memory, publish

STREAM_ORDER: tuple[str, ...] = (SHIPMENTS, CODE_CONVERSIONS, DOCUMENTS)
"""Every stream, in the order a run executes them. The shipments stream also writes each changed
shipment's events, legs and memos (``sync.parts``); the documents stream comes after it, because it
lists the E-Files of the shipments it wrote, and last, so that its failure (an account without
E-File permissions, say) leaves the other streams' work done."""

STREAM_WRITES: dict[str, tuple[str, ...]] = {
    SHIPMENTS: PART_TABLES,
    CODE_CONVERSIONS: STREAM_TABLES[CODE_CONVERSIONS],
    DOCUMENTS: STREAM_TABLES[DOCUMENTS],
}
"""The ``freight`` tables each stream writes (the shipments stream: every part's), whose
``freight_meta.table_freshness`` rows its runs keep."""

Progress = Callable[[str], None]


class UnknownStream(ValueError):
    pass


RUN_GC_THRESHOLDS = (10_000, 20, 100)
"""Python's cyclic collector during a run: a run allocates millions of short-lived dicts (parsed
JSON, rows), and with the default thresholds (700, 10, 10) collections took a fifth of its CPU."""


@contextmanager
def fewer_collections() -> Iterator[None]:
    """For the run: objects alive before it (imports, definitions) are left out of collections
    (``gc.freeze``) and collections come less often; both restored afterwards."""
    before = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(*RUN_GC_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()


def new_run_id() -> str:
    return dt.datetime.now(dt.UTC).strftime("cli-%Y%m%dT%H%M%SZ-") + uuid.uuid4().hex[:8]


def open_warehouse(data_dir: Path) -> Warehouse:
    """The warehouse the sync writes: the lake when ``FREIGHT_LAKE_CATALOG_URI`` is set, else the working DuckDB."""
    return Warehouse(Path(data_dir), FREIGHT_TABLES, lake=LakeSettings.from_env())


def open_client(service: ServiceSettings, settings: SyncSettings) -> AsyncFreightClient:
    return AsyncFreightClient.from_settings(service, limit=settings.in_flight_limit())


def one_line_error(exc: BaseException) -> str:
    """One line for logs and ``sync_runs.error`` (the client's messages never carry secrets)."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}"[:1000] if text else type(exc).__name__


async def _dispatch(
    name: str, source: SourceAPI, warehouse: Warehouse, settings: SyncSettings, run_id: str, progress: Progress | None
) -> StreamResult:
    if name == SHIPMENTS:
        return await sync_shipments(source, warehouse, settings, run_id, progress)
    if name == DOCUMENTS:
        return await sync_documents(source, warehouse, settings, run_id, progress)
    if name == CODE_CONVERSIONS:
        if not settings.code_conversions:
            skipped = StreamResult(run_id, name, dt.datetime.now(dt.UTC), cursor_before=warehouse.get_cursor(name))
            skipped.cursor_after = skipped.cursor_before
            skipped.extra["skipped"] = f"the code-conversions stream is off ({CODE_CONVERSIONS_ENV}=0)"
            return skipped
        return await sync_code_conversions(
            source, warehouse, run_id, progress, attempts=settings.count_attempts, backoff=settings.backoff
        )
    raise UnknownStream(f"unknown stream {name!r}; streams are {', '.join(STREAM_ORDER)}")


async def run_stream_async(
    name: str,
    source: SourceAPI,
    warehouse: Warehouse,
    settings: SyncSettings,
    run_id: str,
    progress: Progress | None = None,
) -> StreamResult:
    """Run one stream, logging it in ``sync_runs`` as running, then success or failed (and re-raise)."""
    if name not in STREAM_ORDER:
        raise UnknownStream(f"unknown stream {name!r}; streams are {', '.join(STREAM_ORDER)}")
    started = StreamResult(run_id, name, dt.datetime.now(dt.UTC), cursor_before=warehouse.get_cursor(name))
    requests_before, retries_before = source.request_counts()
    tables = STREAM_WRITES[name]
    warehouse.record_run(started, tables)
    try:
        with explained_out_of_memory(f"stream {name}"), _unreachable_named(name):
            result = await _dispatch(name, source, warehouse, settings, run_id, progress)
    except BaseException as exc:
        requests_after, retries_after = source.request_counts()
        started.status = "failed"
        started.finished_at = dt.datetime.now(dt.UTC)
        started.error = one_line_error(exc)
        started.requests = requests_after - requests_before
        started.retries = retries_after - retries_before
        started.cursor_after = warehouse.get_cursor(name)
        warehouse.record_run(started, tables)
        raise
    result.started_at = started.started_at
    result.status = "success"
    result.finished_at = dt.datetime.now(dt.UTC)
    warehouse.record_run(result, tables)
    return result


STREAM_SWITCHES: dict[str, str] = {DOCUMENTS: DOCUMENTS_ENV, CODE_CONVERSIONS: CODE_CONVERSIONS_ENV}
"""The setting that switches a stream off (the shipments stream has none: the others follow it)."""


@contextmanager
def _unreachable_named(name: str) -> Iterator[None]:
    """A 403 (a permission the account lacks) ends a stream that can be switched off as
    StreamUnreachable, which names the stream and its switch; the shipments stream's 403 stays the
    client's PermissionDeniedError (it names the endpoint and whom to ask)."""
    try:
        yield
    except PermissionDeniedError as exc:
        if name not in STREAM_SWITCHES:
            raise
        request = f"{exc.method} {exc.path}" if exc.method and exc.path else None
        raise StreamUnreachable(name, exc.status_code, request, STREAM_SWITCHES[name]) from exc
    except StreamUnreachable as exc:
        exc.switch = exc.switch or STREAM_SWITCHES.get(name)
        raise


def run_stream(
    name: str,
    service: ServiceSettings,
    data_dir: Path,
    settings: SyncSettings | None = None,
    run_id: str | None = None,
    progress: Progress | None = None,
) -> StreamResult:
    """Run one stream against the service, in its own client and warehouse connection."""
    settings = settings or SyncSettings()
    run_id = run_id or new_run_id()

    async def go() -> StreamResult:
        async with open_client(service, settings) as client:
            with explained_out_of_memory(f"stream {name}"), open_warehouse(data_dir) as warehouse:
                return await run_stream_async(name, ClientSource(client), warehouse, settings, run_id, progress)

    with fewer_collections():
        return asyncio.run(go())


def sync_all(
    service: ServiceSettings,
    data_dir: Path,
    settings: SyncSettings | None = None,
    *,
    streams: Sequence[str] = STREAM_ORDER,
    run_id: str | None = None,
    progress: Progress | None = None,
    publish_after: bool = True,
    source_factory: Callable[[AsyncFreightClient], SourceAPI] = ClientSource,
) -> tuple[list[StreamResult], PublishResult | None]:
    """Run ``streams`` in order with one client; publish the warehouse when all succeeded (embedded
    only: in lake mode the result's publish is None).

    ``source_factory`` wraps the client (tests use it to inject faults the simulator cannot make).
    """
    settings = settings or SyncSettings()
    run_id = run_id or new_run_id()
    unknown = [s for s in streams if s not in STREAM_ORDER]
    if unknown:
        raise UnknownStream(f"unknown streams {unknown}; streams are {', '.join(STREAM_ORDER)}")

    async def go() -> list[StreamResult]:
        results: list[StreamResult] = []
        async with open_client(service, settings) as client:
            source = source_factory(client)
            with explained_out_of_memory("the sync"), open_warehouse(data_dir) as warehouse:
                for name in STREAM_ORDER:
                    if name in streams:
                        results.append(await run_stream_async(name, source, warehouse, settings, run_id, progress))
        return results

    with fewer_collections():
        results = asyncio.run(go())
    # lake mode: nothing to copy (readers read the lake); its publish, a snapshot recorded after a
    # whole dbt build, is the Dagster job's (``defs.publish``)
    lake = LakeSettings.from_env() is not None
    published = publish(Path(data_dir)) if publish_after and not lake else None
    return results, published
