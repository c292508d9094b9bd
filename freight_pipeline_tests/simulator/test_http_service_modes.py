"""Behaviours of real services played as fault modes: a page-size cap, forbidden path prefixes,
strict criteria, the other shape of E-File references."""

from __future__ import annotations

import base64
import math
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from freight_pipeline.simulator.config import FaultConfig, SimulatorConfig, UserConfig, default_users
from freight_pipeline.simulator.server import RunningSimulator
from freight_pipeline_tests.simulator.conftest import authed_client, token_for

# (method, path, lookup body or None for a scroll): every paged endpoint of the service.
PAGED = [
    ("POST", "/service/shipment/lookup", []),
    ("POST", "/service/efile/lookup", []),
    ("POST", "/service/shipment/memo/lookup", []),
    ("POST", "/service/basicdata/codeconverter/lookup", []),
    ("GET", "/service/shipment/memo", None),
    ("GET", "/service/basicdata/codeconverter", None),
]


def _bearer(sim: RunningSimulator, username: str, password: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token_for(sim, username, password)}"}


def _page(client: httpx.Client, method: str, path: str, body: Any, **params: Any) -> httpx.Response:
    response = client.request(method, path, json=body, params=params)
    assert response.status_code == 200, response.text
    return response


# --- max_page_size -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("method", "path", "body"), PAGED)
def test_max_page_size_caps_every_page(
    sim: RunningSimulator, client: httpx.Client, method: str, path: str, body: Any
) -> None:
    whole = _page(client, method, path, body, page_size=500)
    every = [item["id"] for item in whole.json()]
    total = int(whole.headers["X-Row-Count"])
    assert total == len(every) > 100  # one uncapped page holds them all

    cap = 40
    sim.set_faults(max_page_size=cap)
    pages = math.ceil(total / cap)
    seen: list[int] = []
    for page_no in range(pages + 1):
        response = _page(client, method, path, body, page_size=500, page_no=page_no)
        assert response.headers["X-Row-Count"] == str(total)
        assert response.headers["X-Page-Count"] == str(pages)
        rows = response.json()
        expected = cap if page_no < pages - 1 else total - cap * (pages - 1) if page_no == pages - 1 else 0
        assert len(rows) == expected, page_no
        seen += [item["id"] for item in rows]
    assert seen == every  # every record exactly once, in the uncapped order

    # a page_size under the cap is served as asked
    small = _page(client, method, path, body, page_size=7, page_no=1)
    assert [item["id"] for item in small.json()] == every[7:14]
    assert small.headers["X-Page-Count"] == str(math.ceil(total / 7))


def test_max_page_size_keeps_page_size_validation(sim: RunningSimulator, client: httpx.Client) -> None:
    sim.set_faults(max_page_size=10)
    for size in (0, 501):
        response = client.post("/service/shipment/lookup", json=[], params={"page_size": size})
        assert response.status_code == 400
        assert "page_size" in response.json()["message"]


def test_max_page_size_is_validated() -> None:
    with pytest.raises(ValueError, match="max_page_size must be at least 1"):
        FaultConfig(max_page_size=0)
    with pytest.raises(ValueError, match="max_page_size must be null or an integer"):
        FaultConfig().replace(max_page_size="10")


def test_max_page_size_over_the_control_surface(sim_factory: Callable[..., RunningSimulator]) -> None:
    sim = sim_factory(control=True)
    base = f"{sim.base_url}/_control/faults"
    assert httpx.put(base, json={"max_page_size": 0}).status_code == 400
    assert httpx.put(base, json={"max_page_size": 2.5}).status_code == 400
    answer = httpx.post(base, json={"max_page_size": 3})
    assert answer.status_code == 200, answer.text
    assert answer.json()["max_page_size"] == 3
    headers = {"Authorization": f"Bearer {sim.issue_token()}"}
    page = httpx.get(f"{sim.base_url}/service/shipment/memo", params={"page_size": 50}, headers=headers)
    assert len(page.json()) == 3
    assert httpx.put(base, json={"max_page_size": None}).json()["max_page_size"] is None
    page = httpx.get(f"{sim.base_url}/service/shipment/memo", params={"page_size": 50}, headers=headers)
    assert len(page.json()) == 50


# --- forbidden_prefixes ----------------------------------------------------------------------------------


def test_forbidden_prefix_is_403_for_every_user(sim_factory: Callable[..., RunningSimulator]) -> None:
    config = SimulatorConfig(users=(*default_users(), UserConfig("ops", "ops-password")))
    sim = sim_factory(config=config, faults=FaultConfig(forbidden_prefixes=frozenset({"/service/efile"})))
    for username, password in ((sim.username, sim.password), ("ops", "ops-password")):
        with httpx.Client(base_url=sim.base_url, headers=_bearer(sim, username, password)) as client:
            for method, path, body in [
                ("POST", "/service/efile/lookup", [{"key": "SHIPMENT_ID", "value": "10001"}]),
                ("GET", "/service/efile/1", None),
                ("GET", "/service/efile/1/reference", None),
                ("DELETE", "/service/efile/1", None),
            ]:
                response = client.request(method, path, json=body)
                assert response.status_code == 403, (username, path)
                error = response.json()
                assert set(error) == {"status", "error", "message"}
                assert (error["status"], error["error"]) == (403, "Forbidden")
                assert f"user {username!r} lacks permission 'efile:" in error["message"]
                assert "/service/efile" in error["message"]
            # other groups are served
            assert client.post("/service/shipment/lookup", json=[]).status_code == 200
    # authentication comes first: no token is 401, a wrong method 405, as for any endpoint
    assert httpx.get(f"{sim.base_url}/service/efile/1").status_code == 401
    assert httpx.get(f"{sim.base_url}/service/efile/lookup").status_code == 405
    assert sim.request_count("/service/efile/{id}", status=403) == 4
    # lifted at run time
    sim.set_faults(forbidden_prefixes=None)
    with authed_client(sim) as client:
        assert client.get("/service/efile/1").status_code == 200


def test_forbidden_prefixes_keep_per_user_permissions(sim_factory: Callable[..., RunningSimulator]) -> None:
    reader = UserConfig("reader", "reader-password", frozenset({"memo:read"}))
    sim = sim_factory(
        config=SimulatorConfig(users=(*default_users(), reader)),
        faults=FaultConfig(forbidden_prefixes=frozenset({"/service/basicdata"})),
    )
    with httpx.Client(base_url=sim.base_url, headers=_bearer(sim, "reader", "reader-password")) as client:
        assert client.get("/service/shipment/memo").status_code == 200
        denied = client.post("/service/shipment/lookup", json=[])
        assert denied.status_code == 403 and "shipment:lookup" in denied.json()["message"]
        assert client.get("/service/basicdata/codeconverter").status_code == 403


def test_forbidden_prefixes_are_validated(sim_factory: Callable[..., RunningSimulator]) -> None:
    with pytest.raises(ValueError, match="starting with '/'"):
        FaultConfig(forbidden_prefixes=frozenset({"service/efile"}))
    sim = sim_factory(control=True)
    base = f"{sim.base_url}/_control/faults"
    assert httpx.put(base, json={"forbidden_prefixes": "/service/efile"}).status_code == 400
    assert httpx.put(base, json={"forbidden_prefixes": [3]}).status_code == 400
    answer = httpx.post(base, json={"forbidden_prefixes": ["/service/efile", "/service/basicdata"]})
    assert answer.json()["forbidden_prefixes"] == ["/service/basicdata", "/service/efile"]
    headers = {"Authorization": f"Bearer {sim.issue_token()}"}
    assert httpx.get(f"{sim.base_url}/service/basicdata/codeconverter/1", headers=headers).status_code == 403


# --- strict_criteria --------------------------------------------------------------------------------------

def _some_shipment_ids(sim: RunningSimulator) -> list[Any]:
    return sim.store.reader.live_shipment_ids()[3:6]


def _some_memo_ids(sim: RunningSimulator) -> list[Any]:
    return [m["id"] for m in sim.store.reader.memo_rows()][3:6]


def _some_conversion_ids(sim: RunningSimulator) -> list[Any]:
    return [c["id"] for c in sim.store.reader.code_conversion_rows()][3:6]


# (lookup path, a key of it, values of that key present in the test store)
GROUPS: list[tuple[str, str, Callable[[RunningSimulator], list[Any]]]] = [
    ("/service/shipment/lookup", "ID", _some_shipment_ids),
    ("/service/efile/lookup", "SHIPMENT_ID", _some_shipment_ids),
    ("/service/shipment/memo/lookup", "ID", _some_memo_ids),
    ("/service/basicdata/codeconverter/lookup", "ID", _some_conversion_ids),
]


def _found(client: httpx.Client, path: str, criteria: list[Any]) -> httpx.Response:
    return client.post(path, json=criteria, params={"page_size": 500})


def _ids_of(response: httpx.Response, path: str) -> set[int]:
    """The ids of the records a lookup found (all on one page)."""
    assert response.status_code == 200, response.text
    return {item["id"] for item in response.json()}


@pytest.mark.parametrize(("path", "key", "values_of"), GROUPS, ids=[g[0] for g in GROUPS])
def test_lenient_lookups_take_in_with_values_and_one_value(
    shared_sim: RunningSimulator, shared_client: httpx.Client, path: str, key: str, values_of: Callable[..., list[Any]]
) -> None:
    values = values_of(shared_sim)
    by_in = _ids_of(_found(shared_client, path, [{"key": key, "match_mode": "IN", "values": values}]), path)
    one_by_one = [
        _ids_of(_found(shared_client, path, [{"key": key, "match_mode": mode, "value": str(v)}]), path)
        for v in values
        for mode in ("EQUALS", "IN")
    ]
    assert all(one_by_one)  # every value selects something
    assert by_in == set().union(*one_by_one)
    everything = _ids_of(_found(shared_client, path, []), path)
    assert by_in < everything  # the criterion was applied
    # lenient: EQUALS with values behaves as IN (A5)
    by_equals = _ids_of(_found(shared_client, path, [{"key": key, "match_mode": "EQUALS", "values": values}]), path)
    assert by_equals == by_in


@pytest.mark.parametrize(("path", "key", "values_of"), GROUPS, ids=[g[0] for g in GROUPS])
def test_strict_criteria_refuse_forms_the_spec_does_not_name(
    sim: RunningSimulator, client: httpx.Client, path: str, key: str, values_of: Callable[..., list[Any]]
) -> None:
    values = values_of(sim)
    sim.set_faults(strict_criteria=True)
    assert _found(client, path, [{"key": key, "match_mode": "IN", "values": values}]).status_code == 200
    assert _found(client, path, [{"key": key, "match_mode": "EQUALS", "value": str(values[0])}]).status_code == 200
    assert _found(client, path, [{"key": key, "value": str(values[0])}]).status_code == 200  # EQUALS by default
    refused = [
        ({"key": key, "match_mode": "EQUALS", "values": values}, "match_mode EQUALS takes 'value', not 'values'"),
        ({"key": key, "values": values}, "match_mode EQUALS takes 'value', not 'values'"),
        ({"key": key, "match_mode": "IN", "value": str(values[0])}, "match_mode IN takes 'values', not 'value'"),
        ({"key": key, "match_mode": "GE", "values": values[:1]}, "match_mode GE takes 'value', not 'values'"),
        ({"key": key, "match_mode": "OR", "values": values}, "match_mode OR takes 'identifiers', not 'values'"),
        ({"match_mode": "OR", "identifiers": [{"key": key, "match_mode": "EQUALS", "values": values}]},
         "criterion[1].identifiers[0] (key " + key + "): match_mode EQUALS takes 'value'"),
        ({"key": key, "match_mode": "EQUALS", "value": str(values[0]),
          "identifiers": [{"key": key, "value": str(values[0])}]}, "takes 'value', not 'identifiers'"),
    ]
    for criterion, message in refused:
        response = _found(client, path, [{"key": key, "match_mode": "LE", "value": str(values[-1])}, criterion])
        assert response.status_code == 400, criterion
        error = response.json()
        assert error["status"] == 400 and message in error["message"], error
        assert "strict criteria" in error["message"]
        if "identifiers" not in criterion or "key" in criterion:
            assert error["message"].startswith(f"criterion[1] (key {key}): ")
    unnarrowed = _found(client, path, [])  # every group's but the code conversions' wants a criterion
    if path == "/service/basicdata/codeconverter/lookup":
        assert unnarrowed.status_code == 200 and int(unnarrowed.headers["X-Row-Count"]) > 0
    else:
        assert unnarrowed.status_code == 400 and "needs at least one criterion (strict criteria)" in unnarrowed.text
    # OR of identifiers is the spec's form
    either = {"match_mode": "OR", "identifiers": [{"key": key, "value": str(v)} for v in values]}
    assert _ids_of(_found(client, path, [either]), path) == _ids_of(
        _found(client, path, [{"key": key, "match_mode": "IN", "values": values}]), path
    )
    # lenient again: the same body is taken
    sim.set_faults(strict_criteria=False)
    assert _found(client, path, [{"key": key, "match_mode": "EQUALS", "values": values}]).status_code == 200


def test_strict_criteria_over_the_control_surface(sim_factory: Callable[..., RunningSimulator]) -> None:
    sim = sim_factory(control=True)
    base = f"{sim.base_url}/_control/faults"
    assert httpx.put(base, json={"strict_criteria": "yes"}).status_code == 400
    assert httpx.post(base, json={"strict_criteria": True}).json()["strict_criteria"] is True
    headers = {"Authorization": f"Bearer {sim.issue_token()}"}
    body = [{"key": "SHIPMENT_ID", "match_mode": "EQUALS", "values": ["X-1", "X-2"]}]
    response = httpx.post(f"{sim.base_url}/service/shipment/lookup", json=body, headers=headers)
    assert response.status_code == 400
    assert response.json()["message"].startswith("criterion[0] (key SHIPMENT_ID): match_mode EQUALS takes 'value'")


# --- efile_reference_shape --------------------------------------------------------------------------------


def _efile_with_hbl(sim: RunningSimulator) -> tuple[int, int, str]:
    """A generated E-File with a SHIPMENT and an HBL reference: (file id, shipment id, house bill)."""
    for row in sim.store.efiles.rows():
        kinds = {r["type"]: r["value"] for r in row["references"]}
        if "SHIPMENT" in kinds and "HBL" in kinds:
            return row["id"], int(kinds["SHIPMENT"]), kinds["HBL"]
    raise AssertionError("no E-File with an HBL reference")


def test_reference_shape_key_renders_every_reference(sim: RunningSimulator, client: httpx.Client) -> None:
    efile_id, shipment_id, house_bill = _efile_with_hbl(sim)
    typed = client.get(f"/service/efile/{efile_id}/reference").json()
    assert [(r["type"], r["value"]) for r in typed] == [("SHIPMENT", str(shipment_id)), ("HBL", house_bill)]
    first = typed[0]["id"]

    sim.set_faults(efile_reference_shape="key")
    keyed = [
        {"id": first, "reference_key": "SHIPMENT_ID", "reference": shipment_id},
        {"id": first + 1, "reference_key": "HBL", "reference": house_bill},
    ]
    assert client.get(f"/service/efile/{efile_id}/reference").json() == keyed
    cascade = client.get(f"/service/efile/{efile_id}", params={"cascade": "true"}).json()
    assert cascade["references"] == keyed
    assert client.get(f"/service/efile/{efile_id}").json()["references"] is None
    # the lookup by SHIPMENT_ID finds the same files; its results carry no references (A19)
    found = client.post("/service/efile/lookup", json=[{"key": "SHIPMENT_ID", "value": str(shipment_id)}]).json()
    assert efile_id in {f["id"] for f in found} and all(f["references"] is None for f in found)
    sim.set_faults(efile_reference_shape="type")
    assert client.get(f"/service/efile/{efile_id}/reference").json() == typed


def test_reference_shape_key_on_writes(sim: RunningSimulator, client: httpx.Client) -> None:
    sim.set_faults(efile_reference_shape="key")
    shipment_id = sim.store.reader.live_shipment_ids()[0]
    body = {
        "file_name": "x.pdf",
        "document": base64.b64encode(b"%PDF-1.4 x").decode(),
        "references": [
            {"reference_key": "SHIPMENT_ID", "reference": shipment_id},
            {"type": "OTHER", "value": "INV-7"},
        ],
    }
    stored = client.post("/service/efile", json=body)
    assert stored.status_code == 201, stored.text
    efile_id = stored.json()["id"]
    assert [(r["reference_key"], r["reference"]) for r in stored.json()["references"]] == [
        ("SHIPMENT_ID", shipment_id), ("OTHER", "INV-7")
    ]
    added = client.post(f"/service/efile/{efile_id}/reference", json={"reference_key": "MBL", "reference": "M-1"})
    assert added.status_code == 200, added.text
    removed = client.request(
        "DELETE", f"/service/efile/{efile_id}/reference", json={"reference_key": "OTHER", "reference": "INV-7"}
    )
    assert removed.status_code == 200, removed.text
    references = client.get(f"/service/efile/{efile_id}/reference").json()
    assert [(r["reference_key"], r["reference"]) for r in references] == [("SHIPMENT_ID", shipment_id), ("MBL", "M-1")]
    found = client.post("/service/efile/lookup", json=[{"key": "SHIPMENT_ID", "value": str(shipment_id)}]).json()
    assert efile_id in {f["id"] for f in found}
    deleted = client.delete(f"/service/efile/{efile_id}").json()
    assert deleted["references"][0] == {"id": deleted["references"][0]["id"], "reference_key": "SHIPMENT_ID",
                                        "reference": shipment_id}
    # the store keeps the type shape
    sim.set_faults(efile_reference_shape="type")
    assert client.post("/service/efile", json={**body, "references": body["references"][1:]}).status_code == 201


def test_reference_shape_is_validated(sim_factory: Callable[..., RunningSimulator]) -> None:
    with pytest.raises(ValueError, match="efile_reference_shape must be one of type, key"):
        FaultConfig(efile_reference_shape="keys")
    sim = sim_factory(control=True)
    base = f"{sim.base_url}/_control/faults"
    assert httpx.put(base, json={"efile_reference_shape": 1}).status_code == 400
    assert httpx.put(base, json={"efile_reference_shape": "value"}).status_code == 400
    assert httpx.post(base, json={"efile_reference_shape": "key"}).json()["efile_reference_shape"] == "key"
    efile_id = next(iter(sim.store.efiles.rows()))["id"]
    planted = httpx.post(
        f"{sim.base_url}/_control/corruptions",
        json={"endpoint": "efilereferences", "id": efile_id, "kind": "set", "path": "[0].reference", "value": "x"},
    )
    assert planted.status_code == 200, planted.text  # corruptions read the answer in the shape served
    headers = {"Authorization": f"Bearer {sim.issue_token()}"}
    refs = httpx.get(f"{sim.base_url}/service/efile/{efile_id}/reference", headers=headers).json()
    assert refs[0]["reference"] == "x" and refs[0]["reference_key"] == "SHIPMENT_ID"


# --- the encoding of answers, a scroll without paging, a token endpoint that echoes ------------------------


def test_json_bom_and_latin1_change_only_how_json_answers_are_written(
    sim: RunningSimulator, client: httpx.Client
) -> None:
    plain = client.get("/service/basicdata/codeconverter", params={"page_size": 5})
    sim.set_faults(json_bom=True)
    with_bom = client.get("/service/basicdata/codeconverter", params={"page_size": 5})
    assert with_bom.content == b"\xef\xbb\xbf" + plain.content
    assert with_bom.headers["content-length"] == str(len(with_bom.content))
    sim.set_faults(json_bom=False, json_latin1=True)
    text = "Düsseldorf"
    missing = client.get(f"/service/shipment/{text}")  # a 404 whose message names the path
    assert missing.headers["content-type"] == "application/json; charset=ISO-8859-1"
    assert text.encode("latin-1") in missing.content and text.encode() not in missing.content


def test_unpaged_scrolls_answer_every_record_whatever_is_asked(sim: RunningSimulator, client: httpx.Client) -> None:
    every = client.get("/service/basicdata/codeconverter", params={"page_size": 500}).json()
    sim.set_faults(scroll_paging=False)
    for page_no in (0, 1, 7):
        page = client.get("/service/basicdata/codeconverter", params={"page_size": 10, "page_no": page_no})
        assert page.json() == every


@pytest.mark.parametrize("path", ["/service/basicdata/codeconverter", "/service/shipment/memo"])
def test_scroll_first_rows_answers_the_first_rows_to_every_request(
    sim: RunningSimulator, client: httpx.Client, path: str
) -> None:
    """A service paging its scrolls by parameters of its own: page_no and page_size change nothing."""
    every = client.get(path, params={"page_size": 500}).json()
    assert len(every) > 100
    sim.set_faults(scroll_first_rows=50)
    for params in ({}, {"page_no": 1, "page_size": 50}, {"page_no": 3, "page_size": 7}, {"page_size": 500}):
        page = client.get(path, params=params)
        assert page.json() == every[:50], params
        assert page.headers["X-Row-Count"] == str(len(every))  # page 0's headers, of pages of 50
        assert page.headers["X-Page-Count"] == str(math.ceil(len(every) / 50))
    sim.set_faults(scroll_headers=False)
    bare = client.get(path, params={"page_no": 1, "page_size": 50})
    assert bare.json() == every[:50] and "X-Row-Count" not in bare.headers and "X-Page-Count" not in bare.headers
    lookup = client.post(f"{path}/lookup", json=[], params={"page_size": 1})  # lookups are paged as asked
    assert lookup.headers["X-Row-Count"] == str(len(every)) and len(lookup.json()) == 1
    with pytest.raises(ValueError, match="scroll_first_rows must be at least 1"):
        FaultConfig(scroll_first_rows=0)


def test_token_echo_answers_422_with_the_body_escaped(sim: RunningSimulator) -> None:
    sim.set_faults(token_echo=True)
    answer = httpx.post(f"{sim.base_url}/auth/token", json={"username": "demo", "password": 'pä"ss'})
    assert answer.status_code == 422
    assert '"password": "p\\u00e4\\"ss"' in answer.text
    assert answer.json()["detail"][0]["input"] == {"username": "demo", "password": 'pä"ss'}


def test_redirect_to_answers_308_to_the_same_path_and_query(sim: RunningSimulator, client: httpx.Client) -> None:
    sim.set_faults(redirect_to="https://moved.example.com/api/")
    moved = client.get("/service/basicdata/codeconverter", params={"page_size": 5})
    assert moved.status_code == 308
    assert moved.headers["location"] == "https://moved.example.com/api/service/basicdata/codeconverter?page_size=5"


def test_a_token_is_refused_until_its_activation_delay_has_passed(sim: RunningSimulator) -> None:
    sim.set_faults(token_activation_ms=500)
    bearer = {"Authorization": f"Bearer {token_for(sim)}"}
    assert httpx.get(f"{sim.base_url}/service/basicdata/codeconverter", headers=bearer).status_code == 401
    time.sleep(0.55)
    assert httpx.get(f"{sim.base_url}/service/basicdata/codeconverter", headers=bearer).status_code == 200


@pytest.mark.parametrize("path", ["/service/basicdata/codeconverter", "/service/shipment/memo"])
def test_scroll_page_object_answers_spring_pages_by_page_and_size(
    sim: RunningSimulator, client: httpx.Client, path: str
) -> None:
    every = client.get(path, params={"page_size": 500}).json()
    sim.set_faults(scroll_page_object=True)
    first = client.get(path, params={"page_no": 1, "page_size": 500})  # its own parameters: ours ignored
    assert first.json() == {"content": every[:20], "totalElements": len(every),
                            "totalPages": math.ceil(len(every) / 20), "number": 0, "size": 20}
    assert "X-Row-Count" not in first.headers
    pages = [client.get(path, params={"page": n, "size": 100}).json() for n in range(math.ceil(len(every) / 100))]
    assert [item for page in pages for item in page["content"]] == every
    assert client.get(path, params={"size": 0}).status_code == 400
