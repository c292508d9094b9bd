"""Carriage legs and shipment events, rendered from an :class:`Identity` as of an instant.

A milestone's ESTIMATED event is always present; its ACTUAL event appears once the document's
as-of instant (its last-modified instant) has reached the actual time. Revised departure and
arrival dates (``revised``: ``<code>_REVISED`` events, the main legs' ``revised_datetime``) are the
shipment's (:mod:`.data_estimates`): they change only when that estimate is revised.
"""

from __future__ import annotations

from typing import Any

from freight_pipeline.simulator.data_catalog import AIRLINES
from freight_pipeline.simulator.data_format import datetime_object, location
from freight_pipeline.simulator.data_identity import HOUR, Identity, Milestone
from freight_pipeline.simulator.data_places import Place

AIR_LEG_FIELDS = ("leg_no", "origin", "destination", "mot", "flight_no", "airline_awb_code", "airline_name")
SEA_LEG_FIELDS = ("leg_no", "origin", "destination", "mot", "voyage_no", "imo_code", "vessel_name", "vessel_flag",
                  "call_sign")
_HUB_KIND = {"SEA": "port", "AIR": "airport", "RL": "terminal", "RD": "city"}


def place_kind(ident: Identity, role: str) -> str:
    return "city" if role in ("origin", "destination") else _HUB_KIND[ident.mode]


def render_events(ident: Identity, as_of: int, revised: dict[str, int]) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for m in ident.milestones:
        place = ident.place(m.role)
        loc_kind = place_kind(ident, m.role)
        with_until = m.until is not None
        events.append(_event(ident, m.code, "ESTIMATED", place, loc_kind, m.planned, m.until if with_until else None,
                             with_until, m.time_known))
        if m.actual <= as_of:
            until = m.actual + (m.until - m.planned) if m.until is not None else None
            events.append(_event(ident, m.code, "ACTUAL", place, loc_kind, m.actual, until, with_until, True))
        revised_code = f"{m.code}_REVISED"
        if revised_code in revised:
            events.append(_event(ident, revised_code, "ESTIMATED", place, loc_kind, revised[revised_code], None,
                                 False, True))
    return events


def _event(ident: Identity, code: str, kind: str, place: Place, loc_kind: str, epoch: int, until: int | None,
           with_until: bool, time_known: bool) -> dict[str, Any]:
    return {
        "event": code,
        "type": kind,
        "shipment_id": ident.id,
        "date_time": datetime_object(epoch, place.utc_minutes, ident.form, until, with_until, time_known),
        "location": location(place, loc_kind),
    }


def _end(ident: Identity, place: Place, kind: str, planned: int, actual: int | None, as_of: int,
         revised: int | None = None, until: int | None = None) -> dict[str, Any]:
    tz, form = place.utc_minutes, ident.form
    return {
        "location": location(place, kind),
        "estimated_datetime": datetime_object(planned, tz, form),
        "actual_datetime": datetime_object(actual, tz, form) if actual is not None and actual <= as_of else None,
        "revised_datetime": datetime_object(revised, tz, form) if revised is not None else None,
        "estimated_datetime_until": datetime_object(until, tz, form) if until is not None else None,
    }


def _leg(ident: Identity, leg_no: int, mot: str, start: tuple, stop: tuple, as_of: int, extra: dict[str, Any]
         ) -> dict[str, Any]:
    """``start``/``stop``: (place, kind, planned, actual, revised, until)."""
    leg: dict[str, Any] = {
        "leg_no": leg_no,
        "origin": _end(ident, start[0], start[1], start[2], start[3], as_of, start[4], start[5]),
        "destination": _end(ident, stop[0], stop[1], stop[2], stop[3], as_of, stop[4], stop[5]),
        "mot": mot,
    }
    leg.update(extra)
    return leg


def _ms(ident: Identity, *codes: str) -> Milestone:
    for code in codes:
        found = ident.milestone(code)
        if found is not None:
            return found
    return ident.milestones[-1]


def main_legs(ident: Identity, as_of: int, revised: dict[str, int]) -> list[dict[str, Any]]:
    kind = _HUB_KIND[ident.mode]
    dep = _ms(ident, "POL_DEPARTURE", "DISPATCH")
    arr = _ms(ident, "POD_ARRIVAL", "DELIVERY_DATE")
    rev_dep = revised.get("POL_DEPARTURE_REVISED")
    rev_arr = revised.get("POD_ARRIVAL_REVISED")
    if ident.mode == "SEA":
        voyage_suffix = "E" if ident.direction == "E" else "W"
        stops = [(ident.pol, dep, rev_dep)]
        if ident.transship is not None:
            stops.append((ident.transship, _ms(ident, "TRANSSHIPMENT_ARRIVAL"), None))
            stops.append((ident.transship, _ms(ident, "TRANSSHIPMENT_DEPARTURE"), None))
        stops.append((ident.pod, arr, rev_arr))
        legs = []
        for i, vessel in enumerate(ident.vessels):
            (p0, m0, r0), (p1, m1, r1) = stops[2 * i], stops[2 * i + 1]
            name, imo, flag, call_sign = vessel
            extra = {"voyage_no": f"{(ident.id * 7 + i * 13) % 900 + 100:03d}{voyage_suffix}", "imo_code": imo,
                     "vessel_name": name, "vessel_flag": flag, "call_sign": call_sign}
            legs.append(_leg(ident, i + 1, "SEA", (p0, kind, m0.planned, m0.actual, r0, None),
                             (p1, kind, m1.planned, m1.actual, r1, None), as_of, extra))
        return legs
    if ident.mode == "AIR":
        airline = next(a for a in AIRLINES if a.iata == ident.carrier_code)
        base = {"airline_awb_code": airline.awb_prefix, "airline_name": airline.name}
        if ident.hub is None:
            return [_leg(ident, 1, "ANY", (ident.pol, kind, dep.planned, dep.actual, rev_dep, None),
                         (ident.pod, kind, arr.planned, arr.actual, rev_arr, None), as_of,
                         {"flight_no": ident.flights[0], **base})]
        mid_planned = dep.planned + (arr.planned - dep.planned) * 2 // 5
        mid_actual = dep.actual + (arr.actual - dep.actual) * 2 // 5
        hub_dep_planned = mid_planned + 3 * HOUR
        hub_dep_actual = mid_actual + 3 * HOUR
        return [
            _leg(ident, 1, "ANY", (ident.pol, kind, dep.planned, dep.actual, rev_dep, None),
                 (ident.hub, kind, mid_planned, mid_actual, None, None), as_of,
                 {"flight_no": ident.flights[0], **base}),
            _leg(ident, 2, "ANY", (ident.hub, kind, hub_dep_planned, hub_dep_actual, None, None),
                 (ident.pod, kind, arr.planned, arr.actual, rev_arr, None), as_of,
                 {"flight_no": ident.flights[1], **base}),
        ]
    return [_leg(ident, 1, "ANY", (ident.pol, kind, dep.planned, dep.actual, rev_dep, None),
                 (ident.pod, kind, arr.planned, arr.actual, rev_arr, None), as_of, {})]


def pre_legs(ident: Identity, as_of: int) -> list[dict[str, Any]]:
    if not ident.has_pre:
        return []
    pickup = _ms(ident, "PICKUP")
    arrive = _ms(ident, "POL_ARRIVAL", "WAREHOUSE", "DISPATCH")
    return [_leg(ident, 1, "ANY", (ident.origin, "city", pickup.planned, pickup.actual, None, pickup.until),
                 (ident.pol, _HUB_KIND[ident.mode], arrive.planned, arrive.actual, None, None), as_of,
                 _haulage(ident, 1))]


def post_legs(ident: Identity, as_of: int) -> list[dict[str, Any]]:
    if not ident.has_post:
        return []
    leave = _ms(ident, "GATE_OUT", "AVAILABLE", "CUSTOMS_CLEARANCE")
    deliver = _ms(ident, "DELIVERY_DATE")
    return [_leg(ident, 1, "ANY", (ident.pod, _HUB_KIND[ident.mode], leave.planned, leave.actual, None, None),
                 (ident.destination, "city", deliver.planned, deliver.actual, None, None), as_of, _haulage(ident, 2))]


def _haulage(ident: Identity, which: int) -> dict[str, Any]:
    kind = "ROAD"
    if ident.mode == "SEA":
        kind = "CARRIER_HAULAGE" if (ident.id + which) % 3 == 0 else "MERCHANT_HAULAGE"
    return {"haulage_type": kind, "haulage_reference": f"TO{ident.id % 100000:05d}{which}"}


def carriage_subset(legs: list[dict[str, Any]], fields: tuple[str, ...]) -> list[dict[str, Any]]:
    return [{k: leg.get(k) for k in fields} for leg in legs]
