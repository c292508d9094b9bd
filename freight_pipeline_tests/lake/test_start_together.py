"""Writers that start at the same moment on things none of them has created yet (issue 58): a new lake catalog
attached by several processes at once (SQLite and PostgreSQL), and the backfill's partitions launched as the
docs say, one ``freight-pipeline sync --job freight_backfill_job --partition KEY`` process each, on a fresh
``DAGSTER_HOME`` and a catalog that does not exist yet, three times in a row; then the incremental job takes
over and the lake equals the source."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from bench.lake_harness import even_boundaries, partition_keys, read_lake, service_env, write_expected
from freight_pipeline.lake.connect import connect_lake
from freight_pipeline.lake.local import LocalPostgres
from freight_pipeline.lake.settings import LakeSettings
from freight_pipeline.simulator.server import RunningSimulator, running_simulator
from freight_pipeline_tests.lake.conftest import REPO

WRITERS = 3
ROUNDS = 3
SHIPMENTS = 30
CLI = str(Path(sys.executable).parent / "freight-pipeline")


def sqlite_lake(folder: Path) -> dict[str, str]:
    """A SQLite catalog in a folder that does not exist yet, the data beside it."""
    return {"FREIGHT_LAKE_CATALOG_URI": f"sqlite:///{folder}/catalog/lake.sqlite",
            "FREIGHT_LAKE_DATA_URI": str(folder / "lake-data")}


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_new_catalog_attached_by_several_processes_at_once(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Each process imports first, then all attach at one instant: one creates the catalog, the others wait
    for it (SQLite: the file lock beside it) or try again (PostgreSQL: its ``duplicate key`` on the tables
    being created), and every one ends attached."""
    for round_ in range(2):
        folder = tmp_path / f"round{round_}"
        if kind == "sqlite":
            env = sqlite_lake(folder)
        else:
            postgres: LocalPostgres = request.getfixturevalue("postgres")
            env = {**postgres.new_database(f"lake_{uuid.uuid4().hex[:8]}").env(),
                   "FREIGHT_LAKE_DATA_URI": str(folder / "lake-data")}
        at = time.time() + 3.0  # after every child's imports
        children = [subprocess.Popen(
            [sys.executable, "-m", "freight_pipeline_tests.lake.attach_at", str(at), str(folder / f"scratch{n}")],
            env={**os.environ, **env}, cwd=REPO, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        ) for n in range(WRITERS)]
        said = [child.communicate(timeout=120)[0] for child in children]
        assert [child.returncode for child in children] == [0] * WRITERS, said
        lake = LakeSettings.configured(env)
        assert lake is not None
        with connect_lake(lake, folder / "scratch", "256MB", read_only=True) as con:
            assert con.execute("SELECT count(*) FROM ducklake_snapshots('lake')").fetchone() == (1,)


@pytest.fixture(scope="module")
def sim() -> RunningSimulator:
    with running_simulator(shipments=SHIPMENTS, seed=58) as running:
        yield running


def sync(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([CLI, "sync", *args], env={**os.environ, **env}, cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


# the hang guard, not a speed bound: five rounds of three Dagster runs at once, then the incremental job
@pytest.mark.timeout(900)
def test_backfill_partitions_started_together_on_a_fresh_instance(sim: RunningSimulator, tmp_path: Path) -> None:
    boundaries = even_boundaries(sim, WRITERS)
    keys = partition_keys(boundaries)
    for round_ in range(ROUNDS):
        folder = tmp_path / f"round{round_}"
        env = {**service_env(sim), **sqlite_lake(folder), "DAGSTER_HOME": str(folder / "dagster"),
               "FREIGHT_DATA_DIR": str(folder / "data"), "FREIGHT_RECONCILE_INTERVAL_MINUTES": "0",
               "FREIGHT_BACKFILL_ID_BOUNDARIES": ",".join(map(str, boundaries))}
        (folder / "dagster").mkdir(parents=True)  # the instance's folder, empty: its dagster.yaml and storage are new
        partitions = {key: sync(env, "--job", "freight_backfill_job", "--partition", key) for key in keys}
        said = {key: proc.communicate(timeout=600)[0] for key, proc in partitions.items()}
        failed = {key: said[key][-2000:] for key, proc in partitions.items() if proc.returncode != 0}
        assert failed == {}, f"round {round_ + 1}: {failed}"
        lake = LakeSettings.configured(env)
        assert lake is not None
        with connect_lake(lake, folder / "scratch", "256MB", read_only=True) as con:
            held = dict(con.execute("SELECT stream, cursor_value FROM freight_meta.sync_state").fetchall())
            assert con.execute("SELECT count(*) FROM freight.shipments").fetchone() == (SHIPMENTS,)
        assert all('"complete": true' in str(held[f"shipments@{key}"]) for key in keys), held

    # the last round's instance and lake: the incremental job takes over, builds the marts, publishes
    incremental = sync(env)
    output = incremental.communicate(timeout=600)[0]
    assert incremental.returncode == 0, output[-4000:]
    latest = read_lake(env, write_expected(sim, tmp_path / "expected"), "--and-published")
    published = latest.pop("published")
    assert latest["differences"] == {} and published["differences"] == {}, latest
    assert latest["rows"]["shipments"] == SHIPMENTS
