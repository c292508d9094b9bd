"""The job's one op in Dagster, a test per concern: a selection runs only what it selects; a failed
stream fails one run that publishes every other stream; a data directory publishes the same either
way the job is started. The scenarios themselves (incremental builds, a broken guarantee) are the
engine's, tested once in ``freight_pipeline_tests/job``.

Real simulator over HTTP, real DuckDB, dbt and Dagster. (No ``from __future__ import annotations``:
Dagster reads annotations.)
"""

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from freight_pipeline.config import ServiceSettings
from freight_pipeline.definitions import defs
from freight_pipeline.defs.freight_job import DBT, PUBLISH_KEY, stream_check_key
from freight_pipeline.defs.jobs import FREIGHT_SYNC_JOB
from freight_pipeline.defs.sync_assets import stream_keys
from freight_pipeline.job.run import FAILED_STEP, run_job
from freight_pipeline.lake.backend import storage_from_env
from freight_pipeline.marts.worker import DbtWorker
from freight_pipeline.simulator.config import PERMISSIONS, SimulatorConfig, UserConfig
from freight_pipeline.simulator.server import RunningSimulator, running_simulator
from freight_pipeline.sync.settings import SyncSettings
from freight_pipeline.warehouse.meta import BUILD_STREAM
from freight_pipeline.warehouse.paths import working_db_path
from freight_pipeline.warehouse.publish import published_db_path

FCT_SHIPMENTS = dg.AssetKey(["analytics", "fct_shipments"])


@contextmanager
def job_env(sim: RunningSimulator, data_dir: Path, username: str, password: str) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as env:
        env.setenv("FREIGHT_BASE_URL", sim.base_url)
        env.setenv("FREIGHT_USERNAME", username)
        env.setenv("FREIGHT_PASSWORD", password)
        env.setenv("FREIGHT_DATA_DIR", str(data_dir))
        env.delenv("FREIGHT_DBT_DATABASE", raising=False)
        yield


def materialized(result: dg.ExecuteInProcessResult) -> set[dg.AssetKey]:
    return {event.asset_key for event in result.get_asset_materialization_events()}


def logged_streams(data_dir: Path, run_id: str) -> set[str]:
    with duckdb.connect(str(working_db_path(data_dir)), read_only=True) as con:
        return {s for (s,) in con.execute("SELECT stream FROM freight_meta.sync_runs WHERE run_id = ?",
                                          [run_id]).fetchall()}


def test_a_selection_runs_only_what_it_selects(tmp_path: Path) -> None:
    """Only the code conversions: that stream alone, no build, no publish. Only the marts: no stream,
    the checks and the build on what the working database holds, no publish."""
    job = defs.resolve_job_def(FREIGHT_SYNC_JOB)
    with running_simulator(shipments=12, seed=4) as sim, job_env(sim, tmp_path, sim.username, sim.password), \
            dg.DagsterInstance.ephemeral() as instance:
        codes = job.execute_in_process(instance=instance, raise_on_error=False,
                                       asset_selection=stream_keys("code_conversions"))
        marts = job.execute_in_process(instance=instance, raise_on_error=False,
                                       asset_selection=list(DBT.keys.values()))
    assert codes.success and marts.success
    assert materialized(codes) == set(stream_keys("code_conversions"))
    assert {(c.asset_key, c.check_name) for c in codes.get_asset_check_evaluations()} >= {
        (stream_check_key("code_conversions").asset_key, "stream_synced"),
        (dg.AssetKey(["freight", "code_conversions"]), "primary_key_unique")}
    assert logged_streams(tmp_path, codes.run_id) == {"code_conversions"}
    assert materialized(marts) == set(DBT.keys.values())
    assert logged_streams(tmp_path, marts.run_id) == {BUILD_STREAM}
    assert not published_db_path(tmp_path).exists()  # neither selected the publish


def test_a_failed_stream_fails_one_run_that_publishes_every_other_stream(tmp_path: Path) -> None:
    """An account without the E-File permission: in one run the documents stream's tables are not
    materialized and its check is red with the engine's reason; the rest is checked, built and
    published; the run fails."""
    without_efiles = frozenset(p for p in PERMISSIONS if not p.startswith("efile"))
    config = SimulatorConfig(users=(UserConfig("no-documents", "pw-no-docs-1234", without_efiles),))
    job = defs.resolve_job_def(FREIGHT_SYNC_JOB)
    with running_simulator(config, shipments=10, seed=5) as sim, \
            job_env(sim, tmp_path, "no-documents", "pw-no-docs-1234"), dg.DagsterInstance.ephemeral() as instance:
        result = job.execute_in_process(instance=instance, raise_on_error=False)
        runs = instance.get_runs()
    assert not result.success and len(runs) == 1
    done = materialized(result)
    assert not done & set(stream_keys("documents"))
    assert set(stream_keys("shipments")) | {FCT_SHIPMENTS, PUBLISH_KEY} <= done
    checks = {dg.AssetCheckKey(c.asset_key, c.check_name): c for c in result.get_asset_check_evaluations()}
    red = checks[stream_check_key("documents")]
    assert not red.passed and (red.description or "").startswith("StreamUnreachable: ")
    assert checks[stream_check_key("shipments")].passed
    assert checks[dg.AssetCheckKey(dg.AssetKey(["freight", "shipment_documents"]), "primary_key_unique")].passed
    (failure,) = [event for event in result.all_events if event.is_step_failure]
    assert failure.step_failure_data is not None and failure.step_failure_data.user_failure_data is not None
    assert failure.step_failure_data.user_failure_data.metadata[FAILED_STEP].value == "sync_documents"
    with duckdb.connect(str(published_db_path(tmp_path)), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM analytics.fct_shipments").fetchone() == (10,)
        assert con.execute("SELECT last_status FROM freight_meta.table_freshness "
                           "WHERE table_name = 'shipment_documents'").fetchone() == ("failed",)


PIPELINE_COLUMNS = ("_run_id", "_synced_at", "run_id", "recorded_at")
"""Columns that name the run or when it wrote (a history version's ``recorded_at``)."""


def published_tables(data_dir: Path) -> dict[str, list[tuple[object, ...]]]:
    """Every published table of the freight and dbt schemas, sorted, without the columns that name the
    run or its time."""
    tables: dict[str, list[tuple[object, ...]]] = {}
    with duckdb.connect(str(published_db_path(data_dir)), read_only=True) as con:
        names = con.execute("SELECT table_schema, table_name FROM information_schema.tables WHERE table_schema IN "
                            "('freight', 'freight_history', 'staging', 'intermediate', 'analytics')").fetchall()
        for schema, table in names:
            columns = [c for (c,) in con.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = ? AND table_name = ? "
                "ORDER BY ordinal_position", [schema, table]).fetchall()
                if c not in PIPELINE_COLUMNS and not c.endswith("_synced_at")]
            selected = ", ".join(f'"{column}"' for column in columns)
            rows = con.execute(f'SELECT {selected} FROM "{schema}"."{table}"').fetchall()
            tables[f"{schema}.{table}"] = sorted(rows, key=repr)
    return tables


def test_a_data_directory_publishes_the_same_either_way(tmp_path: Path) -> None:
    """The same service synced into two data directories, by the job alone and as a Dagster run: the
    same published tables, row for row."""
    alone, in_dagster = tmp_path / "alone", tmp_path / "dagster"
    with running_simulator(shipments=15, seed=8) as sim:
        backend = storage_from_env()
        with DbtWorker.start(alone, backend.dbt_target) as worker:
            report = run_job(ServiceSettings(sim.base_url, sim.username, sim.password), alone,
                             SyncSettings().with_env(), backend, worker)
        with job_env(sim, in_dagster, sim.username, sim.password), dg.DagsterInstance.ephemeral() as instance:
            result = defs.resolve_job_def(FREIGHT_SYNC_JOB).execute_in_process(instance=instance, raise_on_error=False)
    assert report.success and result.success
    first, second = published_tables(alone), published_tables(in_dagster)
    assert first.keys() == second.keys() and len(first) > 40
    assert {name: rows for name, rows in first.items() if rows != second[name]} == {}
