"""Compact per-shipment state and the lazy generation of full shipment documents from it.

A live shipment is held as one :class:`ShipmentState` (a few hundred bytes): id, version,
created / last-modified instants, the lookup key values, the goods line numbers and the address
reference values. The full document is a pure function of ``(seed, state, memos, event
overrides)``: stable parts (route, parties, timeline) come from an RNG seeded with (seed, id),
version-dependent parts from one seeded with (seed, id, version), and each goods line from one
seeded with (seed, id, line number). Events are rendered as of the state's last-modified instant,
so a document never changes without a new version and a new last-modified instant. A state whose
estimates were revised (:mod:`.data_estimates`) carries its own milestone timeline, which then
replaces the identity's. A state also carries its revised departure / arrival dates (drawn when the
shipment is generated, moved only with its estimates), so versions that revise nothing agree on them.

``ShipmentState`` is itself the lookup key row (a read-only ``Mapping`` over ``SHIPMENT_KEYS``).
States are never mutated in place: a change makes a new state (:meth:`ShipmentState.evolve`), so
key rows handed out earlier stay consistent.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import random
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from freight_pipeline.simulator import data_catalog as cat
from freight_pipeline.simulator.data_addresses import (
    container_numbers,
    new_reference_value,
    render_addresses,
    render_containers,
)
from freight_pipeline.simulator.data_estimates import (
    RevisedDates,
    first_revised_dates,
    revised_dates_after,
    revised_milestones,
)
from freight_pipeline.simulator.data_format import TAG_ESTIMATES, TAG_VERSION, local_datetime, rng_for, round2
from freight_pipeline.simulator.data_goods import MAX_LINE_NUMBER, GoodsContext, render_goods
from freight_pipeline.simulator.data_identity import DAY, Identity, Milestone, derive_identity
from freight_pipeline.simulator.data_transport import main_legs, post_legs, pre_legs, render_events
from freight_pipeline.simulator.store_api import SHIPMENT_KEYS

TAG_REFERENCES = 13
TAG_FINANCE = 14
CLOSE_AFTER = 2 * DAY  # a shipment is closed this long after its final destination was reached
MAX_REFERENCES = 6

_MODE_LETTER = {"SEA": "S", "AIR": "A", "RD": "R", "RL": "L"}
_KEY_ATTRS: dict[str, str] = {
    "ID": "id", "HBL": "house_reference", "MBL": "master_reference", "FILENUMBER": "shipment_number",
    "SHIPMENT_NUMBER": "shipment_number", "SHIPMENT_ID": "foreign_id", "ADDRESS_REFERENCE": "address_refs",
    "DIRECTION": "direction", "MODE_OF_TRANSPORT": "mode", "MONTH_OF_SERVICE": "month_of_service",
    "CLIENT": "client", "CREATION_DATE": "creation_date", "RUNNING_SEQUENCE_NUMBER": "running_sequence_number",
    "CUSTOMER_ADDRESS_TYPE": "customer_address_type", "CUSTOMER_ADDRESS_NUMBER": "customer_address_number",
    "SHIPMENT_CLOSED": "closed_flag", "LAST_MODIFIED_DATE": "lm_date", "LAST_MODIFIED_TIME": "lm_time",
}
assert tuple(_KEY_ATTRS) == SHIPMENT_KEYS
_DATE_STRINGS: dict[str, str] = {}  # interned YYYY-MM-DD strings, shared by all states


def _intern(value: str) -> str:
    return _DATE_STRINGS.setdefault(value, value)


class ShipmentState(Mapping[str, Any]):
    """Compact state of one live shipment, and its lookup key row (SHIPMENT_KEYS -> value)."""

    __slots__ = (
        "address_refs", "client", "closed", "created", "creation_date", "customer_address_number",
        "customer_address_type", "direction", "foreign_id", "goods", "house_reference", "id", "lm_date", "lm_time",
        "master_reference", "mode", "modified", "month_of_service", "revised", "running_sequence_number",
        "shipment_number", "timeline", "tz", "version",
    )

    def __init__(self, *, id: int, version: int, created: int, modified: int, tz: dt.tzinfo, client: str,
                 direction: str, mode: str, shipment_number: str, house_reference: str | None,
                 master_reference: str | None, foreign_id: str | None, month_of_service: str,
                 running_sequence_number: int, customer_address_type: str, customer_address_number: int,
                 closed: bool, address_refs: tuple[str, ...], goods: tuple[int, ...] | None,
                 timeline: tuple[Milestone, ...] | None = None, revised: RevisedDates = ()) -> None:
        self.id = id
        self.version = version
        self.created = created
        self.modified = modified
        self.tz = tz
        self.client = client
        self.direction = direction
        self.mode = mode
        self.shipment_number = shipment_number
        self.house_reference = house_reference
        self.master_reference = master_reference
        self.foreign_id = foreign_id
        self.month_of_service = month_of_service
        self.running_sequence_number = running_sequence_number
        self.customer_address_type = customer_address_type
        self.customer_address_number = customer_address_number
        self.closed = closed
        self.address_refs = address_refs
        self.goods = goods  # None: the initial goods lines of the identity
        self.timeline = timeline  # None: the identity's milestones (no estimate revised yet)
        self.revised = revised  # the revised dates of the events and legs (data_estimates.RevisedDates)
        self.creation_date = _intern(dt.datetime.fromtimestamp(created, tz).date().isoformat())
        local = dt.datetime.fromtimestamp(modified, tz)
        self.lm_date = _intern(local.date().isoformat())
        self.lm_time = local.strftime("%H:%M:%S")

    # --- Mapping over SHIPMENT_KEYS ------------------------------------------------------------
    def __getitem__(self, key: str) -> Any:
        return getattr(self, _KEY_ATTRS[key])

    def __iter__(self) -> Iterator[str]:
        return iter(SHIPMENT_KEYS)

    def __len__(self) -> int:
        return len(SHIPMENT_KEYS)

    def __repr__(self) -> str:
        return f"ShipmentState(id={self.id}, version={self.version}, modified={self.lm_date}T{self.lm_time})"

    @property
    def closed_flag(self) -> str:
        return "J" if self.closed else "N"

    def evolve(self, **changes: Any) -> ShipmentState:
        fields = {name: getattr(self, name) for name in _INIT_FIELDS}
        fields.update(changes)
        return ShipmentState(**fields)

    def line_numbers(self, ident: Identity) -> tuple[int, ...]:
        return self.goods if self.goods is not None else tuple(range(1, ident.initial_goods + 1))


_INIT_FIELDS = (
    "id", "version", "created", "modified", "tz", "client", "direction", "mode", "shipment_number",
    "house_reference", "master_reference", "foreign_id", "month_of_service", "running_sequence_number",
    "customer_address_type", "customer_address_number", "closed", "address_refs", "goods", "timeline", "revised",
)


# --- building and changing states ----------------------------------------------------------------


def initial_references(seed: int, shipment_id: int) -> tuple[str, ...]:
    rng = rng_for(seed, shipment_id, TAG_REFERENCES)
    count = rng.choices((0, 1, 2, 3, 4), (5, 35, 30, 20, 10))[0]
    return tuple(dict.fromkeys(new_reference_value(rng) for _ in range(count)))


def new_state(seed: int, ident: Identity, created: int, modified: int, version: int, running_sequence_number: int,
              tz: dt.tzinfo) -> ShipmentState:
    local_created = dt.datetime.fromtimestamp(created, tz)
    number = (f"{ident.office.code}{_MODE_LETTER[ident.mode]}{ident.direction}{local_created.year % 100:02d}"
              f"{running_sequence_number:06d}")
    service = next((m for m in ident.milestones if m.code in ("POL_DEPARTURE", "DISPATCH")), ident.milestones[0])
    return ShipmentState(
        id=ident.id, version=version, created=created, modified=modified, tz=tz, client=ident.client,
        direction=ident.direction, mode=ident.mode, shipment_number=number, house_reference=ident.house_reference,
        master_reference=ident.master_reference, foreign_id=ident.foreign_id,
        month_of_service=_intern(dt.datetime.fromtimestamp(service.planned, tz).strftime("%Y-%m")),
        running_sequence_number=running_sequence_number, customer_address_type=ident.customer.address_type,
        customer_address_number=ident.customer.address_number, closed=is_closed(ident, modified),
        address_refs=initial_references(seed, ident.id), goods=None,
        revised=drawn_revised_dates(seed, ident, version, modified),
    )


def drawn_revised_dates(seed: int, ident: Identity, version: int, as_of: int) -> RevisedDates:
    """The revised dates a shipment is generated with (:func:`~.data_estimates.first_revised_dates`), drawn
    from (seed, id, version): ``version`` and ``as_of`` are those it has when generated."""
    return first_revised_dates(ident.milestones, as_of, lambda: rng_for(seed, ident.id, TAG_VERSION, version, 1))


def is_closed(ident: Identity, as_of: int) -> bool:
    return ident.final_actual + CLOSE_AFTER <= as_of


def change_stamp(now: int, previous: Iterable[int]) -> int:
    """Last-modified second of one change of shipments last modified at ``previous``.

    ``now``, or one second after the newest previous value when the clock has not passed it, so
    every change moves last-modified even while the clock stands still (assumption A8). One stamp
    for a whole batch keeps a bulk change in one second.
    """
    return max(now, max(previous, default=now - 1) + 1)


def touched(state: ShipmentState, modified: int) -> ShipmentState:
    """A new version, last modified at ``modified`` (see :func:`change_stamp`)."""
    return state.evolve(version=state.version + 1, modified=modified)


def with_revised_estimates(seed: int, state: ShipmentState, ident: Identity) -> ShipmentState:
    """``state`` (just changed, at ``state.modified``) with the estimates of its milestones still to
    come revised (:func:`~.data_estimates.revised_milestones`, drawn from (seed, id, version)).

    ``ident``: the shipment's identity as of the state before the change (:func:`progressed_identity`).
    """
    rng = rng_for(seed, state.id, TAG_ESTIMATES, state.version)
    timeline = revised_milestones(ident.milestones, ident.mode, state.modified, rng)
    return state if timeline is None else with_timeline(state, ident, timeline)


def with_timeline(state: ShipmentState, ident: Identity, timeline: tuple[Milestone, ...]) -> ShipmentState:
    """``state`` with its milestones at ``timeline`` (they were ``ident``'s): the revised dates of the
    estimates that moved move with them (:func:`~.data_estimates.revised_dates_after`), the others stay."""
    return state.evolve(timeline=timeline, revised=revised_dates_after(ident.milestones, timeline, state.revised))


def mutated(state: ShipmentState, ident: Identity, modified: int, rng: random.Random) -> ShipmentState:
    """A new version last modified at ``modified``: goods lines and references changed, closed when done."""
    lines = list(state.line_numbers(ident))
    if rng.random() < 0.5:
        if len(lines) > 1 and rng.random() < 0.5:
            lines.remove(rng.choice(lines[:-1]))  # never the highest number, so numbers are never reused
        if rng.random() < 0.6 and lines[-1] < MAX_LINE_NUMBER:
            lines.append(lines[-1] + 1)
    refs = list(state.address_refs)
    if rng.random() < 0.25 and len(refs) < MAX_REFERENCES:
        value = new_reference_value(rng)
        if value not in refs:
            refs.append(value)
    elif refs and rng.random() < 0.05:
        refs.pop(rng.randrange(len(refs)))
    return state.evolve(
        version=state.version + 1, modified=modified, goods=tuple(lines), address_refs=tuple(refs),
        closed=state.closed or is_closed(ident, modified),
    )


# --- documents ------------------------------------------------------------------------------------

BASE_EXCLUDED = frozenset({
    "goods", "addresses", "containers", "pre_carriage", "main_carriage", "post_carriage", "events", "memos", "aes",
    "custom_fields", "insurance", "credit_data", "customs_data",
})


def identity_of(seed: int, state: ShipmentState) -> Identity:
    return derive_identity(seed, state.id, state.created)


def progressed_identity(seed: int, state: ShipmentState) -> Identity:
    """The identity with the state's own milestone timeline (its revised estimates), if it has one."""
    ident = identity_of(seed, state)
    return ident if state.timeline is None else dataclasses.replace(ident, milestones=state.timeline)


def apply_overrides(events: list[dict[str, Any]], overrides: Mapping[tuple[str, str], dict[str, Any]]
                    ) -> list[dict[str, Any]]:
    if not overrides:
        return events
    index = {(e["event"], e["type"]): i for i, e in enumerate(events)}
    for key, event in overrides.items():
        if key in index:
            events[index[key]] = event
        else:
            events.append(event)
    return events


def build_document(
    seed: int,
    state: ShipmentState,
    memos: list[dict[str, Any]],
    overrides: Mapping[tuple[str, str], dict[str, Any]],
    iso: Any,
) -> dict[str, Any]:
    """The full shipment document. ``iso(epoch)`` formats an instant in the service offset."""
    ident = progressed_identity(seed, state)
    vrng = rng_for(seed, state.id, TAG_VERSION, state.version)
    stable = rng_for(seed, state.id, TAG_FINANCE)
    as_of = state.modified
    logins = cat.employee_logins(ident.office.code)

    numbers = container_numbers(seed, ident)
    ctx = GoodsContext(seed, ident, state.client, state.shipment_number, numbers, iso)
    goods = render_goods(ctx, state.line_numbers(ident))
    totals = ctx.totals
    volumetric = {"AIR": 167.0, "SEA": 1000.0, "RD": 333.0, "RL": 500.0}[ident.mode]
    revised = dict(state.revised)
    events = apply_overrides(render_events(ident, as_of, revised), overrides)
    pickup = ident.milestones[0]
    clearance = ident.milestone("CUSTOMS_CLEARANCE") or ident.milestone("CLEARANCE_END")
    insured = stable.random() < 0.4
    goods_value = round2(totals["weight"] * stable.uniform(5, 40))
    currency = stable.choice(("EUR", "EUR", "USD"))

    doc: dict[str, Any] = {
        "id": state.id,
        "client": state.client,
        "direction": state.direction,
        "office": ident.office.code,
        "employees": {
            "closed_employee_matchcode": ident.responsible if state.closed else None,
            "last_modified_employee_matchcode": vrng.choice(logins),
            "created_employee_matchcode": ident.created_by,
            "responsible_employee_matchcode": ident.responsible,
        },
        "memos": memos,
        "aes": _aes(vrng, state, ident),
        "shipment_number": state.shipment_number,
        "master_reference": state.master_reference,
        "house_reference": state.house_reference,
        "bl_type": stable.choice(("ORIGINAL", "SEAWAY", "TELEX_RELEASE")) if ident.mode == "SEA" else (
            "HAWB" if ident.mode == "AIR" else None),
        "mode_of_transport": state.mode,
        "month_of_service": state.month_of_service,
        "total_packages": int(totals["packages"]),
        "total_gross_weight": round2(totals["weight"]),
        "self_pickup": "J" if ident.self_pickup else "N",
        "self_delivery": "J" if ident.self_delivery else "N",
        "goods": goods,
        "addresses": render_addresses(seed, ident, state.address_refs),
        "pre_carriage": {"carriage_legs": pre_legs(ident, as_of)},
        "main_carriage": {"carriage_legs": main_legs(ident, as_of, revised)},
        "post_carriage": {"carriage_legs": post_legs(ident, as_of)},
        "events": events,
        "terms_of_delivery_matchcode": ident.incoterm[0],
        "terms_of_delivery_name": ident.incoterm[1],
        "total_volume": round(totals["volume"], 3),
        "chargeableWeight": round2(max(totals["weight"], totals["volume"] * volumetric)),
        "original_shipment_number": ident.original_shipment_number,
        "foreign_id": state.foreign_id,
        "movement_matchcode": _movement(ident),
        "insurance": {
            "waiver_customer": not insured,
            "insurable_value": round2(goods_value * 1.1) if insured else None,
            "insurable_value_currency_matchcode": currency if insured else None,
            "value_of_goods": goods_value,
            "value_of_goods_currency_matchcode": currency,
            "insurance_text": vrng.choice(("All risks, ICC (A)", "ICC (C)", "Door to door cover", None))
            if insured else None,
            "transport_insurance": insured,
            "insurance_type": stable.choice(("ALL_RISK", "ICC_A", "ICC_C")) if insured else None,
            "insurer": {"address_type": "A", "address_number": 950000 + stable.randint(1, 40)} if insured else None,
        } if stable.random() < 0.85 else None,
        "credit_data": _credit(stable, pickup.planned, state.tz),
        "customs_data": {
            "custom_clearance_date": local_datetime(clearance.actual, clearance_tz(ident)).date().isoformat()
            if clearance is not None and clearance.actual <= as_of else None,
            "clearance": stable.choice(("FORWARDER", "CUSTOMER", "BROKER")),
            "book": stable.choice(("EX-A", "T1", "IM-4", None)),
        },
        "containers": render_containers(seed, ident, numbers, state.client, state.shipment_number,
                                        goods[0]["id"] if goods else None),
        "custom_fields": [
            {"id": state.id * 100 + k, "client": state.client, "value": vrng.choice(cat.CUSTOM_FIELD_VALUES),
             "shipment_number": state.shipment_number, "running_number": k}
            for k in range(1, vrng.choice((0, 0, 1, 1, 2, 3)) + 1)
        ],
        "last_modified_date_time": iso(state.modified),
        "created_date_time": iso(state.created),
        "order_date_time": iso(state.created - ident.order_offset),
        "project_matchcode": stable.choice(("PRJ-WIND-2026", "PRJ-PLANT-SHANGHAI")) if stable.random() < 0.05 else None,
        "depot_matchcode": f"{ident.office.code}-W{stable.randint(1, 3)}" if stable.random() < 0.4 else None,
        "shipment_closed": state.closed,
        "booking_party_address_qualifier": ident.booking_party,
    }
    if vrng.random() < 0.08:
        del doc["project_matchcode"]  # an absent optional key
    return doc


def clearance_tz(ident: Identity) -> int:
    return ident.pod.utc_minutes


def _movement(ident: Identity) -> str:
    if ident.mode == "SEA":
        return "FCL/FCL" if ident.fcl else "LCL/LCL"
    if ident.mode == "RL":
        return "FCL" if ident.fcl else "LCL"
    if ident.mode == "RD":
        return "FTL" if ident.id % 3 == 0 else "LTL"
    return "AIR"


def _aes(rng: random.Random, state: ShipmentState, ident: Identity) -> list[dict[str, Any]]:
    if ident.direction != "E" or ident.mode == "RD":
        return []
    items = []
    for k in range(1, rng.choice((0, 1, 1, 2)) + 1):
        body = "".join(rng.choice("0123456789ABCDEFGHJKLMNPRSTUVWXYZ") for _ in range(13))
        items.append({"id": state.id * 10 + k, "client": state.client,
                      "mrn": f"26{ident.office.cities[0].country}{body}E{rng.randint(0, 9)}",
                      "shipment_number": state.shipment_number, "running_number": k})
    return items


def _credit(rng: random.Random, pickup: int, tz: dt.tzinfo) -> dict[str, Any] | None:
    roll = rng.random()
    if roll < 0.6:
        return None
    if roll < 0.9:
        return {"lc_number": None, "latest_shipment_date": None, "lc_expiry": None}
    day = dt.datetime.fromtimestamp(pickup, tz).date()
    return {"lc_number": f"LC{rng.randint(100000, 999999)}",
            "latest_shipment_date": (day + dt.timedelta(days=rng.randint(5, 20))).isoformat(),
            "lc_expiry": (day + dt.timedelta(days=rng.randint(30, 90))).isoformat()}


def base_shipment(doc: Mapping[str, Any]) -> dict[str, Any]:
    """Assumption A9: every scalar top-level field plus employees."""
    return {k: (dict(v) if k == "employees" and v is not None else v) for k, v in doc.items()
            if k not in BASE_EXCLUDED}
