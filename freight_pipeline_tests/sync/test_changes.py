"""The change walk (``sync.changes``) against a service stamping fractions of a second: its
``last_modified_date_time`` carries milliseconds and its ``LAST_MODIFIED_TIME`` criteria compare them
(``EQUALS t`` finds ``t.000`` only, ``GT t`` finds ``t.250``), ordering one second's rows by fraction. Over
HTTP (the simulator's ``fractional_stamps``) and against an in-memory service whose forms are checked."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from freight_pipeline.datetimes import ServiceZone
from freight_pipeline.simulator.config import FaultConfig
from freight_pipeline.simulator.server import RunningSimulator, running_simulator
from freight_pipeline.sync.changes import Criterion, LookupResult, WalkStats, ceiling_by, ceiling_of, walk_changes
from freight_pipeline.sync.cursor import BEGINNING, ShipmentKey
from freight_pipeline_tests.sync.conftest import SHIPMENTS, syncer, work_db
from freight_pipeline_tests.sync.expected import assert_converged

ZONE = ServiceZone()


@pytest.fixture
def fractional_sim() -> Iterator[RunningSimulator]:
    """A service stamping milliseconds, refusing the criterion forms the spec does not name."""
    with running_simulator(shipments=SHIPMENTS, seed=11, fractional_stamps=True,
                           faults=FaultConfig(strict_criteria=True)) as running:
        yield running


def test_a_service_stamping_milliseconds_converges_full_and_incremental(
    fractional_sim: RunningSimulator, tmp_path: Path
) -> None:
    """Pages of 25: bulk seconds (the generated history's, then 30 changes a second) cut mid-second by
    full pages whose rows stand in fraction order. It failed every run (LookupKeysDisagree: the newest shipment
    not found by ``TIME EQUALS`` its second)."""
    sync = syncer(fractional_sim, tmp_path, publish_after=False)
    first = sync()["shipments"]
    assert first.rows_read == SHIPMENTS
    assert_converged(fractional_sim.store, work_db(tmp_path))
    changed = set()
    for _ in range(3):  # three seconds (the clock stands: each change one second later)
        changed.update(fractional_sim.store.changes.modify_shipments(30))
    changed.update(fractional_sim.store.changes.create_shipments(10))
    second = sync()["shipments"]
    assert second.rows_read >= len(changed)
    assert_converged(fractional_sim.store, work_db(tmp_path))


# --- an in-memory service ------------------------------------------------------------------------------

TIME_FORMAT = "%H:%M:%S"


class Service:
    """Shipments ``id -> last_modified_date_time``; a lookup honouring AND-ed EQUALS / GT / GE / LT / LE on
    ``LAST_MODIFIED_DATE``, ``_TIME`` (compared with their milliseconds, a whole second as ``.000``) and ``ID``,
    the spec's forms only (``value``, a valid ``HH:MM:SS``), ordered as asked, ties by id, with ``X-Row-Count``."""

    def __init__(self, stamps: dict[int, str], unstamped: frozenset[int] = frozenset()) -> None:
        self.stamps, self.unstamped = stamps, unstamped  # answered without their stamp (the service keeps the keys)
        self.asked: list[list[Criterion]] = []

    def _field(self, shipment_id: int, key: str) -> Any:
        stamp = dt.datetime.fromisoformat(self.stamps[shipment_id])
        return {"LAST_MODIFIED_DATE": stamp.date().isoformat(),
                "LAST_MODIFIED_TIME": stamp.time().isoformat(timespec="milliseconds"), "ID": shipment_id}[key]

    @staticmethod
    def _value(criterion: Criterion) -> Any:
        assert set(criterion) == {"key", "match_mode", "value"}, criterion
        value = criterion["value"]
        if criterion["key"] == "ID":
            return int(value)
        if criterion["key"] == "LAST_MODIFIED_TIME":
            return dt.datetime.strptime(value, TIME_FORMAT).time().isoformat(timespec="milliseconds")  # refuses 24:..
        return dt.date.fromisoformat(value).isoformat()

    async def lookup(self, criteria: list[Criterion], order_by: list[str], order_mode: list[str],
                     page_size: int) -> LookupResult:
        self.asked.append(criteria)
        tests = {"EQUALS": lambda a, b: a == b, "GT": lambda a, b: a > b, "GE": lambda a, b: a >= b,
                 "LT": lambda a, b: a < b, "LE": lambda a, b: a <= b}
        found = sorted(i for i in self.stamps if all(
            tests[c["match_mode"]](self._field(i, c["key"]), self._value(c)) for c in criteria))
        for key, mode in reversed(list(zip(order_by, order_mode, strict=True))):
            found.sort(key=lambda i, k=key: self._field(i, k), reverse=mode == "DESC")
        return LookupResult([{"id": i} if i in self.unstamped else {"id": i, "last_modified_date_time": self.stamps[i]}
                             for i in found[:page_size]], len(found))

    def modes(self) -> set[str]:
        return {f"{c['key']} {c['match_mode']}" for criteria in self.asked for c in criteria}


async def _walk(service: Service, after: ShipmentKey = BEGINNING, page_size: int = 7,
                stats: WalkStats | None = None) -> list[ShipmentKey]:
    ceiling = await ceiling_of(service.lookup, ZONE, unstamped=stats.unstamped if stats else None)
    assert ceiling is not None
    return [key async for page in walk_changes(service.lookup, after, ceiling, ZONE, page_size=page_size,
                                               stats=stats) for key, _ in page]


def _stamps(second: str, ids: range, fraction: bool = True) -> dict[int, str]:
    """Shipments ``ids`` stamped in ``second`` (``YYYY-MM-DDTHH:MM:SS``), the higher the id the lower the fraction."""
    return {i: f"{second}.{(997 - 13 * n) % 1000 if fraction else 0:03d}+01:00" for n, i in enumerate(ids)}


# seconds of more rows than a page, their fractions against the ids' order; a day's last second; the next day
MANY = {**_stamps("2026-11-01T10:15:29", range(1, 4)), **_stamps("2026-11-01T10:15:30", range(10, 40)),
        **_stamps("2026-11-01T10:15:31", range(40, 49)), **_stamps("2026-11-01T23:59:59", range(50, 70)),
        **_stamps("2026-11-02T00:00:00", range(70, 75)), **_stamps("2026-11-02T08:00:00", range(75, 95))}


def _key_order(stamps: dict[int, str]) -> list[int]:
    return sorted(stamps, key=lambda i: (stamps[i][:19], i))


@pytest.mark.parametrize("page_size", [1, 7, 25, 500])
def test_seconds_of_more_rows_than_a_page_in_fraction_order_are_walked_whole(page_size: int) -> None:
    """A full page ending inside a second left the rows of lower ids that did not fit behind (and ``TIME EQUALS``
    found none of them): every shipment once, in key order, asked by the spec's forms (a day's last second
    without ``TIME LT 24:00:00``)."""
    service = Service(dict(MANY))
    walked = asyncio.run(_walk(service, page_size=page_size))
    assert [key.id for key in walked] == _key_order(MANY)
    assert walked == sorted(walked)
    assert "LAST_MODIFIED_TIME EQUALS" not in service.modes()


def test_a_walk_from_a_cursor_inside_a_fractional_second_yields_the_rest_of_it() -> None:
    service = Service(dict(MANY))
    after = ShipmentKey("2026-11-01", "10:15:30", 20)
    walked = asyncio.run(_walk(service, after=after, page_size=4))
    assert [key.id for key in walked] == [i for i in _key_order(MANY) if (MANY[i][:19], i) > (
        "2026-11-01T10:15:30", 20)]


def test_fractions_first_seen_in_the_current_second_have_it_walked_again() -> None:
    """The newest second all ``.000`` (a bulk import stamped whole), so the walk asks by whole seconds: ``TIME
    EQUALS t`` finds that second's ``.000`` rows, then ``TIME > t`` answers its others: the second is walked again
    as a range, without the ids already yielded."""
    stamps = {**_stamps("2026-11-01T10:15:30", range(1, 20)),
              **{i: "2026-11-01T10:15:30.000+01:00" for i in (5, 12, 25)},
              **_stamps("2026-11-01T10:15:31", range(30, 40)), **_stamps("2026-11-01T11:00:00", range(40, 45), False)}
    service = Service(stamps)
    walked = asyncio.run(_walk(service, after=ShipmentKey("2026-11-01", "10:15:30", 0), page_size=4))
    assert sorted(key.id for key in walked) == sorted(stamps)
    assert len(walked) == len(stamps)


def test_a_whole_second_service_is_asked_as_before() -> None:
    """No fraction on any stamp: ``TIME EQUALS`` / ``GT`` / ``LE``, as many lookups as ever."""
    whole = {i: stamp[:19] + stamp[23:] for i, stamp in MANY.items()}
    service = Service(whole)
    stats = WalkStats()
    walked = asyncio.run(_walk(service, page_size=7, stats=stats))
    assert [key.id for key in walked] == _key_order(whole)
    assert service.modes() == {"LAST_MODIFIED_DATE EQUALS", "LAST_MODIFIED_TIME EQUALS", "ID GT", "ID EQUALS",
                               "LAST_MODIFIED_TIME GT", "LAST_MODIFIED_TIME LE", "LAST_MODIFIED_DATE GT",
                               "LAST_MODIFIED_DATE LE"}
    assert stats.lookups == 18  # as the walk before fractions were known (the same queries)


def test_the_newest_shipment_stamped_with_a_fraction_is_found_by_its_second() -> None:
    """The per-run check asked ``TIME EQUALS`` the newest second, did not find ``10:15:30.250`` and failed every run
    (``LookupKeysDisagree``)."""
    service = Service({1: "2026-11-01T10:15:29.100+01:00", 2: "2026-11-01T10:15:30.250+01:00"})
    ceiling = asyncio.run(ceiling_of(service.lookup, ZONE))
    assert ceiling is not None and (ceiling.instant_text, ceiling.subsecond) == ("2026-11-01 10:15:30", True)
    assert service.asked[-1] == [
        {"key": "LAST_MODIFIED_DATE", "match_mode": "EQUALS", "value": "2026-11-01"},
        {"key": "LAST_MODIFIED_TIME", "match_mode": "GE", "value": "10:15:30"},
        {"key": "LAST_MODIFIED_TIME", "match_mode": "LT", "value": "10:15:31"},
        {"key": "ID", "match_mode": "EQUALS", "value": "2"}]


def test_a_future_ceiling_falls_back_to_the_fractional_second_due() -> None:
    """The newest stamp due by the pipeline's clock is in the bound's own second, at a fraction (``TIME LE t``
    left it out)."""
    service = Service({1: "2026-11-01T10:15:29.100+01:00", 2: "2026-11-01T10:15:30.250+01:00",
                       3: "2026-11-01T12:00:00.500+01:00"})
    ceiling = asyncio.run(ceiling_of(service.lookup, ZONE))
    assert ceiling is not None
    latest = dt.datetime.fromisoformat("2026-11-01T10:15:30.900+01:00")
    due = asyncio.run(ceiling_by(service.lookup, ceiling, latest, ZONE))
    assert due is not None and (due.instant_text, due.subsecond) == ("2026-11-01 10:15:30", True)


WHOLE = {1: "2026-11-01T10:00:00+01:00", **{i: "2026-11-01T10:00:01+01:00" for i in range(2, 12)},
         12: "2026-11-01T10:00:02+01:00"}


@pytest.mark.parametrize("page_size", [3, 5, 50])
@pytest.mark.parametrize("unstamped", [frozenset(range(5, 10)), frozenset({11, 12}), frozenset(range(2, 13))])
def test_shipments_answered_without_a_stamp_are_left_to_be_read_by_id_and_the_walk_goes_on(
    page_size: int, unstamped: frozenset[int],
) -> None:
    """More of them in one second than a page (the walk stopped: "full page without progress"), the two newest (the
    ceiling failed: CursorError), all but the oldest: the walk yields every other one and hands them on by id."""
    stats = WalkStats()
    walked = asyncio.run(_walk(Service(WHOLE, unstamped), page_size=page_size, stats=stats))
    assert [key.id for key in walked] == [i for i in _key_order(WHOLE) if i not in unstamped]
    assert set(stats.unstamped) == unstamped


def test_a_future_ceiling_falls_back_past_the_due_shipments_answered_without_a_stamp() -> None:
    """The newest shipments due by the pipeline's clock answered without a stamp: the ceiling is the newest stamped
    one due, and they are handed on by id (it failed: CursorError)."""
    stamps = {**WHOLE, 20: "2027-01-01T00:00:00+01:00"}  # stamped in the future
    service, unstamped = Service(stamps, frozenset({11, 12})), {}
    ceiling = asyncio.run(ceiling_of(service.lookup, ZONE, unstamped=unstamped))
    assert ceiling is not None and ceiling.instant_text == "2027-01-01 00:00:00"
    latest = dt.datetime.fromisoformat("2026-11-01T10:00:05+01:00")
    due = asyncio.run(ceiling_by(service.lookup, ceiling, latest, ZONE, unstamped))
    assert due is not None and due.instant_text == "2026-11-01 10:00:01" and set(unstamped) == {11, 12}
