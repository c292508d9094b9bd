"""The lake's maintenance job (Dagster, in process): compaction and snapshot expiry keep every table
equal to the source and the published snapshot readable."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import duckdb
import pytest

from bench.lake_harness import read_lake, write_expected
from freight_pipeline.commands.report import read_report
from freight_pipeline.config import (
    LAKE_CATALOG_URI_ENV,
    LAKE_DATA_URI_ENV,
    LAKE_RETENTION_ENV,
    ServiceSettings,
    environ,
)
from freight_pipeline.defs.lake import lake_maintenance_job
from freight_pipeline.defs.resources import WarehouseResource
from freight_pipeline.lake import backend
from freight_pipeline.lake.backend import connect_published, latest_published, publish_snapshot, storage_from_env
from freight_pipeline.lake.connect import connect_lake
from freight_pipeline.lake.settings import LakeSettings
from freight_pipeline.simulator.server import running_simulator
from freight_pipeline.sync.runner import sync_all
from freight_pipeline.warehouse.ddl import run
from freight_pipeline.warehouse.store import SCHEMA_GENERATION, SCHEMA_STATE, NewerWarehouse, open_warehouse
from freight_pipeline.warehouse.writer_lock import WarehouseBusy, writer_lock
from freight_pipeline_tests.sync.settings import TEST_SETTINGS

SHIPMENTS = 26
"""Two batches of 13 in the first sync, one more in the sync after the publish: every table in small files."""
SETTINGS = TEST_SETTINGS.replaced(fetch_batch_size=13)


def live_files(con: duckdb.DuckDBPyConnection) -> int:
    """Data and delete files the current snapshot reads."""
    return int(con.execute("SELECT sum(file_count + delete_file_count) FROM ducklake_table_info('lake')").fetchone()[0])


CATALOGS = ("sqlite", "duckdb", "postgres")
"""The catalogs a lake can have: SQLite and DuckDB files (the data beside them), the conftest's PostgreSQL server
(the data in its S3 server)."""
RETENTION_MINUTES = 60


@pytest.fixture(params=CATALOGS)
def catalog_env(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    """The lake variables of a new lake on each kind of catalog."""
    if request.param == "postgres":
        env: dict[str, str] = request.getfixturevalue("lake_env")
        return env
    catalog = f"sqlite:///{tmp_path}/catalog.sqlite" if request.param == "sqlite" else \
        f"duckdb:///{tmp_path}/catalog.ducklake"
    return {LAKE_CATALOG_URI_ENV: catalog, LAKE_DATA_URI_ENV: str(tmp_path / "lake-data")}


def snapshot_times(con: duckdb.DuckDBPyConnection) -> dict[int, dt.datetime]:
    return dict(con.execute("SELECT snapshot_id, snapshot_time FROM ducklake_snapshots('lake')").fetchall())


def test_maintenance_compacts_expires_and_keeps_the_data_and_the_published_snapshot(
    catalog_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An hour later (the maintenance's clock moved on), with a retention of an hour: the snapshots of the first
    sync expire; those of the second (younger than the retention, though older than the published one), the
    published one and what followed it stay readable. DuckLake 1.5.5's own ``older_than`` on a SQLite catalog
    expired every snapshot of the day but the latest, the published one too (``No snapshot found at version``)."""
    lake = LakeSettings.configured(catalog_env)
    assert lake is not None
    data_dir = tmp_path / "data"
    with running_simulator(shipments=SHIPMENTS, seed=31) as sim, environ(catalog_env):
        service = ServiceSettings(sim.base_url, sim.username, sim.password)
        storage = storage_from_env()
        sync_all(service, data_dir, SETTINGS, backend=storage)  # batches of 13: small files and snapshots
        with connect_lake(lake, tmp_path / "scratch", "256MB", read_only=True) as con:
            old = snapshot_times(con)  # to be older than the retention
        sim.store.changes.modify_shipments(6)
        sync_all(service, data_dir, SETTINGS, backend=storage)  # younger than the retention
        with open_warehouse(data_dir, storage) as held:
            published = publish_snapshot(held.con, "test-run")
        sim.store.changes.modify_shipments(3)
        sync_all(service, data_dir, SETTINGS, backend=storage)  # after the publish: the published one is older
        expected = write_expected(sim, tmp_path / "expected")
        with connect_lake(lake, tmp_path / "scratch", "256MB", read_only=True) as con:
            before = snapshot_times(con)
            published_rows = con.execute(
                f"SELECT count(*) FROM freight.shipments AT (VERSION => {published.snapshot_id})").fetchone()[0]
            files_before = live_files(con)
        young = {snapshot_id: taken for snapshot_id, taken in before.items() if snapshot_id not in old}
        assert max(old.values()) < min(young.values())
        kept_from = max(old.values()) + (min(young.values()) - max(old.values())) / 2
        # an hour later than the moment between the two syncs: the first one's snapshots are older than the retention
        monkeypatch.setattr(backend, "_now", lambda: kept_from + dt.timedelta(minutes=RETENTION_MINUTES),
                            raising=False)

        with environ({LAKE_RETENTION_ENV: str(RETENTION_MINUTES)}):
            result = lake_maintenance_job.execute_in_process(
                resources={"warehouse": WarehouseResource(data_dir=str(data_dir))})
        assert result.success
        [output] = [event.step_output_data.metadata for event in result.events_for_node("lake_maintenance")
                    if event.is_successful_output]

        with connect_lake(lake, tmp_path / "scratch", "256MB", read_only=True) as con:
            after = snapshot_times(con)
            assert latest_published(con) == published
            files_after = live_files(con)
        # expired: the first sync's snapshots; kept: the younger ones before the published one, it, what followed
        assert {snapshot_id for snapshot_id in after if snapshot_id <= max(before)} == set(young)
        assert published.snapshot_id in after
        assert output["expired snapshots"].value == len(old)
        assert output["kept from"].value == pytest.approx(kept_from.timestamp(), abs=0.001)
        # merged: the flush adds a file for each table whose rows were inlined, which the merge may not offset
        # (how a sync's batches fall decides which tables' inserts were inlined)
        assert output["merged files"].value > 0
        assert files_after < files_before + output["flushed inlined tables"].value
        latest = read_lake(catalog_env, expected)
        assert latest["differences"] == {}, latest
        with connect_published(lake, tmp_path / "scratch") as reader:
            assert reader.execute("SELECT count(*) FROM freight.shipments").fetchone()[0] == published_rows
        report = read_report(data_dir, storage)  # what `status` reads
        assert report["published"]["version"] == f"snapshot {published.snapshot_id}"
        assert report["tables"]["freight.shipments"] == published_rows
    assert published.published_at <= dt.datetime.now(dt.UTC)


def test_a_maintenance_step_that_met_a_writers_commit_runs_again(
    lake_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch's delete committed while the compaction of the same table ran: DuckLake refuses the compaction's
    commit ("attempting to compact table ... but another transaction has deleted from it"), and the step runs again
    instead of failing the maintenance (whose later steps, the expiry and the deletion of files, would not run)."""
    lake = LakeSettings.configured({**lake_env, LAKE_DATA_URI_ENV: str(tmp_path / "lake-data")})
    assert lake is not None
    with connect_lake(lake, tmp_path / "writer", "256MB") as writer, \
            connect_lake(lake, tmp_path / "maintenance", "256MB") as maintainer:
        writer.execute("CREATE TABLE t (id INTEGER)")
        writer.execute("INSERT INTO t SELECT range FROM range(1000)")
        writer.execute("DELETE FROM t WHERE id < 500")  # half of the file deleted: to be rewritten
        met: list[str] = []

        def meeting_a_writer(con: duckdb.DuckDBPyConnection, sql: str, params: Any = None) -> list[Any]:
            if "ducklake_rewrite_data_files" in sql and not met:  # the writer commits while the step runs
                met.append(sql)
                con.execute("BEGIN")
                run(con, sql, params)
                writer.execute("DELETE FROM t WHERE id >= 900")  # a delete file (a row or two: DuckLake misses it)
                con.execute("COMMIT")
            return run(con, sql, params)

        monkeypatch.setattr(backend, "run", meeting_a_writer)
        result = backend.maintain(maintainer, dt.timedelta(0))
        assert met
        assert result.merged_files > 0 and result.expired_snapshots > 0
        assert maintainer.execute("SELECT count(*), min(id), max(id) FROM t").fetchall() == [(400, 500, 899)]


def test_maintenance_takes_turns_with_the_syncs_of_its_data_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DuckLake 1.5.5's merge of files loses a delete committed while it runs (the rows a batch replaced come back,
    the shipment's rows then twice: 25 merges beside a writer replacing 3 rows a commit left 6 ids twice), so the
    maintenance holds the data directory's writer lock: a sync running, it waits (here 0.2 s, then says which run
    writes); the sync ended, it runs."""
    lake = LakeSettings.configured({LAKE_CATALOG_URI_ENV: f"sqlite:///{tmp_path}/catalog.sqlite",
                                    LAKE_DATA_URI_ENV: str(tmp_path / "lake-data")})
    assert lake is not None
    data_dir = tmp_path / "data"
    monkeypatch.setattr(backend, "MAINTENANCE_WAIT", dt.timedelta(seconds=0.2), raising=False)
    with writer_lock(data_dir, "sync-run-of-this-directory"), \
            pytest.raises(WarehouseBusy, match="sync-run-of-this-directory"):
        backend.LakeBackend(lake).maintain(data_dir)
    assert backend.LakeBackend(lake).maintain(data_dir).expired_snapshots == 0


def test_maintenance_of_a_lake_a_later_generation_ensured_is_refused_before_it_rewrites_anything(
    tmp_path: Path,
) -> None:
    """A lake whose tables a later release made (its schema signature's generation: ``store.refuse_newer``) is
    refused by a sync; its maintenance flushed, merged and expired all the same (the data directory's writer lock
    held, no schema read)."""
    lake = LakeSettings.configured({LAKE_CATALOG_URI_ENV: f"sqlite:///{tmp_path}/catalog.sqlite",
                                    LAKE_DATA_URI_ENV: str(tmp_path / "lake-data")})
    assert lake is not None
    data_dir = tmp_path / "data"
    with open_warehouse(data_dir, backend.LakeBackend(lake)) as held:
        signature = json.loads(held.reads.get_cursor(SCHEMA_STATE) or "{}")
        held.writes.set_cursor(SCHEMA_STATE, json.dumps({**signature, "generation": SCHEMA_GENERATION + 1}), "newer")
    with connect_lake(lake, tmp_path / "scratch", "256MB", read_only=True) as con:
        before = snapshot_times(con)
    with pytest.raises(NewerWarehouse, match=f"generation {SCHEMA_GENERATION + 1}, this release's"):
        backend.LakeBackend(lake).maintain(data_dir)
    with connect_lake(lake, tmp_path / "scratch", "256MB", read_only=True) as con:
        assert snapshot_times(con) == before
