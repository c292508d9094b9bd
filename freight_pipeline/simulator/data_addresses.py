"""Shipment addresses (with references) and containers (with containerAddresses)."""

from __future__ import annotations

import random
from typing import Any

from freight_pipeline.simulator import data_catalog as cat
from freight_pipeline.simulator.data_format import datetime_object, rng_for
from freight_pipeline.simulator.data_identity import HOUR, Identity, Party
from freight_pipeline.simulator.data_places import COUNTRY_NAMES, Place

TAG_ADDRESSES = 11
TAG_CONTAINERS = 12
# Reference values are spread over these addresses, in this order.
REFERENCE_HOLDERS: tuple[str, ...] = ("SHP", "CNE", "CUS")
_RARE_QUALIFIERS: tuple[str, ...] = ("DL1", "DL2", "MIS", "TRA", "FACILIATOR", "AGENT", "CARRIER", "DEP")
_US_STATES = {"USNYC": "NY", "USSAV": "GA", "USLAX": "CA", "USCHI": "IL", "USATL": "GA"}


def new_reference_value(rng: random.Random) -> str:
    kind = rng.choice(cat.REFERENCE_MATCHCODES)
    if kind == "PO":
        return f"45{rng.randint(0, 99999999):08d}"
    if kind == "CR":
        return f"ORD-{rng.randint(2025, 2026)}-{rng.randint(10000, 99999)}"
    if kind == "DN":
        return f"DN{rng.randint(1000000, 9999999)}"
    return f"BKG{rng.randint(10000000, 99999999)}"


def reference_matchcode(value: str) -> str:
    if value.startswith("45") and len(value) == 10:
        return "PO"
    if value.startswith("ORD-"):
        return "CR"
    if value.startswith("DN"):
        return "DN"
    if value.startswith("BKG"):
        return "BKG"
    return "REF"


def _address(qualifier: str, party: Party, with_contact: bool) -> dict[str, Any]:
    place = party.place
    country = COUNTRY_NAMES.get(place.country, place.country)
    lines = [party.name, party.street, f"{place.postal_code or ''} {place.name}".strip(), country.upper(), None]
    return {
        "qualifier": qualifier,
        "address_type": party.address_type,
        "address_number": party.address_number,
        "printed_address": {f"line_{i}": line for i, line in enumerate(lines, start=1)},
        "street": party.street,
        "postal_code": place.postal_code,
        "city": place.name,
        "state": _US_STATES.get(place.unloc),
        "country_matchcode": place.country,
        "un_location_code": place.unloc,
        "contact": {"name": party.contact_name, "phone_number": party.phone, "fax_number": None, "email": party.email}
        if with_contact else None,
        "references": [],
    }


def _carrier_party(ident: Identity) -> Party:
    if ident.mode == "SEA":
        name = next(line.name for line in cat.SHIPPING_LINES if line.scac == ident.carrier_code)
    elif ident.mode == "AIR":
        name = next(a.name for a in cat.AIRLINES if a.iata == ident.carrier_code)
    else:
        name = ident.carrier_code
    number = 900000 + sum(map(ord, name)) % 9999
    return Party(name, "Carrier Street 1", ident.pol, "A", number, "Booking Desk", "+49 40 0000000",
                 f"booking@{name.split()[0].lower()}.example")


def render_addresses(seed: int, ident: Identity, references: tuple[str, ...]) -> list[dict[str, Any]]:
    rng = rng_for(seed, ident.id, TAG_ADDRESSES)
    shipper, consignee, customer = ident.shipper, ident.consignee, ident.customer
    result = [_address("SHP", shipper, rng.random() < 0.8), _address("CNE", consignee, rng.random() < 0.8),
              _address("CUS", customer, True)]
    if rng.random() < 0.5:
        result.append(_address("NFY", consignee, rng.random() < 0.5))
    if rng.random() < 0.4:
        result.append(_address("INV", customer, False))
    if ident.has_pre:
        result.append(_address("PUP", shipper, rng.random() < 0.6))
    if ident.has_post:
        result.append(_address("DEL", consignee, rng.random() < 0.6))
    if ident.mode in ("SEA", "AIR") and rng.random() < 0.7:
        agent = Party(f"{ident.partner.place.name} Freight Agency Ltd.", ident.partner.street, ident.partner.place,
                      "A", 700000 + rng.randint(0, 9999), ident.partner.contact_name, ident.partner.phone,
                      f"ops@{ident.partner.place.name.lower().replace(' ', '')}-agency.example")
        result.append(_address("AGT", agent, True))
    result.append(_address("CAR", _carrier_party(ident), rng.random() < 0.3))
    if rng.random() < 0.15:
        result.append(_address(rng.choice(_RARE_QUALIFIERS), customer, False))
    holders = [a for a in result if a["qualifier"] in REFERENCE_HOLDERS]
    pickup = ident.milestones[0]
    for i, value in enumerate(references):
        holder = holders[i % len(holders)]
        when = pickup.planned - rng.randint(2, 20) * 86400
        holder["references"].append({
            "id": ident.id * 100 + i + 1,
            "matchcode": reference_matchcode(value),
            "value": value,
            "date_and_time": datetime_object(when, holder_place(ident, holder).utc_minutes, ident.form)
            if rng.random() < 0.7 else None,
        })
    return result


def holder_place(ident: Identity, address: dict[str, Any]) -> Place:
    return ident.shipper.place if address["qualifier"] == "SHP" else ident.consignee.place if (
        address["qualifier"] == "CNE") else ident.customer.place


def container_number(rng: random.Random) -> str:
    owner = rng.choice(cat.CONTAINER_OWNERS) + "U"
    serial = f"{rng.randint(0, 999999):06d}"
    return owner + serial + str(_iso6346_check(owner + serial))


def _iso6346_check(code: str) -> int:
    values: dict[str, int] = {}
    value = 10
    for letter in "ABCDEFGHIJKLMNOPQRSTUVWXYZ":
        if value % 11 == 0:
            value += 1
        values[letter] = value
        value += 1
    total = sum((values[c] if c.isalpha() else int(c)) * (2**i) for i, c in enumerate(code))
    return total % 11 % 10


def container_numbers(seed: int, ident: Identity) -> list[str]:
    rng = rng_for(seed, ident.id, TAG_CONTAINERS)
    return [container_number(rng) for _ in range(ident.container_count)]


def render_containers(seed: int, ident: Identity, numbers: list[str], client: str, shipment_number: str,
                      first_good_id: int | None) -> list[dict[str, Any]]:
    rng = rng_for(seed, ident.id, TAG_CONTAINERS + 100)
    iso_codes = [c for c, _ in cat.CONTAINER_TYPES]
    weights = [w for _, w in cat.CONTAINER_TYPES]
    local = ident.pol if ident.direction == "E" else ident.pod
    door = ident.shipper if ident.direction == "E" else ident.consignee
    when = ident.milestones[0].planned if ident.direction == "E" else ident.milestones[-1].planned
    result = []
    for k, number in enumerate(numbers, start=1):
        fixed = [
            _container_address(None, "PICKUP", 1, local, None, when - 2 * 86400, ident.form),
            _container_address(None, "DELIVERER", 2, door.place, door, when, ident.form),
            _container_address(None, "REDILIVERY", 3, local, None, when + 2 * 86400, ident.form),
        ]
        dynamic = [
            _container_address(ident.id * 100 + k * 10 + j, rng.choice(cat.CONTAINER_ADDRESS_QUALIFIERS), 3 + j,
                               local, None, when + j * HOUR * 6, ident.form)
            for j in range(1, rng.choice((0, 0, 1, 2)) + 1)
        ]
        result.append({
            "id": ident.id * 10 + k,
            "good_id": first_good_id,
            "client": client,
            "shipment_number": shipment_number,
            "container_number": number,
            "seal_number1": f"{ident.carrier_code[:2]}{rng.randint(1000000, 9999999)}",
            "seal_number2": f"CU{rng.randint(100000, 999999)}" if rng.random() < 0.3 else None,
            "seal_number3": None,
            "container_iso_code": rng.choices(iso_codes, weights)[0],
            "shippers_own": rng.random() < 0.05,
            "containerAddresses": fixed + dynamic,
        })
    return result


def _container_address(address_id: int | None, qualifier: str, order: int, place: Place, party: Party | None,
                       start: int, form: str) -> dict[str, Any]:
    item: dict[str, Any] = {} if address_id is None else {"id": address_id}
    item.update({
        "qualifier": qualifier,
        "street": party.street if party else f"Container Terminal {place.name}",
        "city": place.name,
        "order": order,
        "references": [],
        "address_type": party.address_type if party else "A",
        "address_number": party.address_number if party else 800000 + sum(map(ord, place.unloc)),
        "postal_code": place.postal_code,
        "country_matchcode": place.country,
        "un_location_code": place.unloc,
        "from_date_and_time": datetime_object(start, place.utc_minutes, form),
        "to_date_and_time": datetime_object(start + 4 * HOUR, place.utc_minutes, form),
        "contact": {"name": party.contact_name, "phone_number": party.phone, "fax_number": None,
                    "email": party.email} if party else None,
    })
    return item
