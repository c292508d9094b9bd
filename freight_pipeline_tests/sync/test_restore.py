"""A service whose data goes back in time (the test server's nightly reset) and one whose clock sends no
UTC offset, over HTTP against the simulator (``POST /_control/reset``, ``--naive-clock``): the first sync
after a reset leaves every table, the documents and the history's current view equal to the service and
says what it found; without offsets every instant is read in the service's zone, never nulled, and the
run says so once; the history's equality check fails on a history made to disagree."""

from __future__ import annotations

import datetime as dt
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from zoneinfo import ZoneInfo

import duckdb

from freight_pipeline.checks.warehouse import Severity, evaluate_checks, warehouse_checks
from freight_pipeline.commands.report import read_report
from freight_pipeline.commands.status import render_status
from freight_pipeline.normalize.tables import FREIGHT_TABLES
from freight_pipeline.simulator.config import FaultConfig
from freight_pipeline.simulator.server import RunningSimulator, running_simulator
from freight_pipeline.sync.runner import naive_clock_notice
from freight_pipeline.sync.settings import SyncSettings
from freight_pipeline.warehouse.embedded import EmbeddedDuckDB
from freight_pipeline.warehouse.history import SUBJECTS, disagreeing_sql
from freight_pipeline.warehouse.store import Warehouse
from freight_pipeline_tests.sync.conftest import SyncFn, query, syncer, work_db
from freight_pipeline_tests.sync.expected import assert_converged
from freight_pipeline_tests.sync.test_history_sync import as_of_against_copy, saved_copy
from freight_pipeline_tests.warehouse.history_checks import assert_contiguous

# The defaults a new user runs with (reconcile every 6 hours, the probe on), in small pages and batches.
DEFAULTS = SyncSettings(page_size=25, fetch_batch_size=13, concurrency=8, retry_after=dt.timedelta(0))
BERLIN = "Europe/Berlin"


def history_disagreements(database: Path) -> dict[str, int]:
    with duckdb.connect(str(database), read_only=True) as con:
        found = {s.spec.name: con.execute(f"SELECT count(*) FROM ({disagreeing_sql(s)})").fetchall()[0][0]
                 for s in SUBJECTS}
    return {name: count for name, count in found.items() if count}


def failed_checks(
    database: Path, severity: Severity = Severity.ERROR, *, changed_only: bool = False,
) -> dict[str, dict[str, object]]:
    with duckdb.connect(str(database), read_only=True) as con:
        results = {check.label: (check, result)
                   for check, result in evaluate_checks(con, warehouse_checks(changed_only=changed_only))}
    return {label: dict(result.figures) for label, (check, result) in results.items()
            if not result.passed and check.severity is severity}


def test_the_first_sync_after_a_reset_leaves_the_warehouse_and_its_history_equal_to_the_service(
    tmp_path: Path,
) -> None:
    with running_simulator(shipments=60, seed=5, control=True) as sim:
        sync = syncer(sim, tmp_path, publish_after=False)
        sync(DEFAULTS)  # the first sync (from scratch) counts as a reconciliation: the next is 6 hours away
        sim.advance_clock(60)
        changed = sim.modify_shipments(15)
        created = sim.create_shipments(6)
        sim.advance_clock(60)
        sync(DEFAULTS)
        database = work_db(tmp_path)
        assert set(created) <= {r[0] for r in query(database, "SELECT shipment_id FROM freight.shipments")}

        reset = sim.reset_to_snapshot()  # the nightly reset: back to the start, id counters included
        assert set(reset["ids"]["vanished"]) == set(created) and set(reset["ids"]["reverted"]) == set(changed)
        sim.advance_clock(60)
        reused = sim.create_shipments(3)
        assert set(reused) <= set(created)  # ids handed out again
        remodified = sim.modify_shipments(4)
        sim.advance_clock(60)

        results = sync(DEFAULTS)
        shipments = results["shipments"]
        probe = shipments.extra["restore_probe"]
        assert probe["went_back"] and probe["vanished"]
        assert shipments.extra["reconcile_deleted"] == len(created) - len(reused)
        assert any(n.startswith("the service's data went back:") and n.endswith("reconciled")
                   for n in shipments.notices), shipments.notices
        assert_converged(sim.store, database)  # every table, the documents (E-File links) included
        assert history_disagreements(database) == {}
        assert failed_checks(database) == {}
        warned = failed_checks(database, Severity.WARN)["shipments.no_service_notices"]
        assert warned["notices"] == shipments.notices and warned["run_id"] == shipments.run_id
        reverted = sorted(set(changed) - set(remodified))
        with duckdb.connect(str(database), read_only=True) as con:
            assert_contiguous(con)
            # the reverts are versions of this run, dated when it noticed them (not at their older stamps)
            count, earliest, started = con.execute(
                "SELECT count(*), min(v.valid_from), any_value(r.started_at) FROM freight_history.event_versions v "
                "JOIN freight_meta.sync_runs r ON r.run_id = v.run_id AND r.stream = 'shipments' "
                f"WHERE v.run_id = ? AND v.shipment_id IN ({', '.join(map(str, reverted))})",
                [shipments.run_id]).fetchall()[0]
        assert count > 0 and earliest >= started

        quiet = sync(DEFAULTS)["shipments"]  # an ordinary run after it: the probe finds nothing
        assert "reconcile_listed" not in quiet.extra and not quiet.notices
        assert "shipments.no_service_notices" not in failed_checks(database, Severity.WARN)
        assert quiet.extra["restore_probe"]["probed"] == min(DEFAULTS.restore_probe, DEFAULTS.page_size)


def test_a_restore_that_only_brings_deleted_shipments_back_is_noticed_by_the_probe(tmp_path: Path) -> None:
    """Nothing held changed or vanished: the shipments it brings back are stamped below the cursor, so the walk
    never sees them. The probe asks for the newest deletions too, and the run reconciles."""
    with running_simulator(shipments=40, seed=3, control=True) as sim:
        sync = syncer(sim, tmp_path, publish_after=False)
        sync(DEFAULTS)
        sim.take_snapshot()
        sim.advance_clock(60)
        deleted = sim.delete_shipments(3)
        sim.advance_clock(60)
        sync(DEFAULTS.replaced(reconcile_interval=dt.timedelta(0)))  # the deletions reconciled away
        database = work_db(tmp_path)
        held = "SELECT shipment_id FROM freight.shipments"
        assert not set(deleted) & {r[0] for r in query(database, held)}
        with Warehouse(tmp_path, FREIGHT_TABLES) as warehouse:  # the newest deletions, but one waiting for a retry
            assert sorted(warehouse.reads.recently_deleted(10)) == sorted(deleted)
            warehouse.con.execute("INSERT INTO freight_meta.quarantine (stream, record_key, shipment_id) "
                                  "VALUES ('shipments', ?, ?)", [str(deleted[0]), deleted[0]])
            assert sorted(warehouse.reads.recently_deleted(10)) == sorted(deleted[1:])
            warehouse.con.execute("DELETE FROM freight_meta.quarantine")

        sim.reset_to_snapshot()
        sim.advance_clock(60)
        shipments = sync(DEFAULTS)["shipments"]
        assert set(deleted) <= {r[0] for r in query(database, held)}
        assert sorted(shipments.extra["restore_probe"]["returned"]) == sorted(deleted)
        assert (shipments.extra["restore_probe"]["vanished"], shipments.extra["restore_probe"]["went_back"]) == ([], [])
        assert any(n.startswith("the service's data went back:") for n in shipments.notices), shipments.notices
        assert_converged(sim.store, database)
        assert history_disagreements(database) == {}

        quiet = sync(DEFAULTS)["shipments"]  # back as they were: nothing deleted to ask for, nothing noticed
        assert quiet.extra["restore_probe"]["returned"] == [] and not quiet.notices


def test_under_a_page_cap_the_probe_judges_only_what_the_page_served(tmp_path: Path) -> None:
    """A service serving at most 10 rows a page: the probe asks for 25 ids, gets 10, and judges those 10
    (the others are not taken for vanished)."""
    with running_simulator(shipments=40, seed=7, faults=FaultConfig(max_page_size=10)) as sim:
        sync = syncer(sim, tmp_path, publish_after=False)
        sync(DEFAULTS)
        sim.advance_clock(60)
        sim.modify_shipments(3)
        shipments = sync(DEFAULTS)["shipments"]
        assert_converged(sim.store, work_db(tmp_path))
    probe = shipments.extra["restore_probe"]
    assert (probe["probed"], probe["vanished"], probe["went_back"]) == (10, [], [])
    assert "reconcile_listed" not in shipments.extra and not shipments.notices


def test_the_history_check_fails_on_a_history_made_to_disagree(tmp_path: Path) -> None:
    with running_simulator(shipments=20, seed=3) as sim:
        syncer(sim, tmp_path, publish_after=False)(DEFAULTS)
    database = work_db(tmp_path)
    assert failed_checks(database) == {}
    with duckdb.connect(str(database)) as con:
        shipment = con.execute("SELECT min(shipment_id) FROM freight.shipment_events").fetchall()[0][0]
        con.execute("UPDATE freight_history.event_versions SET event_at = event_at + INTERVAL 1 HOUR "
                    "WHERE shipment_id = ? AND valid_to IS NULL", [shipment])
        con.execute("DELETE FROM freight_history.shipment_versions WHERE shipment_id = ?", [shipment])
    failed = failed_checks(database)
    assert set(failed) == {"shipments.history_matches_current", "shipment_events.history_matches_current"}
    assert failed["shipments.history_matches_current"] == {"rows_disagreeing": 1, "shipments": [shipment],
                                                           "compared": "every shipment"}
    assert failed["shipment_events.history_matches_current"]["shipments"] == [shipment]
    # between two full checks it compares the shipments changed since the last build: this one once it changed
    with duckdb.connect(str(database)) as con:
        con.execute("DELETE FROM freight_meta.changed_shipments WHERE shipment_id = ?", [shipment])
    assert failed_checks(database, changed_only=True) == {}
    assert set(failed_checks(database)) == set(failed)  # the full check still finds it
    with duckdb.connect(str(database)) as con:
        con.execute("INSERT INTO freight_meta.changed_shipments BY NAME SELECT ? AS shipment_id, 'r' AS run_id, "
                    "now() AS changed_at", [shipment])
    scoped = failed_checks(database, changed_only=True)
    assert scoped["shipments.history_matches_current"] == {"rows_disagreeing": 1, "shipments": [shipment],
                                                           "compared": "changed shipments"}

    # rows counted as many times as one side holds them more often; a NULL equals a NULL, not a value
    with duckdb.connect(str(database)) as con:
        others = [row[0] for row in con.execute("SELECT DISTINCT shipment_id FROM freight.shipment_events "
                                                "WHERE shipment_id <> ? ORDER BY 1 LIMIT 3", [shipment]).fetchall()]
        twice, null_both, null_one = others
        for _ in range(2):  # held three times against one version: two rows more
            con.execute("INSERT INTO freight.shipment_events SELECT * FROM freight.shipment_events "
                        "WHERE shipment_id = ? ORDER BY event, type LIMIT 1", [twice])
        for one in (null_both, null_one):
            con.execute("UPDATE freight.shipment_events SET unloc = NULL WHERE shipment_id = ?", [one])
        con.execute("UPDATE freight_history.event_versions SET unloc = NULL WHERE shipment_id = ?", [null_both])
        events_of_null_one = con.execute("SELECT count(*) FROM freight.shipment_events WHERE shipment_id = ? "
                                         "AND unloc IS NOT NULL", [null_one]).fetchall()[0][0]
        unloc_held = con.execute("SELECT count(*) FROM freight_history.event_versions WHERE shipment_id = ? "
                                 "AND valid_to IS NULL AND unloc IS NOT NULL", [null_one]).fetchall()[0][0]
    assert events_of_null_one == 0 and unloc_held > 0
    events = failed_checks(database)["shipment_events.history_matches_current"]
    assert events["shipments"] == sorted([shipment, twice, null_one])
    assert history_disagreements(database)["event_versions"] == (
        failed["shipment_events.history_matches_current"]["rows_disagreeing"] + 2 + 2 * unloc_held)


def naive_sync(sim: RunningSimulator, data_dir: Path, zone: str | None) -> SyncFn:
    settings = DEFAULTS if zone is None else DEFAULTS.replaced(service_timezone=zone)
    run = syncer(sim, data_dir)
    return lambda: run(settings)


def test_a_clock_without_offsets_read_in_the_service_zone_fills_every_instant(tmp_path: Path) -> None:
    """The history of issue 24 without offsets: after a full sync and three rounds of changes, the
    point-in-time read at each sync's instant equals the tables that sync left, row for row."""
    copies = tmp_path / "copies"
    copies.mkdir()
    with running_simulator(shipments=30, seed=9, naive_clock=BERLIN, control=True) as sim:
        sync = naive_sync(sim, tmp_path, BERLIN)
        first = sync()
        saved = [saved_copy(tmp_path, copies, sim, "after-1")]
        notice = naive_clock_notice(BERLIN)
        assert notice in first["shipments"].notices and "read in Europe/Berlin" in notice
        database = work_db(tmp_path)
        assert query(database, "SELECT count(*) FROM freight.shipments WHERE last_modified_at IS NULL") == [(0,)]
        assert query(database, "SELECT count(*) FROM freight.shipment_documents WHERE created_at IS NULL") == [(0,)]
        for number in range(2, 5):  # three rounds of changes: each a version, as with offsets
            sim.advance_clock(3600)
            sim.modify_shipments(5)
            sync()
            saved.append(saved_copy(tmp_path, copies, sim, f"after-{number}"))
        assert_converged(sim.store, database)  # the oracle reads the documents in the same zone
        assert history_disagreements(database) == {}
        with duckdb.connect(str(database), read_only=True) as con:
            assert_contiguous(con)
            # every shipment's history starts at its last-modified instant, none is left out
            assert con.execute("SELECT count(DISTINCT shipment_id) FROM freight_history.shipment_versions"
                               ).fetchall() == con.execute("SELECT count(*) FROM freight.shipments").fetchall()
            versions = con.execute("SELECT count(*) FROM freight_history.shipment_versions").fetchall()[0][0]
        assert versions > 30
        for copy, instant in saved:
            found = as_of_against_copy(database, copy, instant)
            assert all(rows > 0 and extra == missing == 0 for rows, extra, missing in found.values()), (copy, found)
        assert query(database, "SELECT count(*) FROM freight_meta.data_problems") == [(0,)]


def test_a_clock_without_offsets_read_as_utc_by_default_is_said_once_in_the_run_and_status(tmp_path: Path) -> None:
    with running_simulator(shipments=12, seed=9, naive_clock=BERLIN) as sim:
        results = naive_sync(sim, tmp_path, None)()
        stamp = sim.store.reader.get_base_shipment(min(sim.store.reader.live_shipment_ids()))
    notice = ("the service sends date-times without a UTC offset; read as UTC; set FREIGHT_SERVICE_TIMEZONE to "
              "its zone")
    assert all(r.notices.count(notice) == 1 for r in results.values() if r.extra.get("naive_datetimes"))
    assert results["shipments"].extra["naive_datetimes"]["read"] >= 12
    database = work_db(tmp_path)
    # read as UTC: an hour after the instant Berlin's wall clock names in November, but never null
    (held,) = query(database, "SELECT last_modified_at FROM freight.shipments WHERE shipment_id = ?", [stamp["id"]])
    berlin = dt.datetime.fromisoformat(stamp["last_modified_date_time"]).replace(tzinfo=dt.UTC)
    assert held[0] == berlin
    status = render_status(read_report(tmp_path, EmbeddedDuckDB()))
    assert status.count(notice) == 1 and "shipments" in status.split(notice)[0].splitlines()[-1]


def test_two_runs_in_one_process_with_different_zones_each_read_their_own(tmp_path: Path) -> None:
    """The zone travels with each run's settings (``SyncSettings.zone``): two syncs of one service without
    offsets, started together in two threads of this process, one reading Berlin's wall clock and one
    Tokyo's, each hold every instant in its own zone and count only what it read: what the same run counts alone."""
    zones = {"berlin": BERLIN, "tokyo": "Asia/Tokyo"}
    with running_simulator(shipments=12, seed=9, naive_clock=BERLIN) as sim, ThreadPoolExecutor(2) as pool:
        alone = {name: naive_sync(sim, tmp_path / f"{name}-alone", zone)()["shipments"].extra["naive_datetimes"]["read"]
                 for name, zone in zones.items()}
        runs = {name: pool.submit(naive_sync(sim, tmp_path / name, zone)) for name, zone in zones.items()}
        results = {name: run.result() for name, run in runs.items()}
        stamps = {doc["id"]: doc["last_modified_date_time"] for doc in sim.store.reader.expected_documents()}
    for name, zone in zones.items():
        held = dict(query(work_db(tmp_path / name), "SELECT shipment_id, last_modified_at FROM freight.shipments"))
        expected = {shipment: dt.datetime.fromisoformat(stamp).replace(tzinfo=ZoneInfo(zone))
                    for shipment, stamp in stamps.items()}
        assert held == expected, name
        assert naive_clock_notice(zone) in results[name]["shipments"].notices
        assert results[name]["shipments"].extra["naive_datetimes"]["read"] >= len(stamps)
    read = {name: results[name]["shipments"].extra["naive_datetimes"]["read"] for name in zones}
    assert read == alone  # neither counted the other's
