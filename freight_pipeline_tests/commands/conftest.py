"""Fixtures of the command tests: a small simulator, a published warehouse, and running the real CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from freight_pipeline.config import REPO_ROOT, ServiceSettings
from freight_pipeline.lake.backend import storage_from_env
from freight_pipeline.simulator.server import RunningSimulator, running_simulator
from freight_pipeline.sync.runner import sync_all

SERVICE_ENV = ("FREIGHT_BASE_URL", "FREIGHT_USERNAME", "FREIGHT_PASSWORD", "FREIGHT_DATA_DIR", "DAGSTER_HOME")


@pytest.fixture(scope="module")
def sim() -> Iterator[RunningSimulator]:
    with running_simulator(shipments=100, seed=5) as running:
        yield running


@pytest.fixture(scope="module")
def published(sim: RunningSimulator, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory with a published warehouse of ``sim`` (plain ``sync_all``, no Dagster, no dbt)."""
    data_dir = tmp_path_factory.mktemp("published")
    sync_all(ServiceSettings(sim.base_url, sim.username, sim.password), data_dir, backend=storage_from_env())
    return data_dir


def cli_env(**values: str) -> dict[str, str]:
    """This process's environment without the pipeline's settings, plus ``values``."""
    env = {k: v for k, v in os.environ.items() if k not in SERVICE_ENV}
    env.update(values)
    return env


def run_cli(args: list[str], env: dict[str, str], timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """``freight-pipeline <args>`` in a child process, from the repository root."""
    return subprocess.run(
        [sys.executable, "-m", "freight_pipeline.cli", *args],
        env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout, check=False,
    )
