"""A sync process for the crash trials: ``python -m freight_pipeline_tests.sync.crash_sync DATA_DIR``.

Service from FREIGHT_BASE_URL / FREIGHT_USERNAME / FREIGHT_PASSWORD; small pages so a run is many
transactions; reconciliation on every run. Prints ``done`` when the run (and publish) finished.
"""

from __future__ import annotations

import sys
from pathlib import Path

from freight_pipeline.config import ServiceSettings
from freight_pipeline.sync.runner import sync_all
from freight_pipeline_tests.sync.conftest import TEST_SETTINGS


def main() -> None:
    sync_all(ServiceSettings.from_env(), Path(sys.argv[1]), TEST_SETTINGS)
    print("done", flush=True)


if __name__ == "__main__":
    main()
