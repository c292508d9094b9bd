"""Small helpers shared by the commands: the data directory, stderr progress, secret redaction."""

from __future__ import annotations

import argparse
import importlib.abc
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

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


class _PandasLeftOut(importlib.abc.MetaPathFinder):
    """Refuses to import pandas, as if it were not installed (:func:`without_pandas`)."""

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None) -> None:
        if fullname.partition(".")[0] == "pandas":
            raise ModuleNotFoundError(f"no module named {fullname!r}: pandas is left out of the sync without Dagster "
                                      "(freight_pipeline.commands.common.without_pandas)", name=fullname)


def without_pandas() -> None:
    """Make pandas unimportable in this process, as if it were not installed, unless it is imported already.
    pyarrow imports it (0.3-0.5 s) at its first conversion of a Python list, only to tell whether it was handed
    a pandas object, which the sync never does; pyarrow and DuckDB work without it, and code that does need
    pandas fails naming it. For a command that runs the job without Dagster (Dagster imports pandas itself)."""
    if "pandas" not in sys.modules and not any(isinstance(f, _PandasLeftOut) for f in sys.meta_path):
        sys.meta_path.insert(0, _PandasLeftOut())
