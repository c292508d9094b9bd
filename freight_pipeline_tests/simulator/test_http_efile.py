"""The E-File group (A18, A19): store, retrieve with/without cascade, references, roles, lookup, delete."""

from __future__ import annotations

import base64
from collections.abc import Callable

import httpx
import pytest

from freight_pipeline.simulator.data_efile import DOCUMENT_KINDS
from freight_pipeline.simulator.server import RunningSimulator
from freight_pipeline.simulator.store import SimulatorStore
from freight_pipeline_tests.simulator.conftest import SMALL_SHIPMENTS, authed_client, lookup_all


@pytest.fixture
def sim(sim_factory: Callable[..., RunningSimulator]) -> RunningSimulator:
    """A store without generated E-Files: the tests of the group see only what they store."""
    return sim_factory(SimulatorStore(shipments=SMALL_SHIPMENTS, seed=7, documents=False))


def _store(client: httpx.Client, shipment_id: int, name: str) -> dict:
    body = {
        "file_name": name,
        "mime_type": "application/pdf",
        "description": "invoice",
        "document": base64.b64encode(b"%PDF-1.4 " + name.encode()).decode(),
        "references": [{"type": "SHIPMENT", "value": str(shipment_id)}, {"type": "OTHER", "value": f"INV-{name}"}],
        "roles": [{"role": "ACCOUNTING"}],
    }
    response = client.post("/service/efile", json=body)
    assert response.status_code == 201, response.text
    stored = response.json()
    assert isinstance(stored["id"], int)
    assert stored["document"] == body["document"]
    return stored


def test_efile_group(sim: RunningSimulator, client: httpx.Client) -> None:
    first = _store(client, 1, "a.pdf")
    second = _store(client, 2, "b.pdf")
    eid = first["id"]

    plain = client.get(f"/service/efile/{eid}")
    assert plain.status_code == 200
    assert plain.json()["references"] is None
    assert plain.json()["roles"] is None
    cascade = client.get(f"/service/efile/{eid}", params={"cascade": "true"}).json()
    assert {r["value"] for r in cascade["references"]} == {"1", "INV-a.pdf"}
    assert [r["role"] for r in cascade["roles"]] == ["ACCOUNTING"]
    assert client.get(f"/service/efile/{eid}", params={"cascade": "maybe"}).status_code == 400

    # references
    added = client.post(f"/service/efile/{eid}/reference", json={"type": "HBL", "value": "HBL-9"})
    assert added.status_code == 200
    assert added.content == b""
    refs = client.get(f"/service/efile/{eid}/reference").json()
    assert {r["value"] for r in refs} == {"1", "INV-a.pdf", "HBL-9"}
    hbl = next(r for r in refs if r["value"] == "HBL-9")
    removed = client.request("DELETE", f"/service/efile/{eid}/reference", json=hbl)
    assert removed.status_code == 200
    assert {r["value"] for r in client.get(f"/service/efile/{eid}/reference").json()} == {"1", "INV-a.pdf"}
    assert client.post(f"/service/efile/{eid}/reference", json=["x"]).status_code == 400

    # roles: POST takes text/plain, DELETE a JSON EFileRole
    role = client.post(f"/service/efile/{eid}/role", content=b"CUSTOMS", headers={"Content-Type": "text/plain"})
    assert role.status_code == 200
    assert role.content == b""
    roles = client.get(f"/service/efile/{eid}/role").json()
    assert sorted(r["role"] for r in roles) == ["ACCOUNTING", "CUSTOMS"]
    customs = next(r for r in roles if r["role"] == "CUSTOMS")
    assert client.request("DELETE", f"/service/efile/{eid}/role", json=customs).status_code == 200
    assert [r["role"] for r in client.get(f"/service/efile/{eid}/role").json()] == ["ACCOUNTING"]
    empty_role = client.post(f"/service/efile/{eid}/role", content=b"", headers={"Content-Type": "text/plain"})
    assert empty_role.status_code == 400

    # lookup by SHIPMENT_ID and REFERENCE, without document and cascade
    by_shipment = lookup_all(client, "/service/efile/lookup", [{"key": "SHIPMENT_ID", "value": "1"}])
    assert [e["id"] for e in by_shipment] == [eid]
    assert "document" not in by_shipment[0]
    assert by_shipment[0]["references"] is None
    by_reference = lookup_all(
        client, "/service/efile/lookup", [{"key": "REFERENCE", "match_mode": "CONTAINS", "value": "inv-"}]
    )
    assert sorted(e["id"] for e in by_reference) == sorted([eid, second["id"]])
    ordered = client.post("/service/efile/lookup", json=[], params={"order_by": "SHIPMENT_ID", "order_mode": "DESC"})
    assert [e["id"] for e in ordered.json()] == [second["id"], eid]
    assert ordered.headers["X-Row-Count"] == "2"
    bad_key = client.post("/service/efile/lookup", json=[{"key": "HBL", "value": "1"}])
    assert bad_key.status_code == 400

    # delete
    deleted = client.delete(f"/service/efile/{eid}")
    assert deleted.status_code == 200
    assert deleted.json()["id"] == eid
    assert client.get(f"/service/efile/{eid}").status_code == 404
    assert client.delete(f"/service/efile/{eid}").status_code == 404
    assert client.get(f"/service/efile/{eid}/reference").status_code == 404


def test_efile_bad_documents(client: httpx.Client) -> None:
    not_base64 = client.post("/service/efile", json={"file_name": "x", "document": "not base64!!"})
    assert not_base64.status_code == 400
    assert "base64" in not_base64.json()["message"]
    assert client.post("/service/efile", json={"file_name": "x"}).status_code == 400
    assert client.post("/service/efile", json=[]).status_code == 400
    assert client.get("/service/efile/424242").status_code == 404
    empty = client.post("/service/efile/lookup", json=[])
    assert empty.headers["X-Page-Count"] == "0"
    assert empty.headers["X-Row-Count"] == "0"


def test_generated_efiles_are_linked_to_their_shipments_and_looked_up_by_many_ids(
    sim_factory: Callable[..., RunningSimulator],
) -> None:
    store = SimulatorStore(shipments=300, seed=7)
    assert store.efiles.count() > 300  # most shipments have several documents
    with authed_client(sim_factory(store)) as client:
        ids = sorted(store.reader.live_shipment_ids())[:60]
        found = lookup_all(client, "/service/efile/lookup", [{"key": "SHIPMENT_ID", "values": [str(i) for i in ids]}])
        everything = list(store.efiles.rows())
        linked = [e for e in everything if any(r["type"] == "SHIPMENT" and int(r["value"]) in ids
                                               for r in e["references"])]
        assert sorted(e["id"] for e in found) == sorted(e["id"] for e in linked) and linked
        first = found[0]
        whole = client.get(f"/service/efile/{first['id']}", params={"cascade": "true"}).json()
        kind = next(k for k in DOCUMENT_KINDS if whole["description"].startswith(k.description))
        assert whole["mime_type"] == kind.mime_type
        assert [r["role"] for r in whole["roles"]] == list(kind.roles)
        assert whole["references"] == client.get(f"/service/efile/{first['id']}/reference").json()
        assert whole["roles"] == client.get(f"/service/efile/{first['id']}/role").json()
        assert base64.b64decode(whole["document"], validate=True)
        # a generated file changed through the interface keeps its ids and what it had
        assert client.post(f"/service/efile/{first['id']}/role", content=b"AUDIT",
                           headers={"Content-Type": "text/plain"}).status_code == 200
        roles = client.get(f"/service/efile/{first['id']}/role").json()
        assert roles[:-1] == whole["roles"] and roles[-1]["role"] == "AUDIT"
    assert SimulatorStore(shipments=300, seed=7).efiles.count() == store.efiles.count()  # deterministic
