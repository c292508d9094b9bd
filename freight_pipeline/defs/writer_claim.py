"""A Dagster run's claim on the warehouse's writer lock, told to Dagster: the run's tag :data:`CLAIM_TAG` says that it
took the lock, as the lock's file named it then (its id, process, host, since when).

The lock's file keeps only the run that took the lock last (``warehouse.writer_lock``); the tag keeps that this run
took it, so a tick can tell a run that took the lock and lost it since (its process died, and another run took the lock
after it) from one that has not reached the lock yet, however long ago either began (``jobs.writer_runs_in_progress``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import dagster as dg

from freight_pipeline.warehouse.writer_lock import Holder, lock_path, writer_lock

CLAIM_TAG = "freight/writer_lock_claim"
"""Tag of a run that took the warehouse's writer lock: the lock's holder as its file said then (JSON)."""


@contextlib.contextmanager
def writer_claim(instance: dg.DagsterInstance, run_id: str, data_dir: Path) -> Iterator[None]:
    """Hold ``data_dir``'s writer lock for the block as run ``run_id`` (``WarehouseBusy`` when another run holds it),
    tagging the run with the claim (:data:`CLAIM_TAG`) once it holds it."""
    with writer_lock(data_dir, run_id):
        instance.add_run_tags(run_id, {CLAIM_TAG: json.dumps(dataclasses.asdict(Holder.read(lock_path(data_dir))))})
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
    id. One on another host is not known to have."""
    if holder.pid is None or holder.host != socket.gethostname():
        return False
    try:
        os.kill(holder.pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    with contextlib.suppress(OSError, IndexError):  # Linux: a zombie (ended, not yet reaped) is gone
        return Path(f"/proc/{holder.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    return False
