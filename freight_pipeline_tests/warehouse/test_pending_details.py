"""The upgrade of a warehouse an earlier release left work queued in for its detail streams
(``freight_meta.pending_details``): every entry read by the next run, the old queue gone."""

from __future__ import annotations

from pathlib import Path

import duckdb

from freight_pipeline.config import ServiceSettings
from freight_pipeline.simulator.server import running_simulator
from freight_pipeline.sync.parts import PART_BY_STREAM
from freight_pipeline.sync.runner import sync_all
from freight_pipeline.warehouse import meta
from freight_pipeline.warehouse.ddl import Catalog
from freight_pipeline.warehouse.embedded import EmbeddedDuckDB
from freight_pipeline.warehouse.paths import working_db_path
from freight_pipeline.warehouse.pending_details import pending_details_into_retries
from freight_pipeline.warehouse.store import SCHEMA_STATE
from freight_pipeline_tests.sync.expected import assert_converged

OLD_QUEUE = """CREATE TABLE freight_meta.pending_details (stream VARCHAR NOT NULL, shipment_id BIGINT NOT NULL,
    client VARCHAR, shipment_number VARCHAR, mode_of_transport VARCHAR, enqueued_at TIMESTAMPTZ, run_id VARCHAR,
    PRIMARY KEY (stream, shipment_id))"""
"""The table as the releases before the shipments stream read the parts made it (ee53c8d)."""


def test_the_work_an_earlier_release_left_queued_for_each_detail_stream_is_read_by_the_next_run(
    tmp_path: Path,
) -> None:
    """An earlier release's events, legs or memo lines stream that failed left its shipments queued; this release's
    walk is past them, so their parts kept what was read before, for good (a closed shipment is never sampled), and
    the stale queue was published. Every retired stream's entry (``meta.RETIRED_STREAMS``) is now read as a retry of
    its part, and the old queue dropped."""
    data_dir = tmp_path / "data"
    with running_simulator(shipments=60, seed=11) as sim:
        service = ServiceSettings(sim.base_url, sim.username, sim.password)
        sync_all(service, data_dir, backend=EmbeddedDuckDB(), publish_after=False)
        queued: dict[str, int] = {}
        with duckdb.connect(str(working_db_path(data_dir))) as con:  # as the earlier release left it
            con.execute(OLD_QUEUE)
            for stream in sorted(meta.RETIRED_STREAMS):
                (table,) = PART_BY_STREAM[stream].tables
                shipment_id, client, number, mode = con.execute(
                    f"SELECT s.shipment_id, s.client, s.shipment_number, s.mode_of_transport FROM freight.{table} t "
                    "JOIN freight.shipments s USING (shipment_id) WHERE s.shipment_id NOT IN (SELECT unnest(?)) "
                    "ORDER BY s.shipment_closed DESC, s.shipment_id LIMIT 1", [list(queued.values())]).fetchone()
                queued[stream] = shipment_id
                # what the earlier release held: its part as read before it changed (here: none of its rows)
                con.execute(f"DELETE FROM freight.{table} WHERE shipment_id = ?", [shipment_id])
                con.execute("DELETE FROM freight_meta.raw_parts WHERE stream = ? AND shipment_id = ?",
                            [stream, shipment_id])
                con.execute("INSERT INTO freight_meta.pending_details VALUES (?, ?, ?, ?, ?, now(), 'old-run')",
                            [stream, shipment_id, client, number, mode])
            con.execute("DELETE FROM freight_meta.sync_state WHERE stream = ?", [SCHEMA_STATE])  # an older schema
        sync_all(service, data_dir, backend=EmbeddedDuckDB(), publish_after=False)
        assert_converged(sim.store, working_db_path(data_dir))
    with duckdb.connect(str(working_db_path(data_dir))) as con:
        assert ("freight_meta", "pending_details") not in Catalog.read(con).columns
        assert con.execute("SELECT count(*) FROM freight_meta.quarantine").fetchone() == (0,)  # read: none waits
        assert pending_details_into_retries(con, Catalog.read(con)) == []  # once: nothing left to move
