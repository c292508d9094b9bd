"""A service whose clock has no UTC offset (``naive_clock``): every date-time it sends comes without
one, as the wall clock of its zone (Europe/Berlin here, summer time included), and means the same
instant as the same store's date-time with offsets; the LAST_MODIFIED_DATE / _TIME lookup keys are
that wall clock's parts. Over HTTP, against a store of the same seed served with offsets."""

from __future__ import annotations

import base64
import datetime as dt
import re
from collections.abc import Iterator
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import pytest

from freight_pipeline.datetimes import parse_datetime_object
from freight_pipeline.simulator.config import SimulatorConfig
from freight_pipeline.simulator.server import RunningSimulator, running_simulator
from freight_pipeline.simulator.store import SimulatorStore
from freight_pipeline_tests.simulator.conftest import SMALL_SHIPMENTS, authed_client, lookup_all

ZONE_NAME = "Europe/Berlin"
ZONE = ZoneInfo(ZONE_NAME)
LOOKUP = "/service/shipment/lookup"
WITH_OFFSET = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")
WITHOUT_OFFSET = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}$")
ANY_OFFSET_IN_TEXT = re.compile(r"T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})\"")
SERVICE_DAY_KEYS = frozenset({"month_of_service", "latest_shipment_date", "lc_expiry"})
"""Dates of the service's own day: in its zone, so an hour's difference in summer may move them."""


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[RunningSimulator, RunningSimulator]]:
    """The same store (seed, size, start instant) served with offsets (+01:00) and naive (Europe/Berlin)."""
    with (
        running_simulator(shipments=SMALL_SHIPMENTS, seed=7, control=True) as plain,
        running_simulator(shipments=SMALL_SHIPMENTS, seed=7, control=True, naive_clock=ZONE_NAME) as naive,
    ):
        yield plain, naive


def _in_zone(text: str) -> dt.datetime:
    """A naive date-time read as the wall clock of the zone."""
    assert WITHOUT_OFFSET.match(text), text
    return dt.datetime.fromisoformat(text).replace(tzinfo=ZONE)


class Comparison:
    """Walks a document with offsets and its naive counterpart together, counting the date-times."""

    def __init__(self) -> None:
        self.strings = 0
        self.objects = 0
        self.summer = 0  # date-times whose wall clock is in Berlin's summer time (+02:00)

    def same(self, plain: Any, naive: Any, path: str = "") -> None:
        if isinstance(plain, str) and WITH_OFFSET.match(plain):
            assert _in_zone(naive) == dt.datetime.fromisoformat(plain), (path, plain, naive)
            self.strings += 1
            self.summer += _in_zone(naive).utcoffset() == dt.timedelta(hours=2)
        elif isinstance(plain, dict) and plain.keys() >= {"date", "time", "zone_offset"}:
            self._date_time(plain, naive, path)
        elif isinstance(plain, dict):
            assert isinstance(naive, dict) and naive.keys() == plain.keys(), path
            for key, value in plain.items():
                if key not in SERVICE_DAY_KEYS:
                    self.same(value, naive[key], f"{path}.{key}")
        elif isinstance(plain, list):
            assert isinstance(naive, list) and len(naive) == len(plain), path
            for i, (a, b) in enumerate(zip(plain, naive, strict=True)):
                self.same(a, b, f"{path}[{i}]")
        else:
            assert naive == plain, (path, plain, naive)

    def _date_time(self, plain: dict[str, Any], naive: dict[str, Any], path: str) -> None:
        assert naive.keys() == plain.keys() and naive["zone_offset"] is None, (path, naive)
        assert plain["zone_offset"] is not None, path
        theirs, ours = parse_datetime_object(plain), parse_datetime_object({**naive, "zone_offset": "+00:00"})
        assert theirs is not None and ours is not None
        if theirs.instant is None:  # a date-only estimate keeps its date
            assert (naive["date"], naive["time"]) == (plain["date"], None), path
            return
        assert type(naive["time"]) is type(plain["time"]), path  # the form (string or object) is kept
        assert ours.instant is not None
        local = ours.instant.replace(tzinfo=ZONE)
        assert local == theirs.instant, (path, plain, naive)
        if theirs.until is not None:
            assert ours.until is not None and ours.until.replace(tzinfo=ZONE) == theirs.until, (path, plain, naive)
        self.objects += 1
        self.summer += local.utcoffset() == dt.timedelta(hours=2)


def _no_offsets(response: httpx.Response) -> Any:
    """The body, after checking that no date-time in it has an offset and every zone_offset is null."""
    assert response.status_code == 200, response.text
    assert not ANY_OFFSET_IN_TEXT.search(response.text), ANY_OFFSET_IN_TEXT.search(response.text)
    body = response.json()

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if "zone_offset" in value:
                assert value["zone_offset"] is None, value
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)
        elif isinstance(value, str) and WITH_OFFSET.match(value):
            raise AssertionError(f"a date-time with an offset: {value}")

    walk(body)
    return body


def _sample_ids(sim: RunningSimulator) -> list[int]:
    """Shipments of every mode of transport, with events and main legs."""
    ids: dict[str, list[int]] = {}
    for state in sim.store.reader.shipment_key_rows():
        ids.setdefault(state["MODE_OF_TRANSPORT"], []).append(int(state["ID"]))
    return sorted(i for mode in sorted(ids) for i in ids[mode][:4])


def test_shipments_events_and_legs_carry_no_offset_and_mean_the_same_instants(
    servers: tuple[RunningSimulator, RunningSimulator],
) -> None:
    plain_sim, naive_sim = servers
    compared = Comparison()
    with authed_client(plain_sim) as plain, authed_client(naive_sim) as naive:
        for shipment_id in _sample_ids(naive_sim):
            for path in ("", "/events", "/airmaincarriage", "/seamaincarriage"):
                url = f"/service/shipment/{shipment_id}{path}"
                theirs = plain.get(url)
                assert theirs.status_code == 200, theirs.text
                compared.same(theirs.json(), _no_offsets(naive.get(url)), url)
        page = {"page_size": 500}
        compared.same(plain.post(LOOKUP, json=[], params=page).json(), _no_offsets(naive.post(LOOKUP, json=[],
                                                                                               params=page)))
    assert compared.strings > 100 and compared.objects > 100, vars(compared)
    assert compared.summer > 10, "no summer-time stamp: the zone's rules are not shown to be followed"


def test_efiles_and_code_conversions_carry_no_offset(servers: tuple[RunningSimulator, RunningSimulator]) -> None:
    plain_sim, naive_sim = servers
    compared = Comparison()
    with authed_client(plain_sim) as plain, authed_client(naive_sim) as naive:
        for efile_id in range(1, 16):
            url = f"/service/efile/{efile_id}"
            compared.same(plain.get(url, params={"cascade": "true"}).json(),
                          _no_offsets(naive.get(url, params={"cascade": "true"})), url)
        compared.same(plain.post("/service/efile/lookup", json=[]).json(),
                      _no_offsets(naive.post("/service/efile/lookup", json=[])))
        for conversion_id in (1, 2, 3, 5, 8):
            url = f"/service/basicdata/codeconverter/{conversion_id}"
            if plain.get(url).status_code == 200:
                compared.same(plain.get(url).json(), _no_offsets(naive.get(url)), url)
        scroll = "/service/basicdata/codeconverter"
        compared.same(plain.get(scroll, params={"page_size": 500}).json(),
                      _no_offsets(naive.get(scroll, params={"page_size": 500})))

        # stored now: the clock's wall clock in the zone (2026-11-01T08:00 CET)
        document = base64.b64encode(b"%PDF-1.4 naive").decode()
        stored = naive.post("/service/efile", json={"document": document, "references": []})
        assert stored.status_code == 201, stored.text
        assert stored.json()["created_date_time"] == "2026-11-01T08:00:00"
        assert _no_offsets(naive.get(f"/service/efile/{stored.json()['id']}"))["created_date_time"] == (
            "2026-11-01T08:00:00"
        )
    assert compared.strings > 300, vars(compared)


def test_an_event_written_with_an_offset_is_kept_as_the_zones_wall_clock() -> None:
    with running_simulator(shipments=30, seed=7, naive_clock=ZONE_NAME) as naive_sim, authed_client(naive_sim) as naive:
        shipment_id = naive_sim.store.reader.live_shipment_ids()[20]
        codes = {(e["event"], e["type"]) for e in naive.get(f"/service/shipment/{shipment_id}/events").json()}
        code = next(c for c in ("VGM_CLOSING", "DIFF_BL_DATE", "GATE_OUT") if (c, "ESTIMATED") not in codes)
        written = {"event": code, "date_time": {"date": "2026-07-01", "time": "14:30:00", "zone_offset": "+05:30",
                                                "until": None}}
        created = naive.post(f"/service/shipment/{shipment_id}/event", params={"type": "ESTIMATED"}, json=written)
        assert created.status_code == 201, created.text
        # 14:30 +05:30 is 09:00 UTC, 11:00 in Berlin's summer time
        kept = {"date": "2026-07-01", "time": "11:00:00", "zone_offset": None, "until": None}
        assert created.json()["date_time"] == kept
        events = _no_offsets(naive.get(f"/service/shipment/{shipment_id}/events"))
        assert next(e for e in events if (e["event"], e["type"]) == (code, "ESTIMATED"))["date_time"] == kept
        assert _no_offsets(naive.get(f"/service/shipment/{shipment_id}"))["last_modified_date_time"] == (
            "2026-11-01T08:00:00"
        )


def test_lookups_by_the_last_modified_wall_clock_find_each_shipment(
    servers: tuple[RunningSimulator, RunningSimulator],
) -> None:
    _, naive_sim = servers
    with authed_client(naive_sim) as naive:
        for shipment_id in _sample_ids(naive_sim)[::3]:
            stamp = naive.get(f"/service/shipment/{shipment_id}").json()["last_modified_date_time"]
            date, time = stamp.split("T")
            at = [{"key": "LAST_MODIFIED_DATE", "value": date},
                  {"key": "LAST_MODIFIED_TIME", "match_mode": "EQUALS", "value": time}]
            found = lookup_all(naive, LOOKUP, at)
            assert shipment_id in {s["id"] for s in found}
            assert {s["last_modified_date_time"] for s in found} == {stamp}
        # the walk a sync makes: everything from a wall-clock second on, ordered by the wall clock
        order = {"order_by": ["LAST_MODIFIED_DATE", "LAST_MODIFIED_TIME"], "order_mode": ["ASC", "ASC"]}
        since = [{"key": "LAST_MODIFIED_DATE", "match_mode": "GE", "value": "2026-10-01"}]
        walked = [s["last_modified_date_time"] for s in lookup_all(naive, LOOKUP, since, **order)]
        assert walked and walked == sorted(walked)
        expected = sorted(s.lm_date + "T" + s.lm_time for s in naive_sim.store.reader.shipment_key_rows()
                          if s.lm_date >= "2026-10-01")
        assert walked == expected


@pytest.fixture
def fall_back() -> Iterator[RunningSimulator]:
    """A naive Berlin server whose clock starts at 01:30 CEST, an hour and a half before summer time ends."""
    with running_simulator(SimulatorConfig(shipments=30, seed=5, control=True, naive_clock=ZONE_NAME,
                                           start="2026-10-25T01:30:00")) as sim:
        yield sim


def test_the_repeated_hour_is_written_as_the_ambiguous_wall_clock(fall_back: RunningSimulator) -> None:
    sim = fall_back
    assert httpx.get(f"{sim.base_url}/_control/clock").json()["now"] == "2026-10-25T01:30:00+02:00"
    first, second = sim.store.reader.live_shipment_ids()[:2]
    stamps = []
    for shipment_id, at in ((first, "2026-10-25T02:30:00+02:00"), (second, "2026-10-25T02:30:00+01:00")):
        touched = httpx.post(f"{sim.base_url}/_control/shipments/touch", json={"ids": [shipment_id], "at": at})
        assert touched.status_code == 200, touched.text
        stamps.append(touched.json()["last_modified_date_time"])
    assert stamps == ["2026-10-25T02:30:00", "2026-10-25T02:30:00"]  # an hour apart, written alike
    assert httpx.get(f"{sim.base_url}/_control/clock").json()["now"] == "2026-10-25T02:30:00+01:00"
    with authed_client(sim) as client:
        at_0230 = [{"key": "LAST_MODIFIED_DATE", "value": "2026-10-25"},
                   {"key": "LAST_MODIFIED_TIME", "match_mode": "EQUALS", "value": "02:30:00"}]
        assert sorted(s["id"] for s in lookup_all(client, LOOKUP, at_0230)) == sorted([first, second])
        for shipment_id in (first, second):
            assert _no_offsets(client.get(f"/service/shipment/{shipment_id}"))["last_modified_date_time"] == (
                "2026-10-25T02:30:00"
            )


def test_the_default_clock_is_unchanged_and_a_naive_store_is_deterministic() -> None:
    plain = SimulatorStore(shipments=20, seed=3)
    assert plain.reader.get_shipment(10001)["last_modified_date_time"].endswith("+01:00")
    one, two = (SimulatorStore(shipments=20, seed=3, naive_clock=ZONE_NAME) for _ in range(2))
    assert list(one.reader.expected_documents()) == list(two.reader.expected_documents())


@pytest.mark.parametrize("zone", ["Mars/Olympus_Mons", "europe/berlin", "", "../etc/passwd", "Europe"])
def test_a_bad_zone_is_refused(zone: str) -> None:
    with pytest.raises(ValueError, match="IANA"):
        SimulatorConfig(naive_clock=zone)
    with pytest.raises(ValueError, match="IANA"):
        SimulatorStore(shipments=1, naive_clock=zone)


def test_a_naive_clock_takes_no_offset_changes_and_shapes_only_a_store_it_builds() -> None:
    with pytest.raises(ValueError, match="own rules"):
        SimulatorConfig(naive_clock=ZONE_NAME, offset_changes=(("2026-10-25T03:00:00+02:00", "+01:00"),))
    with pytest.raises(ValueError, match="SimulatorStore"), running_simulator(
        SimulatorStore(shipments=1), naive_clock=ZONE_NAME
    ):
        pass
