"""A service stamping milliseconds (``fractional_stamps``): a shipment's ``last_modified_date_time`` and its
``LAST_MODIFIED_TIME`` carry them, and the lookup's criteria on ``LAST_MODIFIED_TIME`` compare them. Over HTTP,
against a store of the same seed stamping whole seconds (the default, unchanged)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from freight_pipeline.simulator.config import FaultConfig
from freight_pipeline.simulator.server import RunningSimulator, running_simulator
from freight_pipeline.simulator.store import SimulatorStore
from freight_pipeline_tests.simulator.conftest import SMALL_SHIPMENTS, authed_client, lookup_all

LOOKUP = "/service/shipment/lookup"
WHOLE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}[+-]\d{2}:\d{2}$")
MILLIS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}[+-]\d{2}:\d{2}$")


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[RunningSimulator, RunningSimulator]]:
    """The same store served stamping whole seconds and milliseconds (strict criteria: the forms the spec names)."""
    strict = FaultConfig(strict_criteria=True)
    with (
        running_simulator(shipments=SMALL_SHIPMENTS, seed=7, control=True, faults=strict) as whole,
        running_simulator(shipments=SMALL_SHIPMENTS, seed=7, control=True, faults=strict,
                          fractional_stamps=True) as fractional,
    ):
        yield whole, fractional


def _crit(key: str, mode: str, value: str) -> dict[str, str]:
    return {"key": key, "match_mode": mode, "value": value}


EVERY = [_crit("ID", "GT", "0")]
"""Every shipment, in a form strict criteria take (they refuse a lookup without a criterion)."""


def _ids(client: httpx.Client, criteria: list[Any], **params: Any) -> list[int]:
    return [item["id"] for item in lookup_all(client, LOOKUP, criteria, **params)]


def test_stamps_carry_milliseconds_in_the_seconds_of_the_whole_second_store(
    servers: tuple[RunningSimulator, RunningSimulator],
) -> None:
    whole, fractional = servers
    with authed_client(whole) as plain, authed_client(fractional) as fine:
        stamps = {item["id"]: item["last_modified_date_time"] for item in lookup_all(plain, LOOKUP, EVERY)}
        finer = {item["id"]: item["last_modified_date_time"] for item in lookup_all(fine, LOOKUP, EVERY)}
        document = plain.get(f"/service/shipment/{min(stamps)}").json()
        finer_document = fine.get(f"/service/shipment/{min(stamps)}").json()
    assert stamps.keys() == finer.keys() and len(stamps) == SMALL_SHIPMENTS
    assert all(WHOLE.match(stamp) for stamp in stamps.values())  # the default: whole seconds (A8)
    assert all(MILLIS.match(stamp) for stamp in finer.values())
    assert all(finer[i][:19] + finer[i][23:] == stamps[i] for i in stamps)  # the same second, a fraction added
    assert len({stamp[19:23] for stamp in finer.values()}) > SMALL_SHIPMENTS // 2  # fractions of their own
    assert finer_document == {**document, "last_modified_date_time": finer[min(stamps)]}
    few_finer = SimulatorStore(shipments=3, seed=7, fractional_stamps=True).reader.snapshot_ids_and_versions()
    few = SimulatorStore(shipments=3, seed=7).reader.snapshot_ids_and_versions()
    assert few.keys() == few_finer.keys() and all(
        few_finer[i][0] == few[i][0] and MILLIS.match(few_finer[i][1]) and few_finer[i][1][:19] == few[i][1][:19]
        for i in few)


def test_time_criteria_compare_the_milliseconds(servers: tuple[RunningSimulator, RunningSimulator]) -> None:
    """A bulk second (many shipments, one change): ``EQUALS`` a whole second finds its ``.000`` stamp only, a
    range ``GE t AND LT t+1s`` all of it, ``GT t`` those past ``.000``; ordered by the time, by fraction."""
    _, fractional = servers
    with authed_client(fractional) as client:
        ids = sorted(item["id"] for item in lookup_all(client, LOOKUP, EVERY))[:30]
        changed = client.post("/_control/shipments/touch", json={"ids": ids}).json()
        stamp = changed["last_modified_date_time"]
        assert MILLIS.match(stamp)
        date, time = stamp[:10], stamp[11:19]
        next_second = f"{time[:6]}{int(time[6:8]) + 1:02d}"
        day = [_crit("LAST_MODIFIED_DATE", "EQUALS", date)]
        in_second = _ids(client, [*day, _crit("LAST_MODIFIED_TIME", "GE", time),
                                  _crit("LAST_MODIFIED_TIME", "LT", next_second)], order_by="LAST_MODIFIED_TIME")
        equals = _ids(client, [*day, _crit("LAST_MODIFIED_TIME", "EQUALS", time)])
        after = _ids(client, [*day, _crit("LAST_MODIFIED_TIME", "GT", time)])
        up_to = _ids(client, [*day, _crit("LAST_MODIFIED_TIME", "LE", time)])
        stamps = {item["id"]: item["last_modified_date_time"] for item in lookup_all(
            client, LOOKUP, [*day, _crit("LAST_MODIFIED_TIME", "GE", time)])}
    assert sorted(in_second) == sorted(changed["ids"]) and len(in_second) == 30
    at_zero = sorted(i for i in in_second if stamps[i][19:23] == ".000")
    assert equals == at_zero and sorted(after) == sorted(set(in_second) - set(at_zero))
    assert all(stamps[i][:19] == stamp[:19] for i in in_second) and set(up_to) >= set(at_zero)
    assert not set(up_to) & set(after)
    fractions = [stamps[i][19:23] for i in in_second]
    assert fractions == sorted(fractions) and in_second != sorted(in_second)  # by fraction, not by id
