"""``freight_history`` written by real syncs over HTTP: one shipment's arrival estimate moved three times
across four syncs (the second killed with SIGKILL mid-walk and run again), then its actual; the
point-in-time macros against copies of the working database saved after each sync; a deletion."""

from __future__ import annotations

import datetime as dt
import os
import shutil
from pathlib import Path
from typing import Any

import duckdb

from freight_pipeline.client._core import decoded
from freight_pipeline.client.endpoints import SHIPMENT_AIR_MAIN_CARRIAGE, SHIPMENT_SEA_MAIN_CARRIAGE, Endpoint
from freight_pipeline.config import ServiceSettings
from freight_pipeline.datetimes import parse_iso_datetime, to_utc
from freight_pipeline.normalize.tables import FREIGHT_TABLES
from freight_pipeline.simulator.server import RunningSimulator, running_simulator
from freight_pipeline.sync.client_source import ClientSource
from freight_pipeline.sync.runner import sync_all
from freight_pipeline.warehouse.codes_order import location_codes_in_canonical_order
from freight_pipeline.warehouse.embedded import EmbeddedDuckDB
from freight_pipeline.warehouse.history import EVENT_VERSIONS, LEG_VERSIONS, SHIPMENT_VERSIONS
from freight_pipeline_tests.sync.conftest import SyncFn, query, work_db
from freight_pipeline_tests.sync.crash_sync import CrashSync
from freight_pipeline_tests.sync.expected import assert_converged
from freight_pipeline_tests.sync.settings import RECONCILE_SETTINGS
from freight_pipeline_tests.warehouse.history_checks import assert_contiguous

ARRIVAL = "POD_ARRIVAL"
ESTIMATES = (  # the estimate set before each of the first three syncs, then the actual before the fourth
    {"date": "2026-12-04", "time": "10:00:00", "zone_offset": "+01:00"},
    {"date": "2026-12-05", "time": "16:30:00", "zone_offset": "+01:00"},
    {"date": "2026-12-05", "time": "09:00:00", "zone_offset": "+08:00"},
)
ACTUAL = {"date": "2026-12-05", "time": "11:15:00", "zone_offset": "+01:00"}
KILL_AFTER = "written in this batch, cursor at"
"""The crash child's line after a walk batch that moved the cursor committed."""


def utc(date_time: dict[str, str]) -> dt.datetime:
    return dt.datetime.fromisoformat(f"{date_time['date']}T{date_time['time']}{date_time['zone_offset']}").astimezone(
        dt.UTC)


def stamp_of(sim: RunningSimulator, shipment_id: int) -> dt.datetime:
    """The shipment's last-modified instant at the service (UTC)."""
    return to_utc(parse_iso_datetime(sim.store.reader.get_base_shipment(shipment_id)["last_modified_date_time"]))


def arrival_shipment(sim: RunningSimulator) -> int:
    """A sea shipment with an arrival estimate and no arrival yet (the seed is fixed: it has one)."""
    for shipment_id in sorted(sim.store.reader.live_shipment_ids()):
        events = {(e["event"], e["type"]) for e in sim.store.reader.get_events(shipment_id)}
        if (sim.store.reader.get_base_shipment(shipment_id)["mode_of_transport"] == "SEA"
                and (ARRIVAL, "ESTIMATED") in events and (ARRIVAL, "ACTUAL") not in events):
            return shipment_id
    raise AssertionError("seed 23 has no sea shipment awaiting its arrival")


def killed_mid_walk(sim: RunningSimulator, data_dir: Path, run_id: str, log: Path) -> None:
    """A sync in a process of its own (tiny batches), killed right after its first walk batch committed (held
    there: on a fast machine it had committed every batch before the kill landed). Its shipments fetched one at
    a time: with several at once, the batches after the first could commit before it, and the one that moved
    the cursor first be the last (then the kill left nothing to the rerun: a CI run of 331b080 met it)."""
    env = {**os.environ, "FREIGHT_BASE_URL": sim.base_url, "FREIGHT_USERNAME": sim.username,
           "FREIGHT_PASSWORD": sim.password}
    proc = CrashSync(env, data_dir, run_id, log, hold=KILL_AFTER, in_order=True)
    for line in proc.stdout:
        if KILL_AFTER in line:
            break
    assert proc.poll() is None, f"the sync finished before it could be killed (see {log})"
    proc.kill()
    proc.wait(timeout=60)


def saved_copy(data_dir: Path, copies: Path, sim: RunningSimulator, name: str) -> tuple[Path, dt.datetime]:
    """A copy of the working database as the sync left it, and the instant it stands for: the service's
    clock, or the newest version it holds when a change was stamped ahead of a standing clock. The clock
    then moves on, so every later change is stamped after that instant."""
    copy = copies / f"{name}.duckdb"
    shutil.copyfile(work_db(data_dir), copy)
    with duckdb.connect(str(copy), read_only=True) as con:
        newest = con.execute("SELECT max(last_modified_at) FROM freight.shipments").fetchall()[0][0]
    instant = max(sim.store.clock.now().astimezone(dt.UTC), newest)
    sim.advance_clock(60)
    return copy, instant


def content(columns: tuple[str, ...]) -> str:
    return ", ".join(f'"{c}"' for c in columns)


SHIPMENT_COLUMNS = content(tuple(c.name for c in SHIPMENT_VERSIONS.columns[:-5]))
EVENT_COLUMNS = content(tuple(c.name for c in EVENT_VERSIONS.columns[:-5]))
LEG_COLUMNS = content(tuple(c.name for c in LEG_VERSIONS.columns[:-5]))
LEGS_HELD = """
    SELECT shipment_id, 'AIR' AS mode, position, leg_no, airline_awb_code AS carrier_code, airline_name AS carrier_name,
           flight_no AS voyage, origin_unloc, origin_iata, destination_unloc, destination_iata, origin_estimated_at,
           origin_actual_at, origin_revised_at, destination_estimated_at, destination_actual_at, destination_revised_at
    FROM saved.freight.air_main_carriage_legs
    UNION ALL
    SELECT shipment_id, 'SEA', position, leg_no, imo_code, vessel_name, voyage_no, origin_unloc, origin_iata,
           destination_unloc, destination_iata, origin_estimated_at, origin_actual_at, origin_revised_at,
           destination_estimated_at, destination_actual_at, destination_revised_at
    FROM saved.freight.sea_main_carriage_legs"""


def as_of_against_copy(database: Path, copy: Path, instant: dt.datetime) -> dict[str, tuple[int, int, int]]:
    """Per subject: (rows the copy held, rows only the point-in-time read gives, rows only the copy held)."""
    with duckdb.connect(str(database), read_only=True) as con:
        con.execute("SET TimeZone = 'UTC'")
        con.execute(f"ATTACH '{copy}' AS saved (READ_ONLY)")
        pairs = {
            "shipments": (f"SELECT {SHIPMENT_COLUMNS} FROM freight_history.shipments_as_of($at)",
                          f"SELECT {SHIPMENT_COLUMNS} FROM saved.freight.shipments"),
            "events": (f"SELECT {EVENT_COLUMNS} FROM freight_history.events_as_of($at)",
                       f"SELECT {EVENT_COLUMNS} FROM saved.freight.shipment_events"),
            "legs": (f"SELECT {LEG_COLUMNS} FROM freight_history.legs_as_of($at)", LEGS_HELD),
        }
        found = {}
        for name, (as_of, held) in pairs.items():
            found[name] = tuple(
                con.execute(f"SELECT count(*) FROM ({sql})", {"at": instant} if "$at" in sql else {}).fetchall()[0][0]
                for sql in (held, f"({as_of}) EXCEPT ALL ({held})", f"({held}) EXCEPT ALL ({as_of})"))
    return found


def arrival_versions(database: Path, shipment_id: int) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(database), read_only=True) as con:
        return con.execute(
            "SELECT type, event_at, valid_from, valid_to, deleted, run_id FROM freight_history.event_versions "
            "WHERE shipment_id = ? AND event = ? ORDER BY type DESC, valid_from", [shipment_id, ARRIVAL]).fetchall()


def test_estimates_moved_across_four_syncs_one_killed_and_the_point_in_time_read(tmp_path: Path) -> None:
    data_dir, copies = tmp_path / "data", tmp_path / "copies"
    copies.mkdir()
    with running_simulator(shipments=30, seed=23) as sim:
        service = ServiceSettings(sim.base_url, sim.username, sim.password)

        reported: dict[str, dict[str, int]] = {}

        def sync(run_id: str) -> None:
            results, _ = sync_all(service, data_dir, RECONCILE_SETTINGS, backend=EmbeddedDuckDB(), run_id=run_id,
                                  publish_after=False)
            shipments_run = next(r for r in results if r.stream == "shipments")
            reported[run_id] = {t: n for t, n in shipments_run.extra.get("versions", {}).items() if n}

        shipment = arrival_shipment(sim)
        others = [i for i in sorted(sim.store.reader.live_shipment_ids()) if i != shipment]

        def background(count: int) -> None:
            """Other shipments change, stamped after the estimate (later in the walk)."""
            sim.advance_clock(1)
            sim.touch_shipments(others[:count])
            others.append(others.pop(0))
            sim.create_shipments(1)

        stamps, saved = [], []
        for number, estimate in enumerate(ESTIMATES, start=1):
            sim.store.events.update(shipment, ARRIVAL, "ESTIMATED", {"date_time": estimate})
            stamps.append(stamp_of(sim, shipment))
            background(12)
            if number == 2:
                killed_mid_walk(sim, data_dir, "sync-2-killed", tmp_path / "child.log")
                with duckdb.connect(str(work_db(data_dir)), read_only=True) as con:
                    assert con.execute("SELECT status FROM freight_meta.sync_runs WHERE run_id = 'sync-2-killed' "
                                       "AND stream = 'shipments'").fetchall() == [("running",)]
                sync("sync-2")
            else:
                sync(f"sync-{number}")
            saved.append(saved_copy(data_dir, copies, sim, f"after-{number}"))
        sim.store.events.create(shipment, "ACTUAL", {"event": ARRIVAL, "date_time": ACTUAL})
        stamps.append(stamp_of(sim, shipment))
        background(5)
        sync("sync-4")
        saved.append(saved_copy(data_dir, copies, sim, "after-4"))

        held = work_db(data_dir)
        # three estimate versions, one after the other, and the actual; the killed run committed the
        # batch holding the second estimate (its first), so its rerun re-read it and added nothing
        assert arrival_versions(held, shipment) == [
            ("ESTIMATED", utc(ESTIMATES[0]), stamps[0], stamps[1], False, "sync-1"),
            ("ESTIMATED", utc(ESTIMATES[1]), stamps[1], stamps[2], False, "sync-2-killed"),
            ("ESTIMATED", utc(ESTIMATES[2]), stamps[2], None, False, "sync-3"),
            ("ACTUAL", utc(ACTUAL), stamps[3], None, False, "sync-4"),
        ]
        with duckdb.connect(str(held), read_only=True) as con:
            assert_contiguous(con)
            rerun_wrote = con.execute("SELECT rows_written FROM freight_meta.sync_runs WHERE run_id = 'sync-2' "
                                      "AND stream = 'shipments'").fetchall()[0][0]
        assert rerun_wrote > 0, "the kill left nothing for the rerun: it did not land mid-walk"

        for copy, instant in saved:
            found = as_of_against_copy(held, copy, instant)
            assert all(rows > 0 and extra == missing == 0 for rows, extra, missing in found.values()), (copy, found)

        # a deletion: every subject of the shipment ends at the run's start, closing what it follows
        sim.store.changes.delete_shipment_ids([shipment])
        sync("sync-5")
        copy, _ = saved_copy(data_dir, copies, sim, "after-5")
        with duckdb.connect(str(held), read_only=True) as con:
            started = con.execute("SELECT min(started_at) FROM freight_meta.sync_runs WHERE run_id = 'sync-5'"
                                  ).fetchall()[0][0]
            ended = max(started, stamps[3] + dt.timedelta(microseconds=1))  # after its last version, at the latest
            for table in ("shipment_versions", "event_versions", "leg_versions"):
                ending = con.execute(f"SELECT DISTINCT deleted, valid_from FROM freight_history.{table} "
                                     "WHERE shipment_id = ? AND run_id = 'sync-5'", [shipment]).fetchall()
                alive = con.execute(f"SELECT count(*) FROM freight_history.{table} "
                                    "WHERE shipment_id = ? AND valid_to IS NULL AND NOT deleted", [shipment]).fetchall()
                assert (ending, alive) == ([(True, ended)], [(0,)]), table
            assert_contiguous(con)
            recorded = con.execute("SELECT run_id, table_name, count(*) FROM (" + " UNION ALL ".join(
                f"SELECT run_id, '{table}' AS table_name FROM freight_history.{table}"
                for table in ("shipment_versions", "event_versions", "leg_versions")) + ") GROUP BY ALL").fetchall()
        by_run: dict[str, dict[str, int]] = {}
        for run_id, table, count in recorded:
            by_run.setdefault(run_id, {})[table] = count
        assert reported == {run_id: by_run.get(run_id, {}) for run_id in reported}  # what each run says it added
        after = max(ended, sim.store.clock.now().astimezone(dt.UTC))
        found = as_of_against_copy(held, copy, after)
        assert all(extra == missing == 0 for _, extra, missing in found.values()), found


class ReversedLegs(ClientSource):
    """A service answering each main carriage's legs in reverse (no ORDER BY behind the endpoint)."""

    async def get_shipment_records(self, endpoint: Endpoint, shipment_id: int) -> Any:
        answer = await super().get_shipment_records(endpoint, shipment_id)
        legs = endpoint in (SHIPMENT_AIR_MAIN_CARRIAGE, SHIPMENT_SEA_MAIN_CARRIAGE)
        return decoded(answer)[::-1] if legs else answer


def test_legs_answered_in_another_order_are_no_new_versions(small_sim: RunningSimulator, work_sync: SyncFn,
                                                             tmp_path: Path) -> None:
    work_sync()
    versions = query(work_db(tmp_path), f"SELECT count(*) FROM {LEG_VERSIONS.qualified_name}")
    legged = [r[0] for r in query(work_db(tmp_path), "SELECT DISTINCT shipment_id FROM freight.sea_main_carriage_legs "
                                  "GROUP BY shipment_id HAVING count(*) > 1")]
    assert legged, "the seed should give shipments several sea legs"
    small_sim.touch_shipments(legged)  # read again, legs and all, answered in reverse
    small_sim.advance_clock(1)
    work_sync(source_factory=ReversedLegs)
    assert query(work_db(tmp_path), f"SELECT count(*) FROM {LEG_VERSIONS.qualified_name}") == versions
    assert_converged(small_sim.store, work_db(tmp_path))


CODES_COLUMNS = [(spec.qualified_name, column.name) for spec in FREIGHT_TABLES for column in spec.columns
                 if column.name.endswith("location_codes")]
"""Every column of a location's codes, enumerated from the declarations."""


def test_location_codes_an_older_release_stored_as_sent_are_put_in_their_order_once(
        small_sim: RunningSimulator, work_sync: SyncFn, tmp_path: Path) -> None:
    """A warehouse of a release that stored each location's codes as sent (here: reversed): the upgrade puts them
    in the order this release writes them, once, in every such column, so the table holds one text for the same
    codes (a shipment no run reads again kept the order sent for good) and adds no version."""
    work_sync()
    versions = {t.qualified_name: query(work_db(tmp_path), f"SELECT count(*) FROM {t.qualified_name}")
                for t in (EVENT_VERSIONS, LEG_VERSIONS, SHIPMENT_VERSIONS)}
    reversed_rows = {}
    with duckdb.connect(str(work_db(tmp_path))) as con:  # as the older release wrote them: in the order sent
        for table, column in CODES_COLUMNS:
            where = f"json_array_length({column}) > 1"
            reversed_rows[(table, column)] = con.execute(f"SELECT count(*) FROM {table} WHERE {where}").fetchone()[0]
            con.execute(f"UPDATE {table} SET {column} = to_json(list_reverse(from_json({column}, '[\"JSON\"]'))) "
                        f"WHERE {where}")
        con.execute("DELETE FROM freight_meta.sync_state WHERE stream = 'warehouse_schema'")  # an older schema
    assert len(CODES_COLUMNS) >= 6 and sum(1 for n in reversed_rows.values() if n) >= 4, reversed_rows
    work_sync()  # opened by this release: put in order, then a quiet run
    assert_converged(small_sim.store, work_db(tmp_path))
    assert {t: query(work_db(tmp_path), f"SELECT count(*) FROM {t}") for t in versions} == versions
    with duckdb.connect(str(work_db(tmp_path))) as con:
        assert location_codes_in_canonical_order(con, FREIGHT_TABLES) == []  # once: nothing left to reorder


def test_legs_an_older_release_positioned_as_sent_are_renumbered_once_with_their_history(
        small_sim: RunningSimulator, work_sync: SyncFn, tmp_path: Path) -> None:
    """A warehouse of a release that positioned legs as the service sent them (here: in reverse): the upgrade
    renumbers its rows and every version, so the first re-read under this release adds no false revision."""
    work_sync(source_factory=ReversedLegs)
    versions = query(work_db(tmp_path), f"SELECT count(*) FROM {LEG_VERSIONS.qualified_name}")
    with duckdb.connect(str(work_db(tmp_path))) as con:  # as the older release wrote them: in the order sent
        for table, scope in (("freight.sea_main_carriage_legs", "shipment_id"),
                             ("freight.air_main_carriage_legs", "shipment_id"),
                             (LEG_VERSIONS.qualified_name, "shipment_id, mode")):
            current = " AND valid_to IS NULL AND NOT deleted" if "history" in table else ""
            con.execute(f"CREATE TEMP TABLE sent AS SELECT * REPLACE ((SELECT count(*) FROM {table} c WHERE "
                        f"{' AND '.join(f'c.{k} = t.{k}' for k in scope.split(', '))}{current}) + 1 - position "
                        f"AS position) FROM {table} t")
            con.execute(f"DELETE FROM {table}")
            con.execute(f"INSERT INTO {table} SELECT * FROM sent")
            con.execute("DROP TABLE sent")
        con.execute("DELETE FROM freight_meta.sync_state WHERE stream = 'warehouse_schema'")  # an older schema
    legged = [r[0] for r in query(work_db(tmp_path), "SELECT shipment_id FROM freight.sea_main_carriage_legs "
                                  "GROUP BY shipment_id HAVING count(*) > 1")]
    assert legged and query(work_db(tmp_path), "SELECT count(*) FROM freight.sea_main_carriage_legs "
                            "WHERE position = 1 AND leg_no > 1") != [(0,)], "the rows should stand as sent"
    small_sim.touch_shipments(legged)
    small_sim.advance_clock(1)
    work_sync(source_factory=ReversedLegs)  # opened by this release: renumbered, then read again
    assert query(work_db(tmp_path), f"SELECT count(*) FROM {LEG_VERSIONS.qualified_name}") == versions
    assert_converged(small_sim.store, work_db(tmp_path))
