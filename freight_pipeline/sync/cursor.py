"""The shipments cursor: the service's own (LAST_MODIFIED_DATE, LAST_MODIFIED_TIME) plus the id.

The cursor is kept in the service's wall-clock date and time parts exactly as the lookup keys
compare them (assumption A8), so the pipeline never converts zones, except for a service whose keys hold
its zone's wall clock while its stamps are written at another offset (in UTC): the run found it
(``ServiceZone.keys_in_zone``) and keys every stamp in that zone. ``id`` breaks ties inside one
second; a cursor means "everything up to and including this key has been written".

Daylight saving: wall-clock keys repeat an hour when the service's UTC offset steps back (e.g.
``+02:00`` -> ``+01:00``); a record changed in the repeated hour sorts below a cursor set just before
the step. So a key also carries the UTC ``offset`` of the shipment it came from (not part of its
order or equality) and the cursor stores it; :func:`dst_widening` tells a run how much further
back to re-read when the service's current offset is smaller than the cursor's. Cursors stored
before the offset was kept read as "offset unknown" (no widening). A service that sends no offset
has its date-times read in its time zone (``FREIGHT_SERVICE_TIMEZONE``, ``datetimes.ServiceZone``):
a key then carries the offset that zone has at its wall-clock time, and the same rules apply.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from typing import Any

from freight_pipeline.config import start_cursor_text
from freight_pipeline.datetimes import DateTimeParseError, ServiceZone, format_offset, parse_offset
from freight_pipeline.normalize.errors import NormalizationError
from freight_pipeline.normalize.flatten import LAST_MODIFIED, document_value
from freight_pipeline.normalize.records import record_id
from freight_pipeline.normalize.specs.keys import RECORD_ID


class CursorError(ValueError):
    """A stored or configured cursor that cannot be read."""


def listed_id(item: Any) -> int:
    """The id of a shipment a lookup listed; CursorError naming what came instead (a release that renamed it: no
    shipment can be fetched or keyed without it)."""
    try:
        return record_id(item if isinstance(item, dict) else {}, "")  # under its declared names, as its column reads
    except NormalizationError:
        raw = RECORD_ID.of(item) if isinstance(item, dict) else None
        keys = ", ".join(sorted(map(str, item))[:12]) if isinstance(item, dict) else type(item).__name__
        said = "no id" if raw is None else f"the id {str(raw)[:40]!r}, no whole number"
        raise CursorError(f"the shipment lookup listed a shipment with {said} (its keys: {keys})") from None


def is_shipment(item: Any, shipment_id: int) -> bool:
    """Whether a lookup's row is shipment ``shipment_id``'s (its id read as :func:`listed_id` reads it)."""
    try:
        return listed_id(item) == shipment_id
    except CursorError:
        return False


@dataclass(frozen=True, order=True)
class ShipmentKey:
    """Position of a shipment in (last-modified date, time, id) order."""

    date: str
    time: str
    id: int = 0
    offset: dt.timedelta | None = field(default=None, compare=False)
    """UTC offset of the shipment's ``last_modified_date_time`` (None: unknown); not part of the order."""
    subsecond: bool = field(default=False, compare=False)
    """The ``last_modified_date_time`` it came from carried a fraction of a second (a service stamping finer than
    A8's seconds, whose ``LAST_MODIFIED_TIME`` criteria then compare fractions: ``changes.walk_changes`` asks it by
    per-second ranges); not part of the order, nor kept in a cursor: a key is a whole second and an id."""

    @classmethod
    def parse(cls, date: str, time: str, id_: int = 0, offset: str | None = None) -> ShipmentKey:
        try:
            dt.date.fromisoformat(date)
            dt.time.fromisoformat(time)
        except (TypeError, ValueError) as exc:
            raise CursorError(f"cursor date/time {date!r} {time!r} is not YYYY-MM-DD / HH:MM:SS") from exc
        try:
            parsed_offset = parse_offset(offset)
        except DateTimeParseError as exc:
            raise CursorError(f"cursor offset {offset!r} is not +HH:MM") from exc
        return cls(date, time[:8], int(id_), parsed_offset)

    @classmethod
    def of_shipment(cls, shipment: dict[str, Any], zone: ServiceZone) -> ShipmentKey:
        """Key of a (base or full) shipment document from its ``last_modified_date_time`` (without an offset:
        in the run's ``zone``), at the wall clock the lookup keys hold (``ServiceZone.key_instant``)."""
        return cls.of_instant(listed_id(shipment), zone.key_instant(document_value(shipment, LAST_MODIFIED)))

    @classmethod
    def of_instant(cls, shipment_id: int, value: dt.datetime | None) -> ShipmentKey:
        """Key of shipment ``shipment_id`` last modified at ``value`` (its parsed ``last_modified_date_time``)."""
        if value is None:
            raise CursorError(f"shipment {shipment_id!r} has no last_modified_date_time")
        return cls(value.date().isoformat(), value.time().replace(microsecond=0).isoformat(), shipment_id,
                   value.utcoffset(), value.microsecond != 0)

    @property
    def instant_text(self) -> str:
        """The service's wall-clock second, ``YYYY-MM-DD HH:MM:SS`` (what the lookup's criteria compare)."""
        return f"{self.date} {self.time}"

    @property
    def stamp(self) -> str:
        """The wall-clock second with its UTC offset when known (``2026-10-25 02:30:00+02:00``): one
        instant, even in the hour a fall-back repeats. What is stored to tell versions apart
        (``warehouse.stamps``); without an offset it is the wall-clock second alone."""
        return self.instant_text if self.offset is None else f"{self.instant_text}{format_offset(self.offset)}"

    def second(self) -> tuple[str, str]:
        return (self.date, self.time)

    def minus(self, delta: dt.timedelta) -> ShipmentKey:
        """The key ``delta`` earlier in wall-clock terms, at the start of that second (id 0)."""
        moment = dt.datetime.combine(dt.date.fromisoformat(self.date), dt.time.fromisoformat(self.time))
        earlier = moment - delta
        return ShipmentKey(earlier.date().isoformat(), earlier.time().replace(microsecond=0).isoformat(), 0)

    def with_offset(self, offset: dt.timedelta | None) -> ShipmentKey:
        return ShipmentKey(self.date, self.time, self.id, offset, self.subsecond)

    def to_json(self) -> str:
        data: dict[str, Any] = {"date": self.date, "time": self.time, "id": self.id}
        if self.offset is not None:
            data["offset"] = format_offset(self.offset)
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ShipmentKey:
        """A stored cursor; one written before offsets were kept (no ``offset``) reads as offset unknown."""
        try:
            data = json.loads(text)
            return cls.parse(data["date"], data["time"], data.get("id", 0), data.get("offset"))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise CursorError(f"stored shipments cursor {text!r} is not valid") from exc


BEGINNING = ShipmentKey("1970-01-01", "00:00:00", 0)


def dst_widening(cursor: ShipmentKey, current_offset: dt.timedelta | None) -> dt.timedelta:
    """How much further back than ``cursor - overlap`` a run must re-read: the step back of the
    service's UTC offset since the cursor was set (zero when it did not step back or is unknown).

    Wall-clock time repeats that much when the offset steps back, so a record changed after the
    cursor instant has a wall-clock key at least ``cursor - (cursor offset - current offset)``.
    """
    if cursor.offset is None or current_offset is None or current_offset >= cursor.offset:
        return dt.timedelta(0)
    return cursor.offset - current_offset


def cursor_offset(
    key: ShipmentKey, covered_offset: dt.timedelta | None
) -> dt.timedelta | None:
    """The offset to store with a cursor at ``key`` when the run's window covers ``covered_offset``.

    ``covered_offset`` is the largest offset whose repeated hour the run's window is known to have
    re-read from its start: the previous cursor's offset, or (when the run widened its window for a
    step back) the current one. Storing the larger of the two keeps a cursor written mid-walk, at a
    shipment stamped after a step back whose repeated hour lies below the window, from hiding that
    step from the next run; a completed walk ends at the newest shipment, whose own offset then wins.
    """
    if key.offset is None:
        return covered_offset
    if covered_offset is None:
        return key.offset
    return max(key.offset, covered_offset)


def parse_start_cursor(text: str | None) -> ShipmentKey:
    """A configured start cursor, in the forms the setting takes (:func:`~freight_pipeline.config.start_cursor_text`:
    ``YYYY-MM-DD`` or ``YYYY-MM-DD HH:MM:SS`` / ``YYYY-MM-DDTHH:MM:SS``)."""
    try:
        canonical = start_cursor_text(text)
    except ValueError as exc:
        raise CursorError(f"start cursor {text!r} {exc}") from None
    if not canonical:
        return BEGINNING
    date, _, time = canonical.partition(" ")
    return ShipmentKey.parse(date, time, 0)
