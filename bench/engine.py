"""The sync engine alone (every stream, no Dagster, no dbt, no publish), for the memory figures of
``bench/compare.py``: ``python bench/engine.py BASE_URL DATA_DIR``."""

from __future__ import annotations

import sys
from pathlib import Path

from freight_pipeline.config import ServiceSettings
from freight_pipeline.lake.backend import storage_from_env
from freight_pipeline.sync.runner import sync_all
from freight_pipeline.sync.settings import SyncSettings

if __name__ == "__main__":
    base_url, data_dir = sys.argv[1], Path(sys.argv[2])
    # like for like with the peer, which reads no E-Files: the documents stream off
    results, _ = sync_all(ServiceSettings(base_url, "demo", "demo-password"), data_dir, SyncSettings(documents=False),
                          backend=storage_from_env(), publish_after=False)
    print(" ".join(f"{r.stream}={r.rows_read}" for r in results))
