"""kill -9 at random instants: the working database opens and its cursor never runs ahead of its rows."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb

from freight_pipeline.config import REPO_ROOT
from freight_pipeline.warehouse.publish import clean_leftovers, published_db_path
from freight_pipeline.warehouse.store import Warehouse
from freight_pipeline_tests.warehouse.helpers import TABLES

WRITER = Path(__file__).with_name("crash_writer.py")
TRIALS = 12


def check_consistent(con: duckdb.DuckDBPyConnection) -> int:
    """Cursor {"max_id": n}: shipments 1..n exist with all their rows, nothing beyond n. Returns n."""
    stored = con.execute("SELECT cursor_value FROM freight_meta.sync_state WHERE stream = 'shipments'").fetchall()
    max_id = json.loads(stored[0][0])["max_id"] if stored else 0
    parents = {r[0] for r in con.execute("SELECT shipment_id FROM freight.parents").fetchall()}
    raw = {r[0] for r in con.execute("SELECT shipment_id FROM freight_meta.raw_shipments").fetchall()}
    assert parents == raw == set(range(1, max_id + 1))
    per_unit = con.execute(
        "SELECT sum(n), count(DISTINCT shipment_id), min(n), max(n) FROM "
        "(SELECT shipment_id, count(*) AS n FROM freight.lines GROUP BY shipment_id)"
    ).fetchall()[0]
    assert per_unit[:2] == (3 * max_id, max_id) or max_id == 0
    if max_id:
        assert per_unit[2:] == (3, 3)
        assert con.execute("SELECT count(*) FROM freight.marks").fetchall() == [(max_id,)]
    return max_id


def test_kill_9_never_leaves_the_cursor_ahead_of_the_data(tmp_path: Path) -> None:
    rng = random.Random(20261122)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    progress = []
    wal_seen = 0
    for trial in range(TRIALS):
        # Odd trials checkpoint after almost every commit (kills hit checkpoints), even ones keep a WAL.
        args = [sys.executable, str(WRITER), str(tmp_path), *(["8KB"] if trial % 2 else [])]
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, env=env)
        assert proc.stdout is not None
        line = proc.stdout.readline()  # at least one batch committed in this trial
        assert line.strip(), "the writer died before its first batch"
        time.sleep(rng.uniform(0.0, 0.25))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        proc.stdout.close()
        wal = tmp_path / "work" / "warehouse.duckdb.wal"
        wal_seen += wal.exists() and wal.stat().st_size > 0
        with Warehouse(tmp_path, TABLES) as wh:  # replays the WAL, like the next run would
            max_id = check_consistent(wh.con)
        progress.append(max_id)
        published = published_db_path(tmp_path)
        if published.exists():  # only ever replaced by a complete file
            with duckdb.connect(str(published), read_only=True) as con:
                assert check_consistent(con) <= max_id
    assert progress == sorted(progress) and progress[-1] > progress[0]
    assert wal_seen > 0  # some kills left committed work in the WAL only, and it was recovered
    clean_leftovers(tmp_path)
