"""Small helpers shared by the commands: the data directory, stderr progress, secret redaction."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from freight_pipeline.config import DATA_DIR_ENV, DEFAULT_DATA_DIR


def add_data_dir_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help=f"where the warehouse lives (default: ${DATA_DIR_ENV}, else {DEFAULT_DATA_DIR})",
    )


def resolve_data_dir(arg: Path | None) -> Path:
    """``--data-dir`` if given, else ``$FREIGHT_DATA_DIR``, else ``./data``; made absolute."""
    raw = arg if arg is not None else Path(os.environ.get(DATA_DIR_ENV) or DEFAULT_DATA_DIR)
    return Path(raw).expanduser().resolve()


def say(message: str) -> None:
    """One progress line on stderr, flushed at once."""
    print(message, file=sys.stderr, flush=True)


def redact(text: str, *secrets: str | None) -> str:
    """``text`` with every non-trivial secret replaced by ``***``."""
    for secret in secrets:
        if secret and len(secret) >= 3:
            text = text.replace(secret, "***")
    return text


class Stopwatch:
    """Seconds since construction."""

    def __init__(self) -> None:
        self.started = time.monotonic()

    @property
    def seconds(self) -> float:
        return time.monotonic() - self.started
