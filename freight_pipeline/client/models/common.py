"""Parts shared by shipments and events: the DateTime object, locations, carriage legs."""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import Field, model_validator

from freight_pipeline.client.models.base import FieldProblem, FreightModel
from freight_pipeline.datetimes import DateTimeParseError, ParsedDateTime, parse_datetime_object


def _bare_date(text: str) -> dt.date | None:
    """The date of an ISO 8601 text that is a date and nothing else; None for any other text."""
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        return None


class DateTime(FreightModel):
    """The service's DateTime object in either of its forms (see :mod:`freight_pipeline.datetimes`).

    ``time`` and ``zone_offset`` keep what was received (a string or an object); ``instant`` is the
    one timezone-aware value, ``until`` the end of the range (PICKUP, FINAL_DESTINATION). Both are
    None when a part is missing or unreadable; ``parse_error`` then says why.
    """

    date: str | None = None
    time: str | dict[str, Any] | None = None
    zone_offset: str | dict[str, Any] | None = None
    until_value: str | dict[str, Any] | None = Field(default=None, alias="until")

    @model_validator(mode="before")
    @classmethod
    def _from_iso_text(cls, data: Any) -> Any:
        """One ISO 8601 string (``2026-11-01T10:15:30+01:00``) instead of the object: its parts.

        A date alone (``2026-11-20``) is that date without a time (never midnight).
        """
        if not isinstance(data, str):
            return data
        day = _bare_date(data)
        if day is not None:
            return {"date": day.isoformat(), "time": None, "zone_offset": None}
        try:
            parsed = parse_datetime_object(data)
        except DateTimeParseError as exc:
            raise ValueError(str(exc)) from None
        if parsed is None:
            return {}
        return {
            "date": parsed.date.isoformat() if parsed.date else None,
            "time": parsed.time.isoformat() if parsed.time else None,
            "zone_offset": parsed.offset_text,
        }

    def _read_parts(self) -> ParsedDateTime | None:
        return parse_datetime_object(
            {"date": self.date, "time": self.time, "zone_offset": self.zone_offset, "until": self.until_value}
        )

    def _parsed(self) -> ParsedDateTime | None:
        try:
            return self._read_parts()
        except DateTimeParseError:
            return None

    @property
    def parsed(self) -> ParsedDateTime | None:
        return self._parsed()

    @property
    def parse_error(self) -> str | None:
        try:
            self._read_parts()
        except DateTimeParseError as exc:
            return str(exc)
        return None

    @property
    def problems(self) -> list[FieldProblem]:
        """As for every model, plus a part that is present but cannot be read (``parse_error``)."""
        error = self.parse_error
        return super().problems + ([FieldProblem("", error, self.raw)] if error else [])

    @property
    def instant(self) -> dt.datetime | None:
        parsed = self._parsed()
        return parsed.instant if parsed else None

    @property
    def until(self) -> dt.datetime | None:
        parsed = self._parsed()
        return parsed.until if parsed else None


class LocationCode(FreightModel):
    type: str | None = None  # SERVICE, UNLOC, IATA, FOREIGN, POSTAL_CODE, UN_COUNTRY
    code: str | None = None


class Location(FreightModel):
    codes: list[LocationCode] = Field(default_factory=list)
    name: str | None = None
    latitude: float | None = None
    longitude: float | None = None

    def code_of(self, code_type: str) -> str | None:
        return next((c.code for c in self.codes if c.type == code_type), None)


class LocationDateTime(FreightModel):
    location: Location | None = None
    estimated_datetime: DateTime | None = None
    actual_datetime: DateTime | None = None
    revised_datetime: DateTime | None = None
    estimated_datetime_until: DateTime | dict[str, Any] | None = None


class CarriageLeg(FreightModel):
    """A leg of pre-, main- or post-carriage; air, sea and road fields all optional."""

    origin: LocationDateTime | None = None
    destination: LocationDateTime | None = None
    leg_no: int | None = None
    mot: str | None = None  # required by the spec; values seen: SEA, ANY
    flight_no: str | None = None
    airline_awb_code: str | None = None
    airline_name: str | None = None
    voyage_no: str | None = None
    imo_code: str | None = None
    vessel_name: str | None = None
    vessel_flag: str | None = None
    call_sign: str | None = None
    haulage_type: str | None = None
    haulage_reference: str | None = None


class Transport(FreightModel):
    carriage_legs: list[CarriageLeg] = Field(default_factory=list)
