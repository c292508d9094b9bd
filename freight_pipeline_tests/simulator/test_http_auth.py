"""Token endpoint, bearer checks, permissions (A16) and the webhook's basic auth (A17)."""

from __future__ import annotations

import base64
import time
from collections.abc import Callable

import httpx
import jwt
import pytest

from freight_pipeline.simulator.config import SimulatorConfig, UserConfig, default_users
from freight_pipeline.simulator.server import RunningSimulator
from freight_pipeline_tests.simulator.conftest import token_for

LOOKUP = "/service/shipment/lookup"


def _error(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["status"] == status
    assert isinstance(body["error"], str) and body["error"]
    return str(body["message"])


def test_token_response_shape_and_claims(shared_sim: RunningSimulator) -> None:
    response = httpx.post(f"{shared_sim.base_url}/auth/token", json={"username": "demo", "password": "demo-password"})
    assert response.status_code == 200
    body = response.json()
    assert body["token_type"] == "Bearer"
    assert body["expires_in"] == 86400
    claims = jwt.decode(body["access_token"], options={"verify_signature": False})
    assert claims["sub"] == "demo"
    assert claims["exp"] - claims["iat"] in (86400, 86401)
    assert abs(claims["iat"] - time.time()) < 5


@pytest.mark.parametrize(
    ("body", "status", "fragment"),
    [
        ({"username": "demo", "password": "wrong"}, 401, "bad credentials"),
        ({"username": "nobody", "password": "demo-password"}, 401, "bad credentials"),
        ({"username": "demo"}, 400, "password is required"),
        ({"password": "x"}, 400, "username is required"),
        (["demo", "demo-password"], 400, "JSON object"),
    ],
)
def test_token_rejections(shared_sim: RunningSimulator, body: object, status: int, fragment: str) -> None:
    response = httpx.post(f"{shared_sim.base_url}/auth/token", json=body)
    assert fragment in _error(response, status)
    assert "demo-password" not in response.text


def test_token_malformed_json(shared_sim: RunningSimulator) -> None:
    response = httpx.post(
        f"{shared_sim.base_url}/auth/token", content=b"{username:", headers={"Content-Type": "application/json"}
    )
    assert "malformed JSON" in _error(response, 400)


def test_wrong_password_makes_exactly_one_counted_request(sim: RunningSimulator) -> None:
    httpx.post(f"{sim.base_url}/auth/token", json={"username": "demo", "password": "nope"})
    assert sim.request_count("/auth/token") == 1
    assert sim.request_count("/auth/token", status=401) == 1
    assert sim.request_count(status=200) == 0


@pytest.mark.parametrize(
    ("header", "fragment"),
    [
        (None, "missing bearer token"),
        ("Bearer", "malformed Authorization"),
        ("Basic ZGVtbzpkZW1vLXBhc3N3b3Jk", "malformed Authorization"),
        ("Bearer not-a-jwt", "invalid token"),
    ],
)
def test_bad_bearer_tokens_get_401(shared_sim: RunningSimulator, header: str | None, fragment: str) -> None:
    headers = {"Authorization": header} if header else {}
    response = httpx.post(f"{shared_sim.base_url}{LOOKUP}", json=[], headers=headers)
    assert fragment in _error(response, 401)
    assert response.headers["WWW-Authenticate"].startswith("Bearer")


def test_token_signed_with_another_secret_is_rejected(shared_sim: RunningSimulator) -> None:
    forged = jwt.encode({"sub": "demo", "exp": int(time.time()) + 60}, "not-the-secret-" * 4, algorithm="HS256")
    response = httpx.get(f"{shared_sim.base_url}/service/shipment/1", headers={"Authorization": f"Bearer {forged}"})
    assert "invalid token" in _error(response, 401)


def test_expired_token_gets_401(sim_factory: Callable[..., RunningSimulator]) -> None:
    sim = sim_factory(token_lifetime_s=1)
    token = token_for(sim)
    headers = {"Authorization": f"Bearer {token}"}
    assert httpx.post(f"{sim.base_url}{LOOKUP}", json=[], headers=headers).status_code == 200
    claims = jwt.decode(token, options={"verify_signature": False})
    time.sleep(max(0.0, claims["exp"] - time.time()) + 0.05)
    response = httpx.post(f"{sim.base_url}{LOOKUP}", json=[], headers=headers)
    assert "expired" in _error(response, 401)
    # a new token works again
    fresh = {"Authorization": f"Bearer {token_for(sim)}"}
    assert httpx.post(f"{sim.base_url}{LOOKUP}", json=[], headers=fresh).status_code == 200


def test_revoked_tokens_get_401(sim: RunningSimulator) -> None:
    headers = {"Authorization": f"Bearer {sim.issue_token()}"}
    assert httpx.get(f"{sim.base_url}/service/shipment/memo", headers=headers).status_code == 200
    sim.revoke_tokens()
    assert httpx.get(f"{sim.base_url}/service/shipment/memo", headers=headers).status_code == 401


def test_permissions_restrict_endpoints(sim_factory: Callable[..., RunningSimulator]) -> None:
    reader = UserConfig("reader", "reader-password", frozenset({"shipment:lookup", "memo:read"}))
    sim = sim_factory(config=SimulatorConfig(users=(*default_users(), reader)))
    headers = {"Authorization": f"Bearer {token_for(sim, 'reader', 'reader-password')}"}
    base = sim.base_url
    assert httpx.post(f"{base}{LOOKUP}", json=[], headers=headers).status_code == 200
    assert httpx.get(f"{base}/service/shipment/memo", headers=headers).status_code == 200
    denied = httpx.get(f"{base}/service/shipment/1", headers=headers)
    assert "shipment:retrieve" in _error(denied, 403)
    assert httpx.get(f"{base}/service/basicdata/codeconverter", headers=headers).status_code == 403
    assert httpx.delete(f"{base}/service/efile/1", headers=headers).status_code == 403
    # the webhook user holds no bearer permissions at all
    webhook_token = token_for(sim, sim.webhook_username, sim.webhook_password)
    response = httpx.post(f"{base}{LOOKUP}", json=[], headers={"Authorization": f"Bearer {webhook_token}"})
    assert "shipment:lookup" in _error(response, 403)


def test_unknown_permission_names_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown permission"):
        UserConfig("x", "y", frozenset({"shipment:everything"}))


def _basic(username: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()}


def test_webhook_basic_auth_and_role(sim: RunningSimulator) -> None:
    url = f"{sim.base_url}/external/webhook"
    ok = httpx.post(url, json={"hello": 1}, headers=_basic(sim.webhook_username, sim.webhook_password))
    assert ok.status_code == 200
    assert ok.json() == {"received": True, "id": ok.json()["id"]}
    assert isinstance(ok.json()["id"], int)
    assert "missing basic" in _error(httpx.post(url, json={}), 401)
    wrong = httpx.post(url, json={}, headers=_basic(sim.webhook_username, "wrong"))
    assert "bad credentials" in _error(wrong, 401)
    assert wrong.headers["WWW-Authenticate"].startswith("Basic")
    no_role = httpx.post(url, json={}, headers=_basic(sim.username, sim.password))
    assert "WEBHOOK" in _error(no_role, 403)
    bearer = httpx.post(url, json={}, headers={"Authorization": f"Bearer {sim.issue_token()}"})
    assert bearer.status_code == 401
    not_object = httpx.post(url, json=[1, 2], headers=_basic(sim.webhook_username, sim.webhook_password))
    assert "JSON object" in _error(not_object, 400)
