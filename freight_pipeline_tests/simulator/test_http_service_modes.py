"""Behaviours of real services played as fault modes: a page-size cap, forbidden path prefixes,
strict criteria, the other shape of E-File references."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from freight_pipeline.simulator.config import FaultConfig
from freight_pipeline.simulator.server import RunningSimulator

# (method, path, lookup body or None for a scroll): every paged endpoint of the service.
PAGED = [
    ("POST", "/service/shipment/lookup", []),
    ("POST", "/service/efile/lookup", []),
    ("POST", "/service/shipment/memo/lookup", []),
    ("POST", "/service/basicdata/codeconverter/lookup", []),
    ("GET", "/service/shipment/memo", None),
    ("GET", "/service/basicdata/codeconverter", None),
]


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
