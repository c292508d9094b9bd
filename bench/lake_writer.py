"""One backfill writer for the kill trials (the lake crash test's and ``bench/lake.py``'s).

``python -m bench.lake_writer KEY BOUNDARIES DATA_DIR [BATCH]`` (from the checkout):

Runs the shipments stream for partition ``KEY`` of the plan cut at ``BOUNDARIES`` (comma-separated ids)
into the lake of ``FREIGHT_LAKE_*``, with small batches (5 shipments, or ``BATCH``) so a partition is
many commits, printing
``committing`` right before each transaction's COMMIT and ``done`` at the end. The parent SIGKILLs it
a few milliseconds after a chosen ``committing``: inside the commit (Parquet to S3, then the catalog).
"""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from freight_pipeline.config import ServiceSettings
from freight_pipeline.lake.backend import storage_from_env
from freight_pipeline.sync import runner
from freight_pipeline.sync.backfill import IdRange, id_ranges_between
from freight_pipeline.sync.settings import SyncSettings
from freight_pipeline.sync.shipments import STREAM
from freight_pipeline.warehouse.database import Database

WRITER_SETTINGS = SyncSettings(
    page_size=25, fetch_batch_size=5, concurrency=8, reconcile_interval=None, retry_after=dt.timedelta(0),
)
"""Small pages and batches of 5 shipments (a partition is many commits); no reconciliation, quarantined
records retried by the next run: the sync tests' settings with smaller batches."""


def say(line: str) -> None:
    print(line, flush=True)


def announce_commits() -> None:
    """From now on, every transaction of a warehouse prints ``committing`` right before its COMMIT."""
    plain = Database.transaction

    @contextmanager
    def announcing(database: Database) -> Iterator[duckdb.DuckDBPyConnection]:
        with plain(database) as con:
            yield con
            say("committing")

    Database.transaction = announcing  # type: ignore[method-assign]


def main() -> None:
    key, boundaries, data_dir = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    plan = id_ranges_between([int(b) for b in boundaries.split(",") if b])
    settings = WRITER_SETTINGS.replaced(id_range=IdRange.parse(key), backfill_plan=plan)
    if len(sys.argv) > 4:  # the benchmark's trial: the production page and batch sizes
        settings = settings.replaced(page_size=500, fetch_batch_size=int(sys.argv[4]))
    announce_commits()
    runner.run_stream(STREAM, ServiceSettings.configured(), data_dir, settings, backend=storage_from_env())
    say("done")


if __name__ == "__main__":
    main()
