"""The sync engine against a service with an in-flight limit, and the same service without one.

    .venv/bin/python bench/limits.py [--shipments 2000] [--latency-ms 30] [--max-in-flight 12] [--max-page-size 100]

Each run starts a fresh simulator in its own process (same seed, same data) with ``--latency-ms``
per request and a page cap of ``--max-page-size`` rows (``FaultConfig.max_page_size``), once with
``--max-in-flight`` (a request arriving while that many are being processed is answered 429 at
once, with ``Retry-After: 1``) and once without; then runs the sync engine in this process (every
stream, documents off, no publish: ``bench/engine.py``'s run, with the sync's own adaptive limit).
It prints, for both: 429 answers, the mean number of requests in flight (``LimitStats.mean_in_flight``:
in flight as each request was sent, itself included) and the mean limit, seconds, shipments per
second; and the ratio of the two. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from compare import PASSWORD, USER, requests_served, simulator  # bench/compare.py

from freight_pipeline.client import AsyncFreightClient
from freight_pipeline.config import ServiceSettings
from freight_pipeline.lake.backend import storage_from_env
from freight_pipeline.sync.client_source import ClientSource
from freight_pipeline.sync.runner import sync_all
from freight_pipeline.sync.settings import SyncSettings


@dataclass
class Run:
    label: str
    seconds: float = 0.0
    shipments: int = 0
    refused: int = 0
    requests: int = 0
    mean_in_flight: float = 0.0
    mean_limit: float = 0.0
    last_limit: float = 0.0
    decreases: int = 0
    error: str | None = None
    streams: dict[str, Any] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.shipments / self.seconds if self.seconds else 0.0


def run_engine(label: str, base_url: str, work: Path) -> Run:
    """The sync engine (every stream, documents off, no publish), timed; the client's own figures."""
    clients: list[AsyncFreightClient] = []

    def source(client: AsyncFreightClient) -> ClientSource:
        clients.append(client)
        return ClientSource(client)

    run = Run(label)
    before = requests_served(base_url)
    started = time.monotonic()
    try:
        results, _ = sync_all(ServiceSettings(base_url, USER, PASSWORD), work, SyncSettings(documents=False),
                              backend=storage_from_env(), publish_after=False, source_factory=source)
    except Exception as exc:  # a bench reports what failed and goes on
        run.error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        results = []
    run.seconds = time.monotonic() - started
    run.requests = requests_served(base_url) - before
    for result in results:
        run.streams[result.stream] = f"{result.status}, {result.rows_read} read" + (
            f" ({result.error.splitlines()[0]})" if result.error else "")
        if result.stream == "shipments":
            run.shipments = result.rows_read
    if clients:
        client = clients[0]
        run.refused = client.stats.by_status.get(429, 0)
        stats = client.limit.stats
        run.mean_in_flight, run.mean_limit = stats.mean_in_flight, stats.mean
        run.last_limit, run.decreases = client.limit.limit, stats.decreases
    return run


def server_refused(base_url: str) -> int:
    return int(httpx.get(f"{base_url}/_control/stats", timeout=30).json().get("in_flight_refused", 0))


def measure(args: argparse.Namespace, label: str, *options: str) -> Run:
    cap = ("--max-page-size", str(args.max_page_size))
    with (tempfile.TemporaryDirectory(prefix="freight-limits-") as tmp,
          simulator(args.shipments, args.seed, args.latency_ms, *cap, *options) as url):
        run = run_engine(label, url, Path(tmp) / "engine")
        served_refusals = server_refused(url)
    if served_refusals != run.refused and run.error is None:
        run.streams["(note)"] = f"the service counted {served_refusals} in-flight refusals"
    return run


def show(run: Run) -> list[tuple[str, str]]:
    rows = [(f"{run.label}", f"{run.seconds:.1f} s, {run.shipments:,} shipments, {run.rate:.1f} shipments/s, "
                             f"{run.requests:,} requests, {run.refused} x 429")]
    rows.append((f"{run.label}: in flight", f"mean {run.mean_in_flight:.1f} (mean limit {run.mean_limit:.1f}, "
                                            f"last {run.last_limit:.1f}, {run.decreases} decreases)"))
    rows.extend((f"{run.label}: {name}", text) for name, text in run.streams.items())
    if run.error:
        rows.append((f"{run.label}: FAILED", run.error))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shipments", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--latency-ms", type=float, default=30.0)
    parser.add_argument("--max-in-flight", type=int, default=12)
    parser.add_argument("--max-page-size", type=int, default=100)
    args = parser.parse_args()
    limited = measure(args, f"max-in-flight {args.max_in_flight}", "--max-in-flight", str(args.max_in_flight))
    free = measure(args, "no in-flight limit")
    rows = [("service", f"{args.shipments:,} shipments, {args.latency_ms:g} ms per request, pages of at most "
                        f"{args.max_page_size} rows")]
    rows += show(limited) + show(free)
    if limited.rate and free.rate:
        rows.append(("ratio (limited / free)", f"{limited.rate / free.rate:.2f}x shipments/s, "
                                               f"{limited.seconds / free.seconds:.2f}x seconds"))
    width = max(len(name) for name, _ in rows)
    for name, text in rows:
        print(f"{name:<{width}}  {text}")
    return 1 if limited.error or free.error else 0


if __name__ == "__main__":
    sys.exit(main())
