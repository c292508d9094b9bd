"""A process that attaches the lake of ``FREIGHT_LAKE_*`` at a chosen instant (the catalog race test's child).

``python -m freight_pipeline_tests.lake.attach_at EPOCH_SECONDS SCRATCH``: imports everything first, sleeps
until ``EPOCH_SECONDS`` (so that its siblings attach at the same moment), attaches, prints ``attached``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from freight_pipeline.lake.connect import connect_lake
from freight_pipeline.lake.settings import LakeSettings


def main(at: float, scratch: Path) -> None:
    lake = LakeSettings.configured()
    assert lake is not None, "FREIGHT_LAKE_CATALOG_URI is not set"
    time.sleep(max(0.0, at - time.time()))
    connect_lake(lake, scratch, "256MB").close()
    print("attached", flush=True)


if __name__ == "__main__":
    main(float(sys.argv[1]), Path(sys.argv[2]))
