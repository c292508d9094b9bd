"""``bench/assemble.py``: the CPU a shipment costs the normalizing worker (``sync.assemble``), on the same batches.

``capture``: a full sync (``freight-pipeline sync --no-dagster``, documents off, normalized in its own process)
of ``--shipments`` against the bundled simulator, each batch's bundles pickled as received into ``--batches``.
``time``: ``assemble`` of those batches as the worker runs it (its garbage collector paused), ``--rounds``
times; the CPU of each round per shipment, and the least. Run ``time`` with ``PYTHONPATH=<a worktree>`` to
time another checkout's code on the same batches (alternate the two: this machine's speed varies by the
hour), and ``--profile`` for cProfile's 25 costliest functions of one more round. Figures are printed,
never asserted.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import pickle
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != REPO / "bench"]
import cProfile  # noqa: E402  (not bench/profile.py, which this folder's place on the path would import)
import pstats  # noqa: E402

sys.path.append(str(REPO / "bench"))


def capture(shipments: int, batches: Path) -> None:
    """Run a full sync in this process with every batch's bundles kept in ``batches``."""
    from compare import PASSWORD, USER, simulator

    from freight_pipeline import cli
    from freight_pipeline.sync import workers

    kept: list[bytes] = []
    assemble_here = workers.Assembler.__call__

    def keeping(self: workers.Assembler, bundles, fetched_at, ceiling):  # type: ignore[no-untyped-def]
        kept.append(pickle.dumps(list(bundles), pickle.HIGHEST_PROTOCOL))
        return assemble_here(self, bundles, fetched_at, ceiling)

    workers.Assembler.__call__ = keeping  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory(prefix="freight-assemble-") as tmp, simulator(shipments, 42, 0.0) as url:
        os.environ.update({"FREIGHT_BASE_URL": url, "FREIGHT_USERNAME": USER, "FREIGHT_PASSWORD": PASSWORD,
                           "FREIGHT_DATA_DIR": str(Path(tmp) / "data"), "FREIGHT_SYNC_DOCUMENTS": "0",
                           "FREIGHT_NORMALIZE_WORKERS": "0"})
        os.environ.pop("DAGSTER_HOME", None)
        code = cli.main(["sync", "--no-dagster"])
    if code:
        raise SystemExit(f"the sync failed ({code})")
    batches.write_bytes(pickle.dumps(kept, pickle.HIGHEST_PROTOCOL))
    print(f"{len(kept)} batches of {shipments:,} shipments kept in {batches}")


def timed(batches: Path, rounds: int, profile: bool) -> None:
    """``assemble`` of every kept batch, ``rounds`` times, as the worker runs it."""
    from freight_pipeline.datetimes import ServiceZone
    from freight_pipeline.sync.assemble import assemble
    from freight_pipeline.sync.workers import gc_paused

    kept = [pickle.loads(batch) for batch in pickle.loads(batches.read_bytes())]
    shipments = sum(len(bundles) for bundles in kept)
    fetched_at = dt.datetime.now(dt.UTC)

    def one_round() -> float:
        started = time.process_time()
        for bundles in kept:
            with gc_paused():
                assemble(bundles, fetched_at, None, ServiceZone("UTC"))
        return time.process_time() - started

    one_round()  # warm: imports, caches
    seconds = [one_round() for _ in range(rounds)]
    per = ", ".join(f"{1000 * s / shipments:.3f}" for s in seconds)
    print(f"{os.environ.get('PYTHONPATH') or REPO}: {shipments:,} shipments, ms of CPU a shipment per round: {per}; "
          f"least {1000 * min(seconds) / shipments:.3f}")
    if profile:
        profiler = cProfile.Profile()
        profiler.runcall(one_round)
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("capture", "time"))
    parser.add_argument("--shipments", type=int, default=1_000)
    parser.add_argument("--batches", type=Path, default=Path(tempfile.gettempdir()) / "freight-batches.pickle")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    if args.what == "capture":
        capture(args.shipments, args.batches)
    else:
        timed(args.batches, args.rounds, args.profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
