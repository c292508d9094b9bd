"""The demo's data directory: every demo starts from an empty warehouse, and only ever removes its own.

The demo's simulator is new on every run (same seed, same data, none of the previous demo's
changes), so a warehouse left by an earlier demo would not describe it: its cursor would skip the
first full sync and its changed shipments would not match the new service. A demo therefore
marks the data directory it fills (``.freight-demo``) and, when run again on it, removes what the
pipeline wrote there before starting. A data directory holding a warehouse WITHOUT that mark (a
real sync's) is never touched: the demo refuses it. One demo at a time uses a data directory
(:func:`demo_dir_held`): a second one started beside it would empty the first's warehouse under its run.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from freight_pipeline.warehouse.paths import WORK_DIR
from freight_pipeline.warehouse.publish import (
    LOCK_FILE,
    PARQUET_LINK,
    PUBLISHED_DB,
    TMP_DB_PREFIX,
    TMP_VERSION_PREFIX,
    VERSIONS_DIR,
)
from freight_pipeline.warehouse.writer_lock import WarehouseBusy, writer_lock

MARKER = ".freight-demo"
PIPELINE_ENTRIES = (PUBLISHED_DB, f"{PUBLISHED_DB}.wal", WORK_DIR, PARQUET_LINK, VERSIONS_DIR, LOCK_FILE)
PIPELINE_GLOBS = (f"{TMP_DB_PREFIX}*", f"{PARQUET_LINK}.{TMP_VERSION_PREFIX}*")


class ForeignDataDir(RuntimeError):
    pass


class DemoBusy(RuntimeError):
    """Another demo, or a run, uses the data directory the demo would empty."""


@contextlib.contextmanager
def demo_dir_held(data_dir: Path) -> Iterator[None]:
    """``data_dir`` (made when missing) kept by this demo for the block: an exclusive ``flock`` on the directory
    itself (no file to leave or to empty; the kernel lets go of a killed demo's); DemoBusy when another demo
    holds it."""
    data_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(data_dir, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise DemoBusy(f"another `freight-pipeline demo` runs in {data_dir}: wait for it to end, or pass "
                           "another --data-dir (make demo DATA_DIR=...)") from None
        yield
    finally:
        os.close(fd)


def pipeline_entries(data_dir: Path) -> list[Path]:
    """What the pipeline writes in ``data_dir`` and is there now."""
    found = [p for p in (data_dir / name for name in PIPELINE_ENTRIES) if p.exists() or p.is_symlink()]
    for pattern in PIPELINE_GLOBS:
        found.extend(sorted(data_dir.glob(pattern)))
    return found


def prepare_demo_dir(data_dir: Path, settings: dict[str, object]) -> list[Path]:
    """Empty the pipeline's part of a previous demo's ``data_dir`` and mark it; returns what was removed.

    Raises ForeignDataDir when ``data_dir`` holds a warehouse that no demo made, DemoBusy when a run writes it
    (its writer lock, held while what it wrote is removed).
    """
    marker = data_dir / MARKER
    present = pipeline_entries(data_dir)
    if present and not marker.exists():
        names = ", ".join(p.name for p in present)
        raise ForeignDataDir(
            f"{data_dir} already holds a warehouse that the demo did not create ({names}); the demo starts "
            "from an empty data directory and never deletes one it did not make: pass another --data-dir "
            "(make demo DATA_DIR=...) or remove that one yourself"
        )
    held = writer_lock(data_dir, "demo") if (data_dir / WORK_DIR).is_dir() else contextlib.nullcontext()
    try:
        with held:
            for path in present:
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path)
                else:
                    path.unlink()
    except WarehouseBusy as busy:
        raise DemoBusy(f"{busy}: the demo would empty it under that run") from None
    data_dir.mkdir(parents=True, exist_ok=True)
    stamp = {"created_by": "freight-pipeline demo", "at": dt.datetime.now(dt.UTC).isoformat(), **settings}
    marker.write_text(json.dumps(stamp, indent=2) + "\n")
    return present
