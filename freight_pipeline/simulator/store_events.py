"""Event writes of the simulator store (:class:`EventWriter`): create and update a shipment's
events (overrides of the generated ones), with the validation of ShipmentEvent bodies. A naive
clock's store keeps a written ``date_time`` as its zone's wall clock, without an offset."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from freight_pipeline.datetimes import DateTimeParseError, parse_datetime_object
from freight_pipeline.simulator.data_naive import naive_datetime_object
from freight_pipeline.simulator.generator import touched
from freight_pipeline.simulator.store_api import EVENT_CODES, EVENT_FIELDS, EVENT_TYPES, Conflict, Invalid, NotFound
from freight_pipeline.simulator.store_data import EventKey, StoreData
from freight_pipeline.simulator.store_reads import StoreReader

LOCATION_CODE_TYPES = frozenset({"SERVICE", "UNLOC", "IATA", "FOREIGN", "POSTAL_CODE", "UN_COUNTRY"})
LOCATION_FIELDS = frozenset({"codes", "name", "latitude", "longitude"})
DATE_TIME_FIELDS = frozenset({"date", "time", "zone_offset", "until"})


class EventWriter:
    """``create`` / ``update`` of a shipment's events in ``data``; the current events are read
    through ``reader`` (the generated ones with the overrides written before)."""

    def __init__(self, data: StoreData, reader: StoreReader) -> None:
        self._data = data
        self._reader = reader

    def create(self, shipment_id: int, event_type: str, event: Mapping[str, Any]) -> dict[str, Any]:
        _check_type(event_type)
        code = _checked_body(event).get("event")
        if code not in EVENT_CODES:
            raise Invalid(f"event {code!r} is not an event code; allowed: {', '.join(EVENT_CODES)}")
        stored = {"event": code, "type": event_type, "shipment_id": shipment_id, "date_time": None, "location": None}
        stored.update(self._kept(_event_changes(shipment_id, event_type, event)))
        with self._data.lock:
            self._data.require(shipment_id)
            if self._find_event(shipment_id, code, event_type) is not None:
                raise Conflict(f"event {code} ({event_type}) already exists for shipment {shipment_id}")
            self._set_override(shipment_id, (code, event_type), stored)
        return copy.deepcopy(stored)

    def update(self, shipment_id: int, code: str, event_type: str, event: Mapping[str, Any]) -> dict[str, Any]:
        """Fields not sent keep their value (A28); the path's code, the query's type and id win."""
        _check_type(event_type)
        if code not in EVENT_CODES:
            raise Invalid(f"event {code!r} is not an event code; allowed: {', '.join(EVENT_CODES)}")
        if _checked_body(event).get("event") not in (None, code):
            raise Invalid(f"body event {event.get('event')!r} differs from the path's {code}")
        changes = self._kept(_event_changes(shipment_id, event_type, event))
        with self._data.lock:
            self._data.require(shipment_id)
            existing = self._find_event(shipment_id, code, event_type)
            if existing is None:
                raise NotFound(f"event {code} ({event_type}) does not exist for shipment {shipment_id}")
            stored = {**existing, **changes, "event": code, "type": event_type, "shipment_id": shipment_id}
            self._set_override(shipment_id, (code, event_type), stored)
        return copy.deepcopy(stored)

    def _kept(self, changes: dict[str, Any]) -> dict[str, Any]:
        """The changes as the service keeps them: a naive clock's ``date_time`` in its zone's wall clock."""
        zone = self._data.clock.naive_zone
        if zone is not None and isinstance(changes.get("date_time"), Mapping):
            changes["date_time"] = naive_datetime_object(changes["date_time"], zone)
        return changes

    def _find_event(self, shipment_id: int, code: str, event_type: str) -> dict[str, Any] | None:
        events = self._reader.get_events(shipment_id)
        return next((e for e in events if (e["event"], e["type"]) == (code, event_type)), None)

    def _set_override(self, shipment_id: int, key: EventKey, event: dict[str, Any]) -> None:
        self._data.overrides.setdefault(shipment_id, {})[key] = event
        state = self._data.live[shipment_id]
        self._data.live[shipment_id] = touched(state, self._data.stamp([state.modified]))
        self._data.version += 1


def _check_type(event_type: str) -> None:
    if event_type not in EVENT_TYPES:
        raise Invalid(f"type {event_type!r} must be ESTIMATED or ACTUAL")


def _checked_body(event: Any) -> Mapping[str, Any]:
    """A ShipmentEvent body: a JSON object with no field beyond EVENT_FIELDS."""
    if not isinstance(event, Mapping):
        raise Invalid("the event body must be a JSON object")
    _refuse_unknown(event, EVENT_FIELDS, "the event body")
    return event


def _refuse_unknown(item: Mapping[str, Any], allowed: Iterable[str], what: str) -> None:
    unknown = sorted(set(item) - set(allowed))
    if unknown:
        raise Invalid(f"unknown field(s) {unknown} in {what}; allowed: {sorted(allowed)}")


def _event_changes(shipment_id: int, event_type: str, event: Mapping[str, Any]) -> dict[str, Any]:
    """The fields a ShipmentEvent body sets (``date_time``, ``location``), validated; type and id must agree."""
    if event.get("type") not in (None, event_type):
        raise Invalid(f"body type {event.get('type')!r} differs from the query type {event_type}")
    body_id = event.get("shipment_id")
    if body_id is not None and body_id != shipment_id:
        raise Invalid(f"body shipment_id {body_id!r} differs from the path's {shipment_id}")
    changes: dict[str, Any] = {}
    if "date_time" in event:
        changes["date_time"] = _checked_date_time(event["date_time"])
    if "location" in event:
        changes["location"] = _checked_location(event["location"])
    return copy.deepcopy(changes)


def _checked_date_time(date_time: Any) -> Any:
    if date_time is None:
        return None
    if not isinstance(date_time, Mapping):
        raise Invalid("date_time must be a DateTime object")
    _refuse_unknown(date_time, DATE_TIME_FIELDS, "date_time")
    try:
        parse_datetime_object(dict(date_time))
    except DateTimeParseError as exc:
        raise Invalid(f"date_time: {exc}") from None
    return date_time


def _checked_location(location: Any) -> Any:
    if location is None:
        return None
    if not isinstance(location, Mapping):
        raise Invalid("location must be a Location object")
    _refuse_unknown(location, LOCATION_FIELDS, "location")
    codes = location.get("codes")
    if codes is None:
        return location
    if not isinstance(codes, list):
        raise Invalid("location.codes must be an array")
    for item in codes:
        if (
            not isinstance(item, Mapping)
            or item.get("type") not in LOCATION_CODE_TYPES
            or not isinstance(item.get("code"), str)
        ):
            raise Invalid(
                f"location.codes items need type (one of {', '.join(sorted(LOCATION_CODE_TYPES))}) and code (string)"
            )
    return location
