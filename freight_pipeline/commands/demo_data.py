"""The demo's data directory: every demo starts from an empty warehouse, and only ever removes its own.

The demo's simulator is new on every run (same seed, same data, none of the previous demo's
changes), so a warehouse left by an earlier demo would not describe it: its cursor would skip the
first full sync and its changed shipments would not match the new service. A demo therefore
marks the data directory it fills (``.freight-demo``) and, when run again on it, removes what the
pipeline wrote there before starting. A data directory holding a warehouse WITHOUT that mark (a
real sync's) is never touched: the demo refuses it.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
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

MARKER = ".freight-demo"
PIPELINE_ENTRIES = (PUBLISHED_DB, f"{PUBLISHED_DB}.wal", WORK_DIR, PARQUET_LINK, VERSIONS_DIR, LOCK_FILE)
PIPELINE_GLOBS = (f"{TMP_DB_PREFIX}*", f"{PARQUET_LINK}.{TMP_VERSION_PREFIX}*")


class ForeignDataDir(RuntimeError):
    pass


def pipeline_entries(data_dir: Path) -> list[Path]:
    """What the pipeline writes in ``data_dir`` and is there now."""
    found = [p for p in (data_dir / name for name in PIPELINE_ENTRIES) if p.exists() or p.is_symlink()]
    for pattern in PIPELINE_GLOBS:
        found.extend(sorted(data_dir.glob(pattern)))
    return found


def prepare_demo_dir(data_dir: Path, settings: dict[str, object]) -> list[Path]:
    """Empty the pipeline's part of a previous demo's ``data_dir`` and mark it; returns what was removed.

    Raises ForeignDataDir when ``data_dir`` holds a warehouse that no demo made.
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
    for path in present:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    data_dir.mkdir(parents=True, exist_ok=True)
    stamp = {"created_by": "freight-pipeline demo", "at": dt.datetime.now(dt.UTC).isoformat(), **settings}
    marker.write_text(json.dumps(stamp, indent=2) + "\n")
    return present
