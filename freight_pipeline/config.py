"""Runtime configuration from the environment, declared once with its defaults."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_BASE_URL = "http://127.0.0.1:8765"
DEFAULT_USERNAME = "demo"
DEFAULT_DATA_DIR = "./data"
RECONCILE_ENV = "FREIGHT_RECONCILE_INTERVAL_MINUTES"
"""Minutes between full id reconciliations of the shipments stream (read by the Dagster resource)."""


@dataclass(frozen=True)
class ServiceSettings:
    """Where the freight service is and who we are there. The password never appears in repr."""

    base_url: str = DEFAULT_BASE_URL
    username: str = DEFAULT_USERNAME
    password: str = field(default="", repr=False)

    @classmethod
    def from_env(cls) -> ServiceSettings:
        return cls(
            base_url=os.environ.get("FREIGHT_BASE_URL", DEFAULT_BASE_URL),
            username=os.environ.get("FREIGHT_USERNAME", DEFAULT_USERNAME),
            password=os.environ.get("FREIGHT_PASSWORD", ""),
        )


def data_dir_from_env() -> Path:
    return Path(os.environ.get("FREIGHT_DATA_DIR", DEFAULT_DATA_DIR)).resolve()
