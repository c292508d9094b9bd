"""A writer that applies batches (and publishes now and then) forever, to be killed with SIGKILL.

``python crash_writer.py DATA_DIR [WAL_AUTOCHECKPOINT]``: continues from the stored cursor ``{"max_id": n}``; each batch
adds shipments n+1..n+3 (3 lines, 1 mark each), rewrites an older one, and advances the cursor
in the same transaction. Prints a line after each commit.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path

from freight_pipeline.warehouse.store import Warehouse
from freight_pipeline_tests.warehouse.helpers import TABLES, apply_shipment_batch, publish_held, shipment_batch

STREAM = "shipments"


def main() -> None:
    data_dir = Path(sys.argv[1])
    with Warehouse(data_dir, TABLES) as wh:
        if len(sys.argv) > 2:  # e.g. 8KB: a checkpoint after almost every commit, so kills land in them too
            wh.con.execute(f"SET wal_autocheckpoint = '{sys.argv[2]}'")
        batch = 0
        while True:
            stored = wh.reads.get_cursor(STREAM)
            last = json.loads(stored)["max_id"] if stored else 0
            ids = [last + 1, last + 2, last + 3]
            if last > 5:
                ids.append(last - 5)  # an already written shipment changes again
            tables, raw = shipment_batch(ids, lines=3, marks=1, version=batch)
            cursor = (STREAM, json.dumps({"max_id": last + 3}))
            apply_shipment_batch(wh, "crash", tables, ids, raw_documents=raw, cursor=cursor)
            batch += 1
            if batch % 4 == 0:
                publish_held(wh, grace=dt.timedelta(0), keep_versions=1)
            print(last + 3, flush=True)


if __name__ == "__main__":
    main()
