"""Fixtures of the lake tests: a real S3-compatible server (moto) and a real PostgreSQL catalog server,
each on a free loopback port, one per test module; a fresh bucket prefix and database per test."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from freight_pipeline.lake.local import LocalPostgres, LocalS3, PostgresUnavailable, running_postgres, running_s3
from freight_pipeline.normalize.flatten import to_arrow_batch
from freight_pipeline.simulator.server import RunningSimulator
from freight_pipeline_tests.sync.expected import expected_rows

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def s3() -> Iterator[LocalS3]:
    with running_s3() as server:
        yield server


@pytest.fixture(scope="module")
def postgres() -> Iterator[LocalPostgres]:
    try:
        with running_postgres() as server:
            yield server
    except PostgresUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture
def lake_env(s3: LocalS3, postgres: LocalPostgres) -> dict[str, str]:
    """The lake variables of a new catalog database and a new prefix in the bucket."""
    catalog = postgres.new_database(f"lake_{uuid.uuid4().hex[:8]}")
    return {**s3.env(prefix=f"lake-{uuid.uuid4().hex[:8]}"), **catalog.env()}


def service_env(sim: RunningSimulator) -> dict[str, str]:
    return {"FREIGHT_BASE_URL": sim.base_url, "FREIGHT_USERNAME": sim.username, "FREIGHT_PASSWORD": sim.password}


def write_expected(sim: RunningSimulator, folder: Path) -> Path:
    """What every freight table must hold for ``sim``'s data, as Parquet for a reader process."""
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    for name, table in to_arrow_batch(expected_rows(sim.store)).items():
        pq.write_table(table, folder / f"{name}.parquet")
    return folder


def read_lake(env: dict[str, str], expected: Path, *options: str) -> dict:
    """Run the reader in a process of its own and return what it printed."""
    import json

    done = subprocess.run([sys.executable, "-m", "freight_pipeline_tests.lake.read_lake", str(expected), *options],
                          env={**os.environ, **env}, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def partition_keys(boundaries: list[int]) -> list[str]:
    from freight_pipeline.sync.backfill import id_ranges_between

    return [r.key for r in id_ranges_between(boundaries)]


def even_boundaries(sim: RunningSimulator, writers: int) -> list[int]:
    """Ids cutting the simulator's shipments into ``writers`` partitions of about equal size."""
    ids = sorted(int(doc["id"]) for doc in sim.store.expected_documents())
    return [ids[len(ids) * k // writers] for k in range(1, writers)]
