"""Crash consistency: the sync process is killed with SIGKILL at random moments.

After each kill the working database must never claim more than it holds (every source shipment at
or before the shipments cursor is held in its current version), and a rerun must end with the
warehouse exactly equal to the source. The source changes between trials, never during one.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path

import duckdb

from freight_pipeline.datetimes import parse_iso_datetime, to_utc
from freight_pipeline.simulator.server import running_simulator
from freight_pipeline.sync.cursor import ShipmentKey
from freight_pipeline_tests.sync.expected import assert_converged

TRIALS = 10
REPO = Path(__file__).resolve().parents[2]


def start_sync(env: dict[str, str], data_dir: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "freight_pipeline_tests.sync.crash_sync", str(data_dir)],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def run_to_completion(env: dict[str, str], data_dir: Path) -> float:
    started = time.monotonic()
    proc = start_sync(env, data_dir)
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0 and "done" in out, f"rerun failed ({proc.returncode}): {err[-2000:]}"
    return time.monotonic() - started


def cursor_overreach(store, work_db: Path) -> list[int]:
    """Source shipments at or before the stored cursor that the warehouse does not hold as they are."""
    with duckdb.connect(str(work_db), read_only=True) as con:
        con.execute("SET TimeZone = 'UTC'")
        stored = con.execute("SELECT cursor_value FROM freight_meta.sync_state WHERE stream = 'shipments'").fetchall()
        if not stored:
            return []
        held = dict(con.execute("SELECT shipment_id, last_modified_at FROM freight_meta.raw_shipments").fetchall())
    cursor = ShipmentKey.from_json(stored[0][0])
    behind = []
    for doc in store.expected_documents():
        if ShipmentKey.of_shipment(doc) <= cursor:
            current = to_utc(parse_iso_datetime(doc["last_modified_date_time"]))
            if held.get(doc["id"]) != current:
                behind.append(doc["id"])
    return behind


def test_sigkill_at_random_moments_never_corrupts_and_reruns_converge(tmp_path: Path) -> None:
    rng = random.Random(20261122)
    data_dir = tmp_path / "data"
    with running_simulator(shipments=120, seed=5) as sim:
        env = {**os.environ, "FREIGHT_BASE_URL": sim.base_url, "FREIGHT_USERNAME": sim.username,
               "FREIGHT_PASSWORD": sim.password, "PYTHONPATH": str(REPO)}
        run_to_completion(env, data_dir)
        assert_converged(sim.store, data_dir / "warehouse.duckdb")
        killed = attempts = 0
        run_time = 2.0  # seconds an incremental run takes here, re-measured on every rerun
        while killed < TRIALS and attempts < 2 * TRIALS:
            attempts += 1
            sim.advance_clock(rng.randint(1, 900))
            sim.modify_shipments(rng.randint(5, 40))
            sim.create_shipments(rng.randint(0, 5))
            sim.delete_shipments(rng.randint(0, 3))
            if rng.random() < 0.3:
                sim.touch_shipments(sim.store.live_shipment_ids()[:60])  # a burst in one second
            proc = start_sync(env, data_dir)
            time.sleep(rng.uniform(0.25, 0.95) * run_time)
            if proc.poll() is None:
                proc.kill()
                killed += 1
            proc.communicate(timeout=60)
            assert cursor_overreach(sim.store, data_dir / "work" / "warehouse.duckdb") == []
            run_time = run_to_completion(env, data_dir)
            assert_converged(sim.store, data_dir / "warehouse.duckdb")
        assert killed == TRIALS, f"only {killed} of {attempts} runs were killed before they finished"
