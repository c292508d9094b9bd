"""The Dagster instance directory of ``ui``: ``$DAGSTER_HOME``, with a ``dagster.yaml`` written once."""

from __future__ import annotations

import os
from pathlib import Path

DAGSTER_YAML = """\
# Written by `freight-pipeline ui` because none was here; edit freely, it is never overwritten.
# One run at a time: every run of the freight jobs writes the same DuckDB working database, and
# DuckDB allows one writer.
run_coordinator:
  module: dagster.core.run_coordinator
  class: QueuedRunCoordinator
  config:
    max_concurrent_runs: 1
telemetry:
  enabled: false
"""


def dagster_home(default: Path) -> Path:
    """``$DAGSTER_HOME`` when set, else ``default``; created when missing."""
    home = Path(os.environ.get("DAGSTER_HOME") or default).expanduser().resolve()
    home.mkdir(parents=True, exist_ok=True)
    return home


def ensure_dagster_yaml(home: Path) -> bool:
    """Write ``home/dagster.yaml`` unless one exists; True when written."""
    path = home / "dagster.yaml"
    if path.exists():
        return False
    path.write_text(DAGSTER_YAML)
    return True
