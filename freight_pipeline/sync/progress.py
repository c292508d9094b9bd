"""Progress lines of a run: passed to the caller's callback from the event loop's thread, and thinned.

A stream reports after every committed batch (the crash trials and the command line want that), but
an orchestrator storing each line as an event should not get thousands of them: :class:`Throttled`
passes the first line and then at most one per interval. :func:`loop_safe` makes a callback safe to
call from the writer thread: the line is handed to the event loop, which calls the callback.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

Progress = Callable[[str], None]


class Throttled:
    """A progress callback that passes on the first line, then at most one line per ``every_s`` seconds."""

    def __init__(self, say: Progress, every_s: float = 15.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.say, self.every_s, self.clock = say, every_s, clock
        self._last: float | None = None
        self.dropped = 0

    def __call__(self, line: str) -> None:
        now = self.clock()
        if self._last is not None and now - self._last < self.every_s:
            self.dropped += 1
            return
        self._last = now
        self.say(line)


def loop_safe(say: Progress) -> Progress:
    """``say`` for use from any thread: lines from other threads are passed on by the running event loop."""
    loop = asyncio.get_running_loop()
    owner = threading.get_ident()

    def safe(line: str) -> None:
        if threading.get_ident() == owner:
            say(line)
            return
        try:
            loop.call_soon_threadsafe(say, line)
        except RuntimeError:  # the loop has closed: nobody else is calling any more
            say(line)

    return safe
