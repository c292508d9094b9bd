"""Fault injection (429, 5xx HTML, dropped connections, malformed bodies, latency, paging changes), control surface."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from freight_pipeline.simulator.config import FaultConfig, call_kind
from freight_pipeline.simulator.faults import DROPPED, FaultInjector
from freight_pipeline.simulator.server import RunningSimulator
from freight_pipeline_tests.simulator.conftest import authed_client, make_test_store

LOOKUP = "/service/shipment/lookup"
MEMOS = "/service/shipment/memo"


def test_rate_limit_answers_429_with_retry_after(sim: RunningSimulator, client: httpx.Client) -> None:
    sim.set_faults(rate_limit_rate=1.0, retry_after_s=3, exempt_auth=True)
    response = client.get(MEMOS)
    assert response.status_code == 429
    assert response.headers["Retry-After"] == "3"
    assert response.json()["status"] == 429
    assert sim.request_count(MEMOS, status=429) == 1
    # exempt_auth keeps the token endpoint working
    token = httpx.post(f"{sim.base_url}/auth/token", json={"username": sim.username, "password": sim.password})
    assert token.status_code == 200


def test_server_errors_have_html_bodies(sim: RunningSimulator, client: httpx.Client) -> None:
    sim.set_faults(server_error_rate=1.0)
    statuses = set()
    for _ in range(30):
        response = client.get(MEMOS)
        statuses.add(response.status_code)
        assert response.headers["content-type"].startswith("text/html")
        assert response.text.lstrip().startswith("<html>")
        with pytest.raises(ValueError):
            response.json()
    assert statuses == {502, 503, 504}
    assert sim.request_count(MEMOS) == 30
    # faults hit the token endpoint too unless exempted
    token = httpx.post(f"{sim.base_url}/auth/token", json={"username": sim.username, "password": sim.password})
    assert token.status_code in (502, 503, 504)


def test_dropped_connection(sim: RunningSimulator, client: httpx.Client) -> None:
    sim.set_faults(drop_rate=1.0)
    with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
        client.get(MEMOS)
    assert sim.request_count(MEMOS, status=DROPPED) == 1
    sim.set_faults(drop_rate=0.0)
    assert client.get(MEMOS).status_code == 200  # the client reconnects


def test_scripted_server_errors_then_success(sim: RunningSimulator, client: httpx.Client) -> None:
    sim.script_fault("server_error", count=2, path=LOOKUP, status=502)
    assert client.get(MEMOS).status_code == 200  # other paths unaffected
    assert [client.post(LOOKUP, json=[]).status_code for _ in range(3)] == [502, 502, 200]
    sim.script_fault("drop", path=MEMOS)
    with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
        client.get(MEMOS)
    assert sim.faults.pending_script() == 0


def test_malformed_cuts_a_processed_success_body_short(sim: RunningSimulator, client: httpx.Client) -> None:
    sim.script_fault("malformed", count=1, path=MEMOS)
    broken = client.get(MEMOS)
    assert broken.status_code == 200 and broken.headers["content-type"].startswith("application/json")
    assert int(broken.headers["content-length"]) == len(broken.content) > 0
    with pytest.raises(ValueError):
        broken.json()
    whole = client.get(MEMOS)  # the script is used up: the next answer is whole
    assert whole.json() and broken.content == whole.content[: len(whole.content) // 2]
    assert sim.request_count(MEMOS, status=200) == 2 and sim.faults.pending_script() == 0
    # error answers pass unchanged; the fault is used up by them too
    sim.script_fault("malformed", path="/service/shipment/{id}")
    missing = client.get("/service/shipment/999999999")
    assert missing.status_code == 404 and missing.json()["status"] == 404
    with pytest.raises(ValueError, match="unknown fault kind"):
        sim.script_fault("garbled")


def test_latency_with_jitter(sim: RunningSimulator, client: httpx.Client) -> None:
    client.get(MEMOS)  # warm the connection
    sim.set_faults(latency_ms=150, latency_jitter_ms=20)
    started = time.perf_counter()
    assert client.get(MEMOS).status_code == 200
    assert time.perf_counter() - started >= 0.13  # waited (an upper bound would time the machine, not the fault)
    decided = [FaultInjector(FaultConfig(latency_ms=150, latency_jitter_ms=20, seed=seed)).decide(MEMOS).latency_s
               for seed in range(50)]
    assert all(0.13 <= latency <= 0.17 for latency in decided) and len(set(decided)) > 1  # 150 ms, jitter 20 ms


def test_fault_paths_limit_faults(sim: RunningSimulator, client: httpx.Client) -> None:
    sim.set_faults(server_error_rate=1.0, paths=frozenset({LOOKUP}))
    assert client.get(MEMOS).status_code == 200
    assert client.post(LOOKUP, json=[]).status_code in (502, 503, 504)


def test_fault_decisions_are_deterministic_per_seed() -> None:
    config = FaultConfig(seed=11, rate_limit_rate=0.2, server_error_rate=0.2, drop_rate=0.1, latency_jitter_ms=5)

    def sequence() -> list[tuple[str | None, int | None, float]]:
        injector = FaultInjector(config)
        return [(d.kind, d.status, d.latency_s) for d in (injector.decide(LOOKUP) for _ in range(200))]

    first = sequence()
    assert first == sequence()
    kinds = [k for k, _, _ in first]
    assert {None, "drop", "rate_limit", "server_error"} == set(kinds)
    assert 20 <= kinds.count("rate_limit") <= 60
    other = FaultInjector(config.replace(seed=12))
    assert [other.decide(LOOKUP).kind for _ in range(200)] != kinds


def test_fault_config_validation() -> None:
    with pytest.raises(ValueError, match="must not exceed 1"):
        FaultConfig(rate_limit_rate=0.6, server_error_rate=0.6)
    with pytest.raises(ValueError, match="within"):
        FaultConfig(drop_rate=1.5)
    with pytest.raises(ValueError, match="unknown fault setting"):
        FaultConfig().replace(colour="red")


class _SpyChanges:
    """Delegates to a real store's changes and records modify_shipments calls."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.modify_calls: list[int] = []

    def modify_shipments(self, count: int) -> list[int]:
        self.modify_calls.append(count)
        return list(self.inner.modify_shipments(count))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_records_modified_while_paging(sim_factory: Callable[..., RunningSimulator]) -> None:
    store = make_test_store()
    spy = store.changes = _SpyChanges(store.changes)
    faults = FaultConfig(seed=3, modify_during_paging_rate=1.0, modify_during_paging_count=2)
    sim = sim_factory(store=store, faults=faults)
    with authed_client(sim) as client:
        params = {"order_by": ["LAST_MODIFIED_DATE", "LAST_MODIFIED_TIME"], "page_size": 5}
        assert client.post(LOOKUP, json=[], params={**params, "page_no": 0}).status_code == 200
        assert spy.modify_calls == []
        assert client.post(LOOKUP, json=[], params={**params, "page_no": 1}).status_code == 200
        assert spy.modify_calls == [2]
        assert client.post(MEMOS, params={"page_no": 1}).status_code == 405
        assert client.get(MEMOS, params={"page_no": 1}).status_code == 200
        assert spy.modify_calls == [2]  # only shipment lookups
        sim.set_faults(modify_during_paging_rate=0.5)
        for _ in range(20):
            client.post(LOOKUP, json=[], params={**params, "page_no": 2})
        assert 3 <= len(spy.modify_calls) - 1 <= 17


def test_control_surface_is_off_by_default(shared_sim: RunningSimulator) -> None:
    for method, path in [("GET", "/_control/stats"), ("POST", "/_control/shipments/modify?count=1")]:
        response = httpx.request(method, f"{shared_sim.base_url}{path}")
        assert response.status_code == 404
        assert response.json()["status"] == 404


def test_control_surface(sim_factory: Callable[..., RunningSimulator]) -> None:
    sim = sim_factory(control=True)
    base = f"{sim.base_url}/_control"
    headers = {"Authorization": f"Bearer {sim.issue_token()}"}
    assert httpx.get(f"{sim.base_url}{MEMOS}", headers=headers).status_code == 200
    stats = httpx.get(f"{base}/stats").json()
    assert stats["total"] == 1
    assert stats["requests"] == [{"method": "GET", "path": MEMOS, "status": 200, "count": 1}]

    modified = httpx.post(f"{base}/shipments/modify", params={"count": 2}).json()["ids"]
    assert len(modified) == 2
    created = httpx.post(f"{base}/shipments/create", params={"count": 1}).json()["ids"]
    assert len(created) == 1
    assert httpx.get(f"{sim.base_url}/service/shipment/{created[0]}", headers=headers).status_code == 200
    deleted = httpx.post(f"{base}/shipments/delete", params={"count": 1}).json()["ids"]
    assert httpx.get(f"{sim.base_url}/service/shipment/{deleted[0]}", headers=headers).status_code == 404
    assert httpx.post(f"{base}/shipments/touch", json={"ids": modified[:1]}).status_code == 200
    assert httpx.post(f"{base}/shipments/explode", params={"count": 1}).status_code == 404
    assert httpx.post(f"{base}/shipments/modify", params={"count": "x"}).status_code == 400

    before = httpx.get(f"{base}/clock").json()["now"]
    after = httpx.post(f"{base}/clock/advance", params={"seconds": 3600}).json()["now"]
    assert after > before

    faults = httpx.put(f"{base}/faults", json={"rate_limit_rate": 1.0, "retry_after_s": 2}).json()
    assert faults["rate_limit_rate"] == 1.0
    assert httpx.get(f"{sim.base_url}{MEMOS}", headers=headers).status_code == 429
    assert httpx.get(f"{base}/stats").status_code == 200  # never faulted
    assert httpx.put(f"{base}/faults", json={"rate_limit_rate": 7}).status_code == 400
    assert httpx.post(f"{base}/faults/reset").json()["rate_limit_rate"] == 0.0
    assert httpx.post(f"{base}/faults/script", json={"kind": "server_error", "status": 504}).status_code == 200
    assert httpx.get(f"{sim.base_url}{MEMOS}", headers=headers).status_code == 504
    assert httpx.post(f"{base}/faults/script", json={"kind": "malformed"}).status_code == 200
    malformed = httpx.get(f"{sim.base_url}{MEMOS}", headers=headers)
    assert malformed.status_code == 200
    with pytest.raises(ValueError):
        malformed.json()

    assert httpx.post(f"{base}/tokens/revoke").status_code == 200
    assert httpx.get(f"{sim.base_url}{MEMOS}", headers=headers).status_code == 401
    assert httpx.put(f"{base}/auth", json={"token_lifetime_s": 60}).json() == {"token_lifetime_s": 60.0}

    assert httpx.delete(f"{base}/stats").json()["total"] == 0
    assert sim.request_count() == 0


def test_every_route_has_a_kind_of_call_for_the_tail(sim: RunningSimulator) -> None:
    templates = {route.path for route in sim.app._routes}
    assert len(templates) > 15
    assert not sorted(t for t in templates if call_kind(t) is None)


def test_the_tail_answers_a_share_of_one_kind_late_and_correctly(sim: RunningSimulator, client: httpx.Client) -> None:
    sim.set_faults(tail_rate=0.25, tail_ms=400, tail_kinds=["shipment"], seed=3)
    ids = [row["id"] for row in client.post(LOOKUP, json=[], params={"page_size": 40}).json()]
    assert len(ids) == 40
    slow = []
    for shipment_id in ids:
        began = time.monotonic()
        response = client.get(f"/service/shipment/{shipment_id}")
        assert response.status_code == 200 and response.json()["id"] == shipment_id
        slow.append(time.monotonic() - began >= 0.4)
    assert 3 <= sum(slow) <= 20  # about a quarter of 40
    # the same seed and requests meet the same tail
    again = FaultInjector(FaultConfig(tail_rate=0.25, tail_ms=400, tail_kinds=frozenset({"shipment"}), seed=3))
    first = FaultInjector(FaultConfig(tail_rate=0.25, tail_ms=400, tail_kinds=frozenset({"shipment"}), seed=3))
    assert {first.decide(MEMOS).latency_s for _ in range(200)} == {0.0}  # another kind: never in the tail
    decided = [first.decide("/service/shipment/{id}").latency_s for _ in range(200)]
    assert decided == [again.decide("/service/shipment/{id}").latency_s for _ in range(200)]
    assert 20 <= sum(1 for s in decided if s == 0.4) <= 80
    # the tail has a random sequence of its own: the other faults' decisions do not move
    plain = FaultInjector(FaultConfig(server_error_rate=0.3, seed=5))
    tailed = FaultInjector(FaultConfig(server_error_rate=0.3, seed=5, tail_rate=0.5, tail_ms=1))
    assert [plain.decide(LOOKUP).kind for _ in range(100)] == [tailed.decide(LOOKUP).kind for _ in range(100)]
    with pytest.raises(ValueError, match="unknown tail_kinds"):
        FaultConfig(tail_kinds=frozenset({"documents"}))
