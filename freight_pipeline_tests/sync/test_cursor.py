"""The shipments cursor and the sync settings: parsing, ordering, overlap arithmetic, daylight
saving, bad input."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import re
from pathlib import Path
from typing import Any

import pytest

from freight_pipeline.client.endpoints import Endpoint
from freight_pipeline.client.stats import StatsSnapshot
from freight_pipeline.datetimes import ServiceZone
from freight_pipeline.normalize.tables import FREIGHT_TABLES
from freight_pipeline.sync.changes import Criterion, LookupResult
from freight_pipeline.sync.cursor import (
    BEGINNING,
    CursorError,
    ShipmentKey,
    cursor_offset,
    dst_widening,
    parse_start_cursor,
)
from freight_pipeline.sync.result import StreamResult
from freight_pipeline.sync.settings import SyncSettings
from freight_pipeline.sync.shipments import sync_shipments
from freight_pipeline.warehouse.store import Warehouse

UTC = ServiceZone()
"""Date-times without an offset read as UTC (the simulator's default clock)."""


def test_keys_order_by_date_then_time_then_id() -> None:
    keys = [ShipmentKey("2026-11-02", "00:00:00", 1), ShipmentKey("2026-11-01", "23:59:59", 9),
            ShipmentKey("2026-11-01", "23:59:59", 3)]
    assert sorted(keys) == [keys[2], keys[1], keys[0]]


def test_key_of_a_shipment_uses_the_service_wall_clock() -> None:
    key = ShipmentKey.of_shipment({"id": 7, "last_modified_date_time": "2026-11-01T00:30:05+01:00"}, UTC)
    assert key == ShipmentKey("2026-11-01", "00:30:05", 7)  # not converted to UTC (A8)


def test_key_of_a_shipment_without_last_modified_is_an_error() -> None:
    with pytest.raises(CursorError, match="shipment 7 has no last_modified_date_time"):
        ShipmentKey.of_shipment({"id": 7}, UTC)


def test_overlap_crosses_midnight_and_starts_the_second_at_id_zero() -> None:
    key = ShipmentKey("2026-11-01", "00:05:00", 12345)
    assert key.minus(dt.timedelta(minutes=10)) == ShipmentKey("2026-10-31", "23:55:00", 0)
    assert key.minus(dt.timedelta(0)) < key  # zero overlap still re-reads the rest of the second


def test_cursor_round_trips_through_json() -> None:
    key = ShipmentKey("2026-11-01", "10:15:30", 10042)
    assert ShipmentKey.from_json(key.to_json()) == key


@pytest.mark.parametrize("text", ["", "not json", '{"date": "2026-13-01", "time": "00:00:00"}', '{"time": "x"}'])
def test_a_damaged_stored_cursor_is_reported_with_its_text(text: str) -> None:
    with pytest.raises(CursorError, match="stored shipments cursor"):
        ShipmentKey.from_json(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, BEGINNING),
        ("2026-10-01", ShipmentKey("2026-10-01", "00:00:00", 0)),
        ("2026-10-01 06:30:00", ShipmentKey("2026-10-01", "06:30:00", 0)),
        ("2026-10-01T06:30:00", ShipmentKey("2026-10-01", "06:30:00", 0)),
    ],
)
def test_start_cursor_forms(text: str | None, expected: ShipmentKey) -> None:
    assert parse_start_cursor(text) == expected


def test_a_bad_start_cursor_names_the_value() -> None:
    with pytest.raises(CursorError, match=re.escape("'01.10.2026'")):
        parse_start_cursor("01.10.2026")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"page_size": 0}, "page_size\n  Input should be greater than or equal to 1"),
        ({"page_size": 501}, "page_size\n  Input should be less than or equal to 500"),
        ({"concurrency": 0}, "concurrency\n  Input should be greater than or equal to 1"),
        ({"overlap": dt.timedelta(seconds=-1)}, "overlap\n  Value error, must not be negative"),
        ({"reconcile_interval": dt.timedelta(seconds=-1)}, "reconcile_interval\n  Value error, must not be"),
        ({"fetch_window": 0}, "fetch_window\n  Input should be greater than or equal to 1"),
        ({"initial_concurrency": 0}, "initial_concurrency\n  Input should be greater than or equal to 1"),
        ({"fetch_batch_size": 0}, "fetch_batch_size\n  Input should be greater than or equal to 1"),
        ({"count_attempts": 0}, "count_attempts\n  Input should be greater than or equal to 1"),
    ],
)
def test_settings_reject_bad_values(changes: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SyncSettings(**changes)  # type: ignore[arg-type]


# --- daylight saving: the service's UTC offset steps back and its wall clock repeats an hour -------


def test_a_key_keeps_the_offset_of_its_shipment_outside_its_order() -> None:
    summer = ShipmentKey.of_shipment({"id": 7, "last_modified_date_time": "2026-10-25T02:50:00+02:00"}, UTC)
    winter = ShipmentKey.of_shipment({"id": 7, "last_modified_date_time": "2026-10-25T02:50:00+01:00"}, UTC)
    assert summer.offset == dt.timedelta(hours=2) and winter.offset == dt.timedelta(hours=1)
    assert summer == winter  # same wall-clock key: the lookup compares wall-clock parts


def test_a_cursor_round_trips_its_offset_and_an_old_cursor_reads_without_one() -> None:
    key = ShipmentKey("2026-10-25", "02:50:00", 10042, dt.timedelta(hours=2))
    assert json.loads(key.to_json()) == {"date": "2026-10-25", "time": "02:50:00", "id": 10042, "offset": "+02:00"}
    assert ShipmentKey.from_json(key.to_json()).offset == dt.timedelta(hours=2)
    old = ShipmentKey.from_json('{"date": "2026-10-25", "id": 10042, "time": "02:50:00"}')
    assert old == key and old.offset is None
    with pytest.raises(CursorError, match="stored shipments cursor"):
        ShipmentKey.from_json('{"date": "2026-10-25", "time": "02:50:00", "offset": "two hours"}')


@pytest.mark.parametrize(
    ("cursor_offset_h", "current_offset_h", "widening_h"),
    [(2, 1, 1), (1, 1, 0), (1, 2, 0), (None, 1, 0), (2, None, 0), (10, -5, 15)],
)
def test_dst_widening_is_the_step_back_of_the_offset(
    cursor_offset_h: int | None, current_offset_h: int | None, widening_h: int
) -> None:
    def hours(h: int | None) -> dt.timedelta | None:
        return None if h is None else dt.timedelta(hours=h)

    cursor = ShipmentKey("2026-10-25", "02:50:00", 1, hours(cursor_offset_h))
    assert dst_widening(cursor, hours(current_offset_h)) == dt.timedelta(hours=widening_h)


def test_a_cursor_written_mid_walk_keeps_the_larger_offset_its_window_covered() -> None:
    after_step = ShipmentKey("2026-10-25", "02:55:00", 5, dt.timedelta(hours=1))
    # The window started from a +02:00 cursor without widening: the repeated hour below it is unread.
    assert cursor_offset(after_step, dt.timedelta(hours=2)) == dt.timedelta(hours=2)
    # The window was widened to the current +01:00: the key's own offset is the truth.
    assert cursor_offset(after_step, dt.timedelta(hours=1)) == dt.timedelta(hours=1)
    assert cursor_offset(after_step, None) == dt.timedelta(hours=1)
    assert cursor_offset(ShipmentKey("2026-10-25", "02:55:00", 5), dt.timedelta(hours=2)) == dt.timedelta(hours=2)


class InMemoryShipments:
    """A ``SourceAPI`` of shipments only, with a lookup that honours the criteria the walk uses
    (AND-ed EQUALS / GT / LE on LAST_MODIFIED_DATE, LAST_MODIFIED_TIME, ID) and ``X-Row-Count``."""

    memo_unordered: str | None = None

    def __init__(self) -> None:
        self.docs: dict[int, dict[str, Any]] = {}
        self.fetched: list[int] = []

    def put(self, shipment_id: int, last_modified: str) -> None:
        self.docs[shipment_id] = {"id": shipment_id, "last_modified_date_time": last_modified}

    @staticmethod
    def _field(doc: dict[str, Any], key: str) -> Any:
        stamp = dt.datetime.fromisoformat(doc["last_modified_date_time"])
        return {"LAST_MODIFIED_DATE": stamp.date().isoformat(), "LAST_MODIFIED_TIME": stamp.time().isoformat(),
                "ID": doc["id"]}[key]

    async def lookup_shipments(
        self, criteria: list[Criterion], order_by: list[str], order_mode: list[str], page_size: int
    ) -> LookupResult:
        def matches(doc: dict[str, Any]) -> bool:
            for c in criteria:
                value = self._field(doc, c["key"])
                wanted = int(c["value"]) if c["key"] == "ID" else c["value"]
                ok = {"EQUALS": value == wanted, "GT": value > wanted, "LE": value <= wanted}[c["match_mode"]]
                if not ok:
                    return False
            return True

        found = [d for d in self.docs.values() if matches(d)]
        for key, mode in reversed(list(zip(order_by, order_mode, strict=True))):
            found.sort(key=lambda d, k=key: self._field(d, k), reverse=mode == "DESC")
        return LookupResult(found[:page_size], len(found))

    async def get_shipment(self, shipment_id: int) -> dict[str, Any]:
        self.fetched.append(shipment_id)
        return dict(self.docs[shipment_id])

    async def get_shipment_records(self, endpoint: Endpoint, shipment_id: int) -> list[dict[str, Any]]:
        return []  # events only: these documents have no mode (no legs) and no client (no memo lookup)

    def request_counts(self) -> tuple[int, int]:
        return 0, 0

    def client_stats(self) -> StatsSnapshot:
        return StatsSnapshot()

    def in_flight_figures(self) -> dict[str, float]:
        return {}


def run_shipments(source: InMemoryShipments, data_dir: Path) -> StreamResult:
    settings = SyncSettings(page_size=2, fetch_batch_size=1, reconcile_interval=None, restore_probe=0)
    with Warehouse(data_dir, FREIGHT_TABLES) as warehouse:
        return asyncio.run(sync_shipments(source, warehouse, settings, "dst-test"))  # type: ignore[arg-type]


def fall_back_scenario(source: InMemoryShipments) -> None:
    """2026-10-25 in a +02:00/+01:00 zone: 03:00+02:00 becomes 02:00+01:00."""
    source.put(1, "2026-10-25T01:30:00+02:00")
    source.put(2, "2026-10-25T02:50:00+02:00")  # 00:50 UTC: the last change before the step


def after_the_step(source: InMemoryShipments) -> None:
    source.put(3, "2026-10-25T02:10:00+01:00")  # 01:10 UTC: after shipment 2, yet 40 wall-clock minutes before it
    source.put(4, "2026-10-25T03:05:00+01:00")  # 02:05 UTC: the newest


def test_a_step_back_of_the_offset_widens_the_next_window_so_the_repeated_hour_is_read(tmp_path: Path) -> None:
    source = InMemoryShipments()
    fall_back_scenario(source)
    first = run_shipments(source, tmp_path)
    assert json.loads(first.cursor_after) == {"date": "2026-10-25", "time": "02:50:00", "id": 2, "offset": "+02:00"}

    after_the_step(source)
    source.fetched.clear()
    second = run_shipments(source, tmp_path)
    assert second.extra["dst_widening_minutes"] == 60
    assert 3 in source.fetched and 4 in source.fetched
    assert json.loads(second.cursor_after) == {"date": "2026-10-25", "time": "03:05:00", "id": 4, "offset": "+01:00"}

    source.fetched.clear()
    third = run_shipments(source, tmp_path)  # the offset is steady again: the usual overlap only
    assert "dst_widening_minutes" not in third.extra and source.fetched == [4]


def test_without_the_offset_an_old_cursor_cannot_see_the_step_back(tmp_path: Path) -> None:
    """What the offset is for: the same runs from a cursor stored before offsets were kept miss shipment 3."""
    source = InMemoryShipments()
    fall_back_scenario(source)
    run_shipments(source, tmp_path)
    with Warehouse(tmp_path, FREIGHT_TABLES) as warehouse:
        warehouse.writes.set_cursor("shipments", '{"date": "2026-10-25", "id": 2, "time": "02:50:00"}', "old-cursor")
    after_the_step(source)
    source.fetched.clear()
    run_shipments(source, tmp_path)
    assert source.fetched == [2, 4]  # the overlap re-read 2; 3 sorts below the window
