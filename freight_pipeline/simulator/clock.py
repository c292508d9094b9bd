"""The simulator's clock: simulated time in the service's UTC offset, whole seconds.

It starts at a fixed instant (so a seed always yields the same initial data). A frozen clock (the
default; tests, the demo) only moves when told to (:meth:`SimClock.advance`); a clock following
wall time (``freight-pipeline simulator``) also moves with the real time elapsed since it was made.
Fractions of a second accumulate but :meth:`SimClock.now` always returns whole seconds, matching
the service's ``last_modified_date_time`` resolution (assumption A8).
"""

from __future__ import annotations

import datetime as dt
import math
import time
from collections.abc import Callable

from freight_pipeline.datetimes import DateTimeParseError, format_offset, parse_offset

DEFAULT_START_LOCAL = dt.datetime(2026, 11, 1, 8, 0, 0)


def offset_timezone(utc_offset: str) -> dt.timezone:
    """``"+01:00"`` -> a fixed-offset tzinfo. Raises ValueError for anything else."""
    try:
        delta = parse_offset(utc_offset)
    except DateTimeParseError as exc:
        raise ValueError(str(exc)) from exc
    if delta is None:
        raise ValueError("utc_offset must not be empty")
    if abs(delta) >= dt.timedelta(hours=24):
        raise ValueError(f"utc_offset {utc_offset!r} is out of range")
    return dt.timezone(delta)


class SimClock:
    """Simulated wall clock. Not thread-safe by itself: the store guards it with its lock."""

    def __init__(
        self,
        start: dt.datetime | None = None,
        utc_offset: str = "+01:00",
        wall_clock: bool = False,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.tz = offset_timezone(utc_offset)
        self.wall_clock = wall_clock
        self._monotonic = monotonic
        self._made_at = monotonic()
        self.offset_text = format_offset(self.tz.utcoffset(None))
        if start is None:
            start = DEFAULT_START_LOCAL.replace(tzinfo=self.tz)
        elif start.tzinfo is None:
            start = start.replace(tzinfo=self.tz)
        self._start_epoch = math.floor(start.timestamp())
        self._elapsed = 0.0

    @property
    def start_epoch(self) -> int:
        return self._start_epoch

    def epoch(self) -> int:
        """Now as whole POSIX seconds."""
        real = self._monotonic() - self._made_at if self.wall_clock else 0.0
        return self._start_epoch + math.floor(self._elapsed + real)

    def now(self) -> dt.datetime:
        return self.to_local(self.epoch())

    def advance(self, seconds: float) -> dt.datetime:
        if not math.isfinite(seconds) or seconds < 0:
            raise ValueError(f"the clock only moves forward; got {seconds!r} seconds")
        self._elapsed += seconds
        return self.now()

    def to_local(self, epoch: int) -> dt.datetime:
        return dt.datetime.fromtimestamp(epoch, self.tz)

    def iso(self, epoch: int) -> str:
        """ISO 8601 with the service offset, seconds resolution: ``2026-11-01T10:15:30+01:00``."""
        return self.to_local(epoch).isoformat(timespec="seconds")
