"""The shipments cursor and the sync settings: parsing, ordering, overlap arithmetic, bad input."""

from __future__ import annotations

import datetime as dt
import re

import pytest

from freight_pipeline.sync.cursor import BEGINNING, CursorError, ShipmentKey, parse_start_cursor
from freight_pipeline.sync.settings import SyncSettings


def test_keys_order_by_date_then_time_then_id() -> None:
    keys = [ShipmentKey("2026-11-02", "00:00:00", 1), ShipmentKey("2026-11-01", "23:59:59", 9),
            ShipmentKey("2026-11-01", "23:59:59", 3)]
    assert sorted(keys) == [keys[2], keys[1], keys[0]]


def test_key_of_a_shipment_uses_the_service_wall_clock() -> None:
    key = ShipmentKey.of_shipment({"id": 7, "last_modified_date_time": "2026-11-01T00:30:05+01:00"})
    assert key == ShipmentKey("2026-11-01", "00:30:05", 7)  # not converted to UTC (A8)


def test_key_of_a_shipment_without_last_modified_is_an_error() -> None:
    with pytest.raises(CursorError, match="shipment 7 has no last_modified_date_time"):
        ShipmentKey.of_shipment({"id": 7})


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
        ({"page_size": 0}, "page_size must be between 1 and 500"),
        ({"page_size": 501}, "page_size must be between 1 and 500"),
        ({"concurrency": 0}, "concurrency must be at least 1"),
        ({"overlap": dt.timedelta(seconds=-1)}, "overlap must not be negative"),
        ({"reconcile_interval": dt.timedelta(seconds=-1)}, "reconcile_interval must not be negative"),
        ({"detail_batch_size": 0}, "detail_batch_size must be at least 1"),
    ],
)
def test_settings_reject_bad_values(changes: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SyncSettings(**changes)  # type: ignore[arg-type]
