"""The blocking client is generated from the asyncio one (``scripts/unasync.py``): one definition of
every endpoint. A stale ``sync_client.py`` fails here, as httpcore's CI fails on its unasync check."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

from freight_pipeline.client.limiter import BlockingLimit

REPO = Path(__file__).resolve().parents[2]


def test_sync_client_is_current_with_the_async_source() -> None:
    done = subprocess.run([sys.executable, "scripts/unasync.py", "--check"], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


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
