"""Fixtures of the lake tests: a real S3-compatible server (moto) and a real PostgreSQL catalog server,
each on a free loopback port, one per test session (per xdist worker: started once, not once a module);
a fresh bucket prefix and database per test."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from freight_pipeline.lake.local import LocalPostgres, LocalS3, PostgresUnavailable, running_postgres, running_s3

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def s3() -> Iterator[LocalS3]:
    with running_s3() as server:
        yield server


@pytest.fixture(scope="session")
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
