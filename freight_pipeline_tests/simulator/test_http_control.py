"""The control surface refuses bodies of the wrong JSON type; an in-process server's clock options."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from freight_pipeline.simulator.config import FaultConfig, SimulatorConfig
from freight_pipeline.simulator.server import RunningSimulator, running_simulator

LOOKUP = "/service/shipment/lookup"


@pytest.fixture
def control(sim_factory: Callable[..., RunningSimulator]) -> RunningSimulator:
    return sim_factory(control=True)


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"paths": "abc"}, "paths must be null or an array of path templates"),
        ({"paths": [LOOKUP, 7]}, "paths must be null or an array"),
        ({"rate_limit_rate": "1"}, "rate_limit_rate must be a number"),
        ({"drop_rate": True}, "drop_rate must be a number"),
        ({"seed": 1.5}, "seed must be an integer"),
        ({"retry_after_s": "3"}, "retry_after_s must be an integer"),
        ({"exempt_auth": "yes"}, "exempt_auth must be true or false"),
        ({"latency_ms": None}, "latency_ms must be a number"),
    ],
)
def test_fault_settings_of_the_wrong_type_are_400(
    control: RunningSimulator, body: dict[str, Any], fragment: str
) -> None:
    before = httpx.get(f"{control.base_url}/_control/faults").json()
    response = httpx.put(f"{control.base_url}/_control/faults", json=body)
    assert response.status_code == 400, response.text
    assert fragment in response.json()["message"]
    assert httpx.get(f"{control.base_url}/_control/faults").json() == before
    assert control.faults.config == FaultConfig()


def test_fault_paths_as_an_array_are_taken(control: RunningSimulator) -> None:
    response = httpx.put(f"{control.base_url}/_control/faults", json={"paths": [LOOKUP], "server_error_rate": 1})
    assert response.status_code == 200, response.text
    assert response.json()["paths"] == [LOOKUP]
    assert control.faults.config.paths == frozenset({LOOKUP})
    headers = {"Authorization": f"Bearer {control.issue_token()}"}
    assert httpx.post(f"{control.base_url}{LOOKUP}", json=[], headers=headers).status_code in (502, 503, 504)
    assert httpx.get(f"{control.base_url}/service/shipment/memo", headers=headers).status_code == 200


@pytest.mark.parametrize(
    "body",
    [{"kind": "drop", "count": "2"}, {"kind": 3}, {"kind": "drop", "path": 5}, {"kind": "server_error", "status": "x"}],
)
def test_scripted_faults_of_the_wrong_type_are_400(control: RunningSimulator, body: dict[str, Any]) -> None:
    response = httpx.post(f"{control.base_url}/_control/faults/script", json=body)
    assert response.status_code == 400, response.text
    assert control.faults.pending_script() == 0


@pytest.mark.parametrize("kind", ["malformed", "drop", "rate_limit"])
def test_a_status_for_a_fault_other_than_server_error_is_400(control: RunningSimulator, kind: str) -> None:
    response = httpx.post(f"{control.base_url}/_control/faults/script", json={"kind": kind, "status": 503})
    assert response.status_code == 400, response.text
    message = response.json()["message"]
    assert "status 503" in message and repr(kind) in message and "'server_error'" in message
    assert control.faults.pending_script() == 0


def test_touch_ids_must_be_integers(control: RunningSimulator) -> None:
    for ids in (["10001"], [True], "10001"):
        response = httpx.post(f"{control.base_url}/_control/shipments/touch", json={"ids": ids})
        assert response.status_code == 400, response.text


def _clock(sim: RunningSimulator) -> str:
    return str(httpx.get(f"{sim.base_url}/_control/clock").json()["now"])


def _wait_for_change(sim: RunningSimulator, first: str, seconds: float) -> str:
    deadline = time.monotonic() + seconds
    now = _clock(sim)
    while now == first and time.monotonic() < deadline:
        time.sleep(0.05)
        now = _clock(sim)
    return now


def test_a_wall_clock_server_moves_with_real_time() -> None:
    config = SimulatorConfig(shipments=20, wall_clock=True, control=True)
    with running_simulator(config) as sim:
        first = _clock(sim)
        assert first.startswith("2026-11-01T08:00:0")
        later = _wait_for_change(sim, first, 5.0)
        assert later > first
        created = sim.create_shipments(1)[0]
        assert sim.store.reader.get_shipment(created)["last_modified_date_time"] >= later


def test_a_frozen_clock_server_only_moves_when_advanced(control: RunningSimulator) -> None:
    first = _clock(control)
    assert first == "2026-11-01T08:00:00+01:00"
    assert _wait_for_change(control, first, 1.2) == first
    advanced = httpx.post(f"{control.base_url}/_control/clock/advance", params={"seconds": 90}).json()["now"]
    assert advanced == "2026-11-01T08:01:30+01:00" == _clock(control)


def test_touch_answers_the_stamp_and_can_set_the_clock_first(control: RunningSimulator) -> None:
    base = f"{control.base_url}/_control"
    shipment_id = control.store.reader.live_shipment_ids()[5]
    plain = httpx.post(f"{base}/shipments/touch", json={"ids": [shipment_id]}).json()
    assert plain == {"ids": [shipment_id], "last_modified_date_time": "2026-11-01T08:00:00+01:00"}
    at = httpx.post(f"{base}/shipments/touch", json={"ids": [shipment_id], "at": "2026-11-01T09:30:00+01:00"}).json()
    assert at["last_modified_date_time"] == "2026-11-01T09:30:00+01:00" == _clock(control)
    assert httpx.post(f"{base}/shipments/touch", json={"ids": []}).json()["last_modified_date_time"] is None
    for body in ({"ids": [shipment_id], "at": "2026-11-01T09:00:00+01:00"}, {"ids": [shipment_id], "at": 3}):
        assert httpx.post(f"{base}/shipments/touch", json=body).status_code == 400, body
    assert httpx.post(f"{base}/shipments/touch", json={"ids": [999_999_999]}).status_code == 404
    moved = httpx.post(f"{base}/clock/set", json={"now": "2026-11-01T10:00:00Z"}).json()["now"]
    assert dt.datetime.fromisoformat(moved) == dt.datetime(2026, 11, 1, 10, tzinfo=dt.UTC)


def test_background_arrival_moves_open_shipments_legs_and_arrival_estimate_but_not_their_stamp(
    control: RunningSimulator
) -> None:
    """``POST /_control/shipments/background-arrival?count=N``, a schedule feed: the main carriage's estimated
    arrival of N open AIR or SEA shipments moves later, in their legs' answer, their document's main carriage and
    their ``POD_ARRIVAL`` estimate; their last-modified instant and the lookup's stamp stay."""
    reader = control.store.reader
    base = f"{control.base_url}/_control"

    def seen(shipment_id: int) -> tuple[Any, ...]:
        document = reader.get_shipment(shipment_id)
        legs = (reader.get_air_main_carriage(shipment_id) if document["mode_of_transport"] == "AIR"
                else reader.get_sea_main_carriage(shipment_id))
        estimate = [e["date_time"] for e in reader.get_events(shipment_id)
                    if (e["event"], e["type"]) == ("POD_ARRIVAL", "ESTIMATED")]
        return (document["last_modified_date_time"], legs[-1]["destination"]["estimated_datetime"],
                document["main_carriage"]["carriage_legs"][-1]["destination"]["estimated_datetime"], estimate)

    candidates = [i for i in reader.live_shipment_ids()
                  if reader.get_shipment(i)["mode_of_transport"] in ("AIR", "SEA")]
    before = {i: seen(i) for i in candidates}
    answered = httpx.post(f"{base}/shipments/background-arrival", params={"count": 3})
    assert answered.status_code == 200
    moved = answered.json()["ids"]
    assert len(moved) == 3 and set(moved) <= set(candidates)
    for shipment_id in candidates:
        after = seen(shipment_id)
        if shipment_id not in moved:
            assert after == before[shipment_id], shipment_id
            continue
        stamp, legs_eta, document_eta, estimate = after
        assert stamp == before[shipment_id][0], "the stamp stays"
        assert legs_eta != before[shipment_id][1] and document_eta == legs_eta != before[shipment_id][2]
        assert estimate != before[shipment_id][3]
        assert not reader.get_shipment(shipment_id)["shipment_closed"]
    assert httpx.post(f"{base}/shipments/background-arrival", params={"count": -1}).status_code == 400
