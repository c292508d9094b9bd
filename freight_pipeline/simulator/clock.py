"""The simulator's clock: simulated time in the service's UTC offset, whole seconds.

It starts at a fixed instant (so a seed always yields the same initial data). A frozen clock (the
default; tests, the demo) only moves when told to (:meth:`SimClock.advance`, :meth:`SimClock.set_to`);
a clock following wall time (``freight-pipeline simulator``) also moves with the real time elapsed
since it was made. Fractions of a second accumulate but :meth:`SimClock.now` always returns whole
seconds, matching the service's ``last_modified_date_time`` resolution (assumption A8).

The offset may change at given instants (summer time ending or starting): ``offset_changes`` pairs
an instant with the offset in force from then on, and :class:`OffsetSchedule` (a ``tzinfo``) picks
the offset by instant, so every wall-clock value the service stamps uses the offset of its instant.

A naive clock (``naive_zone``, an IANA name such as ``Europe/Berlin``) follows that zone's rules
instead and writes every instant as the zone's wall clock without a UTC offset
(``2026-11-01T10:15:30``): a repeated hour (summer time ending) is then written twice alike, as a
service built on local date-times writes it.

UTC stamps (``utc_stamps``, off by default): every date-time is written as its instant in UTC
(``2026-11-01T09:15:30Z``), as a Java service serialising an ``Instant`` does, while the lookup keys
(``LAST_MODIFIED_DATE`` / ``_TIME``) stay the service's wall clock at its offset.

Fractional stamps (``fractional_stamps``, off by default): a shipment's ``last_modified_date_time`` and
its ``LAST_MODIFIED_TIME`` carry milliseconds (``2026-11-01T10:15:30.250+01:00``, ``10:15:30.250``), as
many Java services write them. The clock and the stamps' seconds stay whole; each shipment's version
gets a fraction of its own within its stamp's second (:meth:`SimClock.stamp_millis`), so the shipments
of one change are ordered by their fractions, not their ids, within that second.
"""

from __future__ import annotations

import bisect
import datetime as dt
import math
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from freight_pipeline.datetimes import DateTimeParseError, format_offset, parse_offset
from freight_pipeline.simulator.store_api import Invalid

DEFAULT_START_LOCAL = dt.datetime(2026, 11, 1, 8, 0, 0)
_EPOCH = dt.datetime(1970, 1, 1)
_SECOND = dt.timedelta(seconds=1)


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


def parse_instant(text: str, what: str = "instant") -> dt.datetime:
    """An ISO 8601 instant with its UTC offset (``2026-10-25T03:00:00+02:00``). Raises ValueError."""
    try:
        instant = dt.datetime.fromisoformat(text) if isinstance(text, str) else None
    except ValueError:
        instant = None
    if instant is None or instant.tzinfo is None:
        raise ValueError(f"{what} must be an ISO 8601 date-time with a UTC offset, got {text!r}")
    return instant


def zone_info(name: str) -> ZoneInfo:
    """An IANA time zone by name (``Europe/Berlin``). Raises ValueError for an unknown or malformed one."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"a time zone must be an IANA name such as Europe/Berlin, got {name!r}")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ValueError(f"{name!r} is not an IANA time zone name (such as Europe/Berlin or UTC)") from None


class OffsetSchedule(dt.tzinfo):
    """A UTC offset that changes at given instants; ``fromutc`` sets ``fold`` on a repeated wall time."""

    def __init__(self, first: dt.timedelta, changes: Sequence[tuple[int, dt.timedelta]]) -> None:
        self._epochs = [epoch for epoch, _ in changes]
        self._offsets = [first, *(offset for _, offset in changes)]

    def offset_at(self, epoch: float) -> dt.timedelta:
        """The offset in force at the POSIX instant ``epoch``."""
        return self._offsets[bisect.bisect_right(self._epochs, epoch)]

    def _period(self, utc_naive: dt.datetime) -> int:
        return bisect.bisect_right(self._epochs, (utc_naive - _EPOCH) // _SECOND)

    def utcoffset(self, when: dt.datetime | None) -> dt.timedelta:
        if when is None:
            return self._offsets[0]
        local = when.replace(tzinfo=None, fold=0)
        fitting = [off for i, off in enumerate(self._offsets) if self._period(local - off) == i]
        if fitting:  # two on a repeated wall time: fold 0 is the first, fold 1 the second
            return fitting[-1] if when.fold else fitting[0]
        for i, epoch in enumerate(self._epochs):  # in a gap: fold 0 takes the offset before it
            change = _EPOCH + epoch * _SECOND
            if local - self._offsets[i + 1] < change <= local - self._offsets[i]:
                return self._offsets[i + 1] if when.fold else self._offsets[i]
        return self._offsets[0]

    def dst(self, when: dt.datetime | None) -> dt.timedelta | None:
        return None

    def tzname(self, when: dt.datetime | None) -> str:
        return format_offset(self.utcoffset(when))

    def fromutc(self, when: dt.datetime) -> dt.datetime:
        utc = when.replace(tzinfo=None)
        period = self._period(utc)
        local = utc + self._offsets[period]
        repeated = any(self._period(local - self._offsets[i]) == i for i in range(period))
        return local.replace(tzinfo=self, fold=1 if repeated else 0)


def clock_timezone(utc_offset: str, offset_changes: Sequence[tuple[str, str]] = ()) -> dt.tzinfo:
    """The service's zone: a fixed offset, or an :class:`OffsetSchedule` when the offset changes.

    ``offset_changes``: ``(instant, offset)`` pairs in time order, e.g.
    ``(("2026-10-25T03:00:00+02:00", "+01:00"),)``. Raises ValueError for a bad or unordered one.
    """
    first = offset_timezone(utc_offset)
    if not offset_changes:
        return first
    changes: list[tuple[int, dt.timedelta]] = []
    for pair in offset_changes:
        if not (isinstance(pair, Sequence) and len(pair) == 2 and all(isinstance(p, str) for p in pair)):
            raise ValueError(f"an offset change must be (instant, offset), both strings, got {pair!r}")
        instant = parse_instant(pair[0], "the instant of an offset change")
        offset = offset_timezone(pair[1]).utcoffset(None)
        epoch = math.floor(instant.timestamp())
        if changes and epoch <= changes[-1][0]:
            raise ValueError(f"offset changes must be in time order, one per instant: {pair[0]} is not after the last")
        changes.append((epoch, offset))
    return OffsetSchedule(first.utcoffset(None), changes)


class SimClock:
    """Simulated wall clock. Not thread-safe by itself: the store guards it with its lock (:class:`StoreClock`)."""

    def __init__(
        self,
        start: dt.datetime | None = None,
        utc_offset: str = "+01:00",
        wall_clock: bool = False,
        monotonic: Callable[[], float] = time.monotonic,
        offset_changes: Sequence[tuple[str, str]] = (),
        naive_zone: str | None = None,
        fractional_stamps: bool = False,
        utc_stamps: bool = False,
    ) -> None:
        if naive_zone is not None and offset_changes:
            raise ValueError("a naive clock follows its zone's own rules: it takes no offset changes")
        self.naive_zone: ZoneInfo | None = zone_info(naive_zone) if naive_zone is not None else None
        """The zone of a naive clock (its wall clock written without an offset); None: with offsets."""
        self.tz: dt.tzinfo = self.naive_zone or clock_timezone(utc_offset, offset_changes)
        self.fractional_stamps = fractional_stamps
        """Shipment stamps carry milliseconds (:meth:`stamp_millis`); False: whole seconds (A8)."""
        if naive_zone is not None and utc_stamps:
            raise ValueError("a naive clock writes no offset: it cannot write its date-times in UTC")
        self.utc_stamps = utc_stamps
        """Every date-time is written in UTC (``...Z``); the lookup keys stay the wall clock at the offset."""
        self.wall_clock = wall_clock
        self._monotonic = monotonic
        self._made_at = monotonic()
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

    def set_to(self, instant: dt.datetime) -> dt.datetime:
        """Move the clock forward to ``instant`` (aware; whole seconds). Raises ValueError for an earlier one."""
        if instant.tzinfo is None:
            raise ValueError("the clock can only be set to an instant with a UTC offset")
        gap = math.floor(instant.timestamp()) - self.epoch()
        if gap < 0:
            raise ValueError(f"the clock only moves forward; {instant.isoformat()} is before {self.now().isoformat()}")
        self._elapsed += gap
        return self.now()

    def offset_at(self, epoch: int) -> dt.timezone:
        """The fixed offset in force at ``epoch``."""
        if isinstance(self.tz, OffsetSchedule):
            return dt.timezone(self.tz.offset_at(epoch))
        if self.naive_zone is not None:
            offset = dt.datetime.fromtimestamp(epoch, self.naive_zone).utcoffset()
            assert offset is not None
            return dt.timezone(offset)
        assert isinstance(self.tz, dt.timezone)
        return self.tz

    def to_local(self, epoch: int) -> dt.datetime:
        """``epoch`` in the offset in force then (a fixed-offset datetime, so it compares as an instant)."""
        return dt.datetime.fromtimestamp(epoch, self.offset_at(epoch))

    def iso(self, epoch: int) -> str:
        """ISO 8601 with the service offset, seconds resolution: ``2026-11-01T10:15:30+01:00``; from a
        naive clock the zone's wall clock without an offset: ``2026-11-01T10:15:30``; with ``utc_stamps`` in UTC:
        ``2026-11-01T09:15:30Z``."""
        if self.utc_stamps:
            return dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        if self.naive_zone is not None:
            return dt.datetime.fromtimestamp(epoch, self.naive_zone).replace(tzinfo=None).isoformat(timespec="seconds")
        return self.to_local(epoch).isoformat(timespec="seconds")

    def stamp_millis(self, shipment_id: int, epoch: int) -> int:
        """The milliseconds of the stamp of shipment ``shipment_id`` last modified in second ``epoch``: 0 unless
        ``fractional_stamps``, else a fixed draw of 0..999 per shipment and second (as a service writing each
        row at its own instant within one change: not in the order of the ids)."""
        if not self.fractional_stamps:
            return 0
        return zlib.crc32(f"{shipment_id}:{epoch}".encode()) % 1000

    def stamp_iso(self, shipment_id: int, epoch: int) -> str:
        """The ``last_modified_date_time`` of shipment ``shipment_id`` last modified in second ``epoch``:
        :meth:`iso`, with its milliseconds when ``fractional_stamps`` (``2026-11-01T10:15:30.250+01:00``)."""
        text = self.iso(epoch)
        if not self.fractional_stamps:
            return text
        return f"{text[:19]}.{self.stamp_millis(shipment_id, epoch):03d}{text[19:]}"


class StoreClock:
    """The store's clock as its callers read and move it: under the store's lock, a refused move
    raised as :class:`~.store_api.Invalid` (HTTP 400)."""

    def __init__(self, clock: SimClock, lock: threading.RLock) -> None:
        self._clock = clock
        self._lock = lock

    @property
    def naive_zone(self) -> str | None:
        """The IANA zone whose wall clock the service sends without an offset (None: it sends offsets)."""
        zone = self._clock.naive_zone
        return zone.key if zone is not None else None

    @property
    def utc_stamps(self) -> bool:
        """Every date-time is written in UTC (``...Z``), the lookup keys the wall clock at the offset."""
        return self._clock.utc_stamps

    @property
    def fractional_stamps(self) -> bool:
        """Shipment stamps and ``LAST_MODIFIED_TIME`` carry milliseconds (:meth:`SimClock.stamp_millis`)."""
        return self._clock.fractional_stamps

    def now(self) -> dt.datetime:
        with self._lock:
            return self._clock.now()

    def advance(self, seconds: float) -> dt.datetime:
        with self._lock:
            try:
                return self._clock.advance(seconds)
            except ValueError as exc:
                raise Invalid(str(exc)) from None

    def set_to(self, instant: dt.datetime) -> dt.datetime:
        with self._lock:
            try:
                return self._clock.set_to(instant)
            except ValueError as exc:
                raise Invalid(str(exc)) from None
