"""One run writing a warehouse at a time, across processes: the data directory's writer lock.

A sync or a rebuild holds an exclusive ``flock`` on ``<data dir>/work/writer.lock`` from before it opens the
working database until after its publish, and writes in the file which run holds it (its id, process, host,
since when). A second run of the same warehouse (cron starting one while the last still runs) does not fail on
DuckDB's own lock: it is told who holds the warehouse (:class:`WarehouseBusy`) and is skipped, or waits for it
(``wait`` seconds). The kernel releases the lock of a process that dies, a SIGKILL included, so a lock left by
a killed run is simply taken by the next; its file still names the dead run until then. A run that lets go leaves
in the file only that it held the lock (under ``released``: no holder), so who took it last, and when, is known
after it too (:func:`last_taker`). A backfill partition
of a lake does not take it: its writers run at once by design, each under a cursor of its own. Each partition
takes a lock of its own instead (:func:`partition_lock`): one partition run twice at once (a backfill launched
twice) would have both runs append its shipments, none of which either saw held.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LOCK_FILE = "writer.lock"
POLL_SECONDS = 0.25
"""How often a run that waits for the lock asks again."""


@dataclass(frozen=True)
class Holder:
    """The run that holds a warehouse's writer lock, as its lock file says."""

    run_id: str | None = None
    pid: int | None = None
    host: str | None = None
    since: str | None = None
    brief: bool = False
    """It holds the lock for a moment (a look at the freshness, ``alerts``): a run waits for it to end."""

    @classmethod
    def read(cls, path: Path) -> Holder:
        """The run the file names as holding the lock (none when it names a run that let go: ``released``)."""
        return cls.of(_file_data(path))

    @classmethod
    def of(cls, data: Any) -> Holder:
        if not isinstance(data, dict):
            return cls()
        return cls(data.get("run_id"), data.get("pid"), data.get("host"), data.get("since"),
                   bool(data.get("brief", False)))

    def describe(self) -> str:
        """``run cli-20261201T..., process 4242 on host-a, since 2026-12-01 18:00:03 UTC``."""
        since = f", since {self.since.replace('T', ' ').removesuffix('+00:00')} UTC" if self.since else ""
        where = f" on {self.host}" if self.host else ""
        return f"run {self.run_id or '(unknown)'}, process {self.pid or '?'}{where}{since}"


class WarehouseBusy(RuntimeError):
    """Another run holds the warehouse's writer lock (and the wait, if any, ran out)."""

    def __init__(self, data_dir: Path, holder: Holder, waited: float) -> None:
        self.data_dir, self.holder, self.waited = data_dir, holder, waited
        waiting = f" after waiting {waited:.0f} s" if waited else ""
        super().__init__(f"another run writes {data_dir}{waiting}: {holder.describe()}")


BRIEF_WAIT_SECONDS = 60.0
"""How much longer than its ``wait`` a run waits for a holder that holds the lock for a moment (a cron sync and
``status --alert`` started in the same minute: the sync runs after the look, it is not skipped)."""
HOLDER_WRITTEN_SECONDS = 0.5
"""How long a run refused the lock waits to read who holds it: the holder writes its file right after it takes
the lock, and may not have yet when two runs start at the same moment."""


RELEASED = "released"
"""The key under which a lock's file keeps the run that let go of it last (its id, process, host, since when)."""


def _file_data(path: Path) -> Any:
    try:
        return json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        return {}


def last_taker(data_dir: Path) -> Holder:
    """The run that took ``data_dir``'s writer lock last: the one its file names as holding it (alive, or dead
    holding it), else the one that let go of it last; none before the first."""
    data = _file_data(lock_path(data_dir))
    holder = Holder.of(data)
    return holder if holder != Holder() or not isinstance(data, dict) else Holder.of(data.get(RELEASED))


def _holder(path: Path) -> Holder:
    deadline = time.monotonic() + HOLDER_WRITTEN_SECONDS
    holder = Holder.read(path)
    while holder == Holder() and time.monotonic() < deadline:
        time.sleep(0.01)
        holder = Holder.read(path)
    return holder


def _released(fd: int) -> bool:
    """Whether the lock was taken now, at a last try."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def wait_seconds(text: str) -> float:
    """How long to wait for the lock, from text: a number of seconds, 0 or more (a ValueError otherwise)."""
    seconds = float(text)
    if not seconds >= 0:  # NaN too
        raise ValueError(f"{text!r} is not a number of seconds (0 or more)")
    return seconds


def lock_path(data_dir: Path, name: str = LOCK_FILE) -> Path:
    return Path(data_dir) / "work" / name


def partition_lock(partition: str) -> str:
    """The name of the lock a backfill partition's run holds (:func:`writer_lock`'s ``name``)."""
    return f"partition-{partition}.lock"


def writer_locks(data_dir: Path) -> list[str]:
    """The names of ``data_dir``'s writer locks: the warehouse's, then each backfill partition's that was taken
    (:func:`partition_lock`), by name."""
    partitions = sorted(p.name for p in (Path(data_dir) / "work").glob(partition_lock("*")))
    return [LOCK_FILE, *partitions]


def lock_state(data_dir: Path, name: str = LOCK_FILE) -> tuple[bool, Holder]:
    """Whether a live process holds ``data_dir``'s writer lock (``name``: another, :func:`writer_locks`), and the
    run its file names. A run that lets go names no holder first (:func:`writer_lock`): a file naming a run while
    the lock is free is that of a run whose process died holding it (the kernel released the lock)."""
    path = lock_path(data_dir, name)
    if not path.is_file():
        return False, Holder()
    fd = os.open(path, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True, Holder.read(path)
        try:
            return False, Holder.read(path)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def runs_it(state: tuple[bool, Holder], run_id: str | None) -> bool:
    """Whether run ``run_id`` holds the writer lock as ``state`` (:func:`lock_state`) found it: its file names the
    run and the lock is held (a holder on another host, whose lock this machine may not see: assumed to)."""
    held, holder = state
    return holder.run_id is not None and holder.run_id == run_id and (
        held or (holder.host is not None and holder.host != socket.gethostname()))


_HELD: dict[Path, str] = {}
"""The writer locks this process holds: lock file -> the run holding it."""


@contextlib.contextmanager
def writer_lock(data_dir: Path, run_id: str, *, wait: float = 0.0, brief: bool = False,
                name: str = LOCK_FILE) -> Iterator[None]:
    """Hold ``data_dir``'s writer lock for the block, as run ``run_id``; :class:`WarehouseBusy` when another run
    holds it for longer than ``wait`` seconds (a ``brief`` holder: :data:`BRIEF_WAIT_SECONDS` longer). Within a
    block that holds it for ``run_id``, this process takes it again for the same run at once (a command takes it
    before it starts the job, whose engine takes it too); for another run of this process it is busy, as for
    another process's. ``brief``: the block holds it for a moment (others wait for it rather than skip). ``name``:
    another lock of the data directory (:func:`partition_lock`)."""
    path = lock_path(data_dir, name).resolve()
    if _HELD.get(path) == run_id:
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        started = time.monotonic()
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                waited = time.monotonic() - started
                if waited >= wait:
                    holder = _holder(path)
                    if not (holder.brief and waited < wait + BRIEF_WAIT_SECONDS):
                        if _released(fd):  # while its file was read (a holder names none as it lets go)
                            break
                        raise WarehouseBusy(Path(data_dir), holder, wait) from None
                time.sleep(POLL_SECONDS if waited >= wait else min(POLL_SECONDS, wait - waited))
        holder = {"run_id": run_id, "pid": os.getpid(), "host": socket.gethostname(),
                  "since": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "brief": brief}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(holder).encode(), 0)
        _HELD[path] = run_id
        try:
            yield
        finally:
            del _HELD[path]
            os.ftruncate(fd, 0)  # no holder named any more: who held it, and let go
            os.pwrite(fd, json.dumps({RELEASED: holder}).encode(), 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
