"""The job in Dagster: one op that runs the job's one engine (``job.run.run_job``) and reports what it
did, the way ``dagster-dlt`` wraps a dlt pipeline.

One multi-asset (``freight_job``) holds every asset of the job: each stream's tables (grouped
``freight``, ``sync_assets``), the dbt models (their specs from the manifest, through dagster-dbt:
``defs.dbt``) and the published warehouse; and its checks: the warehouse checks (``defs.checks``) and
one per stream, red with the engine's message when the stream failed. It can be subset: a selection
runs the streams of its tables, and the build and the publish only when a dbt model or the publish is
selected (the build is always the whole plan's: a publish only ever ships marts of one complete build).

As the engine ends each step, the op yields its results: the tables of a stream that wrote, with the
figures of the run log and a data version that changes only with their rows; the warehouse checks as check results;
each model the build ran, and after a successful build every other model as current (not rebuilt); the publish.
The op takes the writer lock itself before the engine does (for the same run), and tags the run with its claim
(``writer_claim``), by which a schedule's tick knows a run that lost the lock for dead.
The engine runs in a thread of the op, so that what it reports can be yielded while it goes on.

One set of rules however the job is started (docs/operations.md, "One engine"): a failed stream's
tables are not materialized and its check is red (as is that of a stream not run because it reads the
failed one first), every other stream is checked, built and published in the same run (a model that reads
the failed stream says so: ``streams_not_synced``), and the run then fails; a warehouse check of ERROR
severity holds back the build and the publish.
"""

import atexit
import queue
import threading
import time
import weakref
from collections.abc import Callable, Collection, Generator, Iterator, Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import Any, TypeVar

import dagster as dg

from freight_pipeline.alerts.notify import Alerted
from freight_pipeline.checks.warehouse import warehouse_checks
from freight_pipeline.config import PASSWORD_ENV, BadSettings
from freight_pipeline.defs.checks import check_result, check_spec
from freight_pipeline.defs.dbt import DbtAssets, dbt_assets_of, model_results
from freight_pipeline.defs.resources import FreightServiceResource, WarehouseResource, run_settings
from freight_pipeline.defs.sync_assets import (
    TableState,
    metadata_value,
    stream_keys,
    stream_results,
    stream_specs,
    table_key,
    table_states,
)
from freight_pipeline.defs.writer_claim import writer_claim
from freight_pipeline.job.run import (
    CHECKS_STEP,
    FAILED_STEP,
    FAILED_STEPS,
    MARTS_STEP,
    PUBLISH_STEP,
    Alerting,
    JobReport,
    Step,
    run_job,
)
from freight_pipeline.lake.backend import storage_of
from freight_pipeline.marts.worker import DbtWorker
from freight_pipeline.process_end import ask_stop
from freight_pipeline.sync.progress import Tally, TallyLines, Throttled, tallies_to
from freight_pipeline.sync.settings import SyncSettings
from freight_pipeline.sync.streams import STREAM_NAMES, STREAM_OF_STEP, stream_named
from freight_pipeline.warehouse.run_log import logged_runs
from freight_pipeline.warehouse.writer_lock import WarehouseBusy

FREIGHT_JOB = "freight_job"
"""The op's name (its step key in every run)."""
PUBLISH_KEY = dg.AssetKey(["freight", "published_warehouse"])
PUBLISH_GROUP = "publish"
STREAM_CHECK = "stream_synced"
"""The check of each stream, on its first table: red when the stream failed or did not run."""
PROGRESS_EVERY_S = 15.0
"""At most one progress line per this many seconds goes to Dagster's event log (each is a stored event)."""

DBT = dbt_assets_of()
Told = TypeVar("Told")
Result = TypeVar("Result")
NOT_SYNCED = "streams_not_synced"
"""The metadata of a model built in a run where a stream it reads failed or did not run: those streams."""


def streams_upstream(dbt: DbtAssets) -> dict[dg.AssetKey, frozenset[str]]:
    """Each dbt model's key -> the streams whose tables it reads, directly or through other models."""
    stream_of = {key: stream for stream in STREAM_NAMES for key in stream_keys(stream)}
    deps = {spec.key: [dep.asset_key for dep in spec.deps] for spec in dbt.specs}
    found: dict[dg.AssetKey, frozenset[str]] = {}

    def of(key: dg.AssetKey) -> frozenset[str]:
        if key in stream_of:
            return frozenset({stream_of[key]})
        if key not in found:
            found[key] = frozenset()  # while its own deps are looked at
            found[key] = frozenset().union(*(of(dep) for dep in deps.get(key, ())))
        return found[key]

    return {key: of(key) for key in deps}


STREAMS_UPSTREAM = streams_upstream(DBT)


def _marked(results: Iterator[dg.MaterializeResult], not_synced: Collection[str]) -> Iterator[dg.MaterializeResult]:
    """Each model's result, with the streams it reads that failed or did not run in this run (:data:`NOT_SYNCED`):
    the model was built on what their tables held."""
    for result in results:
        stale = sorted(STREAMS_UPSTREAM.get(result.asset_key, frozenset()) & set(not_synced)) \
            if result.asset_key is not None else []
        if stale:
            result = dg.MaterializeResult(asset_key=result.asset_key, metadata={
                **(result.metadata or {}), NOT_SYNCED: dg.MetadataValue.text(
                    f"{', '.join(stale)}: failed or not run in this run; built on the rows its tables held (what "
                    "earlier runs wrote, and any batch the failed run committed)")})
        yield result


def stream_check_key(stream: str) -> dg.AssetCheckKey:
    return dg.AssetCheckKey(table_key(stream_named(stream).tables[0]), STREAM_CHECK)


def publish_spec(upstream: list[dg.AssetSpec]) -> dg.AssetSpec:
    return dg.AssetSpec(
        key=PUBLISH_KEY,
        group_name=PUBLISH_GROUP,
        deps=[spec.key for spec in upstream],
        kinds={"duckdb", "parquet"},
        description="The published warehouse: a read-only DuckDB copy (warehouse.duckdb) and Parquet "
        "(parquet/<schema>/<table>/), each swapped atomically. Analysts and BI read only this.",
    )


def step_results(step: Step, not_synced: Collection[str] = (), run_id: str = "",
                 before: Mapping[dg.AssetKey, TableState] | None = None) -> Iterator[
        dg.MaterializeResult | dg.AssetCheckResult]:
    """What one step of the engine did, as Dagster results (of every asset and check it concerns; the
    op keeps those selected); ``not_synced``: the streams that failed or did not run before it; ``run_id`` and
    ``before`` (the tables' states before the run): their data versions (``sync_assets.table_version``)."""
    stream = STREAM_OF_STEP.get(step.name)
    if stream is not None:
        if step.stream is not None and not step.off:  # a stream switched off wrote nothing: no materialization
            yield from stream_results(stream, step.stream, run_id, before)
        key = stream_check_key(stream)
        yield dg.AssetCheckResult(  # red when it failed or did not run; a stream switched off is no fault
            asset_key=key.asset_key, check_name=key.name, passed=step.status == "success" or step.off,
            severity=dg.AssetCheckSeverity.ERROR, description=step.line,
            metadata={"status": step.status, "seconds": dg.MetadataValue.float(round(step.seconds, 3))})
    elif step.name == "sync" and step.status == "failed":  # nothing could be opened: no stream ran
        for name in STREAM_NAMES:
            key = stream_check_key(name)
            yield dg.AssetCheckResult(asset_key=key.asset_key, check_name=key.name, passed=False,
                                      severity=dg.AssetCheckSeverity.ERROR, description=step.line)
    elif step.name == CHECKS_STEP:
        for check, result in step.checks:
            yield check_result(check, result)
    elif step.name == MARTS_STEP and step.marts is not None:
        yield from _marked(model_results(DBT, step.marts.nodes, built=step.status == "success"), not_synced)
    elif step.name == PUBLISH_STEP and step.publication is not None:
        yield dg.MaterializeResult(asset_key=PUBLISH_KEY, metadata={
            name: metadata_value(value) for name, value in step.publication.metadata().items()})


def unrun_stream_checks(checks: Collection[dg.AssetCheckKey], run: Collection[str],
                        data_dir: Path) -> Iterator[dg.AssetCheckResult]:
    """The check of each stream selected without the stream (a check alone: the UI's "Execute"), judged on the
    stream's latest run the working database logged (its run log: ``run_log.logged_runs``): it evaluated nothing.
    A run still running is not judged yet: a WARN that says so, not a red ERROR."""
    wanted = [stream for stream in STREAM_NAMES if stream not in run and stream_check_key(stream) in checks]
    latest = {entry["stream"]: entry for entry in logged_runs(data_dir)} if wanted else {}
    for stream in wanted:
        key, last = stream_check_key(stream), latest.get(stream)
        if last is None:
            status, line = "never run", f"{stream} was never run (this run did not run it)"
        else:
            status = str(last.get("status"))
            line = (f"the latest run of {stream} ({last.get('run_id')}, started {last.get('started_at')}) {status}"
                    + (f": {last['error']}" if last.get("error") else "") + " (this run did not run it)")
        running = status == "running"
        yield dg.AssetCheckResult(asset_key=key.asset_key, check_name=key.name, passed=status == "success",
                                  severity=dg.AssetCheckSeverity.WARN if running else dg.AssetCheckSeverity.ERROR,
                                  description=line + (": judged once it ends" if running else ""),
                                  metadata={"status": status, "run_id": str(last.get("run_id")) if last else ""})


def _run_in_thread(run: Callable[[Callable[[str], None], Callable[[Step], None]], JobReport]) -> Generator[
        str | Step | Tally | JobReport, None, None]:
    """Run ``run(progress, on_step)`` in a thread; yield its progress lines, its streams' tallies
    (``sync.progress``) and its steps as they come, then its report (or raise what it raised)."""
    told: queue.Queue[tuple[str, Any]] = queue.Queue()

    def work() -> None:
        try:
            with tallies_to(lambda tally: told.put(("tally", tally))):
                told.put(("report", run(lambda line: told.put(("line", line)),
                                        lambda step: told.put(("step", step)))))
        except BaseException as exc:
            told.put(("error", exc))

    thread = threading.Thread(target=work, name="freight-job", daemon=True)
    _engine_threads.add(thread)
    thread.start()
    try:
        while True:
            kind, item = told.get()
            if kind == "error":
                thread.join()
                raise item
            yield item
            if kind == "report":
                thread.join()
                return
    except BaseException as left:  # the op left while its engine runs (the run's stop, raised here): stopped and
        if thread.is_alive():  # awaited before the op's blocks end (its dbt worker's, whose command it would cut)
            ask_stop(thread)
            thread.join(STOP_WAIT_S)
        if not isinstance(left, GeneratorExit):  # what it said meanwhile, said too: a step that ended as the stop
            while not told.empty():  # came (a publish past the point of no return, its materialization)
                kind, item = told.get_nowait()
                if kind in ("line", "step"):
                    yield item
        raise


def _each_handled(engine: Generator[Told, None, None], handle: Callable[[Told], Iterator[Result]]) -> Iterator[Result]:
    """``handle(item)`` of each item of ``engine`` (:func:`_run_in_thread`), yielding what it yields. A stop raised in
    ``handle`` (the op's own code, where Dagster's handler raises it as often as in the op's wait on its engine) is
    thrown into ``engine``, which stops and awaits its thread and hands back what it said meanwhile (a step that ended
    as the stop came: a publish past its point of no return, its materialization), handled too; then the stop goes
    on. An error of the op's is raised as it is (the engine stopped as it closes), as is Dagster's closing of the op."""
    for item in engine:
        try:
            yield from handle(item)
        except (Exception, GeneratorExit):
            raise
        except BaseException as stop:
            try:
                left = engine.throw(stop)
                while True:
                    yield from handle(left)
                    left = next(engine)
            except StopIteration:  # (the engine raises the stop once it handed back what it had: never reached)
                raise stop from None


def log_alerted(log: dg.DagsterLogManager, alerted: Alerted | None) -> None:
    """What a run did with its problems, in its Dagster log; its sends waited for (as the command waits for them) and
    those not delivered said."""
    if alerted is None:
        return
    log.info(alerted.line)
    if undelivered := alerted.undelivered():
        log.warning(undelivered)


_engine_threads: weakref.WeakSet[threading.Thread] = weakref.WeakSet()
"""The threads :func:`_run_in_thread` started for the engine."""

STOP_WAIT_S = 300.0
"""How long :func:`stopped_engine_threads` waits for the engine's threads to end, in all."""


def stopped_engine_threads(wait_s: float = STOP_WAIT_S) -> None:
    """The engine's threads still running, stopped as a stop signal stops a run in the main thread (its streams
    logged as stopped, what they committed kept; no build or publish after it) and awaited, ``wait_s`` seconds at
    most in all. A stop of a Dagster run (SIGTERM, Ctrl-C, its termination) is raised in the main thread, in
    Dagster's code as often as in the op's, whose wait on its thread it then leaves for good: the thread went on
    while the process ended, in the middle of a stream (logged as killed), or in a DuckDB call (a process ending
    with SIGABRT). Called as a run executed in this process ends (``commands.execute``), and as the process exits."""
    for thread in list(_engine_threads):
        if thread.is_alive():
            ask_stop(thread)
    deadline = time.monotonic() + wait_s
    for thread in list(_engine_threads):
        thread.join(max(0.0, deadline - time.monotonic()))


atexit.register(stopped_engine_threads)


def build_freight_job() -> dg.AssetsDefinition:
    """The job's one multi-asset."""
    table_specs = [spec for stream in STREAM_NAMES for spec in stream_specs(stream)]
    upstream = [*table_specs, *DBT.specs]
    specs = [spec.replace_attributes(skippable=True) for spec in [*upstream, publish_spec(upstream)]]
    stream_checks = [dg.AssetCheckSpec(STREAM_CHECK, asset=stream_check_key(stream).asset_key,
                                       description=f"The {stream} stream synced in the run (red: it failed or did "
                                       "not run; its tables hold its last successful sync and the batches a "
                                       "failed run committed).")
                     for stream in STREAM_NAMES]
    check_specs = [*stream_checks, *map(check_spec, warehouse_checks())]
    keys_of_stream = {stream: set(stream_keys(stream)) for stream in STREAM_NAMES}
    dbt_keys = set(DBT.keys.values())

    @dg.multi_asset(
        name=FREIGHT_JOB,
        specs=specs,
        check_specs=check_specs,
        can_subset=True,
        description="The freight job (job.run): the selected streams, the warehouse checks, the dbt build "
        "and the publish, in one step.",
    )
    def freight_job(
        context: dg.AssetExecutionContext, freight_service: FreightServiceResource, warehouse: WarehouseResource
    ) -> Iterator[dg.MaterializeResult | dg.AssetCheckResult]:
        selected = context.selected_asset_keys
        checks = context.selected_asset_check_keys
        streams = [stream for stream in STREAM_NAMES if keys_of_stream[stream] & selected]
        publish = PUBLISH_KEY in selected
        # a publish ships marts that cover the tables it ships: the build runs when changes wait for it (a selection
        # of tables and the publish published tables ahead of their marts); its models' results are yielded only
        # when selected
        marts = bool(dbt_keys & selected) or publish
        try:
            configured = run_settings(freight_service, warehouse)
        except BadSettings as bad:  # each bad setting named (a secret's value never): no traceback to read
            raise dg.Failure(description=f"bad settings: {bad}", allow_retries=False) from None
        for line in configured.unknown_variable_lines():
            context.log.warning(line)
        service, data_dir = configured.service, configured.storage.data_dir.resolve()
        if streams and not service.secret:
            raise dg.Failure(f"{PASSWORD_ENV} is not set: the freight service's password (the resource's "
                             "`password`, the variable or the settings file)")
        if not (streams or marts or publish) and checks <= {stream_check_key(stream) for stream in STREAM_NAMES}:
            # the streams' checks alone read the run log: no writer lock to wait for, no engine to run
            yield from unrun_stream_checks(checks, streams, data_dir)
            return
        backend = storage_of(configured)
        context.log.info(f"{', '.join(streams) or 'no stream'}{', the build' if marts else ''}"
                         f"{', the publish' if publish else ''}: {service.base_url} as {service.username} into "
                         f"{backend.describe(data_dir)}")
        with ExitStack() as claimed:
            try:  # the engine takes it again for this run at once; told to Dagster once held (a tick reads it)
                claimed.enter_context(writer_claim(context.instance, context.run_id, data_dir))
            except WarehouseBusy as busy:  # a run outside Dagster writes the warehouse (a headless sync from cron)
                yield from unrun_stream_checks(checks, streams, data_dir)
                raise dg.Failure(description=f"skipped: {busy}", allow_retries=False) from None
            with DbtWorker.for_run(data_dir, backend.dbt_target, configured.marts, builds=marts,
                                   target_env=backend.dbt_environment()) as worker:
                settings = SyncSettings.of(configured.sync)

                def run(progress: Callable[[str], None], on_step: Callable[[Step], None]) -> JobReport:
                    return run_job(service, data_dir, settings, backend, worker, run_id=context.run_id,
                                   progress=progress, on_step=on_step, streams=streams, marts=marts, publish=publish,
                                   count_rows=True, alerting=Alerting.of(configured, dagster_run=True))

                progress = Throttled(context.log.debug, PROGRESS_EVERY_S)
                tallied = TallyLines(context.log.debug, PROGRESS_EVERY_S)  # each stream's done of its total, rate, left
                report: JobReport | None = None
                not_synced: set[str] = set()
                before = table_states(context.instance, [key for stream in streams for key in stream_keys(stream)])

                def handled(told: str | Step | Tally | JobReport) -> Iterator[
                        dg.MaterializeResult | dg.AssetCheckResult]:
                    nonlocal report
                    if isinstance(told, str):
                        progress(told)
                    elif isinstance(told, Tally):
                        tallied(told)
                    elif isinstance(told, Step):
                        for line in told.lines():
                            (context.log.error if told.status == "failed" else context.log.info)(line)
                        if told.name in STREAM_OF_STEP and told.status != "success" and not told.off:
                            not_synced.add(STREAM_OF_STEP[told.name])
                        for result in step_results(told, not_synced, context.run_id, before):
                            if isinstance(result, dg.AssetCheckResult):
                                key = result.asset_key and dg.AssetCheckKey(result.asset_key, result.check_name or "")
                                if key in checks:
                                    yield result
                            elif result.asset_key in selected:
                                yield result
                    else:
                        report = told

                yield from _each_handled(_run_in_thread(run), handled)
        assert report is not None
        yield from unrun_stream_checks(checks, streams, data_dir)
        log_alerted(context.log, report.alerted)
        if report.skipped:  # a run outside Dagster writes the warehouse (a headless sync from cron)
            raise dg.Failure(description=f"skipped: {report.skipped}", allow_retries=False)
        if report.failed:
            first = report.failed[0]
            raise dg.Failure(  # the engine's reason, not a traceback: what failed is said above
                description=first.line,
                metadata={FAILED_STEP: first.name, FAILED_STEPS: [step.name for step in report.failed],
                          "published": report.publication is not None},
                allow_retries=False,
            )

    return freight_job


freight_job = build_freight_job()
