"""Lake mode on one machine: the first full sync with 1, 2 and 3 concurrent backfill writers, and
SIGKILL trials, into a real PostgreSQL catalog and a real S3-compatible server (moto).

``.venv-lake/bin/python bench/lake.py [--shipments 20000] [--writers 1,2,3] [--kill-trials 3]``

* Writers: for each count W, a fresh catalog database and bucket prefix; the simulator's shipments
  are cut into W id ranges of about equal size and each range is one Dagster run of
  ``freight_backfill_job`` (``freight-pipeline sync --job freight_backfill_job --partition KEY``, the
  production settings) in a process of its own, all started at once. Printed: wall clock from the
  first start to the last exit, shipments/s, rows/s (every row of the tables the shipments stream
  writes), the writers' CPU seconds (and how many cores that kept busy), and whether the lake then
  equals the source (compared by a reader in another process).
* Kill trials: three writers (``bench/lake_writer.py``, production page and batch sizes, announcing each
  COMMIT); writer number ``i % 3`` of trial ``i`` is SIGKILLed a few ms after a randomly chosen
  COMMIT began; the others finish; a reader checks that no shipment is half written; the killed
  partition is run again; the lake must then equal the source.

The simulator runs in this process (whose main thread only waits), moto and PostgreSQL in processes
of their own. Needs Debian's ``postgresql`` package (server binaries) and moto (a dev dependency). Figures are
printed, never asserted; compare them within one run (the machine is shared and noisy).
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.lake_harness import (  # noqa: E402
    even_boundaries,
    kill_inside_commit,
    partition_keys,
    read_lake,
    service_env,
    start_writer,
    write_expected,
)
from freight_pipeline.commands.execute import dagster_instance  # noqa: E402
from freight_pipeline.config import environ  # noqa: E402
from freight_pipeline.lake.local import LocalPostgres, LocalS3, running_postgres, running_s3  # noqa: E402
from freight_pipeline.simulator.server import RunningSimulator, running_simulator  # noqa: E402
from freight_pipeline.sync.parts import PART_TABLES  # noqa: E402

CLI = str(Path(sys.executable).parent / "freight-pipeline")
BATCH = 500  # FreightServiceResource.backfill_batch_size


def children_cpu() -> float:
    """CPU seconds (user + system) of the finished child processes so far."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def fresh_lake(s3: LocalS3, pg: LocalPostgres) -> dict[str, str]:
    name = f"lake_{uuid.uuid4().hex[:8]}"
    return {**s3.env(prefix=name), **pg.new_database(name).env()}


def summary(found: dict, shipments: int) -> str:
    exact = found["differences"] == {} and found["rows"]["shipments"] == shipments
    return "equal to the source" if exact else f"DIFFERS: {found['differences']}, rows {found['rows']['shipments']}"


def writers_run(sim: RunningSimulator, s3: LocalS3, pg: LocalPostgres, writers: int, expected: Path,
                tmp: Path, shipments: int) -> None:
    boundaries = even_boundaries(sim, writers)
    home = tmp / f"dagster-{writers}"
    home.mkdir()
    env = {**fresh_lake(s3, pg), **service_env(sim), "FREIGHT_DATA_DIR": str(tmp / f"data-{writers}"),
           "DAGSTER_HOME": str(home), "FREIGHT_BACKFILL_ID_BOUNDARIES": ",".join(map(str, boundaries))}
    with environ({"DAGSTER_HOME": str(home)}), dagster_instance():
        pass  # the instance's storage exists before the runs race to create it
    started, cpu_before = time.monotonic(), children_cpu()
    procs = [subprocess.Popen([CLI, "sync", "--job", "freight_backfill_job", "--partition", key],
                              env={**os.environ, **env}, cwd=REPO, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
             for key in partition_keys(boundaries)]
    outputs = [proc.communicate()[0] for proc in procs]
    seconds, cpu = time.monotonic() - started, children_cpu() - cpu_before
    failed = [out[-800:] for proc, out in zip(procs, outputs, strict=True) if proc.returncode != 0]
    found = read_lake(env, expected, "--held-only")
    rows = sum(found["rows"][t] for t in PART_TABLES)
    print(f"{writers} writer{'s' if writers > 1 else ''}: {seconds:.1f} s, {shipments / seconds:.1f} shipments/s, "
          f"{rows / seconds:,.0f} rows/s ({rows:,} rows), writers' CPU {cpu:.0f} s ({cpu / seconds:.2f} cores); "
          f"{summary(found, shipments)}"
          + (f"; FAILED: {failed}" if failed else ""), flush=True)


def kill_trial(sim: RunningSimulator, s3: LocalS3, pg: LocalPostgres, trial: int, expected: Path,
               tmp: Path, shipments: int) -> None:
    rng = random.Random(trial)
    boundaries = even_boundaries(sim, 3)
    keys = partition_keys(boundaries)
    victim = keys[trial % len(keys)]
    env = {**fresh_lake(s3, pg), **service_env(sim)}
    data_dir = tmp / f"trial-{trial}"
    others = [start_writer(env, key, boundaries, data_dir, tmp / f"trial-{trial}-{key}.log", batch=BATCH)
              for key in keys if key != victim]
    killed = start_writer(env, victim, boundaries, data_dir, batch=BATCH)
    batches = shipments // len(keys) // BATCH  # the victim's data commits, besides a few of its run log
    commit = rng.randint(3, max(3, batches))
    begun = kill_inside_commit(killed, commit=commit, delay=rng.uniform(0.0, 0.05))
    others_ok = all(proc.wait() == 0 for proc in others)
    after_kill = read_lake(env, expected, "--held-only")
    half_written = after_kill["differences"]
    rerun = start_writer(env, victim, boundaries, data_dir, batch=BATCH)
    rerun_ok = rerun.communicate()[0].strip().endswith("done") and rerun.returncode == 0
    final = read_lake(env, expected, "--held-only")
    print(f"kill trial {trial}: partition {victim} killed inside commit {begun} "
          f"({'SIGKILL' if killed.returncode == -signal.SIGKILL else f'exit {killed.returncode}: not killed'}), "
          f"{after_kill['rows']['shipments']:,} shipments held after the kill, "
          f"{'none half written' if not half_written else f'HALF WRITTEN: {half_written}'}; other writers "
          f"{'succeeded' if others_ok else 'FAILED'}; rerun {'succeeded' if rerun_ok else 'FAILED'}: "
          f"{summary(final, shipments)}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shipments", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--writers", default="1,2,3", help="writer counts to measure, comma-separated")
    parser.add_argument("--kill-trials", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="freight-lake-bench-") as folder, running_s3(own_process=True) as s3, \
            running_postgres() as pg, running_simulator(shipments=args.shipments, seed=args.seed) as sim:
        tmp = Path(folder)
        expected = write_expected(sim, tmp / "expected")
        print(f"lake bench: {args.shipments:,} shipments, PostgreSQL catalog, moto S3, {os.cpu_count()} cores",
              flush=True)
        for writers in [int(w) for w in args.writers.split(",") if w]:
            writers_run(sim, s3, pg, writers, expected, tmp, args.shipments)
        for trial in range(args.kill_trials):
            kill_trial(sim, s3, pg, trial, expected, tmp, args.shipments)


if __name__ == "__main__":
    main()
