"""Running streams: open the client and the working warehouse, log each stream in ``sync_runs``.

``run_stream`` runs one stream (what one Dagster asset does); ``sync_all`` runs every stream in
order with one client and publishes at the end (what tests, the crash trials and the benchmark use).
Both write the warehouse in the storage they are given (``warehouse.backend.StorageBackend``).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import gc
import signal
import threading
import uuid
from collections.abc import Callable, Coroutine, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar, cast

from freight_pipeline.client import AsyncFreightClient, PermissionDeniedError
from freight_pipeline.client.stats import StatsSnapshot
from freight_pipeline.config import SERVICE_TIMEZONE_ENV, ServiceSettings
from freight_pipeline.datetimes import DEFAULT_SERVICE_TIMEZONE, ServiceZone
from freight_pipeline.normalize.signature import current_signature
from freight_pipeline.process_end import ask_stop, on_stop, query_interrupted, stop_asked
from freight_pipeline.sync.client_source import ClientSource
from freight_pipeline.sync.derived_by import MAPPING, note_mapping
from freight_pipeline.sync.drift import change_record, note_shape
from freight_pipeline.sync.isolation import StreamUnreachable
from freight_pipeline.sync.nulls import jump_phrases, jump_record, note_nulls
from freight_pipeline.sync.progress import Progress
from freight_pipeline.sync.result import NoticeKind, StreamResult, results_begun
from freight_pipeline.sync.settings import SyncSettings
from freight_pipeline.sync.source import SourceAPI
from freight_pipeline.sync.streams import STREAM_NAMES, Stream, stream_named
from freight_pipeline.warehouse import meta
from freight_pipeline.warehouse.backend import Publication, StorageBackend
from freight_pipeline.warehouse.ddl import explained_out_of_memory
from freight_pipeline.warehouse.run_log import SKIPPED
from freight_pipeline.warehouse.store import Warehouse, open_warehouse

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


T = TypeVar("T")


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop where it is installed (a dependency; not built for every platform), else None
    (asyncio's own). Its loop and transports are C: a sync's client spends about a sixth less CPU a request
    (docs/performance.md)."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def run_async(main: Coroutine[Any, Any, T]) -> T:
    """``main`` run to its end on a new event loop (:func:`event_loop_factory`): what ``asyncio.run`` does. In a
    thread other than the main one, which no signal reaches, ``process_end.ask_stop`` stops it as a stop signal
    stops it in the main thread (``asyncio.Runner`` cancels its task on Ctrl-C, then raises KeyboardInterrupt); in
    the main thread while another program handles its stops, in a thread of its own (:func:`_in_a_thread`)."""
    if threading.current_thread() is threading.main_thread():
        if _stops_handled_elsewhere():
            return _in_a_thread(main)
        with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
            return runner.run(main)
    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        try:
            return runner.run(_stoppable(main))
        except asyncio.CancelledError:
            if stop_asked():
                raise KeyboardInterrupt from None
            raise


def _stops_handled_elsewhere() -> bool:
    """Whether Ctrl-C's handler in force is a function of another program's (a Dagster run's raises its interrupt):
    uvloop runs such a handler in a callback of its own, where what it raises is printed and lost, and
    ``asyncio.Runner`` puts in its own only over the interpreter's: a stop of a lake's backfill partition went on to
    ``sync succeeded``."""
    handler = signal.getsignal(signal.SIGINT)
    return callable(handler) and handler is not signal.default_int_handler


def _in_a_thread(main: Coroutine[Any, Any, T]) -> T:
    """``main`` run in a thread of its own, which the main thread waits for: what a stop's handler raises there
    stops it (``process_end.ask_stop``: its task cancelled) and is raised once it ended. Waited for on an event, not
    by ``join``: a ``join`` an exception interrupts takes the thread for ended (CPython 3.11's ``Thread`` lets go of
    the lock the running thread holds)."""
    ended: list[tuple[bool, Any]] = []
    done = threading.Event()

    def work() -> None:
        try:
            ended.append((True, run_async(main)))
        except BaseException as exc:
            ended.append((False, exc))
        finally:
            done.set()

    thread = threading.Thread(target=work, name="freight-async")
    thread.start()
    try:
        done.wait()
    except BaseException:
        ask_stop(thread)
        done.wait()
        raise
    finally:
        if done.is_set():
            thread.join()
    finished, value = ended[0]
    if not finished:
        raise value
    return cast(T, value)


async def _stoppable(main: Coroutine[Any, Any, T]) -> T:
    """``main``, its task cancelled by a stop asked of its thread (``process_end.ask_stop``); not begun when one was
    asked before."""
    if stop_asked():
        main.close()
        raise asyncio.CancelledError
    loop, task = asyncio.get_running_loop(), asyncio.current_task()
    assert task is not None

    def cancel() -> None:
        with contextlib.suppress(RuntimeError):  # its loop closed meanwhile: the run ended
            loop.call_soon_threadsafe(task.cancel)

    try:
        with on_stop(cancel):
            return await main
    finally:
        main.close()  # not begun when a stop came in between (an ended one's close does nothing)


def new_run_id() -> str:
    return dt.datetime.now(dt.UTC).strftime("cli-%Y%m%dT%H%M%SZ-") + uuid.uuid4().hex[:8]


def open_client(service: ServiceSettings, settings: SyncSettings) -> AsyncFreightClient:
    return AsyncFreightClient.from_settings(service, limit=settings.in_flight_limit(), hedge=settings.hedge_policy(),
                                            retry=settings.retry_policy)


STOPPED = "stopped (Ctrl-C, SIGTERM or SIGHUP): what it committed before is kept, the next run goes on from it"
"""What ``sync_runs.error`` and a step's line say of a run a stop ended (:func:`one_line_error`)."""


def one_line_error(exc: BaseException) -> str:
    """One line for logs and ``sync_runs.error`` (the client's messages never carry secrets); a stop, however it
    came (anything raised that is not an ``Exception``: KeyboardInterrupt, a task cancelled, Dagster's
    ``DagsterExecutionInterruptedError`` of a run terminated; or DuckDB's own error for a stop met in a query), is
    :data:`STOPPED`."""
    if not isinstance(exc, Exception) or query_interrupted(exc):
        return STOPPED
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}"[:1000] if text else type(exc).__name__


def _switched_off(stream: Stream, warehouse: Warehouse, run_id: str, progress: Progress | None) -> StreamResult:
    """The run of a stream that is switched off: it reads and writes nothing."""
    assert stream.switch is not None
    cursor = warehouse.reads.get_cursor(stream.name)
    skipped = StreamResult(run_id, stream.name, dt.datetime.now(dt.UTC), cursor_before=cursor, cursor_after=cursor)
    skipped.extra[SKIPPED] = f"the {stream.name} stream is off ({stream.switch.variable}=0)"
    if progress is not None:
        progress(f"{stream.name}: {skipped.extra[SKIPPED]}")
    return skipped


async def run_stream_async(
    name: str,
    source: SourceAPI,
    warehouse: Warehouse,
    settings: SyncSettings,
    run_id: str,
    progress: Progress | None = None,
) -> StreamResult:
    """Run one stream, logging it in ``sync_runs`` as running, then success or failed (and re-raise)."""
    stream = stream_named(name)
    started = StreamResult(run_id, name, dt.datetime.now(dt.UTC), cursor_before=warehouse.reads.get_cursor(name))
    requests_before, retries_before = source.request_counts()
    settings = settings.with_own_zone()  # the stream's own zone value: it counts what this run reads
    mapping = current_signature(settings.service_timezone)
    started.extra[MAPPING] = mapping.id  # the run log names the mapping of whatever the run writes
    client_before = source.client_stats()
    tables = stream.tables
    warehouse.run_log.record_run(started, tables)
    try:
        with explained_out_of_memory(f"stream {name}", warehouse.backend.duckdb_settings), _unreachable_named(stream), \
                results_begun() as begun:
            if stream.switch is not None and not stream.switch.is_on(settings):
                result = _switched_off(stream, warehouse, run_id, progress)
            else:
                note_mapping(warehouse, mapping, run_id)  # its signature stored before any row
                result = await stream.run(source, warehouse, settings, run_id, progress)
            if result.tallies:  # schema drift: reported by the run that meets it
                changes = note_shape(warehouse, run_id, result.tallies)
                result.extra["shape_changes"] = [change_record(change) for change in changes]
            # a column null far more often than before: the same; not a backfill partition's, whose id range's
            # shares (the older shipments closed, the newer open) are no run before or after it's to compare with
            if result.nulls and settings.id_range is None:
                jumps = note_nulls(warehouse, run_id, result.nulls)
                result.extra["null_jumps"] = [jump_record(jump) for jump in jumps]
                result.extra["null_jump_lines"] = jump_phrases(jumps)
    except BaseException as exc:
        requests_after, retries_after = source.request_counts()
        started.status = "failed"
        started.finished_at = dt.datetime.now(dt.UTC)
        started.error = one_line_error(exc)
        started.requests = requests_after - requests_before
        started.retries = retries_after - retries_before
        started.cursor_after = warehouse.reads.get_cursor(name)
        if begun:  # what it read, and wrote in the batches it committed (theirs in the warehouse, its cursor with them)
            started.rows_read, started.rows_written = begun[-1].rows_read, begun[-1].rows_written
            started.rows_by_table = dict(begun[-1].rows_by_table)
        _record_hedges(started, source.client_stats() - client_before)
        warehouse.run_log.record_run(started, tables)
        raise
    _note_naive_datetimes(result, settings.zone, lambda: warehouse.reads.last_success_notice_kinds(name))
    result.extra[MAPPING] = mapping.id
    result.started_at = started.started_at
    result.status = "success"
    result.finished_at = dt.datetime.now(dt.UTC)
    _record_hedges(result, source.client_stats() - client_before)
    warehouse.run_log.record_run(result, tables)
    return result


def naive_clock_notice(zone: str) -> str:
    """What a run says, once, when the service sent date-times without a UTC offset."""
    if zone == DEFAULT_SERVICE_TIMEZONE:
        return (f"the service sends date-times without a UTC offset; read as {zone}; set {SERVICE_TIMEZONE_ENV} to "
                "its zone")
    return f"the service sends date-times without a UTC offset; read in {zone} ({SERVICE_TIMEZONE_ENV})"


def _note_naive_datetimes(result: StreamResult, zone: ServiceZone, said_before: Callable[[], Sequence[str]]) -> None:
    """Date-times read without an offset: counted in the run log, and said (``StreamResult.notices``). A kind that
    lasts: a run that read no date-time at all (nothing changed) says it again when the stream's last successful
    run did (``said_before``, asked only then), so that its alert stays open until a run reads date-times with an
    offset."""
    if zone.naive_read > 0:
        result.extra[meta.NAIVE_DATETIMES] = {"read": zone.naive_read, "service_timezone": zone.name}
    elif zone.aware_read > 0 or NoticeKind.CLOCK_WITHOUT_OFFSET not in said_before():
        return
    result.add_notice(NoticeKind.CLOCK_WITHOUT_OFFSET, naive_clock_notice(zone.name))


def _record_hedges(result: StreamResult, made: StatsSnapshot) -> None:
    """The stream's hedged reads and latency percentiles per kind of call, in ``extra``
    (``sync_runs.extra``): ``hedges_sent``, ``hedges_won``, ``hedges_by_kind``, ``latency_ms``."""
    if made.latency or made.hedges:
        result.extra.update(made.hedge_figures())


@contextmanager
def _unreachable_named(stream: Stream) -> Iterator[None]:
    """A 403 (a permission the account lacks) ends a stream that can be switched off as
    StreamUnreachable, which names the stream and its switch; the shipments stream's 403 stays the
    client's PermissionDeniedError (it names the endpoint and whom to ask)."""
    try:
        yield
    except PermissionDeniedError as exc:
        if stream.switch is None:
            raise
        request = f"{exc.method} {exc.path}" if exc.method and exc.path else None
        raise StreamUnreachable(stream.name, exc.status_code, request, stream.switch.variable) from exc
    except StreamUnreachable as exc:
        exc.switch = exc.switch or (stream.switch.variable if stream.switch else None)
        raise


def run_stream(
    name: str,
    service: ServiceSettings,
    data_dir: Path,
    settings: SyncSettings | None = None,
    run_id: str | None = None,
    progress: Progress | None = None,
    *,
    backend: StorageBackend,
) -> StreamResult:
    """Run one stream against the service, in its own client and warehouse connection (in ``backend``)."""
    settings = settings or SyncSettings()
    run_id = run_id or new_run_id()

    async def go() -> StreamResult:
        async with open_client(service, settings) as client:
            with explained_out_of_memory(f"stream {name}", backend.duckdb_settings), \
                    open_warehouse(data_dir, backend) as warehouse:
                return await run_stream_async(name, ClientSource(client), warehouse, settings, run_id, progress)

    with fewer_collections():
        return run_async(go())


def sync_all(
    service: ServiceSettings,
    data_dir: Path,
    settings: SyncSettings | None = None,
    *,
    backend: StorageBackend,
    streams: Sequence[str] = STREAM_NAMES,
    run_id: str | None = None,
    progress: Progress | None = None,
    publish_after: bool = True,
    source_factory: Callable[[AsyncFreightClient], SourceAPI] = ClientSource,
) -> tuple[list[StreamResult], Publication | None]:
    """Run ``streams`` in order with one client into ``backend``; publish the warehouse when all
    succeeded, unless readers see every commit anyway (a lake: the publish is then None; its publish,
    a snapshot recorded after a whole dbt build, is the job's, ``job.run``).

    ``source_factory`` wraps the client (tests use it to inject faults the simulator cannot make).
    """
    settings = settings or SyncSettings()
    run_id = run_id or new_run_id()
    for name in streams:
        stream_named(name)  # refuse an unknown name before anything runs

    async def go() -> list[StreamResult]:
        results: list[StreamResult] = []
        async with open_client(service, settings) as client:
            source = source_factory(client)
            with explained_out_of_memory("the sync", backend.duckdb_settings), \
                    open_warehouse(data_dir, backend) as warehouse:
                for name in STREAM_NAMES:
                    if name in streams:
                        results.append(await run_stream_async(name, source, warehouse, settings, run_id, progress))
        return results

    with fewer_collections():
        results = run_async(go())
    publishes = publish_after and not backend.readers_see_commits
    return results, backend.publish(Path(data_dir), run_id) if publishes else None
