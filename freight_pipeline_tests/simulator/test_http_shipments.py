"""Shipment retrieve, events, main carriage, event writes, 404/400/405, and data changes."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from freight_pipeline.simulator.server import RunningSimulator
from freight_pipeline_tests.simulator.conftest import lookup_all

LOOKUP = "/service/shipment/lookup"


def _first_id(sim: RunningSimulator, **match: Any) -> int:
    for row in sorted(sim.store.shipment_key_rows(), key=lambda r: r["ID"]):
        if all(row[k] == v for k, v in match.items()):
            return int(row["ID"])
    pytest.skip(f"no shipment with {match}")


def test_retrieve_full_shipment(shared_sim: RunningSimulator, shared_client: httpx.Client) -> None:
    sid = _first_id(shared_sim)
    response = shared_client.get(f"/service/shipment/{sid}")
    assert response.status_code == 200
    assert response.json() == shared_sim.store.get_shipment(sid)
    assert response.json()["id"] == sid


def test_events_and_carriage(shared_sim: RunningSimulator, shared_client: httpx.Client) -> None:
    sid = _first_id(shared_sim)
    events = shared_client.get(f"/service/shipment/{sid}/events")
    assert events.status_code == 200
    assert events.json() == shared_sim.store.get_events(sid)
    air_id = _first_id(shared_sim, MODE_OF_TRANSPORT="AIR")
    sea_id = _first_id(shared_sim, MODE_OF_TRANSPORT="SEA")
    air = shared_client.get(f"/service/shipment/{air_id}/airmaincarriage")
    assert air.status_code == 200
    assert air.json() == shared_sim.store.get_air_main_carriage(air_id)
    assert shared_client.get(f"/service/shipment/{air_id}/seamaincarriage").json() == []
    sea = shared_client.get(f"/service/shipment/{sea_id}/seamaincarriage")
    assert sea.json() == shared_sim.store.get_sea_main_carriage(sea_id)
    assert shared_client.get(f"/service/shipment/{sea_id}/airmaincarriage").json() == []


@pytest.mark.parametrize(
    "path",
    [
        "/service/shipment/99999999",
        "/service/shipment/99999999/events",
        "/service/shipment/99999999/airmaincarriage",
        "/service/shipment/99999999/seamaincarriage",
    ],
)
def test_unknown_shipment_is_404(shared_client: httpx.Client, path: str) -> None:
    response = shared_client.get(path)
    assert response.status_code == 404
    assert response.json()["status"] == 404


@pytest.mark.parametrize("path", ["/service/shipment/abc", "/service/shipment/1.5/events", "/service/efile/x"])
def test_non_integer_id_is_400(shared_client: httpx.Client, path: str) -> None:
    response = shared_client.get(path)
    assert response.status_code == 400
    assert "must be an integer" in response.json()["message"]


def test_unknown_path_and_wrong_method(shared_client: httpx.Client) -> None:
    response = shared_client.get("/service/nothing/here")
    assert response.status_code == 404
    assert response.json() == {"status": 404, "error": "Not Found", "message": "no such path: /service/nothing/here"}
    assert httpx.get(f"{shared_client.base_url}/nope").status_code == 404  # even without a token
    assert shared_client.get(LOOKUP).status_code == 405
    assert shared_client.delete("/service/shipment/1").status_code == 405
    assert shared_client.get("/service/efile/lookup").status_code == 405


def test_create_and_update_event(sim: RunningSimulator, client: httpx.Client) -> None:
    sid = _first_id(sim)
    existing = {(e["event"], e["type"]) for e in sim.store.get_events(sid)}
    code = next(c for c in ("VGM_CLOSING", "DIFF_BL_DATE", "GATE_OUT", "WAREHOUSE") if (c, "ESTIMATED") not in existing)
    before = sim.store.get_base_shipment(sid)["last_modified_date_time"]
    sim.advance_clock(120)
    event = {
        "event": code,
        "date_time": {"date": "2026-11-02", "time": "10:00:00", "zone_offset": "+01:00"},
        "location": {"codes": [{"type": "UNLOC", "code": "DEHAM"}], "name": "Hamburg"},
    }
    created = client.post(f"/service/shipment/{sid}/event", params={"type": "ESTIMATED"}, json=event)
    assert created.status_code == 201, created.text
    assert created.json()["event"] == code
    assert created.json()["type"] == "ESTIMATED"
    events = client.get(f"/service/shipment/{sid}/events").json()
    assert any(e["event"] == code and e["type"] == "ESTIMATED" for e in events)
    after_create = sim.store.get_base_shipment(sid)["last_modified_date_time"]
    assert after_create > before
    again = client.post(f"/service/shipment/{sid}/event", params={"type": "ESTIMATED"}, json=event)
    assert again.status_code == 409
    sim.advance_clock(120)
    changed = {**event, "date_time": {"date": "2026-11-03", "time": "11:00:00", "zone_offset": "+01:00"}}
    updated = client.put(f"/service/shipment/{sid}/event/{code}", params={"type": "ESTIMATED"}, json=changed)
    assert updated.status_code == 200, updated.text
    assert updated.json()["date_time"]["date"] == "2026-11-03"
    assert sim.store.get_base_shipment(sid)["last_modified_date_time"] > after_create
    missing = client.put(f"/service/shipment/{sid}/event/{code}", params={"type": "ACTUAL"}, json=changed)
    if (code, "ACTUAL") not in existing:
        assert missing.status_code == 404


@pytest.mark.parametrize(
    ("method", "path", "params", "body", "fragment"),
    [
        ("POST", "/service/shipment/{sid}/event", {}, {"event": "PICKUP"}, "type is required"),
        ("POST", "/service/shipment/{sid}/event", {"type": "PLANNED"}, {"event": "PICKUP"}, "bad query parameter type"),
        ("POST", "/service/shipment/{sid}/event", {"type": "ACTUAL"}, {"event": "TELEPORT"}, "event code"),
        ("POST", "/service/shipment/{sid}/event", {"type": "ACTUAL"}, ["PICKUP"], "JSON object"),
        ("PUT", "/service/shipment/{sid}/event/TELEPORT", {"type": "ACTUAL"}, {}, "unknown event code 'TELEPORT'"),
        ("PUT", "/service/shipment/{sid}/event/PICKUP", {}, {}, "type is required"),
        ("PUT", "/service/shipment/{sid}/event/PICKUP", {"type": "ACTUAL"}, {"event": "DISPATCH"}, "differs"),
        ("POST", "/service/shipment/abc/event", {"type": "ACTUAL"}, {"event": "PICKUP"}, "must be an integer"),
    ],
)
def test_bad_event_requests(
    shared_sim: RunningSimulator,
    shared_client: httpx.Client,
    method: str,
    path: str,
    params: dict[str, str],
    body: Any,
    fragment: str,
) -> None:
    url = path.format(sid=_first_id(shared_sim))
    response = shared_client.request(method, url, params=params, json=body)
    assert response.status_code == 400, response.text
    assert fragment in response.json()["message"]


def test_event_for_unknown_shipment_is_404(shared_client: httpx.Client) -> None:
    response = shared_client.post(
        "/service/shipment/99999999/event", params={"type": "ACTUAL"}, json={"event": "PICKUP"}
    )
    assert response.status_code == 404


def _latest(client: httpx.Client) -> list[dict[str, Any]]:
    return client.post(
        LOOKUP,
        json=[],
        params={
            "order_by": ["LAST_MODIFIED_DATE", "LAST_MODIFIED_TIME", "ID"],
            "order_mode": ["DESC", "DESC", "DESC"],
            "page_size": 500,
        },
    ).json()


def test_mutations_move_last_modified_and_show_in_lookups(sim: RunningSimulator, client: httpx.Client) -> None:
    stale = _latest(client)  # a result the server may cache; changes below must invalidate it
    sim.advance_clock(3600)
    now = sim.store.now()
    modified = sim.modify_shipments(3)
    assert len(modified) == 3
    date, time = now.date().isoformat(), now.time().replace(microsecond=0).isoformat()
    found = lookup_all(
        client,
        LOOKUP,
        [
            {"key": "LAST_MODIFIED_DATE", "match_mode": "GE", "value": date},
            {"key": "LAST_MODIFIED_TIME", "match_mode": "GE", "value": time},
        ],
    )
    assert set(modified) <= {s["id"] for s in found}
    assert {s["id"] for s in _latest(client)[:3]} == set(modified) != {s["id"] for s in stale[:3]}
    for sid in modified:
        assert sim.store.get_base_shipment(sid)["last_modified_date_time"] >= now.isoformat()

    sim.advance_clock(60)
    created = sim.create_shipments(2)
    assert {s["id"] for s in _latest(client)[:2]} == set(created)
    assert client.get(f"/service/shipment/{created[0]}").status_code == 200

    total = int(client.post(LOOKUP, json=[]).headers["X-Row-Count"])
    deleted = sim.delete_shipments(1)
    assert int(client.post(LOOKUP, json=[]).headers["X-Row-Count"]) == total - 1
    assert client.get(f"/service/shipment/{deleted[0]}").status_code == 404

    target = sorted(r["ID"] for r in sim.store.shipment_key_rows())[0]
    sim.advance_clock(60)
    sim.touch_shipments([target])
    assert _latest(client)[0]["id"] == target
