"""Progress of a run: its lines, passed to the caller's callback from the event loop's thread, and thinned;
and each stream's tally (done of the total, requests, retries), for a progress bar.

A stream reports after every committed batch (the crash trials and the command line want that), but
an orchestrator storing each line as an event should not get thousands of them: :class:`Throttled`
passes the first line and then at most one per interval. :func:`loop_safe` makes a callback safe to
call from the writer thread: the line is handed to the event loop, which calls the callback.

Tallies: each stream keeps a :class:`Meter` (the shipments stream: shipments written of the total the
change walk's lookups announce in ``X-Row-Count``), which tells every listener installed in this process
(:func:`tallies_to`: the command line's progress bar, whichever way it runs the job) a :class:`Tally` when
the total becomes known and after each committed batch. Without a listener a meter only counts. The
tallies are numbers and a stream's name: nothing in them can carry a secret. :class:`TallyLines` makes
them plain lines, at most one per stream per interval (a log, a pipe); the terminal's bar is the
command's (``commands.progress_bar``): the engine draws nothing.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

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


@dataclass(frozen=True)
class Tally:
    """How far one stream's run is: ``done`` of ``total`` (None: not announced yet; a lower bound unless
    ``total_final``: it can still grow), and the requests and retries it made so far."""

    stream: str
    unit: str
    done: int
    total: int | None
    total_final: bool
    requests: int
    retries: int
    seconds: float = 0.0
    """Since the stream's meter began."""
    ended: bool = False
    """The stream's last tally: it finished (done is all it did)."""


TallyListener = Callable[[Tally], None]
"""Hears every meter's tallies, from any of the run's threads (the event loop's, the writer's): it must be
thread-safe and quick."""

_listeners: list[TallyListener] = []
_listeners_lock = threading.Lock()


@contextmanager
def tallies_to(listener: TallyListener) -> Iterator[None]:
    """``listener`` hears every stream's tallies in this process while the block runs (a job run in this
    process, with Dagster or without: the command line installs its progress bar so)."""
    with _listeners_lock:
        _listeners.append(listener)
    try:
        yield
    finally:
        with _listeners_lock:
            _listeners.remove(listener)


class Meter:
    """One stream's tally, told to the listeners (:func:`tallies_to`) as it moves; ``counts`` gives the
    source's (requests, retries) so far: the stream's are those made since the meter began."""

    def __init__(self, stream: str, counts: Callable[[], tuple[int, int]], unit: str = "shipments",
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.counts, self.clock = counts, clock
        self._began = clock()
        self._before = counts()
        self._lock = threading.Lock()
        self._tally = Tally(stream, unit, 0, None, False, 0, 0)
        self._expected = 0
        self._announced: int | None = None

    @property
    def tally(self) -> Tally:
        return self._tally

    def announce(self, total: int | None, *, final: bool) -> None:
        """The total a listing announced (the change walk's, as it knows it so far); told when it changed."""
        with self._lock:
            if total is None or (total == self._announced and final == self._tally.total_final):
                return
            self._announced = total
            self._move(total=self._expected + total, total_final=final)

    def expect(self, more: int) -> None:
        """``more`` to do besides the announced total (work listed after the walk: retries, a re-read)."""
        if more <= 0:
            return
        with self._lock:
            self._expected += more
            self._move(total=self._expected + (self._announced or 0))

    def advance(self, done: int) -> None:
        """``done`` more are done (a committed batch)."""
        with self._lock:
            self._move(done=self._tally.done + done)

    def end(self, done: int = 0) -> None:
        """The stream finished (``done`` more were done): its last tally, whose total is what it did (a walk's
        announced total counts what changed again during the run, and moved beyond its ceiling, too)."""
        with self._lock:
            done += self._tally.done
            self._move(done=done, total=done, total_final=True, ended=True)

    def _move(self, **changes: object) -> None:
        if not _listeners:  # nobody listens: only the count, nothing asked of the client nor the clock
            self._tally = replace(self._tally, **changes)  # type: ignore[arg-type]
            return
        requests, retries = self.counts()
        self._tally = replace(self._tally, requests=requests - self._before[0], retries=retries - self._before[1],
                              seconds=self.clock() - self._began, **changes)  # type: ignore[arg-type]
        for listener in tuple(_listeners):
            listener(self._tally)


def tally_line(tally: Tally) -> str:
    """One plain line of a tally: done of the total, the rate and the time left (when they can be told),
    requests and retries; the stream's last says what it did in all."""
    seconds = tally.seconds
    rate = tally.done / seconds if seconds > 0 and tally.done else None
    speed = f", {_rate(rate)} {tally.unit}/s" if rate else ""
    work = requests_and_retries(tally)
    if tally.ended:
        return f"{tally.stream}: {tally.done:,} {tally.unit} done in {_duration(seconds)}{speed}; {work}"
    if tally.total is None:
        return f"{tally.stream}: {tally.done:,} {tally.unit} done{speed}; {work}"
    about = "" if tally.total_final else "~"
    share = f" ({min(100, tally.done * 100 // tally.total)} %)" if tally.total else ""
    left = ""
    if rate and tally.total_final and tally.total > tally.done:
        left = f", about {_duration((tally.total - tally.done) / rate)} left"
    return f"{tally.stream}: {tally.done:,} of {about}{tally.total:,} {tally.unit}{share}{speed}{left}; {work}"


TALLY_LINE = re.compile(r"[a-z_]+: [\d,]+ .+; [\d,]+ requests?, [\d,]+ retr(?:y|ies)")
"""What every :func:`tally_line` is: the stream, its count, then its requests and retries."""


def is_tally_line(text: str) -> bool:
    """``text`` is a :func:`tally_line` (as a run logged it: a command that shows the tallies itself leaves it out)."""
    return TALLY_LINE.fullmatch(text) is not None


def requests_and_retries(tally: Tally) -> str:
    """``1,122 requests, 0 retries``."""
    return f"{_counted(tally.requests, 'request')}, {_counted(tally.retries, 'retry', 'retries')}"


def _counted(count: int, one: str, many: str | None = None) -> str:
    return f"{count:,} {one if count == 1 else many or one + 's'}"


def _rate(per_second: float) -> str:
    return f"{per_second:,.0f}" if per_second >= 10 else f"{per_second:.1f}"


def _duration(seconds: float) -> str:
    """``7 s``, ``4 min 05 s``, ``1 h 02 min``."""
    whole = round(seconds)
    if whole < 60:
        return f"{seconds:.1f} s" if seconds < 10 else f"{whole} s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


class TallyLines:
    """Tallies as plain lines (:func:`tally_line`) for a log or a pipe: each stream's first at once, then at
    most one per ``every_s`` seconds per stream, and its last; thread-safe."""

    def __init__(self, say: Progress, every_s: float = 15.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.say, self.every_s, self.clock = say, every_s, clock
        self._lock = threading.Lock()
        self._streams: dict[str, Throttled] = {}
        """Each stream's own :class:`Throttled`."""

    def __call__(self, tally: Tally) -> None:
        with self._lock:
            throttled = self._streams.setdefault(tally.stream, Throttled(self.say, self.every_s, self.clock))
            (self.say if tally.ended else throttled)(tally_line(tally))
