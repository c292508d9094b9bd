"""Change over time in the simulator store (:class:`StoreChanges`): shipments modified, brought up
to the clock (their due events in, their estimates revised as they progress), created, deleted and
touched, and one milestone moved on demand.

Every change draws from the store's mutation (and document) random streams in a fixed order, so
the same sequence of calls gives the same changes.
"""

from __future__ import annotations

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

DOCUMENT_ON_CHANGE_SHARE = 0.15  # a changed shipment gets a new E-File this often (filed with the change)


class StoreChanges:
    """The simulated service's own changes to ``data`` (the control API and the tests drive them).

    Args:
        data: the store's shared data.
        memo_share: share of shipments with memo lines (new shipments get one at half that rate).
    """

    def __init__(self, data: StoreData, memo_share: float) -> None:
        self._data = data
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
            return data.clock.iso(stamp)

    def _add_document(self, state: ShipmentState, at: int) -> None:
        """A document filed with a shipment later on (one of the kinds its mode has)."""
        kinds = [i for i, kind in enumerate(DOCUMENT_KINDS) if state.mode in kind.modes]
        self._data.efiles.generate(
            state.id, self._document_rng.choice(kinds), at, state.shipment_number, state.house_reference
        )


def _check_count(count: int) -> None:
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise Invalid(f"count must be a non-negative integer, got {count!r}")
