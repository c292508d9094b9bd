"""``make bench``: freight_pipeline against the obvious dlt pipeline, side by side, in one run.

Every scenario starts a fresh simulator (same seed, same data, its own process) for each side:

* ``loopback``: full sync of ``--shipments`` (2,000) shipments, no added latency;
* ``wan``: the same with ``--latency-ms`` (50) per request, a service across the internet, and the share of
  the latency bound the shipments stream reached (mean in-flight limit / latency / requests per shipment);
  with ``--baseline REV``, each of these two also runs commit ``REV``'s full sync (a ``git worktree``, the same
  venv, its own simulator) right before ours, printed beside it;
* ``tail``: the ``loopback`` full sync with and without a latency tail (``--tail-share`` (2 %) of the
  requests answered ``--tail-ms`` (5,000) ms late, the simulator's ``--tail``), each side against
  the same tail; per side its time with the tail against its clean time, and our hedged reads
  (sent, won) and the shipments stream's p99 latency of a shipment document;
* ``incremental``: a full sync of ``--incremental-shipments`` (20,000), documents on, then per round
  ``--changed-share`` (1 %) of them changed and the incremental run: the first after the full run (dbt
  builds its models once per catalog, then their statements replay), with the documents stream (as a
  user runs it), without it (like for like with the other scenarios), and as a full check (every row
  tested, ``FREIGHT_FULL_CHECK_INTERVAL_MINUTES=0``), and with the documents stream again with its dbt
  worker forked from a fork server of dbt workers (``FREIGHT_DBT_WORKER_SERVER``: dbt imported and the
  project parsed before the run, as where a long-lived process keeps one); then a run with nothing
  changed, twice (the first after a run that built, the second after one that changed nothing: a quiet
  schedule's usual run, which loads no dbt); the incremental and unchanged runs again as Dagster runs (ours
  only: the peer script has no incremental mode). With ``--baseline REV``, the same runs without Dagster of
  commit ``REV`` (a ``git worktree`` of it, the same venv, its own simulator of the same seed) are printed
  beside each figure. Each run of ours says what its publish took (its step line): the part of a run that grows
  with the warehouse held, not with what changed (bench/log.md, "CPU per shipment, ninth round");
* ``dagster``: what Dagster adds to a run of the job: a full sync of ``--shipments`` (2,000), then
  ``--dagster-changed`` (40) of them changed, then nothing changed, each run once alone (no ``DAGSTER_HOME``)
  and once as a Dagster run recorded in an instance, against a simulator of its own;
* ``memory``: peak memory of a full sync at ``--memory-sizes`` (2,000 and 20,000; add 100,000 by
  hand), of the whole job and of the sync engine alone (``bench/engine.py``: the streams, no
  Dagster, dbt or publish; what the fetch window, batch size and DuckDB limit bound);
* ``rebuild``: a full sync of ``--rebuild-shipments`` (20,000) at ``--latency-ms`` (50) per request, then
  ``freight-pipeline rebuild`` of the same data directory (no request to the service: counted), each as a
  whole job (with the dbt build and the publish), side by side: with the mapping that derived every row
  (nothing to re-derive); after the service's release change, ``--changed-share`` of the shipments read in
  the new shape by the mapping before its one-line fix (``bench/before_the_fix.py``), with the fix (the
  issue's case: the shipments whose raw names the renamed fields re-derived); with ``--all`` (every
  shipment: what a change of the code costs); ``--all`` after the per-shipment tables were emptied (every
  row written); and the raw store's size per 1,000 shipments;
* ``versus`` (not run by default; needs ``--baseline REV``): this checkout's sync engine alone against commit
  ``REV``'s (a ``git worktree``, the same venv), each against its own simulator (same seed, so the same
  changes), interleaved and in alternating order: a full sync of ``--shipments`` (2,000), then
  ``--versus-runs`` (10) incremental runs, each after ``--changed-share`` of the shipments changed and 15
  service minutes; each run a process of its own. Printed per side: the full sync, the incremental runs'
  median and longest, their peak RSS; and the ratios (what a change costs, before and after, measured in
  one run);
* ``freshness`` (not run by default): what re-reading open shipments' events costs (``sync.freshness``): the
  sync engine alone without the sample, with it (the default), and with the rolling re-read forced on at its
  budget (every open shipment due), each against its own simulator, alternated: a full sync of
  ``--shipments``, then ``--versus-runs`` incremental runs ``FRESHNESS_WAIT_S`` apart, each after
  ``--changed-share`` changed. Printed per side: the median incremental sync and requests a run;
* ``history`` (not run by default: about 20 minutes on 2 cores): what the ``freight_history`` costs.
  The sync engine alone with the history on and off (``FREIGHT_HISTORY=0``), each against its own
  simulator (same seed, so the same changes), interleaved and in alternating order: a full sync of
  ``--history-shipments`` (20,000), then ``--history-runs`` (50) incremental runs, each after
  ``--changed-share`` (1 %) of the shipments changed (``modify``: fields, goods, estimates revised)
  and 15 service minutes; each run a process of its own. Printed per side: the incremental runs'
  median and longest sync, their peak RSS (first five against last five), the history's rows and
  bytes, the working file, and the publish's time after the runs (first publish, then again after
  one more run);
* ``past-runs`` (not run by default): what a run costs once the warehouse keeps a long record of runs: a full
  sync of ``--shipments``, then ``--versus-runs`` incremental runs of the sync engine and the publish, each after
  ``--changed-share`` changed; then ``--past-runs`` (500,000: a year and a half of runs every 5 minutes) rows of
  earlier runs added to ``sync_runs``, and as many runs again. Printed per side (with ``--baseline REV``, commit
  ``REV``'s too, alternated): the median CPU of a run before and after;
* ``alerts`` (not run by default): what the alerts cost a run: the whole job (``freight-pipeline sync``, no
  Dagster) without a destination, with a JSON webhook that answers and with one that never answers, each
  against its own simulator, alternated, with a problem open throughout (``FREIGHT_MAX_SYNC_AGE_MINUTES=0``:
  every look finds the warehouse stale); a full sync of ``--shipments``, then ``--versus-runs`` incremental
  runs, each after ``--changed-share`` changed. Printed per side: the run's own time (what the command says it
  took) and the process's, which waits for its sends (the hanging side: ``ALERT_TIMEOUT_S`` a run, its unsent
  message sent again by each run).

Our side is the whole job as a user runs it (``freight-pipeline sync``: every stream, the warehouse
checks, the dbt build, the publish) in a child process, by default without Dagster (no ``DAGSTER_HOME``);
``loopback`` and ``incremental`` also time it as a Dagster run recorded in an instance (``DAGSTER_HOME``
set: what ``make ui`` shows), the way the schedules run it; the peer is ``bench/peer_dlt.py --parallel`` (the dlt
script of the issue, unchanged) in its own venv (``.bench/peer-venv``, made by ``make bench``).
Both are timed by wall clock from process start to exit, with the CPU (user and system) of the process and of
the children it waited for (the dbt worker, the normalizing worker), per shipment; peak memory is the largest sum of PSS
(resident memory, shared pages split between the processes sharing them) over the child's process
tree, sampled every 250 ms. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import httpx
import psutil

from freight_pipeline.config import (
    ALERT_TIMEOUT_ENV,
    ALERT_URLS_ENV,
    DBT_WORKER_SERVER_ENV,
    EVENTS_MAX_AGE_ENV,
    EVENTS_REFRESH_ENV,
    FRESHNESS_SAMPLE_ENV,
    HISTORY_ENV,
    MAX_SYNC_AGE_ENV,
)
from freight_pipeline.job.run import PUBLISH_STEP
from freight_pipeline.marts.worker_server import start_server
from freight_pipeline.normalize.tables import FREIGHT_TABLES
from freight_pipeline.simulator.releases import NEXT
from freight_pipeline.warehouse.history import HISTORY_TABLES
from freight_pipeline.warehouse.paths import working_db_path
from freight_pipeline.warehouse.publish import parquet_root

REPO = Path(__file__).resolve().parents[1]
PEER_PYTHON = REPO / ".bench" / "peer-venv" / "bin" / "python"
PEER_SCRIPT = REPO / "bench" / "peer_dlt.py"
USER, PASSWORD = "demo", "demo-password"  # the simulator's default user
SAMPLE_EVERY_S = 0.25
"""How often the memory of the measured process tree is read (reading PSS costs CPU of its own)."""


@dataclass
class Measured:
    seconds: float
    peak_rss_mb: float
    requests: int
    output: str
    figures: dict[str, Any] = field(default_factory=dict)
    cpu_seconds: float = 0.0
    """CPU (user and system) of the process and the children it waited for (``RUSAGE_CHILDREN``)."""

    def cpu_line(self, shipments: int) -> str:
        return f"CPU {self.cpu_seconds:.1f} s ({1000 * self.cpu_seconds / shipments:.1f} ms per shipment)"


@contextlib.contextmanager
def simulator(shipments: int, seed: int, latency_ms: float, *options: str) -> Iterator[str]:
    """A simulator in its own process (not sharing the measured process's GIL), with more of its
    command-line ``options`` (fault modes) if given; yields its base URL."""
    cmd = [sys.executable, "-m", "freight_pipeline.cli", "simulator", "--shipments", str(shipments),
           "--seed", str(seed), "--port", "0", "--control", "--latency-ms", str(latency_ms), *options]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            match = re.search(r"base URL: (\S+)", line)
            if match:
                threading.Thread(target=proc.stdout.read, daemon=True).start()  # keep its pipe drained
                yield match.group(1)
                return
        raise RuntimeError(f"the simulator did not start: {' '.join(cmd)}")
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def requests_served(base_url: str) -> int:
    return int(httpx.get(f"{base_url}/_control/stats", timeout=30).json()["total"])


def proportional_set_size(process: psutil.Process) -> int:
    """PSS: the process's own pages plus its share of pages shared with others, so a tree of forked
    workers is not counted many times over (RSS where the kernel does not tell)."""
    try:
        return int(process.memory_full_info().pss)
    except (AttributeError, psutil.AccessDenied):
        return int(process.memory_info().rss)


def measured(cmd: list[str], env: dict[str, str], base_url: str) -> Measured:
    """Run ``cmd`` to its end; wall time, peak RSS of its process tree, its CPU (the only child that ends
    meanwhile: the simulators end after it), requests the service answered."""
    before = requests_served(base_url)
    usage_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    proc = psutil.Popen(cmd, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output: list[str] = []
    reader = threading.Thread(target=lambda: output.extend(proc.stdout), daemon=True)  # type: ignore[arg-type]
    reader.start()
    peak = 0
    while proc.poll() is None:
        total = 0
        with contextlib.suppress(psutil.Error):
            for member in (proc, *proc.children(recursive=True)):
                with contextlib.suppress(psutil.Error):
                    total += proportional_set_size(member)
        peak = max(peak, total)
        time.sleep(SAMPLE_EVERY_S)
    seconds = time.monotonic() - started
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = usage.ru_utime + usage.ru_stime - usage_before.ru_utime - usage_before.ru_stime
    reader.join(timeout=10)
    text = "".join(output)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])} ... failed ({proc.returncode}):\n{text[-3000:]}")
    return Measured(seconds, peak / 2**20, requests_served(base_url) - before, text, cpu_seconds=cpu)


def checkout_env(code: Path | None) -> dict[str, str]:
    """What a process of the checkout ``code`` (None: this one) adds to its environment: the checkout first on the
    path, and no directory of its own before it (``PYTHONSAFEPATH``, inherited by its children: ``python -m`` in this
    repository's folder, the runs' working directory, put this checkout's package first, and the bench at 1f1037a
    ran this checkout as the baseline)."""
    return {} if code is None else {"PYTHONPATH": str(code), "PYTHONSAFEPATH": "1"}


def freight_pipeline(code: Path | None) -> list[str]:
    """The ``freight-pipeline`` command of this checkout (its console script, as a user runs it), or of the checkout
    ``code`` (its own ``python -m freight_pipeline.cli``: the console script names this checkout's entry point)."""
    return [str(REPO / ".venv" / "bin" / "freight-pipeline")] if code is None else [
        sys.executable, "-m", "freight_pipeline.cli"]


def ours(base_url: str, work: Path, *, dagster: bool = False, documents: bool = False,
         code: Path | None = None, env_more: Mapping[str, str] | None = None,
         program: Sequence[str] | None = None) -> Measured:
    """``freight-pipeline sync`` into ``work/data``: without Dagster, or (``dagster``) as a Dagster run
    recorded in the instance of ``work/dagster_home``; ``code``: a checkout whose package runs instead
    of this one (put first on the path; the same venv); ``env_more``: more of its environment; ``program``:
    what runs instead of ``freight-pipeline`` (given ``sync``). The checkout's first sync of this bench is a
    warm-up's (:func:`warmed`), never a measured one."""
    warmed(code, dagster=dagster)
    env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}
    env.update({"FREIGHT_BASE_URL": base_url, "FREIGHT_USERNAME": USER, "FREIGHT_PASSWORD": PASSWORD,
                "FREIGHT_DATA_DIR": str(work / "data"),
                # like for like: the peer reads no E-Files, so ours does not either (unless ``documents``)
                "FREIGHT_SYNC_DOCUMENTS": "1" if documents else "0", **(env_more or {})})
    env.update(checkout_env(code))
    if dagster:
        env["DAGSTER_HOME"] = str(work / "dagster_home")
        (work / "dagster_home").mkdir(parents=True, exist_ok=True)
    result = measured([*(program or freight_pipeline(code)), "sync"], env, base_url)
    result.figures = sync_figures(work / "data" / "warehouse.duckdb")
    return result


WARM_UP_SHIPMENTS = 50
_warm: set[tuple[Path | None, bool]] = set()


def warmed(code: Path | None, *, dagster: bool = False) -> None:
    """One unmeasured small sync of ``code``'s checkout (None: this one), once per bench, and once as a Dagster
    run before the first Dagster run measured (``dagster``): what a checkout's first sync makes once and keeps
    (dbt's parse of the project, the Jinja templates; for Dagster, dagster-dbt's manifest of the project and the
    asset specs in ``dbt_models/target``) is then made before either side is measured. Without it a baseline's
    worktree, new for each bench, paid for it in its one measured run and this checkout did not: 30 % of its CPU in
    a full sync of 2,000; and the first Dagster run of a new checkout took 13 s more than the job, the next 4 s
    (bench/log.md)."""
    if (code, dagster) in _warm:
        return
    _warm.add((code, dagster))
    with tempfile.TemporaryDirectory(prefix="freight-bench-warm-") as tmp, simulator(WARM_UP_SHIPMENTS, 1, 0) as url:
        ours(url, Path(tmp), code=code, dagster=dagster)


def publish_part(run: Measured) -> str:
    """``, the publish 4.2 s`` of a run of ours (empty when its output has no publish line)."""
    seconds = step_seconds(run.output, PUBLISH_STEP)
    return "" if seconds is None else f", the publish {seconds:.1f} s"


def sync_figures(published: Path) -> dict[str, Any]:
    """What the last run of the shipments stream says of itself (in-flight limit, requests, ...)."""
    with duckdb.connect(str(published), read_only=True) as con:
        row = con.execute(
            "SELECT details, rows_read, epoch(finished_at) - epoch(started_at) FROM freight_meta.sync_runs "
            "WHERE stream = 'shipments' ORDER BY started_at DESC LIMIT 1"
        ).fetchone()
        shipments = con.execute("SELECT count(*) FROM freight.shipments").fetchone()
    details = json.loads(row[0]) if row and row[0] else {}
    return {**details.get("extra", {}), "rows_read": row[1] if row else None, "stream_seconds": row[2] if row else None,
            "shipments_held": shipments[0] if shipments else None}


def peer(base_url: str, work: Path) -> Measured:
    if not PEER_PYTHON.exists():
        raise SystemExit(f"{PEER_PYTHON} is missing: run `make bench` (it creates the peer's venv)")
    cmd = [str(PEER_PYTHON), str(PEER_SCRIPT), "--base-url", base_url, "--out", str(work / "peer"), "--parallel"]
    result = measured(cmd, dict(os.environ), base_url)
    result.figures = json.loads(result.output.strip().splitlines()[-1])
    return result


def full_sync_side_by_side(
    name: str, shipments: int, seed: int, latency_ms: float, *, dagster_too: bool = False,
    options: Sequence[str] = (), measured_sides: list[Measured] | None = None, baseline: str | None = None,
) -> list[tuple[str, str]]:
    """A full sync by each side against its own simulator (``options``: more of its flags); the
    measurements (ours, the peer's) are appended to ``measured_sides`` when given. ``baseline``: commit
    ``REV``'s full sync too (a ``git worktree``, the same venv), right before ours."""
    before = None
    with tempfile.TemporaryDirectory(prefix="freight-bench-") as tmp:
        if baseline is not None:
            with checkout(baseline) as code, simulator(shipments, seed, latency_ms, *options) as url:
                before = ours(url, Path(tmp) / "baseline", code=code)
        with simulator(shipments, seed, latency_ms, *options) as url:
            mine = ours(url, Path(tmp) / "ours")
        with simulator(shipments, seed, latency_ms, *options) as url:
            theirs = peer(url, Path(tmp) / "peer")
        if measured_sides is not None:
            measured_sides += [mine, theirs]
        recorded = None
        if dagster_too:
            with simulator(shipments, seed, latency_ms, *options) as url:
                recorded = ours(url, Path(tmp) / "dagster", dagster=True)
    ours_rate, peer_rate = shipments / mine.seconds, shipments / theirs.seconds
    rows = [
        (f"{name}: shipments", f"{shipments:,}, {latency_ms:g} ms per request"),
        (f"{name}: freight_pipeline", f"{mine.seconds:.1f} s, {ours_rate:.1f} shipments/s, "
         f"{mine.requests / shipments:.2f} requests/shipment, peak memory {mine.peak_rss_mb:.0f} MB, "
         f"{mine.cpu_line(shipments)}"),
        (f"{name}: dlt (parallelized)", f"{theirs.seconds:.1f} s, {peer_rate:.1f} shipments/s, "
         f"{theirs.requests / shipments:.2f} requests/shipment, peak memory {theirs.peak_rss_mb:.0f} MB, "
         f"{theirs.cpu_line(shipments)} (inside pipe.run: {theirs.figures.get('seconds')} s)"),
        (f"{name}: ratio", f"{ours_rate / peer_rate:.2f}x dlt"),
    ]
    if recorded is not None:
        rows.append((f"{name}: freight_pipeline in Dagster", f"{recorded.seconds:.1f} s, "
                     f"{shipments / recorded.seconds:.1f} shipments/s, peak memory {recorded.peak_rss_mb:.0f} MB, "
                     f"{recorded.cpu_line(shipments)} ({shipments / recorded.seconds / peer_rate:.2f}x dlt; a run "
                     "recorded in DAGSTER_HOME)"))
    if before is not None:
        rows.append((f"{name}: freight_pipeline at {baseline}", f"{before.seconds:.1f} s, peak memory "
                     f"{before.peak_rss_mb:.0f} MB, {before.cpu_line(shipments)}: this checkout "
                     f"{before.seconds / mine.seconds:.2f}x as fast, {mine.cpu_seconds / before.cpu_seconds:.2f}x "
                     "the CPU"))
    limit, stream_s = mine.figures.get("in_flight_limit_mean"), mine.figures.get("stream_seconds")
    if latency_ms and limit and stream_s:
        bound = limit / (latency_ms / 1000) / (mine.requests / shipments)
        rate = shipments / stream_s
        rows.append((f"{name}: shipments stream", f"{stream_s:.1f} s, {rate:.0f} shipments/s: {rate / bound:.0%} of "
                     f"the bound {bound:.0f}/s (mean in-flight limit {limit:.1f} / {latency_ms:g} ms / requests "
                     "per shipment)"))
    return rows


def tail(shipments: int, seed: int, share: float, tail_ms: float) -> list[tuple[str, str]]:
    """The ``tail`` scenario (see the module doc): clean, then with the tail, each side by side."""
    clean: list[Measured] = []
    tailed: list[Measured] = []
    rows = full_sync_side_by_side("tail: clean", shipments, seed, 0, measured_sides=clean)
    rows += full_sync_side_by_side(f"tail: {share:.0%} at {tail_ms / 1000:g} s", shipments, seed, 0,
                                   options=("--tail", f"{share}:{tail_ms}"), measured_sides=tailed)
    (mine_clean, peer_clean), (mine, theirs) = clean, tailed
    rows.append(("tail: with the tail / clean",
                 f"freight_pipeline {mine.seconds / mine_clean.seconds:.2f}x ({mine_clean.seconds:.1f} s -> "
                 f"{mine.seconds:.1f} s), dlt {theirs.seconds / peer_clean.seconds:.2f}x ({peer_clean.seconds:.1f} s "
                 f"-> {theirs.seconds:.1f} s)"))
    for label, side in (("clean", mine_clean), ("tail", mine)):
        rows.append((f"tail: hedged reads ({label})", hedge_line(side.figures)))
    return rows


def hedge_line(figures: dict[str, Any]) -> str:
    """The shipments stream's hedged reads and the latency of its shipment documents, in one line."""
    kinds = figures.get("latency_ms", {})
    answers = sum(kind.get("calls", 0) for kind in kinds.values())
    document = kinds.get("shipment.retrieve", {})
    sent = figures.get("hedges_sent", 0)
    return (f"{sent} sent ({sent / max(answers, 1):.2%} of {answers} requests), {figures.get('hedges_won', 0)} won; "
            f"shipment document p50 {document.get('p50_ms')} ms, p99 {document.get('p99_ms')} ms, max "
            f"{document.get('max_ms')} ms; shipments stream {figures.get('stream_seconds') or 0:.1f} s")


FULL_CHECK_EVERY_RUN = {"FREIGHT_FULL_CHECK_INTERVAL_MINUTES": "0"}
FIRST_ROUND = "the first after the full run, documents on"
INCREMENTAL_ROUNDS: list[tuple[str, bool, dict[str, str]]] = [
    (FIRST_ROUND, True, {}), ("documents on", True, {}), ("documents off", False, {}),
    ("documents on, a full check", True, FULL_CHECK_EVERY_RUN)]
"""Each incremental round: its name, whether the documents stream runs, more of the environment. The first
incremental build of a data directory (after its full build) is one of its own: its models' statements are
not kept for the catalog yet, so dbt runs them (once); the round after it is the run a schedule makes."""
FORK_SERVER_ROUND = "documents on, the dbt worker forked from a server"
"""The round after :data:`INCREMENTAL_ROUNDS`: the run's dbt worker forked from a fork server of dbt workers
(``marts.worker_server``, ``FREIGHT_DBT_WORKER_SERVER``), as where a long-lived process keeps one."""


@contextlib.contextmanager
def fork_server(code: Path | None = None) -> Iterator[dict[str, str]]:
    """A fork server of dbt workers of ``code`` (a checkout; None: this one), ready; yields the environment
    that names it."""
    with tempfile.TemporaryDirectory(prefix="freight-bench-dbt-") as tmp:
        socket_path = Path(tmp) / "socket"
        env = {**os.environ, **checkout_env(code)}
        proc, _ = start_server(socket_path, env, cwd=code or REPO)  # the checkout's code, as the runs use
        assert proc.stdin is not None
        try:
            yield {DBT_WORKER_SERVER_ENV: str(socket_path)}
        finally:
            proc.stdin.close()
            proc.wait(timeout=60)


def incremental_runs(url: str, work: Path, changed: int, *, code: Path | None = None,
                     rounds: Sequence[tuple[str, bool, dict[str, str]]] = INCREMENTAL_ROUNDS,
                     dagster: bool = False) -> tuple[dict[str, Measured], tuple[Measured, Measured]]:
    """Each of ``rounds`` after ``changed`` shipments changed, then two runs with nothing changed (documents on:
    the first after a run that built, the second after one that changed nothing, a quiet schedule's usual run),
    on the full sync in ``work``."""
    measured_rounds = {}
    for name, documents, env_more in rounds:
        httpx.post(f"{url}/_control/clock/advance", params={"seconds": 300}, timeout=30).raise_for_status()
        httpx.post(f"{url}/_control/shipments/modify", params={"count": changed}, timeout=300).raise_for_status()
        measured_rounds[name] = ours(url, work, dagster=dagster, documents=documents, code=code, env_more=env_more)
    after_a_build = ours(url, work, dagster=dagster, documents=True, code=code)
    return measured_rounds, (after_a_build, ours(url, work, dagster=dagster, documents=True, code=code))


@contextlib.contextmanager
def checkout(rev: str) -> Iterator[Path]:
    """A ``git worktree`` of commit ``rev`` of this repository, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="freight-bench-rev-") as tmp:
        path = Path(tmp) / "checkout"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(path), rev], check=True,
                       capture_output=True)
        # compiled as `make setup` compiles this checkout: where PYTHONDONTWRITEBYTECODE is set (these machines),
        # each of its processes would otherwise compile every module it imports, in the measured time
        subprocess.run([sys.executable, "-m", "compileall", "-q", "-j", "0", str(path / "freight_pipeline")],
                       check=True, capture_output=True)
        try:
            yield path
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(path)], check=False,
                           capture_output=True)


def incremental(shipments: int, seed: int, share: float, baseline: str | None = None) -> list[tuple[str, str]]:
    """The ``incremental`` scenario (see the module doc); ``baseline``: a commit whose figures are printed
    beside this one's."""
    changed = max(1, round(shipments * share))
    theirs: tuple[Measured, dict[str, Measured], tuple[Measured, Measured]] | None = None
    if baseline is not None:
        with checkout(baseline) as code, tempfile.TemporaryDirectory(prefix="freight-bench-") as tmp, \
                simulator(shipments, seed, 0) as url, fork_server(code) as served:
            first = ours(url, Path(tmp), documents=True, code=code)
            theirs = (first, *incremental_runs(url, Path(tmp), changed, code=code,
                                               rounds=[*INCREMENTAL_ROUNDS, (FORK_SERVER_ROUND, True, served)]))
    with tempfile.TemporaryDirectory(prefix="freight-bench-") as tmp, simulator(shipments, seed, 0) as url, \
            fork_server() as served:
        full = ours(url, Path(tmp), documents=True)
        rounds, unchanged = incremental_runs(url, Path(tmp), changed,
                                             rounds=[*INCREMENTAL_ROUNDS, (FORK_SERVER_ROUND, True, served)])
        in_dagster, unchanged_in_dagster = incremental_runs(url, Path(tmp), changed, rounds=INCREMENTAL_ROUNDS[1:2],
                                                            dagster=True)

    def beside(pick: Callable[[tuple[Measured, dict[str, Measured], tuple[Measured, Measured]]], Measured],
               cpu: bool = False) -> str:
        if theirs is None:
            return ""
        cpu_text = f", CPU {pick(theirs).cpu_seconds:.1f} s" if cpu else ""
        return f" (at {baseline}: {pick(theirs).seconds:.1f} s{cpu_text})"

    rows = [("incremental: shipments", f"{shipments:,}, {changed:,} changed ({share:.0%}) per incremental run"),
            ("incremental: full run, documents on",
             f"{full.seconds:.1f} s{beside(lambda side: side[0])}{publish_part(full)}, {full.requests:,} requests, "
             f"peak memory {full.peak_rss_mb:.0f} MB")]
    for name, again in rounds.items():
        rows.append((f"incremental: incremental run, {name}",
                     f"{again.seconds:.1f} s{beside(lambda side, n=name: side[1][n])}{publish_part(again)}, "
                     f"{again.requests:,} requests ({again.figures.get('rows_read')} read by the walk)"))
    for which, (label, quiet) in enumerate((("after a run that built", unchanged[0]),
                                            ("again, after a run that changed nothing", unchanged[1]))):
        rows.append((f"incremental: nothing changed, documents on, {label}",
                     f"{quiet.seconds:.1f} s, CPU {quiet.cpu_seconds:.1f} s"
                     f"{beside(lambda side, i=which: side[2][i], cpu=True)}{publish_part(quiet)}, "
                     f"{quiet.requests:,} requests, peak memory {quiet.peak_rss_mb:.0f} MB"))
    rows.append(("incremental: in Dagster, documents on",
                 f"incremental run {in_dagster['documents on'].seconds:.1f} s, "
                 f"nothing changed {unchanged_in_dagster[0].seconds:.1f} s, again "
                 f"{unchanged_in_dagster[1].seconds:.1f} s"))
    return rows


def dagster_overhead(shipments: int, seed: int, changed: int) -> list[tuple[str, str]]:
    """The ``dagster`` scenario (see the module doc): each run of the job alone, then the same run in
    Dagster against a simulator of its own (same seed, same changes)."""
    rows = [("dagster: shipments", f"{shipments:,}, then {changed:,} changed; documents off")]
    with (tempfile.TemporaryDirectory(prefix="freight-bench-") as tmp, simulator(shipments, seed, 0) as alone,
          simulator(shipments, seed, 0) as recorded):
        ways = {"alone": (alone, False), "in Dagster": (recorded, True)}

        def both(label: str) -> None:
            took = {way: ours(url, Path(tmp) / way.replace(" ", "_"), dagster=dagster).seconds
                    for way, (url, dagster) in ways.items()}
            job, run = took["alone"], took["in Dagster"]
            rows.append((f"dagster: {label}", f"{job:.1f} s alone, {run:.1f} s in Dagster ({run - job:+.1f} s)"))

        both("full run")
        for url, _ in ways.values():
            httpx.post(f"{url}/_control/clock/advance", params={"seconds": 300}, timeout=30).raise_for_status()
            httpx.post(f"{url}/_control/shipments/modify", params={"count": changed}, timeout=300).raise_for_status()
        both(f"{changed:,} changed")
        both("nothing changed")
    return rows


def engine(base_url: str, data_dir: Path, env: Mapping[str, str] | None = None, *, publish: bool = False,
           code: Path | None = None) -> Measured:
    """The sync engine alone (``bench/engine.py``: every stream, no Dagster or dbt; ``publish``: then the
    publish) into ``data_dir``, with ``env`` added to its environment; ``code``: a checkout whose engine and
    package run instead of this one's (the same venv); its ``figures``: what it printed last (its exact peak
    RSS, the seconds of the sync, the publish's figures)."""
    cmd = [sys.executable, str((code or REPO) / "bench" / "engine.py"), base_url, str(data_dir),
           *(["--publish"] * publish)]
    result = measured(cmd, {**os.environ, **checkout_env(code), **(env or {})}, base_url)
    result.figures = json.loads(result.output.strip().splitlines()[-1])
    return result


def memory(sizes: list[int], seed: int) -> list[tuple[str, str]]:
    rows = []
    for size in sizes:
        with tempfile.TemporaryDirectory(prefix="freight-bench-") as tmp, simulator(size, seed, 0) as url:
            run = ours(url, Path(tmp))
        with tempfile.TemporaryDirectory(prefix="freight-bench-") as tmp, simulator(size, seed, 0) as url:
            alone = engine(url, Path(tmp) / "engine")
        rows.append((f"memory: {size:,} shipments", f"whole job {run.peak_rss_mb:.0f} MB ({run.seconds:.1f} s, "
                     f"{size / run.seconds:.1f} shipments/s); sync engine alone {alone.peak_rss_mb:.0f} MB "
                     f"({alone.seconds:.1f} s)"))
    return rows


HISTORY_ROUND_S = 900
"""Service time between two runs of the ``history`` scenario: the schedule's 15 minutes, so each walk
re-reads what changed in the last 70 minutes (overlap and offset guard), as in production."""
HISTORY_VARIANTS: dict[str, dict[str, str]] = {"with history": {}, "without history": {HISTORY_ENV: "0"}}
"""The sides of the ``history`` scenario and what each adds to the engine's environment."""
EDGE_RUNS = 5
"""Runs at either end of the ``history`` scenario whose peak memory is compared."""


def table_bytes(con: duckdb.DuckDBPyConnection, table: str, block: int) -> int:
    """Bytes of the blocks the columns of ``table`` (qualified) occupy: from ``pragma_storage_info``, the
    distinct blocks of its checkpointed segments times the block size (a block shared with other tables
    counts whole: an upper bound, close for large tables)."""
    info = f"pragma_storage_info('{table}')"
    blocks = con.execute(f"SELECT count(DISTINCT id) FROM (SELECT block_id AS id FROM {info} WHERE block_id >= 0 "
                         f"UNION ALL SELECT unnest(additional_block_ids) FROM {info})").fetchall()[0][0]
    return int(blocks) * block


def history_storage(database: Path) -> dict[str, tuple[int, int]]:
    """Per ``freight_history`` table of a DuckDB file: (rows, bytes of the blocks its columns occupy)."""
    found = {}
    with duckdb.connect(str(database), read_only=True) as con:
        block = int(con.execute("SELECT block_size FROM pragma_database_size()").fetchall()[0][0])
        for spec in HISTORY_TABLES:
            rows = con.execute(f"SELECT count(*) FROM {spec.qualified_name}").fetchall()[0][0]
            found[spec.name] = (int(rows), table_bytes(con, spec.qualified_name, block))
    return found


RAW_TABLES = ("freight_meta.raw_shipments", "freight_meta.raw_parts")


def raw_storage(database: Path) -> dict[str, int]:
    """The raw store of a working DuckDB file (checkpointed first: it is opened for writing): ``shipments``
    held, ``stored`` bytes of the blocks of its tables, ``documents`` (the documents' JSON text), ``parts``
    (the parts' compressed answers) and ``parts_plain`` (their JSON text before compression)."""
    with duckdb.connect(str(database)) as con:
        con.execute("CHECKPOINT")
        block = int(con.execute("SELECT block_size FROM pragma_database_size()").fetchall()[0][0])
        stored = sum(table_bytes(con, table, block) for table in RAW_TABLES)
        shipments, documents = con.execute("SELECT count(*), coalesce(sum(strlen(CAST(document AS VARCHAR))), 0) "
                                           "FROM freight_meta.raw_shipments").fetchall()[0]
        parts, plain = con.execute("SELECT coalesce(sum(octet_length(answer)), 0), coalesce(sum(answer_bytes), 0) "
                                   "FROM freight_meta.raw_parts").fetchall()[0]
    return {"shipments": int(shipments), "stored": stored, "documents": int(documents), "parts": int(parts),
            "parts_plain": int(plain)}


def empty_shipment_tables(database: Path) -> int:
    """Delete every row of the per-shipment ``freight`` tables of a working DuckDB file (what a rebuild then
    writes in full); how many went."""
    with duckdb.connect(str(database)) as con:
        return sum(int(con.execute(f"DELETE FROM {spec.qualified_name}").fetchall()[0][0])
                   for spec in FREIGHT_TABLES if spec.replace_key is not None)


def written_line(output: str) -> str:
    """What a rebuild's line says it wrote (``N rows written for the M whose rows changed``)."""
    match = re.search(r"([\d,]+ rows written for the [\d,]+ whose rows changed)", output)
    return match.group(1) if match else "(not found in the output)"


def step_seconds(output: str, step: str) -> float | None:
    """The seconds a run's output gives for ``step`` (its line ``  <step>   12.34 s  ...``)."""
    match = re.search(rf"^\s+{re.escape(step)}\s+([\d.]+) s\b", output, re.MULTILINE)
    return float(match.group(1)) if match else None


def rederived_line(output: str) -> str:
    """What a rebuild's line says it re-derived (``rebuilt N of the M shipments read ...``, or every one)."""
    match = re.search(r"rebuilt ([\d,]+) of the ([\d,]+) shipments read", output)
    if match:
        return f"{match.group(1)} of the {match.group(2)} read re-derived"
    match = re.search(r"rebuilt ([\d,]+) shipments from their raw records", output)
    return f"every one re-derived ({match.group(1)})" if match else "none re-derived"


def rebuild(shipments: int, seed: int, latency_ms: float, share: float) -> list[tuple[str, str]]:
    """A full sync of ``shipments`` at ``latency_ms`` per request; ``freight-pipeline rebuild`` with the mapping
    that derived every row; the service's release change, ``share`` of the shipments changed and read in the
    new shape by the mapping before its fix (``bench.before_the_fix``), then the rebuild with the fix (the code
    as it is), one of every shipment (``--all``), and one after the per-shipment tables were emptied; the
    requests the service answered meanwhile (0), and the raw store's size per 1,000 shipments."""
    changed = max(1, round(shipments * share))
    with tempfile.TemporaryDirectory(prefix="freight-bench-") as tmp, \
            simulator(shipments, seed, latency_ms) as url:
        work = Path(tmp) / "ours"
        synced = ours(url, work)
        env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}
        env["FREIGHT_DATA_DIR"] = str(work / "data")
        command = [*freight_pipeline(None), "rebuild"]
        same = measured(command, env, url)
        httpx.post(f"{url}/_control/release", json={"release": NEXT}, timeout=30).raise_for_status()
        httpx.post(f"{url}/_control/clock/advance", params={"seconds": 300}, timeout=30).raise_for_status()
        httpx.post(f"{url}/_control/shipments/modify", params={"count": changed}, timeout=300).raise_for_status()
        before_fix = ours(url, work, program=[sys.executable, "-m", "bench.before_the_fix"])
        fixed = measured(command, env, url)
        everything = measured([*command, "--all"], env, url)
        raw = raw_storage(working_db_path(work / "data"))
        emptied = empty_shipment_tables(working_db_path(work / "data"))
        rewritten = measured([*command, "--all"], env, url)
    stream = synced.figures.get("stream_seconds")

    def ratio(rebuilt: Measured) -> str:
        step = step_seconds(rebuilt.output, "rebuild")
        return (f"{rebuilt.seconds:.1f} s (re-deriving the tables {step or 0:.1f} s; "
                f"{rederived_line(rebuilt.output)}; {written_line(rebuilt.output)}), {rebuilt.requests:,} requests, "
                f"peak memory {rebuilt.peak_rss_mb:.0f} MB: {synced.seconds / rebuilt.seconds:.1f}x faster than "
                "the full sync as a whole job (sync, build, publish)"
                + (f", {stream / step:.1f}x re-deriving against reading the shipments" if stream and step else ""))

    per = 1000 / max(raw["shipments"], 1)
    return [
        ("rebuild: shipments", f"{shipments:,}; the sync at {latency_ms:g} ms per request"),
        ("rebuild: full sync", f"{synced.seconds:.1f} s (the shipments stream {stream or 0:.1f} s), "
         f"{synced.requests:,} requests"),
        ("rebuild: same mapping", ratio(same)),
        ("rebuild: release change", f"{changed:,} shipments changed and read in the new shape by the mapping "
         f"before its fix: {before_fix.seconds:.1f} s, {before_fix.requests:,} requests"),
        ("rebuild: after the fix", ratio(fixed)),
        ("rebuild: every shipment", f"--all (what a change of the code costs): {ratio(everything)}"),
        ("rebuild: every row new", f"--all after {emptied:,} rows of the shipments' tables were deleted (the worst "
         f"case: a mapping that changes every row): {ratio(rewritten)}"),
        ("rebuild: raw store", f"{raw['stored'] * per / 2**20:.2f} MB per 1,000 shipments in the working file "
         f"(documents {raw['documents'] * per / 2**20:.2f} MB of JSON text; parts {raw['parts'] * per / 2**20:.2f} MB "
         f"zlib-compressed from {raw['parts_plain'] * per / 2**20:.2f} MB)"),
    ]


def published_history_bytes(data_dir: Path) -> int:
    """Bytes of the ``freight_history`` tables' Parquet in the current publish."""
    return sum(path.stat().st_size for spec in HISTORY_TABLES
               for path in (parquet_root(data_dir) / spec.schema / spec.name).glob("*.parquet"))


def runs_summary(runs: Sequence[Measured], edge: int = EDGE_RUNS) -> str:
    """Median and longest sync (the engine's own seconds; the process's wall time in brackets) and the
    peak RSS of the first and the last ``edge`` runs."""
    syncs = [float(r.figures["seconds"]) for r in runs]
    rss = [float(r.figures["max_rss_mb"]) for r in runs]

    def span(values: Sequence[float]) -> str:
        return f"{min(values):.0f}-{max(values):.0f} MB"

    return (f"sync median {statistics.median(syncs):.2f} s, max {max(syncs):.2f} s "
            f"(process median {statistics.median(r.seconds for r in runs):.2f} s); peak RSS first {edge} runs "
            f"{span(rss[:edge])}, last {edge} {span(rss[-edge:])}")


@dataclass(frozen=True)
class Side:
    """One side of an alternated comparison of the sync engine: more of its environment, and the checkout
    whose code it runs (None: this one)."""

    env: Mapping[str, str]
    code: Path | None = None


class Alternated:
    """The sync engine's sides, each against a simulator of its own (same seed, so the same changes), run in
    turn and in alternating order (neither always first), each run a process of its own."""

    def __init__(self, stack: contextlib.ExitStack, sides: Mapping[str, Side], shipments: int, seed: int,
                 changed: int, round_s: int, label: str) -> None:
        self.sides, self.changed, self.round_s, self.label = sides, changed, round_s, label
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="freight-bench-")))
        self.urls = {name: stack.enter_context(simulator(shipments, seed, 0)) for name in sides}
        self.dirs = {name: tmp / name.replace(" ", "-") for name in sides}

    def change(self) -> None:
        """``changed`` shipments modified and ``round_s`` service seconds later, on every side's simulator."""
        for url in self.urls.values():
            httpx.post(f"{url}/_control/clock/advance", params={"seconds": self.round_s}, timeout=30).raise_for_status()
            httpx.post(f"{url}/_control/shipments/modify", params={"count": self.changed},
                       timeout=300).raise_for_status()

    def run_all(self, round_: int, label: str, publish: bool = False) -> dict[str, Measured]:
        done = {}
        names = list(self.sides)
        for name in names if round_ % 2 == 0 else reversed(names):
            side = self.sides[name]
            done[name] = engine(self.urls[name], self.dirs[name], side.env, publish=publish, code=side.code)
        print(f"bench: {self.label}, {label}: " + ", ".join(
            f"{name} {m.figures['seconds']:.1f} s" for name, m in done.items()), file=sys.stderr, flush=True)
        return done

    def full(self) -> dict[str, Measured]:
        """A full sync of each side."""
        return self.run_all(0, "full sync")

    def incremental(self, count: int) -> dict[str, list[Measured]]:
        """``count`` incremental runs of each side, each after :meth:`change`."""
        measured_runs: dict[str, list[Measured]] = {name: [] for name in self.sides}
        for round_ in range(1, count + 1):
            self.change()
            for name, result in self.run_all(round_, f"run {round_}/{count}").items():
                measured_runs[name].append(result)
        return measured_runs


def versus(shipments: int, runs: int, seed: int, share: float, baseline: str) -> list[tuple[str, str]]:
    """The ``versus`` scenario (see the module doc): this checkout's sync engine against commit ``baseline``'s."""
    changed = max(1, round(shipments * share))
    with contextlib.ExitStack() as stack:
        sides = {"this checkout": Side({}), f"at {baseline}": Side({}, stack.enter_context(checkout(baseline)))}
        alternated = Alternated(stack, sides, shipments, seed, changed, HISTORY_ROUND_S, "versus")
        full = alternated.full()
        measured_runs = alternated.incremental(runs)
    names = list(sides)
    rows = [("versus: shipments", f"{shipments:,}; {runs} incremental runs, each after {changed:,} changed "
             f"({share:.0%}, modify); the sync engine alone, documents off, alternated")]
    for name in names:
        rows += [(f"versus: {name}: full sync", f"{full[name].figures['seconds']:.1f} s, peak RSS "
                  f"{full[name].figures['max_rss_mb']:.0f} MB"),
                 (f"versus: {name}: incremental runs", runs_summary(measured_runs[name]))]
    ours_runs, theirs_runs = (statistics.median(float(r.figures["seconds"]) for r in measured_runs[name])
                              for name in names)
    ours_full, theirs_full = (float(full[name].figures["seconds"]) for name in names)
    rows.append((f"versus: this checkout / {baseline}", f"full sync {ours_full / theirs_full:.2f}x, incremental sync "
                 f"{ours_runs / theirs_runs:.2f}x (medians)"))
    return rows


FRESHNESS_SIDES: dict[str, dict[str, str]] = {
    "no sample": {FRESHNESS_SAMPLE_ENV: "0", EVENTS_REFRESH_ENV: "off"},
    "the sample (default)": {},
    "the rolling re-read on": {EVENTS_REFRESH_ENV: "on", EVENTS_MAX_AGE_ENV: "1"},
}
"""The sides of the ``freshness`` scenario: what each adds to the engine's environment (the rolling side's bound
one minute: with :data:`FRESHNESS_WAIT_S` between rounds, every open shipment is due, and the run re-reads as
many as its budget allows: the most it ever spends)."""
FRESHNESS_WAIT_S = 50
"""Seconds between the ``freshness`` scenario's rounds: past three quarters of the rolling side's minute."""


def freshness_cost(shipments: int, runs: int, seed: int, share: float) -> list[tuple[str, str]]:
    """The ``freshness`` scenario (see the module doc)."""
    changed = max(1, round(shipments * share))
    with contextlib.ExitStack() as stack:
        sides = {name: Side(env) for name, env in FRESHNESS_SIDES.items()}
        alternated = Alternated(stack, sides, shipments, seed, changed, HISTORY_ROUND_S, "freshness")
        alternated.full()
        measured_runs: dict[str, list[Measured]] = {name: [] for name in sides}
        for round_ in range(1, runs + 1):
            time.sleep(FRESHNESS_WAIT_S)
            alternated.change()
            for name, result in alternated.run_all(round_, f"run {round_}/{runs}").items():
                measured_runs[name].append(result)
    rows = [("freshness: shipments", f"{shipments:,}; {runs} incremental runs, each after {changed:,} changed "
             f"({share:.0%}) and {FRESHNESS_WAIT_S} s; the sync engine alone, documents off, alternated")]
    base = statistics.median(float(r.figures["seconds"]) for r in measured_runs["no sample"])
    base_requests = statistics.median(r.requests for r in measured_runs["no sample"])
    for name, measured_side in measured_runs.items():
        seconds = statistics.median(float(r.figures["seconds"]) for r in measured_side)
        requests = statistics.median(r.requests for r in measured_side)
        rows.append((f"freshness: {name}", f"incremental sync median {seconds:.2f} s ({seconds / base:.2f}x), "
                     f"{requests:,.0f} requests a run ({requests - base_requests:+,.0f})"))
    return rows


def history_cost(shipments: int, runs: int, seed: int, share: float) -> list[tuple[str, str]]:
    """The ``history`` scenario (see the module doc)."""
    changed = max(1, round(shipments * share))
    names = list(HISTORY_VARIANTS)
    with contextlib.ExitStack() as stack:
        sides = {name: Side(env) for name, env in HISTORY_VARIANTS.items()}
        alternated = Alternated(stack, sides, shipments, seed, changed, HISTORY_ROUND_S, "history")
        dirs, run_all, change = alternated.dirs, alternated.run_all, alternated.change
        full = alternated.full()
        after_full = {name: history_storage(working_db_path(dirs[name])) for name in names}
        measured_runs = alternated.incremental(runs)
        storage = {name: history_storage(working_db_path(dirs[name])) for name in names}
        files = {name: working_db_path(dirs[name]).stat().st_size for name in names}
        first_publish = run_all(runs + 1, "a run and the first publish", publish=True)  # nothing changed
        change()
        next_publish = run_all(runs + 2, "one more run and publish", publish=True)  # a publish before it
        parquet = {name: published_history_bytes(dirs[name]) for name in names}

    mb = 2**20
    rows = [("history: shipments", f"{shipments:,}; {runs} incremental runs, each after {changed:,} changed "
             f"({share:.0%}, modify) and {HISTORY_ROUND_S // 60} service minutes")]
    for name in names:
        grown = {table: storage[name][table][0] - after_full[name][table][0] for table in storage[name]}
        rows += [
            (f"history: {name}: full sync", f"{full[name].figures['seconds']:.1f} s, peak RSS "
             f"{full[name].figures['max_rss_mb']:.0f} MB"),
            (f"history: {name}: incremental runs", runs_summary(measured_runs[name])),
            (f"history: {name}: versions", ", ".join(
                f"{table} {count:,} rows (+{grown[table]:,} in the runs), {size / mb:.1f} MB"
                for table, (count, size) in storage[name].items())
             + f"; {sum(grown.values()) / runs:,.0f} versions a run (bytes: pragma_storage_info blocks)"),
            (f"history: {name}: working file", f"{files[name] / mb:.1f} MB; history's Parquet in the publish "
             f"{parquet[name] / mb:.1f} MB"),
            (f"history: {name}: publish", f"{first_publish[name].figures['publish']['seconds']:.2f} s after the "
             f"runs (first publish), {next_publish[name].figures['publish']['seconds']:.2f} s after one more "
             f"({next_publish[name].figures['publish']['exported_tables']} tables exported)"),
        ]
    on, off = (statistics.median(float(r.figures["seconds"]) for r in measured_runs[name]) for name in names)
    full_on, full_off = (float(full[name].figures["seconds"]) for name in names)
    rows.append(("history: with / without", f"incremental sync {on / off:.2f}x (medians), full sync "
                 f"{full_on / full_off:.2f}x"))
    return rows


PAST_RUN_EVERY = dt.timedelta(minutes=5)
"""The schedule the ``past-runs`` scenario's rows of earlier runs say the warehouse kept."""


def add_past_runs(data_dir: Path, count: int) -> None:
    """``count`` rows of earlier runs in ``data_dir``'s ``sync_runs``: the streams it holds rows of, in turn, one
    run of them every :data:`PAST_RUN_EVERY` back from a day before now, each a quiet run's row."""
    with duckdb.connect(str(working_db_path(data_dir))) as con:
        streams = [s for (s,) in con.execute("SELECT DISTINCT stream FROM freight_meta.sync_runs ORDER BY 1")
                   .fetchall()]
        every, n = int(PAST_RUN_EVERY.total_seconds()), len(streams)
        con.execute(f"""
            INSERT INTO freight_meta.sync_runs BY NAME
            SELECT 'past-' || (i // {n})::VARCHAR AS run_id, $streams[i % {n} + 1] AS stream,
                   now() - INTERVAL 1 DAY - to_seconds(($count // {n} - i // {n}) * {every}) AS started_at,
                   started_at + INTERVAL 20 SECOND AS finished_at, 'success' AS status, 3 AS rows_read,
                   30 AS rows_written, 12 AS requests, 0 AS retries, 0 AS rejected, 0 AS quarantined,
                   0 AS data_problems, '{{"rows_by_table": {{}}, "extra": {{}}}}' AS details
            FROM range($count) t(i)""", {"streams": streams, "count": count})
        con.execute("CHECKPOINT")


def past_runs_cost(shipments: int, runs: int, past: int, seed: int, share: float,
                   baseline: str | None) -> list[tuple[str, str]]:
    """The ``past-runs`` scenario (see the module doc): what a run costs once the warehouse holds ``past`` rows of
    earlier runs, against the same runs before they were added."""
    changed = max(1, round(shipments * share))
    with contextlib.ExitStack() as stack:
        sides = {"this checkout": Side({})}
        if baseline:
            sides[f"at {baseline}"] = Side({}, stack.enter_context(checkout(baseline)))
        alternated = Alternated(stack, sides, shipments, seed, changed, HISTORY_ROUND_S, "past-runs")
        alternated.full()
        measured_runs: dict[str, dict[str, list[Measured]]] = {"before": {}, "after": {}}
        for phase in measured_runs:
            if phase == "after":
                for name in sides:
                    add_past_runs(alternated.dirs[name], past)
            for round_ in range(1, runs + 1):
                alternated.change()
                for name, result in alternated.run_all(round_, f"{phase}, run {round_}/{runs}", publish=True).items():
                    measured_runs[phase].setdefault(name, []).append(result)

    def cpu(name: str, phase: str) -> float:
        return statistics.median(r.cpu_seconds for r in measured_runs[phase][name])

    rows = [("past-runs: shipments", f"{shipments:,}; {runs} incremental runs (engine and publish, documents off), "
             f"each after {changed:,} changed, before and after {past:,} rows of earlier runs were added")]
    for name in sides:
        rows.append((f"past-runs: {name}", f"CPU a run {cpu(name, 'before'):.2f} s before, {cpu(name, 'after'):.2f} s "
                     f"after ({cpu(name, 'after') / cpu(name, 'before'):.2f}x; medians)"))
    return rows


ALERT_SIDES = ("no alerts", "alerts, a webhook that answers", "alerts, a webhook that hangs")
"""The sides of the ``alerts`` scenario: the same job, without a destination, with one that answers, with one
that never answers (each of its runs sends the unsent message again and waits :data:`ALERT_TIMEOUT_S`)."""
ALERT_TIMEOUT_S = 5


@contextlib.contextmanager
def webhook_receiver(answers: bool) -> Iterator[str]:
    """A JSON webhook on a loopback port that answers 200, or never answers; yields its Apprise URL."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if not answers:
                time.sleep(3600)
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"json://127.0.0.1:{server.server_address[1]}/hook"
    finally:
        server.shutdown()
        server.server_close()


def alerts_cost(shipments: int, runs: int, seed: int, share: float) -> list[tuple[str, str]]:
    """The ``alerts`` scenario (see the module doc)."""
    changed = max(1, round(shipments * share))
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="freight-bench-alerts-")))
        answering, hanging = (stack.enter_context(webhook_receiver(answers)) for answers in (True, False))
        stale = {MAX_SYNC_AGE_ENV: "0"}  # every look finds the warehouse stale: a problem open on every run
        envs = {ALERT_SIDES[0]: stale,
                ALERT_SIDES[1]: {**stale, ALERT_URLS_ENV: answering},
                ALERT_SIDES[2]: {**stale, ALERT_URLS_ENV: hanging, ALERT_TIMEOUT_ENV: str(ALERT_TIMEOUT_S)}}
        urls = {name: stack.enter_context(simulator(shipments, seed, 0)) for name in ALERT_SIDES}
        done: dict[str, list[Measured]] = {name: [] for name in ALERT_SIDES}
        for round_ in range(runs + 1):
            if round_:
                for url in urls.values():
                    httpx.post(f"{url}/_control/clock/advance", params={"seconds": HISTORY_ROUND_S},
                               timeout=30).raise_for_status()
                    httpx.post(f"{url}/_control/shipments/modify", params={"count": changed},
                               timeout=300).raise_for_status()
            for name in ALERT_SIDES if round_ % 2 == 0 else reversed(ALERT_SIDES):
                done[name].append(ours(urls[name], tmp / name.replace(" ", "-").replace(",", ""), env_more=envs[name]))
            print(f"bench: alerts, run {round_}/{runs}: " + ", ".join(
                f"{name} {done[name][-1].seconds:.1f} s" for name in ALERT_SIDES), file=sys.stderr, flush=True)

    def job_seconds(result: Measured) -> float:
        match = re.search(r"sync succeeded in ([0-9.]+) s", result.output)
        assert match, result.output[-2000:]
        return float(match.group(1))

    rows = [("alerts: shipments", f"{shipments:,}; a full sync, then {runs} incremental runs of the whole job "
             f"(no Dagster), each after {changed:,} changed ({share:.0%}); alternated; a problem open throughout")]
    base_job = statistics.median(job_seconds(r) for r in done[ALERT_SIDES[0]][1:])
    base_process = statistics.median(r.seconds for r in done[ALERT_SIDES[0]][1:])
    for name in ALERT_SIDES:
        job = statistics.median(job_seconds(r) for r in done[name][1:])
        process = statistics.median(r.seconds for r in done[name][1:])
        rows.append((f"alerts: {name}", f"full run {job_seconds(done[name][0]):.2f} s; incremental run median "
                     f"{job:.2f} s ({job / base_job:.2f}x), the process until its sends ended {process:.2f} s "
                     f"({process / base_process:.2f}x)"))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", default="loopback,wan,tail,incremental,dagster,memory,rebuild")
    parser.add_argument("--tail-share", type=float, default=0.02)
    parser.add_argument("--tail-ms", type=float, default=5000.0)
    parser.add_argument("--shipments", type=int, default=2_000)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--incremental-shipments", type=int, default=20_000)
    parser.add_argument("--changed-share", type=float, default=0.01)
    parser.add_argument("--dagster-changed", type=int, default=40)
    parser.add_argument("--baseline", default=None, metavar="REV",
                        help="incremental, loopback, wan: also run a git worktree of commit REV, its figures beside; "
                        "versus: the commit to compare with")
    parser.add_argument("--versus-runs", type=int, default=10)
    parser.add_argument("--memory-sizes", default="2000,20000")
    parser.add_argument("--past-runs", type=int, default=500_000)
    parser.add_argument("--history-shipments", type=int, default=20_000)
    parser.add_argument("--history-runs", type=int, default=50)
    parser.add_argument("--rebuild-shipments", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    chosen = args.scenarios.split(",")
    rows: list[tuple[str, str]] = []
    for scenario in chosen:
        print(f"bench: {scenario} ...", file=sys.stderr, flush=True)
        if scenario == "loopback":
            rows += full_sync_side_by_side("loopback", args.shipments, args.seed, 0, dagster_too=True,
                                           baseline=args.baseline)
        elif scenario == "wan":
            rows += full_sync_side_by_side("wan", args.shipments, args.seed, args.latency_ms, baseline=args.baseline)
        elif scenario == "tail":
            rows += tail(args.shipments, args.seed, args.tail_share, args.tail_ms)
        elif scenario == "incremental":
            rows += incremental(args.incremental_shipments, args.seed, args.changed_share, args.baseline)
        elif scenario == "dagster":
            rows += dagster_overhead(args.shipments, args.seed, args.dagster_changed)
        elif scenario == "memory":
            rows += memory([int(s) for s in args.memory_sizes.split(",")], args.seed)
        elif scenario == "rebuild":
            rows += rebuild(args.rebuild_shipments, args.seed, args.latency_ms, args.changed_share)
        elif scenario == "history":
            rows += history_cost(args.history_shipments, args.history_runs, args.seed, args.changed_share)
        elif scenario == "freshness":
            rows += freshness_cost(args.shipments, args.versus_runs, args.seed, args.changed_share)
        elif scenario == "past-runs":
            rows += past_runs_cost(args.shipments, args.versus_runs, args.past_runs, args.seed, args.changed_share,
                                   args.baseline)
        elif scenario == "alerts":
            rows += alerts_cost(args.shipments, args.versus_runs, args.seed, args.changed_share)
        elif scenario == "versus":
            if args.baseline is None:
                parser.error("versus needs --baseline REV")
            rows += versus(args.shipments, args.versus_runs, args.seed, args.changed_share, args.baseline)
        else:
            parser.error(f"unknown scenario {scenario!r}")
    print(f"\nfreight_pipeline against dlt, {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores")
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"  {name:<{width}}  {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
