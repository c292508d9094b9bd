"""``fct_eta_accuracy`` and ``fct_estimate_revisions`` from real syncs over HTTP: one shipment's arrival
estimate moved three times across four syncs, then its actual; ``dbt build`` on the working database the
syncs wrote gives the hand-computed errors."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import duckdb

from freight_pipeline.config import ServiceSettings
from freight_pipeline.simulator.clock import parse_instant
from freight_pipeline.simulator.server import RunningSimulator, running_simulator
from freight_pipeline.sync.runner import sync_all
from freight_pipeline.warehouse.embedded import EmbeddedDuckDB
from freight_pipeline.warehouse.paths import working_db_path
from freight_pipeline_tests.dbt.dbt_cli import run_dbt_in_worker
from freight_pipeline_tests.sync.settings import RECONCILE_SETTINGS

ARRIVAL = "POD_ARRIVAL"
DAY = dt.timedelta(days=1)
HOUR = dt.timedelta(hours=1)


def awaiting_arrival(sim: RunningSimulator) -> int:
    """A sea shipment with an arrival estimate and no arrival yet."""
    for shipment_id in sorted(sim.store.reader.live_shipment_ids()):
        events = {(e["event"], e["type"]) for e in sim.store.reader.get_events(shipment_id)}
        if (sim.store.reader.get_base_shipment(shipment_id)["mode_of_transport"] == "SEA"
                and (ARRIVAL, "ESTIMATED") in events and (ARRIVAL, "ACTUAL") not in events):
            return shipment_id
    raise AssertionError("the simulator has no sea shipment awaiting its arrival")


def test_the_arrival_estimates_of_four_syncs_are_scored(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with running_simulator(shipments=20, seed=23) as sim:
        service = ServiceSettings(sim.base_url, sim.username, sim.password)
        shipment = awaiting_arrival(sim)
        start = sim.store.clock.now().astimezone(dt.UTC)
        arrived = start + 12 * DAY  # A
        estimates = (arrived + 30 * HOUR, arrived + 10 * HOUR, arrived - 2 * HOUR)
        stamps = []  # when each estimate became known: the shipment's last-modified instant (valid_from)
        for number, estimate in enumerate(estimates, start=1):
            if number > 1:
                sim.advance_clock(4 * DAY.total_seconds())
            stamps.append(parse_instant(sim.move_milestone(shipment, ARRIVAL, "ESTIMATED", estimate)))
            sync_all(service, data_dir, RECONCILE_SETTINGS, backend=EmbeddedDuckDB(), run_id=f"sync-{number}",
                     publish_after=False)
        sim.set_clock(arrived + DAY)  # the actual shows once the shipment's version has reached it
        sim.move_milestone(shipment, ARRIVAL, "ACTUAL", arrived)
        sync_all(service, data_dir, RECONCILE_SETTINGS, backend=EmbeddedDuckDB(), run_id="sync-4", publish_after=False)

    database = working_db_path(data_dir)
    # the estimates became known about 0, 4 and 8 days after the start: A - 14 d (start - 2 d) lies before
    # the first version, A - 7 d (start + 5 d) in the second, A - 3 d and A - 1 d in the third
    assert arrived - 14 * DAY < stamps[0] and stamps[1] <= arrived - 7 * DAY < stamps[2] <= arrived - 3 * DAY
    with duckdb.connect(str(database), read_only=True) as con:
        versions = con.execute("SELECT type, event_at FROM freight_history.event_versions WHERE shipment_id = ? "
                               "AND event = ? ORDER BY type DESC, valid_from", [shipment, ARRIVAL]).fetchall()
    assert versions == [*(("ESTIMATED", e) for e in estimates), ("ACTUAL", arrived)]

    result, _ = run_dbt_in_worker(["build", "--exclude-resource-type", "unit_test"], tmp_path, database)
    assert result.returncode == 0, result.stdout[-3000:]
    with duckdb.connect(str(database), read_only=True) as con:
        con.execute("SET TimeZone = 'UTC'")
        scored = con.execute(
            "SELECT horizon_days, error_hours, estimate_valid_from FROM analytics.fct_eta_accuracy "
            "WHERE shipment_id = ? AND milestone = 'arrival' ORDER BY horizon_days", [shipment]).fetchall()
        revisions = con.execute(
            "SELECT estimate_versions, revisions, total_slip_hours, actual_at FROM analytics.fct_estimate_revisions "
            "WHERE shipment_id = ? AND milestone = 'arrival'", [shipment]).fetchall()
    assert scored == [
        (1, -2.0, stamps[2]),  # A - 2 h against A
        (3, -2.0, stamps[2]),
        (7, 10.0, stamps[1]),  # A + 10 h
        (14, None, None),  # no estimate known yet
    ]
    # A + 30 h -> A + 10 h -> A - 2 h: two moves, 32 hours earlier in all
    assert revisions == [(3, 2, -32.0, arrived)]
