"""Fixtures of the command tests: a small simulator, a published warehouse, and running the real CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


STOPPED_IN_A_QUERY = textwrap.dedent("""
    import importlib, os, signal, sys, threading
    import duckdb
    from freight_pipeline.cli import main

    def stopped_in_a_query(*args, **kwargs):  # a step that SIGTERM (or Ctrl-C) finds in a DuckDB query
        threading.Timer(0.2, os.kill, (os.getpid(), getattr(signal, sys.argv[1]))).start()
        duckdb.connect().execute("SELECT count(*) FROM range(10000000000)").fetchall()  # 'Query interrupted'
        raise AssertionError("the query was not interrupted")

    module, _, where = sys.argv[2].partition(":")
    owner, _, name = where.rpartition(".")
    setattr(getattr(importlib.import_module(module), owner), name, stopped_in_a_query)
    sys.exit(main(sys.argv[3:]))
""")
"""A script: ``freight-pipeline <argv[3:]>`` with ``argv[2]`` (``module:Class.method``) replaced by a DuckDB query
that the stop ``argv[1]`` (``SIGTERM``, ``SIGINT``) comes to while it runs."""


def run_stopped_in_a_query(stop: str, target: str, args: list[str], env: dict[str, str]) -> \
        subprocess.CompletedProcess[str]:
    """:data:`STOPPED_IN_A_QUERY` in a child process, from the repository root."""
    return subprocess.run([sys.executable, "-c", STOPPED_IN_A_QUERY, stop, target, *args], env=env, cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=240, check=False)


def unpublished(data_dir: Path, *, published: bool = True) -> list[dict[str, Any]]:
    """The runs after the last publish, as ``freight-pipeline status --json`` says them (exit 0, or 1 when
    nothing was ``published`` there yet)."""
    done = run_cli(["status", "--data-dir", str(data_dir), "--json"], cli_env())
    assert done.returncode == (0 if published else 1) and done.stdout, done.stderr
    return list(json.loads(done.stdout)["unpublished_runs"])


def shown(runs: list[dict[str, Any]]) -> list[tuple[str, str, str | None]]:
    """Each run of :func:`unpublished`: stream (or the job's ``job <step>``), status, error."""
    return [(run["stream"], run["status"], run["error"]) for run in runs]
