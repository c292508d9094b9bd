"""Lake mode end to end: a real PostgreSQL catalog, a real S3-compatible server, the real simulator,
Dagster jobs run by the ``freight-pipeline`` command in processes of their own, readers in processes
of their own. Three backfill partitions write at once; the incremental job takes over, builds the
marts with dbt in the lake and publishes a snapshot; every table then equals the source."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.lake_harness import even_boundaries, partition_keys, read_lake, service_env, write_expected
from freight_pipeline.commands.execute import dagster_instance
from freight_pipeline.commands.report import read_report
from freight_pipeline.config import environ
from freight_pipeline.lake.backend import storage_from_env
from freight_pipeline.lake.connect import connect_lake
from freight_pipeline.lake.local import LocalS3
from freight_pipeline.lake.settings import LakeSettings
from freight_pipeline.simulator.server import RunningSimulator, running_simulator
from freight_pipeline_tests.lake.conftest import REPO

SHIPMENTS = 90
WRITERS = 3
CLI = str(Path(sys.executable).parent / "freight-pipeline")


@pytest.fixture
def sim() -> RunningSimulator:
    with running_simulator(shipments=SHIPMENTS, seed=23) as running:
        yield running


def run_cli(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([CLI, "sync", *args], env={**os.environ, **env}, cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def finished(proc: subprocess.Popen[str]) -> str:
    output, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, output[-4000:]
    return output


# the hang guard, not a speed bound: five Dagster runs of their own (three writers at once, then two
# incremental runs with dbt in the lake) take about 160 s alone on 2 cores, and passed 300 s (the suite's
# default) beside the rest of `make test` on a loaded machine; each run may take 600 s (finished)
@pytest.mark.timeout(900)
def test_three_partition_writers_then_the_incremental_job_end_exact(
    sim: RunningSimulator, lake_env: dict[str, str], s3: LocalS3, tmp_path: Path
) -> None:
    boundaries = even_boundaries(sim, WRITERS)
    env = {**lake_env, **service_env(sim), "FREIGHT_DATA_DIR": str(tmp_path / "data"),
           "DAGSTER_HOME": str(tmp_path / "dagster"), "FREIGHT_RECONCILE_INTERVAL_MINUTES": "0",
           "FREIGHT_BACKFILL_ID_BOUNDARIES": ",".join(map(str, boundaries))}
    (tmp_path / "dagster").mkdir()
    with environ({"DAGSTER_HOME": env["DAGSTER_HOME"]}), dagster_instance():
        pass  # the instance's SQLite storage exists before three runs start at once (they race to create it)
    keys = partition_keys(boundaries)
    assert len(keys) == WRITERS

    writers = [run_cli(env, "--job", "freight_backfill_job", "--partition", key) for key in keys]
    for writer in writers:
        finished(writer)

    lake = LakeSettings.from_env(env)
    assert lake is not None
    with connect_lake(lake, tmp_path / "scratch", "256MB", read_only=True) as con:
        held = {stream: value for stream, value in con.execute(
            "SELECT stream, cursor_value FROM freight_meta.sync_state").fetchall()}
        written = con.execute("SELECT count(*) FROM freight.shipments").fetchone()[0]
    assert written == SHIPMENTS
    assert {f"shipments@{key}" for key in keys} <= set(held), held
    assert "shipments" not in held  # the incremental stream has not run yet

    finished(run_cli(env))

    expected = write_expected(sim, tmp_path / "expected")
    latest = read_lake(env, expected)
    assert latest["differences"] == {}, latest
    assert latest["rows"]["shipments"] == SHIPMENTS
    published = read_lake(env, expected, "--published")
    assert published["differences"] == {}, published

    with connect_lake(lake, tmp_path / "scratch", "256MB", read_only=True) as con:
        cursor = con.execute("SELECT cursor_value FROM freight_meta.sync_state WHERE stream = 'shipments'").fetchone()
        marts = con.execute("SELECT count(*) FROM analytics.fct_shipments").fetchone()[0]
        build = con.execute("SELECT status FROM freight_meta.sync_runs WHERE stream = 'dbt_build'").fetchall()
        snapshots = con.execute("SELECT count(*) FROM freight_meta.published_snapshots").fetchone()[0]
    assert cursor is not None  # the incremental stream took over and holds its own cursor now
    assert marts == SHIPMENTS
    assert build == [("success",)]
    assert snapshots == 1
    with environ(env):  # `freight-pipeline status` and the demo's summary read the lake's published snapshot
        report = read_report(tmp_path / "data", storage_from_env())
    assert report["published"]["version"].startswith("snapshot ")
    assert report["tables"]["freight.shipments"] == SHIPMENTS
    assert report["tables"]["analytics.fct_shipments"] == SHIPMENTS
    assert "***" not in report["database"] and "postgres:" in report["database"]
    prefix = lake.data_uri.removeprefix(f"s3://{s3.bucket}/")
    parquet = [key for key in s3.keys(prefix) if key.endswith(".parquet")]
    assert any("/freight/shipments/" in key for key in parquet), parquet[:5]
    assert any("/analytics/" in key for key in parquet), parquet[:5]

    # the service changes and deletes; the next incremental run follows, the marts too
    changed = sim.store.changes.modify_shipments(12)
    deleted = sim.store.changes.delete_shipments(5)
    assert changed and deleted
    finished(run_cli(env))
    after = read_lake(env, write_expected(sim, tmp_path / "expected-after"))
    assert after["differences"] == {}, after
    assert after["rows"]["shipments"] == SHIPMENTS - len(deleted)
