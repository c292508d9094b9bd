"""What the sync reads back from the warehouse (``warehouse.reads``), where the service's codes decide it: read as the
marts read them (trimmed, upper case), never as exact text."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from freight_pipeline.lake.backend import storage_from_env
from freight_pipeline.sync.freshness import SAMPLED_PARTS
from freight_pipeline.warehouse.store import open_warehouse

SERVICE_NOW = dt.datetime(2026, 10, 1, tzinfo=dt.UTC)


@pytest.mark.parametrize("spelled", ["ESTIMATED", "estimated", " Estimated ", "ESTIMATED  "])
def test_the_nearest_upcoming_estimate_is_found_however_its_type_is_spelled(tmp_path: Path, spelled: str) -> None:
    """The rolling re-read reads the shipments with the nearest upcoming estimate first: one whose estimate's type
    came as ``" estimated"`` came last, as if it had none (the marts read it ESTIMATED)."""
    with open_warehouse(tmp_path, storage_from_env()) as warehouse:
        con = warehouse.database.con
        con.execute("INSERT INTO freight.shipments (shipment_id, shipment_closed, _synced_at, _run_id) "
                    "VALUES (1, false, now(), 'r'), (2, false, now(), 'r')")
        con.execute("INSERT INTO freight.shipment_events (shipment_id, event, type, event_at, _synced_at, _run_id) "
                    "VALUES (1, 'ARR', ?, ?, now(), 'r'), (2, 'ARR', 'ESTIMATED', ?, now(), 'r')",
                    [spelled, SERVICE_NOW + dt.timedelta(days=1), SERVICE_NOW + dt.timedelta(days=2)])
        rows = warehouse.reads.open_shipments_by_part_age(SAMPLED_PARTS, 2, upcoming_after=SERVICE_NOW)
    assert [(row["shipment_id"], row["next_estimate_at"]) for row in rows] == [
        (1, SERVICE_NOW + dt.timedelta(days=1)), (2, SERVICE_NOW + dt.timedelta(days=2))]
