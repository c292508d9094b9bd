"""A rebuild process for the crash test: ``python -m freight_pipeline_tests.sync.crash_rebuild DATA_DIR RUN_ID BATCH``.

Rebuilds ``DATA_DIR``'s working warehouse from its raw records, ``BATCH`` shipments per transaction, and
prints one line right after each batch's transaction commits (the parent kills it after the first).
"""

from __future__ import annotations

import sys
from pathlib import Path

from freight_pipeline.lake.backend import storage_from_env
from freight_pipeline.sync.rebuild import rebuild
from freight_pipeline.warehouse.store import open_warehouse
from freight_pipeline_tests.sync.settings import TEST_SETTINGS


def main() -> None:
    data_dir, run_id, batch = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    with open_warehouse(data_dir, storage_from_env()) as warehouse:
        rebuild(warehouse, run_id, TEST_SETTINGS, batch_size=batch, progress=lambda line: print(line, flush=True))
    print("done", flush=True)


if __name__ == "__main__":
    main()
