"""``freight_sync_job`` end to end: the real simulator over HTTP, the real sync, real dbt, a real publish;
what the one op reports of the engine's steps (the assets' figures, the models, the checks).

One module-scoped fixture runs the whole job, changes the source, then runs a subset: the streams'
tables and the publish, without the marts (the engine then runs no build), and every test reads the
results.
"""

import json
import logging
import os
import re
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb
import pytest
from dagster._core.definitions.data_version import CachingStaleStatusResolver, StaleStatus
from dagster._core.loader import LoadingContextForTest

from freight_pipeline.config import DBT_REPLAY_ENV
from freight_pipeline.definitions import defs
from freight_pipeline.defs.dbt import NOT_REBUILT
from freight_pipeline.defs.freight_job import DBT, FREIGHT_JOB, PUBLISH_KEY
from freight_pipeline.defs.sync_assets import stream_keys
from freight_pipeline.defs.writer_claim import WRITER_TAG, claim_of
from freight_pipeline.marts.project import TARGET_DIR
from freight_pipeline.marts.results import read_run_results
from freight_pipeline.normalize.tables import FREIGHT_TABLES
from freight_pipeline.simulator.config import SimulatorConfig, UserConfig
from freight_pipeline.simulator.server import running_simulator
from freight_pipeline.sync.shipments import PART_STREAMS
from freight_pipeline.sync.streams import RECORD_SOURCES, STREAM_BY_NAME, STREAM_NAMES
from freight_pipeline.warehouse.meta import BUILD_STREAM
from freight_pipeline.warehouse.paths import working_db_path
from freight_pipeline.warehouse.publish import published_db_path
from freight_pipeline_tests.dbt.marts import marts

SHIPMENTS = 150
MODIFIED = 5
STREAM_FIGURES = ("rows_read", "rows_written", "requests", "retries", "rejected", "cursor_before", "cursor_after",
                  "quarantined", "data_problems", "retry_queue")
PART_FIGURES = ("records_read", "shipments_loaded", "quarantined", "data_problems", "rejected", "retry_queue")
MARTS = marts()


@dataclass
class Runs:
    first: dg.ExecuteInProcessResult
    second: dg.ExecuteInProcessResult
    instance: dg.DagsterInstance
    data_dir: Path
    password: str
    published_versions: list[str]
    third: dg.ExecuteInProcessResult
    """The whole job again, after :data:`CHANGED` shipments changed."""
    stale_after_third: dict[str, list[str]]
    """Each asset Dagster's own stale-status resolver (the UI's "Unsynced") finds not fresh after it, by status."""
    one_view: dg.ExecuteInProcessResult
    """One staging view selected alone (the asset graph's Materialize of it), after the third."""


def _metadata(result: dg.ExecuteInProcessResult, *path: str) -> dict[str, Any]:
    events = [e for e in result.get_asset_materialization_events() if e.asset_key == dg.AssetKey(list(path))]
    assert len(events) == 1, path
    return {k: v.value for k, v in events[0].materialization.metadata.items()}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    root = tmp_path_factory.mktemp("defs_e2e")
    data_dir = root / "data"
    password = "pw-" + secrets.token_hex(12)
    config = SimulatorConfig(users=(UserConfig("freight-user", password),))
    with running_simulator(config, shipments=SHIPMENTS, seed=7) as sim, pytest.MonkeyPatch.context() as env:
        env.setenv("FREIGHT_BASE_URL", sim.base_url)
        env.setenv("FREIGHT_USERNAME", sim.username)
        env.setenv("FREIGHT_PASSWORD", password)
        env.setenv("FREIGHT_DATA_DIR", str(data_dir))
        env.setenv("DAGSTER_HOME", str(root / "dagster_home"))
        env.delenv("FREIGHT_DBT_DATABASE", raising=False)
        env.setenv(DBT_REPLAY_ENV, "0")  # dbt builds (not a replay of another test's build): its log is scanned too
        job = defs.resolve_job_def("freight_sync_job")
        with dg.DagsterInstance.ephemeral() as instance:
            versions = []
            first = job.execute_in_process(instance=instance, raise_on_error=False)
            versions.append(_metadata(first, "freight", "published_warehouse")["version"] if first.success else "")
            sim.modify_shipments(MODIFIED)
            tables = [key for stream in STREAM_NAMES for key in stream_keys(stream)]
            second = job.execute_in_process(
                instance=instance, raise_on_error=False, asset_selection=[*tables, PUBLISH_KEY]
            )
            versions.append(_metadata(second, "freight", "published_warehouse")["version"] if second.success else "")
            sim.modify_shipments(CHANGED)
            third = job.execute_in_process(instance=instance, raise_on_error=False)
            stale = _not_fresh(instance)
            one_view = defs.resolve_implicit_global_asset_job_def().execute_in_process(
                instance=instance, raise_on_error=False, asset_selection=[ONE_VIEW])
            yield Runs(first, second, instance, data_dir, password, versions, third, stale, one_view)


CHANGED = 3
ONE_VIEW = dg.AssetKey(["staging", "stg_shipment_aes"])


def _not_fresh(instance: dg.DagsterInstance) -> dict[str, list[str]]:
    graph = defs.resolve_asset_graph()
    resolver = CachingStaleStatusResolver(instance, graph, LoadingContextForTest(instance))
    found: dict[str, list[str]] = {}
    for key in sorted(graph.materializable_asset_keys):
        status = resolver.get_status(key)
        if status != StaleStatus.FRESH:
            found.setdefault(status.value, []).append(key.to_user_string())
    return found


def test_both_runs_succeed(runs: Runs) -> None:
    for result in (runs.first, runs.second, runs.third, runs.one_view):
        failures = [e.message for e in result.all_events if e.is_failure]
        assert result.success, failures
        run = runs.instance.get_run_by_id(result.run_id)
        assert run is not None and (run.tags.items() >= WRITER_TAG.items() or result is runs.one_view)
        claim = claim_of(run)  # the writer lock's claim, told to Dagster (what a tick tells a dead run by)
        assert claim is not None and claim.pid == os.getpid() and claim.since, run.tags
    assert runs.published_versions[0] != runs.published_versions[1]


def test_every_sync_asset_reports_its_figures(runs: Runs) -> None:
    for stream in STREAM_NAMES:  # each stream's figures on its first table
        figures = _metadata(runs.first, "freight", STREAM_BY_NAME[stream].tables[0])
        assert set(STREAM_FIGURES) <= set(figures), stream
        assert figures["rows_read"] > 0 and figures["requests"] > 0, stream
        assert figures["rejected"] == 0 and figures["cursor_before"] is None and figures["cursor_after"], stream
        assert figures["quarantined"] == figures["data_problems"] == figures["retry_queue"] == 0, stream
    for part in PART_STREAMS[1:]:  # each part of a shipment its own figures on its first table
        figures = _metadata(runs.first, "freight", RECORD_SOURCES[part][0])
        assert set(PART_FIGURES) <= set(figures), part
        assert figures["shipments_loaded"] == SHIPMENTS and figures["records_read"] > 0, part
        assert figures["quarantined"] == figures["data_problems"] == figures["retry_queue"] == 0, part
    for tables in RECORD_SOURCES.values():
        for table in tables:
            assert _metadata(runs.first, "freight", table)["dagster/row_count"] > 0, table
    shipments = _metadata(runs.first, "freight", "shipments")
    assert shipments["rows_read"] == SHIPMENTS
    assert shipments["rows_written_by_table"]["shipments"] == SHIPMENTS
    assert shipments["rows_written"] == sum(shipments["rows_written_by_table"].values())
    assert shipments["source_lag_seconds"] >= 0 and shipments["newest_source_change"] > 0
    assert shipments["details"]["in_flight_limit_mean"] > 0


def test_second_run_is_incremental(runs: Runs) -> None:
    before = _metadata(runs.first, "freight", "shipments")
    after = _metadata(runs.second, "freight", "shipments")
    assert after["cursor_before"] == before["cursor_after"]
    assert MODIFIED <= after["rows_read"] < SHIPMENTS // 3
    assert after["requests"] < before["requests"] // 3
    assert after["dagster/row_count"] == SHIPMENTS
    events = _metadata(runs.second, "freight", "shipment_events")
    sampled = after["details"]["freshness"]["sampled"]  # open shipments' events read again (sync.freshness)
    assert sampled > 0 and MODIFIED <= events["shipments_loaded"] <= after["rows_read"] + sampled


def test_dbt_models_were_built_and_tested(runs: Runs) -> None:
    built = {e.asset_key for e in runs.first.get_asset_materialization_events()}
    for mart in MARTS:
        assert dg.AssetKey(["analytics", mart]) in built
    assert dg.AssetKey(["staging", "stg_shipments"]) in built
    results = read_run_results(working_db_path(runs.data_dir).parent / TARGET_DIR)
    assert results is not None
    tests = [r for r in results["results"] if r["unique_id"].startswith("test.")]
    assert len(tests) > 50 and {r["status"] for r in tests} == {"pass"}
    logged = [e.user_message for e in runs.instance.all_logs(runs.first.run_id) if e.step_key == FREIGHT_JOB]
    assert any(f"{len(tests)} data tests: {len(tests)} passed" in message for message in logged)
    # each model with dbt's figures and its tests' results, as the engine's build reported them
    fct = _metadata(runs.first, "analytics", "fct_shipments")
    assert fct["dbt_status"] == "success" and fct["execution_duration"] > 0 and "pass" in fct["tests"]
    # the second run selected no model: no build ran, and none was materialized
    assert not [e for e in runs.second.get_asset_materialization_events() if e.asset_key.path[0] == "analytics"]


def test_each_stream_s_progress_is_in_the_run_s_event_log(runs: Runs) -> None:
    """Not a terminal: each stream's tally as plain lines (its first, at most one per 15 s, its last), at DEBUG."""
    logged = [e.user_message for e in runs.instance.all_logs(runs.first.run_id)
              if e.step_key == FREIGHT_JOB and e.level == logging.DEBUG]
    for stream, unit in (("shipments", "shipments"), ("documents", "shipments"), ("code_conversions", "conversions")):
        told = [message for message in logged if message.startswith(f"{stream}: ") and " request" in message]
        assert told, (stream, logged[:20])
        assert re.fullmatch(rf"{stream}: [\d,]+ {unit} done in .*; [\d,]+ requests?, \d+ retr(y|ies)", told[-1])
    assert any(message.startswith(f"shipments: 0 of {SHIPMENTS} shipments (0 %)") for message in logged)


def test_all_asset_checks_pass(runs: Runs) -> None:
    for result in (runs.first, runs.second):
        evaluations = result.get_asset_check_evaluations()
        names = {c.check_name for c in evaluations}
        assert {"primary_key_unique", "no_orphan_rows", "freshness_check", "no_rejected_records",
                "stream_synced"} <= names
        failed = [(c.asset_key.to_user_string(), c.check_name) for c in evaluations if not c.passed]
        assert failed == []


def test_published_warehouse_has_freight_tables_and_marts(runs: Runs) -> None:
    """The second run selects the tables and the publish, no model: the marts it publishes still cover the
    shipments it changed (it published them as the first run's build left them)."""
    published = published_db_path(runs.data_dir)
    meta = _metadata(runs.second, "freight", "published_warehouse")
    assert meta["published_path"] == str(published)
    assert meta["row_counts"]["freight.shipments"] == SHIPMENTS
    with duckdb.connect(str(published), read_only=True) as con:
        for spec in FREIGHT_TABLES:
            assert con.execute(f"SELECT count(*) FROM {spec.qualified_name}").fetchone()[0] > 0, spec.name
        for mart in MARTS:
            assert con.execute(f"SELECT count(*) FROM analytics.{mart}").fetchone()[0] > 0, mart
        assert con.execute("SELECT count(*) FROM staging.stg_shipments").fetchone()[0] == SHIPMENTS
        behind = con.execute("SELECT count(*) FROM freight.shipments s JOIN analytics.fct_shipments f USING "
                             "(shipment_id) WHERE f.last_modified_at IS DISTINCT FROM s.last_modified_at").fetchone()
        assert behind == (0,)
    assert {event.asset_key for event in runs.second.get_asset_materialization_events()}.isdisjoint(DBT.keys.values())
    # nothing holds the working database after the run: a writer can open it
    duckdb.connect(str(working_db_path(runs.data_dir))).close()


def test_sync_runs_are_logged_with_the_dagster_run_id(runs: Runs) -> None:
    with duckdb.connect(str(published_db_path(runs.data_dir)), read_only=True) as con:
        rows = con.execute("SELECT run_id, stream, status FROM freight_meta.sync_runs").fetchall()
    synced = (runs.first, runs.second, runs.third)  # not the view selected alone: no stream, nothing to build
    streams = {(run.run_id, s) for run in synced for s in STREAM_NAMES}
    # each run built dbt (logged as stream dbt_build): the second selected no model, but the publish
    assert {(r, s) for r, s, _ in rows} == streams | {(run.run_id, BUILD_STREAM) for run in synced}
    assert {status for _, _, status in rows} == {"success"}


def _texts(runs: Runs) -> Iterator[tuple[str, str]]:
    for result in (runs.first, runs.second):
        for entry in runs.instance.all_logs(result.run_id):
            yield "event", repr(entry)
        run = runs.instance.get_run_by_id(result.run_id)
        assert run is not None
        yield "run", repr(run) + json.dumps(run.run_config, default=str)
    for path in runs.data_dir.rglob("*"):
        if path.is_file() and path.suffix in (".json", ".log", ".sql", ".txt"):
            yield str(path), path.read_text(errors="replace")


def test_password_never_appears_in_events_metadata_or_files(runs: Runs) -> None:
    texts = list(_texts(runs))
    assert [where for where, text in texts if runs.password in text] == []
    # the scan did look at the metadata and dbt's logs
    assert any("rows_read" in text for where, text in texts if where == "event")
    assert any(where.endswith("dbt.log") for where, _ in texts)


def test_a_rejected_login_fails_the_step_without_showing_the_password(tmp_path: Path) -> None:
    wrong = "wrong-" + secrets.token_hex(12)
    with running_simulator(shipments=10, seed=3) as sim, pytest.MonkeyPatch.context() as env:
        env.setenv("FREIGHT_BASE_URL", sim.base_url)
        env.setenv("FREIGHT_USERNAME", sim.username)
        env.setenv("FREIGHT_PASSWORD", wrong)
        env.setenv("FREIGHT_DATA_DIR", str(tmp_path))
        job = defs.resolve_job_def("freight_sync_job")
        with dg.DagsterInstance.ephemeral() as instance:
            result = job.execute_in_process(
                instance=instance, raise_on_error=False, asset_selection=[dg.AssetKey(["freight", "code_conversions"])]
            )
            texts = [repr(entry) for entry in instance.all_logs(result.run_id)]
    assert not result.success
    assert any(FREIGHT_JOB in t and "STEP_FAILURE" in t for t in texts)
    assert any("sync_code_conversions" in t and "401" in t for t in texts), texts
    assert not [t for t in texts if wrong in t]


def test_a_run_that_changed_a_few_shipments_leaves_no_asset_stale(runs: Runs) -> None:
    """After a scheduled run that changed a few shipments, Dagster's own stale-status resolver finds every asset fresh
    (was: the 25 staging views "Unsynced", their tables re-materialized with no data version while dbt, rightly, did
    not rebuild them): a table's data version changes only with its rows, and every model the build did not need to
    run is materialized as current, saying so."""
    assert runs.stale_after_third == {}
    versions = {e.asset_key: e.materialization.tags.get("dagster/data_version")
                for e in runs.third.get_asset_materialization_events()}
    before = {e.asset_key: e.materialization.tags.get("dagster/data_version")
              for e in runs.second.get_asset_materialization_events()}
    shipments, conversions = dg.AssetKey(["freight", "shipments"]), dg.AssetKey(["freight", "code_conversions"])
    assert versions[shipments] != before[shipments]  # its rows changed
    assert versions[conversions] == before[conversions]  # none of its rows did: its views are not stale
    built = [e for e in runs.third.get_asset_materialization_events() if e.asset_key in DBT.keys.values()]
    assert {e.asset_key for e in built} == set(DBT.keys.values())
    rebuilt = {e.asset_key for e in built if e.materialization.metadata["dbt_status"].value == "success"}
    current = {e.asset_key for e in built if NOT_REBUILT in e.materialization.metadata}
    assert rebuilt and current and rebuilt.isdisjoint(current) and rebuilt | current == set(DBT.keys.values())


def test_a_view_selected_alone_is_materialized_as_current(runs: Runs) -> None:
    """Materializing one staging view from the asset graph, nothing having changed: the build has nothing to run, and
    the view is materialized all the same, saying it is current and was not rebuilt (was: a successful run with no
    materialization, the asset left "Unsynced" for good)."""
    [event] = runs.one_view.get_asset_materialization_events()
    assert event.asset_key == ONE_VIEW
    metadata = {k: v.value for k, v in event.materialization.metadata.items()}
    assert metadata["dbt_status"] == "current" and metadata[NOT_REBUILT].startswith("current, not rebuilt")
    assert _not_fresh(runs.instance) == {}
