"""Benchmark of the sync: ``make bench`` (``BENCH_ARGS="--shipments 20000 --latency-ms 5"``).

Starts the bundled simulator in its own process (so it does not share this process's GIL), runs a
full sync into a temporary data directory, changes ``--changed-share`` of the shipments through
the simulator's control surface, runs an incremental sync, and prints:

* full-sync shipments/s (every stream and the publish included),
* requests per changed shipment of the incremental run,
* incremental-sync time as a share of the full sync,
* peak RSS of this (syncing) process.

Figures only: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from freight_pipeline.config import ServiceSettings
from freight_pipeline.sync.runner import sync_all
from freight_pipeline.sync.settings import SyncSettings

USER, PASSWORD = "demo", "demo-password"  # the simulator's default user


def start_simulator(shipments: int, seed: int, latency_ms: float) -> tuple[subprocess.Popen[str], str]:
    cmd = [sys.executable, "-m", "freight_pipeline.cli", "simulator", "--shipments", str(shipments),
           "--seed", str(seed), "--port", "0", "--control", "--latency-ms", str(latency_ms)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    deadline = time.monotonic() + 300
    for line in proc.stdout:
        match = re.search(r"base URL: (\S+)", line)
        if match:
            return proc, match.group(1)
        if time.monotonic() > deadline:
            break
    proc.kill()
    raise RuntimeError("the simulator did not start")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shipments", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--latency-ms", type=float, default=0.0, help="simulated service latency per request")
    parser.add_argument("--concurrency", type=int, default=SyncSettings.concurrency)
    parser.add_argument("--changed-share", type=float, default=0.01)
    args = parser.parse_args()
    settings = dataclasses.replace(SyncSettings(), concurrency=args.concurrency)

    print(f"starting the simulator with {args.shipments} shipments ...", file=sys.stderr, flush=True)
    sim, base_url = start_simulator(args.shipments, args.seed, args.latency_ms)
    service = ServiceSettings(base_url, USER, PASSWORD)
    try:
        with tempfile.TemporaryDirectory(prefix="freight-bench-") as data_dir:
            started = time.monotonic()
            full, published = sync_all(service, Path(data_dir), settings)
            full_s = time.monotonic() - started
            full_requests = sum(r.requests for r in full)

            changed = max(1, round(args.shipments * args.changed_share))
            httpx.post(f"{base_url}/_control/clock/advance", params={"seconds": 300}).raise_for_status()
            httpx.post(f"{base_url}/_control/shipments/modify", params={"count": changed}).raise_for_status()
            started = time.monotonic()
            incremental, _ = sync_all(service, Path(data_dir), settings)
            incr_s = time.monotonic() - started
            incr_requests = sum(r.requests for r in incremental)
            read = next(r.rows_read for r in incremental if r.stream == "shipments")
    finally:
        sim.terminate()
        sim.wait(timeout=30)

    rows = [
        ("shipments", f"{args.shipments}"),
        ("simulated latency", f"{args.latency_ms:g} ms per request"),
        ("concurrency", f"{settings.concurrency}"),
        ("full sync", f"{full_s:.1f} s, {full_requests} requests, publish {published.seconds:.1f} s"
         if published else f"{full_s:.1f} s"),
        ("full-sync throughput", f"{args.shipments / full_s:.0f} shipments/s"),
        ("changed shipments", f"{changed} ({args.changed_share:.1%}); {read} read incl. the overlap window"),
        ("incremental sync", f"{incr_s:.1f} s, {incr_requests} requests"),
        ("requests per changed shipment", f"{incr_requests / changed:.2f}"),
        ("incremental / full time", f"{incr_s / full_s:.1%}"),
        ("peak RSS (sync process)", f"{peak_rss_mb():.0f} MB"),
    ]
    print(f"\nfreight_pipeline sync benchmark, {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC")
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"  {name:<{width}}  {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
