"""Change over time in the simulator store (:class:`StoreChanges`): shipments modified, brought up
to the clock (their due events in, their estimates revised as they progress), created, deleted and
touched, one milestone moved on demand, and estimates (events, or the main carriage's arrival: its legs)
moved by a background process that leaves the shipment's last-modified instant alone (the spec: events "may
be changed by hand or by background processes"; nothing says such a change moves the shipment's stamp).

Every change draws from the store's mutation (and document) random streams in a fixed order, so
the same sequence of calls gives the same changes.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from freight_pipeline.datetimes import DateTimeParseError, parse_datetime_object
from freight_pipeline.simulator import data_catalog as cat
from freight_pipeline.simulator.data_efile import DOCUMENT_KINDS
from freight_pipeline.simulator.data_estimates import moved_milestone
from freight_pipeline.simulator.data_format import TAG_DOCUMENTS, TAG_MUTATION, rng_for
from freight_pipeline.simulator.data_identity import derive_identity
from freight_pipeline.simulator.generator import (
    ShipmentState,
    is_closed,
    mutated,
    new_state,
    progressed_identity,
    touched,
    with_revised_estimates,
    with_timeline,
)
from freight_pipeline.simulator.store_api import EVENT_TYPES, Invalid
from freight_pipeline.simulator.store_data import StoreData
from freight_pipeline.simulator.store_reads import StoreReader

DOCUMENT_ON_CHANGE_SHARE = 0.15  # a changed shipment gets a new E-File this often (filed with the change)
BACKGROUND_SHIFT_HOURS = (3, 48)
"""A background change moves a shipment's upcoming estimates later by this many hours (a delay)."""
BACKGROUND_MEMO_SHARE = 0.25
"""A background change adds a memo line to the shipment this often."""
ARRIVAL = "POD_ARRIVAL"
"""The milestone a schedule feed revises in the background: the main carriage's arrival (its last leg's)."""
MAIN_CARRIAGE_MODES = ("AIR", "SEA")
"""The modes whose main carriage has legs of its own endpoint (the spec's air and sea main-carriage legs)."""


class StoreChanges:
    """The simulated service's own changes to ``data`` (the control API and the tests drive them).

    Args:
        data: the store's shared data.
        memo_share: share of shipments with memo lines (new shipments get one at half that rate).
        reader: the store's reader (a shipment's events as the service answers them).
    """

    def __init__(self, data: StoreData, memo_share: float, reader: StoreReader) -> None:
        self._data = data
        self._reader = reader
        self._memo_share = memo_share
        self._mutation_rng = rng_for(data.seed, TAG_MUTATION)
        self._document_rng = rng_for(data.seed, TAG_DOCUMENTS, 0)

    def modify_shipments(self, count: int) -> list[int]:
        """Change ``count`` live shipments (open ones first), all stamped with one second (A8).

        Besides goods lines, references and memo lines, a change revises the estimates of the
        shipment's milestones still to come (:func:`~.generator.with_revised_estimates`) and brings in
        the actuals the stamp has reached.
        """
        _check_count(count)
        data = self._data
        with data.lock:
            rng = self._mutation_rng
            open_ids = [i for i, s in data.live.items() if not s.closed]
            pool = open_ids if len(open_ids) >= count else list(data.live)
            chosen = sorted(rng.sample(pool, min(count, len(pool))))
            stamp = data.stamp([data.live[i].modified for i in chosen])
            for shipment_id in chosen:
                state = data.live[shipment_id]
                ident = progressed_identity(data.seed, state)
                data.live[shipment_id] = with_revised_estimates(data.seed, mutated(state, ident, stamp, rng), ident)
                if rng.random() < 0.25:
                    data.add_memo(shipment_id, rng.choice(cat.MEMO_TEXTS))
                if data.documents and self._document_rng.random() < DOCUMENT_ON_CHANGE_SHARE:
                    self._add_document(data.live[shipment_id], stamp)
            data.version += 1
            return chosen

    def progress_shipments(self) -> list[int]:
        """Bring the open shipments up to the clock, as the service records events when they happen:
        each with a milestone whose actual instant came since its last version gets a new version,
        all stamped with one second (A8): its actuals come in, the estimates still to come are revised
        (:func:`~.generator.with_revised_estimates`), it closes when finished (A31). Returns their ids.
        """
        data = self._data
        with data.lock:
            now = data.clock.epoch()
            due = []
            for state in data.live.values():
                if state.closed:
                    continue
                ident = progressed_identity(data.seed, state)
                if any(state.modified < milestone.actual <= now for milestone in ident.milestones):
                    due.append((state, ident))
            if not due:
                return []
            stamp = data.stamp([state.modified for state, _ in due])
            for state, ident in due:
                changed = state.evolve(version=state.version + 1, modified=stamp, closed=is_closed(ident, stamp))
                data.live[state.id] = with_revised_estimates(data.seed, changed, ident)
            data.version += 1
            return [state.id for state, _ in due]

    def create_shipments(self, count: int) -> list[int]:
        """New shipments with ids above every id issued so far, created now, modified at one new stamp (A8)."""
        _check_count(count)
        data = self._data
        with data.lock:
            data.check_id_room(count)
            now = data.clock.epoch()
            stamp = data.stamp([])
            rng = self._mutation_rng
            created = []
            for _ in range(count):
                shipment_id = data.next_id
                data.next_id += 1
                ident = derive_identity(data.seed, shipment_id, now)
                state = new_state(data.seed, ident, now, stamp, 1, data.next_running(ident.client), data.clock.tz)
                data.add_shipment(state)
                if rng.random() < self._memo_share / 2:
                    data.add_memo(shipment_id, rng.choice(cat.MEMO_TEXTS))
                data.add_initial_documents(state)
                created.append(shipment_id)
            data.version += 1
            return created

    def delete_shipments(self, count: int) -> list[int]:
        """Delete ``count`` random live shipments (with their memo lines and event overrides)."""
        _check_count(count)
        with self._data.lock:
            chosen = sorted(self._mutation_rng.sample(list(self._data.live), min(count, len(self._data.live))))
            return self.delete_shipment_ids(chosen)

    def delete_shipment_ids(self, shipment_ids: list[int]) -> list[int]:
        """Delete exactly these shipments. Raises NotFound (and deletes none) for an unknown id."""
        data = self._data
        with data.lock:
            ids = list(dict.fromkeys(shipment_ids))
            for shipment_id in ids:
                data.require(shipment_id)
            for shipment_id in ids:
                state = data.live.pop(shipment_id)
                del data.by_number[(state.client, state.shipment_number)]
                data.deleted.add(shipment_id)
                data.overrides.pop(shipment_id, None)
                for memo_id in data.memos_by_shipment.pop(shipment_id, ()):
                    del data.memos[memo_id]
            data.version += 1
            return ids

    def touch_shipments(self, shipment_ids: list[int]) -> None:
        """A new version of each, all stamped with one second (A8)."""
        data = self._data
        with data.lock:
            ids = list(dict.fromkeys(shipment_ids))
            states = [data.require(shipment_id) for shipment_id in ids]
            stamp = data.stamp([state.modified for state in states])
            for state in states:
                data.live[state.id] = touched(state, stamp)
            data.version += 1

    def move_milestone(self, shipment_id: int, code: str, event_type: str, at: int) -> str:
        """Move milestone ``code`` of a shipment to ``at`` (epoch seconds): its estimate (``ESTIMATED``)
        or its actual instant (``ACTUAL``: its event shows once the shipment's last-modified instant
        has reached it). A new version, stamped like every change (A8); an event of that code and type
        written through the interface gives way. Returns the version's ``last_modified_date_time``.

        Raises NotFound (unknown shipment), Invalid (a type other than ESTIMATED / ACTUAL, a code
        the shipment's timeline lacks).
        """
        if event_type not in EVENT_TYPES:
            raise Invalid(f"type {event_type!r} must be ESTIMATED or ACTUAL")
        data = self._data
        with data.lock:
            state = data.require(shipment_id)
            ident = progressed_identity(data.seed, state)
            try:
                timeline = moved_milestone(ident.milestones, code, event_type, at)
            except ValueError as exc:
                raise Invalid(f"shipment {shipment_id}: {exc}") from None
            stamp = data.stamp([state.modified])
            data.live[shipment_id] = with_timeline(touched(state, stamp), ident, timeline)
            data.overrides.get(shipment_id, {}).pop((code, event_type), None)
            data.version += 1
            return data.clock.stamp_iso(shipment_id, stamp)

    def change_in_background(self, count: int) -> list[int]:
        """Move the upcoming estimates of ``count`` open shipments later (each by its own 3 to 48 hours), as a
        carrier's status feed does, and add a memo line to some (BACKGROUND_MEMO_SHARE):
        **without** a new last-modified instant. The events answer (and the document's ``events``) changes;
        the lookup's stamp does not, so a walk by last-modified never sees it. Returns the shipments changed
        (those with an upcoming estimate)."""
        _check_count(count)
        data = self._data
        with data.lock:
            rng = self._mutation_rng
            now = data.clock.epoch()
            open_ids = sorted(i for i, s in data.live.items() if not s.closed)
            changed = []
            for shipment_id in rng.sample(open_ids, len(open_ids)):
                if len(changed) == count:
                    break
                hours = rng.randint(*BACKGROUND_SHIFT_HOURS)
                moved = [_shifted(event, hours) for event in self._upcoming_estimates(shipment_id, now)]
                if not moved:
                    continue
                for event in moved:
                    data.overrides.setdefault(shipment_id, {})[(event["event"], event["type"])] = event
                if rng.random() < BACKGROUND_MEMO_SHARE:
                    data.add_memo(shipment_id, rng.choice(cat.MEMO_TEXTS))
                self._reader.forget(shipment_id)  # the same version (it seeds the document), another answer
                changed.append(shipment_id)
            data.version += 1
            return sorted(changed)

    def revise_arrivals_in_background(self, count: int) -> list[int]:
        """Move the main carriage's estimated arrival (milestone ``POD_ARRIVAL``) of ``count`` open AIR or SEA
        shipments not yet arrived later (each by its own 3 to 48 hours), as a carrier's schedule feed does:
        **without** a new last-modified instant. The air or sea legs answer changes (the last leg's estimated
        arrival), and with it the document's main carriage and its ``POD_ARRIVAL`` estimate; the lookup's stamp
        does not. Returns the shipments changed."""
        _check_count(count)
        data = self._data
        with data.lock:
            rng = self._mutation_rng
            now = data.clock.epoch()
            open_ids = sorted(i for i, s in data.live.items() if not s.closed and s.mode in MAIN_CARRIAGE_MODES)
            changed = []
            for shipment_id in rng.sample(open_ids, len(open_ids)):
                if len(changed) == count:
                    break
                state = data.live[shipment_id]
                ident = progressed_identity(data.seed, state)
                arrival = ident.milestone(ARRIVAL)
                if arrival is None or arrival.actual <= now:
                    continue
                later = arrival.planned + rng.randint(*BACKGROUND_SHIFT_HOURS) * 3600
                data.live[shipment_id] = with_timeline(state, ident,
                                                       moved_milestone(ident.milestones, ARRIVAL, "ESTIMATED", later))
                data.overrides.get(shipment_id, {}).pop((ARRIVAL, "ESTIMATED"), None)
                self._reader.forget(shipment_id)  # the same version (it seeds the document), another answer
                changed.append(shipment_id)
            data.version += 1
            return sorted(changed)

    def _upcoming_estimates(self, shipment_id: int, now: int) -> list[dict[str, Any]]:
        """The shipment's ESTIMATED events dated after ``now`` (as the events endpoint answers them)."""
        upcoming = []
        for event in self._reader.get_events(shipment_id):
            if event.get("type") != "ESTIMATED":
                continue
            try:
                parsed = parse_datetime_object(event.get("date_time"))
            except DateTimeParseError:
                continue
            instant = parsed.instant if parsed is not None else None
            if instant is not None and instant.tzinfo is not None and instant.timestamp() > now:
                upcoming.append(event)
        return upcoming

    def _add_document(self, state: ShipmentState, at: int) -> None:
        """A document filed with a shipment later on (one of the kinds its mode has)."""
        kinds = [i for i, kind in enumerate(DOCUMENT_KINDS) if state.mode in kind.modes]
        self._data.efiles.generate(
            state.id, self._document_rng.choice(kinds), at, state.shipment_number, state.house_reference
        )


def _shifted(event: dict[str, Any], hours: int) -> dict[str, Any]:
    """``event`` with its date and time of day moved by ``hours``, at its offset, in the form it came in (the
    time as text or as an object; a window's end moved along)."""
    moved = dict(event)
    date_time = dict(event["date_time"])
    parsed = parse_datetime_object(date_time)
    assert parsed is not None and parsed.date is not None and parsed.time is not None
    local = dt.datetime.combine(parsed.date, parsed.time) + dt.timedelta(hours=hours)
    date_time["date"] = local.date().isoformat()
    date_time["time"] = _time_like(date_time.get("time"), local.time())
    if isinstance(date_time.get("until"), dict | str) and parsed.until_time is not None:
        until = dt.datetime.combine(parsed.date, parsed.until_time) + dt.timedelta(hours=hours)
        date_time["until"] = _time_like(date_time["until"], until.time())
    moved["date_time"] = date_time
    return moved


def _time_like(sent: Any, time: dt.time) -> Any:
    """``time`` in the form ``sent`` came in: ``HH:MM:SS`` text, or ``{hour, minute, second, nano}``."""
    if isinstance(sent, dict):
        return {"hour": time.hour, "minute": time.minute, "second": time.second, "nano": time.microsecond * 1000}
    return time.strftime("%H:%M:%S")


def _check_count(count: int) -> None:
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise Invalid(f"count must be a non-negative integer, got {count!r}")
