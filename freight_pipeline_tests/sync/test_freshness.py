"""Events the service changes without moving the shipment's last-modified instant, over HTTP (the simulator's
background changes: a carrier's feed moving upcoming estimates): against the ordinary service the sample
finds nothing, says nothing and costs its requests only; after background changes the first run whose
sample comes to one says so once, and the rolling re-read brings every one into ``freight.shipment_events``
within the bound, with a history version, the marts' changed shipments and the ETA marts scoring them; a
tight budget takes the nearest upcoming estimates first."""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

import duckdb
import pytest

from bench.expected_rows import expected_rows
from freight_pipeline.checks.warehouse import evaluate_checks, events_age_check
from freight_pipeline.client import endpoints as ep
from freight_pipeline.client._core import HeldBody
from freight_pipeline.client.endpoints import Endpoint
from freight_pipeline.commands.report import read_report
from freight_pipeline.commands.status import render_status
from freight_pipeline.lake.backend import storage_from_env
from freight_pipeline.simulator import releases, store_changes
from freight_pipeline.simulator.server import RunningSimulator, running_simulator
from freight_pipeline.sync import freshness
from freight_pipeline.sync.client_source import ClientSource
from freight_pipeline.sync.parts import DETAIL_PARTS, EVENTS, MEMOS
from freight_pipeline.sync.shipments import STREAM as SHIPMENTS
from freight_pipeline.sync.source import ShipmentGone
from freight_pipeline.warehouse.history import SUBJECTS, disagreeing_sql
from freight_pipeline_tests.dbt.dbt_cli import run_dbt_in_worker
from freight_pipeline_tests.sync.conftest import query, syncer, work_db
from freight_pipeline_tests.sync.expected import rows_differences
from freight_pipeline_tests.sync.settings import TEST_SETTINGS

HELD = 120
MOVED = 40
SAMPLE = 20
MAX_AGE = dt.timedelta(seconds=2)
"""The bound, in the tests' seconds: a run re-reads what was read three quarters of it ago."""
SETTINGS = TEST_SETTINGS.replaced(freshness_sample=SAMPLE, events_max_age=MAX_AGE,
                               documents=False, code_conversions=False)


def _differences(sim: RunningSimulator, data_dir: Path, ids: list[int] | None = None) -> dict[str, tuple[int, int]]:
    """The warehouse against the service (the streams the tests run), on the shipments ``ids`` (None: all)."""
    expected = expected_rows(sim.store)
    expected["code_conversions"], expected["shipment_documents"] = [], []  # their streams do not run
    others = [i for i in sim.store.reader.live_shipment_ids() if ids is not None and i not in ids]
    return rows_differences(expected, work_db(data_dir), except_shipments=others)


def _wait_past_due() -> None:
    """Let the events read so far become due (a run on a schedule comes that much later)."""
    time.sleep(MAX_AGE.total_seconds() * freshness.DUE_SHARE + 0.1)


def test_events_moved_without_the_stamp_are_found_said_once_and_read_within_the_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # every shipment moved gets a memo line too, so the sample that first comes to one finds both parts changed
    # and the rolling re-read reads both (memo lines only once a sample found them changed: with the simulator's
    # share, whether the first such sample did depended on which shipments it came to, an order set by when each
    # was read, which a loaded machine changes)
    monkeypatch.setattr(store_changes, "BACKGROUND_MEMO_SHARE", 1.0)
    with running_simulator(shipments=HELD, seed=9) as sim:
        sync = syncer(sim, tmp_path, publish_after=False)
        sync(SETTINGS)
        # the ordinary service first: every change stamped, so the sample finds nothing, says nothing, and
        # costs its own requests only (an events read and a memo lookup per shipment sampled)
        sim.modify_shipments(5)
        sim.advance_clock(900)
        ordinary = syncer(sim, tmp_path)(SETTINGS)[SHIPMENTS]  # published: for status
        figures = ordinary.extra["freshness"]
        assert figures["sampled"] == SAMPLE and figures["sample_differed"] == {EVENTS: 0, MEMOS: 0}
        assert not figures["rolling"] and "refreshed" not in figures and figures["requests"] == 2 * SAMPLE
        assert not [n for n in ordinary.notices if n.startswith("the service changes")]
        status = render_status(read_report(tmp_path, storage_from_env()))
        assert "no rolling re-read: each change the service stamps is read by the walk" in status

        moved = sim.change_in_background(MOVED)
        assert len(moved) == MOVED
        assert "shipment_events" in _differences(sim, tmp_path, moved), "held as before the change"
        versions_before = query(work_db(tmp_path), "SELECT count(*) FROM freight_history.event_versions")[0][0]

        # runs on a schedule: the rotating sample comes to a moved shipment within a turn of the open ones
        open_held = query(work_db(tmp_path), "SELECT count(*) FROM freight.shipments WHERE shipment_closed "
                                             "IS NOT TRUE")[0][0]
        found = None
        for _ in range(-(-open_held // SAMPLE)):
            _wait_past_due()
            sim.advance_clock(900)
            result = sync(SETTINGS)[SHIPMENTS]
            said = [n for n in result.notices if n.startswith("the service changes")]
            if said:
                found = (result, said)
                break
            assert not result.extra["freshness"]["rolling"] and "refreshed" not in result.extra["freshness"]
        assert found is not None, "no sample came to a moved shipment in a turn of the open ones"
        first, (notice,) = found
        figures = first.extra["freshness"]
        assert figures["sampled"] == SAMPLE and figures["rolling"]
        assert figures["sample_differed"][EVENTS] > 0 and figures["sample_differed"][MEMOS] > 0
        assert f"without moving last-modified ({max(figures['sample_differed'].values())} of {SAMPLE} sampled)" \
            in notice and "re-reading open shipments'" in notice
        # the rolling re-read took the rest at once: the bound is met in the first run that knows
        assert figures["refreshed"] > 0 and figures["requests"] <= 2 * (SAMPLE + figures["refreshed"])
        assert _differences(sim, tmp_path) == {}  # every event and memo line
        added = query(work_db(tmp_path), "SELECT count(*) FROM freight_history.event_versions")[0][0]
        assert added > versions_before
        changed = {r[0] for r in query(work_db(tmp_path), "SELECT shipment_id FROM freight_meta.changed_shipments")}
        assert set(moved) <= changed, "the marts rebuild what changed"

        _wait_past_due()
        sim.advance_clock(900)
        second = sync(SETTINGS)[SHIPMENTS]
        assert not [n for n in second.notices if n.startswith("the service changes")], "said once"
        assert second.extra["freshness"]["refreshed"] > 0
        assert sum(second.extra["freshness"]["refreshed_differed"].values()) == 0
        syncer(sim, tmp_path)(SETTINGS)  # published: for status, which names what was found
        status = render_status(read_report(tmp_path, storage_from_env()))
        (said,) = [line for line in status.splitlines() if "without moving last-modified (found by run" in line]
        assert said.strip().startswith("the service changes events and memo lines without"), said
        with duckdb.connect(str(work_db(tmp_path)), read_only=True) as con:
            ((_, fresh),) = evaluate_checks(con, [events_age_check()])
        assert fresh.passed and fresh.figures["rolling_reread"] and fresh.figures["oldest_age_minutes"] == 0

        # the ETA marts score the moved estimates: a shipment's revisions counted from the new versions
        database = work_db(tmp_path)
        result, _ = run_dbt_in_worker(["run", "--select", "+fct_estimate_revisions"], tmp_path, database)
        assert result.returncode == 0, result.stdout[-3000:]
        with duckdb.connect(str(database), read_only=True) as con:
            revised = con.execute("SELECT count(DISTINCT shipment_id) FROM analytics.fct_estimate_revisions WHERE "
                                  f"revisions > 0 AND shipment_id IN ({', '.join(map(str, moved))})").fetchone()
        assert revised is not None and revised[0] > 0


def test_the_sample_comes_to_the_memo_lines_of_shipments_the_rolling_re_read_keeps_fresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rolling re-read reads the events alone (no memo line found changed yet) of the nearest upcoming estimates,
    the same shipments run after run; the sample ranked the open shipments by when their events were read, so it
    never came to those shipments: a memo line edited there without the stamp stayed stale for good. Ranked by the
    older of the parts it reads, the sample comes to them first."""
    monkeypatch.setattr(freshness, "MIN_REFRESH_REQUESTS", 8)
    sample = 5
    settings = SETTINGS.replaced(events_refresh="on", freshness_sample=sample, events_refresh_share=0.0)
    with running_simulator(shipments=40, seed=9) as sim:
        sync = syncer(sim, tmp_path, publish_after=False)
        sync(settings)
        _wait_past_due()
        sim.advance_clock(900)
        rolled = sync(settings)[SHIPMENTS]
        assert rolled.extra["freshness"]["refreshed"] == 8
        # the shipments with memo lines whose events that run read and whose memo lines it did not: the rolling's
        kept_fresh = [r[0] for r in query(
            work_db(tmp_path), "SELECT e.shipment_id FROM freight_meta.raw_parts e JOIN freight_meta.raw_parts m "
            "USING (shipment_id) WHERE e.stream = ? AND m.stream = ? AND e.run_id = ? AND m.run_id <> ? AND "
            "shipment_id IN (SELECT shipment_id FROM freight.shipment_memos) ORDER BY 1",
            [EVENTS, MEMOS, rolled.run_id, rolled.run_id])]
        assert kept_fresh
        victim = kept_fresh[0]
        data = sim.store.data
        with data.lock:  # its first memo line's text edited, the shipment's stamp kept
            memo_id = data.memos_by_shipment[victim][0]
            shipment_id, running, _ = data.memos[memo_id]
            data.memos[memo_id] = (shipment_id, running, "edited without moving the stamp")
            data.version += 1
        sim.store.reader.forget(victim)
        open_held = query(work_db(tmp_path), "SELECT count(*) FROM freight.shipments WHERE shipment_closed IS NOT TRUE")
        rotation = -(-open_held[0][0] // sample)  # runs in which the sample comes to every open shipment
        assert rotation > 2
        for _ in range(rotation):
            _wait_past_due()
            sim.advance_clock(900)
            sync(settings)
        held = query(work_db(tmp_path), "SELECT memo FROM freight.shipment_memos WHERE shipment_id = ?", [victim])
        assert ("edited without moving the stamp",) in held, held


def test_a_tight_budget_reads_the_nearest_upcoming_estimates_first(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(freshness, "MIN_REFRESH_REQUESTS", 10)
    settings = SETTINGS.replaced(events_refresh="on", freshness_sample=0, events_refresh_share=0.0)
    with running_simulator(shipments=HELD, seed=9) as sim:
        sync = syncer(sim, tmp_path, publish_after=False)
        sync(settings)
        _wait_past_due()
        sim.advance_clock(900)
        result = sync(settings)[SHIPMENTS]
        assert result.extra["freshness"]["refreshed"] == 10 and result.extra["freshness"]["requests"] == 10
        # the service's clock as the run saw it: its newest last-modified instant (the walk's ceiling); the
        # shipments the walk read again (its overlap) are not due: the walk reads every part, the sample only
        # some, so they are those of which this run read a part the sample never reads (a document read again as
        # held keeps its raw row, and that row's run)
        unsampled = ", ".join(f"'{stream}'" for stream in
                              sorted({part.stream for part in DETAIL_PARTS} - freshness.SAMPLED_PARTS))
        walked = f"SELECT shipment_id FROM freight_meta.raw_parts WHERE run_id = ? AND stream IN ({unsampled})"
        due = query(work_db(tmp_path), "SELECT s.shipment_id, min(e.event_at) FROM freight.shipments s JOIN "
                    "freight.shipment_events e USING (shipment_id) WHERE s.shipment_closed IS NOT TRUE AND e.type = "
                    "'ESTIMATED' AND e.event_at > (SELECT max(last_modified_at) FROM freight.shipments) AND "
                    f"s.shipment_id NOT IN ({walked}) GROUP BY 1 ORDER BY 2, 1 LIMIT 10", [result.run_id])
        read = query(work_db(tmp_path), "SELECT shipment_id FROM freight_meta.raw_parts WHERE stream = ? AND "
                     f"run_id = ? AND shipment_id NOT IN ({walked}) ORDER BY 1", [EVENTS, result.run_id, result.run_id])
        assert [r[0] for r in read] == sorted(r[0] for r in due)


class TestAShipmentDeletedAtTheServiceIsADeletionNotAnUnstampedChange:
    """A re-read open shipment the service deleted: its events answer 404, and so does its document (read to
    confirm: an empty memo lookup alone is no deletion). In the sample and in the rolling re-read it is deleted as
    a walk's document 404 deletes it (every row, a ``deleted`` version as of the run's start), counted as gone,
    not as differing: no notice, no rolling re-read switched on."""

    SHIPMENTS = 40
    GONE = 4
    EVERY_OPEN = SETTINGS.replaced(freshness_sample=60)
    """The sample comes to every open shipment held (fewer than 60 of the 40)."""
    ROLLING = SETTINGS.replaced(events_refresh="on", freshness_sample=0)

    @staticmethod
    def _open_held(data_dir: Path) -> list[int]:
        return [r[0] for r in query(work_db(data_dir), "SELECT shipment_id FROM freight.shipments WHERE "
                                    "shipment_closed IS NOT TRUE ORDER BY 1")]

    @staticmethod
    def _held_anywhere(data_dir: Path, ids: list[int]) -> dict[str, int]:
        """Rows of ``ids`` in every per-shipment table and the raw documents and parts, by table (none: {})."""
        among = ", ".join(map(str, ids))
        with duckdb.connect(str(work_db(data_dir)), read_only=True) as con:
            tables = con.execute("SELECT table_schema, table_name FROM information_schema.columns WHERE column_name "
                                 "= 'shipment_id' AND table_schema IN ('freight', 'freight_meta') AND table_name IN "
                                 "(SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE') "
                                 "AND table_name NOT IN ('rejected_records', 'changed_shipments')").fetchall()
            found = {f"{schema}.{name}": con.execute(f'SELECT count(*) FROM "{schema}"."{name}" WHERE shipment_id '
                                                     f"IN ({among})").fetchone()[0] for schema, name in tables}
        assert "freight.shipment_events" in found and "freight_meta.raw_parts" in found
        return {name: count for name, count in found.items() if count}

    def _assert_deleted(self, sim: RunningSimulator, data_dir: Path, gone: list[int], run_id: str) -> None:
        """``gone`` removed as a deletion is: no row left, the current version of each subject of theirs a
        ``deleted`` one the run recorded, the warehouse as the service, the marts told."""
        assert self._held_anywhere(data_dir, gone) == {}
        among = ", ".join(map(str, gone))
        database = work_db(data_dir)
        deleted = query(database, f"SELECT shipment_id FROM freight_history.shipment_versions WHERE shipment_id IN "
                                  f"({among}) AND deleted AND valid_to IS NULL AND run_id = ? ORDER BY 1", [run_id])
        assert [r[0] for r in deleted] == gone
        for name in ("shipment_versions", "event_versions", "leg_versions"):
            alive = query(database, f"SELECT count(*) FROM freight_history.{name} WHERE shipment_id IN ({among}) "
                                    "AND valid_to IS NULL AND NOT deleted")[0][0]
            assert alive == 0, f"{name}: a current version of a deleted shipment"
        events_deleted = query(database, f"SELECT DISTINCT shipment_id FROM freight_history.event_versions WHERE "
                                         f"shipment_id IN ({among}) AND deleted AND run_id = ? ORDER BY 1", [run_id])
        assert [r[0] for r in events_deleted] == gone, "every shipment deleted had events"
        rejected = query(database, "SELECT stream, source_key FROM freight_meta.rejected_records WHERE run_id = ? "
                                   "ORDER BY 2", [run_id])
        assert rejected == [(SHIPMENTS, str(i)) for i in gone], "said as a document's 404, once each"
        changed = {r[0] for r in query(database, "SELECT shipment_id FROM freight_meta.changed_shipments")}
        assert set(gone) <= changed, "the marts rebuild what was deleted"
        assert _differences(sim, data_dir) == {}, "the warehouse as the service"

    @staticmethod
    def _no_unstamped_notice(result: object) -> None:
        assert not [n for n in result.notices if n.startswith("the service changes")]  # type: ignore[attr-defined]

    def test_the_sample_deletes_what_the_service_deleted_and_says_nothing_of_unstamped_changes(
        self, tmp_path: Path
    ) -> None:
        with running_simulator(shipments=self.SHIPMENTS, seed=7) as sim:
            sync = syncer(sim, tmp_path, publish_after=False)
            sync(self.EVERY_OPEN)
            open_held = self._open_held(tmp_path)
            assert len(open_held) > self.GONE
            gone = sim.store.changes.delete_shipment_ids(open_held[:self.GONE])
            sim.advance_clock(900)
            result = sync(self.EVERY_OPEN)[SHIPMENTS]
            figures = result.extra["freshness"]
            # every open shipment held but those the walk's overlap read again (the deleted ones among them)
            assert self.GONE < figures["sampled"] <= len(open_held) and figures["sample_gone"] == gone
            assert figures["sample_differed"] == {EVENTS: 0, MEMOS: 0}
            assert not figures["rolling"] and "refreshed" not in figures
            # an events read and a memo lookup per shipment sampled; of each gone one, its document read and the
            # lookup that confirms it is gone (a 404 alone may be a permission's)
            assert figures["requests"] == 2 * figures["sampled"] + 2 * self.GONE
            assert figures["open_shipments"] == len(open_held) - self.GONE
            self._no_unstamped_notice(result)
            self._assert_deleted(sim, tmp_path, gone, result.run_id)
            # nothing recorded as found: the runs after stay as they were
            sim.advance_clock(900)
            after = sync(self.EVERY_OPEN)[SHIPMENTS]
            assert not after.extra["freshness"]["rolling"] and "sample_gone" not in after.extra["freshness"]
            assert after.extra["freshness"]["sample_differed"] == {EVENTS: 0, MEMOS: 0}
            self._no_unstamped_notice(after)
            state = query(work_db(tmp_path), "SELECT cursor_value FROM freight_meta.sync_state WHERE stream = ?",
                          [freshness.STATE])
            assert freshness.Unstamped.parse(state[0][0]).parts == ()

    def test_the_rolling_reread_deletes_what_the_service_deleted(self, tmp_path: Path) -> None:
        with running_simulator(shipments=self.SHIPMENTS, seed=7) as sim:
            sync = syncer(sim, tmp_path, publish_after=False)
            sync(self.ROLLING)
            open_held = self._open_held(tmp_path)
            gone = sim.store.changes.delete_shipment_ids(open_held[-self.GONE:])
            _wait_past_due()
            sim.advance_clock(900)
            result = sync(self.ROLLING)[SHIPMENTS]
            figures = result.extra["freshness"]
            assert figures["sampled"] == 0 and figures["rolling"]
            assert self.GONE < figures["refreshed"] <= len(open_held) and figures["refreshed_gone"] == gone
            assert figures["refreshed_differed"] == {EVENTS: 0}
            # the events, each gone one's document and the lookup confirming it is gone
            assert figures["requests"] == figures["refreshed"] + 2 * self.GONE
            self._no_unstamped_notice(result)
            self._assert_deleted(sim, tmp_path, gone, result.run_id)

    def test_nothing_deleted_nothing_said(self, tmp_path: Path) -> None:
        with running_simulator(shipments=self.SHIPMENTS, seed=7) as sim:
            sync = syncer(sim, tmp_path, publish_after=False)
            sync(self.EVERY_OPEN)
            open_held = self._open_held(tmp_path)
            sim.advance_clock(900)
            result = sync(self.EVERY_OPEN)[SHIPMENTS]
            figures = result.extra["freshness"]
            assert 0 < figures["sampled"] <= len(open_held) and "sample_gone" not in figures
            assert figures["sample_differed"] == {EVENTS: 0, MEMOS: 0} and not figures["rolling"]
            assert figures["requests"] == 2 * figures["sampled"]
            self._no_unstamped_notice(result)
            assert query(work_db(tmp_path), "SELECT count(*) FROM freight_meta.rejected_records")[0][0] == 0
            assert _differences(sim, tmp_path) == {}

    def test_events_answering_404_for_a_live_shipment_leave_its_rows(self, tmp_path: Path) -> None:
        """The document read says the shipment lives: its events' 404 is no deletion and no change; its rows stay
        (read again next time), and its memo lines are compared as read."""
        with running_simulator(shipments=self.SHIPMENTS, seed=7) as sim:
            sync = syncer(sim, tmp_path, publish_after=False)
            sync(self.EVERY_OPEN)
            victim = self._open_held(tmp_path)[0]
            events_before = query(work_db(tmp_path), "SELECT count(*) FROM freight.shipment_events WHERE "
                                                     "shipment_id = ?", [victim])[0][0]
            assert events_before > 0

            class EventsGone(ClientSource):
                async def get_shipment_records(self, endpoint: Endpoint, shipment_id: int) -> HeldBody:
                    if shipment_id == victim and endpoint == ep.SHIPMENT_EVENTS:
                        raise ShipmentGone(shipment_id)
                    return await super().get_shipment_records(endpoint, shipment_id)

            sim.advance_clock(900)
            result = sync(self.EVERY_OPEN, source_factory=EventsGone)[SHIPMENTS]
            figures = result.extra["freshness"]
            assert "sample_gone" not in figures and figures["sample_differed"] == {EVENTS: 0, MEMOS: 0}
            self._no_unstamped_notice(result)
            assert query(work_db(tmp_path), "SELECT count(*) FROM freight.shipment_events WHERE shipment_id = ?",
                         [victim])[0][0] == events_before
            assert _differences(sim, tmp_path) == {}
            deleted = query(work_db(tmp_path), "SELECT count(*) FROM freight_history.event_versions WHERE deleted")
            assert deleted[0][0] == 0

    def test_memo_lines_removed_without_the_stamp_are_a_change_not_a_deletion(self, tmp_path: Path) -> None:
        """An empty memo lookup of a shipment whose events answer: its memo lines were removed (found, said),
        the shipment stays."""
        with running_simulator(shipments=self.SHIPMENTS, seed=7) as sim:
            sync = syncer(sim, tmp_path, publish_after=False)
            sync(self.EVERY_OPEN)
            with_memos = [r[0] for r in query(work_db(tmp_path), "SELECT DISTINCT m.shipment_id FROM "
                                              "freight.shipment_memos m JOIN freight.shipments s USING (shipment_id) "
                                              "WHERE s.shipment_closed IS NOT TRUE ORDER BY 1")]
            assert with_memos
            victim = with_memos[0]
            data = sim.store.data
            with data.lock:  # the memo lines go, the shipment's stamp stays
                for memo_id in data.memos_by_shipment.pop(victim):
                    del data.memos[memo_id]
                data.version += 1
            sim.store.reader.forget(victim)
            sim.advance_clock(900)
            result = sync(self.EVERY_OPEN)[SHIPMENTS]
            figures = result.extra["freshness"]
            assert "sample_gone" not in figures and figures["sample_differed"] == {EVENTS: 0, MEMOS: 1}
            (notice,) = [n for n in result.notices if n.startswith("the service changes")]
            assert notice.startswith("the service changes memo lines without moving last-modified (1 of ")
            assert query(work_db(tmp_path), "SELECT count(*) FROM freight.shipments WHERE shipment_id = ?",
                         [victim])[0][0] == 1
            assert query(work_db(tmp_path), "SELECT count(*) FROM freight.shipment_memos WHERE shipment_id = ?",
                         [victim])[0][0] == 0
            assert _differences(sim, tmp_path) == {}


SIMULATOR_ENDPOINT = {EVENTS: "events", MEMOS: "memos"}
"""The simulator's name of the endpoint of each part the sample reads (``releases``, ``corruptions``)."""


def test_a_release_that_reshapes_every_sampled_part_is_no_change_without_the_stamp_and_one_after_it_is(
    tmp_path: Path
) -> None:
    """2026.3 renames a field of every part the sample reads (an event's ``location``, a memo line's ``memo``) and
    moves no stamp: the sample's re-read answers lost fields the held ones had, so they are counted apart, named,
    and neither said as changes without the stamp nor starting the rolling re-read (the run's shape comparison
    names the release); their rows are written as they now read. The next estimates moved without the stamp, in
    the new shape, are found and said as before."""
    assert set(SIMULATOR_ENDPOINT) == freshness.SAMPLED_PARTS, "a part the sample reads that this test does not"
    assert all(releases.shapes(releases.NESTED, endpoint) for endpoint in SIMULATOR_ENDPOINT.values())
    every_open = SETTINGS.replaced(freshness_sample=60)  # the 40 held: every open one sampled each run
    with running_simulator(shipments=40, seed=7) as sim:
        sync = syncer(sim, tmp_path, publish_after=False)
        sync(every_open)
        open_held = query(work_db(tmp_path), "SELECT count(*) FROM freight.shipments WHERE shipment_closed "
                                             "IS NOT TRUE")[0][0]
        with_memos = query(work_db(tmp_path), "SELECT count(DISTINCT m.shipment_id) FROM freight.shipment_memos m "
                                              "JOIN freight.shipments s USING (shipment_id) WHERE s.shipment_closed "
                                              "IS NOT TRUE")[0][0]
        assert open_held > with_memos > 0
        sim.set_release(releases.NESTED)
        sim.advance_clock(900)
        released = sync(every_open)[SHIPMENTS]
        figures = released.extra["freshness"]
        assert not [n for n in released.notices if n.startswith("the service changes")]
        # every open one but those the walk read in this run (its overlap of the cursor's second)
        sampled = figures["sampled"]
        assert open_held - 3 <= sampled <= open_held and figures["sample_differed"] == {EVENTS: 0, MEMOS: 0}
        assert figures["sample_reshaped"][EVENTS] == sampled and 0 < figures["sample_reshaped"][MEMOS] <= with_memos
        assert figures["sample_fields_lost"] == {EVENTS: ["location"], MEMOS: ["memo"]}
        assert not figures["rolling"] and "refreshed" not in figures
        assert {(c["source"], c["field"]) for c in released.extra["shape_changes"]} >= {
            (EVENTS, "location"), (MEMOS, "memo")}, "the release is named where it is"
        assert query(work_db(tmp_path), "SELECT count(*) FROM freight.shipment_memos m JOIN freight.shipments s USING "
                     "(shipment_id) WHERE s.shipment_closed IS NOT TRUE AND m.memo IS NOT NULL")[0][0] == 0, \
            "the rows as the answers now read (until the mapping takes the new names)"

        moved = sim.change_in_background(5)
        sim.advance_clock(900)
        found = sync(every_open)[SHIPMENTS]
        figures = found.extra["freshness"]
        differed = figures["sample_differed"][EVENTS]
        assert 0 < differed <= len(moved) and figures["sample_reshaped"] == {EVENTS: 0, MEMOS: 0}
        (notice,) = [n for n in found.notices if n.startswith("the service changes")]
        assert f"without moving last-modified ({differed} of {figures['sampled']} sampled)" in notice
        assert figures["rolling"] and "sample_fields_lost" not in figures


def test_a_second_change_without_the_stamp_is_one_under_the_stamp_held_not_the_service_going_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The service's feed moves the same open shipments' estimates twice, never their stamp: each sample versions
    what changed as of when its run noticed, and the second, under a stamp now older than the first change's
    version but the document's held, is logged as content changed under the same last-modified instant (it was
    logged as copies older than the version recorded: the service gone back)."""
    every_open = SETTINGS.replaced(freshness_sample=60)  # the 40 held: every open one sampled each run
    with running_simulator(shipments=40, seed=7) as sim:
        sync = syncer(sim, tmp_path, publish_after=False)
        sync(every_open)
        for _ in range(2):
            sim.change_in_background(40)  # every open one (fewer than 40)
            sim.advance_clock(900)
            caplog.clear()
            result = sync(every_open)[SHIPMENTS]
            assert result.extra["freshness"]["sample_differed"][EVENTS] > 0
            said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("history: ")]
            assert len(said) == 1 and said[0].startswith("history: 0 copies older than the version recorded (the "
                                                         "service went back: []), 0 shipments without"), said
            assert int(said[0].split("), ")[2].split()[0]) > 0, said  # N contents changed under the same instant
        assert _differences(sim, tmp_path) == {}
        with duckdb.connect(str(work_db(tmp_path)), read_only=True) as con:
            assert sum(len(con.execute(disagreeing_sql(subject)).fetchall()) for subject in SUBJECTS) == 0


OLDER_MAPPING = ("UPDATE freight.shipment_events SET location_codes = to_json(list_reverse(from_json(location_codes, "
                 "'[\"JSON\"]'))) WHERE json_array_length(location_codes) > 1")
"""Each event's location codes as an older mapping stored them (as sent, not yet in their canonical order), emulated:
the rows held differ from what this one derives of the same answers."""


def test_rows_an_older_mapping_derived_are_rederived_by_the_sample_and_no_change_without_the_stamp(
    tmp_path: Path
) -> None:
    """After an upgrade whose mapping derives a part's rows otherwise (the location codes' canonical order), the
    sample's answers are the ones held and its rows differ from those held: rows written as this mapping derives them,
    counted apart (``sample_rederived``), never a change without the stamp (it was, for every sampled shipment: the
    notice, the rolling re-read switched on for good, an alert)."""
    every_open = SETTINGS.replaced(freshness_sample=60)  # the 40 held: every open one sampled each run
    with running_simulator(shipments=40, seed=7) as sim:
        sync = syncer(sim, tmp_path, publish_after=False)
        sync(every_open)
        with duckdb.connect(str(work_db(tmp_path))) as con:
            con.execute(OLDER_MAPPING)
            older = {i for (i,) in con.execute(
                "SELECT DISTINCT e.shipment_id FROM freight.shipment_events e JOIN freight.shipments s "
                "USING (shipment_id) WHERE s.shipment_closed IS NOT TRUE AND json_array_length(location_codes) > 1"
            ).fetchall()}
        assert older and _differences(sim, tmp_path) != {}
        sim.advance_clock(900)
        result = sync(every_open)[SHIPMENTS]
        figures = result.extra["freshness"]
        assert not [n for n in result.notices if n.startswith("the service changes")]
        assert figures["sample_differed"] == {EVENTS: 0, MEMOS: 0} and not figures["rolling"]
        rederived = figures["sample_rederived"][EVENTS]
        assert 0 < rederived <= len(older)
        # the sampled ones as this mapping derives them; those the walk read again as held (its overlap of the
        # cursor's second) keep their rows until the shipment changes or a rebuild
        still_older = [i for i in sorted(older) if _differences(sim, tmp_path, [i])]
        assert len(still_older) == len(older) - rederived <= result.rows_read


def test_the_rolling_re_read_counts_the_answers_a_release_reshaped_apart_too(tmp_path: Path) -> None:
    """The rolling re-read compares as the sample does: after 2026.3, what it reads again differs by the shape of the
    answers only (``refreshed_reshaped``), not as changes the stamp missed (``refreshed_differed``)."""
    rolling = SETTINGS.replaced(events_refresh="on", freshness_sample=0)
    with running_simulator(shipments=40, seed=7) as sim:
        sync = syncer(sim, tmp_path, publish_after=False)
        sync(rolling)
        sim.set_release(releases.NESTED)
        _wait_past_due()
        sim.advance_clock(900)
        figures = sync(rolling)[SHIPMENTS].extra["freshness"]
        assert figures["refreshed"] > 0 and figures["refreshed_differed"] == {EVENTS: 0}
        assert figures["refreshed_reshaped"] == {EVENTS: figures["refreshed"]}
