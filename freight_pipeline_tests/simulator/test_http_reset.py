"""A reset (the test server's nightly one): ``POST /_control/reset`` brings the data back to the last
snapshot (``POST /_control/snapshot``, one taken at the start), id counters included, while the
clock goes on. Over HTTP: documents, memo lines and E-Files as they were, the shipments made since
gone, the deleted ones back, their ids issued again, new changes stamped after everything before."""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from freight_pipeline.simulator.server import RunningSimulator
from freight_pipeline.simulator.store import SimulatorStore
from freight_pipeline_tests.simulator.conftest import authed_client, lookup_all
from freight_pipeline_tests.simulator.fake_store import FakeStore

LOOKUP = "/service/shipment/lookup"
EVERYTHING = [{"key": "ID", "match_mode": "GE", "value": "0"}]


@pytest.fixture
def control(sim_factory: Callable[..., RunningSimulator]) -> RunningSimulator:
    return sim_factory(SimulatorStore(shipments=50, seed=7), control=True)


def _post(sim: RunningSimulator, path: str, **params: Any) -> Any:
    response = httpx.post(f"{sim.base_url}/_control{path}", params=params)
    assert response.status_code == 200, response.text
    return response.json()


def _now(sim: RunningSimulator) -> dt.datetime:
    return dt.datetime.fromisoformat(httpx.get(f"{sim.base_url}/_control/clock").json()["now"])


def _service(client: httpx.Client) -> dict[str, Any]:
    """Everything the service serves: each live shipment's document, its memo lines, every E-File."""
    ids = sorted(s["id"] for s in lookup_all(client, LOOKUP, EVERYTHING))
    efiles = lookup_all(client, "/service/efile/lookup", [])
    return {
        "shipments": {i: client.get(f"/service/shipment/{i}").json() for i in ids},
        "memos": lookup_all(client, "/service/shipment/memo/lookup", []),
        "efiles": {f["id"]: client.get(f"/service/efile/{f['id']}", params={"cascade": "true"}).json()
                   for f in efiles},
    }


def _stored_efile(client: httpx.Client, shipment_id: int) -> dict[str, Any]:
    document = base64.b64encode(b"%PDF-1.4 reset").decode()
    body = {"document": document, "references": [{"type": "SHIPMENT", "value": str(shipment_id)}],
            "roles": ["OPERATIONS"]}
    response = client.post("/service/efile", json=body)
    assert response.status_code == 201, response.text
    return dict(response.json())


def _touch(sim: RunningSimulator, shipment_id: int) -> dt.datetime:
    response = httpx.post(f"{sim.base_url}/_control/shipments/touch", json={"ids": [shipment_id]})
    assert response.status_code == 200, response.text
    return dt.datetime.fromisoformat(response.json()["last_modified_date_time"])


def test_a_reset_brings_back_the_snapshot_and_its_ids_while_the_clock_goes_on(control: RunningSimulator) -> None:
    sim = control
    with authed_client(sim) as client:
        before = _service(client)
        snapshot_clock = _now(sim)
        an_efile = min(before["efiles"])
        kept_reference = before["efiles"][an_efile]["references"][0]

        sim.advance_clock(3600)
        deleted = _post(sim, "/shipments/delete", count=4)["ids"]
        modified = _post(sim, "/shipments/modify", count=10)["ids"]
        sim.advance_clock(60)
        created = _post(sim, "/shipments/create", count=5)["ids"]
        written = next(i for i in before["shipments"] if i not in deleted and i not in modified)
        codes = {(e["event"], e["type"]) for e in before["shipments"][written]["events"]}
        code = next(c for c in ("VGM_CLOSING", "DIFF_BL_DATE", "GATE_OUT") if (c, "ESTIMATED") not in codes)
        event = client.post(f"/service/shipment/{written}/event", params={"type": "ESTIMATED"}, json={"event": code})
        assert event.status_code == 201, event.text
        stamps = [_touch(sim, written) for _ in range(3)]  # a burst: stamps run ahead of the standing clock
        assert stamps[-1] > _now(sim)
        stored = _stored_efile(client, created[0])
        assert client.delete(f"/service/efile/{an_efile}").status_code == 200
        changed = _service(client)
        assert set(changed["shipments"]) == (set(before["shipments"]) - set(deleted)) | set(created)
        last_stamp = max(dt.datetime.fromisoformat(d["last_modified_date_time"]) for d in changed["shipments"].values())
        assert last_stamp == stamps[-1]
        clock_before_reset = _now(sim)

        answer = _post(sim, "/reset")
        assert answer["snapshot_at"] == snapshot_clock.isoformat()
        assert answer["ids"] == {"reverted": sorted({*modified, written}), "vanished": sorted(created),
                                 "restored": sorted(deleted)}
        assert (answer["reverted"], answer["vanished"], answer["restored"]) == (len(modified) + 1, 5, 4)
        assert answer["shipments"] == len(before["shipments"])
        assert answer["efiles"] == len(before["efiles"])

        # everything as it was: documents by id (events, goods, memos inside), memo lines, E-Files
        after = _service(client)
        assert after["shipments"].keys() == before["shipments"].keys()
        for shipment_id, document in before["shipments"].items():
            assert after["shipments"][shipment_id] == document, shipment_id
        assert after["memos"] == before["memos"]
        assert after["efiles"] == before["efiles"]
        for shipment_id in created:
            assert client.get(f"/service/shipment/{shipment_id}").status_code == 404
        assert client.get(f"/service/efile/{stored['id']}").status_code == 404
        assert client.get(f"/service/efile/{an_efile}/reference").json()[0] == kept_reference

        # the clock went on, and a change is stamped no earlier than every stamp issued before
        assert _now(sim) == clock_before_reset
        assert _touch(sim, modified[0]) >= last_stamp > clock_before_reset
        # ids are issued again: E-Files, then shipments (not met by a cached document of the vanished one)
        first_new_efile = max(before["efiles"]) + 1
        assert first_new_efile in changed["efiles"]
        assert _stored_efile(client, modified[0])["id"] == first_new_efile
        sim.advance_clock(120)
        again = _post(sim, "/shipments/create", count=1)["ids"]
        assert again == [min(created)]
        reused = client.get(f"/service/shipment/{again[0]}").json()
        assert dt.datetime.fromisoformat(reused["created_date_time"]) == clock_before_reset + dt.timedelta(seconds=120)
        assert reused["created_date_time"] != changed["shipments"][again[0]]["created_date_time"]
        found = [s["id"] for s in lookup_all(client, LOOKUP, EVERYTHING)]  # lookup results are not stale
        assert found == sorted([*before["shipments"], *again])


def test_a_snapshot_on_request_is_the_one_a_reset_goes_back_to_again_and_again(control: RunningSimulator) -> None:
    sim = control
    with authed_client(sim) as client:
        _post(sim, "/shipments/modify", count=3)
        created = _post(sim, "/shipments/create", count=2)["ids"]
        taken = _post(sim, "/snapshot")
        assert taken == {"snapshot_at": _now(sim).isoformat(), "shipments": len(sim.store.reader.live_shipment_ids()),
                         "efiles": len(lookup_all(client, "/service/efile/lookup", []))}
        before = _service(client)
        for _ in range(2):
            sim.advance_clock(600)
            more = _post(sim, "/shipments/create", count=2)["ids"]
            deleted = _post(sim, "/shipments/delete", count=2)["ids"]
            answer = _post(sim, "/reset")
            assert (answer["ids"]["vanished"], answer["ids"]["restored"]) == (
                sorted(set(more) - set(deleted)), sorted(set(deleted) - set(more))
            )
            assert _service(client) == before
        assert set(created) <= set(before["shipments"])  # made before the snapshot: kept


def test_the_in_process_helpers_and_a_fake_store(
    control: RunningSimulator, sim_factory: Callable[..., RunningSimulator]
) -> None:
    ids = control.create_shipments(3)
    answer = control.reset_to_snapshot()
    assert answer["ids"]["vanished"] == ids and control.store.reader.live_shipment_ids()[-1] < ids[0]
    assert control.take_snapshot()["shipments"] == len(control.store.reader.live_shipment_ids())
    fake = sim_factory(FakeStore(5), control=True)
    refused = httpx.post(f"{fake.base_url}/_control/reset")
    assert refused.status_code == 400 and "no snapshots" in refused.json()["message"]
