"""The simulator plays a release change: ``--release`` and ``POST /_control/release`` switch the shape of
documents, events and air legs over HTTP, while the store keeps its one true shape."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from freight_pipeline.cli import build_parser
from freight_pipeline.simulator.cli import config_from_args
from freight_pipeline.simulator.config import SimulatorConfig
from freight_pipeline.simulator.releases import CURRENT, NEXT, RELEASES
from freight_pipeline.simulator.server import RunningSimulator
from freight_pipeline_tests.simulator.conftest import authed_client


def _air_shipment(client: httpx.Client) -> int:
    body = [{"key": "MODE_OF_TRANSPORT", "match_mode": "EQUALS", "value": "AIR"}]
    page = client.post("/service/shipment/lookup", json=body, params={"page_size": 5})
    assert page.status_code == 200, page.text
    return int(page.json()[0]["id"])


def test_release_flag_becomes_config(capsys: pytest.CaptureFixture[str]) -> None:
    assert config_from_args(build_parser().parse_args(["simulator"])).release == CURRENT
    assert config_from_args(build_parser().parse_args(["simulator", "--release", NEXT])).release == NEXT
    with pytest.raises(SystemExit):
        build_parser().parse_args(["simulator", "--release", "2030.1"])
    assert "invalid choice: '2030.1'" in capsys.readouterr().err
    with pytest.raises(ValueError, match="release must be one of"):
        SimulatorConfig(release="2030.1")


def test_the_control_route_switches_the_shape(sim_factory: Callable[..., RunningSimulator]) -> None:
    sim = sim_factory(control=True)
    with authed_client(sim) as client:
        air_id = _air_shipment(client)
        before = client.get(f"/service/shipment/{air_id}").json()
        events_before = client.get(f"/service/shipment/{air_id}/events").json()
        legs_before = client.get(f"/service/shipment/{air_id}/airmaincarriage").json()
        assert {"house_reference", "master_reference", "aes"} <= set(before)
        assert "emissions" not in before and legs_before and "flight_no" in legs_before[0]

        assert httpx.get(f"{sim.base_url}/_control/release").json() == {"release": CURRENT, "releases": list(RELEASES)}
        refused = httpx.post(f"{sim.base_url}/_control/release", json={"release": "2030.1"})
        assert refused.status_code == 400 and "release must be one of" in refused.json()["message"]
        switched = httpx.post(f"{sim.base_url}/_control/release", json={"release": NEXT})
        assert switched.status_code == 200 and switched.json()["release"] == NEXT
        assert sim.release == NEXT

        after = client.get(f"/service/shipment/{air_id}").json()
        assert after["house_bill_number"] == before["house_reference"]
        assert after["master_bill_number"] == before["master_reference"]
        assert not {"house_reference", "master_reference", "aes"} & set(after)
        assert set(after["emissions"]) == {"co2e_kg", "method", "scope"}
        assert {k: v for k, v in after.items() if k not in ("house_bill_number", "master_bill_number", "emissions")} \
            == {k: v for k, v in before.items() if k not in ("house_reference", "master_reference", "aes")}
        events_after = client.get(f"/service/shipment/{air_id}/events").json()
        assert all("reported_by" in event for event in events_after)
        assert [{k: v for k, v in e.items() if k != "reported_by"} for e in events_after] == events_before
        legs_after = client.get(f"/service/shipment/{air_id}/airmaincarriage").json()
        assert [leg["flight_number"] for leg in legs_after] == [leg["flight_no"] for leg in legs_before]
        assert not any("flight_no" in leg for leg in legs_after)
        listed = client.post("/service/shipment/lookup", json=[], params={"page_size": 3}).json()
        assert all("house_bill_number" in s and "house_reference" not in s for s in listed)
        # the store keeps its one shape: the oracle still reads the old field
        assert "house_reference" in sim.store.reader.get_shipment(air_id)

        sim.set_release(CURRENT)
        assert client.get(f"/service/shipment/{air_id}").json() == before
