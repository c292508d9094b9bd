"""Persistent corruptions over HTTP: every kind changes every answer about one record until healed,
the store keeps the true data, and a corruption that cannot apply is refused when planted."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from freight_pipeline.simulator.corruptions import KINDS
from freight_pipeline.simulator.server import RunningSimulator
from freight_pipeline_tests.simulator.conftest import authed_client


@pytest.fixture
def control(sim_factory: Callable[..., RunningSimulator]) -> RunningSimulator:
    return sim_factory(control=True)


@pytest.fixture
def api(control: RunningSimulator) -> Iterator[httpx.Client]:
    with authed_client(control) as client:
        yield client


def plant(sim: RunningSimulator, **body: Any) -> httpx.Response:
    return httpx.post(f"{sim.base_url}/_control/corruptions", json=body, timeout=10)


def first_id(sim: RunningSimulator, wanted: Callable[[dict[str, Any]], bool] = lambda d: True) -> int:
    return next(d["id"] for d in sorted(sim.store.reader.expected_documents(), key=lambda d: d["id"]) if wanted(d))


def memo_lookup(api: httpx.Client, doc: dict[str, Any]) -> httpx.Response:
    criteria = [{"key": "CLIENT", "value": doc["client"]}, {"key": "SHIPMENT_NUMBER", "value": doc["shipment_number"]}]
    return api.post("/service/shipment/memo/lookup", json=criteria)


def test_each_kind_changes_the_answer_and_healing_restores_it(control: RunningSimulator, api: httpx.Client) -> None:
    shipment = first_id(control, lambda d: bool(d["addresses"]) and bool(control.store.reader.get_events(d["id"])))
    truth = api.get(f"/service/shipment/{shipment}").json()
    events = api.get(f"/service/shipment/{shipment}/events").json()

    assert plant(control, endpoint="shipment", id=shipment, kind="set", path="addresses[0].address_number",
                 value="abc").status_code == 200
    assert plant(control, endpoint="shipment", id=shipment, kind="remove", path="office").status_code == 200
    changed = api.get(f"/service/shipment/{shipment}").json()
    assert changed["addresses"][0]["address_number"] == "abc" and "office" not in changed
    assert {k: v for k, v in changed.items() if k not in ("addresses", "office")} == {
        k: v for k, v in truth.items() if k not in ("addresses", "office")
    }
    assert control.store.reader.get_shipment(shipment) == truth  # the store keeps the true data

    plant(control, endpoint="events", id=shipment, kind="wrap", key="events")
    assert api.get(f"/service/shipment/{shipment}/events").json() == {"events": events}

    other = first_id(control, lambda d: d["id"] != shipment and bool(control.store.reader.get_events(d["id"])))
    plant(control, endpoint="events", id=other, kind="single_object")
    assert api.get(f"/service/shipment/{other}/events").json() == control.store.reader.get_events(other)[0]

    plant(control, endpoint="shipment", id=other, kind="truncated")
    cut = api.get(f"/service/shipment/{other}")
    assert cut.status_code == 200 and cut.headers["content-type"].startswith("application/json")
    with pytest.raises(json.JSONDecodeError):
        json.loads(cut.content)

    listed = httpx.get(f"{control.base_url}/_control/corruptions", timeout=10).json()["corruptions"]
    assert len(listed) == 5
    healed = httpx.delete(f"{control.base_url}/_control/corruptions", params={"endpoint": "events", "id": other})
    assert healed.json()["healed"] == 1
    assert api.get(f"/service/shipment/{other}/events").json() == control.store.reader.get_events(other)
    assert httpx.delete(f"{control.base_url}/_control/corruptions", timeout=10).json()["healed"] == 4
    assert api.get(f"/service/shipment/{shipment}").json() == truth
    assert api.get(f"/service/shipment/{shipment}/events").json() == events


def test_a_status_answers_every_attempt_with_that_status(control: RunningSimulator, api: httpx.Client) -> None:
    shipment = first_id(control, lambda d: d["mode_of_transport"] == "SEA")
    plant(control, endpoint="seamaincarriage", id=shipment, kind="status", status=500)
    for _ in range(3):
        answer = api.get(f"/service/shipment/{shipment}/seamaincarriage")
        assert answer.status_code == 500 and answer.json()["status"] == 500
    assert api.get(f"/service/shipment/{shipment}").status_code == 200  # only that endpoint of that record


def test_memo_lines_are_corrupted_in_the_lookup_of_their_shipment(control: RunningSimulator, api: httpx.Client) -> None:
    doc = next(d for d in control.store.reader.expected_documents() if len(d["memos"]) >= 2)
    other = next(d for d in control.store.reader.expected_documents() if d["memos"] and d["id"] != doc["id"])
    plant(control, endpoint="memos", id=doc["id"], kind="set", path="[1].running_number", value="x")
    answer = memo_lookup(api, doc)
    assert [m["running_number"] for m in answer.json()][1] == "x"
    assert answer.headers["X-Row-Count"] == str(len(doc["memos"]))
    assert memo_lookup(api, other).json() == sorted(other["memos"], key=lambda m: m["id"])


def lookup_of_several(api: httpx.Client, docs: list[dict[str, Any]]) -> httpx.Response:
    """The sync's batched memo lookup: one client, its shipments' numbers IN."""
    criteria = [{"key": "CLIENT", "match_mode": "EQUALS", "value": docs[0]["client"]},
                {"key": "SHIPMENT_NUMBER", "match_mode": "IN", "values": [d["shipment_number"] for d in docs]}]
    return api.post("/service/shipment/memo/lookup", json=criteria, params={"order_by": "ID", "order_mode": "ASC"})


MEMO_CORRUPTIONS: dict[str, dict[str, Any]] = {
    "set": {"path": "[0].memo", "value": 7}, "remove": {"path": "[0].client"}, "wrap": {"key": "memos"},
    "single_object": {}, "status": {"status": 500}, "truncated": {},
}


@pytest.mark.parametrize("kind", MEMO_CORRUPTIONS)
def test_a_lookup_of_several_shipments_answers_each_corrupted_shipment_as_its_own_lookup_does(
    control: RunningSimulator, api: httpx.Client, kind: str
) -> None:
    assert set(MEMO_CORRUPTIONS) == set(KINDS)  # every kind a record can be corrupted with
    docs = sorted(control.store.reader.expected_documents(), key=lambda d: d["id"])
    victim = next(d for d in docs if len(d["memos"]) >= 2)
    others = [d for d in docs if d["client"] == victim["client"] and d["memos"] and d["id"] != victim["id"]][:2]
    several = [others[0], victim, others[1]]
    clean = lookup_of_several(api, several)
    assert clean.status_code == 200 and [m["id"] for m in clean.json()] == sorted(
        m["id"] for d in several for m in d["memos"])  # each number's lines, in ID order
    assert clean.headers["X-Row-Count"] == str(len(clean.json()))
    assert plant(control, endpoint="memos", id=victim["id"], kind=kind, **MEMO_CORRUPTIONS[kind]).status_code == 200

    alone, batched = memo_lookup(api, victim), lookup_of_several(api, several)
    if alone.status_code != 200 or kind == "truncated":  # the whole answer spoilt: the batched one too
        assert (batched.status_code, batched.content) == (alone.status_code, alone.content)
        return
    own = alone.json() if isinstance(alone.json(), list) else [alone.json()]
    others = [m for m in clean.json() if m["shipment_number"] != victim["shipment_number"]]
    rest = [m for m in batched.json() if m not in own]
    assert rest == others  # every other shipment's lines as they are
    assert [m for m in batched.json() if m in own] == own  # the victim's, as its own lookup answers them
    assert batched.headers["X-Row-Count"] == clean.headers["X-Row-Count"]


def test_a_code_conversion_is_corrupted_wherever_it_is_answered(control: RunningSimulator, api: httpx.Client) -> None:
    conversion = min(int(r["id"]) for r in control.store.reader.code_conversion_rows())
    plant(control, endpoint="codeconverter", id=conversion, kind="set", path="direction", value={"code": "I"})
    scrolled = api.get("/service/basicdata/codeconverter", params={"page_size": 500}).json()
    assert [r["direction"] for r in scrolled if r["id"] == conversion] == [{"code": "I"}]
    assert all(isinstance(r["direction"], str) for r in scrolled if r["id"] != conversion)
    assert api.get(f"/service/basicdata/codeconverter/{conversion}").json()["direction"] == {"code": "I"}
    looked_up = api.post("/service/basicdata/codeconverter/lookup", json=[{"key": "ID", "value": str(conversion)}])
    assert looked_up.json()[0]["direction"] == {"code": "I"}


@pytest.mark.parametrize(
    ("body", "status", "fragment"),
    [
        ({"endpoint": "shipment", "kind": "set", "path": "nope[3].x", "value": 1}, 400, "has no 'nope'"),
        ({"endpoint": "shipment", "kind": "set", "path": "goods[999].weight", "value": 1}, 400, "goods"),
        ({"endpoint": "shipment", "kind": "set", "path": "a..b", "value": 1}, 400, "unreadable path"),
        ({"endpoint": "shipment", "kind": "set", "value": 1}, 400, "needs a path"),
        ({"endpoint": "shipment", "kind": "status", "status": 200}, 400, "from 400 to 599"),
        ({"endpoint": "shipment", "kind": "wrap"}, 400, "needs a key"),
        ({"endpoint": "invoices", "kind": "truncated"}, 400, "unknown endpoint"),
        ({"endpoint": "shipment", "kind": "explode"}, 400, "unknown kind"),
        ({"endpoint": "codeconverter", "kind": "truncated"}, 400, "only set, remove"),
        ({"endpoint": "shipment", "kind": "truncated", "colour": "red"}, 400, "unknown: ['colour']"),
        ({"endpoint": "shipment", "kind": "single_object"}, 400, "no list item"),
    ],
)
def test_a_corruption_that_cannot_apply_is_refused_when_planted(
    control: RunningSimulator, body: dict[str, Any], status: int, fragment: str
) -> None:
    answer = plant(control, id=first_id(control), **body)
    assert answer.status_code == status and fragment in answer.json()["message"], answer.text
    assert httpx.get(f"{control.base_url}/_control/corruptions", timeout=10).json()["corruptions"] == []


def test_a_corruption_of_an_unknown_record_is_404(control: RunningSimulator) -> None:
    assert plant(control, endpoint="shipment", id=1, kind="truncated").status_code == 404
