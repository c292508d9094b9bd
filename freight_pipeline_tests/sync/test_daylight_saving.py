"""Summer time over HTTP: a service that stamps last-modified in its local wall clock with its offset (or in
UTC while its lookup keys hold that wall clock).

When summer time ends the wall clock repeats an hour (``02:30:00+02:00``, an hour later
``02:30:00+01:00``); when it starts, an hour is skipped. The walk stays in the service's own
date/time parts, but every decision that a held copy is current (overlap re-reads, the reconcile)
compares instants, so a second change at the same wall-clock second on the other side of the
switch is never taken for the first. Every table is exact after every run.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pytest

from freight_pipeline.datetimes import ServiceZone
from freight_pipeline.simulator.config import SimulatorConfig
from freight_pipeline.simulator.server import RunningSimulator, running_simulator
from freight_pipeline.simulator.store import SimulatorStore
from freight_pipeline.sync.changes import LookupKeysDisagree
from freight_pipeline.sync.settings import SyncSettings
from freight_pipeline.sync.shipments import STREAM as SHIPMENTS
from freight_pipeline_tests.sync.conftest import SyncFn, query, syncer, work_db
from freight_pipeline_tests.sync.expected import assert_converged
from freight_pipeline_tests.sync.settings import RECONCILE_SETTINGS, TEST_SETTINGS

FALL_BACK = "2026-10-25T03:00:00+02:00"
"""Central European summer time ends: 03:00 CEST becomes 02:00 CET."""
SPRING_FORWARD = "2027-03-28T02:00:00+01:00"
"""It starts: 02:00 CET becomes 03:00 CEST."""


def held_stamp(data_dir: Path, shipment_id: int) -> str:
    rows = query(work_db(data_dir), "SELECT document->>'last_modified_date_time' FROM freight_meta.raw_shipments "
                 "WHERE shipment_id = ?", [shipment_id])
    return rows[0][0]


def touch(sim: RunningSimulator, shipment_id: int, at: str) -> str:
    """A new version of ``shipment_id`` last modified at ``at`` (the clock set there first); its stamp (the same
    instant: in UTC from a service writing its stamps so)."""
    sim.set_clock(at)
    sim.touch_shipments([shipment_id])
    stamp = sim.store.reader.get_shipment(shipment_id)["last_modified_date_time"]  # type: ignore[attr-defined]
    assert dt.datetime.fromisoformat(stamp) == dt.datetime.fromisoformat(at), (stamp, at)
    return stamp


@pytest.fixture(params=[False, True], ids=["stamps-local", "stamps-utc"])
def fall_back_sim(request: pytest.FixtureRequest) -> Iterator[RunningSimulator]:
    """A service in Berlin's offsets; with ``stamps-utc`` it writes every date-time in UTC (``...Z``), its lookup
    keys still its wall clock (a Java service serialising instants)."""
    store = SimulatorStore(shipments=30, seed=3, start=dt.datetime.fromisoformat("2026-10-25T01:00:00+02:00"),
                           utc_offset="+02:00", offset_changes=((FALL_BACK, "+01:00"),), utc_stamps=request.param)
    with running_simulator(store) as running:
        yield running


def in_its_zone(sim: RunningSimulator, settings: SyncSettings) -> SyncSettings:
    """``settings`` in Berlin when ``sim`` writes its stamps in UTC: its keys hold Berlin's wall clock."""
    return settings.replaced(service_timezone="Europe/Berlin") if sim.store.clock.utc_stamps else settings


@pytest.mark.parametrize("settings", [TEST_SETTINGS, RECONCILE_SETTINGS], ids=["walk", "walk-and-reconcile"])
def test_two_changes_at_one_wall_clock_second_across_the_fall_back_are_both_synced(
    fall_back_sim: RunningSimulator, tmp_path: Path, settings: SyncSettings
) -> None:
    """With stamps in UTC the walk finds its keys in Berlin's wall clock (the zone set) and keys every stamp so
    (was: LookupKeysDisagree on the first run, nothing read)."""
    sim = fall_back_sim
    settings = in_its_zone(sim, settings)
    sync: SyncFn = syncer(sim, tmp_path, publish_after=False)
    ids = sorted(sim.store.reader.live_shipment_ids())  # type: ignore[attr-defined]
    target, others = ids[0], ids[1:]
    first = sync(settings)[SHIPMENTS]
    assert first.extra.get("lookup_keys_zone") == ("Europe/Berlin" if sim.store.clock.utc_stamps else None)
    stamp = touch(sim, target, "2026-10-25T02:30:00+02:00")
    touch(sim, others[0], "2026-10-25T02:45:00+02:00")  # the cursor ends past the first change
    sim.set_clock("2026-10-25T02:50:00+02:00")
    sync(settings)
    assert held_stamp(tmp_path, target) == stamp
    # the repeated hour: early in it, and the same wall-clock second as the first change, an hour later
    early = touch(sim, others[1], "2026-10-25T02:05:00+01:00")
    second = touch(sim, target, "2026-10-25T02:30:00+01:00")
    sim.set_clock("2026-10-25T02:40:00+01:00")
    result = sync(settings)[SHIPMENTS]
    assert held_stamp(tmp_path, target) == second  # caught by the walk itself, not left to a reconcile
    assert held_stamp(tmp_path, others[1]) == early
    assert result.extra.get("reconcile_refetched", 0) == 0
    assert_converged(sim.store, work_db(tmp_path))
    # and later changes in and after the repeated hour, each run exact
    for shipment_id, at in ((others[2], "2026-10-25T02:45:00+01:00"), (others[3], "2026-10-25T02:59:59+01:00"),
                            (target, "2026-10-25T03:00:00+01:00"), (others[4], "2026-10-25T03:20:00+01:00")):
        stamp = touch(sim, shipment_id, at)
        sim.advance_clock(1)
        sync(settings)
        assert held_stamp(tmp_path, shipment_id) == stamp
        assert_converged(sim.store, work_db(tmp_path))


@pytest.mark.parametrize(("zone", "local", "repeats"), [
    ("Europe/Berlin", "2026-10-25T02:00:00", True), ("Europe/Berlin", "2026-10-25T02:59:59", True),
    ("Europe/Berlin", "2026-10-25T01:59:59", False), ("Europe/Berlin", "2026-10-25T03:00:00", False),
    ("Europe/Berlin", "2027-03-28T02:30:00", False),  # the hour the spring-forward skips: no instant, not two
    ("America/New_York", "2026-11-01T01:30:00", True), ("UTC", "2026-10-25T02:30:00", False),
])
def test_a_wall_clock_time_repeats_only_in_the_hour_a_fall_back_repeats(zone: str, local: str, repeats: bool) -> None:
    assert ServiceZone(zone).repeats(dt.datetime.fromisoformat(local)) is repeats


def test_a_naive_clocks_second_change_at_one_wall_clock_second_in_the_repeated_hour_is_read(tmp_path: Path) -> None:
    """A service whose stamps carry no UTC offset (Berlin, the zone configured): an estimate moved at 02:20 summer
    time and synced, moved again at 02:20 winter time, an hour later and the same stamp's text. In the repeated hour
    a wall-clock second names two instants, so the held copy is not provably current: the walk reads it (was:
    skipped as current, the new estimate lost for good; the reconcile compares the same text)."""
    settings = TEST_SETTINGS.replaced(service_timezone="Europe/Berlin")
    config = SimulatorConfig(shipments=12, seed=5, control=True, naive_clock="Europe/Berlin",
                             start="2026-10-25T01:30:00")
    with running_simulator(config) as sim:
        sync: SyncFn = syncer(sim, tmp_path, publish_after=False)
        sync(settings)
        reader = sim.store.reader  # type: ignore[attr-defined]
        target, other = [i for i in sorted(reader.live_shipment_ids())
                         if any(e["event"] == "POD_ARRIVAL" for e in reader.get_events(i))][:2]

        def estimate(clock: str, arrival: str) -> None:
            sim.set_clock(clock)
            sim.store.changes.move_milestone(  # type: ignore[attr-defined]
                target, "POD_ARRIVAL", "ESTIMATED", int(dt.datetime.fromisoformat(arrival).timestamp()))

        estimate("2026-10-25T02:20:00+02:00", "2026-12-01T10:00:00+00:00")
        sim.set_clock("2026-10-25T02:50:00+02:00")
        sim.touch_shipments([other])  # the ceiling, and the cursor, past the first change
        sync(settings)
        first = held_stamp(tmp_path, target)
        estimate("2026-10-25T02:20:00+01:00", "2026-12-05T10:00:00+00:00")
        assert reader.get_shipment(target)["last_modified_date_time"] == first  # the same text
        sim.set_clock("2026-10-25T03:30:00+01:00")
        sim.touch_shipments([other])  # past the repeated hour: the offset's step back is seen, the hour re-read
        sync(settings)
        assert_converged(sim.store, work_db(tmp_path))


def test_a_change_the_walk_skipped_as_current_is_caught_by_the_reconcile(
    fall_back_sim: RunningSimulator, tmp_path: Path
) -> None:
    """The reconcile's own test of staleness: a held copy from before the switch, a listed version
    after it at the same wall-clock second, which the walk does not re-read (no overlap, no guard,
    and the newest wall-clock time still a change from before the switch)."""
    sim = fall_back_sim
    target, later = sorted(sim.store.reader.live_shipment_ids())[:2]  # type: ignore[attr-defined]
    touch(sim, target, "2026-10-25T02:30:00+02:00")
    touch(sim, later, "2026-10-25T02:45:00+02:00")
    sim.set_clock("2026-10-25T02:50:00+02:00")
    sync: SyncFn = syncer(sim, tmp_path, publish_after=False)
    sync(in_its_zone(sim, TEST_SETTINGS))
    second = touch(sim, target, "2026-10-25T02:30:00+01:00")
    sim.set_clock("2026-10-25T02:40:00+01:00")
    no_rereading = in_its_zone(sim, RECONCILE_SETTINGS).replaced(overlap=dt.timedelta(0),
                                                                 offset_step_guard=dt.timedelta(0))
    result = sync(no_rereading, streams=[SHIPMENTS])[SHIPMENTS]
    assert result.extra["reconcile_refetched"] == 1
    assert held_stamp(tmp_path, target) == second
    assert_converged(sim.store, work_db(tmp_path))


def test_the_spring_forward_skips_an_hour_and_loses_nothing(tmp_path: Path) -> None:
    store = SimulatorStore(shipments=30, seed=3, start=dt.datetime.fromisoformat("2027-03-28T01:00:00+01:00"),
                           utc_offset="+01:00", offset_changes=((SPRING_FORWARD, "+02:00"),))
    with running_simulator(store) as sim:
        sync: SyncFn = syncer(sim, tmp_path, publish_after=False)
        ids = sorted(store.reader.live_shipment_ids())
        sync(RECONCILE_SETTINGS)
        touch(sim, ids[0], "2027-03-28T01:59:59+01:00")
        sim.set_clock("2027-03-28T01:59:59+01:00")
        sync(RECONCILE_SETTINGS)
        touch(sim, ids[1], "2027-03-28T03:00:00+02:00")  # one second later
        touch(sim, ids[0], "2027-03-28T03:00:01+02:00")
        sim.set_clock("2027-03-28T03:05:00+02:00")
        result = sync(RECONCILE_SETTINGS)[SHIPMENTS]
        assert "dst_widening_minutes" not in result.extra  # nothing repeats when the clock jumps forward
        assert held_stamp(tmp_path, ids[0]) == "2027-03-28T03:00:01+02:00"
        assert held_stamp(tmp_path, ids[1]) == "2027-03-28T03:00:00+02:00"
        assert_converged(store, work_db(tmp_path))


LONDON = {"utc_offset": "+01:00", "offset_changes": (("2026-10-25T02:00:00+01:00", "+00:00"),)}
BERLIN = {"utc_offset": "+02:00", "offset_changes": ((FALL_BACK, "+01:00"),)}


@pytest.mark.parametrize(("offsets", "zone", "adapts"), [
    (LONDON, "Europe/London", True),  # its winter is UTC: the newest shipment tells nothing, its summer does
    (BERLIN, "Europe/Berlin", True),
    ({"utc_offset": "+01:00"}, "Europe/Berlin", False),  # keys at +01:00 all year: Berlin's in winter only
], ids=["london", "berlin", "keys-without-summer-time"])
def test_keys_of_a_zone_are_told_by_a_shipment_of_its_other_offset(
    tmp_path: Path, offsets: dict[str, object], zone: str, adapts: bool
) -> None:
    """Stamps in UTC (with milliseconds), the keys the service's wall clock, its history over the summer, a first sync
    in November: London's keys were taken for UTC's (they agree in winter) and every run failed (LookupKeysDisagree,
    the zone set already); keys that are the zone's in winter only were taken for the zone's, and a summer shipment
    was never read, in silence. The clock the keys hold is confirmed at a shipment of the zone's other offset."""
    store = SimulatorStore(shipments=40, seed=7, utc_stamps=True, fractional_stamps=True, **offsets)
    with running_simulator(store) as sim:
        sync: SyncFn = syncer(sim, tmp_path, publish_after=False)
        settings = TEST_SETTINGS.replaced(service_timezone=zone)
        if not adapts:
            with pytest.raises(LookupKeysDisagree, match=f"nor by {zone}'s wall clock"):
                sync(settings, streams=[SHIPMENTS])
            return
        assert sync(settings)[SHIPMENTS].extra["lookup_keys_zone"] == zone
        assert_converged(store, work_db(tmp_path))
