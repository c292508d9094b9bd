"""A UTC offset that changes at an instant (summer time ending or starting): the clock, every
``*_date_time`` stamped, and the LAST_MODIFIED_DATE / LAST_MODIFIED_TIME lookup keys follow it."""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from freight_pipeline.simulator.clock import OffsetSchedule, SimClock, clock_timezone
from freight_pipeline.simulator.config import SimulatorConfig
from freight_pipeline.simulator.server import RunningSimulator, running_simulator
from freight_pipeline.simulator.store import SimulatorStore
from freight_pipeline_tests.simulator.conftest import SMALL_SHIPMENTS, authed_client, lookup_all

FALL_BACK = (("2026-10-25T03:00:00+02:00", "+01:00"),)
SPRING_FORWARD = (("2026-03-29T02:00:00+01:00", "+02:00"),)
LOOKUP = "/service/shipment/lookup"
DAY = "2026-10-25"


def _instant(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)


@pytest.fixture
def fall_back() -> Iterator[RunningSimulator]:
    """A server whose clock starts at 02:00 (+02:00) an hour before summer time ends."""
    config = SimulatorConfig(
        shipments=SMALL_SHIPMENTS, seed=7, utc_offset="+02:00", offset_changes=FALL_BACK,
        start="2026-10-25T02:00:00+02:00", control=True,
    )
    with running_simulator(config) as sim:
        yield sim


def _control(sim: RunningSimulator, path: str, body: Any = None, **params: Any) -> httpx.Response:
    return httpx.post(f"{sim.base_url}/_control{path}", json=body, params=params)


def _clock(sim: RunningSimulator) -> str:
    return str(httpx.get(f"{sim.base_url}/_control/clock").json()["now"])


def test_the_clock_falls_back(fall_back: RunningSimulator) -> None:
    assert _clock(fall_back) == "2026-10-25T02:00:00+02:00"
    assert _control(fall_back, "/clock/set", {"now": "2026-10-25T02:59:59+02:00"}).json()["now"] == (
        "2026-10-25T02:59:59+02:00"
    )
    assert _control(fall_back, "/clock/advance", seconds=1).json()["now"] == "2026-10-25T02:00:00+01:00"
    assert _control(fall_back, "/clock/advance", seconds=3600).json()["now"] == "2026-10-25T03:00:00+01:00"
    # the clock only moves forward; an instant needs its offset
    for body in ({"now": "2026-10-25T02:30:00+01:00"}, {"now": "2026-10-25T05:00:00"}, {"now": 5}, {}):
        response = _control(fall_back, "/clock/set", body)
        assert response.status_code == 400, body
        assert response.json()["status"] == 400
    assert _clock(fall_back) == "2026-10-25T03:00:00+01:00"
    assert fall_back.set_clock("2026-10-25T02:30:00Z").isoformat() == "2026-10-25T03:30:00+01:00" == _clock(fall_back)


def test_a_shipment_modified_at_0230_before_and_after_the_change(fall_back: RunningSimulator) -> None:
    first, second, between = fall_back.store.reader.live_shipment_ids()[10:13]
    stamps = {}
    for shipment_id, at in (
        (first, "2026-10-25T02:30:00+02:00"),
        (between, "2026-10-25T02:45:00+02:00"),
        (second, "2026-10-25T02:30:00+01:00"),
    ):
        touched = _control(fall_back, "/shipments/touch", {"ids": [shipment_id], "at": at})
        assert touched.status_code == 200, touched.text
        stamps[shipment_id] = touched.json()["last_modified_date_time"]
        assert stamps[shipment_id] == at
    assert _instant(stamps[second]) - _instant(stamps[first]) == dt.timedelta(hours=1)
    assert _instant(stamps[between]) < _instant(stamps[second])

    with authed_client(fall_back) as client:
        for shipment_id, stamp in stamps.items():
            assert client.get(f"/service/shipment/{shipment_id}").json()["last_modified_date_time"] == stamp

        # both 02:30 are found by the wall-clock date and time as stamped
        at_0230 = [
            {"key": "LAST_MODIFIED_DATE", "value": DAY},
            {"key": "LAST_MODIFIED_TIME", "match_mode": "EQUALS", "value": "02:30:00"},
        ]
        found = lookup_all(client, LOOKUP, at_0230)
        assert sorted(s["id"] for s in found) == sorted([first, second])
        assert {s["last_modified_date_time"] for s in found} == {stamps[first], stamps[second]}

        # ordered by the wall-clock parts: 02:30 (twice, by id), then 02:45, an hour of instants earlier
        order = {"order_by": ["LAST_MODIFIED_DATE", "LAST_MODIFIED_TIME"], "order_mode": ["ASC", "ASC"]}
        since_0200 = [
            {"key": "LAST_MODIFIED_DATE", "value": DAY},
            {"key": "LAST_MODIFIED_TIME", "match_mode": "GE", "value": "02:00:00"},
        ]
        walked = [s["id"] for s in lookup_all(client, LOOKUP, since_0200, **order)]
        assert walked == [*sorted([first, second]), between]
        later = [{"key": "LAST_MODIFIED_DATE", "value": DAY},
                 {"key": "LAST_MODIFIED_TIME", "match_mode": "GT", "value": "02:30:00"}]
        assert [s["id"] for s in lookup_all(client, LOOKUP, later)] == [between]


def test_everything_stamped_after_the_change_has_the_new_offset(fall_back: RunningSimulator) -> None:
    shipment_id = fall_back.store.reader.live_shipment_ids()[20]
    with authed_client(fall_back) as client:
        before = client.get(f"/service/shipment/{shipment_id}").json()["last_modified_date_time"]
        assert before.endswith("+02:00")
        fall_back.set_clock("2026-10-25T02:10:00+01:00")

        # an event written through the interface moves last-modified, stamped in +01:00
        codes = {(e["event"], e["type"]) for e in client.get(f"/service/shipment/{shipment_id}/events").json()}
        code = next(c for c in ("VGM_CLOSING", "DIFF_BL_DATE", "GATE_OUT") if (c, "ESTIMATED") not in codes)
        created = client.post(f"/service/shipment/{shipment_id}/event", params={"type": "ESTIMATED"},
                              json={"event": code})
        assert created.status_code == 201, created.text
        assert client.get(f"/service/shipment/{shipment_id}").json()["last_modified_date_time"] == (
            "2026-10-25T02:10:00+01:00"
        )

        new_id = _control(fall_back, "/shipments/create", count=1).json()["ids"][0]
        new = client.get(f"/service/shipment/{new_id}").json()
        assert new["created_date_time"] == "2026-10-25T02:10:00+01:00"
        assert _instant(new["last_modified_date_time"]) >= _instant(new["created_date_time"])
        assert new["last_modified_date_time"].endswith("+01:00")
        by_creation = [{"key": "CREATION_DATE", "value": DAY}, {"key": "ID", "value": str(new_id)}]
        assert [s["id"] for s in lookup_all(client, LOOKUP, by_creation)] == [new_id]

        document = base64.b64encode(b"%PDF-1.4 offset").decode()
        stored = client.post("/service/efile", json={"document": document, "references": []}).json()
        assert stored["created_date_time"] == "2026-10-25T02:10:00+01:00"


def test_the_spring_forward_skips_an_hour_of_wall_clock() -> None:
    store = SimulatorStore(
        shipments=30, seed=5, start=dt.datetime(2026, 3, 29, 1, 59, 0), utc_offset="+01:00",
        offset_changes=SPRING_FORWARD,
    )
    assert store.clock.now().isoformat() == "2026-03-29T01:59:00+01:00"  # a naive start is read in the schedule
    shipment_id = store.reader.live_shipment_ids()[0]
    store.clock.advance(30)
    store.changes.touch_shipments([shipment_id])
    assert store.reader.get_shipment(shipment_id)["last_modified_date_time"] == "2026-03-29T01:59:30+01:00"
    assert store.clock.advance(60).isoformat() == "2026-03-29T03:00:30+02:00"
    store.changes.touch_shipments([shipment_id])
    row = store.reader.shipment_state(shipment_id)
    assert (row["LAST_MODIFIED_DATE"], row["LAST_MODIFIED_TIME"]) == ("2026-03-29", "03:00:30")
    assert store.reader.get_shipment(shipment_id)["last_modified_date_time"] == "2026-03-29T03:00:30+02:00"


def test_the_offset_schedule_reads_wall_times_both_ways() -> None:
    zone = clock_timezone("+02:00", FALL_BACK)
    assert isinstance(zone, OffsetSchedule)
    change = _instant("2026-10-25T03:00:00+02:00")
    for halves in range(-3, 4):
        instant = change + dt.timedelta(minutes=30 * halves)
        local = instant.astimezone(zone)  # compared as timestamps: PEP 495 keeps a repeated wall time unequal
        assert local.timestamp() == instant.timestamp()
        assert local.utcoffset() == dt.timedelta(hours=2 if instant < change else 1)
        assert local.fold == (1 if change <= instant < change + dt.timedelta(hours=1) else 0)
    repeated = dt.datetime(2026, 10, 25, 2, 30, tzinfo=zone)
    assert repeated.utcoffset() == dt.timedelta(hours=2)
    assert repeated.replace(fold=1).utcoffset() == dt.timedelta(hours=1)
    gap = dt.datetime(2026, 3, 29, 2, 30, tzinfo=clock_timezone("+01:00", SPRING_FORWARD))
    assert (gap.utcoffset(), gap.replace(fold=1).utcoffset()) == (dt.timedelta(hours=1), dt.timedelta(hours=2))
    # no change: the fixed offset of old
    assert clock_timezone("+01:00") == dt.timezone(dt.timedelta(hours=1))
    clock = SimClock(None, "+01:00")
    assert clock.now().isoformat() == "2026-11-01T08:00:00+01:00"


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ((("2026-10-25T03:00:00", "+01:00"),), "with a UTC offset"),
        ((("2026-10-25T03:00:00+02:00", "+1"),), "+1"),
        ((("2026-10-25T03:00:00+02:00", "+01:00"), ("2026-03-29T02:00:00+01:00", "+02:00")), "in time order"),
        ((("2026-10-25T03:00:00+02:00",),), "must be (instant, offset)"),
    ],
)
def test_bad_offset_changes_are_refused(changes: Any, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment.replace("+", r"\+").replace("(", r"\(").replace(")", r"\)")):
        SimulatorConfig(utc_offset="+02:00", offset_changes=changes)
    with pytest.raises(ValueError, match="start must be an ISO 8601"):
        SimulatorConfig(start="soon")
