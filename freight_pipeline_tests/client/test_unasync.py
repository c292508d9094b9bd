"""The blocking client is generated from the asyncio one (``scripts/unasync.py``): one definition of
every endpoint. A stale generated module (``_sync_driver.py`` or ``sync_client.py``) fails here, as
httpcore's CI fails on its unasync check."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from freight_pipeline.client.limiter import BlockingLimit

REPO = Path(__file__).resolve().parents[2]
CLIENT = Path("freight_pipeline") / "client"
# generated module -> its hand-written asyncio source
GENERATED = {"_sync_driver.py": "_async_driver.py", "sync_client.py": "async_client.py"}


def test_sync_client_is_current_with_the_async_source() -> None:
    done = subprocess.run(
        [sys.executable, "scripts/unasync.py", "--check"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("stale", sorted(GENERATED))
def test_the_check_covers_both_generated_modules_and_names_the_stale_one(stale: str, tmp_path: Path) -> None:
    """On a copy of the script, the package and the ruff settings (ruff sorts imports by what exists)."""
    shutil.copytree(
        REPO / "freight_pipeline", tmp_path / "freight_pipeline", ignore=shutil.ignore_patterns("__pycache__")
    )
    for relative in ["pyproject.toml", "scripts/unasync.py"]:
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO / relative, tmp_path / relative)
    with (tmp_path / CLIENT / stale).open("a") as generated:
        generated.write("# edited by hand\n")
    done = subprocess.run(
        [sys.executable, "scripts/unasync.py", "--check"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1, done.stdout + done.stderr
    named = {name for name in GENERATED if f"{CLIENT / name} is stale" in done.stdout}
    assert named == {stale}, done.stdout + done.stderr


def test_blocking_limit_holds_threads_to_its_slots() -> None:
    limit = BlockingLimit.fixed(3)
    inside, most, lock = 0, 0, threading.Lock()

    def work() -> None:
        nonlocal inside, most
        with limit.slot() as said:
            with lock:
                inside += 1
                most = max(most, inside)
            time.sleep(0.02)
            said(None)  # type: ignore[arg-type]  # what the answer said: ignored by a fixed limit
            with lock:
                inside -= 1

    threads = [threading.Thread(target=work) for _ in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert most == 3 and inside == 0 and limit.maximum == 3
