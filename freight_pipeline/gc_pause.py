"""Python's cyclic garbage collector paused while a batch of records is decoded and normalized."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
_enabled_before = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection inside the block (reference counting frees what it always does); the
    collector is as it was once the outermost block of any thread ends.

    A batch's decoding and normalization allocate hundreds of thousands of dicts, lists and strings that
    all stay alive until its Arrow tables are made, and every collection the allocations trigger on the way
    walks all of them again, with nothing to free: about a third of a rebuild's normalization (``sync.rebuild
    .derive``; docs/performance.md). The other threads of the process go without collections meanwhile
    too, for as long as one batch takes."""
    global _depth, _enabled_before
    with _lock:
        if _depth == 0:
            _enabled_before = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _enabled_before:
                gc.enable()
