"""The fork server of dbt workers in the lake environment, whose duckdb (1.5) opens its default connection as it is
imported, with a thread for each other core: the server ends those before it serves, as a fork copies only the
thread that forks (``marts/test_worker_server.py`` tests its workers, in the default environment)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import duckdb

from freight_pipeline.marts.worker_server import start_server


def test_the_server_serves_with_nothing_but_the_thread_that_forks(tmp_path: Path) -> None:
    assert duckdb.__version__.startswith("1.")  # the environment this case is about
    process, said = start_server(tmp_path / "s")  # RuntimeError when it refused to serve
    try:
        assert re.fullmatch(r"ready \(project parsed in [0-9.]+ s\)", said), said
        assert len(os.listdir(f"/proc/{process.pid}/task")) == 1
    finally:
        assert process.stdin is not None
        process.stdin.close()
        assert process.wait(timeout=30) == 0
