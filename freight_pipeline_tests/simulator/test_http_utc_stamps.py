"""A service writing its date-times in UTC (``utc_stamps``: ``2026-11-01T09:15:30Z``, as a Java service serialising
an ``Instant`` does) while its lookup keys hold its wall clock at its offset. Over HTTP, against a store of the same
seed writing its offset (the default)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest

from freight_pipeline.simulator.config import SimulatorConfig
from freight_pipeline.simulator.server import RunningSimulator, running_simulator
from freight_pipeline.simulator.store import SimulatorStore
from freight_pipeline_tests.simulator.conftest import SMALL_SHIPMENTS, authed_client, lookup_all

LOOKUP = "/service/shipment/lookup"
EVERY = [{"key": "ID", "match_mode": "GT", "value": "0"}]


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[RunningSimulator, RunningSimulator]]:
    with (
        running_simulator(SimulatorStore(shipments=SMALL_SHIPMENTS, seed=7)) as local,
        running_simulator(SimulatorStore(shipments=SMALL_SHIPMENTS, seed=7, utc_stamps=True)) as utc,
    ):
        yield local, utc


def test_every_date_time_is_the_same_instant_in_utc_and_the_keys_stay_the_wall_clock(
    servers: tuple[RunningSimulator, RunningSimulator],
) -> None:
    local, utc = servers
    with authed_client(local) as plain, authed_client(utc) as in_utc:
        stamps = {item["id"]: item for item in lookup_all(plain, LOOKUP, EVERY)}
        utc_stamps = {item["id"]: item for item in lookup_all(in_utc, LOOKUP, EVERY)}
        first = min(stamps)
        document, utc_document = plain.get(f"/service/shipment/{first}").json(), in_utc.get(
            f"/service/shipment/{first}").json()
        at = dt.datetime.fromisoformat(stamps[first]["last_modified_date_time"])
        keys = [{"key": "LAST_MODIFIED_DATE", "match_mode": "EQUALS", "value": at.date().isoformat()},
                {"key": "LAST_MODIFIED_TIME", "match_mode": "EQUALS", "value": at.time().isoformat()},
                {"key": "ID", "match_mode": "EQUALS", "value": str(first)}]
        found = [item["id"] for item in lookup_all(in_utc, LOOKUP, keys)]
    assert stamps.keys() == utc_stamps.keys() and len(stamps) == SMALL_SHIPMENTS
    for shipment_id, item in utc_stamps.items():
        text = item["last_modified_date_time"]
        assert text.endswith("Z")
        assert dt.datetime.fromisoformat(text) == dt.datetime.fromisoformat(
            stamps[shipment_id]["last_modified_date_time"])
    dated = [key for key, value in document.items() if key.endswith("_date_time") and isinstance(value, str)]
    assert dated and all(utc_document[key].endswith("Z") for key in dated)
    assert all(dt.datetime.fromisoformat(utc_document[key]) == dt.datetime.fromisoformat(document[key])
               for key in dated)
    assert found == [first]  # by its wall clock at +01:00, not the UTC text's


def test_a_naive_clock_cannot_write_utc() -> None:
    with pytest.raises(ValueError, match="naive clock writes no offset"):
        SimulatorConfig(naive_clock="Europe/Berlin", utc_stamps=True)
