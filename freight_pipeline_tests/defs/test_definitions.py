"""The Dagster definitions load, and show the assets, lineage, checks, jobs and schedules the issues ask for."""

import datetime as dt
import importlib
import json
import logging
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb
import pytest
from dagster._core.definitions.assets.job.asset_job import IMPLICIT_ASSET_JOB_NAME

from freight_pipeline.checks.warehouse import warehouse_checks
from freight_pipeline.config import (
    DBT_DATABASE_ENV,
    HISTORY_ENV,
    RECONCILE_ENV,
    SCHEDULES_RUNNING_ENV,
    ServiceSettings,
    environ,
)
from freight_pipeline.definitions import defs
from freight_pipeline.defs import checks, dbt, jobs, writer_claim
from freight_pipeline.defs.freight_job import FREIGHT_JOB, STREAM_CHECK
from freight_pipeline.defs.names import ASSET_GRAPH_JOB
from freight_pipeline.defs.resources import FreightServiceResource, WarehouseResource
from freight_pipeline.defs.sync_assets import stream_keys
from freight_pipeline.defs.writer_claim import PARTITION_TAG, WRITER_TAG
from freight_pipeline.normalize.tables import FREIGHT_TABLES, TABLES_BY_NAME
from freight_pipeline.sync.settings import SyncSettings
from freight_pipeline.sync.streams import RECORD_SOURCES, STREAM_NAMES, STREAMS
from freight_pipeline.warehouse import meta
from freight_pipeline.warehouse.history import HISTORY_TABLES
from freight_pipeline.warehouse.writer_lock import Holder, lock_path, lock_state, writer_lock
from freight_pipeline_tests.dbt.marts import marts

FREIGHT_KEYS = {dg.AssetKey(["freight", t.name]) for t in FREIGHT_TABLES}
PUBLISH_KEY = dg.AssetKey(["freight", "published_warehouse"])
SHIPMENTS_KEY = dg.AssetKey(["freight", "shipments"])
MARTS = marts()
CORE_PACKAGES = ("client", "simulator", "sync", "normalize", "warehouse", "checks", "marts", "job")


@pytest.fixture(scope="module")
def repo() -> dg.RepositoryDefinition:
    dg.Definitions.validate_loadable(defs)
    return defs.get_repository_def()


def test_every_freight_table_is_an_asset_in_the_freight_group(repo: dg.RepositoryDefinition) -> None:
    graph = repo.asset_graph
    keys = set(graph.get_all_asset_keys())
    assert keys >= FREIGHT_KEYS
    for key in FREIGHT_KEYS:
        node = graph.get(key)
        assert node.group_name == "freight"
        assert node.description
    # one pass per shipment: the shipments stream writes its tables and those of its events, legs and
    # memos, each table an asset of its own; every asset of the job is of its one op
    expected = [t for part in ("shipments", "shipment_events", "air_main_carriage_legs", "sea_main_carriage_legs",
                               "shipment_memos") for t in RECORD_SOURCES[part]]
    history = {dg.AssetKey(["freight_history", spec.name]) for spec in HISTORY_TABLES}
    assert set(stream_keys("shipments")) == {dg.AssetKey(["freight", t]) for t in expected} | history
    shipments = repo.assets_defs_by_key[dg.AssetKey(["freight", "shipments"])]
    assert shipments.op.name == FREIGHT_JOB and shipments.can_subset
    assert set(shipments.keys) == set(graph.get_all_asset_keys())
    for key in history:  # written with the shipments' batches, upstream of the ETA marts' staging
        node = graph.get(key)
        assert node.group_name == "freight" and "written by the shipments stream" in (node.description or "")
        assert key in graph.get(dg.AssetKey(["staging", f"stg_{key.path[1]}"])).parent_keys
    assert repo.assets_defs_by_key[dg.AssetKey(["freight", "shipment_events"])] is shipments
    assert graph.get(dg.AssetKey(["freight", "code_conversions"])).parent_keys == set()
    # the documents stream lists the E-Files of the shipments written first: its tables wait for them
    assert graph.get(dg.AssetKey(["freight", "shipment_documents"])).parent_keys == {SHIPMENTS_KEY}
    events = graph.get(dg.AssetKey(["freight", "shipment_events"])).description
    assert "written by the shipments stream (from GET /service/shipment/{id}/events of each changed" in events
    air = graph.get(dg.AssetKey(["freight", "air_main_carriage_legs"])).description
    assert "of each changed AIR shipment" in air


def test_dbt_models_are_assets_downstream_of_the_freight_tables(repo: dg.RepositoryDefinition) -> None:
    graph = repo.asset_graph
    keys = set(graph.get_all_asset_keys())
    for table in FREIGHT_TABLES:
        staging = dg.AssetKey(["staging", f"stg_{table.name}"])
        assert staging in keys
        assert dg.AssetKey(["freight", table.name]) in graph.get(staging).parent_keys
        assert graph.get(staging).group_name == "dbt_staging"
    for mart in MARTS:
        assert graph.get(dg.AssetKey(["analytics", mart])).group_name == "dbt_analytics"
    # no dangling source assets: every upstream of a dbt model is a real asset
    assert not [k for k in keys if not graph.get(k).is_materializable]


def test_publish_depends_on_every_sync_and_dbt_asset(repo: dg.RepositoryDefinition) -> None:
    graph = repo.asset_graph
    others = set(graph.get_all_asset_keys()) - {PUBLISH_KEY}
    assert graph.get(PUBLISH_KEY).parent_keys == others
    assert graph.get(PUBLISH_KEY).group_name == "publish"


def test_checks_cover_keys_orphans_freshness_and_rejects(repo: dg.RepositoryDefinition) -> None:
    check_keys = set(repo.asset_graph.asset_check_keys)
    names = {(k.asset_key, k.name) for k in check_keys}
    for key in FREIGHT_KEYS:
        assert (key, "primary_key_unique") in names
    children = [t for t in FREIGHT_TABLES if "shipment_id" in t.column_index and t.name != "shipments"]
    assert children and all((dg.AssetKey(["freight", t.name]), "no_orphan_rows") in names for t in children)
    assert (dg.AssetKey(["freight", "shipments"]), "freshness_check") in names
    for tables in RECORD_SOURCES.values():
        assert (dg.AssetKey(["freight", tables[0]]), "no_rejected_records") in names
    for stream in STREAMS:  # red when the stream failed in a run
        assert (dg.AssetKey(["freight", stream.tables[0]]), STREAM_CHECK) in names
    # dbt's tests run in its build (a failure fails it, named; a warning is logged) but are no asset
    # checks: two stored events each per run (planned, evaluated) cost more than they showed
    dbt_checks = [k for k in check_keys if k.asset_key.path[0] in ("staging", "intermediate", "analytics")]
    assert dbt_checks == []


def test_jobs_select_what_they_should() -> None:
    sync_job = defs.resolve_job_def("freight_sync_job")
    selected = set(sync_job.asset_layer.executable_asset_keys)
    assert selected == set(defs.get_repository_def().asset_graph.get_all_asset_keys())
    code_job = defs.resolve_job_def("code_conversions_job")
    # code conversions, then the WHOLE dbt build (a publish ships marts of one complete build), publish
    other_streams = {key for stream in STREAM_NAMES if stream != "code_conversions" for key in stream_keys(stream)}
    code_keys = set(code_job.asset_layer.executable_asset_keys)
    assert code_keys == selected - other_streams
    assert {dg.AssetKey(["analytics", "fct_shipments"]), dg.AssetKey(["analytics", "dim_code_conversions"]),
            dg.AssetKey(["freight", "code_conversions"]), PUBLISH_KEY} <= code_keys
    assert not code_keys & other_streams
    # the freshness check runs in every sync run (README "Asset checks"), besides its sensor
    freshness = dg.AssetCheckKey(SHIPMENTS_KEY, "freshness_check")
    assert freshness in sync_job.asset_layer.asset_graph.asset_check_keys
    assert freshness not in code_job.asset_layer.asset_graph.asset_check_keys
    for job in (sync_job, code_job):
        assert job.executor_def.name == dg.in_process_executor.name
        assert job.tags == WRITER_TAG


def test_schedules(monkeypatch: pytest.MonkeyPatch) -> None:
    repo = defs.get_repository_def()
    by_name = {s.name: s for s in repo.schedule_defs}
    assert by_name["freight_sync_every_15_minutes"].cron_schedule == "*/15 * * * *"
    assert by_name["freight_sync_every_15_minutes"].job_name == "freight_sync_job"
    assert by_name["code_conversions_daily"].cron_schedule == "0 3 * * *"
    assert by_name["code_conversions_daily"].job_name == "code_conversions_job"
    monkeypatch.delenv(SCHEDULES_RUNNING_ENV, raising=False)
    assert jobs.default_schedule_status() == dg.DefaultScheduleStatus.STOPPED
    monkeypatch.setenv(SCHEDULES_RUNNING_ENV, "1")
    assert jobs.default_schedule_status() == dg.DefaultScheduleStatus.RUNNING
    assert jobs.build_schedule("s", "* * * * *", "j", "d").default_status == dg.DefaultScheduleStatus.RUNNING


def test_schedule_skips_while_a_writer_runs(tmp_path: Path) -> None:
    schedule = jobs.build_schedule("s", "* * * * *", "freight_sync_job", "d")
    resources = {"warehouse": WarehouseResource(data_dir=str(tmp_path))}
    with dg.instance_for_test() as instance:
        with dg.build_schedule_context(instance=instance, resources=resources) as context:
            assert isinstance(schedule(context), dg.RunRequest)
        instance.add_run(
            dg.DagsterRun(job_name="freight_sync_job", status=dg.DagsterRunStatus.STARTED, tags=WRITER_TAG)
        )
        with dg.build_schedule_context(instance=instance, resources=resources) as context:
            assert isinstance(schedule(context), dg.SkipReason)


HOLD_THE_LOCK = """
import sys, time
from pathlib import Path
from freight_pipeline.warehouse.writer_lock import writer_lock
with writer_lock(Path(sys.argv[1]), sys.argv[2]):
    print("held", flush=True)
    time.sleep(600)
"""


@contextmanager
def lock_held(data_dir: Path, run_id: str) -> Iterator[subprocess.Popen[str]]:
    """A process of its own holding ``data_dir``'s writer lock as ``run_id`` (as a run does), SIGKILLed at the
    block's end (as a killed run is: the kernel lets go of its lock, its file still names it)."""
    with subprocess.Popen([sys.executable, "-c", HOLD_THE_LOCK, str(data_dir), run_id], stdout=subprocess.PIPE,
                          text=True) as holder:
        try:
            assert holder.stdout is not None and holder.stdout.readline() == "held\n"
            yield holder
        finally:
            holder.kill()


@pytest.mark.parametrize("job", ["freight_sync_job", ASSET_GRAPH_JOB])
def test_a_run_whose_process_died_writing_is_failed_by_the_next_tick_which_runs(tmp_path: Path, job: str) -> None:
    """A run killed while it wrote (SIGKILL, out of memory) stays STARTED in Dagster: the next tick finds its
    writer lock released with its file still naming it, marks it failed and runs; a live one keeps the tick
    skipping. A run of the asset graph's Materialize (untagged) too (was: never seen, holding the one run slot)."""
    schedule = jobs.build_schedule("s", "* * * * *", "freight_sync_job", "d")
    resources = {"warehouse": WarehouseResource(data_dir=str(tmp_path))}
    with dg.instance_for_test() as instance:
        run = instance.add_run(dg.DagsterRun(job_name=job, status=dg.DagsterRunStatus.STARTED,
                                             tags=WRITER_TAG if job != ASSET_GRAPH_JOB else {}))
        with lock_held(tmp_path, run.run_id) as holder, \
                dg.build_schedule_context(instance=instance, resources=resources) as context:
            assert isinstance(schedule(context), dg.SkipReason)  # alive: it writes
        with dg.build_schedule_context(instance=instance, resources=resources) as context:
            assert isinstance(schedule(context), dg.RunRequest)
        failed = instance.get_run_by_id(run.run_id)
        assert failed is not None and failed.status == dg.DagsterRunStatus.FAILURE
        said = [e.message for e in instance.all_logs(run.run_id) if e.is_dagster_event]
        assert any(f"its process died while it wrote the warehouse (run {run.run_id}, process {holder.pid}" in m
                   for m in said), said


def test_the_asset_graph_s_job_is_dagster_s() -> None:
    assert ASSET_GRAPH_JOB == IMPLICIT_ASSET_JOB_NAME


@contextmanager
def ticking(data_dir: Path, schedule: dg.ScheduleDefinition | None = None,
            overrides: dict[str, Any] | None = None) -> Iterator[tuple[dg.DagsterInstance, Callable[[], Any]]]:
    """A test instance (``overrides``: its settings) and a tick of ``schedule`` (default: one of the sync job) on the
    warehouse of ``data_dir``: a ``RunRequest`` or a ``SkipReason``."""
    schedule = schedule or jobs.build_schedule("s", "* * * * *", "freight_sync_job", "d")
    resources = {"warehouse": WarehouseResource(data_dir=str(data_dir))}
    with dg.instance_for_test(overrides=overrides) as instance:
        def tick() -> Any:
            with dg.build_schedule_context(instance=instance, resources=resources) as context:
                return schedule(context)

        yield instance, tick


@pytest.mark.parametrize("taker", ["let go", "a brief look", "killed"])
def test_a_dead_run_is_failed_by_the_tick_after_another_run_took_the_lock_well_after_it_began_and_let_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, taker: str
) -> None:
    """A run killed while it wrote, then a headless sync (cron) took the writer lock and let go: the lock's file names
    the headless run, and the dead one, which Dagster held running, made every later tick skip. A tick fails it once
    the lock was taken :data:`writer_claim.TAKEN_OVER_AFTER` after the run began, and runs; a run made since the lock
    was taken or started since (it may not have reached the lock yet: a queued run is timed from its start) and a
    lake's backfill partition's (it holds a lock of its own) are left running."""
    with ticking(tmp_path) as (instance, tick):
        started = dg.DagsterRun(job_name="freight_sync_job", status=dg.DagsterRunStatus.STARTED, tags=WRITER_TAG)
        dead = instance.add_run(started)
        partition = instance.add_run(dg.DagsterRun(  # a lake's backfill partition, alive: it holds a lock of its own
            job_name="freight_backfill_job", status=dg.DagsterRunStatus.STARTED,
            tags={**WRITER_TAG, PARTITION_TAG: "ids-1-100"}))
        queued = instance.add_run(dg.DagsterRun(job_name="freight_sync_job", status=dg.DagsterRunStatus.NOT_STARTED,
                                                tags=WRITER_TAG))  # made now, started after the lock's taking
        with lock_held(tmp_path, dead.run_id):
            pass  # it wrote, and was killed
        time.sleep(1.1)  # the lock's file says when to the second
        if taker == "killed":
            with lock_held(tmp_path, "cli-cron-run") as headless:
                pass  # a headless sync took the lock and was killed: the file names it
            pid = headless.pid
        else:  # a headless sync, or a look at the freshness (``status --alert``), that let go: the file says it held it
            with writer_lock(tmp_path, "cli-cron-run", brief=taker == "a brief look"):
                pid = os.getpid()
            assert lock_state(tmp_path) == (False, Holder())  # no holder named
        assert isinstance(tick(), dg.SkipReason)  # taken within the margin: the run may be alive, not there yet
        assert (instance.get_run_by_id(dead.run_id) or started).status == dg.DagsterRunStatus.STARTED

        monkeypatch.setattr(writer_claim, "TAKEN_OVER_AFTER", dt.timedelta(0))  # the lock taken well after the run
        instance.report_dagster_event(dg.DagsterEvent(dg.DagsterEventType.RUN_START.value, job_name="freight_sync_job"),
                                      queued.run_id)  # dequeued and started only now: timed from its start
        young = instance.add_run(dg.DagsterRun(job_name="freight_sync_job", status=dg.DagsterRunStatus.STARTED,
                                               tags=WRITER_TAG))
        skipped = tick()
        assert isinstance(skipped, dg.SkipReason) and skipped.skip_message is not None
        assert young.run_id in skipped.skip_message and dead.run_id not in skipped.skip_message
        assert partition.run_id in skipped.skip_message  # its own lock: what others took says nothing of it
        assert queued.run_id in skipped.skip_message  # started after the lock was taken: not there yet
        failed = instance.get_run_by_id(dead.run_id)
        assert failed is not None and failed.status == dg.DagsterRunStatus.FAILURE
        said = [e.message for e in instance.all_logs(dead.run_id) if e.is_dagster_event]
        assert any(m.startswith("its process is gone: another run took the warehouse's writer lock since, and let go "
                                f"(run cli-cron-run, process {pid}") for m in said), said
        assert (instance.get_run_by_id(partition.run_id) or started).status == dg.DagsterRunStatus.STARTED
        for ended in (young, partition, queued):
            instance.report_run_failed(ended)
        assert isinstance(tick(), dg.RunRequest)


def test_schedule_skips_while_a_run_outside_dagster_writes(tmp_path: Path) -> None:
    """A headless sync (cron) holds the writer lock: the tick skips, naming it, rather than start a run that
    would fail skipped; once it let go, the tick runs."""
    schedule = jobs.build_schedule("s", "* * * * *", "freight_sync_job", "d")
    resources = {"warehouse": WarehouseResource(data_dir=str(tmp_path))}
    with dg.instance_for_test() as instance:
        with lock_held(tmp_path, "cli-cron-run") as holder, \
                dg.build_schedule_context(instance=instance, resources=resources) as context:
            skipped = schedule(context)
        assert isinstance(skipped, dg.SkipReason)
        assert f"another run writes {tmp_path}: run cli-cron-run, process {holder.pid}" in (skipped.skip_message or "")
        with dg.build_schedule_context(instance=instance, resources=resources) as context:
            assert isinstance(schedule(context), dg.RunRequest)


def test_resources_resolve_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("FREIGHT_BASE_URL", "FREIGHT_USERNAME"):
        monkeypatch.delenv(name, raising=False)
    resource = FreightServiceResource(password="pw-not-shown")
    service = resource.service_settings()
    defaults = ServiceSettings()
    assert (service.base_url, service.username, service.secret) == (defaults.base_url, defaults.username,
                                                                     "pw-not-shown")
    assert "pw-not-shown" not in repr(resource) and "pw-not-shown" not in repr(service)
    monkeypatch.setenv("FREIGHT_BASE_URL", "http://example:1")
    monkeypatch.setenv("FREIGHT_USERNAME", "someone")
    assert resource.service_settings().base_url == "http://example:1"
    assert resource.service_settings().username == "someone"
    settings = FreightServiceResource(password="x", concurrency=3, page_size=40, overlap_minutes=2).sync_settings()
    assert (settings.concurrency, settings.page_size, settings.overlap) == (3, 40, dt.timedelta(minutes=2))

    monkeypatch.setenv("FREIGHT_DATA_DIR", str(tmp_path))
    assert WarehouseResource().path == tmp_path.resolve()
    assert WarehouseResource(data_dir=str(tmp_path / "x")).working_db == tmp_path / "x" / "work" / "warehouse.duckdb"


def test_no_setting_is_fixed_in_the_definitions() -> None:
    """The definitions' resources set nothing: each setting (the password included) comes from the environment,
    the settings file or its default when a run starts, never from the code."""
    for resource in (defs.resources or {}).values():
        assert resource.overrides() == {}


def test_manifest_is_reparsed_only_when_missing_or_stale(tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    (tmp_path / "dbt_project.yml").write_text("name: p\nprofile: p\n")
    (tmp_path / "profiles.yml").write_text("p: {}\n")
    model = tmp_path / "models" / "m.sql"
    model.write_text("select 1")
    manifest = dbt.manifest_path(tmp_path)
    assert not dbt.manifest_is_current(tmp_path)
    manifest.parent.mkdir()
    manifest.write_text("{}")
    assert dbt.manifest_is_current(tmp_path)
    later = manifest.stat().st_mtime + 10
    os.utime(model, (later, later))
    assert not dbt.manifest_is_current(tmp_path)
    assert dbt.manifest_is_current()  # loading the definitions made it


def test_environment_is_restored(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DBT_DATABASE_ENV, raising=False)
    monkeypatch.setenv("FREIGHT_TEST_KEPT", "before")
    with environ({DBT_DATABASE_ENV: "/x/warehouse.duckdb", "FREIGHT_TEST_KEPT": "during"}):
        assert os.environ[DBT_DATABASE_ENV] == "/x/warehouse.duckdb"
        assert os.environ["FREIGHT_TEST_KEPT"] == "during"
    assert DBT_DATABASE_ENV not in os.environ
    assert os.environ["FREIGHT_TEST_KEPT"] == "before"


def _check_results(con: duckdb.DuckDBPyConnection) -> dict[tuple[str, str], dg.AssetCheckResult]:
    tables = [TABLES_BY_NAME["shipments"], TABLES_BY_NAME["shipment_goods"], TABLES_BY_NAME["shipment_memos"]]
    results = {}
    for check in warehouse_checks(tables):
        result = checks.check_result(check, check.evaluate(con))
        results[(check.table, result.check_name)] = result
    return results


def test_checks_find_what_is_wrong() -> None:
    con = duckdb.connect()
    con.execute("""
        CREATE SCHEMA freight; CREATE SCHEMA freight_meta;
        CREATE TABLE freight.shipments (shipment_id BIGINT);
        CREATE TABLE freight.shipment_goods (shipment_id BIGINT, good_path VARCHAR);
        CREATE TABLE freight.shipment_memos (memo_id BIGINT, shipment_id BIGINT);
        CREATE TABLE freight_meta.sync_runs (run_id VARCHAR, stream VARCHAR, started_at TIMESTAMPTZ,
            finished_at TIMESTAMPTZ, status VARCHAR, details JSON);
        CREATE TABLE freight_meta.rejected_records (stream VARCHAR, source_key VARCHAR, run_id VARCHAR, reason VARCHAR);
        INSERT INTO freight.shipments VALUES (1), (2);
        INSERT INTO freight.shipment_goods VALUES (1, '1'), (1, '1'), (3, '1');
        INSERT INTO freight.shipment_memos VALUES (10, 1), (11, NULL), (12, 4);
        INSERT INTO freight_meta.sync_runs VALUES
            ('r1', 'shipments', now() - INTERVAL 3 HOUR, now() - INTERVAL 3 HOUR, 'success', NULL),
            ('r2', 'shipments', now() - INTERVAL 1 HOUR, now() - INTERVAL 1 HOUR, 'failed', NULL);
        INSERT INTO freight_meta.rejected_records VALUES ('shipments', '7', 'r2', 'bad date'),
            ('shipments', '8', 'r1', 'older run');
    """)
    con.execute(meta.QUARANTINE.ddl())
    con.execute(meta.DATA_PROBLEMS.ddl())
    con.execute(meta.SOURCE_FIELDS.ddl())
    con.execute(meta.COLUMN_NULLS.ddl())
    con.execute("""
        INSERT INTO freight_meta.column_nulls (table_name, column_name, stream, state, rows_latest, nulls_latest,
            changed_run_id)
        VALUES ('shipment_goods', 'weight', 'shipments', 'jumped', 40, 40, 'r2'),
            ('shipments', 'client', 'shipments', 'usual', 40, 0, 'r1');""")
    con.execute("""
        INSERT INTO freight_meta.source_fields (stream, field, declared, state, records_read, records_with,
            changed_run_id, example_record_key)
        VALUES ('shipments', 'house_reference', true, 'vanished', 40, 0, 'r2', '10007'),
            ('shipments', 'house_bill_number', false, 'new', 40, 40, 'r2', '10007'),
            ('shipments', 'client', true, 'received', 40, 40, 'r1', '10001');""")
    con.execute("""
        INSERT INTO freight_meta.quarantine (stream, record_key, shipment_id, reason, request, attempts,
            first_failed_at, next_attempt_at)
        VALUES ('shipment_events', '7', 7, 'ProtocolError: not JSON', 'GET /service/shipment/7/events', 2,
            TIMESTAMPTZ '2026-11-01 08:00:00+00', TIMESTAMPTZ '2026-11-01 09:00:00+00');
        INSERT INTO freight_meta.data_problems (stream, record_key, json_path, shipment_id, raw_value, reason,
            detected_at)
        VALUES ('shipments', '1', 'total_packages', 1, '"12a"', 'not an integer', now());
    """)
    results = _check_results(con)
    quarantined = results[("shipment_events", "no_quarantined_records")]
    assert not quarantined.passed and quarantined.severity == dg.AssetCheckSeverity.WARN
    assert quarantined.metadata["quarantined_records"].value == 1
    (example,) = quarantined.metadata["examples"].value
    assert (example["record_key"], example["request"], example["attempts"]) == (
        "7", "GET /service/shipment/7/events", 2
    )
    assert results[("shipments", "no_quarantined_records")].passed
    problems = results[("shipments", "no_data_problems")]
    assert not problems.passed and problems.severity == dg.AssetCheckSeverity.WARN
    assert problems.metadata["data_problems"].value == 1
    assert problems.metadata["examples"].value[0]["json_path"] == "total_packages"
    assert results[("shipment_events", "no_data_problems")].passed
    shape = results[("shipments", "no_shape_changes")]  # a warning: the run publishes
    assert not shape.passed and shape.severity == dg.AssetCheckSeverity.WARN
    assert (shape.metadata["new_fields"].value, shape.metadata["vanished_fields"].value) == (1, 1)
    assert [(f["field"], f["state"], f["records_read"]) for f in shape.metadata["fields"].value] == [
        ("house_reference", "vanished", 40), ("house_bill_number", "new", 40)]
    assert results[("shipment_events", "no_shape_changes")].passed
    nulls = results[("shipments", "no_null_share_jumps")]
    assert not nulls.passed and nulls.severity == dg.AssetCheckSeverity.WARN
    assert nulls.metadata["columns"].value == [
        {"column": "shipment_goods.weight", "nulls": 40, "rows": 40, "since_run": "r2"}]
    assert results[("shipment_events", "no_null_share_jumps")].passed
    assert results[("shipments", "primary_key_unique")].passed
    goods_keys = results[("shipment_goods", "primary_key_unique")]
    assert not goods_keys.passed and goods_keys.metadata["duplicate_keys"].value == 1
    goods_orphans = results[("shipment_goods", "no_orphan_rows")]
    assert not goods_orphans.passed and goods_orphans.severity == dg.AssetCheckSeverity.ERROR
    memo_orphans = results[("shipment_memos", "no_orphan_rows")]  # the null shipment_id is not an orphan
    assert memo_orphans.metadata["orphan_rows"].value == 1 and memo_orphans.severity == dg.AssetCheckSeverity.WARN
    rejects = results[("shipments", "no_rejected_records")]  # of the latest run only
    assert not rejects.passed and rejects.metadata["rejected_records"].value == 1
    assert rejects.severity == dg.AssetCheckSeverity.WARN
    assert results[("shipment_memos", "no_rejected_records")].passed  # no run of that stream yet


def test_core_packages_do_not_import_dagster() -> None:
    root = Path(__file__).resolve().parents[2] / "freight_pipeline"
    pattern = re.compile(r"^\s*(import|from)\s+dagster", re.MULTILINE)
    offenders = [
        str(path.relative_to(root))
        for package in CORE_PACKAGES
        for path in (root / package).rglob("*.py")
        if pattern.search(path.read_text())
    ]
    assert offenders == []


def _freshness_evaluation(instance: dg.DagsterInstance) -> dg.AssetCheckEvaluation:
    """Evaluate the shipments freshness check of a fresh Definitions (what the sensor runs) on ``instance``."""
    fresh_checks, sensor = checks.build_sync_freshness(dt.timedelta(minutes=30), dg.DefaultSensorStatus.STOPPED)
    assert sensor.name == checks.FRESHNESS_SENSOR
    job = dg.define_asset_job("freshness", selection=dg.AssetSelection.checks(*fresh_checks))
    local = dg.Definitions(assets=[dg.AssetSpec(SHIPMENTS_KEY)], asset_checks=fresh_checks, jobs=[job])
    result = local.resolve_job_def("freshness").execute_in_process(instance=instance)
    (evaluation,) = result.get_asset_check_evaluations()
    return evaluation


def test_freshness_check_warns_until_the_shipments_stream_has_materialized_recently() -> None:
    with dg.DagsterInstance.ephemeral() as instance:
        never = _freshness_evaluation(instance)
        assert (never.asset_key, never.check_name, never.passed) == (SHIPMENTS_KEY, "freshness_check", False)
        assert never.severity == dg.AssetCheckSeverity.WARN
        instance.report_runless_asset_event(dg.AssetMaterialization(SHIPMENTS_KEY))
        assert _freshness_evaluation(instance).passed


def test_freshness_sensor_follows_the_automation_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sensor in the Definitions the workspace loads (``freight_pipeline.definitions`` built
    again under each setting) starts running only with ``FREIGHT_SCHEDULES_RUNNING=1``."""
    import freight_pipeline.definitions as module

    statuses: dict[str | None, dg.DefaultSensorStatus] = {}
    try:
        for value in (None, "0", "1"):
            if value is None:
                monkeypatch.delenv(SCHEDULES_RUNNING_ENV, raising=False)
            else:
                monkeypatch.setenv(SCHEDULES_RUNNING_ENV, value)
            sensor = importlib.reload(module).defs.get_repository_def().get_sensor_def(checks.FRESHNESS_SENSOR)
            statuses[value] = sensor.default_status
            assert sensor.minimum_interval_seconds == checks.FRESHNESS_SENSOR_INTERVAL_SECONDS
    finally:  # leave the module as this session's environment builds it
        monkeypatch.undo()
        importlib.reload(module)
    stopped, running = dg.DefaultSensorStatus.STOPPED, dg.DefaultSensorStatus.RUNNING
    assert statuses == {None: stopped, "0": stopped, "1": running}


@pytest.mark.parametrize(("where", "said"), [
    ("variable", "FREIGHT_PAGE_SIZE='900'"), ("file", "[sync] pagesize is not a setting of [sync]")])
def test_a_bad_value_of_a_concern_the_definitions_do_not_read_loads_them_and_the_run_refuses_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, where: str, said: str
) -> None:
    """``FREIGHT_PAGE_SIZE=900``, or a misspelt key in the settings file's ``[sync]``: the code location loaded (was:
    ``BadSettings`` at load, no job, schedule or sensor, so nothing in Dagster said that syncs had stopped); the
    alerts sensor looks; a run refuses it, naming it."""
    import freight_pipeline.definitions as module

    try:
        if where == "variable":
            monkeypatch.setenv("FREIGHT_PAGE_SIZE", "900")
        else:
            (tmp_path / "freight.toml").write_text("[sync]\npagesize = 900\n")
            monkeypatch.setenv("FREIGHT_SETTINGS_FILE", str(tmp_path / "freight.toml"))
        monkeypatch.setenv("FREIGHT_DATA_DIR", str(tmp_path))
        loaded = importlib.reload(module).defs
        assert {s.name for s in loaded.get_repository_def().schedule_defs} >= {"freight_sync_every_15_minutes"}
        sensor = loaded.get_repository_def().get_sensor_def(checks.ALERTS_SENSOR)
        with dg.build_sensor_context(resources={"warehouse": WarehouseResource()}) as context:
            looked = sensor(context)
        assert isinstance(looked, dg.SkipReason) and looked.skip_message is not None
        assert looked.skip_message.startswith("no alert destination is set"), looked.skip_message
        with dg.DagsterInstance.ephemeral() as instance:
            result = loaded.resolve_job_def(jobs.FREIGHT_SYNC_JOB).execute_in_process(
                instance=instance, raise_on_error=False, asset_selection=stream_keys("code_conversions"),
                run_config={"resources": {"freight_service": {"config": {"password": "pw"}}}})
        (failure,) = [event for event in result.all_events if event.is_step_failure]
        error = failure.step_failure_data.error
        assert error is not None and said in error.message
    finally:  # leave the module as this session's environment builds it
        monkeypatch.undo()
        importlib.reload(module)


def test_resource_defaults_are_the_sync_settings_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(RECONCILE_ENV, raising=False)
    monkeypatch.delenv(HISTORY_ENV, raising=False)
    assert FreightServiceResource(password="x").sync_settings() == SyncSettings()
    monkeypatch.setenv(HISTORY_ENV, "0")
    assert FreightServiceResource(password="x").sync_settings() == SyncSettings(history=False)
    monkeypatch.delenv(HISTORY_ENV)
    tuned = FreightServiceResource(password="x", fetch_batch_size=7, fetch_window=9, initial_concurrency=3,
                                   adaptive_concurrency=False).sync_settings()
    assert (tuned.fetch_batch_size, tuned.fetch_window, tuned.initial_concurrency) == (7, 9, 3)
    assert not tuned.adaptive_concurrency and not tuned.in_flight_limit().adaptive


def test_the_package_docstring_names_each_of_its_modules_and_no_other() -> None:
    import freight_pipeline.defs as defs

    named = {word for word in re.findall(r"``([A-Za-z_]+)``", defs.__doc__ or "")}
    modules = {path.stem for path in Path(defs.__file__).parent.glob("*.py") if path.stem != "__init__"}
    assert named == modules


def _claim(instance: dg.DagsterInstance, run_id: str, data_dir: Path) -> None:
    """Tag run ``run_id`` with its claim on the writer lock its process holds now, as ``writer_claim`` does."""
    instance.add_run_tags(run_id, {writer_claim.CLAIM_TAG: json.dumps(asdict(Holder.read(lock_path(data_dir))))})


@pytest.mark.parametrize("headless", ["let go", "holds it"])
def test_a_run_that_took_the_lock_and_lost_it_is_failed_by_the_next_tick_however_soon_after(
    tmp_path: Path, headless: str
) -> None:
    """A Dagster run killed while it wrote, then a headless sync took the writer lock seconds later: the lock's file
    names only the headless run, yet the tick fails the dead run (its claim says it took the lock before), however
    little time passed (was: skipped for ever, the headless run not 5 minutes after it began); and runs once the
    headless run let go. A run holding its claim is alive: the ticks skip on it."""
    with ticking(tmp_path) as (instance, tick):
        live = instance.add_run(dg.DagsterRun(job_name="freight_sync_job", status=dg.DagsterRunStatus.STARTED,
                                              tags=WRITER_TAG))
        with writer_claim.writer_claim(instance, live.run_id, tmp_path):  # the op's own claim, in this process
            claimed = instance.get_run_by_id(live.run_id)
            assert claimed is not None and writer_claim.claim_of(claimed) == Holder.read(lock_path(tmp_path))
            skipped = tick()
            assert isinstance(skipped, dg.SkipReason) and live.run_id in (skipped.skip_message or "")
        assert (instance.get_run_by_id(live.run_id) or live).status == dg.DagsterRunStatus.STARTED
        instance.report_run_failed(live)  # ended

        dead = instance.add_run(dg.DagsterRun(job_name="freight_sync_job", status=dg.DagsterRunStatus.STARTED,
                                              tags=WRITER_TAG))
        with lock_held(tmp_path, dead.run_id):
            _claim(instance, dead.run_id, tmp_path)
            skipped = tick()  # alive: it holds the lock it claimed
            assert isinstance(skipped, dg.SkipReason) and dead.run_id in (skipped.skip_message or "")
        # killed; a headless sync takes the lock at once (within TAKEN_OVER_AFTER of the dead run's start)
        if headless == "let go":
            with writer_lock(tmp_path, "cli-cron-run"):
                pid = os.getpid()
            assert isinstance(tick(), dg.RunRequest)
        else:
            with lock_held(tmp_path, "cli-cron-run") as holder:
                pid = holder.pid
                skipped = tick()  # the headless run writes: skipped for it, not for the dead run
                assert isinstance(skipped, dg.SkipReason)
                assert (skipped.skip_message or "").startswith(f"another run writes {tmp_path}: run cli-cron-run")
        failed = instance.get_run_by_id(dead.run_id)
        assert failed is not None and failed.status == dg.DagsterRunStatus.FAILURE
        said = [e.message for e in instance.all_logs(dead.run_id) if e.is_dagster_event]
        assert any(m.startswith(f"its process is gone: it held the warehouse's writer lock (run {dead.run_id}")
                   and f"another run took it since (run cli-cron-run, process {pid}" in m for m in said), said


def test_the_next_run_that_takes_the_lock_fails_a_run_killed_before_it_without_a_tick(tmp_path: Path) -> None:
    """A ``sync --dagster`` killed with -9, then the next ones, with the schedules off (cron's way, or ``dagster
    dev``'s default): Dagster held the killed run STARTED for good, its queue (one run at a time) started no run
    after it, and the history's cleanup never deletes a run in progress. The next run that takes the writer lock
    fails it; a run whose process lives is left running, holding its claim or past it (it let go, and ends: its
    last results, its alerts' sends)."""
    with dg.instance_for_test() as instance:
        ending = instance.add_run(dg.DagsterRun(job_name="freight_sync_job", status=dg.DagsterRunStatus.STARTED,
                                                tags=WRITER_TAG))
        with writer_claim.writer_claim(instance, ending.run_id, tmp_path):  # this process: alive
            pass
        dead = instance.add_run(dg.DagsterRun(job_name="freight_sync_job", status=dg.DagsterRunStatus.STARTED,
                                              tags=WRITER_TAG))
        with lock_held(tmp_path, dead.run_id):
            _claim(instance, dead.run_id, tmp_path)
        nxt = instance.add_run(dg.DagsterRun(job_name="freight_sync_job", status=dg.DagsterRunStatus.STARTED,
                                             tags=WRITER_TAG))
        with writer_claim.writer_claim(instance, nxt.run_id, tmp_path):
            failed = instance.get_run_by_id(dead.run_id)
            assert failed is not None and failed.status == dg.DagsterRunStatus.FAILURE
            assert (instance.get_run_by_id(nxt.run_id) or nxt).status == dg.DagsterRunStatus.STARTED
            assert (instance.get_run_by_id(ending.run_id) or ending).status == dg.DagsterRunStatus.STARTED
        said = [e.message for e in instance.all_logs(dead.run_id) if e.is_dagster_event]
        assert any(m.startswith(f"its process is gone: it held the warehouse's writer lock (run {dead.run_id}")
                   and f"another run took it since (run {nxt.run_id}" in m for m in said), said


def test_a_run_that_let_go_of_its_claim_is_failed_only_once_its_process_ended(tmp_path: Path) -> None:
    """A run that let go of the writer lock itself is ending (its last results): not failed while its process lives;
    failed once that process is gone (killed after it let go)."""
    with ticking(tmp_path) as (instance, tick):
        ending = instance.add_run(dg.DagsterRun(job_name="freight_sync_job", status=dg.DagsterRunStatus.STARTED,
                                                tags=WRITER_TAG))
        with writer_claim.writer_claim(instance, ending.run_id, tmp_path):
            pass  # let go; this process (the run's) goes on
        assert isinstance(tick(), dg.SkipReason)
        assert (instance.get_run_by_id(ending.run_id) or ending).status == dg.DagsterRunStatus.STARTED
        instance.report_run_failed(ending)

        gone = instance.add_run(dg.DagsterRun(job_name="freight_sync_job", status=dg.DagsterRunStatus.STARTED,
                                              tags=WRITER_TAG))
        with subprocess.Popen([sys.executable, "-c", LET_GO, str(tmp_path), gone.run_id], stdout=subprocess.PIPE,
                              stdin=subprocess.PIPE, text=True) as process:
            assert process.stdout is not None and process.stdout.readline() == "held\n"
            _claim(instance, gone.run_id, tmp_path)
            assert process.stdin is not None
            process.stdin.write("go\n")
            process.stdin.flush()
            assert process.stdout.readline() == "let go\n"
            assert isinstance(tick(), dg.SkipReason)  # alive, ending
            process.kill()
        assert isinstance(tick(), dg.RunRequest)
        failed = instance.get_run_by_id(gone.run_id)
        assert failed is not None and failed.status == dg.DagsterRunStatus.FAILURE


def test_a_run_whose_process_id_a_later_process_took_is_failed(tmp_path: Path) -> None:
    """A run killed after it let go of the writer lock, whose process id the system gave to a later process (it came
    round its ids, or restarted): Dagster held it STARTED for good, and every tick skipped on it, since a process had
    its id. The process with its id began after the run took the lock: another's, so the run is gone."""
    with ticking(tmp_path) as (instance, tick):
        gone = instance.add_run(dg.DagsterRun(job_name="freight_sync_job", status=dg.DagsterRunStatus.STARTED,
                                              tags=WRITER_TAG))
        with writer_lock(tmp_path, gone.run_id):  # it took the lock an hour ago, and let go
            pass
        with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"]) as later:
            try:
                took = (dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)).isoformat(timespec="seconds")
                claim = Holder(gone.run_id, later.pid, socket.gethostname(), took)  # its id, now a later process's
                instance.add_run_tags(gone.run_id, {writer_claim.CLAIM_TAG: json.dumps(asdict(claim))})
                assert isinstance(tick(), dg.RunRequest)
            finally:
                later.kill()
        failed = instance.get_run_by_id(gone.run_id)
        assert failed is not None and failed.status == dg.DagsterRunStatus.FAILURE
        said = [e.message for e in instance.all_logs(gone.run_id) if e.is_dagster_event]
        assert any(m.startswith("its process is gone: it let go of the warehouse's writer lock (run "
                                f"{gone.run_id}, process {later.pid}") for m in said), said


LET_GO = """
import sys, time
from pathlib import Path
from freight_pipeline.warehouse.writer_lock import writer_lock
with writer_lock(Path(sys.argv[1]), sys.argv[2]):
    print("held", flush=True)
    sys.stdin.readline()
print("let go", flush=True)
time.sleep(600)
"""


QUEUE_ONE_AT_A_TIME = {"run_coordinator": {"module": "dagster.core.run_coordinator", "class": "QueuedRunCoordinator",
                                           "config": {"max_concurrent_runs": 1}}}
"""The run queue of ``make ui``'s instance (``commands/dagster.yaml``): one run at a time."""


@pytest.mark.parametrize("queue", ["one at a time", "none"])
def test_a_tick_queues_behind_another_job_s_run_when_the_queue_runs_one_at_a_time(tmp_path: Path, queue: str) -> None:
    """The daily schedule's tick, due with the sync's at 03:00: with the queue starting one run at a time, a sync run
    queued or running does not skip it (its run waits behind); one of its own job does. Without such a queue: skipped.
    """
    daily = jobs.build_schedule("daily", "0 3 * * *", "code_conversions_job", "d")
    with ticking(tmp_path, daily, QUEUE_ONE_AT_A_TIME if queue != "none" else None) as (instance, tick):
        sync = instance.add_run(dg.DagsterRun(job_name="freight_sync_job", status=dg.DagsterRunStatus.NOT_STARTED,
                                              tags=WRITER_TAG))
        assert isinstance(tick(), dg.RunRequest if queue != "none" else dg.SkipReason)
        with writer_claim.writer_claim(instance, sync.run_id, tmp_path):  # dequeued: it writes
            instance.report_dagster_event(dg.DagsterEvent(dg.DagsterEventType.RUN_START.value,
                                                          job_name="freight_sync_job"), sync.run_id)
            assert isinstance(tick(), dg.RunRequest if queue != "none" else dg.SkipReason)
            own = instance.add_run(dg.DagsterRun(job_name="code_conversions_job",
                                                 status=dg.DagsterRunStatus.NOT_STARTED, tags=WRITER_TAG))
            skipped = tick()
            assert isinstance(skipped, dg.SkipReason) and own.run_id in (skipped.skip_message or "")
        with lock_held(tmp_path, "cli-cron-run"):  # a headless run: nothing queues behind it
            instance.report_run_failed(own)
            instance.report_run_failed(instance.get_run_by_id(sync.run_id) or sync)
            assert isinstance(tick(), dg.SkipReason)


def test_both_schedules_run_at_0300_every_day(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Dagster's own scheduler loop (the daemon's ``launch_scheduled_runs``) at 03:00 UTC on several days, the
    schedules switched on and the run queue of ``make ui``: both schedules are due; each day both launch a run (was:
    whichever Dagster evaluated second skipped on the first's queued run, the daily one on about half the days)."""
    from dagster._core.definitions.run_request import InstigatorType
    from dagster._core.scheduler.instigation import TickStatus
    from dagster._core.test_utils import create_test_daemon_workspace_context, freeze_time
    from dagster._core.workspace.load_target import WorkspaceFileTarget
    from dagster._scheduler.scheduler import launch_scheduled_runs

    monkeypatch.setenv(SCHEDULES_RUNNING_ENV, "1")
    monkeypatch.setenv("FREIGHT_DATA_DIR", str(tmp_path / "data"))
    workspace = Path(__file__).parents[2] / "workspace.yaml"
    days = 4
    launched: dict[int, list[str]] = {}
    with dg.instance_for_test(overrides=QUEUE_ONE_AT_A_TIME) as instance, \
            create_test_daemon_workspace_context(WorkspaceFileTarget([str(workspace)]), instance) as context:
        logger = logging.getLogger("scheduler")
        times: dict[str, float] = {}
        for day in range(8, 8 + days):
            for at in (dt.datetime(2026, 12, day, 2, 59, tzinfo=dt.UTC), dt.datetime(2026, 12, day, 3, 0, 20,
                                                                                    tzinfo=dt.UTC)):
                for run in instance.get_runs():  # the earlier ticks' runs: as if they had run and ended
                    instance.delete_run(run.run_id)
                with freeze_time(at):
                    list(launch_scheduled_runs(context, logger, at, times))
            launched[day] = sorted(run.job_name for run in instance.get_runs())
            states = instance.all_instigator_state(instigator_type=InstigatorType.SCHEDULE)
            ticks = {state.instigator_name: instance.get_ticks(state.instigator_origin_id, state.selector_id,
                                                              limit=1)[0] for state in states
                     if state.instigator_name != "dagster_history_daily"}  # due at 04:00: no tick at 03:00
            assert {name: tick.status for name, tick in ticks.items()} == {
                "freight_sync_every_15_minutes": TickStatus.SUCCESS, "code_conversions_daily": TickStatus.SUCCESS}, \
                {name: tick.skip_reason for name, tick in ticks.items()}
    assert launched == {day: ["code_conversions_job", "freight_sync_job"] for day in range(8, 8 + days)}
