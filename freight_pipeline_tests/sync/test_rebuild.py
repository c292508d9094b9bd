"""``rebuild`` over HTTP: the service changes release, a sync without the alias reads some shipments in the
new shape (house_reference null, drift reported); with the alias (and one for the air legs' renamed
``flight_no``) a rebuild from the raw records, with no request to the service, gives the tables a fresh full
sync with the same code gives, row for row; the history's current versions take the rebuilt content. A
rebuild killed with SIGKILL after its first batch commit, then a rebuild, ends exact."""

from __future__ import annotations

import datetime as dt
import gc
import os
import shutil
import signal
import subprocess
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from bench.before_the_fix import mapping_before_the_fix
from bench.expected_rows import expected_rows
from freight_pipeline.config import REPO_ROOT
from freight_pipeline.datetimes import ServiceZone
from freight_pipeline.lake.backend import storage_from_env
from freight_pipeline.normalize import addresses, flatten, goods, legs, records
from freight_pipeline.normalize.nodes import Key
from freight_pipeline.normalize.plain_fields import CompiledFields, Field, compile_fields
from freight_pipeline.normalize.shapes import Shape
from freight_pipeline.normalize.signature import current_signature
from freight_pipeline.normalize.specs.events_memos import EVENT_LOCATION, MEMO_FIELDS
from freight_pipeline.normalize.specs.goods import GOOD_FIELDS
from freight_pipeline.normalize.specs.legs import AIR_LEG_FIELDS, LEG_COMMON_FIELDS, LEG_ENDS
from freight_pipeline.normalize.specs.parties import ADDRESS_FIELDS, CONTAINER_FIELDS
from freight_pipeline.normalize.tables import FREIGHT_TABLES
from freight_pipeline.simulator.config import SimulatorConfig
from freight_pipeline.simulator.releases import NESTED, NEXT
from freight_pipeline.simulator.server import RunningSimulator, running_simulator
from freight_pipeline.sync import drift, workers
from freight_pipeline.sync import rebuild as rebuild_module
from freight_pipeline.sync.assemble import assemble
from freight_pipeline.sync.derived_by import MAPPING
from freight_pipeline.sync.documents import STREAM as DOCUMENTS
from freight_pipeline.sync.parts import DOCUMENT
from freight_pipeline.sync.rebuild import (
    PROBE_EVERY,
    REBUILD_STATE,
    Comparison,
    RebuildState,
    ZoneChanged,
    derive,
    names_any,
    raw_bundle,
    rebuild,
)
from freight_pipeline.sync.shipments import STREAM as SHIPMENTS
from freight_pipeline.sync.workers import gc_paused
from freight_pipeline.warehouse.history import SUBJECTS, disagreeing_sql
from freight_pipeline.warehouse.records import RawPosition, RunRecord, WriteStats
from freight_pipeline.warehouse.store import open_warehouse
from freight_pipeline_tests.sync.conftest import query, syncer, work_db
from freight_pipeline_tests.sync.expected import rows_differences
from freight_pipeline_tests.sync.settings import TEST_SETTINGS
from freight_pipeline_tests.sync.test_bad_data import corrupt

SHIPMENTS_HELD = 60
CHANGED = 10
BATCH = 6
ONLY_SHIPMENTS = (SHIPMENTS,)
"""The streams the tests of the release change run (the rebuild re-derives the E-Files and code conversions too:
``test_code_conversions_and_e_files_are_rederived_...``)."""


@pytest.fixture
def release_sim() -> Iterator[RunningSimulator]:
    with running_simulator(shipments=SHIPMENTS_HELD, seed=5) as running:
        yield running


def _without_the_alias(monkeypatch: pytest.MonkeyPatch) -> None:
    """The mapping before its one-line fix (``bench.before_the_fix``)."""
    fields, shape = mapping_before_the_fix()
    monkeypatch.setattr(flatten, "_SHIPMENT", fields)
    monkeypatch.setitem(drift.SOURCE_SHAPES, DOCUMENT, shape)


def _with_the_aliases(monkeypatch: pytest.MonkeyPatch, shipment_fields: Any, shapes: dict[str, Shape]) -> None:
    """The fixed mapping: the shipments spec as declared (its alias), and the air legs' flight number read
    from ``flight_no``, then ``flight_number`` (one more line, in-process)."""
    monkeypatch.setattr(flatten, "_SHIPMENT", shipment_fields)
    monkeypatch.setattr(drift, "SOURCE_SHAPES", shapes)
    air = tuple(Field(f.column, f.type, f.description, ("flight_no", "flight_number")) if f.column == "flight_no"
                else f for f in AIR_LEG_FIELDS)
    monkeypatch.setattr(legs, "_AIR", compile_fields((*LEG_COMMON_FIELDS, *air)))


def _tables_differences(ours: Path, theirs: Path, *, except_aes: bool,
                        except_columns: tuple[tuple[str, str], ...] = ()) -> dict[str, tuple[int, int]]:
    """Per ``freight`` table with differences: (rows only in ``ours``, rows only in ``theirs``), audit columns
    left out; ``except_aes``: the AES rows of shipments last read in the old release are left out of ours;
    ``except_columns``: (table, column) left out of both."""
    found: dict[str, tuple[int, int]] = {}
    with duckdb.connect(":memory:") as con:
        con.execute(f"ATTACH '{ours}' AS ours (READ_ONLY)")
        con.execute(f"ATTACH '{theirs}' AS theirs (READ_ONLY)")
        for spec in FREIGHT_TABLES:
            cols = ", ".join(f'"{c.name}"' for c in spec.columns if (spec.name, c.name) not in except_columns)
            mine = f"SELECT {cols} FROM ours.{spec.schema}.{spec.name}"
            if except_aes and spec.name == "shipment_aes":
                mine += (" WHERE shipment_id IN (SELECT shipment_id FROM ours.freight_meta.raw_shipments "
                         "WHERE NOT json_exists(document, '$.aes'))")
            other = f"SELECT {cols} FROM theirs.{spec.schema}.{spec.name}"
            only_ours = con.execute(f"SELECT count(*) FROM ({mine} EXCEPT ALL {other})").fetchone()
            only_theirs = con.execute(f"SELECT count(*) FROM ({other} EXCEPT ALL {mine})").fetchone()
            assert only_ours is not None and only_theirs is not None
            if only_ours[0] or only_theirs[0]:
                found[spec.name] = (only_ours[0], only_theirs[0])
    return found


def _history_disagrees(database: Path) -> int:
    with duckdb.connect(str(database), read_only=True) as con:
        return sum(len(con.execute(disagreeing_sql(subject)).fetchall()) for subject in SUBJECTS)


def _read_in_new_release(sim: RunningSimulator, sync: Any, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Sync at 2026.1, switch the release, change some shipments, sync: without the alias. Returns the
    shipments the second sync read (in the new shape)."""
    _without_the_alias(monkeypatch)
    sync(streams=ONLY_SHIPMENTS)
    sim.set_release(NEXT)
    sim.modify_shipments(CHANGED)
    sim.advance_clock(1)
    second = sync(streams=ONLY_SHIPMENTS)[SHIPMENTS]
    changes = {(c["source"], c["field"]): c["change"] for c in second.extra.get("shape_changes", [])}
    assert changes[(DOCUMENT, "house_reference")] == "vanished"
    assert changes[(DOCUMENT, "house_bill_number")] == "new"
    return second.run_id


def _recorded_forks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The shipments handed over before each fork of workers (``Workers.start`` recording them) from now on."""
    forks: list[int] = []
    start = workers.Workers.start

    def counted(self: workers.Workers) -> None:
        if self.pool is None and self.workers:
            forks.append(self.shipments)
        start(self)

    monkeypatch.setattr(workers.Workers, "start", counted)
    return forks


def test_a_rebuild_equals_a_fresh_sync_with_no_request(
    release_sim: RunningSimulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fixed, shapes = flatten._SHIPMENT, dict(drift.SOURCE_SHAPES)
    held = tmp_path / "held"
    run_id = _read_in_new_release(release_sim, syncer(release_sim, held), monkeypatch)
    read = [r[0] for r in query(work_db(held), "SELECT shipment_id FROM freight_meta.raw_shipments WHERE run_id = ?",
                                [run_id])]
    assert len(read) >= CHANGED
    nulls = query(work_db(held), f"SELECT count(*) FROM freight.shipments WHERE shipment_id IN "
                                 f"({', '.join(map(str, read))}) AND house_reference IS NULL")[0][0]
    assert nulls == len(read)

    _with_the_aliases(monkeypatch, fixed, shapes)
    fresh = tmp_path / "fresh"
    syncer(release_sim, fresh)(streams=ONLY_SHIPMENTS)  # the same service, the same code, everything read again
    before = _tables_differences(work_db(held), work_db(fresh), except_aes=True)
    assert "shipments" in before and "air_main_carriage_legs" in before, before

    versions_before = query(work_db(held), "SELECT count(*) FROM freight_history.shipment_versions")[0][0]
    served = release_sim.request_count()
    # the default workers' share between what this rebuild derives and what it holds: derived here, no fork
    monkeypatch.setattr(rebuild_module, "IN_PROCESS_UP_TO", len(read))
    forks = _recorded_forks(monkeypatch)
    with open_warehouse(held, storage_from_env()) as warehouse:
        found = rebuild(warehouse, "rebuild-1", TEST_SETTINGS, batch_size=BATCH)
    assert forks == [], "forked for the shipments held, not for those it derives"
    assert release_sim.request_count() == served, "the rebuild asked the service"
    held_ids = query(work_db(held), "SELECT count(*) FROM freight.shipments")[0][0]
    assert (found.read, found.batches) == (held_ids, -(-held_ids // BATCH))
    # the fix touched the aliases' keys: only the shipments read in the new shape name one, and only they
    # were re-derived
    assert found.touched == ("flight_number", "house_bill_number", "master_bill_number")
    assert found.shipments == len(read)
    assert found.quarantined == 0 and found.resumed_after is None
    # only the shipments read in the new shape came out different: nothing else was written again
    assert found.shipments_written == len(read)
    rewritten = query(work_db(held), "SELECT DISTINCT shipment_id FROM freight.shipments WHERE _run_id = 'rebuild-1'")
    assert sorted(r[0] for r in rewritten) == sorted(read)

    assert _tables_differences(work_db(held), work_db(fresh), except_aes=True) == {}
    kept_aes = query(work_db(held), "SELECT count(*) FROM freight.shipment_aes")[0][0]
    assert kept_aes > 0, "what the old release sent and the new one dropped stays as it was read"
    assert query(work_db(fresh), "SELECT count(*) FROM freight.shipment_aes") == [(0,)]
    # the history: the current versions took the rebuilt content in place, no version was added for it
    assert _history_disagrees(work_db(held)) == 0
    assert found.versions.get("shipment_versions", 0) == 0
    assert query(work_db(held), "SELECT count(*) FROM freight_history.shipment_versions")[0][0] == versions_before
    filled = query(work_db(held), "SELECT count(*) FROM freight_history.shipment_versions WHERE valid_to IS NULL "
                                  f"AND shipment_id IN ({', '.join(map(str, read))}) AND house_reference IS NOT NULL")
    assert filled[0][0] > 0
    assert query(work_db(held), "SELECT cursor_value FROM freight_meta.sync_state WHERE stream = ?",
                 [REBUILD_STATE]) == [(None,)]
    logged = query(work_db(held), "SELECT status, rows_read FROM freight_meta.sync_runs WHERE run_id = 'rebuild-1'")
    assert logged == [("success", held_ids)]

    # every row is now the fixed mapping's: the next rebuild reads nothing; one of everything writes nothing
    with open_warehouse(held, storage_from_env()) as warehouse:
        again = rebuild(warehouse, "rebuild-2", TEST_SETTINGS, batch_size=BATCH)
        every = rebuild(warehouse, "rebuild-3", TEST_SETTINGS, batch_size=BATCH, everything=True)
    assert (again.touched, again.read, again.shipments, again.batches) == ((), 0, 0, 0)
    assert again.line().startswith("rebuilt 0 shipments: every row held is the current mapping's")
    assert (every.touched, every.read, every.shipments, every.shipments_written) == (None, held_ids, held_ids, 0)
    assert "(every one: every one was asked for (--all))" in every.line(), every.line()
    assert _tables_differences(work_db(held), work_db(fresh), except_aes=True) == {}
    assert release_sim.request_count() == served


def test_a_rebuild_that_rewrites_no_row_of_a_shipment_keeps_its_data_problems_as_found(tmp_path: Path) -> None:
    """Values the sync nulled (a count sent as ``"12a"``, an offset of ``+99:00``): a rebuild of every shipment that
    writes no row keeps each problem with the run and instant that found it (was: every one re-dated to the
    rebuild, as if it had found them)."""
    with running_simulator(shipments=12, seed=5, control=True) as sim:
        reader = sim.store.reader
        ids = [i for i in sorted(reader.live_shipment_ids()) if reader.get_events(i)]
        corrupt(sim, "shipment", ids[2], "set", path="total_packages", value="12a")
        corrupt(sim, "events", ids[3], "set", path="[0].date_time.zone_offset", value="+99:00")
        syncer(sim, tmp_path)(streams=ONLY_SHIPMENTS)
    problems = "SELECT stream, record_key, json_path, run_id, detected_at FROM freight_meta.data_problems ORDER BY ALL"
    found = query(work_db(tmp_path), problems)
    assert [(stream, key) for stream, key, *_ in found] == [("shipment_events", str(ids[3])),
                                                             ("shipments", str(ids[2]))]
    with open_warehouse(tmp_path, storage_from_env()) as warehouse:
        every = rebuild(warehouse, "rebuild-all", TEST_SETTINGS, batch_size=BATCH, everything=True)
    assert every.shipments_written == 0
    assert query(work_db(tmp_path), problems) == found


def test_a_rebuild_in_another_zone_than_the_held_rows_were_read_in_is_refused_unless_asked(tmp_path: Path) -> None:
    """A service without UTC offsets, synced in Berlin (``FREIGHT_SERVICE_TIMEZONE``): a rebuild run from a shell
    without the variable read every offset-less value as UTC, shifted them all an hour or two, and the history kept
    the shift as versions. It is refused, nothing written; ``rezone`` reads them in the rebuild's zone, which the
    next rebuild then keeps."""
    berlin = TEST_SETTINGS.replaced(service_timezone="Europe/Berlin")
    with running_simulator(SimulatorConfig(shipments=8, seed=5, naive_clock="Europe/Berlin")) as sim:
        syncer(sim, tmp_path, publish_after=False)(berlin, streams=ONLY_SHIPMENTS)
    instants = "SELECT shipment_id, last_modified_at FROM freight.shipments ORDER BY ALL"
    runs = "SELECT count(*) FROM freight_meta.sync_runs"
    with open_warehouse(tmp_path, storage_from_env()) as warehouse:
        held, logged = warehouse.con.execute(instants).fetchall(), warehouse.con.execute(runs).fetchall()
        with pytest.raises(ZoneChanged, match=r"read in Europe/Berlin, and this rebuild's zone is UTC .*"
                                              r"set FREIGHT_SERVICE_TIMEZONE=Europe/Berlin .*nothing written"):
            rebuild(warehouse, "rebuild-utc", TEST_SETTINGS, batch_size=BATCH, everything=True)
        assert warehouse.con.execute(instants).fetchall() == held and warehouse.con.execute(runs).fetchall() == logged
        assert rebuild(warehouse, "rebuild-berlin", berlin, batch_size=BATCH, everything=True).shipments_written == 0
        moved = rebuild(warehouse, "rebuild-rezoned", TEST_SETTINGS, batch_size=BATCH, everything=True, rezone=True)
        assert moved.shipments_written == len(held)
        rezoned = warehouse.con.execute(instants).fetchall()
        moved_by = {at - before for (_, at), (_, before) in zip(rezoned, held, strict=True)}
        assert moved_by <= {dt.timedelta(hours=1), dt.timedelta(hours=2)}  # Berlin's winter and summer offsets
        rebuild(warehouse, "rebuild-utc-again", TEST_SETTINGS, batch_size=BATCH, everything=True)  # kept: UTC


def test_a_rebuild_killed_after_a_batch_is_completed_by_the_next(
    release_sim: RunningSimulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fixed, shapes = flatten._SHIPMENT, dict(drift.SOURCE_SHAPES)
    run_id = _read_in_new_release(release_sim, syncer(release_sim, tmp_path), monkeypatch)
    read = {r[0] for r in query(work_db(tmp_path), "SELECT shipment_id FROM freight_meta.raw_shipments "
                                                   "WHERE run_id = ?", [run_id])}
    monkeypatch.setattr(flatten, "_SHIPMENT", fixed)  # the code as it is: the child's too
    monkeypatch.setattr(drift, "SOURCE_SHAPES", shapes)
    expected = expected_rows(release_sim.store)  # what the new release took away is not in the raw
    expected["code_conversions"], expected["shipment_documents"] = [], []  # their streams did not run
    expected["shipment_aes"] = [r for r in expected["shipment_aes"] if r["shipment_id"] not in read]
    for leg in expected["air_main_carriage_legs"]:
        if leg["shipment_id"] in read:
            leg.pop("flight_no", None)
    assert "shipments" in rows_differences(expected, work_db(tmp_path))

    env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")])
    child = subprocess.Popen([sys.executable, "-m", "freight_pipeline_tests.sync.crash_rebuild", str(tmp_path),
                              "killed-rebuild", str(BATCH)], cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    first = child.stdout.readline()
    assert first.startswith("rebuild:"), first
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL, "the rebuild ended before the kill"
    state = query(work_db(tmp_path), "SELECT cursor_value FROM freight_meta.sync_state WHERE stream = ?",
                  [REBUILD_STATE])
    assert state and state[0][0] is not None, "killed before its first commit"

    served = release_sim.request_count()
    with open_warehouse(tmp_path, storage_from_env()) as warehouse:
        found = rebuild(warehouse, "rebuild-2", TEST_SETTINGS, batch_size=BATCH)
    assert release_sim.request_count() == served
    assert found.resumed_after is not None and found.shipments < SHIPMENTS_HELD
    assert rows_differences(expected, work_db(tmp_path)) == {}
    assert _history_disagrees(work_db(tmp_path)) == 0


def test_code_conversions_and_e_files_are_rederived_and_the_next_sync_lists_no_e_file_again(
    small_sim: RunningSimulator, tmp_path: Path
) -> None:
    """The code conversions are re-derived from the record each row keeps (``payload``), the E-File rows from
    the files kept raw. The documents stream had listed every shipment's E-Files: the rebuild's writes (which
    change no E-File) do not make the next sync list them all again; a shipment changed meanwhile is listed."""
    sync = syncer(small_sim, tmp_path, publish_after=False)
    sync()
    with duckdb.connect(str(work_db(tmp_path))) as con:  # what an older mapping might have made of them
        con.execute("UPDATE freight.code_conversions SET target_code = NULL, description = 'old mapping'")
        con.execute("UPDATE freight.shipment_documents SET description = 'old mapping', roles = '[]'")
        # and a warehouse synced by a version that named no mapping in its runs: every shipment re-derived
        con.execute("UPDATE freight_meta.sync_runs SET details = "
                    "CAST(json_merge_patch(details, json_object('extra', json_object(?, NULL))) AS JSON)", [MAPPING])
    before = rows_differences(expected_rows(small_sim.store), work_db(tmp_path))
    assert "code_conversions" in before and "shipment_documents" in before
    served = small_sim.request_count()
    with open_warehouse(tmp_path, storage_from_env()) as warehouse:
        found = rebuild(warehouse, "rebuild-docs", TEST_SETTINGS, batch_size=BATCH)
    assert small_sim.request_count() == served
    held = query(work_db(tmp_path), "SELECT count(*) FROM freight.code_conversions")[0][0]
    assert found.code_conversions == held > 0
    assert found.touched is None and found.shipments == found.read > 0
    assert "(every one: rows held may come from a run that names no mapping" in found.line(), found.line()
    logged = query(work_db(tmp_path), "SELECT details->>'$.extra.every_one_because' FROM freight_meta.sync_runs "
                                      "WHERE run_id = 'rebuild-docs'")[0][0]
    assert logged == found.every_one_because and "names no mapping" in logged
    assert rows_differences(expected_rows(small_sim.store), work_db(tmp_path)) == {}
    changed = small_sim.modify_shipments(2)
    small_sim.advance_clock(1)
    after = sync()[DOCUMENTS]
    assert after.extra["relisted"] is False
    assert after.extra["shipments"] == len(changed), "only the changed shipments (not the rebuilt ones)"


def test_a_sync_between_an_interrupted_rebuild_and_its_resumption_moves_what_it_wrote_past_the_position(
    small_sim: RunningSimulator, tmp_path: Path
) -> None:
    """A rebuild reads the raw in the order it was fetched: a shipment a sync writes again while a rebuild is
    interrupted is fetched after the position held, and the resumed rebuild re-derives it with what it had left."""
    sync = syncer(small_sim, tmp_path, publish_after=False)
    sync()
    with open_warehouse(tmp_path, storage_from_env()) as warehouse:
        first = warehouse.reads.raw_records(None, 4)  # what a rebuild killed after its first batch committed
        assert first.last is not None
        mapping = current_signature(TEST_SETTINGS.service_timezone).id  # a rebuild of everything (--all), killed
        killed = RebuildState(first.last, mapping=mapping, began=dt.datetime.now(dt.UTC))
        warehouse.writes.set_cursor(REBUILD_STATE, killed.text("killed"), "killed")
    done = [shipment_id for shipment_id, _, _ in first.records]
    small_sim.touch_shipments(done[:2])
    small_sim.advance_clock(60)
    sync()
    fetched = dict(query(work_db(tmp_path), "SELECT shipment_id, fetched_at FROM freight_meta.raw_shipments"))
    moved = [i for i in done if fetched[i] > first.last.fetched_at]
    assert set(done[:2]) <= set(moved)
    with open_warehouse(tmp_path, storage_from_env()) as warehouse:
        found = rebuild(warehouse, "rebuild-resumed", TEST_SETTINGS, batch_size=BATCH, everything=True)
    assert found.resumed_after == first.last.shipment_id
    assert found.shipments == len(fetched) - len(done) + len(moved)
    assert rows_differences(expected_rows(small_sim.store), work_db(tmp_path)) == {}


class _Interrupted(Exception):
    """Raised by a rebuild's progress line: the rebuild stops right after its first batch committed."""


def _stop(line: str) -> None:
    raise _Interrupted(line)


def test_a_resumed_rebuild_carries_no_e_file_watermark_past_a_sync_whose_documents_stream_did_not_run(
    small_sim: RunningSimulator, tmp_path: Path
) -> None:
    """A rebuild begun with the documents stream caught up, interrupted; a sync of the shipments alone (its
    documents stream not run) writes changed shipments; the resumed rebuild must not move the E-File watermark
    past them: the next sync lists their E-Files."""
    sync = syncer(small_sim, tmp_path, publish_after=False)
    sync()
    with open_warehouse(tmp_path, storage_from_env()) as warehouse, pytest.raises(_Interrupted):
        rebuild(warehouse, "rebuild-killed", TEST_SETTINGS, batch_size=BATCH, everything=True, workers=0,
                progress=_stop)
    changed = small_sim.modify_shipments(3)
    small_sim.advance_clock(60)
    sync(streams=ONLY_SHIPMENTS)
    with open_warehouse(tmp_path, storage_from_env()) as warehouse:
        found = rebuild(warehouse, "rebuild-resumed", TEST_SETTINGS, batch_size=BATCH, everything=True, workers=0)
    assert found.resumed_after is not None
    after = sync()[DOCUMENTS]
    assert after.extra["relisted"] is False
    assert after.extra["shipments"] == len(changed), "the E-Files of the shipments the sync between wrote"


def test_a_chunk_is_derived_with_the_collector_paused_then_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    enabled = gc.isenabled()
    seen: list[bool] = []
    monkeypatch.setattr("freight_pipeline.sync.rebuild.assemble", lambda *args, **options: seen.append(gc.isenabled())
                        or assemble(*args, **options))
    try:
        gc.enable()
        derive([], ServiceZone())
        assert seen == [False] and gc.isenabled()
        with pytest.raises(ValueError), gc_paused():
            raise ValueError("a record the mapping refuses")
        assert gc.isenabled()
        gc.disable()
        with gc_paused():
            pass
        assert not gc.isenabled()  # off before: left off
    finally:
        (gc.enable if enabled else gc.disable)()


def test_a_shipment_is_rederived_when_its_document_or_a_part_names_a_touched_key_or_holds_an_escape() -> None:
    keys = frozenset({"house_bill_number"})
    legs = zlib.compress(b'[{"id": 1, "house_bill_number": "X"}]')
    assert names_any((1, '{"id": 1, "house_bill_number": "HB1"}', {}), keys)
    assert names_any((1, '{"id": 1}', {"shipment_events": None, "air_main_carriage_legs": legs}), keys)
    assert names_any((1, '{"id": 1, "\\u0068ouse_bill_number": "HB1"}', {}), keys)  # could spell the key
    assert not names_any((1, '{"id": 1, "house_reference": "house_bill_number_old"}', {"shipment_events": None}),
                         keys)


def test_a_rebuild_tallies_no_field_of_the_raw_it_rederives() -> None:
    """The sync that read the records tallied their fields (its drift report); a rebuild reads nothing new."""
    bundle = raw_bundle(7, '{"id": 7, "a_field_no_spec_declares": 1}', {})
    now = dt.datetime.now(dt.UTC)
    assert assemble([bundle], now, None, ServiceZone()).tallies[DOCUMENT].records == 1
    assert assemble([bundle], now, None, ServiceZone(), keep_raw=False).tallies == {}


def test_a_rebuild_goes_on_from_the_position_held_and_from_the_first_shipment_after_an_id_alone(
    tmp_path: Path,
) -> None:
    """The progress a batch commits is a position in the raw's order of fetching; an entry with only a shipment
    id (left by a version that read in id order) cannot say where it stood in that order: from the first."""
    position = RawPosition(dt.datetime(2026, 11, 28, 10, 30, 0, 123456, tzinfo=dt.UTC), 42)
    with open_warehouse(tmp_path, storage_from_env()) as warehouse:
        warehouse.writes.set_cursor(REBUILD_STATE, RebuildState(position, True).text("killed"), "killed")
        assert RebuildState.held(warehouse) == RebuildState(position, True)
        warehouse.writes.set_cursor(REBUILD_STATE, '{"after": 42, "documents_caught_up": true, "run_id": "old"}',
                                    "old")
        assert RebuildState.held(warehouse) == RebuildState(None, True)


def test_a_rebuild_begun_with_another_mapping_or_after_a_run_of_another_starts_from_the_first_shipment(
    small_sim: RunningSimulator, tmp_path: Path
) -> None:
    """The shipments an interrupted rebuild committed hold its mapping's rows: when the mapping changed before
    the next rebuild, or a run of another mapping (a version rolled back to, or naming none) may have written
    a shipment before the position since, the next one goes from the first shipment, not from the position."""
    syncer(small_sim, tmp_path, publish_after=False)()
    held = query(work_db(tmp_path), "SELECT count(*) FROM freight_meta.raw_shipments")[0][0]
    mapping = current_signature(TEST_SETTINGS.service_timezone).id
    began = dt.datetime.now(dt.UTC)
    with open_warehouse(tmp_path, storage_from_env()) as warehouse:
        half = warehouse.reads.raw_records(None, 4).last
        for killed, since in ((RebuildState(half, mapping="another", began=began), None),
                              (RebuildState(half, mapping=mapping, began=began), "a version naming no mapping")):
            warehouse.writes.set_cursor(REBUILD_STATE, killed.text("killed"), "killed")
            if since is not None:
                warehouse.run_log.record_run(RunRecord(since, "shipments", began + dt.timedelta(seconds=1),
                                                       began + dt.timedelta(seconds=2), "success"))
            found = rebuild(warehouse, "rebuild-anew", TEST_SETTINGS, batch_size=BATCH, everything=True)
            assert (found.resumed_after, found.read, found.shipments) == (None, held, held), killed


def _compared(compared: dict[str, int], unchanged: dict[str, int]) -> WriteStats:
    """A batch's figures: ``compared`` ids a table, ``unchanged`` of them as held (the others differed)."""
    stats = WriteStats()
    stats.compared = compared
    stats.differed = {table: list(range(count - unchanged.get(table, 0))) for table, count in compared.items()}
    return stats


def test_a_table_whose_rows_all_differ_is_written_whole_and_compared_again_every_few_batches() -> None:
    comparison = Comparison()
    comparison.learn(_compared({"shipments": 5, "shipment_events": 5}, {"shipments": 5}))
    assert comparison.skipped() == {"shipment_events"}  # none of its rows as held: comparing them was wasted
    for _ in range(PROBE_EVERY - 2):
        comparison.learn(_compared({"shipments": 5}, {"shipments": 1}))
        assert comparison.skipped() == {"shipment_events"}
    comparison.learn(_compared({"shipments": 5}, {"shipments": 0}))
    assert comparison.skipped() == {"shipments"}  # compared again: shipment_events; waits now: shipments
    comparison.learn(_compared({"shipment_events": 5}, {"shipment_events": 3}))
    assert comparison.skipped() == {"shipments"}


def _aliased(fields: tuple[Field, ...], renames: dict[str, str]) -> CompiledFields:
    return compile_fields(Field(f.column, f.type, f.description, (f.key, renames[f.key])) if f.key in renames else f
                          for f in fields)


def _with_the_nested_aliases(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fix of 2026.3's renames inside the records, an alias each (in-process): a goods line's weight also
    under gross_weight, an address's postal_code under zip_code, a container's iso code under iso_code, the
    location of every leg end and event under place (a nested object's Key, not a field's), a memo line's memo
    under text; with 2026.2's flight number."""
    monkeypatch.setattr(goods, "_GOOD", _aliased(GOOD_FIELDS, {"weight": "gross_weight"}))
    monkeypatch.setattr(addresses, "_ADDRESS", _aliased(ADDRESS_FIELDS, {"postal_code": "zip_code"}))
    monkeypatch.setattr(addresses, "_CONTAINER", _aliased(CONTAINER_FIELDS, {"container_iso_code": "iso_code"}))
    monkeypatch.setattr(legs, "_AIR", _aliased((*LEG_COMMON_FIELDS, *AIR_LEG_FIELDS), {"flight_no": "flight_number"}))
    monkeypatch.setattr(records, "_MEMO", _aliased(MEMO_FIELDS, {"memo": "text"}))
    for group in (*(end.location for end in LEG_ENDS), EVENT_LOCATION):
        monkeypatch.setattr(group, "key", Key(("location", "place"), group.key.node))


def test_aliases_at_every_level_and_a_rebuild_equal_a_fresh_sync_of_a_release_that_changed_the_records_inside(
    release_sim: RunningSimulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    held, fresh = tmp_path / "held", tmp_path / "fresh"
    sync = syncer(release_sim, held)
    sync(streams=ONLY_SHIPMENTS)
    release_sim.set_release(NESTED)
    release_sim.modify_shipments(CHANGED)
    release_sim.advance_clock(1)
    second = sync(streams=ONLY_SHIPMENTS)[SHIPMENTS]
    read = sorted(r[0] for r in query(work_db(held), "SELECT shipment_id FROM freight_meta.raw_shipments "
                                                     "WHERE run_id = ?", [second.run_id]))
    named = {c["field"] for c in second.extra["shape_changes"]}
    assert {"goods[].weight", "addresses[].postal_code", "location", "origin.location", "memo"} <= named

    _with_the_nested_aliases(monkeypatch)
    syncer(release_sim, fresh)(streams=ONLY_SHIPMENTS)  # everything read again, in 2026.3, with the aliases
    lengths = ("good_measurements", "length")  # 2026.3 sends "120 cm": no number, in either
    before = _tables_differences(work_db(held), work_db(fresh), except_aes=True, except_columns=(lengths,))
    assert {"shipment_goods", "shipment_addresses", "shipment_events", "carriage_legs", "shipment_memos"} \
        <= set(before), before

    jumped = "SELECT table_name, column_name FROM freight_meta.column_nulls WHERE state = 'jumped'"
    assert {("shipment_goods", "weight"), ("shipment_addresses", "postal_code")} <= set(query(work_db(held), jumped))
    served = release_sim.request_count()
    with open_warehouse(held, storage_from_env()) as warehouse:
        found = rebuild(warehouse, "rebuild-nested", TEST_SETTINGS, batch_size=BATCH)
    assert release_sim.request_count() == served, "the rebuild asked the service"
    assert found.touched == ("flight_number", "gross_weight", "iso_code", "place", "text", "zip_code")
    # those that name a key the aliases added were re-derived (a value may spell one too); those read in 2026.3
    # were written again, no other
    assert found.shipments_written == len(read) <= found.shipments < found.read
    assert _tables_differences(work_db(held), work_db(fresh), except_aes=True, except_columns=(lengths,)) == {}
    nulled = query(work_db(held), "SELECT DISTINCT shipment_id FROM freight.good_measurements WHERE length IS NULL "
                                  "ORDER BY 1")
    assert {r[0] for r in nulled} <= set(read) and nulled, "only what was read in 2026.3 lost its lengths"
    assert _history_disagrees(work_db(held)) == 0
    # the columns the rename had nulled, their values back, are no longer said jumped (the lengths still are null)
    assert set(query(work_db(held), jumped)) == {lengths}


def test_a_rebuild_forks_its_default_workers_only_past_its_share_and_they_derive_what_this_process_does(
    release_sim: RunningSimulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``workers`` not given: a rebuild of at most :data:`workers.IN_PROCESS_UP_TO` held shipments re-derives them
    here; of more, it forks one worker per core at the start (``Derivers.foresee``: the count held), or else
    (nothing foreseen) before the batch that passes it; each batch split into chunks among them, every table as
    derived here."""
    held = tmp_path / "here"
    syncer(release_sim, held)(streams=ONLY_SHIPMENTS)
    copies = {name: tmp_path / name for name in ("few", "foreseen", "handed over")}
    for copy in copies.values():
        shutil.copytree(held, copy)
    forks = _recorded_forks(monkeypatch)
    monkeypatch.setattr(rebuild_module, "CHUNK", 4)  # a batch of 6 in two chunks, one a worker

    def rebuilt(data_dir: Path, chosen: int | None = None) -> tuple[int, ...]:
        with open_warehouse(data_dir, storage_from_env()) as warehouse:
            found = rebuild(warehouse, "rebuild-w", TEST_SETTINGS, batch_size=BATCH, workers=chosen, everything=True)
        return found.read, found.shipments, found.shipments_written, found.data_problems, found.quarantined

    with open_warehouse(held, storage_from_env()) as warehouse:  # what ``foresee`` is told: the count from there
        _, first_batch = warehouse.reads.raw_records(None, BATCH)
        counts = warehouse.reads.raw_shipment_count(), warehouse.reads.raw_shipment_count(first_batch)
    assert counts == (SHIPMENTS_HELD, SHIPMENTS_HELD - BATCH)
    here = rebuilt(held, 0)
    assert rebuilt(copies["few"]) == here and forks == []  # 60 held: not past 100
    monkeypatch.setattr(rebuild_module, "IN_PROCESS_UP_TO", 30)
    assert rebuilt(copies["foreseen"]) == here and forks == [0]
    monkeypatch.setattr(workers.Workers, "foresee", lambda self, listed: None)
    assert rebuilt(copies["handed over"]) == here and forks == [0, 36]  # the sixth batch of 6 passes 30
    assert here[0] == SHIPMENTS_HELD
    for copy in copies.values():
        assert _tables_differences(work_db(held), work_db(copy), except_aes=False) == {}, copy


def test_a_rebuild_queues_the_legs_an_earlier_release_never_asked_for_and_the_next_sync_reads_them(
    tmp_path: Path
) -> None:
    """A shipment whose mode came as ``"SEA\\u00a0"``: a release that compared the mode as sent never asked for its sea
    legs (its raw part kept without an answer, no legs), and a rebuild, which asks nothing, has no answer to derive
    them from, while the marts read the mode as SEA. The rebuild queues the part for the next sync, which reads it;
    a shipment sent exactly SEA whose answer held none (the service's) is not queued."""
    with running_simulator(shipments=40, seed=7, control=True) as sim:
        sea = [d["id"] for d in sim.store.reader.expected_documents()
               if d.get("mode_of_transport") == "SEA" and sim.store.reader.get_sea_main_carriage(d["id"])]
        padded, exact = sea[:2]
        corrupt(sim, "shipment", padded, "set", path="mode_of_transport", value="SEA\u00a0")
        sync = syncer(sim, tmp_path, publish_after=False)
        sync(streams=ONLY_SHIPMENTS)
        with duckdb.connect(str(work_db(tmp_path))) as con:  # as the earlier release left them: never asked
            con.execute("UPDATE freight_meta.raw_parts SET answer = NULL, answer_bytes = NULL "
                        "WHERE stream = 'sea_main_carriage_legs' AND shipment_id IN (?, ?)", [padded, exact])
            con.execute("DELETE FROM freight.sea_main_carriage_legs WHERE shipment_id = ?", [padded])
        with open_warehouse(tmp_path, storage_from_env()) as warehouse:
            found = rebuild(warehouse, "rebuild-1", TEST_SETTINGS, batch_size=BATCH)
            again = rebuild(warehouse, "rebuild-2", TEST_SETTINGS, batch_size=BATCH)
        assert (found.never_asked, again.never_asked) == (1, 0)
        assert found.line().endswith("; 1 part an earlier release never asked for queued for the next sync")
        assert query(work_db(tmp_path), "SELECT stream, shipment_id FROM freight_meta.quarantine") == [
            ("sea_main_carriage_legs", padded)]
        sync(streams=ONLY_SHIPMENTS)
        held = query(work_db(tmp_path), "SELECT count(*) FROM freight.sea_main_carriage_legs WHERE shipment_id = ?",
                     [padded])
        assert held == [(len(sim.store.reader.get_sea_main_carriage(padded)),)]
        assert query(work_db(tmp_path), "SELECT count(*) FROM freight_meta.quarantine") == [(0,)]
