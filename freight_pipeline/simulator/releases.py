"""Releases of the interface the simulator plays: the spec's current one, and a next one that changes shape.

The spec publishes the interface in numbered releases (2026.1 is current; "the test server runs the last
released version"), with no promise that a new one keeps the objects' structure. ``2026.1`` answers as
the spec shows. ``2026.2`` is the kind of release a real service ships under a pipeline that has run for
months (no such release is published; it is this simulator's rehearsal of one):

* shipment documents: ``house_reference`` -> ``house_bill_number`` and ``master_reference`` ->
  ``master_bill_number`` (renamed), ``aes`` dropped, ``emissions`` (an object) added;
* shipment events: ``reported_by`` added (who reported the event);
* air main-carriage legs: ``flight_no`` -> ``flight_number`` (renamed).

``2026.3`` keeps those and changes the records inside, where most of a shipment lies:

* every goods line, at every depth of subgoods: ``weight`` -> ``gross_weight`` (renamed), ``quantity`` sent
  as text (``"21"``: still a number to read), and each measurement's ``length`` as text with its unit
  (``"120 cm"``: no number any more);
* every address: ``postal_code`` -> ``zip_code``; every container: ``container_iso_code`` -> ``iso_code``;
* every end (origin, destination) of every carriage leg, embedded (pre-, main-, post-carriage) or from the
  air and sea main-carriage endpoints, and every event: ``location`` -> ``place`` (a nested object renamed);
* every memo line (lookup, scroll, retrieve): ``memo`` -> ``text``.

A release only changes how the store's true data is answered (the store keeps one shape), so a test's
oracle still knows every value; it is switched with ``--release`` or ``POST /_control/release``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

CURRENT = "2026.1"
NEXT = "2026.2"
NESTED = "2026.3"
RELEASES: tuple[str, ...] = (CURRENT, NEXT, NESTED)

DOCUMENT_RENAMES: dict[str, str] = {"house_reference": "house_bill_number", "master_reference": "master_bill_number"}
DOCUMENT_DROPPED: tuple[str, ...] = ("aes",)
AIR_LEG_RENAMES: dict[str, str] = {"flight_no": "flight_number"}
EVENT_REPORTERS: tuple[str, ...] = ("CARRIER", "AGENT", "CUSTOMS", "WAREHOUSE")
GOOD_RENAMES: dict[str, str] = {"weight": "gross_weight"}
ADDRESS_RENAMES: dict[str, str] = {"postal_code": "zip_code"}
CONTAINER_RENAMES: dict[str, str] = {"container_iso_code": "iso_code"}
LOCATION_RENAMES: dict[str, str] = {"location": "place"}
MEMO_RENAMES: dict[str, str] = {"memo": "text"}
LEG_ENDS: tuple[str, ...] = ("origin", "destination")
CARRIAGES: tuple[str, ...] = ("pre_carriage", "main_carriage", "post_carriage")


def check_release(release: Any) -> str:
    """``release`` when it is one the simulator plays (ValueError otherwise)."""
    if release not in RELEASES:
        raise ValueError(f"release must be one of {', '.join(RELEASES)}, got {release!r}")
    return str(release)


def _renamed(record: dict[str, Any], renames: dict[str, str]) -> dict[str, Any]:
    """``record`` with its keys renamed, in place and in their order."""
    if not any(old in record for old in renames):
        return record
    items = [(renames.get(key, key), value) for key, value in record.items()]
    record.clear()
    record.update(items)
    return record


def _base(document: Any) -> Any:
    """The renames and drops, in a full document or the base shipment of a lookup page."""
    if isinstance(document, dict):
        _renamed(document, DOCUMENT_RENAMES)
        for key in DOCUMENT_DROPPED:
            document.pop(key, None)
    return document


def _document(document: Any) -> Any:
    if not isinstance(document, dict):
        return document
    _base(document)
    weight = document.get("total_gross_weight")
    kilograms = weight if isinstance(weight, int | float) and not isinstance(weight, bool) else 0.0
    factor = {"AIR": 0.602, "SEA": 0.016, "RD": 0.062, "RL": 0.022}.get(str(document.get("mode_of_transport")), 0.05)
    document["emissions"] = {
        "co2e_kg": round(kilograms * factor * 10, 3),
        "method": "GLEC v3",
        "scope": "well-to-wheel",
    }
    return document


def _events(events: Any) -> Any:
    if isinstance(events, list):
        for index, event in enumerate(events):
            if isinstance(event, dict):
                event["reported_by"] = EVENT_REPORTERS[index % len(EVENT_REPORTERS)]
    return events


def _air_legs(legs: Any) -> Any:
    if isinstance(legs, list):
        for leg in legs:
            if isinstance(leg, dict):
                _renamed(leg, AIR_LEG_RENAMES)
    return legs


def _objects(items: Any) -> list[dict[str, Any]]:
    return [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _goods(goods: Any) -> None:
    """2026.3's goods lines, at every depth."""
    for good in _objects(goods):
        _renamed(good, GOOD_RENAMES)
        if _number(good.get("quantity")):
            good["quantity"] = str(good["quantity"])
        for measurement in _objects(good.get("measurements")):
            if _number(measurement.get("length")):
                measurement["length"] = f"{measurement['length']} cm"
        _goods(good.get("subgoods"))


def _leg_ends(legs: Any) -> Any:
    """2026.3's leg ends: each end's ``location`` as ``place``."""
    for leg in _objects(legs):
        for end in LEG_ENDS:
            if isinstance(leg.get(end), dict):
                _renamed(leg[end], LOCATION_RENAMES)
    return legs


def _nested_document(document: Any) -> Any:
    document = _document(document)
    if isinstance(document, dict):
        _goods(document.get("goods"))
        for address in _objects(document.get("addresses")):
            _renamed(address, ADDRESS_RENAMES)
        for container in _objects(document.get("containers")):
            _renamed(container, CONTAINER_RENAMES)
        for carriage in CARRIAGES:
            if isinstance(document.get(carriage), dict):
                _leg_ends(document[carriage].get("carriage_legs"))
    return document


def _nested_events(events: Any) -> Any:
    for event in _objects(_events(events)):
        _renamed(event, LOCATION_RENAMES)
    return events


def _nested_memos(lines: Any) -> Any:
    """2026.3's memo lines: renamed copies (a memo lookup's rows are the store's own)."""
    return [_renamed(dict(line), MEMO_RENAMES) if isinstance(line, dict) else line for line in lines] \
        if isinstance(lines, list) else lines


_CHANGES: dict[str, dict[str, Callable[[Any], Any]]] = {
    CURRENT: {},
    NEXT: {"shipment": _document, "events": _events, "airmaincarriage": _air_legs},
    NESTED: {"shipment": _nested_document, "events": _nested_events,
             "airmaincarriage": lambda legs: _leg_ends(_air_legs(legs)), "seamaincarriage": _leg_ends,
             "memos": _nested_memos},
}


def shapes(release: str, endpoint: str) -> bool:
    """Whether ``release`` answers ``endpoint`` in another shape than the current release."""
    return endpoint in _CHANGES[release]


def in_release(release: str, endpoint: str, answer: Any) -> Any:
    """``answer`` of ``endpoint`` (a corruptions endpoint name: ``shipment``, ``events``, ...) as
    ``release`` shapes it; changed in place (every store read is the caller's own copy)."""
    change = _CHANGES[release].get(endpoint)
    return change(answer) if change is not None else answer


def base_in_release(release: str, shipment: dict[str, Any]) -> dict[str, Any]:
    """A base shipment of a lookup page as ``release`` shapes it (its renames and drops; in place)."""
    return _base(shipment) if release != CURRENT else shipment
