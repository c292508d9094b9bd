"""A small, predictable in-memory StoreAPI, for tests that say they serve it (``FakeStore(n)``).

Shipment ``i`` (1..n) has key values derived from ``i`` so tests can state expectations
exactly; see :meth:`FakeData.key_row`. It starts instantly, so process tests of the CLI use it.
Like the real store it is made of parts over one shared :class:`FakeData` and its lock.
"""

from __future__ import annotations

import copy
import datetime as dt
import itertools
import threading
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from freight_pipeline.simulator.json_text import dumps
from freight_pipeline.simulator.store_api import (
    EVENT_CODES,
    EVENT_TYPES,
    SHIPMENT_KEYS,
    Conflict,
    Invalid,
    NotFound,
)

OFFSET = dt.timezone(dt.timedelta(hours=1))
START = dt.datetime(2026, 1, 1, 8, 0, 0, tzinfo=OFFSET)
MODES = ("SEA", "AIR", "RD", "RL")


class FakeData:
    """The fake's shipments, events, E-Files, memo lines and code conversions, and its clock."""

    def __init__(self, shipments: int) -> None:
        self.lock = threading.RLock()
        self.version = 0  # bumped on every shipment change (lets the HTTP layer cache lookups)
        self.now = START + dt.timedelta(days=30)
        self._ids = itertools.count(1)
        self.shipments: dict[int, dict[str, Any]] = {}
        self.events: dict[int, list[dict[str, Any]]] = {}
        for _ in range(shipments):
            self.new_shipment(modified=None)
        self.memos = [
            {
                "id": i,
                "client": f"C{i % 3}",
                "memo": f"memo {i}",
                "shipment_number": f"S{(i + 1) // 2:05d}",
                "running_number": (i + 1) % 2 + 1,
            }
            for i in range(1, 21)
        ]
        self.conversions = [
            {
                "id": i,
                "partner": f"P{i % 2}",
                "direction": "I" if i % 2 else "O",
                "code_table": "UNIT",
                "code_type": "PKG",
                "source_code": f"SRC{i}",
                "target_code": f"TGT{i}",
                "description": None,
                "valid_from": "2025-01-01",
                "last_modified_date_time": "2026-01-01T00:00:00+01:00",
            }
            for i in range(1, 13)
        ]

    def new_shipment(self, modified: dt.datetime | None) -> int:
        sid = next(self._ids)
        self.version += 1
        i = sid
        modified = modified or START + dt.timedelta(hours=i // 4, seconds=i % 4)
        self.shipments[sid] = {
            "id": sid,
            "client": f"C{i % 3}",
            "direction": "I" if i % 2 else "E",
            "mode_of_transport": MODES[i % 4],
            "shipment_number": f"S{i:05d}",
            "house_reference": f"HBL{i:04d}" if i % 5 else None,
            "master_reference": f"MBL{i % 7}",
            "month_of_service": f"2026-{(i % 12) + 1:02d}",
            "foreign_id": f"F-{i}",
            "shipment_closed": i % 3 == 0,
            "created": START - dt.timedelta(days=i),
            "modified": modified,
            "rsn": i * 10,
            "customer_address_type": "DKGPA"[i % 5],
            "customer_address_number": 1000 + i % 10,
            "address_references": (f"REF-{i}", f"PO{i % 4}"),
        }
        self.events[sid] = []
        return sid

    def key_row(self, s: dict[str, Any]) -> dict[str, Any]:
        modified: dt.datetime = s["modified"]
        row = {
            "ID": s["id"],
            "HBL": s["house_reference"],
            "MBL": s["master_reference"],
            "FILENUMBER": s["shipment_number"],
            "SHIPMENT_NUMBER": s["shipment_number"],
            "SHIPMENT_ID": s["foreign_id"],
            "ADDRESS_REFERENCE": s["address_references"],
            "DIRECTION": s["direction"],
            "MODE_OF_TRANSPORT": s["mode_of_transport"],
            "MONTH_OF_SERVICE": s["month_of_service"],
            "CLIENT": s["client"],
            "CREATION_DATE": s["created"].date().isoformat(),
            "RUNNING_SEQUENCE_NUMBER": s["rsn"],
            "CUSTOMER_ADDRESS_TYPE": s["customer_address_type"],
            "CUSTOMER_ADDRESS_NUMBER": s["customer_address_number"],
            "SHIPMENT_CLOSED": "J" if s["shipment_closed"] else "N",
            "LAST_MODIFIED_DATE": modified.date().isoformat(),
            "LAST_MODIFIED_TIME": modified.time().isoformat(),
        }
        assert tuple(row) == SHIPMENT_KEYS
        return row

    def get(self, shipment_id: int) -> dict[str, Any]:
        try:
            return self.shipments[shipment_id]
        except KeyError:
            raise NotFound(f"shipment {shipment_id} not found") from None

    def touch(self, shipment_id: int) -> None:
        self.now += dt.timedelta(seconds=1)
        self.shipments[shipment_id]["modified"] = self.now
        self.version += 1


class FakeClock:
    def __init__(self, data: FakeData) -> None:
        self._data = data

    def now(self) -> dt.datetime:
        with self._data.lock:
            return self._data.now

    def advance(self, seconds: float) -> dt.datetime:
        with self._data.lock:
            self._data.now += dt.timedelta(seconds=seconds)
            return self._data.now

    def set_to(self, instant: dt.datetime) -> dt.datetime:
        with self._data.lock:
            if instant < self._data.now:
                raise Invalid("the clock only moves forward")
            self._data.now = instant.astimezone(OFFSET)
            return self._data.now


class FakeReader:
    def __init__(self, data: FakeData) -> None:
        self._data = data

    def version(self) -> int:
        with self._data.lock:
            return self._data.version

    # --- shipments -----------------------------------------------------------------------------------

    def shipment_key_rows(self) -> Iterator[Mapping[str, Any]]:
        with self._data.lock:
            rows = [self._data.key_row(s) for s in self._data.shipments.values()]
        return iter(rows)

    def get_base_shipment(self, shipment_id: int) -> dict[str, Any]:
        with self._data.lock:
            s = self._data.get(shipment_id)
            return {
                "id": s["id"],
                "client": s["client"],
                "direction": s["direction"],
                "shipment_number": s["shipment_number"],
                "house_reference": s["house_reference"],
                "master_reference": s["master_reference"],
                "mode_of_transport": s["mode_of_transport"],
                "shipment_closed": s["shipment_closed"],
                "last_modified_date_time": s["modified"].isoformat(),
                "created_date_time": s["created"].isoformat(),
                "employees": {"created_employee_matchcode": "EMP"},
            }

    def get_shipment(self, shipment_id: int) -> dict[str, Any]:
        with self._data.lock:
            doc = self.get_base_shipment(shipment_id)
            doc["goods"] = [{"id": shipment_id * 10, "description": ["box"], "subgoods": []}]
            doc["addresses"] = [{"qualifier": "CNE", "references": []}]
            doc["events"] = copy.deepcopy(self._data.events[shipment_id])
            return doc

    def get_events(self, shipment_id: int) -> list[dict[str, Any]]:
        with self._data.lock:
            self._data.get(shipment_id)
            return copy.deepcopy(self._data.events[shipment_id])

    def _legs(self, shipment_id: int, mode: str) -> list[dict[str, Any]]:
        with self._data.lock:
            s = self._data.get(shipment_id)
            if s["mode_of_transport"] != mode:
                return []
            return [{"leg_no": 1, "mot": mode if mode == "SEA" else "ANY", "origin": None, "destination": None}]

    def get_air_main_carriage(self, shipment_id: int) -> list[dict[str, Any]]:
        return self._legs(shipment_id, "AIR")

    def get_sea_main_carriage(self, shipment_id: int) -> list[dict[str, Any]]:
        return self._legs(shipment_id, "SEA")

    def record_json(self, endpoint: str, shipment_id: int) -> bytes:
        read = {"shipment": self.get_shipment, "events": self.get_events,
                "airmaincarriage": self.get_air_main_carriage, "seamaincarriage": self.get_sea_main_carriage}[endpoint]
        return dumps(read(shipment_id))

    # --- memos and code conversions -------------------------------------------------------------------

    def memo_rows(self) -> Iterator[dict[str, Any]]:
        return iter([dict(m) for m in self._data.memos])

    def memo_rows_of(self, client: str, shipment_number: str) -> list[dict[str, Any]]:
        return [dict(m) for m in self._data.memos if (m["client"], m["shipment_number"]) == (client, shipment_number)]

    def get_memo(self, memo_id: int) -> dict[str, Any]:
        for m in self._data.memos:
            if m["id"] == memo_id:
                return dict(m)
        raise NotFound(f"memo {memo_id} not found")

    def code_conversion_rows(self) -> Iterator[dict[str, Any]]:
        return iter([dict(c) for c in self._data.conversions])

    def get_code_conversion(self, conversion_id: int) -> dict[str, Any]:
        for c in self._data.conversions:
            if c["id"] == conversion_id:
                return dict(c)
        raise NotFound(f"code conversion {conversion_id} not found")


class FakeEvents:
    def __init__(self, data: FakeData) -> None:
        self._data = data

    def create(self, shipment_id: int, event_type: str, event: Mapping[str, Any]) -> dict[str, Any]:
        with self._data.lock:
            self._data.get(shipment_id)
            code = event.get("event")
            if code not in EVENT_CODES or event_type not in EVENT_TYPES:
                raise Invalid(f"bad event code {code!r} or type {event_type!r}")
            events = self._data.events[shipment_id]
            if any(e["event"] == code and e["type"] == event_type for e in events):
                raise Conflict(f"event {code} {event_type} exists for shipment {shipment_id}")
            created = {**event, "event": code, "type": event_type, "shipment_id": shipment_id}
            events.append(created)
            self._data.touch(shipment_id)
            return copy.deepcopy(created)

    def update(self, shipment_id: int, code: str, event_type: str, event: Mapping[str, Any]) -> dict[str, Any]:
        with self._data.lock:
            self._data.get(shipment_id)
            events = self._data.events[shipment_id]
            for i, existing in enumerate(events):
                if existing["event"] == code and existing["type"] == event_type:
                    updated = {**existing, **event, "event": code, "type": event_type, "shipment_id": shipment_id}
                    events[i] = updated
                    self._data.touch(shipment_id)
                    return copy.deepcopy(updated)
            raise NotFound(f"event {code} {event_type} not found for shipment {shipment_id}")


class FakeEFiles:
    def __init__(self, data: FakeData) -> None:
        self._data = data
        self._efiles: dict[int, dict[str, Any]] = {}
        self._efile_ids = itertools.count(1)
        self._ref_ids = itertools.count(1)

    def _efile(self, efile_id: int) -> dict[str, Any]:
        try:
            return self._efiles[efile_id]
        except KeyError:
            raise NotFound(f"E-File {efile_id} not found") from None

    def _reference(self, ref: Mapping[str, Any]) -> dict[str, Any]:
        return {"id": next(self._ref_ids), "type": ref.get("type", "OTHER"), "value": str(ref.get("value"))}

    def store(self, efile: Mapping[str, Any]) -> dict[str, Any]:
        with self._data.lock:
            eid = next(self._efile_ids)
            stored = {
                "id": eid,
                "file_name": efile.get("file_name"),
                "mime_type": efile.get("mime_type"),
                "description": efile.get("description"),
                "document": efile["document"],
                "created_date_time": self._data.now.isoformat(),
                "references": [self._reference(r) for r in efile.get("references") or []],
                "roles": [{"id": i + 1, "role": r.get("role")} for i, r in enumerate(efile.get("roles") or [])],
            }
            self._efiles[eid] = stored
            return copy.deepcopy(stored)

    def get(self, efile_id: int, cascade: bool = False) -> dict[str, Any]:
        with self._data.lock:
            doc = copy.deepcopy(self._efile(efile_id))
            if not cascade:
                doc["references"] = None
                doc["roles"] = None
            return doc

    def delete(self, efile_id: int) -> dict[str, Any]:
        with self._data.lock:
            self._efile(efile_id)
            return self._efiles.pop(efile_id)

    def rows(self, shipment_ids: Iterable[int] | None = None) -> Iterator[dict[str, Any]]:
        with self._data.lock:
            rows = [{k: v for k, v in copy.deepcopy(e).items() if k != "document"} for e in self._efiles.values()]
        return iter(rows)

    def references(self, efile_id: int) -> list[dict[str, Any]]:
        with self._data.lock:
            return copy.deepcopy(self._efile(efile_id)["references"])

    def add_reference(self, efile_id: int, reference: Mapping[str, Any]) -> None:
        with self._data.lock:
            self._efile(efile_id)["references"].append(self._reference(reference))

    def delete_reference(self, efile_id: int, reference: Mapping[str, Any]) -> None:
        with self._data.lock:
            refs = self._efile(efile_id)["references"]
            keep = [r for r in refs if not (r["id"] == reference.get("id") or r["value"] == reference.get("value"))]
            if len(keep) == len(refs):
                raise NotFound("reference not found")
            refs[:] = keep

    def roles(self, efile_id: int) -> list[dict[str, Any]]:
        with self._data.lock:
            return copy.deepcopy(self._efile(efile_id)["roles"])

    def add_role(self, efile_id: int, role: str) -> None:
        with self._data.lock:
            roles = self._efile(efile_id)["roles"]
            roles.append({"id": len(roles) + 1, "role": role})

    def delete_role(self, efile_id: int, role: Mapping[str, Any]) -> None:
        with self._data.lock:
            roles = self._efile(efile_id)["roles"]
            keep = [r for r in roles if not (r["id"] == role.get("id") or r["role"] == role.get("role"))]
            if len(keep) == len(roles):
                raise NotFound("role not found")
            roles[:] = keep


class FakeWebhooks:
    def __init__(self, data: FakeData) -> None:
        self._data = data
        self.received: list[dict[str, Any]] = []

    def record(self, payload: Mapping[str, Any]) -> int:
        with self._data.lock:
            self.received.append(dict(payload))
            return len(self.received)


class FakeChanges:
    def __init__(self, data: FakeData) -> None:
        self._data = data

    def modify_shipments(self, count: int) -> list[int]:
        with self._data.lock:
            ids = sorted(self._data.shipments)[:count]
            for sid in ids:
                self._data.touch(sid)
            return ids

    def progress_shipments(self) -> list[int]:
        return []  # the fake has no timelines: nothing ever comes due

    def create_shipments(self, count: int) -> list[int]:
        with self._data.lock:
            ids = []
            for _ in range(count):
                self._data.now += dt.timedelta(seconds=1)
                ids.append(self._data.new_shipment(self._data.now))
            return ids

    def delete_shipments(self, count: int) -> list[int]:
        with self._data.lock:
            ids = sorted(self._data.shipments)[-count:] if count else []
            for sid in ids:
                del self._data.shipments[sid]
            self._data.version += 1
            return ids

    def touch_shipments(self, shipment_ids: list[int]) -> None:
        with self._data.lock:
            for sid in shipment_ids:
                self._data.get(sid)
                self._data.touch(sid)


    def move_milestone(self, shipment_id: int, code: str, event_type: str, at: int) -> str:
        """The fake has no timelines: the event (code, type) is set to ``at`` (created if missing)."""
        with self._data.lock:
            self._data.get(shipment_id)
            if code not in EVENT_CODES or event_type not in EVENT_TYPES:
                raise Invalid(f"bad event code {code!r} or type {event_type!r}")
            local = dt.datetime.fromtimestamp(at, OFFSET)
            moved = {"event": code, "type": event_type, "shipment_id": shipment_id, "location": None,
                     "date_time": {"date": local.date().isoformat(), "time": local.strftime("%H:%M:%S"),
                                   "zone_offset": "+01:00"}}
            events = self._data.events[shipment_id]
            events[:] = [e for e in events if (e["event"], e["type"]) != (code, event_type)] + [moved]
            self._data.touch(shipment_id)
            return self._data.now.isoformat()


class FakeSnapshots:
    """The fake keeps no snapshots: a snapshot or reset is refused (400)."""

    def take(self) -> dict[str, Any]:
        raise Invalid("the fake store keeps no snapshots")

    def reset(self) -> dict[str, Any]:
        raise Invalid("the fake store keeps no snapshots")


class FakeStore:
    def __init__(self, shipments: int = 40) -> None:
        data = FakeData(shipments)
        self.clock = FakeClock(data)
        self.reader = FakeReader(data)
        self.events = FakeEvents(data)
        self.efiles = FakeEFiles(data)
        self.webhooks = FakeWebhooks(data)
        self.changes = FakeChanges(data)
        self.snapshots = FakeSnapshots()
