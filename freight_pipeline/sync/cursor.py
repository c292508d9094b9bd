"""The shipments cursor: the service's own (LAST_MODIFIED_DATE, LAST_MODIFIED_TIME) plus the id.

The cursor is kept in the service's wall-clock date and time parts exactly as the lookup keys
compare them (assumption A8), so the pipeline never converts zones. ``id`` breaks ties inside one
second; a cursor means "everything up to and including this key has been written".
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any

from freight_pipeline.datetimes import parse_iso_datetime


class CursorError(ValueError):
    """A stored or configured cursor that cannot be read."""


@dataclass(frozen=True, order=True)
class ShipmentKey:
    """Position of a shipment in (last-modified date, time, id) order."""

    date: str
    time: str
    id: int = 0

    @classmethod
    def parse(cls, date: str, time: str, id_: int = 0) -> ShipmentKey:
        try:
            dt.date.fromisoformat(date)
            dt.time.fromisoformat(time)
        except (TypeError, ValueError) as exc:
            raise CursorError(f"cursor date/time {date!r} {time!r} is not YYYY-MM-DD / HH:MM:SS") from exc
        return cls(date, time[:8], int(id_))

    @classmethod
    def of_shipment(cls, shipment: dict[str, Any]) -> ShipmentKey:
        """Key of a (base or full) shipment document from its ``last_modified_date_time``."""
        value = parse_iso_datetime(shipment.get("last_modified_date_time"))
        if value is None:
            raise CursorError(f"shipment {shipment.get('id')!r} has no last_modified_date_time")
        return cls(value.date().isoformat(), value.time().replace(microsecond=0).isoformat(), int(shipment["id"]))

    @property
    def instant_text(self) -> str:
        return f"{self.date} {self.time}"

    def second(self) -> tuple[str, str]:
        return (self.date, self.time)

    def minus(self, delta: dt.timedelta) -> ShipmentKey:
        """The key ``delta`` earlier in wall-clock terms, at the start of that second (id 0)."""
        moment = dt.datetime.combine(dt.date.fromisoformat(self.date), dt.time.fromisoformat(self.time))
        earlier = moment - delta
        return ShipmentKey(earlier.date().isoformat(), earlier.time().replace(microsecond=0).isoformat(), 0)

    def to_json(self) -> str:
        return json.dumps({"date": self.date, "time": self.time, "id": self.id}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ShipmentKey:
        try:
            data = json.loads(text)
            return cls.parse(data["date"], data["time"], data.get("id", 0))
        except (ValueError, KeyError, TypeError) as exc:
            raise CursorError(f"stored shipments cursor {text!r} is not valid") from exc


BEGINNING = ShipmentKey("1970-01-01", "00:00:00", 0)


def parse_start_cursor(text: str | None) -> ShipmentKey:
    """A configured start cursor: ``YYYY-MM-DD`` or ``YYYY-MM-DD HH:MM:SS`` / ``YYYY-MM-DDTHH:MM:SS``."""
    if not text:
        return BEGINNING
    cleaned = text.strip().replace("T", " ")
    date, _, time = cleaned.partition(" ")
    return ShipmentKey.parse(date, time or "00:00:00", 0)
