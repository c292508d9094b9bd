"""The harness of the lake runs, shared by ``bench/lake.py`` and the lake tests: the service variables
of a running simulator, backfill partitions of about equal size, the expected rows as Parquet, the
reader process (:mod:`bench.lake_reader`) and the backfill writer processes (:mod:`bench.lake_writer`)
with the SIGKILL inside a chosen COMMIT.

The child processes run ``python -m bench.<module>`` from the checkout (the current interpreter).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq

from bench.expected_rows import expected_rows
from freight_pipeline.normalize.flatten import to_arrow_batch
from freight_pipeline.simulator.server import RunningSimulator
from freight_pipeline.sync.backfill import id_ranges_between

REPO = Path(__file__).resolve().parents[1]


def service_env(sim: RunningSimulator) -> dict[str, str]:
    return {"FREIGHT_BASE_URL": sim.base_url, "FREIGHT_USERNAME": sim.username, "FREIGHT_PASSWORD": sim.password}


def write_expected(sim: RunningSimulator, folder: Path) -> Path:
    """What every freight table must hold for ``sim``'s data, as Parquet for a reader process."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, table in to_arrow_batch(expected_rows(sim.store)).items():
        pq.write_table(table, folder / f"{name}.parquet")
    return folder


def read_lake(env: dict[str, str], expected: Path, *options: str) -> dict:
    """Run the reader in a process of its own and return what it printed."""
    done = subprocess.run([sys.executable, "-m", "bench.lake_reader", str(expected), *options],
                          env={**os.environ, **env}, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def partition_keys(boundaries: list[int]) -> list[str]:
    return [r.key for r in id_ranges_between(boundaries)]


def even_boundaries(sim: RunningSimulator, writers: int) -> list[int]:
    """Ids cutting the simulator's shipments into ``writers`` partitions of about equal size."""
    ids = sorted(int(doc["id"]) for doc in sim.store.reader.expected_documents())
    return [ids[len(ids) * k // writers] for k in range(1, writers)]


def start_writer(env: dict[str, str], key: str, boundaries: list[int], data_dir: Path, log: Path | None = None,
                 batch: int | None = None) -> subprocess.Popen[str]:
    output = subprocess.PIPE if log is None else log.open("w")
    return subprocess.Popen(
        [sys.executable, "-m", "bench.lake_writer", key, ",".join(map(str, boundaries)),
         str(data_dir), *([str(batch)] if batch else [])],
        env={**os.environ, **env}, cwd=REPO, text=True, stdout=output, stderr=subprocess.STDOUT,
    )


def kill_inside_commit(proc: subprocess.Popen[str], commit: int, delay: float) -> int:
    """SIGKILL ``proc`` ``delay`` seconds after its ``commit``-th COMMIT began; how many it began."""
    assert proc.stdout is not None
    begun = 0
    for line in proc.stdout:
        if line.strip() == "committing":
            begun += 1
            if begun == commit:
                time.sleep(delay)
                proc.send_signal(signal.SIGKILL)
                break
    proc.wait(timeout=60)
    return begun
