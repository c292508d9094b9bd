"""Shipment retrieve, events, main carriage, event writes, 404/400/405, and data changes."""

from __future__ import annotations

import datetime as dt
from typing import Any

import httpx
import pytest

from freight_pipeline.simulator.generator import base_shipment
from freight_pipeline.simulator.json_text import dumps
from freight_pipeline.simulator.server import RunningSimulator
from freight_pipeline.simulator.store_reads import RECORD_ANSWERS
from freight_pipeline_tests.simulator.conftest import lookup_all

LOOKUP = "/service/shipment/lookup"
EVENT = {
    "date_time": {"date": "2026-11-02", "time": "10:00:00", "zone_offset": "+01:00"},
    "location": {"codes": [{"type": "UNLOC", "code": "DEHAM"}], "name": "Hamburg"},
}


def _first_id(sim: RunningSimulator, **match: Any) -> int:
    for row in sorted(sim.store.reader.shipment_key_rows(), key=lambda r: r["ID"]):
        if all(row[k] == v for k, v in match.items()):
            return int(row["ID"])
    pytest.fail(f"the seeded simulator has no shipment with {match}")


def test_retrieve_full_shipment(shared_sim: RunningSimulator, shared_client: httpx.Client) -> None:
    sid = _first_id(shared_sim)
    response = shared_client.get(f"/service/shipment/{sid}")
    assert response.status_code == 200
    assert response.json() == shared_sim.store.reader.get_shipment(sid)
    assert response.json()["id"] == sid


def test_events_and_carriage(shared_sim: RunningSimulator, shared_client: httpx.Client) -> None:
    sid = _first_id(shared_sim)
    events = shared_client.get(f"/service/shipment/{sid}/events")
    assert events.status_code == 200
    assert events.json() == shared_sim.store.reader.get_events(sid)
    air_id = _first_id(shared_sim, MODE_OF_TRANSPORT="AIR")
    sea_id = _first_id(shared_sim, MODE_OF_TRANSPORT="SEA")
    air = shared_client.get(f"/service/shipment/{air_id}/airmaincarriage")
    assert air.status_code == 200
    assert air.json() == shared_sim.store.reader.get_air_main_carriage(air_id)
    assert shared_client.get(f"/service/shipment/{air_id}/seamaincarriage").json() == []
    sea = shared_client.get(f"/service/shipment/{sea_id}/seamaincarriage")
    assert sea.json() == shared_sim.store.reader.get_sea_main_carriage(sea_id)
    assert shared_client.get(f"/service/shipment/{sea_id}/airmaincarriage").json() == []


@pytest.mark.parametrize("endpoint", sorted(RECORD_ANSWERS))
def test_a_record_endpoint_answers_the_json_its_reader_reads(
    endpoint: str, shared_sim: RunningSimulator, shared_client: httpx.Client
) -> None:
    """Each of a shipment's record endpoints answers, byte for byte, the JSON of what the store's reader reads
    (written once per version of the shipment), for a shipment of every mode of transport."""
    reader = shared_sim.store.reader
    read = {"shipment": reader.get_shipment, "events": reader.get_events,
            "airmaincarriage": reader.get_air_main_carriage, "seamaincarriage": reader.get_sea_main_carriage}[endpoint]
    suffix = "" if endpoint == "shipment" else f"/{endpoint}"
    modes = sorted({row["MODE_OF_TRANSPORT"] for row in reader.shipment_key_rows()})
    assert {"AIR", "SEA"} < set(modes)
    for mode in modes:
        sid = _first_id(shared_sim, MODE_OF_TRANSPORT=mode)
        response = shared_client.get(f"/service/shipment/{sid}{suffix}")
        assert response.status_code == 200, response.text
        assert response.headers["content-type"] == "application/json"
        assert response.content == dumps(read(sid)) == reader.record_json(endpoint, sid), (mode, endpoint)


def test_a_lookup_row_is_the_base_shipment_of_its_document(
    shared_sim: RunningSimulator, shared_client: httpx.Client
) -> None:
    """A shipment's lookup row (written once per version, beside its answers) is its document's base shipment,
    for a shipment of every mode of transport."""
    reader = shared_sim.store.reader
    for mode in sorted({row["MODE_OF_TRANSPORT"] for row in reader.shipment_key_rows()}):
        sid = _first_id(shared_sim, MODE_OF_TRANSPORT=mode)
        lookup = shared_client.post(LOOKUP, json=[{"key": "ID", "match_mode": "EQUALS", "value": str(sid)}])
        assert lookup.json() == [reader.get_base_shipment(sid)] == [base_shipment(reader.get_shipment(sid))], mode


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


def test_unknown_path(shared_client: httpx.Client) -> None:
    response = shared_client.get("/service/nothing/here")
    assert response.status_code == 404
    assert response.json() == {"status": 404, "error": "Not Found", "message": "no such path: /service/nothing/here"}
    assert httpx.get(f"{shared_client.base_url}/nope").status_code == 404  # even without a token


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("GET", "/service/shipment/lookup", {"POST"}),
        ("PUT", "/service/shipment/lookup", {"POST"}),
        ("DELETE", "/service/shipment/lookup", {"POST"}),
        ("GET", "/service/efile/lookup", {"POST"}),
        ("DELETE", "/service/efile/lookup", {"POST"}),
        ("GET", "/service/basicdata/codeconverter/lookup", {"POST"}),
        ("GET", "/service/shipment/memo/lookup", {"POST"}),
        ("POST", "/service/shipment/memo", {"GET", "HEAD"}),
        ("POST", "/service/basicdata/codeconverter", {"GET", "HEAD"}),
        ("GET", "/service/efile", {"POST"}),
        ("GET", "/auth/token", {"POST"}),
        ("DELETE", "/service/shipment/1", {"GET", "HEAD"}),
        ("POST", "/service/shipment/1/events", {"GET", "HEAD"}),
        ("GET", "/service/shipment/1/event/PICKUP", {"PUT"}),
    ],
)
@pytest.mark.parametrize("with_token", [False, True])
def test_wrong_method_is_405_before_authentication(
    shared_sim: RunningSimulator, shared_client: httpx.Client, method: str, path: str, allow: set[str], with_token: bool
) -> None:
    if with_token:
        response = shared_client.request(method, path, json=[])
    else:
        response = httpx.request(method, f"{shared_sim.base_url}{path}", json=[])
    assert response.status_code == 405, response.text
    assert response.json() == {
        "status": 405, "error": "Method Not Allowed", "message": f"method {method} not allowed for {path}"
    }
    assert {m.strip() for m in response.headers["Allow"].split(",")} == allow


def _new_event_code(sim: RunningSimulator, sid: int, event_type: str = "ESTIMATED") -> str:
    existing = {(e["event"], e["type"]) for e in sim.store.reader.get_events(sid)}
    return next(c for c in ("VGM_CLOSING", "DIFF_BL_DATE", "GATE_OUT", "WAREHOUSE") if (c, event_type) not in existing)


def test_create_and_update_event(sim: RunningSimulator, client: httpx.Client) -> None:
    sid = _first_id(sim)
    existing = {(e["event"], e["type"]) for e in sim.store.reader.get_events(sid)}
    code = _new_event_code(sim, sid)
    before = sim.store.reader.get_base_shipment(sid)["last_modified_date_time"]
    sim.advance_clock(120)
    event = {"event": code, **EVENT}
    created = client.post(f"/service/shipment/{sid}/event", params={"type": "ESTIMATED"}, json=event)
    assert created.status_code == 201, created.text
    assert created.json()["event"] == code
    assert created.json()["type"] == "ESTIMATED"
    events = client.get(f"/service/shipment/{sid}/events").json()
    assert any(e["event"] == code and e["type"] == "ESTIMATED" for e in events)
    after_create = sim.store.reader.get_base_shipment(sid)["last_modified_date_time"]
    assert after_create > before
    again = client.post(f"/service/shipment/{sid}/event", params={"type": "ESTIMATED"}, json=event)
    assert again.status_code == 409
    sim.advance_clock(120)
    changed = {**event, "date_time": {"date": "2026-11-03", "time": "11:00:00", "zone_offset": "+01:00"}}
    updated = client.put(f"/service/shipment/{sid}/event/{code}", params={"type": "ESTIMATED"}, json=changed)
    assert updated.status_code == 200, updated.text
    assert updated.json()["date_time"]["date"] == "2026-11-03"
    assert sim.store.reader.get_base_shipment(sid)["last_modified_date_time"] > after_create
    missing = client.put(f"/service/shipment/{sid}/event/{code}", params={"type": "ACTUAL"}, json=changed)
    if (code, "ACTUAL") not in existing:
        assert missing.status_code == 404


def test_event_update_keeps_fields_not_sent(sim: RunningSimulator, client: httpx.Client) -> None:
    sid = _first_id(sim)
    code = _new_event_code(sim, sid)
    url = f"/service/shipment/{sid}/event/{code}"
    created = client.post(f"/service/shipment/{sid}/event", params={"type": "ESTIMATED"}, json={"event": code, **EVENT})
    assert created.status_code == 201, created.text

    rotterdam = {"codes": [{"type": "UNLOC", "code": "NLRTM"}], "name": "Rotterdam"}
    updated = client.put(url, params={"type": "ESTIMATED"}, json={"location": rotterdam})
    assert updated.status_code == 200, updated.text
    assert updated.json() == {**created.json(), "location": rotterdam}

    later = {"date": "2026-11-04", "time": "07:30:00", "zone_offset": "+01:00"}
    updated = client.put(url, params={"type": "ESTIMATED"}, json={"date_time": later, "event": code})
    assert updated.json() == {**created.json(), "location": rotterdam, "date_time": later}
    unchanged = client.put(url, params={"type": "ESTIMATED"}, json={})
    assert unchanged.json() == updated.json()
    cleared = client.put(url, params={"type": "ESTIMATED"}, json={"location": None})
    assert cleared.json() == {**updated.json(), "location": None}
    served = [e for e in client.get(f"/service/shipment/{sid}/events").json() if (e["event"], e["type"]) == (
        code, "ESTIMATED")]
    assert served == [cleared.json()]


def test_event_update_of_a_generated_event_keeps_its_fields(sim: RunningSimulator, client: httpx.Client) -> None:
    sid = _first_id(sim)
    generated = next(e for e in sim.store.reader.get_events(sid)
                     if e["date_time"] is not None and e["location"] is not None)
    url = f"/service/shipment/{sid}/event/{generated['event']}"
    hamburg = EVENT["location"]
    updated = client.put(url, params={"type": generated["type"]}, json={"location": hamburg})
    assert updated.status_code == 200, updated.text
    assert updated.json() == {**generated, "location": hamburg}
    assert updated.json()["date_time"] == generated["date_time"]


@pytest.mark.parametrize(
    ("method", "path", "body", "fragment"),
    [
        ("POST", "/service/shipment/{sid}/event", {"event": "PICKUP", "colour": "red"}, "unknown field(s) ['colour']"),
        ("PUT", "/service/shipment/{sid}/event/PICKUP", {"eventDate": "2026-11-01"}, "unknown field(s) ['eventDate']"),
        ("PUT", "/service/shipment/{sid}/event/PICKUP", {"location": {"city": "Hamburg"}}, "['city'] in location"),
        ("PUT", "/service/shipment/{sid}/event/PICKUP", {"date_time": {"day": "2026-11-01"}}, "['day'] in date_time"),
    ],
)
def test_unknown_event_fields_are_400(
    sim: RunningSimulator, client: httpx.Client, method: str, path: str, body: dict[str, Any], fragment: str
) -> None:
    sid = next(
        int(r["ID"]) for r in sorted(sim.store.reader.shipment_key_rows(), key=lambda r: r["ID"])
        if ("PICKUP", "ESTIMATED") in {(e["event"], e["type"]) for e in sim.store.reader.get_events(int(r["ID"]))}
    )
    params = {"type": "ACTUAL" if method == "POST" else "ESTIMATED"}
    before = sim.store.reader.get_base_shipment(sid)
    response = client.request(method, path.format(sid=sid), params=params, json=body)
    assert response.status_code == 400, response.text
    assert fragment in response.json()["message"]
    assert sim.store.reader.get_base_shipment(sid) == before  # nothing changed


def _at(client: httpx.Client, instant: str) -> list[int]:
    """Ids of the shipments last modified at this second (``YYYY-MM-DDTHH:MM:SS``)."""
    criteria = [
        {"key": "LAST_MODIFIED_DATE", "value": instant[:10]},
        {"key": "LAST_MODIFIED_TIME", "value": instant[11:19]},
    ]
    return [s["id"] for s in lookup_all(client, LOOKUP, criteria)]


def test_event_writes_move_last_modified_while_the_clock_stands_still(
    sim: RunningSimulator, client: httpx.Client
) -> None:
    sid = _first_id(sim)
    sim.advance_clock(600)
    sim.touch_shipments([sid])  # last modified now: a write in this second must still move it
    now = sim.store.clock.now()
    stamp = sim.store.reader.get_base_shipment(sid)["last_modified_date_time"]
    assert stamp == now.isoformat()
    latest_before = _latest(client)  # same criteria and order as asked again below
    assert latest_before[0]["id"] == sid

    code = _new_event_code(sim, sid)
    created = client.post(f"/service/shipment/{sid}/event", params={"type": "ESTIMATED"}, json={"event": code, **EVENT})
    assert created.status_code == 201, created.text
    after_create = sim.store.reader.get_base_shipment(sid)["last_modified_date_time"]
    assert after_create == (now + dt.timedelta(seconds=1)).isoformat()
    assert _at(client, after_create) == [sid]
    assert sid not in _at(client, stamp)

    updated = client.put(f"/service/shipment/{sid}/event/{code}", params={"type": "ESTIMATED"}, json={})
    assert updated.status_code == 200, updated.text
    after_update = sim.store.reader.get_base_shipment(sid)["last_modified_date_time"]
    assert after_update == (now + dt.timedelta(seconds=2)).isoformat()
    assert _at(client, after_update) == [sid]
    assert _at(client, after_create) == []
    assert sim.store.clock.now() == now  # the clock itself never moved
    latest_after = _latest(client)
    assert latest_after[0]["id"] == sid
    assert latest_after[0]["last_modified_date_time"] == after_update != latest_before[0]["last_modified_date_time"]


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


def _ids_where(client: httpx.Client, date_mode: str, date: str, time_mode: str, time: str) -> list[int]:
    criteria = [
        {"key": "LAST_MODIFIED_DATE", "match_mode": date_mode, "value": date},
        {"key": "LAST_MODIFIED_TIME", "match_mode": time_mode, "value": time},
    ]
    return [s["id"] for s in lookup_all(client, LOOKUP, criteria)]


def test_mutations_move_last_modified_and_show_in_lookups(sim: RunningSimulator, client: httpx.Client) -> None:
    stale = _latest(client)  # a result the server may cache; changes below must invalidate it
    sim.advance_clock(3600)
    now = sim.store.clock.now()
    modified = sorted(sim.modify_shipments(3))
    assert len(modified) == 3
    date, time = now.date().isoformat(), now.time().isoformat()
    earlier = (now - dt.timedelta(seconds=1)).time().isoformat()
    rows = list(sim.store.reader.shipment_key_rows())
    same_day_before = sorted(
        r["ID"] for r in rows if r["LAST_MODIFIED_DATE"] == date and r["LAST_MODIFIED_TIME"] < time
    )
    assert same_day_before  # the initial data has changes earlier that day, so LT/LE have something to find
    assert _ids_where(client, "EQUALS", date, "EQUALS", time) == modified
    assert _ids_where(client, "GE", date, "GE", time) == modified  # nothing is newer
    assert _ids_where(client, "EQUALS", date, "GT", earlier) == modified
    assert _ids_where(client, "EQUALS", date, "GT", time) == []
    assert _ids_where(client, "EQUALS", date, "LT", time) == same_day_before
    assert _ids_where(client, "EQUALS", date, "LE", earlier) == same_day_before
    earlier_days = sorted(r["ID"] for r in rows if r["LAST_MODIFIED_DATE"] < date)
    assert _ids_where(client, "LT", date, "GE", "00:00:00") == earlier_days
    assert _ids_where(client, "GT", date, "GE", "00:00:00") == []
    assert {s["id"] for s in _latest(client)[:3]} == set(modified) != {s["id"] for s in stale[:3]}
    for sid in modified:
        assert sim.store.reader.get_base_shipment(sid)["last_modified_date_time"] >= now.isoformat()

    sim.advance_clock(60)
    created = sim.create_shipments(2)
    assert {s["id"] for s in _latest(client)[:2]} == set(created)
    assert client.get(f"/service/shipment/{created[0]}").status_code == 200

    total = int(client.post(LOOKUP, json=[]).headers["X-Row-Count"])
    deleted = sim.delete_shipments(1)
    assert int(client.post(LOOKUP, json=[]).headers["X-Row-Count"]) == total - 1
    assert client.get(f"/service/shipment/{deleted[0]}").status_code == 404

    target = sorted(r["ID"] for r in sim.store.reader.shipment_key_rows())[0]
    sim.advance_clock(60)
    sim.touch_shipments([target])
    assert _latest(client)[0]["id"] == target
