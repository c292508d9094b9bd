"""Lake mode end to end, one scenario through every writer of the lake: a real PostgreSQL catalog, a real
S3-compatible server, the real simulator, writers and readers in processes of their own.

1. Three backfill writers at once, one SIGKILLed inside a commit: the lake stays readable and consistent
   (another process finds no shipment half written), the killed partition is not marked complete, and
   the incremental sync refuses to take over until it is.
2. The killed partition run again as the Dagster backfill job's partition, by the ``freight-pipeline``
   command: every partition complete, every shipment written, the incremental stream not yet run.
3. The incremental job through Dagster, by the command: it takes over, builds the marts with dbt in the
   lake (a full build: never built before) and publishes a snapshot; every table, latest and published,
   then equals the source; ``freight-pipeline status`` reads the published snapshot; Parquet in S3.
4. The service changes and deletes; the job without Dagster, in this process (the dbt worker building
   with the profile's ``lake`` target): an incremental build testing the changed rows, a published
   snapshot; every table and the marts then follow the source.

One scenario, not three tests each with its writers, syncs and dbt builds (issue 35): each property is
asserted where the scenario passes it.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from bench.lake_harness import (
    even_boundaries,
    kill_inside_commit,
    partition_keys,
    read_lake,
    service_env,
    start_writer,
    write_expected,
)
from freight_pipeline.cli import main
from freight_pipeline.client import AuthenticationError
from freight_pipeline.commands.report import read_report
from freight_pipeline.config import LAKE_CATALOG_URI_ENV, LAKE_DATA_URI_ENV, ServiceSettings, environ
from freight_pipeline.job.run import MARTS_STEP, PUBLISH_STEP, run_job
from freight_pipeline.lake.backend import storage_from_env
from freight_pipeline.lake.connect import connect_lake
from freight_pipeline.lake.local import LocalS3
from freight_pipeline.lake.settings import LAKE_DBT_TARGET, LakeSettings
from freight_pipeline.marts.worker import DbtWorker
from freight_pipeline.simulator.server import RunningSimulator, running_simulator
from freight_pipeline.sync.backfill import BackfillIncomplete
from freight_pipeline.sync.runner import sync_all
from freight_pipeline.sync.settings import SyncSettings
from freight_pipeline.warehouse.writer_lock import partition_lock, writer_lock
from freight_pipeline_tests.lake.conftest import REPO
from freight_pipeline_tests.sync.settings import TEST_SETTINGS

SHIPMENTS = 90
"""Three partitions of 30: the killed writer (``bench.lake_writer``, batches of 5) would make 11 commits (the
schema's, the run log's, six batches', the cursor's, ...), so the kill lands in a batch with batches after it."""
WRITERS = 3
KILLED_AT_COMMIT = 4
"""The killed writer's fourth COMMIT: its second batch."""
OTHERS_BATCH = 10
"""The two other writers' batches: three a partition, committed while the killed one writes its first two."""
CLI = str(Path(sys.executable).parent / "freight-pipeline")


@pytest.fixture
def sim() -> RunningSimulator:
    with running_simulator(shipments=SHIPMENTS, seed=29) as running:
        yield running


def run_cli(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([CLI, "sync", *args], env={**os.environ, **env}, cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def finished(proc: subprocess.Popen[str]) -> str:
    output, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, output[-4000:]
    return output


# the hang guard, not a speed bound: four writer processes (one killed), two Dagster runs of their own and
# a run of the job here (two with dbt in the lake); each child may take 600 s (finished)
@pytest.mark.timeout(900)
def test_writers_one_killed_then_the_jobs_end_exact(
    sim: RunningSimulator, lake_env: dict[str, str], s3: LocalS3, tmp_path: Path
) -> None:
    rng = random.Random(12)
    boundaries = even_boundaries(sim, WRITERS)
    keys = partition_keys(boundaries)
    assert len(keys) == WRITERS
    env = {**lake_env, **service_env(sim)}
    data_dir = tmp_path / "data"
    lake = LakeSettings.configured(env)
    assert lake is not None
    service = ServiceSettings(sim.base_url, sim.username, sim.password)
    expected = write_expected(sim, tmp_path / "expected")

    # 1. three backfill writers at once; one SIGKILLed inside a commit while the two others write
    victim = keys[rng.randrange(len(keys))]
    others = {key: start_writer(env, key, boundaries, data_dir, tmp_path / f"{key}.log", batch=OTHERS_BATCH)
              for key in keys if key != victim}
    killed = start_writer(env, victim, boundaries, data_dir)
    begun = kill_inside_commit(killed, commit=KILLED_AT_COMMIT, delay=rng.uniform(0.0, 0.03))
    for key, proc in others.items():
        assert proc.wait(timeout=600) == 0, (tmp_path / f"{key}.log").read_text()[-3000:]
    assert killed.returncode == -signal.SIGKILL, f"the writer ended before the kill ({begun} commits)"
    # another process reads the lake: every shipment it holds is whole and equal to the source
    after_kill = read_lake(env, expected, "--held-only")
    assert after_kill["differences"] == {}, after_kill
    assert after_kill["rows"]["shipments"] < SHIPMENTS
    with connect_lake(lake, tmp_path / "scratch", "256MB", read_only=True) as con:
        cursor = con.execute("SELECT cursor_value FROM freight_meta.sync_state WHERE stream = ?",
                             [f"shipments@{victim}"]).fetchone()
    assert cursor is None or '"complete": true' not in cursor[0]
    with environ(lake_env), pytest.raises(BackfillIncomplete, match=victim):
        sync_all(service, data_dir, TEST_SETTINGS, publish_after=False, backend=storage_from_env())

    # 2. the killed partition again: the Dagster backfill job's partition, run by the command
    cli_env = {**env, "FREIGHT_DATA_DIR": str(data_dir), "DAGSTER_HOME": str(tmp_path / "dagster"),
               "FREIGHT_RECONCILE_INTERVAL_MINUTES": "0",
               "FREIGHT_BACKFILL_ID_BOUNDARIES": ",".join(map(str, boundaries))}
    (tmp_path / "dagster").mkdir()
    with writer_lock(data_dir, "another-run", name=partition_lock(victim)):  # the partition running elsewhere
        twice = run_cli(cli_env, "--job", "freight_backfill_job", "--partition", victim)
        output, _ = twice.communicate(timeout=600)
    assert twice.returncode != 0 and f"partition {victim} is being written by another run" in output, output[-4000:]
    finished(run_cli(cli_env, "--job", "freight_backfill_job", "--partition", victim))
    with connect_lake(lake, tmp_path / "scratch", "256MB", read_only=True) as con:
        held = dict(con.execute("SELECT stream, cursor_value FROM freight_meta.sync_state").fetchall())
        written = con.execute("SELECT count(*) FROM freight.shipments").fetchone()[0]
    assert {f"shipments@{key}" for key in keys} <= set(held), held
    assert all('"complete": true' in str(held[f"shipments@{key}"]) for key in keys), held
    assert "shipments" not in held  # the incremental stream has not run yet
    assert written == SHIPMENTS

    # 3. the incremental job through Dagster, by the command: take-over, a full dbt build in the lake, publish
    output = finished(run_cli(cli_env))
    assert "the marts were never built by this version" in output, output[-4000:]  # a full build
    latest = read_lake(env, expected, "--and-published")  # one reader process: the latest state, then the published
    published = latest.pop("published")
    assert latest["differences"] == {}, latest
    assert latest["rows"]["shipments"] == SHIPMENTS
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
    with environ(cli_env):  # `freight-pipeline status` and the demo's summary read the lake's published snapshot
        report = read_report(data_dir, storage_from_env())
    assert report["published"]["version"].startswith("snapshot ")
    # where a table's files are: the catalog's to say (a mart's live under <table>__dbt_tmp/, dbt's name as it built)
    listing = re.search(r"ducklake_list_files\([^)]*\)", report["parquet"])
    assert listing, report["parquet"]
    with connect_lake(lake, tmp_path / "scratch", "256MB", read_only=True) as con:
        for schema, table in (("freight", "shipments"), ("analytics", "fct_shipments")):
            call = listing[0].replace("<schema>", schema).replace("<table>", table)
            files = [row[0] for row in con.execute(f"SELECT data_file FROM {call}").fetchall()]
            assert files and all(f"/{schema}/{table}" in file and file.endswith(".parquet") for file in files), files
    assert report["tables"]["freight.shipments"] == SHIPMENTS
    assert report["tables"]["analytics.fct_shipments"] == SHIPMENTS
    assert "***" not in report["database"] and "postgres:" in report["database"]
    prefix = lake.data_uri.removeprefix(f"s3://{s3.bucket}/")
    parquet = [key for key in s3.keys(prefix) if key.endswith(".parquet")]
    assert any("/freight/shipments/" in key for key in parquet), parquet[:5]
    assert any("/analytics/" in key for key in parquet), parquet[:5]

    # 4. the service changes and deletes; the job without Dagster follows: an incremental build, published
    changed = sim.store.changes.modify_shipments(12)
    deleted = sim.store.changes.delete_shipments(5)
    assert changed and deleted
    with environ(lake_env):
        backend = storage_from_env()
    assert backend.dbt_target == LAKE_DBT_TARGET
    # the lake named by the backend alone (as a Dagster resource's fields name it), no FREIGHT_LAKE_* variable left
    # for the dbt process: the worker is handed them (was: the marts failed, "the dbt target 'lake' needs ...")
    with environ({name: value for name, value in lake_env.items() if not name.startswith("FREIGHT_LAKE_")}):
        assert not [name for name in os.environ if name.startswith("FREIGHT_LAKE_")]
        with DbtWorker.for_run(data_dir, backend.dbt_target,  # its tests on the changed rows
                               target_env=backend.dbt_environment()) as worker:
            again = run_job(service, data_dir, SyncSettings(reconcile_interval=None), backend, worker)
    assert again.success, again.steps
    assert again.marts is not None and again.marts.summary is not None
    assert again.marts.plan.changed_rows and not again.marts.plan.full_refresh, again.marts.plan
    assert next(step for step in again.steps if step.name == MARTS_STEP).status == "success"
    publish = next(step for step in again.steps if step.name == PUBLISH_STEP)
    assert publish.line.startswith("published snapshot "), publish.line
    after = read_lake(env, write_expected(sim, tmp_path / "expected-after"))
    assert after["differences"] == {}, after
    assert after["rows"]["shipments"] == SHIPMENTS - len(deleted)
    with connect_lake(lake, tmp_path / "scratch", "256MB", read_only=True) as con:
        assert con.execute("SELECT count(*) FROM analytics.fct_shipments").fetchone() == (SHIPMENTS - len(deleted),)
        assert con.execute("SELECT count(*) FROM freight_meta.published_snapshots").fetchone() == (2,)
        # every table and column described, as in the embedded file: the specs', the marts' YAML
        described = con.execute(
            "SELECT schema_name, count(*), count(nullif(comment, '')) FROM ("
            "SELECT schema_name, comment FROM duckdb_tables() WHERE database_name = current_database() UNION ALL "
            "SELECT schema_name, comment FROM duckdb_columns() WHERE database_name = current_database() AND "
            "(schema_name, table_name) IN (SELECT (schema_name, table_name) FROM duckdb_tables())) "
            "WHERE schema_name IN ('freight', 'freight_meta', 'freight_history', 'analytics') GROUP BY ALL ORDER BY 1"
        ).fetchall()
    assert [schema for schema, _, _ in described] == ["analytics", "freight", "freight_history", "freight_meta"]
    assert [(schema, total) for schema, total, _ in described] == [(schema, held) for schema, _, held in described]


def test_status_before_the_first_publish_says_nothing_is_published(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The lake's only sync failed (a wrong password): its catalog holds the tables, no published snapshot. Status
    says so and shows the failed run, exit 1, as the embedded warehouse's (``commands/test_status.py``), not the
    latest snapshot as a published warehouse of empty tables, exit 0."""
    env = {LAKE_CATALOG_URI_ENV: f"sqlite:///{tmp_path}/catalog.sqlite", LAKE_DATA_URI_ENV: str(tmp_path / "lake")}
    data_dir = tmp_path / "data"
    with running_simulator(shipments=8, seed=3) as running, environ(env):
        with pytest.raises(AuthenticationError):
            sync_all(ServiceSettings(running.base_url, running.username, "wrong-password"), data_dir,
                     run_id="run-refused", backend=storage_from_env())
        assert main(["status", "--data-dir", str(data_dir)]) == 1
        out, err = capsys.readouterr()
        assert "nothing published yet in the DuckLake catalog sqlite:" in err, err
        assert "published warehouse" not in out + err
        assert re.search(r"^\s+shipments\s+run-refused\s+failed\s", out, re.M), out
        assert main(["status", "--data-dir", str(data_dir), "--json"]) == 1
        report = json.loads(capsys.readouterr().out)
    assert report["published"] is None
    assert ("shipments", "run-refused", "failed") in {
        (run["stream"], run["run_id"], run["status"]) for run in report["unpublished_runs"]}
