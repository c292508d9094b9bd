"""The ETA marts after a history catch-up (``Writes.catch_up_history``): a shipment's estimate moved while
the history was off (``FREIGHT_HISTORY=0``) gains its version when the history is on again, and the catch-up
logs it in ``freight_meta.changed_shipments`` in the same transaction, so the next incremental build
rebuilds it (``docs/marts.md``: a shipment whose history gained a version is in the log too)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from pathlib import Path

import duckdb

from freight_pipeline.marts.plan import plan_build, record_build
from freight_pipeline.normalize.specs.events_memos import SHIPMENT_EVENTS
from freight_pipeline.normalize.specs.shipments import SHIPMENTS
from freight_pipeline.normalize.tables import FREIGHT_TABLES
from freight_pipeline.warehouse.paths import working_db_path
from freight_pipeline.warehouse.records import BatchWrite, RawDocument, RunRecord
from freight_pipeline.warehouse.store import Warehouse
from freight_pipeline_tests.dbt.dbt_cli import run_dbt_in_worker

ARRIVAL = "POD_ARRIVAL"
FINGERPRINT = "the-project"


def utc(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC)


def write(wh: Warehouse, run_id: str, stamp: dt.datetime, estimates: Mapping[int, dt.datetime], *,
          deleted: Sequence[int] = (), history: bool, arrived: Mapping[int, dt.datetime] | None = None) -> None:
    """One sync batch: shipments ``estimates`` names (each with its arrival estimate, and its actual arrival when
    ``arrived`` names it), last modified at ``stamp``, and ``deleted`` gone from the service."""
    ids = sorted(estimates)
    actuals = [{"shipment_id": i, "event": ARRIVAL, "type": "ACTUAL", "event_at": at}
               for i, at in (arrived or {}).items()]
    tables = {
        "shipments": SHIPMENTS.to_arrow([{"shipment_id": i, "client": "C1", "shipment_number": f"SN{i}",
                                          "mode_of_transport": "SEA", "last_modified_at": stamp} for i in ids]),
        "shipment_events": SHIPMENT_EVENTS.to_arrow([{"shipment_id": i, "event": ARRIVAL, "type": "ESTIMATED",
                                                      "event_at": at} for i, at in estimates.items()] + actuals),
    }
    batch = BatchWrite(tables=tables, replaced={name: ids for name in tables}, loaded={"shipments": ids},
                       deleted_ids=list(deleted), raw_documents=[RawDocument(i, "{}", stamp, stamp) for i in ids])
    wh.writes.apply_batch(run_id, batch, history=history)


def build(tmp: Path, database: Path, name: str) -> dt.datetime:
    """An incremental build (a full one the first time) of the marts; returns when it began."""
    began = dt.datetime.now(dt.UTC)
    result, _ = run_dbt_in_worker(["build", "--exclude-resource-type", "unit_test"], tmp / name, database)
    assert result.returncode == 0, result.stdout[-3000:]
    return began


def covered(data_dir: Path, began: dt.datetime, run_id: str) -> None:
    """What the run does after a complete, successful build: its state kept, the log it covered forgotten."""
    with Warehouse(data_dir, FREIGHT_TABLES) as wh:
        wh.run_log.record_run(RunRecord(run_id, "dbt_build", began, began, "success"))
        record_build(wh, FINGERPRINT, began, run_id, full_check=True)


def revisions(database: Path) -> list[tuple[object, ...]]:
    with duckdb.connect(str(database), read_only=True) as con:
        con.execute("SET TimeZone = 'UTC'")
        return con.execute("SELECT shipment_id, estimate_versions, revisions, last_estimated_at "
                           "FROM analytics.fct_estimate_revisions WHERE milestone = 'arrival' ORDER BY ALL").fetchall()


def scored_shipments(database: Path) -> list[tuple[object, ...]]:
    """(shipment, mode of transport) of each shipment in ``fct_eta_accuracy``, and the modes its monthly aggregate
    counts arrivals in."""
    with duckdb.connect(str(database), read_only=True) as con:
        return con.execute("SELECT DISTINCT shipment_id, mode_of_transport FROM analytics.fct_eta_accuracy "
                           "UNION ALL SELECT DISTINCT NULL, mode_of_transport "
                           "FROM analytics.fct_eta_accuracy_monthly ORDER BY ALL").fetchall()


def test_a_catch_up_logs_the_shipments_that_gained_versions_and_the_next_build_rebuilds_them(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    database = working_db_path(data_dir)
    first, moved = utc("2026-11-20 06:00"), utc("2026-11-22 06:00")
    with Warehouse(data_dir, FREIGHT_TABLES) as wh:  # history on: first versions of 7, 8 and 9
        write(wh, "on-1", utc("2026-11-01 08:00"), {7: first, 8: first, 9: first}, history=True,
              arrived={8: utc("2026-11-01 07:00"), 9: utc("2026-11-01 07:30")})
    covered(data_dir, build(tmp_path, database, "first"), "b1")
    assert revisions(database) == [(7, 1, 0, first), (8, 1, 0, first), (9, 1, 0, first)]
    assert scored_shipments(database) == [(8, "SEA"), (9, "SEA"), (None, "SEA")]

    with Warehouse(data_dir, FREIGHT_TABLES) as wh:  # history off: 7's estimate moves, 8 is deleted
        write(wh, "off-2", utc("2026-11-03 08:00"), {7: moved}, deleted=[8], history=False)
        assert wh.reads.pending_changes() == 2
    covered(data_dir, build(tmp_path, database, "off"), "b2")
    # the build after the run without history: 8 left the marts, 7's estimate has no version yet
    assert revisions(database) == [(7, 1, 0, first), (9, 1, 0, first)]
    # the accuracy marts too (was: 8's arrival kept, its mode null, counted under UNKNOWN in the monthly mart)
    assert scored_shipments(database) == [(9, "SEA"), (None, "SEA")]

    with Warehouse(data_dir, FREIGHT_TABLES) as wh:  # history on again: the run catches up first
        assert wh.reads.pending_changes() == 0
        assert plan_build(wh, FINGERPRINT).run is False
        counts = wh.writes.catch_up_history("on-3")
        # 7: its moved estimate (its header's content is the same); 8: deleted, of every subject it had (its
        # estimate and its actual arrival)
        assert counts.added == {"shipment_versions": 1, "event_versions": 3, "leg_versions": 0}
        # exactly the shipments that gained versions: 7 (its moved estimate) and 8 (deleted); not 9
        logged = wh.con.execute("SELECT shipment_id, run_id FROM freight_meta.changed_shipments ORDER BY 1"
                                ).fetchall()
        assert logged == [(7, "on-3"), (8, "on-3")]
        plan = plan_build(wh, FINGERPRINT)
        assert (plan.run, plan.full_refresh, plan.reason) == (True, False, "2 shipments changed; a full check")
    build(tmp_path, database, "on")
    # the incremental build scores the caught-up version: 7's estimate moved once, two days later
    assert revisions(database) == [(7, 2, 1, moved), (9, 1, 0, first)]
