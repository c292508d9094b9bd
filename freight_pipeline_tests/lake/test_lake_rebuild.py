"""A rebuild in lake mode (a real PostgreSQL catalog, a real S3-compatible server): every ``freight`` table
re-derived from the raw records in the lake, batch by batch (each one DuckLake commit), with no request to
the simulator (asked for every shipment: the lake records that its rows are the current mapping's, so a plain
rebuild re-derives none); the tables then still equal the source, and the history's current versions the rows."""

from __future__ import annotations

from pathlib import Path

from bench.lake_harness import read_lake, write_expected
from freight_pipeline.config import ServiceSettings, environ, load_settings
from freight_pipeline.lake.backend import storage_from_env
from freight_pipeline.lake.connect import connect_lake
from freight_pipeline.lake.settings import LakeSettings
from freight_pipeline.simulator.server import running_simulator
from freight_pipeline.sync.rebuild import REBUILD_STATE, rebuild
from freight_pipeline.sync.runner import sync_all
from freight_pipeline.sync.settings import SyncSettings
from freight_pipeline.warehouse.history import SUBJECTS, disagreeing_sql
from freight_pipeline.warehouse.store import open_warehouse

SHIPMENTS = 16
BATCH = 8


def test_a_rebuild_in_the_lake_rederives_every_table_without_a_request(
    lake_env: dict[str, str], tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    with running_simulator(shipments=SHIPMENTS, seed=17) as sim, environ(lake_env):
        backend = storage_from_env()
        assert backend.concurrent_writers, "not a lake"
        sync_all(ServiceSettings(sim.base_url, sim.username, sim.password), data_dir, backend=backend)
        served = sim.request_count()
        with open_warehouse(data_dir, backend) as warehouse:
            # the lake records the mapping that derived its rows: the same one re-derives nothing
            configured = SyncSettings.of(load_settings().sync)
            same = rebuild(warehouse, "lake-same", configured, batch_size=BATCH)
            found = rebuild(warehouse, "lake-rebuild", configured, batch_size=BATCH, everything=True)
        assert sim.request_count() == served
        expected = write_expected(sim, tmp_path / "expected")
    assert (same.touched, same.read, same.shipments) == ((), 0, 0)
    assert (found.shipments, found.batches, found.quarantined) == (SHIPMENTS, SHIPMENTS // BATCH, 0)
    assert read_lake(lake_env, expected)["differences"] == {}
    lake = LakeSettings.configured(lake_env)
    assert lake is not None
    with connect_lake(lake, tmp_path / "scratch", "256MB", read_only=True) as con:
        assert sum(len(con.execute(disagreeing_sql(subject)).fetchall()) for subject in SUBJECTS) == 0
        state = con.execute("SELECT cursor_value FROM freight_meta.sync_state WHERE stream = ? "
                            "ORDER BY updated_at DESC LIMIT 1", [REBUILD_STATE]).fetchall()
    assert state == [(None,)]
