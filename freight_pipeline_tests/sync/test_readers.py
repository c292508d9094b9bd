"""Readers of the published warehouse during a sync: they keep working, and the sync does not fail."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import duckdb

from freight_pipeline.simulator.server import RunningSimulator
from freight_pipeline_tests.sync.conftest import SyncFn

READER = """
import json, sys, time, duckdb
from pathlib import Path
db, stop = sys.argv[1], Path(sys.argv[2])
con = duckdb.connect(db, read_only=True)   # an analyst's session, held for the whole sync
while not stop.exists():
    try:
        n = con.execute("SELECT count(*) FROM freight.shipments").fetchall()[0][0]
        print(json.dumps({"shipments": n}), flush=True)
    except Exception as exc:
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
    time.sleep(0.02)
"""


def test_a_reader_holding_the_published_file_keeps_working_during_a_sync(
    small_sim: RunningSimulator, small_sync: SyncFn, tmp_path: Path
) -> None:
    small_sync()
    published = tmp_path / "warehouse.duckdb"
    with duckdb.connect(str(published), read_only=True) as con:  # closed: see test end
        count_before = con.execute("SELECT count(*) FROM freight.shipments").fetchall()[0][0]
    stop = tmp_path / "stop-reader"
    reader = subprocess.Popen([sys.executable, "-c", READER, str(published), str(stop)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.0)  # the reader is connected and querying
        small_sim.advance_clock(60)
        created = small_sim.create_shipments(4)
        results = small_sync()
        time.sleep(0.3)
    finally:
        stop.touch()
        out, err = reader.communicate(timeout=30)
    answers = [json.loads(line) for line in out.splitlines()]
    assert all(r.status == "success" for r in results.values())
    assert reader.returncode == 0, err
    assert [a for a in answers if "error" in a] == []
    assert len(answers) > 10 and {a["shipments"] for a in answers} == {count_before}  # its snapshot held
    # A new session sees the new publish. (Within one process DuckDB reuses an open database
    # instance for the same path: a session opened while an older one is still open sees the old file.)
    with duckdb.connect(str(published), read_only=True) as fresh:
        assert fresh.execute("SELECT count(*) FROM freight.shipments").fetchall()[0][0] == count_before + len(created)
