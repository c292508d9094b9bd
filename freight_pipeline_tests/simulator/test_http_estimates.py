"""Estimates revised as shipments progress, over HTTP: several moves (later and earlier) before the
actual, the actual close to the last estimate, the same for a seed; and the milestone hook."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from freight_pipeline.client.tls import default_ssl_context
from freight_pipeline.datetimes import parse_datetime_object
from freight_pipeline.simulator.data_estimates import MIN_LEAD
from freight_pipeline.simulator.data_identity import derive_identity
from freight_pipeline.simulator.server import RunningSimulator
from freight_pipeline.simulator.store import SimulatorStore
from freight_pipeline_tests.simulator.conftest import authed_client

ARRIVALS = ("POD_ARRIVAL", "DELIVERY_DATE")
HALF_DAY = 12 * 3600
UTC = dt.UTC
# the actual's distance from the last estimate stays within this many hours, by mode
SPREAD_LIMIT_HOURS = {"SEA": 96, "RL": 96, "AIR": 24, "RD": 24}

Sighting = dict[str, Any]
"""One read of a shipment: last_modified, mode, and per arrival milestone its estimate, actual and leg."""


def instant(date_time: dict[str, Any] | None) -> dt.datetime | None:
    parsed = parse_datetime_object(date_time)
    return None if parsed is None else parsed.instant


def sighting(doc: dict[str, Any]) -> Sighting:
    """What a full shipment document says about its arrivals (instants in UTC, ISO text)."""
    events = {(e["event"], e["type"]): instant(e["date_time"]) for e in doc["events"]}
    legs = doc["main_carriage"]["carriage_legs"]
    last_leg = legs[-1]["destination"] if legs else None
    arrivals = {}
    for code in ARRIVALS:
        estimate, actual = events.get((code, "ESTIMATED")), events.get((code, "ACTUAL"))
        if estimate is not None:
            arrivals[code] = [estimate.astimezone(UTC).isoformat(), actual and actual.astimezone(UTC).isoformat()]
    leg = None
    if last_leg is not None:
        leg = [(value := instant(last_leg[name])) and value.astimezone(UTC).isoformat()
               for name in ("estimated_datetime", "actual_datetime")]
    return {"id": doc["id"], "mode": doc["mode_of_transport"], "last_modified": doc["last_modified_date_time"],
            "arrivals": arrivals, "last_leg": leg}


def progress(sim: RunningSimulator, steps: int, count: int) -> list[Sighting]:
    """Half a day at a time: advance the clock, modify ``count`` shipments (control API), read each (service API)."""
    sightings = []
    with authed_client(sim) as service:
        for _ in range(steps):
            assert httpx.post(f"{sim.base_url}/_control/clock/advance", params={"seconds": HALF_DAY},
                              verify=default_ssl_context()).status_code == 200
            modified = httpx.post(f"{sim.base_url}/_control/shipments/modify", params={"count": count},
                                  verify=default_ssl_context())
            assert modified.status_code == 200, modified.text
            for shipment_id in modified.json()["ids"]:
                response = service.get(f"/service/shipment/{shipment_id}")
                assert response.status_code == 200, response.text
                sightings.append(sighting(response.json()))
    return sightings


def histories(sightings: list[Sighting]) -> dict[tuple[int, str], dict[str, Any]]:
    """Per (shipment, arrival milestone): the distinct estimates seen before its actual, and the actual."""
    found: dict[tuple[int, str], dict[str, Any]] = {}
    for seen in sightings:
        for code, (estimate, actual) in seen["arrivals"].items():
            history = found.setdefault((seen["id"], code), {"mode": seen["mode"], "estimates": [], "actual": None})
            if history["actual"] is not None:
                continue
            if not history["estimates"] or history["estimates"][-1] != estimate:
                history["estimates"].append(estimate)
            history["actual"] = actual
    return found


@pytest.fixture
def control_factory(sim_factory: Callable[..., RunningSimulator]) -> Callable[[int], RunningSimulator]:
    return lambda seed: sim_factory(store=SimulatorStore(shipments=160, seed=seed), control=True)


def test_estimates_move_both_ways_several_times_before_a_close_actual(
    control_factory: Callable[[int], RunningSimulator],
) -> None:
    sightings = progress(control_factory(7), steps=40, count=20)
    found = histories(sightings)
    arrived = {key: h for key, h in found.items() if h["actual"] is not None and h["estimates"]}
    several = {key: h for key, h in arrived.items() if len(h["estimates"]) >= 4}  # three moves, then the actual
    assert len(several) >= 5, len(several)
    assert {h["mode"] for h in several.values()} >= {"SEA", "AIR"}
    later = earlier = 0
    for history in found.values():
        for before, after in zip(history["estimates"], history["estimates"][1:], strict=False):
            later += after > before
            earlier += after < before
    assert later >= 50 and earlier >= 50, (later, earlier)  # slips and gains, in about equal numbers
    assert 0.33 < later / (later + earlier) < 0.67
    late = early = 0
    for history in arrived.values():
        last, actual = (dt.datetime.fromisoformat(t) for t in (history["estimates"][-1], history["actual"]))
        assert last != actual  # close to the last estimate, never on it
        assert abs(actual - last) < dt.timedelta(hours=SPREAD_LIMIT_HOURS[history["mode"]]), history
        late += actual > last
        early += actual < last
    assert late > 0 and early > 0
    # every read of a modified shipment carries a new last-modified instant, and its main carriage's
    # last leg ends with the POD arrival the events give (estimate and actual)
    stamps: dict[int, str] = {}
    for seen in sightings:
        assert dt.datetime.fromisoformat(seen["last_modified"]) > dt.datetime.fromisoformat(
            stamps.get(seen["id"], "2000-01-01T00:00:00+00:00"))
        stamps[seen["id"]] = seen["last_modified"]
        if seen["mode"] in ("SEA", "AIR") and "POD_ARRIVAL" in seen["arrivals"]:
            assert seen["last_leg"] == seen["arrivals"]["POD_ARRIVAL"], seen


def test_the_same_seed_and_calls_give_the_same_revisions(
    control_factory: Callable[[int], RunningSimulator],
) -> None:
    runs = [json.dumps(progress(control_factory(seed), steps=6, count=20)) for seed in (3, 3, 4)]
    assert runs[0] == runs[1]
    assert runs[0] != runs[2]
    assert any(len(h["estimates"]) >= 2 for h in histories(json.loads(runs[0])).values())  # estimates did move


def _pending_arrival(sim: RunningSimulator, mode: str) -> tuple[int, dt.datetime]:
    """A shipment of ``mode`` whose POD arrival has no actual yet, and its estimate."""
    store = sim.store
    for row in store.reader.shipment_key_rows():
        if row["MODE_OF_TRANSPORT"] != mode:
            continue
        seen = sighting(store.reader.get_shipment(int(row["ID"])))
        estimate, actual = seen["arrivals"].get("POD_ARRIVAL", (None, None))
        if estimate is not None and actual is None:
            return int(row["ID"]), dt.datetime.fromisoformat(estimate)
    raise AssertionError(f"no {mode} shipment on its way")


def test_the_hook_moves_an_estimate_and_an_actual(sim_factory: Callable[..., RunningSimulator]) -> None:
    sim = sim_factory(control=True)
    shipment_id, estimate = _pending_arrival(sim, "SEA")
    url = f"{sim.base_url}/_control/shipments/{shipment_id}/milestone"
    with authed_client(sim) as service:
        def read() -> Sighting:
            response = service.get(f"/service/shipment/{shipment_id}")
            assert response.status_code == 200, response.text
            return sighting(response.json())

        before = read()
        slipped = (estimate + dt.timedelta(hours=30, minutes=10)).astimezone(dt.timezone(dt.timedelta(hours=-5)))
        moved = httpx.post(url, json={"event": "POD_ARRIVAL", "type": "ESTIMATED", "at": slipped.isoformat()})
        assert moved.status_code == 200, moved.text
        now = sim.store.clock.now()
        assert moved.json() == {"id": shipment_id, "event": "POD_ARRIVAL", "type": "ESTIMATED",
                                "at": slipped.isoformat(), "last_modified_date_time": now.isoformat()}
        after = read()
        expected = (estimate + dt.timedelta(hours=30, minutes=10)).astimezone(UTC).isoformat()
        assert after["arrivals"]["POD_ARRIVAL"] == [expected, None]
        assert after["last_leg"] == [expected, None]  # the sea leg's destination follows
        assert after["arrivals"]["DELIVERY_DATE"] == before["arrivals"]["DELIVERY_DATE"]  # nothing else moved
        assert dt.datetime.fromisoformat(after["last_modified"]) > dt.datetime.fromisoformat(before["last_modified"])

        # an actual in the past shows at once; one still to come shows once the clock has passed it
        # and the shipment changed
        arrived = now - dt.timedelta(hours=2)
        assert httpx.post(url, json={"event": "POD_ARRIVAL", "type": "ACTUAL",
                                     "at": arrived.isoformat()}).status_code == 200
        expected_actual = arrived.astimezone(UTC).isoformat()
        assert read()["arrivals"]["POD_ARRIVAL"] == [expected, expected_actual]
        assert read()["last_leg"] == [expected, expected_actual]
        delivered = now + dt.timedelta(days=1)
        assert httpx.post(url, json={"event": "DELIVERY_DATE", "type": "ACTUAL",
                                     "at": delivered.isoformat()}).status_code == 200
        assert read()["arrivals"]["DELIVERY_DATE"][1] is None
        sim.advance_clock(2 * 86400)
        sim.touch_shipments([shipment_id])
        assert read()["arrivals"]["DELIVERY_DATE"][1] == delivered.astimezone(UTC).isoformat()


def test_the_hook_replaces_an_event_written_through_the_interface(
    sim_factory: Callable[..., RunningSimulator],
) -> None:
    sim = sim_factory(control=True)
    shipment_id, estimate = _pending_arrival(sim, "AIR")
    with authed_client(sim) as service:
        written = service.put(f"/service/shipment/{shipment_id}/event/POD_ARRIVAL", params={"type": "ESTIMATED"},
                              json={"date_time": {"date": "2027-01-05", "time": "10:00:00", "zone_offset": "+00:00"}})
        assert written.status_code == 200, written.text
        seen = sighting(service.get(f"/service/shipment/{shipment_id}").json())
        assert seen["arrivals"]["POD_ARRIVAL"] == ["2027-01-05T10:00:00+00:00", None]  # the written event
        assert seen["last_leg"] == [estimate.astimezone(UTC).isoformat(), None]  # (events only: the leg stays)
        at = estimate - dt.timedelta(hours=3)
        stamped = sim.move_milestone(shipment_id, "POD_ARRIVAL", "ESTIMATED", at)
        # the write took the clock's second, so the hook's version one second after it (A8)
        assert stamped == (sim.store.clock.now() + dt.timedelta(seconds=1)).isoformat()
        seen = sighting(service.get(f"/service/shipment/{shipment_id}").json())
    assert seen["arrivals"]["POD_ARRIVAL"] == [at.astimezone(UTC).isoformat(), None]
    assert seen["last_leg"] == [at.astimezone(UTC).isoformat(), None]


@pytest.mark.parametrize(
    ("shipment", "body", "status", "fragment"),
    [
        ("air", {"event": "TRANSSHIPMENT_ARRIVAL", "type": "ESTIMATED", "at": "2026-11-20T08:00:00+00:00"}, 400,
         "has no milestone 'TRANSSHIPMENT_ARRIVAL'"),
        ("air", {"event": "POD_ARRIVAL", "type": "REVISED", "at": "2026-11-20T08:00:00+00:00"}, 400,
         "must be ESTIMATED or ACTUAL"),
        ("air", {"event": "POD_ARRIVAL", "type": "ESTIMATED", "at": "2026-11-20T08:00:00"}, 400,
         "at must be an ISO 8601 date-time with a UTC offset"),
        ("air", {"event": "POD_ARRIVAL", "type": "ESTIMATED", "at": "2026-11-20T08:00:00Z", "why": 1}, 400,
         "unknown: ['why']"),
        ("unknown", {"event": "POD_ARRIVAL", "type": "ESTIMATED", "at": "2026-11-20T08:00:00Z"}, 404, "not found"),
    ],
)
def test_the_hook_refuses_what_it_cannot_do(
    sim_factory: Callable[..., RunningSimulator], shipment: str, body: dict[str, Any], status: int, fragment: str
) -> None:
    sim = sim_factory(control=True)
    shipment_id = _pending_arrival(sim, "AIR")[0] if shipment == "air" else 999_999
    version = sim.store.reader.version()
    response = httpx.post(f"{sim.base_url}/_control/shipments/{shipment_id}/milestone", json=body)
    assert response.status_code == status, response.text
    assert fragment in response.json()["message"]
    assert sim.store.reader.version() == version  # nothing changed


def test_a_revised_estimate_keeps_a_lead_on_the_clock(sim_factory: Callable[..., RunningSimulator]) -> None:
    """An estimate revised close to a late actual is not put before the revision itself."""
    sim = sim_factory(control=True)
    shipment_id, _ = _pending_arrival(sim, "SEA")
    now = sim.store.clock.now()
    sim.move_milestone(shipment_id, "POD_ARRIVAL", "ACTUAL", now + dt.timedelta(hours=1))
    sim.move_milestone(shipment_id, "POD_ARRIVAL", "ESTIMATED", now - dt.timedelta(days=3))
    seen = []
    for _ in range(40):  # modify (all 120 shipments) until the revision touched POD_ARRIVAL
        sim.advance_clock(1)
        sim.modify_shipments(120)
        seen_now = sighting(sim.store.reader.get_shipment(shipment_id))
        estimate, stamp = seen_now["arrivals"]["POD_ARRIVAL"][0], dt.datetime.fromisoformat(seen_now["last_modified"])
        if dt.datetime.fromisoformat(estimate) != now - dt.timedelta(days=3):
            seen.append((dt.datetime.fromisoformat(estimate), stamp))
            break
    assert seen, "the estimate was never revised"
    estimate, stamp = seen[0]
    assert estimate >= stamp + dt.timedelta(seconds=MIN_LEAD)
    assert estimate.timestamp() % 300 == 0


def test_progress_brings_in_due_actuals_in_one_new_version_each(
    sim_factory: Callable[..., RunningSimulator],
) -> None:
    sim = sim_factory(control=True)
    store = sim.store
    with authed_client(sim) as service:
        def actuals(shipment_id: int) -> set[str]:
            events = service.get(f"/service/shipment/{shipment_id}/events").json()
            return {e["event"] for e in events if e["type"] == "ACTUAL"}

        ids = sorted(int(row["ID"]) for row in store.reader.shipment_key_rows())
        before = {i: actuals(i) for i in ids}
        sim.advance_clock(3 * 86400)
        now = int(store.clock.now().timestamp())
        # due: open shipments with a milestone whose actual lies after their last version, up to now
        expected = [state.id for state in store.data.live.values() if not state.closed and any(
            state.modified < m.actual <= now for m in derive_identity(7, state.id, state.created).milestones)]
        response = httpx.post(f"{sim.base_url}/_control/shipments/progress")
        assert response.status_code == 200, response.text
        progressed = response.json()["ids"]
        assert progressed == expected and len(progressed) >= 10
        stamps = {service.get(f"/service/shipment/{i}").json()["last_modified_date_time"] for i in progressed}
        assert stamps == {store.clock.now().isoformat()}  # one second for all of them
        for shipment_id in ids:
            came = actuals(shipment_id) - before[shipment_id]
            assert bool(came) == (shipment_id in progressed), shipment_id
        assert httpx.post(f"{sim.base_url}/_control/shipments/progress").json() == {"ids": []}  # nothing due now


def test_estimates_move_as_the_clock_and_progress_go(sim_factory: Callable[..., RunningSimulator]) -> None:
    """Progress alone, half a day at a time, revises estimates in both directions before the actuals."""
    sim = sim_factory(control=True)
    sightings = []
    with authed_client(sim) as service:
        for _ in range(30):
            sim.advance_clock(HALF_DAY)
            for shipment_id in sim.progress_shipments():
                sightings.append(sighting(service.get(f"/service/shipment/{shipment_id}").json()))
    found = histories(sightings)
    moves = [(after > before) for h in found.values()
             for before, after in zip(h["estimates"], h["estimates"][1:], strict=False)]
    assert sum(moves) >= 10 and len(moves) - sum(moves) >= 10, moves
    assert any(len(h["estimates"]) >= 3 and h["actual"] is not None for h in found.values())
