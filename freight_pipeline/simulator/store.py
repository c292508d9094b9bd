"""``SimulatorStore``: the simulator's data, implementing :class:`~.store_api.StoreAPI`.

Only compact state is held per shipment (see :mod:`.generator`); full documents are generated on
demand and kept in a small LRU cache as JSON text (so every caller gets its own copy). One
re-entrant lock guards all state; document generation runs outside it on immutable snapshots.

Determinism: the same constructor arguments and the same sequence of calls give byte-identical
documents (with the default frozen clock). The initial data contains last-modified seconds shared
by more shipments than a page holds: a nightly bulk import (more than 500 shipments from 2,000
shipments on) and a mass update shortly before the start instant.
"""

from __future__ import annotations

import bisect
import copy
import datetime as dt
import json
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from freight_pipeline.datetimes import DateTimeParseError, parse_datetime_object
from freight_pipeline.simulator import data_catalog as cat
from freight_pipeline.simulator.clock import SimClock
from freight_pipeline.simulator.config import MAX_SHIPMENTS
from freight_pipeline.simulator.data_codes import build_code_conversions
from freight_pipeline.simulator.data_efile import DOCUMENT_KINDS, EFileStore, documents_for
from freight_pipeline.simulator.data_format import TAG_DOCUMENTS, TAG_MUTATION, TAG_STORE, rng_for
from freight_pipeline.simulator.data_goods import MAX_SHIPMENT_ID
from freight_pipeline.simulator.data_identity import DAY, HOUR, derive_identity
from freight_pipeline.simulator.data_transport import AIR_LEG_FIELDS, SEA_LEG_FIELDS, carriage_subset
from freight_pipeline.simulator.generator import (
    ShipmentState,
    base_shipment,
    build_document,
    change_stamp,
    identity_of,
    mutated,
    new_state,
    touched,
)
from freight_pipeline.simulator.store_api import (
    EVENT_CODES,
    EVENT_FIELDS,
    EVENT_TYPES,
    Conflict,
    Invalid,
    NotFound,
)

FIRST_SHIPMENT_ID = 10001
HISTORY_DAYS = 150
BULK_IMPORT_MIN = 130  # shipments of the nightly bulk import in small stores (at most a third of them)
BULK_IMPORT_SHARE = 0.26  # ... growing with the store: 520 at 2,000 shipments, more than a 500-row page
BULK_IMPORT_MAX = 2600
MASS_UPDATE_SIZE = 70
DOCUMENT_ON_CHANGE_SHARE = 0.15  # a changed shipment gets a new E-File this often (filed with the change)
LOCATION_CODE_TYPES = frozenset({"SERVICE", "UNLOC", "IATA", "FOREIGN", "POSTAL_CODE", "UN_COUNTRY"})
LOCATION_FIELDS = frozenset({"codes", "name", "latitude", "longitude"})
DATE_TIME_FIELDS = frozenset({"date", "time", "zone_offset", "until"})

EventKey = tuple[str, str]


class SimulatorStore:
    """In-memory freight service data.

    Args:
        shipments: number of initial shipments, 0 to MAX_SHIPMENTS (100,000 build in about 18 s).
        seed: everything generated derives from it.
        start: the simulated clock's start instant (naive = in ``utc_offset``); default
            2026-11-01T08:00:00 in the offset.
        utc_offset: the service's UTC offset for all ``*_date_time`` values and the lookup keys.
        wall_clock: the clock also moves with real time (else it only moves when advanced).
        memo_share: share of shipments with memo lines.
        max_memos_per_shipment: 1..this many memo lines for those shipments.
        code_conversions: at most this many code conversion records (about 380 exist).
        cache_size: full documents kept (as JSON) in the LRU cache.
    """

    def __init__(
        self,
        shipments: int = 2000,
        seed: int = 42,
        start: dt.datetime | None = None,
        utc_offset: str = "+01:00",
        memo_share: float = 0.6,
        max_memos_per_shipment: int = 5,
        code_conversions: int = 400,
        cache_size: int = 1024,
        wall_clock: bool = False,
        documents: bool = True,
    ) -> None:
        if not 0 <= shipments <= MAX_SHIPMENTS:
            raise ValueError(f"shipments must be between 0 and {MAX_SHIPMENTS:,}, got {shipments:,}")
        self.seed = seed
        self._lock = threading.RLock()
        self._clock = SimClock(start, utc_offset, wall_clock)
        self._memo_share = memo_share
        self._max_memos = max(1, max_memos_per_shipment)
        self._version = 0
        self._live: dict[int, ShipmentState] = {}
        self._by_number: dict[tuple[str, str], int] = {}  # (client, shipment number) -> live shipment id
        self._deleted: set[int] = set()
        self._overrides: dict[int, dict[EventKey, dict[str, Any]]] = {}
        self._memos: dict[int, tuple[int, int, str]] = {}  # memo id -> (shipment id, running number, text)
        self._memos_by_shipment: dict[int, list[int]] = {}
        self._next_memo_id = 1
        self._running: dict[str, int] = {}
        self._cache: OrderedDict[tuple[int, int], str] = OrderedDict()
        self._cache_size = cache_size
        self._webhooks: list[tuple[int, dict[str, Any]]] = []
        self._efiles = EFileStore(lambda: self._clock.iso(self._clock.epoch()), self._clock.iso)
        self._documents = documents
        self._document_rng = rng_for(seed, TAG_DOCUMENTS, 0)
        self._mutation_rng = rng_for(seed, TAG_MUTATION)
        self._build(shipments)
        self._last_stamp = max((state.modified for state in self._live.values()), default=0)
        self._code_conversions = build_code_conversions(seed, self._clock.start_epoch, self._clock.iso)[
            : max(0, code_conversions)
        ]

    # ============================================================================================
    # initial data
    # ============================================================================================
    def _build(self, count: int) -> None:
        rng = rng_for(self.seed, TAG_STORE, 1)
        start = self._clock.start_epoch
        created = sorted(start - 600 - int(HISTORY_DAYS * DAY * rng.random() ** 0.8) for _ in range(count))
        bulk_at = self._local_day_start(start - 2 * DAY) + 2 * HOUR  # nightly bulk import, 02:00 local
        bulk: set[int] = set()
        bulk_ids: set[int] = set()
        if count:
            size = bulk_import_size(count)
            first = min(bisect.bisect_left(created, bulk_at), count - size)
            for i in range(first, first + size):
                created[i] = bulk_at
            bulk = set(range(first, first + size))
        shipment_id = FIRST_SHIPMENT_ID
        for index, created_at in enumerate(created):
            ident = derive_identity(self.seed, shipment_id, created_at)
            modified = bulk_at if index in bulk else self._initial_modified(rng, ident, created_at, start)
            state = new_state(self.seed, ident, created_at, modified, ident.initial_version,
                              self._next_running(ident.client), self._clock.tz)
            self._add_state(state)
            if index in bulk:
                bulk_ids.add(shipment_id)
            self._add_initial_memos(rng, state)
            self._add_initial_documents(state)
            shipment_id += 1 if rng.random() < 0.96 else rng.randint(2, 4)
        self._next_id = shipment_id
        self._check_id_room(0)
        self._mass_update(rng, start - 5 * HOUR, bulk_ids)

    def _local_day_start(self, epoch: int) -> int:
        local = self._clock.to_local(epoch)
        return int(local.replace(hour=0, minute=0, second=0, microsecond=0).timestamp())

    @staticmethod
    def _initial_modified(rng: Any, ident: Any, created: int, start: int) -> int:
        passed = [m.actual for m in ident.milestones if m.actual < start]
        if len(passed) == len(ident.milestones):
            modified = passed[-1] + int(rng.uniform(0, 5 * DAY))
        elif passed:
            modified = passed[-1] + int(rng.uniform(0, 12 * HOUR))
        else:
            modified = created + int(rng.uniform(0, 6 * HOUR))
        if modified >= start:  # the change would lie in the future: it happened recently instead
            modified = start - int(rng.uniform(60, 12 * HOUR))
        return max(created, modified)

    def _mass_update(self, rng: Any, at: int, excluded: set[int]) -> None:
        """A mass status update: many open shipments modified in one second."""
        candidates = [s.id for s in self._live.values()
                      if s.id not in excluded and not s.closed and s.modified < at and s.created < at]
        for shipment_id in rng.sample(candidates, min(MASS_UPDATE_SIZE, len(candidates) // 4)):
            self._live[shipment_id] = touched(self._live[shipment_id], at)

    def _add_state(self, state: ShipmentState) -> None:
        self._live[state.id] = state
        self._by_number[(state.client, state.shipment_number)] = state.id

    def _check_id_room(self, count: int) -> None:
        """Refuse ids whose derived ids (goods, hs codes, ...) would not fit int32."""
        if self._next_id + count - 1 > MAX_SHIPMENT_ID:
            raise Invalid(f"shipment ids are exhausted: ids above {MAX_SHIPMENT_ID:,} would overflow int32 "
                          f"derived ids (next id {self._next_id:,}, {count} requested)")

    def _next_running(self, client: str) -> int:
        self._running[client] = self._running.get(client, 0) + 1
        return self._running[client]

    def _add_initial_memos(self, rng: Any, state: ShipmentState) -> None:
        if rng.random() < self._memo_share:
            for _ in range(rng.randint(1, self._max_memos)):
                self._add_memo(state.id, rng.choice(cat.MEMO_TEXTS))

    def _add_initial_documents(self, state: ShipmentState) -> None:
        """The E-Files a shipment has from the start (A38): its own random draw, so the shipments
        themselves are the same with or without documents."""
        if not self._documents:
            return
        rng = rng_for(self.seed, TAG_DOCUMENTS, state.id)
        for kind in documents_for(rng, state.mode):
            created = state.created + int(rng.uniform(0, 2 * DAY))
            self._efiles.generate(state.id, kind, min(created, state.modified), state.shipment_number,
                                  state.house_reference)

    def _add_document(self, state: ShipmentState, at: int) -> None:
        """A document filed with a shipment later on (one of the kinds its mode has)."""
        kinds = [i for i, kind in enumerate(DOCUMENT_KINDS) if state.mode in kind.modes]
        self._efiles.generate(state.id, self._document_rng.choice(kinds), at, state.shipment_number,
                              state.house_reference)

    def _add_memo(self, shipment_id: int, text: str) -> int:
        memo_id = self._next_memo_id
        self._next_memo_id += 1 if memo_id % 17 else 2  # a few gaps, like a real sequence
        ids = self._memos_by_shipment.setdefault(shipment_id, [])
        running = (self._memos[ids[-1]][1] + 1) if ids else 1
        self._memos[memo_id] = (shipment_id, running, text)
        ids.append(memo_id)
        return memo_id

    # ============================================================================================
    # clock
    # ============================================================================================
    def now(self) -> dt.datetime:
        with self._lock:
            return self._clock.now()

    def advance_clock(self, seconds: float) -> dt.datetime:
        with self._lock:
            try:
                return self._clock.advance(seconds)
            except ValueError as exc:
                raise Invalid(str(exc)) from None

    # ============================================================================================
    # shipments
    # ============================================================================================
    def version(self) -> int:
        with self._lock:
            return self._version

    def shipment_key_rows(self) -> Iterator[Mapping[str, Any]]:
        """The states themselves (immutable Mappings over SHIPMENT_KEYS), snapshot at call time."""
        with self._lock:
            return iter(list(self._live.values()))

    def get_shipment(self, shipment_id: int) -> dict[str, Any]:
        return json.loads(self._document_json(shipment_id))

    def get_base_shipment(self, shipment_id: int) -> dict[str, Any]:
        return base_shipment(self.get_shipment(shipment_id))

    def get_events(self, shipment_id: int) -> list[dict[str, Any]]:
        return self.get_shipment(shipment_id)["events"]

    def get_air_main_carriage(self, shipment_id: int) -> list[dict[str, Any]]:
        doc = self.get_shipment(shipment_id)
        if doc["mode_of_transport"] != "AIR":
            return []
        return carriage_subset(doc["main_carriage"]["carriage_legs"], AIR_LEG_FIELDS)

    def get_sea_main_carriage(self, shipment_id: int) -> list[dict[str, Any]]:
        doc = self.get_shipment(shipment_id)
        if doc["mode_of_transport"] != "SEA":
            return []
        return carriage_subset(doc["main_carriage"]["carriage_legs"], SEA_LEG_FIELDS)

    def create_event(self, shipment_id: int, event_type: str, event: Mapping[str, Any]) -> dict[str, Any]:
        _check_type(event_type)
        code = _checked_body(event).get("event")
        if code not in EVENT_CODES:
            raise Invalid(f"event {code!r} is not an event code; allowed: {', '.join(EVENT_CODES)}")
        stored = {"event": code, "type": event_type, "shipment_id": shipment_id, "date_time": None, "location": None}
        stored.update(_event_changes(shipment_id, event_type, event))
        with self._lock:
            self._require(shipment_id)
            if self._find_event(shipment_id, code, event_type) is not None:
                raise Conflict(f"event {code} ({event_type}) already exists for shipment {shipment_id}")
            self._set_override(shipment_id, (code, event_type), stored)
        return copy.deepcopy(stored)

    def update_event(
        self, shipment_id: int, code: str, event_type: str, event: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Fields not sent keep their value (A28); the path's code, the query's type and id win."""
        _check_type(event_type)
        if code not in EVENT_CODES:
            raise Invalid(f"event {code!r} is not an event code; allowed: {', '.join(EVENT_CODES)}")
        if _checked_body(event).get("event") not in (None, code):
            raise Invalid(f"body event {event.get('event')!r} differs from the path's {code}")
        changes = _event_changes(shipment_id, event_type, event)
        with self._lock:
            self._require(shipment_id)
            existing = self._find_event(shipment_id, code, event_type)
            if existing is None:
                raise NotFound(f"event {code} ({event_type}) does not exist for shipment {shipment_id}")
            stored = {**existing, **changes, "event": code, "type": event_type, "shipment_id": shipment_id}
            self._set_override(shipment_id, (code, event_type), stored)
        return copy.deepcopy(stored)

    def _find_event(self, shipment_id: int, code: str, event_type: str) -> dict[str, Any] | None:
        return next((e for e in self.get_events(shipment_id) if (e["event"], e["type"]) == (code, event_type)), None)

    def _set_override(self, shipment_id: int, key: EventKey, event: dict[str, Any]) -> None:
        self._overrides.setdefault(shipment_id, {})[key] = event
        state = self._live[shipment_id]
        self._live[shipment_id] = touched(state, self._stamp([state.modified]))
        self._version += 1

    # ============================================================================================
    # memos and code conversions
    # ============================================================================================
    def memo_rows(self) -> Iterator[dict[str, Any]]:
        with self._lock:
            return iter([self._memo_row(memo_id, entry) for memo_id, entry in self._memos.items()])

    def memo_rows_of(self, client: str, shipment_number: str) -> list[dict[str, Any]]:
        with self._lock:
            shipment_id = self._by_number.get((client, shipment_number))
            memo_ids = self._memos_by_shipment.get(shipment_id, []) if shipment_id is not None else []
            return [self._memo_row(memo_id, self._memos[memo_id]) for memo_id in memo_ids]

    def get_memo(self, memo_id: int) -> dict[str, Any]:
        with self._lock:
            entry = self._memos.get(memo_id)
            if entry is None:
                raise NotFound(f"memo line {memo_id} not found")
            return self._memo_row(memo_id, entry)

    def _memo_row(self, memo_id: int, entry: tuple[int, int, str]) -> dict[str, Any]:
        state = self._live[entry[0]]
        return {"id": memo_id, "client": state.client, "memo": entry[2], "shipment_number": state.shipment_number,
                "running_number": entry[1]}

    def code_conversion_rows(self) -> Iterator[dict[str, Any]]:
        return iter([dict(r) for r in self._code_conversions])

    def get_code_conversion(self, conversion_id: int) -> dict[str, Any]:
        for record in self._code_conversions:
            if record["id"] == conversion_id:
                return dict(record)
        raise NotFound(f"code conversion {conversion_id} not found")

    # ============================================================================================
    # E-File
    # ============================================================================================
    def store_efile(self, efile: Mapping[str, Any]) -> dict[str, Any]:
        with self._lock:
            return self._efiles.store(efile)

    def get_efile(self, efile_id: int, cascade: bool = False) -> dict[str, Any]:
        with self._lock:
            return self._efiles.get(efile_id, cascade)

    def delete_efile(self, efile_id: int) -> dict[str, Any]:
        with self._lock:
            return self._efiles.delete(efile_id)

    def efile_rows(self, shipment_ids: Iterable[int] | None = None) -> Iterator[dict[str, Any]]:
        """E-Files with ``references`` (for the lookup), without ``document``, ``roles`` null; with
        ``shipment_ids``, only (a superset of) those referencing one of them."""
        with self._lock:
            return self._efiles.rows(shipment_ids)

    def efile_count(self) -> int:
        with self._lock:
            return self._efiles.count()

    def get_efile_references(self, efile_id: int) -> list[dict[str, Any]]:
        with self._lock:
            return self._efiles.references(efile_id)

    def add_efile_reference(self, efile_id: int, reference: Mapping[str, Any]) -> None:
        with self._lock:
            self._efiles.add_reference(efile_id, reference)

    def delete_efile_reference(self, efile_id: int, reference: Mapping[str, Any]) -> None:
        with self._lock:
            self._efiles.delete_reference(efile_id, reference)

    def get_efile_roles(self, efile_id: int) -> list[dict[str, Any]]:
        with self._lock:
            return self._efiles.roles(efile_id)

    def add_efile_role(self, efile_id: int, role: str) -> None:
        with self._lock:
            self._efiles.add_role(efile_id, role)

    def delete_efile_role(self, efile_id: int, role: Mapping[str, Any]) -> None:
        with self._lock:
            self._efiles.delete_role(efile_id, role)

    # ============================================================================================
    # webhook
    # ============================================================================================
    def record_webhook(self, payload: Mapping[str, Any]) -> int:
        if not isinstance(payload, Mapping):
            raise Invalid("the webhook payload must be a JSON object")
        with self._lock:
            webhook_id = len(self._webhooks) + 1
            self._webhooks.append((webhook_id, copy.deepcopy(dict(payload))))
            return webhook_id

    def webhook_payloads(self) -> list[dict[str, Any]]:
        """Every recorded webhook payload, oldest first, as ``{"id": ..., "payload": ...}``."""
        with self._lock:
            return [{"id": i, "payload": copy.deepcopy(p)} for i, p in self._webhooks]

    # ============================================================================================
    # change over time
    # ============================================================================================
    def modify_shipments(self, count: int) -> list[int]:
        """Change ``count`` live shipments (open ones first), all stamped with one second (A8)."""
        _check_count(count)
        with self._lock:
            rng = self._mutation_rng
            open_ids = [i for i, s in self._live.items() if not s.closed]
            pool = open_ids if len(open_ids) >= count else list(self._live)
            chosen = sorted(rng.sample(pool, min(count, len(pool))))
            stamp = self._stamp([self._live[i].modified for i in chosen])
            for shipment_id in chosen:
                state = self._live[shipment_id]
                self._live[shipment_id] = mutated(state, identity_of(self.seed, state), stamp, rng)
                if rng.random() < 0.25:
                    self._add_memo(shipment_id, rng.choice(cat.MEMO_TEXTS))
                if self._documents and self._document_rng.random() < DOCUMENT_ON_CHANGE_SHARE:
                    self._add_document(self._live[shipment_id], stamp)
            self._version += 1
            return chosen

    def create_shipments(self, count: int) -> list[int]:
        """New shipments with ids above every id issued so far, created now, modified at one new stamp (A8)."""
        _check_count(count)
        with self._lock:
            self._check_id_room(count)
            now = self._clock.epoch()
            stamp = self._stamp([])
            rng = self._mutation_rng
            created = []
            for _ in range(count):
                shipment_id = self._next_id
                self._next_id += 1
                ident = derive_identity(self.seed, shipment_id, now)
                state = new_state(self.seed, ident, now, stamp, 1, self._next_running(ident.client), self._clock.tz)
                self._add_state(state)
                if rng.random() < self._memo_share / 2:
                    self._add_memo(shipment_id, rng.choice(cat.MEMO_TEXTS))
                self._add_initial_documents(state)
                created.append(shipment_id)
            self._version += 1
            return created

    def delete_shipments(self, count: int) -> list[int]:
        """Delete ``count`` random live shipments (with their memo lines and event overrides)."""
        _check_count(count)
        with self._lock:
            chosen = sorted(self._mutation_rng.sample(list(self._live), min(count, len(self._live))))
            return self.delete_shipment_ids(chosen)

    def delete_shipment_ids(self, shipment_ids: list[int]) -> list[int]:
        """Delete exactly these shipments. Raises NotFound (and deletes none) for an unknown id."""
        with self._lock:
            ids = list(dict.fromkeys(shipment_ids))
            for shipment_id in ids:
                self._require(shipment_id)
            for shipment_id in ids:
                state = self._live.pop(shipment_id)
                del self._by_number[(state.client, state.shipment_number)]
                self._deleted.add(shipment_id)
                self._overrides.pop(shipment_id, None)
                for memo_id in self._memos_by_shipment.pop(shipment_id, []):
                    del self._memos[memo_id]
            self._version += 1
            return ids

    def touch_shipments(self, shipment_ids: list[int]) -> None:
        """A new version of each, all stamped with one second (A8)."""
        with self._lock:
            ids = list(dict.fromkeys(shipment_ids))
            states = [self._require(shipment_id) for shipment_id in ids]
            stamp = self._stamp([state.modified for state in states])
            for state in states:
                self._live[state.id] = touched(state, stamp)
            self._version += 1

    def _stamp(self, previous: list[int]) -> int:
        """Last-modified second of one change of shipments last modified at ``previous`` (A8).

        :func:`change_stamp`, but never earlier than any stamp issued before: a change stamped
        after a burst that ran ahead of a standing clock is not stamped back at the clock.
        """
        self._last_stamp = max(self._last_stamp, change_stamp(self._clock.epoch(), previous))
        return self._last_stamp

    # ============================================================================================
    # helpers for tests (compare a warehouse with the source)
    # ============================================================================================
    def live_shipment_ids(self) -> list[int]:
        with self._lock:
            return sorted(self._live)

    def deleted_shipment_ids(self) -> list[int]:
        with self._lock:
            return sorted(self._deleted)

    def snapshot_ids_and_versions(self) -> dict[int, tuple[int, str]]:
        """id -> (version, last_modified_date_time) of every live shipment."""
        with self._lock:
            return {i: (s.version, self._clock.iso(s.modified)) for i, s in sorted(self._live.items())}

    def shipment_state(self, shipment_id: int) -> ShipmentState:
        """The compact state (also the lookup key row) of a live shipment."""
        with self._lock:
            return self._require(shipment_id)

    def expected_documents(self) -> Iterator[dict[str, Any]]:
        """Full documents of every live shipment at call time, by id (generated lazily)."""
        with self._lock:
            ids = sorted(self._live)
            snapshot = [self._snapshot(i) for i in ids]
        for state, memos, overrides in snapshot:
            yield json.loads(self._render(state, memos, overrides))

    def cache_info(self) -> dict[str, int]:
        with self._lock:
            return {"documents": len(self._cache), "max": self._cache_size}

    # ============================================================================================
    # internals
    # ============================================================================================
    def _require(self, shipment_id: int) -> ShipmentState:
        state = self._live.get(shipment_id) if isinstance(shipment_id, int) else None
        if state is None:
            raise NotFound(f"shipment {shipment_id} not found")
        return state

    def _snapshot(self, shipment_id: int) -> tuple[ShipmentState, list[dict[str, Any]], dict[EventKey, Any]]:
        state = self._require(shipment_id)
        memos = [self._memo_row(m, self._memos[m]) for m in self._memos_by_shipment.get(shipment_id, [])]
        return state, memos, copy.deepcopy(self._overrides.get(shipment_id, {}))

    def _render(self, state: ShipmentState, memos: list[dict[str, Any]], overrides: dict[EventKey, Any]) -> str:
        doc = build_document(self.seed, state, memos, overrides, self._clock.iso)
        return json.dumps(doc, ensure_ascii=False, separators=(",", ":"))

    def _document_json(self, shipment_id: int) -> str:
        with self._lock:
            state, memos, overrides = self._snapshot(shipment_id)
            key = (shipment_id, state.version)
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
                return cached
        text = self._render(state, memos, overrides)
        with self._lock:
            self._cache[key] = text
            self._cache.move_to_end(key)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return text


def _check_type(event_type: str) -> None:
    if event_type not in EVENT_TYPES:
        raise Invalid(f"type {event_type!r} must be ESTIMATED or ACTUAL")


def _check_count(count: int) -> None:
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise Invalid(f"count must be a non-negative integer, got {count!r}")


def bulk_import_size(count: int) -> int:
    """Shipments of the nightly bulk import (one created and last-modified second) in a store of ``count``."""
    grown = min(BULK_IMPORT_MAX, round(count * BULK_IMPORT_SHARE))
    return min(max(1, count // 3), max(BULK_IMPORT_MIN, grown))


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
        if not isinstance(item, Mapping) or item.get("type") not in LOCATION_CODE_TYPES or not isinstance(
            item.get("code"), str
        ):
            raise Invalid(
                f"location.codes items need type (one of {', '.join(sorted(LOCATION_CODE_TYPES))}) and code (string)"
            )
    return location
