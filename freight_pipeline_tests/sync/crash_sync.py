"""A sync process for the crash trials: ``python -m freight_pipeline_tests.sync.crash_sync DATA_DIR RUN_ID``.

Service from FREIGHT_BASE_URL / FREIGHT_USERNAME / FREIGHT_PASSWORD; reconciliation on every run
(deletions happen between trials). Tiny lookup pages, fetch batches and detail batches, so the run
the parent kills is many transactions. Prints one line per progress message (``progress`` is called
right after each batch's transaction commits), ``publishing`` before the publish, then ``done``.
``FREIGHT_HEDGE`` sets its hedged reads (``0``: none, so
a read in the simulator's latency tail stays a straggler).
The parent kills it after a chosen line; its reruns run in the test's own process with
``RECONCILE_SETTINGS`` (the test suite's sizes, to finish quickly).
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from freight_pipeline.config import HEDGE_ENV, ServiceSettings, share_from_env
from freight_pipeline.lake.backend import storage_from_env
from freight_pipeline.sync.runner import sync_all
from freight_pipeline_tests.sync.settings import RECONCILE_SETTINGS

CRASH_SETTINGS = dataclasses.replace(RECONCILE_SETTINGS, page_size=10, fetch_batch_size=5)


def say(line: str) -> None:
    print(line, flush=True)


def main() -> None:
    data_dir, run_id = Path(sys.argv[1]), sys.argv[2]
    backend = storage_from_env()
    settings = dataclasses.replace(CRASH_SETTINGS, hedge_share=share_from_env(HEDGE_ENV, CRASH_SETTINGS.hedge_share))
    sync_all(ServiceSettings.from_env(), data_dir, settings, backend=backend, run_id=run_id, progress=say,
             publish_after=False)
    say("publishing")
    backend.publish(data_dir, run_id)
    say("done")


if __name__ == "__main__":
    main()
