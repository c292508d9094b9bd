"""A Dagster run's claim on the warehouse's writer lock, told to Dagster: the run's tag :data:`CLAIM_TAG` says that it
took the lock, as the lock's file named it then (its id, process, host, since when).

The lock's file keeps only the run that took the lock last (``warehouse.writer_lock``); the tag keeps that this run
took it, so a tick can tell a run that took the lock and lost it since (its process died, and another run took the lock
after it) from one that has not reached the lock yet, however long ago either began (:func:`writer_runs_in_progress`).

A run whose process is gone (killed, out of memory) is marked failed by the next tick, which then runs, and by the
next run that takes the writer lock: Dagster alone would show it running for ever, every later tick would skip, and a
run queue that starts one run at a time would start none. Gone: the lock's file names it while nothing holds the
lock (it died writing); or it took the lock (it tags itself so) and another run took it since, or it let go and its
process ended, however long ago (not a lake's backfill partition's run: it holds its partition's lock, not this
one). A run that never said it took the lock (killed before, an older version's) is gone when another run took the
lock :data:`TAKEN_OVER_AFTER` after it began, and let go.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import socket
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import psutil

from freight_pipeline.defs.names import ASSET_GRAPH_JOB
from freight_pipeline.warehouse.writer_lock import Holder, last_taker, lock_path, lock_state, writer_lock

WRITER_TAG = {"freight/warehouse_writer": "true"}
"""Tag of every run that writes the working database (what the schedules look for)."""
ACTIVE_STATUSES = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]
CLAIM_TAG = "freight/writer_lock_claim"
"""Tag of a run that took the warehouse's writer lock: the lock's holder as its file said then (JSON)."""


@contextlib.contextmanager
def writer_claim(instance: dg.DagsterInstance, run_id: str, data_dir: Path) -> Iterator[None]:
    """Hold ``data_dir``'s writer lock for the block as run ``run_id`` (``WarehouseBusy`` when another run holds it),
    tagging the run with the claim (:data:`CLAIM_TAG`) once it holds it."""
    with writer_lock(data_dir, run_id):
        instance.add_run_tags(run_id, {CLAIM_TAG: json.dumps(dataclasses.asdict(Holder.read(lock_path(data_dir))))})
        writer_runs_in_progress(instance, data_dir)  # a run killed before, which Dagster holds running: failed now
        yield


def claim_of(run: dg.DagsterRun) -> Holder | None:
    """The writer lock's holder as run ``run`` tagged it when it took the lock (None: it did not, or not yet)."""
    try:
        holder = Holder.of(json.loads(run.tags[CLAIM_TAG]))
    except (KeyError, ValueError):
        return None
    return holder if holder.run_id == run.run_id else None


def process_gone(holder: Holder) -> bool:
    """Whether ``holder``'s process is known to have ended: it ran on this host and no process (or a zombie) has its
    id, or the process with its id began after the holder took the lock (the id reused by a later process: a killed
    run's, once the system has come round its ids, or after a restart). One on another host is not known to have."""
    if holder.pid is None or holder.host != socket.gethostname():
        return False
    try:
        process = psutil.Process(holder.pid)
        if process.status() == psutil.STATUS_ZOMBIE:  # ended, not yet reaped
            return True
        began = process.create_time()
    except psutil.NoSuchProcess:
        return True
    except psutil.Error:  # another user's, which this one may not look at: not known to have ended
        return False
    try:
        took = dt.datetime.fromisoformat(holder.since) if holder.since else None
    except ValueError:
        return False
    # a process begins before it takes the lock; its time kept to the second, the process's to the clock tick
    return took is not None and began > took.replace(tzinfo=took.tzinfo or dt.UTC).timestamp() + PROCESS_BEGAN_SLACK_S


PROCESS_BEGAN_SLACK_S = 2.0
"""How much later than a lock's taking (kept to the second) its holder's process may seem to have begun (the two
clocks' rounding) before the process with its id is another's."""


TAKEN_OVER_AFTER = dt.timedelta(minutes=5)
"""A run Dagster holds running that never said it took the writer lock (no claim: ``writer_claim``) is dead when
another run took the lock this long after the run started (or was made, when Dagster has no start), and let go: a
live run takes the lock within seconds of its start (or ends, skipped, when another holds it). Not a lake's backfill
partition's run: it holds a lock of its partition's, and others take the writer lock meanwhile."""
PARTITION_TAG = "dagster/partition"
"""Dagster's tag of a partitioned run (a lake's backfill partition's): the partition it runs."""


def writer_runs_in_progress(instance: dg.DagsterInstance, data_dir: Path | None = None) -> list[dg.DagsterRun]:
    """The runs writing the warehouse that are queued or running (the writer jobs', and the asset graph's); one that
    Dagster holds running but whose process is gone (:func:`_gone`, by ``data_dir``'s writer lock) is reported failed,
    and is not one of them."""
    records = [*instance.get_run_records(filters=dg.RunsFilter(tags=WRITER_TAG, statuses=ACTIVE_STATUSES), limit=5),
               *instance.get_run_records(filters=dg.RunsFilter(job_name=ASSET_GRAPH_JOB, statuses=ACTIVE_STATUSES),
                                         limit=5)]
    held, holder = lock_state(data_dir) if data_dir is not None and records else (True, Holder())
    taker = holder if held or data_dir is None or holder.run_id else last_taker(data_dir)
    busy = []
    for record in records:
        run = record.dagster_run
        started = data_dir is not None and run.status == dg.DagsterRunStatus.STARTED
        gone = _gone(record, held, holder, taker) if started else None
        if gone is not None:
            instance.report_run_failed(run, f"{gone}: killed, or out of memory; the next run goes on from its last "
                                            "batch")
        else:
            busy.append(run)
    return busy


def _gone(record: dg.RunRecord, held: bool, holder: Holder, taker: Holder) -> str | None:
    """Why the run of ``record``, which Dagster holds running, is dead (None: nothing says so), by the writer lock:
    whether a live process holds it (``held``), the run its file names as holding it (``holder``) and the run that
    took it last (``taker``: the holder, else the one that let go of it last)."""
    run = record.dagster_run
    if run.run_id == holder.run_id:
        return None if held else f"its process died while it wrote the warehouse ({holder.describe()})"
    if PARTITION_TAG in run.tags:  # it holds a lock of its partition's: what others took says nothing of it
        return None
    claim = claim_of(run)
    if claim is not None:  # it took the lock, and holds it no more: it may be ending (its last results, its alerts)
        taken_since = taker.run_id is not None and taker.run_id != run.run_id  # the file names the last to take it
        if taken_since and (process_gone(claim) or claim.host != socket.gethostname()):  # another host's: unseen
            return (f"its process is gone: it held the warehouse's writer lock ({claim.describe()}), and another run "
                    f"took it since ({taker.describe()}{'' if held else ', and let go'})")
        if taker.run_id == run.run_id and not held and process_gone(claim):  # it let go: ending, or died since
            return f"its process is gone: it let go of the warehouse's writer lock ({claim.describe()}), and ended"
        return None
    if held:  # a run that never told it took the lock: judged only once the lock is free
        return None
    try:
        taken = dt.datetime.fromisoformat(taker.since) if taker.since else None
    except ValueError:
        return None
    # since it started (a queued run is made long before): since it was made when Dagster has no start
    began = dt.datetime.fromtimestamp(record.start_time, dt.UTC) if record.start_time else record.create_timestamp
    if taken is not None and taken.replace(tzinfo=taken.tzinfo or dt.UTC) > began + TAKEN_OVER_AFTER:
        return ("its process is gone: another run took the warehouse's writer lock since, and let go "
                f"({taker.describe()})")
    return None
