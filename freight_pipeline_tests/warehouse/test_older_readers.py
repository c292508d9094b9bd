"""The BI tools' engine reads the published warehouse while the pipeline works: duckdb 1.5.x (the lake
environment's python), directly and through SQLAlchemy and duckdb-engine with Superset's URL, each in a
process of its own, pass after pass while ``freight-pipeline sync`` (the whole Dagster job: every stream,
dbt, the publish) runs, every table and mart each time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from freight_pipeline.config import PUBLISH_STORAGE_VERSION_ENV, REPO_ROOT
from freight_pipeline.simulator.server import RunningSimulator, running_simulator
from freight_pipeline.warehouse.publish import published_db_path
from freight_pipeline_tests.warehouse.older import (
    OLDEST_READER,
    older_python,
    rows_here,
    start_reader,
    storage_tag_of,
    version_of,
)

SHIPMENTS = 60
MODES = ("duckdb", "sqlalchemy")
MARTS = ("analytics.fct_shipments", "analytics.fct_on_time_performance", "analytics.fct_transit_times",
         "analytics.fct_shipment_milestones", "analytics.fct_shipment_documents")


def _sync(sim: RunningSimulator, data_dir: Path, home: Path) -> subprocess.Popen[str]:
    """``freight-pipeline sync`` in a child process, as an operator runs it (the default settings)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FREIGHT_") and k != "DAGSTER_HOME"}
    env.update(FREIGHT_BASE_URL=sim.base_url, FREIGHT_USERNAME=sim.username, FREIGHT_PASSWORD=sim.password,
               DAGSTER_HOME=str(home), FREIGHT_RECONCILE_INTERVAL_MINUTES="0")
    assert PUBLISH_STORAGE_VERSION_ENV not in env
    return subprocess.Popen([sys.executable, "-m", "freight_pipeline.cli", "sync", "--data-dir", str(data_dir)],
                            env=env, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finished(proc: subprocess.Popen[str]) -> None:
    _, err = proc.communicate(timeout=280)
    assert proc.returncode == 0, err[-3000:]


def _collect(proc: subprocess.Popen[str], into: list[dict[str, Any]]) -> threading.Thread:
    assert proc.stdout is not None
    out = proc.stdout
    thread = threading.Thread(target=lambda: into.extend(json.loads(line) for line in out), daemon=True)
    thread.start()
    return thread


def _until(condition: Any, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_duckdb_1_5_and_superset_s_driver_read_every_table_while_a_sync_runs(tmp_path: Path) -> None:
    older_python()  # fails under CI without the lake environment, skips elsewhere
    data_dir, home, stop = tmp_path / "data", tmp_path / "dagster_home", tmp_path / "stop"
    db = published_db_path(data_dir)
    with running_simulator(shipments=SHIPMENTS, seed=11) as sim:
        _finished(_sync(sim, data_dir, home))
        before = rows_here(db)  # duckdb 2.0, this environment
        assert before["freight.shipments"] == before["analytics.fct_shipments"] == SHIPMENTS
        assert set(MARTS) <= set(before) and version_of(storage_tag_of(db)) <= OLDEST_READER
        sim.advance_clock(120)
        created, deleted = sim.create_shipments(15), sim.delete_shipments(5)
        sim.modify_shipments(10)

        passes: dict[str, list[dict[str, Any]]] = {mode: [] for mode in MODES}
        readers = {mode: start_reader(db, mode, stop) for mode in MODES}
        threads = [_collect(readers[mode], passes[mode]) for mode in MODES]
        try:
            _until(lambda: all(passes.values()), 60, "a first pass of each reader")
            at_start = {mode: len(seen) for mode, seen in passes.items()}
            _finished(_sync(sim, data_dir, home))
            during = {mode: len(seen) - at_start[mode] for mode, seen in passes.items()}
            after = rows_here(db)
            _until(lambda: all(p[-1].get("rows") == after for p in passes.values() if p), 60,
                   f"each reader to read the second publish: {[p[-1] for p in passes.values()]}")
        finally:
            stop.touch()
            for mode, proc in readers.items():
                proc.wait(timeout=60)
                assert proc.returncode == 0, f"{mode}: {proc.stderr.read() if proc.stderr else ''}"
            for thread in threads:
                thread.join(timeout=10)

    assert after["freight.shipments"] == after["analytics.fct_shipments"] == SHIPMENTS + len(created) - len(deleted)
    assert after != before and set(after) == set(before)
    for mode, seen in passes.items():
        assert [p for p in seen if "error" in p] == [], mode
        assert {version_of(p["duckdb"])[:2] for p in seen} == {OLDEST_READER[:2]}, mode
        assert seen[0]["rows"] == before and seen[-1]["rows"] == after, mode  # both publishes, every table and mart
        assert all(p["rows"] in (before, after) for p in seen), mode  # never a half-published state
        assert during[mode] >= 5, during  # read while the sync ran, not only before and after it
