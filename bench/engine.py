"""The sync engine alone (every stream, no Dagster, no dbt, no publish), for the memory figures of
``bench/compare.py``: ``python bench/engine.py BASE_URL DATA_DIR [--publish]``.

``FREIGHT_HISTORY=0`` switches the history off as it does for the pipeline. ``--publish``: then publish
the working database as a sync run does (``sync_all``'s publish). The last line printed is JSON: the
process's peak RSS (``getrusage``, exact), the seconds of ``sync_all`` (the sync and, with ``--publish``,
the publish; no interpreter start), and the publish's own figures.
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path

from freight_pipeline.config import ServiceSettings, load_settings
from freight_pipeline.lake.backend import storage_from_env
from freight_pipeline.sync.runner import sync_all
from freight_pipeline.sync.settings import SyncSettings

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base_url")
    parser.add_argument("data_dir", type=Path)
    parser.add_argument("--publish", action="store_true")
    args = parser.parse_args()
    # like for like with the peer, which reads no E-Files: the documents stream off
    # what the configuration sets of the sync (the history's switch, the freshness of events, ...)
    settings = SyncSettings.of(load_settings().sync).replaced(documents=False)
    started = time.monotonic()
    results, publication = sync_all(ServiceSettings(args.base_url, "demo", "demo-password"), args.data_dir,
                                    settings, backend=storage_from_env(), publish_after=args.publish)
    seconds = time.monotonic() - started
    failed = [f"{r.stream}: {r.error}" for r in results if r.status != "success"]
    if failed:
        raise SystemExit(f"the sync failed: {'; '.join(failed)}")
    print(" ".join(f"{r.stream}={r.rows_read}" for r in results))
    print(json.dumps({"max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "seconds": seconds,
                      "publish": publication.metadata() if publication else None}, default=str))
