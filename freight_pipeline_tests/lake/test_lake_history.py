"""``freight_history`` in lake mode: the sync writes the versions into the DuckLake (which has no keys, so
a rerun adding nothing is the SQL's doing), and the point-in-time macros live in its catalog, read by
another connection. The syncs run the shipments stream alone: it writes every table the history follows
(the other streams' own lake runs are in ``test_lake_sync.py``)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from freight_pipeline.config import ServiceSettings
from freight_pipeline.datetimes import parse_iso_datetime, to_utc
from freight_pipeline.lake.backend import LakeBackend
from freight_pipeline.lake.connect import connect_lake
from freight_pipeline.lake.settings import LakeSettings
from freight_pipeline.simulator.server import running_simulator
from freight_pipeline.sync import shipments as shipments_stream
from freight_pipeline.sync.result import StreamResult
from freight_pipeline.sync.runner import sync_all
from freight_pipeline.sync.streams import SHIPMENTS
from freight_pipeline.warehouse.history import SUBJECTS, disagreeing_sql
from freight_pipeline_tests.sync.settings import TEST_SETTINGS
from freight_pipeline_tests.warehouse.history_checks import assert_contiguous

ARRIVAL = "POD_ARRIVAL"
MOVED = {"date": "2026-12-09", "time": "18:00:00", "zone_offset": "+01:00"}
STREAMS = (SHIPMENTS.name,)


def test_the_sync_writes_versions_into_the_lake_and_its_macros_read_them(tmp_path: Path) -> None:
    env = {"FREIGHT_LAKE_CATALOG_URI": f"sqlite:///{tmp_path}/catalog.sqlite",
           "FREIGHT_LAKE_DATA_URI": str(tmp_path / "lake-data")}
    lake = LakeSettings.configured(env)
    assert lake is not None
    backend = LakeBackend(lake)
    with running_simulator(shipments=12, seed=23) as sim:
        service = ServiceSettings(sim.base_url, sim.username, sim.password)
        shipment = next(i for i in sorted(sim.store.reader.live_shipment_ids())
                        if (ARRIVAL, "ESTIMATED") in {(e["event"], e["type"]) for e in sim.store.reader.get_events(i)})
        sync_all(service, tmp_path / "data", TEST_SETTINGS, backend=backend, streams=STREAMS, run_id="first")
        before = to_utc(parse_iso_datetime(sim.store.reader.get_base_shipment(shipment)["last_modified_date_time"]))
        sim.advance_clock(60)
        sim.store.events.update(shipment, ARRIVAL, "ESTIMATED", {"date_time": MOVED})
        moved_at = to_utc(parse_iso_datetime(sim.store.reader.get_base_shipment(shipment)["last_modified_date_time"]))
        sync_all(service, tmp_path / "data", TEST_SETTINGS, backend=backend, streams=STREAMS, run_id="second")
        counts = "SELECT " + ", ".join(f"(SELECT count(*) FROM freight_history.{table})"
                                       for table in ("shipment_versions", "event_versions", "leg_versions"))
        with connect_lake(lake, tmp_path / "scratch", "256MB", read_only=True) as con:
            held = con.execute(counts).fetchall()
        # nothing changed: nothing added
        sync_all(service, tmp_path / "data", TEST_SETTINGS, backend=backend, streams=STREAMS, run_id="third")

    with connect_lake(lake, tmp_path / "scratch", "256MB", read_only=True) as con:
        con.execute("SET TimeZone = 'UTC'")
        assert con.execute(counts).fetchall() == held
        estimates = con.execute(
            "SELECT valid_from, valid_to, run_id FROM freight_history.event_versions "
            "WHERE shipment_id = ? AND event = ? AND type = 'ESTIMATED' ORDER BY valid_from", [shipment, ARRIVAL]
        ).fetchall()
        assert [(row[1], row[2]) for row in estimates] == [(moved_at, "first"), (None, "second")]
        assert estimates[0][0] <= before < moved_at
        assert_contiguous(con)
        arrival = ("SELECT event_at FROM freight_history.events_as_of(CAST(? AS TIMESTAMPTZ)) "
                   "WHERE shipment_id = ? AND event = ? AND type = 'ESTIMATED'")
        assert con.execute(arrival, [moved_at, shipment, ARRIVAL]).fetchall() == [
            (dt.datetime(2026, 12, 9, 17, tzinfo=dt.UTC),)]
        assert con.execute(arrival, [moved_at - dt.timedelta(seconds=1), shipment, ARRIVAL]).fetchall() != [
            (dt.datetime(2026, 12, 9, 17, tzinfo=dt.UTC),)]
        now = "SELECT shipment_id, event, type, event_at, event_until, location_name, unloc, iata, un_country "
        assert con.execute(f"{now} FROM freight_history.events_as_of(CAST(? AS TIMESTAMPTZ)) ORDER BY ALL",
                           [moved_at]).fetchall() == con.execute(f"{now} FROM freight.shipment_events ORDER BY ALL"
                                                                 ).fetchall()


def test_a_reset_service_without_offsets_ends_exact_in_the_lake(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 32 in lake mode: a clock without offsets read in the service's zone, and the first sync after a
    reset (changes reverted, creations gone, ids reused) leaving the lake and its history equal to the service.
    Each run normalizes in a worker forked once it lists more than 10 (the share lowered from
    ``IN_PROCESS_UP_TO``): forked while the lake's connection is open, as a larger run's is."""
    monkeypatch.setattr(shipments_stream, "IN_PROCESS_UP_TO", 10)
    forked: list[object] = []
    lake = LakeSettings.configured({"FREIGHT_LAKE_CATALOG_URI": f"sqlite:///{tmp_path}/catalog.sqlite",
                                  "FREIGHT_LAKE_DATA_URI": str(tmp_path / "lake-data")})
    assert lake is not None
    backend = LakeBackend(lake)
    settings = TEST_SETTINGS.replaced(restore_probe=50, service_timezone="Europe/Berlin")
    with running_simulator(shipments=20, seed=5, control=True, naive_clock="Europe/Berlin") as sim:
        service = ServiceSettings(sim.base_url, sim.username, sim.password)

        def sync() -> list[StreamResult]:
            results, _ = sync_all(service, tmp_path / "data", settings, backend=backend, streams=STREAMS)
            forked.extend(r.extra["normalize_workers"] for r in results)
            return results

        sync()
        sim.advance_clock(60)
        sim.modify_shipments(8)
        created = sim.create_shipments(4)
        sim.advance_clock(60)
        sync()
        sim.reset_to_snapshot()
        sim.advance_clock(60)
        reused = sim.create_shipments(2)
        assert set(reused) <= set(created)
        results = sync()
        live = sorted(sim.store.reader.live_shipment_ids())
        stamps = {i: sim.store.reader.get_base_shipment(i)["last_modified_date_time"] for i in live}
    assert forked[:2] == [1, 1]  # 20 listed, then 12 and the overlap: forked in the first two runs
    shipments = next(r for r in results if r.stream == "shipments")
    assert any(n.startswith("the service's data went back") for n in shipments.notices)
    assert any("read in Europe/Berlin" in n for n in shipments.notices)
    with connect_lake(lake, tmp_path / "scratch", "256MB", read_only=True) as con:
        con.execute("SET TimeZone = 'UTC'")
        held = dict(con.execute("SELECT shipment_id, last_modified_at FROM freight.shipments").fetchall())
        assert sorted(held) == live
        berlin = ZoneInfo("Europe/Berlin")
        assert held == {i: dt.datetime.fromisoformat(text).replace(tzinfo=berlin).astimezone(dt.UTC)
                        for i, text in stamps.items()}
        assert {s.spec.name: con.execute(f"SELECT count(*) FROM ({disagreeing_sql(s)})").fetchall()[0][0]
                for s in SUBJECTS} == {s.spec.name: 0 for s in SUBJECTS}
        assert_contiguous(con)
