"""Built fixtures shared by the whole test session, across pytest-xdist's workers: a folder built once
(the first worker to ask builds it under a file lock, the others wait and reuse it), under the root of
the session's temporary directories. A test that changes what it holds works on a copy."""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

DONE = ".built"
"""Written last in a built folder: a build cut off halfway is built again."""


def session_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's temporary root, common to its xdist workers (each worker's base is a folder in it)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """The folder ``name`` that ``build`` filled, built by the first caller of the session."""
    root = session_root(tmp_path_factory)
    folder = root / f"built-{name}"
    with (root / f"built-{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / DONE).exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            (folder / DONE).touch()
    return folder
