"""``bench/profile.py``: where a full sync's CPU goes, as the tables of ``docs/performance.md``.

A full sync by ``freight-pipeline sync --no-dagster`` (``--dagster``: ``sync``, a Dagster run in a fresh
``DAGSTER_HOME``; documents off, like the bench's pairs) against the
bundled simulator in its own process (``--shipments``, ``--latency-ms``), sampled by py-spy (``--py-spy``, at
``--rate`` Hz, the sync's process only, idle threads left out; ``--gil``: only the thread holding the GIL);
``--code`` runs another checkout's package instead (a ``git worktree``, the same venv: compile it with ``python -m
compileall`` and run it once unmeasured first, as ``make bench`` does, or its first run pays for dbt's first parse
and for compiling its modules: ``bench/log.md``, "CPU per shipment, eighth round"). Printed: the wall time,
the shipments stream's seconds, the CPU seconds of the process and of the children it waited for (``wait4``:
the dbt worker, the normalizing worker), its own threads' CPU (from ``/proc``), CPU per shipment, peak memory
(PSS of the process tree), each area's share of all samples (inclusive, overlapping: a statement run by the
history is in both; without ``--gil`` a thread waiting for the GIL in a call that released it is sampled too),
then the 15 leaf lines that took most. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from compare import (  # noqa: E402
    PASSWORD,
    USER,
    checkout_env,
    freight_pipeline,
    proportional_set_size,
    simulator,
    sync_figures,
)

AREAS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("warehouse writes (writes.py, history.py)", ("warehouse/writes.py", "warehouse/history.py")),
    ("DuckDB statements (leaf in ddl.py or database.py)", ()),
    ("client and HTTP (client/, aiohttp, httpx, asyncio)", ("freight_pipeline/client/", "aiohttp/", "httpx/",
                                                           "httpcore/", "asyncio/", "yarl/", "multidict/")),
    ("raw parts and content hashes (assemble.raw_part, content_hash, to_json)",
     ("raw_part (freight_pipeline/sync/assemble.py", "content_hash (freight_pipeline/sync/assemble.py",
      "to_json (freight_pipeline/normalize/converters.py")),
    ("normalization (normalize/, but Arrow building)", ("freight_pipeline/normalize/",)),
    ("Arrow tables (flatten.to_arrow_batch, TableSpec.to_arrow)", ("to_arrow_batch (", "TableSpec.to_arrow (")),
    ("pydantic", ("pydantic/", "pydantic_core/")),
    ("imports", ("<frozen importlib._bootstrap>",)),
    ("warehouse checks (checks/)", ("freight_pipeline/checks/",)),
    ("marts (marts/)", ("freight_pipeline/marts/",)),
    ("publish (warehouse/publish.py)", ("warehouse/publish.py",)),
)
STATEMENT_LEAVES = ("freight_pipeline/warehouse/ddl.py", "freight_pipeline/warehouse/database.py")
BUT = {"normalization (normalize/, but Arrow building)": ("to_arrow_batch (", "TableSpec.to_arrow (")}


def shares(collapsed: Path) -> tuple[int, Counter[str], Counter[str]]:
    """All samples, the samples of each area, and of each leaf line, from py-spy's raw (collapsed) output."""
    total = 0
    areas: Counter[str] = Counter()
    leaves: Counter[str] = Counter()
    for line in collapsed.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_text)
        total += count
        frames = stack.split(";")
        leaves[frames[-1]] += count
        for area, marks in AREAS:
            if not marks:
                hit = any(frames[-1].find(leaf) >= 0 for leaf in STATEMENT_LEAVES)
            else:
                hit = any(mark in stack for mark in marks) and not any(but in stack for but in BUT.get(area, ()))
            if hit:
                areas[area] += count
    return total, areas, leaves


TICKS = os.sysconf("SC_CLK_TCK")


def thread_cpu(pid: int, seen: dict[int, float]) -> None:
    """Each live thread of ``pid``: its CPU seconds so far, into ``seen`` (by thread id: a thread that ended keeps
    its last reading)."""
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        seen[int(task.name)] = (int(fields[11]) + int(fields[12])) / TICKS


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shipments", type=int, default=2_000)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--rate", type=int, default=50)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--code", type=Path, default=None, help="a checkout whose package runs instead of this one")
    parser.add_argument("--py-spy", default="py-spy", help="the py-spy program (not a dependency of the project); "
                        "`none`: no sampling, the times and CPU only")
    parser.add_argument("--gil", action="store_true", help="sample only the thread holding the GIL (py-spy --gil)")
    parser.add_argument("--subprocesses", action="store_true",
                        help="sample the sync's child processes too (py-spy --subprocesses: the normalizing worker)")
    parser.add_argument("--keep", type=Path, default=None, help="keep py-spy's collapsed stacks in this file")
    parser.add_argument("--dagster", action="store_true",
                        help="the sync as a Dagster run (`sync`, a fresh DAGSTER_HOME) instead of `sync --no-dagster`")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="freight-profile-") as tmp, \
            simulator(args.shipments, args.seed, args.latency_ms) as url:
        env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}
        env.update({"FREIGHT_BASE_URL": url, "FREIGHT_USERNAME": USER, "FREIGHT_PASSWORD": PASSWORD,
                    "FREIGHT_DATA_DIR": str(Path(tmp) / "data"), "FREIGHT_SYNC_DOCUMENTS": "0"})
        env.update(checkout_env(args.code))
        if args.dagster:
            (home := Path(tmp) / "dagster_home").mkdir()
            env["DAGSTER_HOME"] = str(home)
        collapsed = args.keep or Path(tmp) / "stacks.txt"
        started = time.monotonic()
        way = [] if args.dagster else ["--no-dagster"]
        sync = subprocess.Popen([*freight_pipeline(args.code), "sync", *way], env=env, cwd=args.code or REPO,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        spy = None if args.py_spy == "none" else subprocess.Popen(
            [args.py_spy, "record", "--pid", str(sync.pid), "--rate", str(args.rate), "--format", "raw", "--output",
             str(collapsed), "--nonblocking", *(["--gil"] if args.gil else []),
             *(["--subprocesses"] if args.subprocesses else [])],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        seen: dict[int, float] = {}
        peak = 0
        tree = psutil.Process(sync.pid)
        while True:
            with contextlib.suppress(OSError):
                thread_cpu(sync.pid, seen)
            with contextlib.suppress(psutil.Error):
                peak = max(peak, sum(proportional_set_size(p) for p in (tree, *tree.children(recursive=True))))
            ended, status, usage = os.wait4(sync.pid, os.WNOHANG)
            if ended:
                break
            time.sleep(0.2)
        seconds = time.monotonic() - started
        sync.returncode = os.waitstatus_to_exitcode(status)
        if spy is not None:
            spy.wait(timeout=120)
        if sync.returncode != 0:
            raise SystemExit(f"the sync failed ({sync.returncode})")
        total, areas, leaves = shares(collapsed) if spy is not None else (0, Counter(), Counter())
        stream_s = sync_figures(Path(tmp) / "data" / "warehouse.duckdb").get("stream_seconds") or 0.0
    cpu = usage.ru_utime + usage.ru_stime
    print(f"full sync of {args.shipments:,} shipments at {args.latency_ms:g} ms per request"
          f"{' as a Dagster run' if args.dagster else ''}, "
          f"{args.code or 'this checkout'}: {seconds:.1f} s wall, {cpu:.1f} s CPU "
          f"({1000 * cpu / args.shipments:.2f} ms per shipment), the shipments stream {stream_s:.1f} s, "
          f"peak memory {peak / 2**20:.0f} MB (PSS of the process tree), {total} samples at {args.rate} Hz")
    own = sum(seen.values())
    print(f"CPU of the sync's own threads (read every 0.2 s): {own:.1f} s ({1000 * own / args.shipments:.2f} ms per "
          f"shipment); of its children (the normalizing worker, the dbt worker) {cpu - own:.1f} s")
    if not total:
        return 0
    print("| area | share of samples |\n|---|---|")
    for area, _ in AREAS:
        print(f"| {area} | {areas[area] / max(total, 1):.0%} |")
    print("\nleaf lines that took most:")
    for leaf, count in leaves.most_common(15):
        print(f"  {count / max(total, 1):6.1%}  {leaf}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
