"""The published file's DuckDB storage version, what it costs: ``python bench/storage_version.py``.

Two ways to publish a file DuckDB 1.5 opens, against today's (duckdb 2.0's own format, ``latest``):

* **working database in the compatible format**: the whole job (``freight-pipeline sync``: every stream,
  the dbt build, the publish; documents off, as ``bench/compare.py`` runs it) with
  ``FREIGHT_PUBLISH_STORAGE_VERSION`` set to each version, alternated, each in a fresh data directory
  and a fresh simulator (same seed): a new working database is created in that version, so the
  sync and dbt write it and the publish is a byte copy;
* **conversion at publish**: the working database of the ``latest`` runs published again in the
  compatible version (``COPY FROM DATABASE`` into a new file) and in its own (a byte copy),
  alternated, in this process; tables unchanged, so the Parquet files are reused and the figure is
  the DuckDB file's part.

Prints wall-clock seconds, the sync's and dbt's own seconds (``freight_meta.sync_runs``) and file sizes.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import duckdb

from freight_pipeline.config import PUBLISH_STORAGE_VERSION_ENV, StorageSettings
from freight_pipeline.warehouse.paths import working_db_path
from freight_pipeline.warehouse.publish import publish, published_db_path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare import PASSWORD, REPO, USER, measured, simulator

LATEST = "latest"


def whole_job(shipments: int, seed: int, version: str, data_dir: Path) -> dict[str, float | str]:
    with simulator(shipments, seed, 0) as url:
        env = {**os.environ, "FREIGHT_BASE_URL": url, "FREIGHT_USERNAME": USER, "FREIGHT_PASSWORD": PASSWORD,
               "FREIGHT_DATA_DIR": str(data_dir), "DAGSTER_HOME": str(data_dir.parent / "dagster_home"),
               "FREIGHT_SYNC_DOCUMENTS": "0", PUBLISH_STORAGE_VERSION_ENV: version}
        (data_dir.parent / "dagster_home").mkdir(parents=True, exist_ok=True)
        run = measured([str(REPO / ".venv" / "bin" / "freight-pipeline"), "sync"], env, url)
    with duckdb.connect(str(published_db_path(data_dir)), read_only=True) as con:
        seconds = dict(con.execute("SELECT stream, epoch(finished_at) - epoch(started_at) FROM freight_meta.sync_runs "
                                   "WHERE stream IN ('shipments', 'dbt_build')").fetchall())
        tag = con.execute("SELECT tags['storage_version'] FROM duckdb_databases() "
                          "WHERE database_name = current_database()").fetchone()
    return {"job": run.seconds, "shipments": seconds["shipments"], "dbt": seconds["dbt_build"],
            "working_mb": working_db_path(data_dir).stat().st_size / 2**20,
            "published_mb": published_db_path(data_dir).stat().st_size / 2**20, "tag": tag[0] if tag else "?"}


def publish_once(data_dir: Path, version: str) -> tuple[float, float, bool]:
    started = time.monotonic()
    result = publish(data_dir, settings=StorageSettings(storage_version=version))
    seconds = time.monotonic() - started
    return seconds, result.database.stat().st_size / 2**20, result.converted


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shipments", type=int, default=2_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--compatible", default="v1.5.0")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="freight-bench-storage-") as tmp:
        jobs: dict[str, list[dict[str, float | str]]] = {LATEST: [], args.compatible: []}
        dirs: dict[str, list[Path]] = {LATEST: [], args.compatible: []}
        for round_ in range(args.rounds):
            for version in (LATEST, args.compatible):
                data_dir = Path(tmp) / f"{version}-{round_}" / "data"
                print(f"bench: whole job, {version}, round {round_ + 1} ...", file=sys.stderr, flush=True)
                jobs[version].append(whole_job(args.shipments, args.seed, version, data_dir))
                dirs[version].append(data_dir)
        cases = [(LATEST, LATEST), (LATEST, args.compatible), (args.compatible, args.compatible)]
        publishes: dict[tuple[str, str], list[tuple[float, float, bool]]] = {case: [] for case in cases}
        for round_ in range(args.rounds):
            for working, version in cases:
                publishes[working, version].append(publish_once(dirs[working][round_], version))
    print(f"\n{args.shipments:,} shipments, {os.cpu_count()} cores, duckdb {duckdb.__version__}; per run, in order")
    for version, runs in jobs.items():
        print(f"  whole job, working database and publish in {version}:")
        for r in runs:
            print(f"    {r['job']:.1f} s (shipments stream {r['shipments']:.1f} s, dbt build {r['dbt']:.1f} s); "
                  f"working {r['working_mb']:.1f} MB, published {r['published_mb']:.1f} MB ({r['tag']})")
    for (working, version), results in publishes.items():
        how = ", ".join(f"{s:.2f} s ({'converted' if c else 'byte copy'}, {mb:.1f} MB)" for s, mb, c in results)
        print(f"  publish again, working database in {working}, published in {version}: {how}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
