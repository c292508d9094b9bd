"""``SyncSettings.history`` (``FREIGHT_HISTORY``) over HTTP: runs with it off record no versions and write
the same ``freight`` rows as runs with it on; with it on again, the first run brings the history up to
the rows held (changes and deletions of the runs without it included) and the history goes on from there."""

from __future__ import annotations

from pathlib import Path

import duckdb

from freight_pipeline.config import ServiceSettings
from freight_pipeline.normalize.tables import FREIGHT_TABLES
from freight_pipeline.simulator.server import RunningSimulator, running_simulator
from freight_pipeline.sync.result import StreamResult
from freight_pipeline.sync.runner import sync_all
from freight_pipeline.warehouse.embedded import EmbeddedDuckDB
from freight_pipeline.warehouse.history import BEHIND_STATE, HISTORY_TABLES
from freight_pipeline_tests.sync.conftest import query, work_db
from freight_pipeline_tests.sync.settings import RECONCILE_SETTINGS
from freight_pipeline_tests.sync.test_history_sync import as_of_against_copy, saved_copy
from freight_pipeline_tests.warehouse.history_checks import assert_contiguous

ON = RECONCILE_SETTINGS
OFF = RECONCILE_SETTINGS.replaced(history=False)
AUDIT = ("_synced_at", "_run_id")
MOVED = {"date": "2027-01-15", "time": "12:00:00", "zone_offset": "+01:00"}


def sync(sim: RunningSimulator, data_dir: Path, settings: object, run_id: str) -> StreamResult:
    results, _ = sync_all(ServiceSettings(sim.base_url, sim.username, sim.password), data_dir, settings,
                          backend=EmbeddedDuckDB(), run_id=run_id, publish_after=False)
    assert all(r.status == "success" for r in results), [(r.stream, r.error) for r in results]
    return next(r for r in results if r.stream == "shipments")


def history_rows(data_dir: Path) -> dict[str, list[tuple[object, ...]]]:
    return {spec.name: query(work_db(data_dir), f"SELECT * FROM {spec.qualified_name} ORDER BY ALL")
            for spec in HISTORY_TABLES}


def freight_differences(one: Path, other: Path) -> dict[str, tuple[int, int, int]]:
    """Per ``freight`` table: (rows of ``one``, rows only ``one`` holds, rows only ``other`` holds), audit
    columns left out."""
    found = {}
    with duckdb.connect(str(work_db(one)), read_only=True) as con:
        con.execute(f"ATTACH '{work_db(other)}' AS other (READ_ONLY)")
        for spec in FREIGHT_TABLES:
            columns = ", ".join(f'"{c.name}"' for c in spec.columns if c.name not in AUDIT)
            mine, theirs = (f"SELECT {columns} FROM {db}.{spec.qualified_name}" for db in ("warehouse", "other"))
            found[spec.name] = tuple(con.execute(f"SELECT count(*) FROM ({sql})").fetchall()[0][0] for sql in (
                mine, f"({mine}) EXCEPT ALL ({theirs})", f"({theirs}) EXCEPT ALL ({mine})"))
    return found


def behind(data_dir: Path) -> list[tuple[object, ...]]:
    return query(work_db(data_dir), "SELECT cursor_value FROM freight_meta.sync_state WHERE stream = ?",
                 [BEHIND_STATE])


def recorded_by(data_dir: Path, run_id: str) -> dict[str, int]:
    counts = {spec.name: query(work_db(data_dir), f"SELECT count(*) FROM {spec.qualified_name} WHERE run_id = ?",
                               [run_id])[0][0] for spec in HISTORY_TABLES}
    return {name: count for name, count in counts.items() if count}


def test_history_off_records_nothing_and_on_again_catches_up(tmp_path: Path) -> None:
    switched, fresh_off, fresh_on = tmp_path / "switched", tmp_path / "fresh-off", tmp_path / "fresh-on"
    copies = tmp_path / "copies"
    copies.mkdir()
    with running_simulator(shipments=40, seed=7) as sim:
        first = sync(sim, switched, ON, "on-1")
        assert sum(first.extra["versions"].values()) > 0
        before = history_rows(switched)

        # while the history is off: shipments change, one is deleted
        sim.advance_clock(60)
        changed = sim.modify_shipments(4)
        deleted = next(i for i in sorted(sim.store.reader.live_shipment_ids()) if i not in changed)
        sim.store.changes.delete_shipment_ids([deleted])
        sim.advance_clock(60)
        off = sync(sim, switched, OFF, "off-2")
        assert off.extra["history"] == "off" and not off.extra.get("versions")
        assert off.rows_written > 0 and off.extra["reconcile_deleted"] == 1
        assert history_rows(switched) == before  # nothing added, nothing closed
        assert len(behind(switched)) == 1 and behind(switched)[0][0] is not None

        # the same service state synced from scratch with the history on and off: the same freight rows
        sync(sim, fresh_on, ON, "fresh-on")
        sync(sim, fresh_off, OFF, "fresh-off")
        for data_dir in (switched, fresh_off):
            found = freight_differences(data_dir, fresh_on)
            assert all(extra == missing == 0 for _, extra, missing in found.values()), (data_dir.name, found)
        assert found["shipments"][0] == 39 and found["shipment_events"][0] > 0
        assert all(not rows for rows in history_rows(fresh_off).values())

        # on again: more changes; the run first catches up, then versions its walk as always
        sim.advance_clock(60)
        later = sim.modify_shipments(3)
        sim.advance_clock(60)
        again = sync(sim, switched, ON, "on-3")
        assert behind(switched) == [(None,)]
        assert again.extra["history_caught_up"]["shipment_versions"] >= len(set(changed) - set(later))
        assert again.extra["versions"] == recorded_by(switched, "on-3")
        with duckdb.connect(str(work_db(switched)), read_only=True) as con:
            assert_contiguous(con)
            started = con.execute("SELECT min(started_at) FROM freight_meta.sync_runs WHERE run_id = 'on-3'"
                                  ).fetchall()[0][0]
            # the deletion of the run without history: at the start of the run that caught up
            assert con.execute("SELECT deleted, valid_from >= ?, run_id FROM freight_history.shipment_versions "
                               "WHERE shipment_id = ? AND valid_to IS NULL", [started, deleted]
                               ).fetchall() == [(True, True, "on-3")]
            deleted_from = con.execute("SELECT valid_from FROM freight_history.shipment_versions WHERE shipment_id = ? "
                                       "AND deleted", [deleted]).fetchall()[0][0]
            # a change the history missed: one step from the version before it to the rows held, at their
            # last-modified instant
            only_off = sorted(set(changed) - set(later))[0]
            versions = con.execute("SELECT valid_from, valid_to, run_id FROM freight_history.shipment_versions "
                                   "WHERE shipment_id = ? ORDER BY valid_from", [only_off]).fetchall()
            held_at = con.execute("SELECT last_modified_at FROM freight.shipments WHERE shipment_id = ?",
                                  [only_off]).fetchall()[0][0]
            assert versions == [(versions[0][0], held_at, "on-1"), (held_at, None, "on-3")]
            # the catch-up logged what gained a version (the ETA marts are built from the history), in its own
            # transaction: the next build rebuilds it though the run's batches wrote nothing of it
            caught_up = ("SELECT c.shipment_id, c.run_id, c.changed_at = v.recorded_at "
                         "FROM freight_meta.changed_shipments c JOIN freight_history.shipment_versions v "
                         "ON v.shipment_id = c.shipment_id AND v.valid_to IS NULL "
                         "WHERE c.shipment_id IN (?, ?) ORDER BY 1")
            assert con.execute(caught_up, [only_off, deleted]).fetchall() == sorted(
                [(only_off, "on-3", True), (deleted, "on-3", True)])

        # what the history says is in force now is what the warehouse holds (the deletion is dated by the
        # pipeline's clock, the changes by the simulator's)
        copy, instant = saved_copy(switched, copies, sim, "after-on-3")
        found = as_of_against_copy(work_db(switched), copy, max(instant, deleted_from))
        assert all(rows > 0 and extra == missing == 0 for rows, extra, missing in found.values()), found

        # and it goes on: the next change of an event is one more version after the caught-up one
        code, kind = next((e["event"], e["type"]) for e in sim.store.reader.get_events(only_off))
        sim.advance_clock(60)
        sim.store.events.update(only_off, code, kind, {"date_time": MOVED})
        sync(sim, switched, ON, "on-4")
        versions = query(work_db(switched), "SELECT valid_to IS NULL, run_id FROM freight_history.event_versions "
                         "WHERE shipment_id = ? AND event = ? AND type = ? ORDER BY valid_from", [only_off, code, kind])
        assert len(versions) >= 2 and versions[-1] == (True, "on-4"), versions
        with duckdb.connect(str(work_db(switched)), read_only=True) as con:
            assert_contiguous(con)

        # the fresh warehouse synced without history from the start: its first run with it catches up whole
        sync(sim, fresh_off, ON, "fresh-off-on")
        copy, instant = saved_copy(fresh_off, copies, sim, "fresh-off-on")
        found = as_of_against_copy(work_db(fresh_off), copy, instant)
        assert all(rows > 0 and extra == missing == 0 for rows, extra, missing in found.values()), found
        assert behind(fresh_off) == [(None,)]

