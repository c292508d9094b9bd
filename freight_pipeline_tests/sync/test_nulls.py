"""The second line of defence, over HTTP: a column the service starts sending as null (present, so no shape
changed) is named by the run that writes it, stays open in ``status`` and the WARN check while it lasts, and
closes when the values come back; a full sync and ten incremental runs of the simulator's data say nothing."""

from __future__ import annotations

from pathlib import Path

import duckdb

from freight_pipeline.checks.warehouse import evaluate_checks, null_check
from freight_pipeline.commands.report import read_report
from freight_pipeline.commands.status import render_status
from freight_pipeline.lake.backend import storage_from_env
from freight_pipeline.simulator.server import running_simulator
from freight_pipeline.sync.nulls import BOUND, FLOOR, MIN_ROWS
from freight_pipeline.sync.parts import DOCUMENT
from freight_pipeline.sync.shipments import STREAM as SHIPMENTS
from freight_pipeline_tests.sync.conftest import query, syncer, work_db
from freight_pipeline_tests.sync.test_bad_data import changed, corrupt, heal

HELD = 80
CHANGED_PER_RUN = 10
NULLED = 25
ONLY_SHIPMENTS = (SHIPMENTS,)


def _jumps(results: dict) -> list[str]:
    return [jump["phrase"] for result in results.values() for jump in result.extra.get("null_jumps", [])]


def _check(data_dir: Path) -> tuple[bool, dict]:
    with duckdb.connect(str(work_db(data_dir)), read_only=True) as con:
        ((_, result),) = evaluate_checks(con, [null_check(DOCUMENT)])
    return result.passed, result.figures


def _counted_as_written(data_dir: Path, results: dict) -> dict[str, int]:
    """Each table's rows counted for a run of ``results`` (``column_nulls``' latest), asserted to be the rows that
    run wrote (its ``_run_id``; a shipment read again as held, or re-read and found the same, keeps its rows)."""
    runs = sorted({result.run_id for result in results.values()})
    with duckdb.connect(str(work_db(data_dir)), read_only=True) as con:  # one connection: 25 tables, 11 runs
        counted = {table: rows for table, run, rows in con.execute(
            "SELECT DISTINCT table_name, latest_run_id, rows_latest FROM freight_meta.column_nulls").fetchall()
            if run in runs}
        counts = [f"SELECT '{table}', count(*) FROM freight.{table} WHERE list_contains($runs, _run_id)"
                  for table in counted]
        written = dict(con.execute(" UNION ALL ".join(counts), {"runs": runs}).fetchall()) if counts else {}
    assert counted == written
    return counted


def test_a_column_sent_as_null_is_named_until_its_values_come_back(tmp_path: Path) -> None:
    with running_simulator(shipments=HELD, seed=5, control=True) as sim:
        sync, publish = syncer(sim, tmp_path, publish_after=False), syncer(sim, tmp_path)
        first = sync()
        said = _jumps(first)
        assert _counted_as_written(tmp_path, first)["shipments"] == HELD
        for _ in range(10):  # the simulator's own data: modified, progressed, none sent as null
            sim.modify_shipments(CHANGED_PER_RUN)
            sim.progress_shipments()
            sim.advance_clock(600)
            results = sync(streams=ONLY_SHIPMENTS)
            said += _jumps(results)
            # the walk reads the last run's stamp again, the events sample re-reads parts: not written, not counted
            assert 0 < _counted_as_written(tmp_path, results)["shipments"] < results[SHIPMENTS].rows_read
        assert said == []
        assert query(work_db(tmp_path), "SELECT count(*) FROM freight_meta.column_nulls WHERE state <> 'usual'") \
            == [(0,)]
        assert _check(tmp_path)[0]

        ids = sim.store.reader.live_shipment_ids()[:NULLED]
        for shipment_id in ids:  # the key is sent, with null: no shape changed
            corrupt(sim, "shipment", shipment_id, "set", path="direction", value=None)
        changed(sim, ids)
        results = publish()
        assert results[SHIPMENTS].extra["shape_changes"] == []
        jumps = results[SHIPMENTS].extra["null_jumps"]
        assert [(j["table"], j["column"]) for j in jumps] == [("shipments", "direction")]
        (jump,) = jumps
        assert jump["nulls"] == NULLED and jump["rows"] >= NULLED >= MIN_ROWS
        assert jump["nulls_before"] / jump["rows_before"] < FLOOR < BOUND < jump["nulls"] / jump["rows"]
        line = "columns null far more often than before: shipments.direction null in 25 of "
        assert any(note.startswith(line) for note in results[SHIPMENTS].null_jumps())
        passed, figures = _check(tmp_path)
        assert not passed and figures["columns"][0]["column"] == "shipments.direction"
        status = render_status(read_report(tmp_path, storage_from_env()))
        assert "columns null far more often than before (freight_meta.column_nulls)" in status
        assert "shipments.direction" in status

        changed(sim, ids)  # still null: still open, said once
        assert _jumps(sync()) == [] and not _check(tmp_path)[0]
        heal(sim)
        changed(sim, ids)
        assert _jumps(sync()) == [] and _check(tmp_path)[0]
        assert query(work_db(tmp_path), "SELECT state FROM freight_meta.column_nulls WHERE table_name = 'shipments' "
                                        "AND column_name = 'direction'") == [("usual",)]
