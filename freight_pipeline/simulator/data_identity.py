"""The stable identity of a shipment: everything drawn from (seed, id) and its creation instant.

Mode, direction, route, carrier, parties and the milestone timeline never change between
versions, so they come from one RNG seeded with (seed, id). The draw order below is fixed: the
same (seed, id, created) always gives the same :class:`Identity`.
"""

from __future__ import annotations

import datetime as dt
import random
from dataclasses import dataclass
from functools import lru_cache

from freight_pipeline.simulator import data_catalog as cat
from freight_pipeline.simulator import data_places as places
from freight_pipeline.simulator.data_format import OBJECT_FORM, STRING_FORM, TAG_IDENTITY, TAG_STORE, rng_for
from freight_pipeline.simulator.data_places import Office, Place

HOUR = 3600
DAY = 24 * HOUR
CUSTOMERS_PER_OFFICE = 60

# (event code, place role, gap from the previous milestone in hours (min, max))
_SEA = (
    ("PICKUP", "origin", (24, 144)), ("VGM_CLOSING", "pol", (24, 60)), ("POL_ARRIVAL", "pol", (2, 24)),
    ("LOADING_END", "pol", (24, 96)), ("POL_DEPARTURE", "pol", (6, 18)),
    ("TRANSSHIPMENT_ARRIVAL", "ts", (200, 420)), ("TRANSSHIPMENT_DEPARTURE", "ts", (48, 120)),
    ("POD_ARRIVAL", "pod", (250, 560)), ("CUSTOMS_CLEARANCE", "pod", (24, 72)), ("GATE_OUT", "pod", (6, 48)),
    ("DELIVERY_DATE", "destination", (12, 48)), ("FINAL_DESTINATION", "destination", (1, 6)),
)
_AIR = (
    ("PICKUP", "origin", (12, 96)), ("WAREHOUSE", "pol", (3, 10)), ("ACCEPTANCE", "pol", (4, 20)),
    ("LOADING_START", "pol", (6, 30)), ("POL_DEPARTURE", "pol", (2, 6)), ("POD_ARRIVAL", "pod", (8, 30)),
    ("CLEARANCE_START", "pod", (2, 8)), ("CLEARANCE_END", "pod", (4, 30)), ("AVAILABLE", "pod", (1, 6)),
    ("DELIVERY_DATE", "destination", (8, 30)), ("FINAL_DESTINATION", "destination", (1, 4)),
)
_ROAD = (
    ("PICKUP", "origin", (12, 96)), ("DISPATCH", "origin", (1, 4)), ("CUSTOMS_CLEARANCE", "pod", (8, 30)),
    ("DELIVERY_DATE", "destination", (10, 60)), ("FINAL_DESTINATION", "destination", (1, 3)),
)
_RAIL = (
    ("PICKUP", "origin", (24, 120)), ("POL_ARRIVAL", "pol", (12, 48)), ("LOADING_END", "pol", (12, 48)),
    ("POL_DEPARTURE", "pol", (4, 12)), ("POD_ARRIVAL", "pod", (290, 430)), ("CUSTOMS_CLEARANCE", "pod", (24, 72)),
    ("DELIVERY_DATE", "destination", (12, 48)), ("FINAL_DESTINATION", "destination", (1, 4)),
)
TEMPLATES = {"SEA": _SEA, "AIR": _AIR, "RD": _ROAD, "RL": _RAIL}
UNTIL_CODES = frozenset({"PICKUP", "FINAL_DESTINATION"})


@dataclass(frozen=True, slots=True)
class Party:
    name: str
    street: str
    place: Place
    address_type: str
    address_number: int
    contact_name: str
    phone: str
    email: str


@dataclass(frozen=True, slots=True)
class Milestone:
    code: str
    role: str  # origin, pol, ts, pod, destination
    planned: int  # epoch seconds
    actual: int  # epoch seconds; reported once the as-of instant has reached it
    until: int | None  # end of the window (PICKUP, FINAL_DESTINATION)
    time_known: bool


@dataclass(frozen=True, slots=True)
class Identity:
    id: int
    client: str
    office: Office
    mode: str
    direction: str
    form: str
    origin: Place
    pol: Place
    transship: Place | None
    pod: Place
    destination: Place
    carrier_code: str  # SCAC, airline IATA code, or haulier name
    vessels: tuple[tuple[str, str, str, str], ...]  # (name, imo, flag, call sign) per sea leg
    flights: tuple[str, ...]  # flight number per air leg
    hub: Place | None
    fcl: bool
    container_count: int
    customer: Party
    partner: Party
    booking_party: str  # SHP or CNE
    self_pickup: bool
    self_delivery: bool
    has_pre: bool
    has_post: bool
    incoterm: tuple[str, str]
    milestones: tuple[Milestone, ...]
    house_reference: str | None
    master_reference: str | None
    foreign_id: str | None
    original_shipment_number: str | None
    created_by: str
    responsible: str
    order_offset: int  # seconds before creation
    initial_goods: int
    initial_version: int

    @property
    def final_actual(self) -> int:
        return self.milestones[-1].actual

    @property
    def shipper(self) -> Party:
        return self.customer if self.direction == "E" else self.partner

    @property
    def consignee(self) -> Party:
        return self.partner if self.direction == "E" else self.customer

    def place(self, role: str) -> Place:
        return {"origin": self.origin, "pol": self.pol, "ts": self.transship or self.pol, "pod": self.pod,
                "destination": self.destination}[role]

    def milestone(self, code: str) -> Milestone | None:
        return next((m for m in self.milestones if m.code == code), None)


def imo_number(rng: random.Random) -> str:
    digits = [rng.randint(1, 9)] + [rng.randint(0, 9) for _ in range(5)]
    check = sum(d * (7 - i) for i, d in enumerate(digits)) % 10
    return "".join(map(str, digits)) + str(check)


def awb_number(prefix: str, rng: random.Random) -> str:
    serial = rng.randint(1_000_000, 9_999_999)
    return f"{prefix}-{serial}{serial % 7}"


def _phone(rng: random.Random, country: str) -> str:
    codes = {"DE": "+49", "AT": "+43", "CH": "+41", "NL": "+31", "CN": "+86", "US": "+1", "GB": "+44"}
    return f"{codes.get(country, '+00')} {rng.randint(20, 899)} {rng.randint(100000, 9999999)}"


@lru_cache(maxsize=4096)
def local_customer(seed: int, office_index: int, number: int) -> Party:
    """The forwarder's customers of an office: a stable pool, so the same customers reappear."""
    rng = rng_for(seed, TAG_STORE, 100 + office_index, number)
    office = places.OFFICES[office_index]
    head, tail = rng.choice(cat.COMPANY_HEADS), rng.choice(cat.COMPANY_TAILS)
    first, last = rng.choice(cat.FIRST_NAMES[:12]), rng.choice(cat.LAST_NAMES[:12])
    domain = head.lower() + "-" + tail.split()[0].lower()[:8]
    return Party(
        name=f"{head} {tail}",
        street=f"{rng.choice(cat.STREETS_LOCAL)} {rng.randint(1, 180)}",
        place=rng.choice(office.cities),
        address_type=rng.choices(("K", "D", "G", "P", "A"), (70, 12, 8, 6, 4))[0],
        address_number=10000 + office_index * 1000 + number,
        contact_name=f"{first} {last}",
        phone=_phone(rng, office.cities[0].country),
        email=f"{first[0].lower()}.{last.lower()}@{domain}.example",
    )


def _foreign_party(rng: random.Random, place: Place) -> Party:
    tails = cat.FOREIGN_COMPANY_TAILS.get(place.country, cat.DEFAULT_FOREIGN_TAILS)
    head = rng.choice((place.name.split()[0], rng.choice(cat.COMPANY_HEADS), "Global", "Pacific", "Orient"))
    first, last = rng.choice(cat.FIRST_NAMES), rng.choice(cat.LAST_NAMES)
    return Party(
        name=f"{head} {rng.choice(tails)}",
        street=f"{rng.randint(1, 999)} {rng.choice(cat.STREETS_FOREIGN)}",
        place=place,
        address_type=rng.choice(("P", "A", "G")),
        address_number=500000 + rng.randint(0, 99999),
        contact_name=f"{first} {last}",
        phone=_phone(rng, place.country),
        email=f"{first.lower()}.{last.lower()}@{head.lower().replace(' ', '')}-trade.example",
    )


def _route(rng: random.Random, mode: str, direction: str, office: Office) -> tuple[Place, Place, Place, Place]:
    """(local city, local port/airport/terminal, far port/airport/terminal, far city)."""
    local_city = rng.choice(office.cities)
    if mode == "SEA":
        near = places.sea_port(rng.choice(office.sea_ports))
        far = rng.choice(places.OVERSEAS_SEA_PORTS)
        far_city = far
    elif mode == "AIR":
        near = places.EU_AIRPORTS[office.airport]
        far = rng.choice(places.OVERSEAS_AIRPORTS)
        far_city = far
    elif mode == "RL":
        near = places.rail_terminal(office.rail_terminal)
        far = rng.choice(places.OVERSEAS_RAIL_TERMINALS)
        far_city = far
    else:
        near = local_city
        far = rng.choice([c for c in places.EU_ROAD_CITIES if c.country != local_city.country])
        far_city = far
    if direction == "E":
        return local_city, near, far, far_city
    return far_city, far, near, local_city


def _timeline(rng: random.Random, mode: str, created: int, transship: bool, customs: bool) -> list[tuple]:
    """(code, role, planned, actual, until, time_known) per milestone."""
    rows: list[tuple] = []
    planned = created
    actual_prev = created
    late_factor = {"SEA": 72, "RL": 60, "AIR": 12, "RD": 10}[mode]
    for code, role, (low, high) in TEMPLATES[mode]:
        if code.startswith("TRANSSHIPMENT") and not transship:
            continue
        if code == "CUSTOMS_CLEARANCE" and mode == "RD" and not customs:
            continue
        if code == "VGM_CLOSING" and rng.random() < 0.3:
            continue
        gap = rng.uniform(low, high) * HOUR
        planned = int(planned + gap) // 300 * 300
        if code in ("PICKUP", "DELIVERY_DATE"):
            planned = planned // DAY * DAY + rng.choice((6, 7, 8, 9, 10, 12, 13)) * HOUR
            planned = max(planned, rows[-1][2] + HOUR if rows else created + 12 * HOUR)
        delay = rng.uniform(-2, 3) * HOUR
        if rng.random() < 0.22:
            delay = rng.uniform(4, late_factor) * HOUR
        actual = max(int(planned + delay), actual_prev + 600)
        actual_prev = actual
        until = planned + rng.choice((2, 3, 4)) * HOUR if code in UNTIL_CODES else None
        rows.append((code, role, planned, actual, until, rng.random() > 0.03))
    return rows


def derive_identity(seed: int, shipment_id: int, created: int) -> Identity:
    rng = rng_for(seed, shipment_id, TAG_IDENTITY)
    client = rng.choices(cat.CLIENTS, cat.CLIENT_WEIGHTS)[0]
    office_index = rng.choices(range(len(places.OFFICES)), places.OFFICE_WEIGHTS)[0]
    office = places.OFFICES[office_index]
    mode = rng.choices(cat.MODES, cat.MODE_WEIGHTS)[0]
    direction = "E" if rng.random() < 0.55 else "I"
    form = OBJECT_FORM if rng.random() < 0.35 else STRING_FORM
    origin, pol, pod, destination = _route(rng, mode, direction, office)
    transship = rng.choice(places.TRANSSHIPMENT_PORTS) if mode == "SEA" and rng.random() < 0.35 else None
    if transship is not None and transship.unloc in (pol.unloc, pod.unloc):
        transship = None
    hub = rng.choice(places.AIR_HUBS) if mode == "AIR" and rng.random() < 0.3 else None

    vessels: tuple[tuple[str, str, str, str], ...] = ()
    flights: tuple[str, ...] = ()
    if mode == "SEA":
        line = rng.choice(cat.SHIPPING_LINES)
        carrier_code = line.scac
        legs = 2 if transship else 1
        picked = []
        for _ in range(legs):
            flag, prefix = rng.choice(cat.VESSEL_FLAGS)
            call_sign = prefix + "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ0123456789") for _ in range(3))
            picked.append((rng.choice(line.vessel_names), imo_number(rng), flag, call_sign))
        vessels = tuple(picked)
    elif mode == "AIR":
        airline = rng.choice(cat.AIRLINES)
        carrier_code = airline.iata
        flights = tuple(f"{airline.iata}{rng.randint(100, 9899)}" for _ in range(2 if hub else 1))
    else:
        carrier_code = rng.choice(cat.HAULIERS)

    fcl = mode in ("SEA", "RL") and rng.random() < (0.65 if mode == "SEA" else 0.8)
    container_count = rng.choices((1, 2, 3, 4), (55, 25, 12, 8))[0] if fcl and mode == "SEA" else 0
    customer = local_customer(seed, office_index, rng.randrange(CUSTOMERS_PER_OFFICE))
    partner = _foreign_party(rng, destination if direction == "E" else origin)
    booking_party = "SHP" if direction == "E" else "CNE"
    self_pickup = rng.random() < 0.08
    self_delivery = rng.random() < 0.08
    has_pre = mode != "RD" and not self_delivery and (direction == "E" or rng.random() < 0.3)
    has_post = mode != "RD" and not self_pickup and (direction == "I" or rng.random() < 0.4)
    terms = [t for t in cat.INCOTERMS if mode == "SEA" or t[0] not in cat.SEA_ONLY_INCOTERMS]
    incoterm = rng.choice(terms)

    customs = mode == "RD" and not {origin.country, destination.country} <= places.EU_COUNTRIES
    milestones = tuple(Milestone(*row) for row in _timeline(rng, mode, created, transship is not None, customs))

    yy = f"{dt.datetime.fromtimestamp(created, dt.UTC).year % 100:02d}"
    serial = rng.randint(100000, 999999)
    if mode == "SEA":
        master: str | None = f"{carrier_code}{rng.randint(100000000, 999999999)}"
        house: str | None = f"FPL{office.code}{yy}{serial}"
    elif mode == "AIR":
        master = awb_number(next(a.awb_prefix for a in cat.AIRLINES if a.iata == carrier_code), rng)
        house = f"{office.code}{yy}{serial}"
    elif mode == "RL":
        master = f"CIM{rng.randint(10000000, 99999999)}" if rng.random() < 0.8 else None
        house = f"FPR{office.code}{yy}{serial}"
    else:
        master = None
        house = f"CMR{office.code}{serial}" if rng.random() < 0.85 else None
    foreign_id = None
    roll = rng.random()
    if roll < 0.45:
        foreign_id = f"S{rng.randint(0, 99999999):08d}"
    elif roll < 0.7:
        foreign_id = f"SAP-{rng.randint(80000000, 89999999)}"
    original = f"{office.code}{yy}{rng.randint(100000, 999999)}" if rng.random() < 0.06 else None
    logins = cat.employee_logins(office.code)
    return Identity(
        id=shipment_id, client=client, office=office, mode=mode, direction=direction, form=form,
        origin=origin, pol=pol, transship=transship, pod=pod, destination=destination,
        carrier_code=carrier_code, vessels=vessels, flights=flights, hub=hub, fcl=fcl,
        container_count=container_count, customer=customer, partner=partner, booking_party=booking_party,
        self_pickup=self_pickup, self_delivery=self_delivery, has_pre=has_pre, has_post=has_post,
        incoterm=incoterm, milestones=milestones, house_reference=house, master_reference=master,
        foreign_id=foreign_id, original_shipment_number=original, created_by=rng.choice(logins),
        responsible=rng.choice(logins), order_offset=rng.randint(600, 5 * DAY),
        initial_goods=rng.choices((1, 2, 3, 4), (40, 30, 18, 12))[0], initial_version=rng.randint(1, 6),
    )
