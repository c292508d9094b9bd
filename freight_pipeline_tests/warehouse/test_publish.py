"""Publishing: a readable DuckDB file and Parquet, swapped atomically under readers in other processes."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import duckdb
import pytest

from freight_pipeline.config import PUBLISH_MEMORY_LIMIT_ENV, StorageSettings
from freight_pipeline.lake.backend import publish_snapshot
from freight_pipeline.warehouse import publish as publish_module
from freight_pipeline.warehouse.backend import UnsettledWarehouse
from freight_pipeline.warehouse.ddl import WarehouseOutOfMemory, catalog_cursors
from freight_pipeline.warehouse.paths import working_db_path
from freight_pipeline.warehouse.publish import (
    EXPORT_THREADS,
    VERSIONS_DIR,
    _row_sums,
    clean_leftovers,
    parquet_root,
    publish,
    published_db_path,
)
from freight_pipeline.warehouse.records import RunRecord
from freight_pipeline.warehouse.store import Warehouse
from freight_pipeline_tests.warehouse.helpers import (
    CODES,
    TABLES,
    apply_shipment_batch,
    codes,
    publish_held,
    shipment_batch,
)

READER = Path(__file__).with_name("reader_process.py")
LEFTOVERS = (".publish-tmp", "parquet.", "warehouse.duckdb.")
"""How a crashed or refused publish's leftovers in the data directory begin."""


def apply(wh: Warehouse, ids: list[int], version: int = 0) -> None:
    tables, raw = shipment_batch(ids, lines=2, marks=1, version=version)
    apply_shipment_batch(wh, "run", tables, ids, raw_documents=raw, cursor=("shipments", json.dumps(max(ids))))


def parquet_count(data_dir: Path, schema: str, table: str) -> int:
    path = parquet_root(data_dir) / schema / table / "*.parquet"
    return duckdb.sql(f"SELECT count(*) FROM read_parquet('{path}')").fetchall()[0][0]


def published_counts(data_dir: Path) -> dict[str, int]:
    with duckdb.connect(str(published_db_path(data_dir)), read_only=True) as con:
        tables = con.execute("SELECT schema_name, table_name FROM duckdb_tables()").fetchall()
        return {f"{s}.{t}": con.execute(f"SELECT count(*) FROM {s}.{t}").fetchall()[0][0] for s, t in tables}


@pytest.fixture
def wh(tmp_path: Path) -> Warehouse:
    with Warehouse(tmp_path, TABLES) as warehouse:
        yield warehouse


def test_publish_produces_a_readable_database_and_parquet_with_the_same_counts(
    wh: Warehouse, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    apply(wh, [1, 2, 3])
    wh.writes.replace_table("run", CODES, codes(4))
    cursors: list[object] = []

    def counted(con: duckdb.DuckDBPyConnection) -> Callable[[], duckdb.DuckDBPyConnection]:
        make = catalog_cursors(con)
        return lambda: cursors.append(make()) or cursors[-1]

    monkeypatch.setattr(publish_module, "catalog_cursors", counted)
    result = publish_held(wh)
    counts = wh.reads.row_counts()
    assert published_counts(tmp_path) == counts == result.tables
    assert len(result.exported) > EXPORT_THREADS and 0 < len(cursors) <= EXPORT_THREADS  # a cursor a thread
    for name, n in counts.items():
        schema, table = name.split(".")
        assert parquet_count(tmp_path, schema, table) == n, name
    assert parquet_root(tmp_path).is_symlink()
    with duckdb.connect(str(published_db_path(tmp_path)), read_only=True) as con:
        assert con.execute("SELECT current_database()").fetchall() == [("warehouse",)]
        assert con.execute("SELECT cursor_value FROM freight_meta.sync_state WHERE stream = 'shipments'"
                           ).fetchall() == [("3",)]


def test_publish_without_a_warehouse_object_and_unchanged_tables_keep_their_file(wh: Warehouse, tmp_path: Path) -> None:
    apply(wh, [1, 2])
    wh.writes.replace_table("run", CODES, codes(2))
    wh.close()
    first = publish(tmp_path, settings=StorageSettings())
    assert len(first.exported) == len(first.tables) and not first.reused
    lines = parquet_root(tmp_path) / "freight" / "lines" / "data.parquet"
    inode = lines.stat().st_ino
    second = publish(tmp_path, settings=StorageSettings())
    assert not second.exported and sorted(second.reused) == sorted(second.tables)
    assert lines.stat().st_ino == inode and second.version != first.version
    with Warehouse(tmp_path, TABLES) as again:
        again.writes.replace_table("run2", CODES, codes(3))
        third = publish_held(again)
    assert "freight.codes" in third.exported and "freight.lines" in third.reused
    assert parquet_count(tmp_path, "freight", "codes") == 3


def test_a_publish_of_its_own_keeps_views_that_name_the_database_and_releases_the_working_file(
    wh: Warehouse, tmp_path: Path
) -> None:
    """Without a connection (as the job publishes), one DuckDB instance attaches the working database and then its
    copy: a view naming the database (as dbt's do) survives a narrowed publish and reads in the published file; the
    working file is free once the publish returns."""
    apply(wh, [1, 2])
    wh.con.execute("CREATE SCHEMA analytics")
    wh.con.execute("CREATE SCHEMA scratch")
    wh.con.execute("CREATE VIEW analytics.stg AS SELECT * FROM warehouse.freight.parents")
    wh.con.execute("CREATE TABLE scratch.notes AS SELECT 1 AS n")
    wh.close()
    result = publish(tmp_path, ("freight", "freight_meta", "analytics"), settings=StorageSettings())
    assert "scratch.notes" not in result.tables and not (parquet_root(tmp_path) / "scratch").exists()
    with duckdb.connect(str(published_db_path(tmp_path)), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM analytics.stg").fetchall() == [(2,)]
        assert con.execute("SELECT count(*) FROM duckdb_schemas() WHERE schema_name = 'scratch'").fetchall() == [(0,)]
    with duckdb.connect(str(working_db_path(tmp_path))) as con:  # not held by the publish any more
        assert con.execute("SELECT count(*) FROM scratch.notes").fetchall() == [(1,)]


def test_the_row_sums_of_every_table_read_at_once_are_each_table_s_own(wh: Warehouse) -> None:
    """``_row_sums``, what the fingerprints compare: one statement for every table gives each table the count and
    row-hash sum a statement of its own gives (those earlier publishes wrote in their manifests)."""
    apply(wh, [1, 2, 3])
    wh.writes.replace_table("run", CODES, codes(4))
    tables = [tuple(row) for row in wh.con.execute(
        "SELECT schema_name, table_name FROM duckdb_tables() WHERE database_name = current_database()").fetchall()]
    own = {(schema, table): wh.con.execute(
        f'SELECT count(*), coalesce(sum(hash(*COLUMNS(*))::HUGEINT), 0)::VARCHAR FROM "{schema}"."{table}"').fetchone()
        for schema, table in tables}
    assert _row_sums(wh.con, tables) == own
    assert len({sums for sums in own.values()}) > 2  # the tables differ: a mix-up would show


def test_schemas_select_what_is_published_and_views_survive(wh: Warehouse, tmp_path: Path) -> None:
    apply(wh, [1, 2])
    wh.con.execute("CREATE SCHEMA analytics")
    wh.con.execute("CREATE TABLE analytics.mart AS SELECT shipment_id FROM freight.parents")
    wh.con.execute("CREATE VIEW analytics.stg AS SELECT * FROM warehouse.freight.parents")
    publish_held(wh, schemas=("freight", "freight_meta"))
    assert not any(name.startswith("analytics.") for name in published_counts(tmp_path))
    assert not (parquet_root(tmp_path) / "analytics").exists()
    result = publish_held(wh, schemas=("freight", "freight_meta", "analytics"))
    assert result.tables["analytics.mart"] == 2 and parquet_count(tmp_path, "analytics", "mart") == 2
    with duckdb.connect(str(published_db_path(tmp_path)), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM analytics.stg").fetchall() == [(2,)]
    assert wh.reads.row_counts()["freight.parents"] == 2  # the working database kept everything


def test_leftovers_of_a_crashed_publish_are_removed_and_old_versions_pruned(wh: Warehouse, tmp_path: Path) -> None:
    apply(wh, [1])
    publish_held(wh)
    (tmp_path / ".publish-tmp-v1.duckdb").write_bytes(b"half a file")
    (tmp_path / ".publish-tmp-v1.duckdb.tmp").mkdir()  # DuckDB's spill folder of that copy
    (tmp_path / ".publish-tmp-v1.duckdb.tmp" / "duckdb_temp_storage-0.tmp").write_bytes(b"spilled")
    (tmp_path / VERSIONS_DIR / "tmp-v1" / "freight").mkdir(parents=True)
    os.symlink("nowhere", tmp_path / "parquet.tmp-123")
    os.symlink("nowhere", tmp_path / "warehouse.duckdb.tmp-123")
    (tmp_path / "warehouse.duckdb.wal").write_bytes(b"stale wal of the old file")
    for i in range(4):
        apply(wh, [10 + i])
        publish_held(wh, keep_versions=1, grace=dt.timedelta(0))
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(LEFTOVERS)) == []
    assert not (tmp_path / "warehouse.duckdb.wal").exists()
    versions = sorted(p.name for p in (tmp_path / VERSIONS_DIR).iterdir())
    assert len(versions) == 2 and not any(v.startswith("tmp-") for v in versions)
    assert published_counts(tmp_path)["freight.parents"] == 5
    assert clean_leftovers(tmp_path) == []


def test_the_version_superseded_last_is_kept_when_the_clock_stepped_back_between_publishes(
    wh: Warehouse, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Version names are the clock's readings. Two publishes while the clock ran 30-35 minutes ahead, then it stepped
    back; an hour later a publish supersedes the one made since: pruning took the next name (a version of the fast
    clock, 30 minutes old) for its successor and deleted the version current a moment before, under the readers that
    had just resolved it. Versions are ordered by publish now: the oldest goes."""
    now = dt.datetime.now(dt.UTC)
    shift = [dt.timedelta(0)]

    class Clock(dt.datetime):
        @classmethod
        def now(cls, tz: dt.tzinfo | None = None) -> Clock:  # type: ignore[override]
            return dt.datetime.now(tz) + shift[0]

    monkeypatch.setattr(publish_module, "dt", SimpleNamespace(datetime=Clock, UTC=dt.UTC, timedelta=dt.timedelta))
    published = []
    for shipment, minutes_ago in ((1, 35), (2, 30), (3, 60), (4, 0)):  # the third after the clock stepped back
        shift[0] = -dt.timedelta(minutes=minutes_ago)
        apply(wh, [shipment])
        result = publish_held(wh, grace=dt.timedelta(minutes=10))
        written = (now + shift[0]).timestamp()
        os.utime(result.parquet_dir, (written, written))  # as that clock wrote the directory
        published.append(result.version)
    left = sorted(p.name for p in (tmp_path / VERSIONS_DIR).iterdir())
    assert left == sorted(published[1:]) and published[2] < published[0]  # the oldest publish went, not the newest


def test_a_legacy_parquet_directory_is_moved_aside(wh: Warehouse, tmp_path: Path) -> None:
    (tmp_path / "parquet" / "freight").mkdir(parents=True)
    apply(wh, [1])
    publish_held(wh)
    assert parquet_root(tmp_path).is_symlink() and parquet_count(tmp_path, "freight", "parents") == 1


def test_a_data_directory_without_symlinks_publishes_nothing_and_says_why(
    wh: Warehouse, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A filesystem that makes no symbolic links (vfat, an SMB share): the publish replaced the DuckDB file, then
    failed on the ``parquet`` link with a bare EPERM, leaving a whole Parquet version that no publish pruned, at every
    run. Now it fails before anything readers see is replaced, saying why, and leaves nothing behind."""
    apply(wh, [1])
    publish_held(wh)
    before = published_db_path(tmp_path).stat().st_ino

    def refused(source: object, target: object, target_is_directory: bool = False) -> None:
        raise PermissionError(1, "Operation not permitted", str(target))

    monkeypatch.setattr(publish_module.os, "symlink", refused)
    apply(wh, [2])
    for _ in range(2):
        with pytest.raises(OSError, match=r"makes no symbolic links.*FREIGHT_DATA_DIR"):
            publish_held(wh)
    assert published_db_path(tmp_path).stat().st_ino == before and published_counts(tmp_path)["freight.parents"] == 1
    assert len(list((tmp_path / VERSIONS_DIR).iterdir())) == 1 and parquet_count(tmp_path, "freight", "parents") == 1
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(LEFTOVERS)) == []


def test_a_process_keeping_a_connection_open_reads_each_publish_on_its_next_connection(
    wh: Warehouse, tmp_path: Path
) -> None:
    """DuckDB shares one instance per database file among a process's connections: with the published file renamed
    over one path, every connection a process opened while another stayed open read the old publish (a BI tool's
    pool, never all closed at once, for ever). The path is a symlink swapped to each publish's own file: a new
    connection reads the new publish, one open reads its own, the catalog is ``warehouse`` in each."""
    held = []
    for shipment in (1, 2, 3):
        apply(wh, [shipment])
        publish_held(wh)
        held.append(duckdb.connect(str(published_db_path(tmp_path)), read_only=True))
    try:
        assert [con.execute("SELECT count(*), current_database() FROM freight.parents").fetchone() for con in held] == [
            (1, "warehouse"), (2, "warehouse"), (3, "warehouse")]
    finally:
        for con in held:
            con.close()


def test_a_published_file_of_before_the_symlink_is_replaced_and_superseded_files_deleted_after_the_grace(
    wh: Warehouse, tmp_path: Path
) -> None:
    apply(wh, [1])
    publish_held(wh)
    published = published_db_path(tmp_path)
    target = published.resolve()
    published.unlink()
    os.rename(target, published)  # as a publish before the symlink left it: a regular file
    for shipment in (2, 3, 4):
        apply(wh, [shipment])
        publish_held(wh, keep_versions=2, grace=dt.timedelta(0))
    assert published.is_symlink() and published_counts(tmp_path)["freight.parents"] == 4
    current = parquet_root(tmp_path).resolve()
    assert published.resolve() == current / "warehouse.duckdb"
    kept = {p.name: sorted(f.name for f in p.iterdir() if f.is_file()) for p in (tmp_path / VERSIONS_DIR).iterdir()}
    assert len(kept) == 3 and kept[current.name] == ["_manifest.json", "warehouse.duckdb"]
    before = max((name for name in kept if name != current.name), key=lambda name: (tmp_path / VERSIONS_DIR / name /
                                                                                   "_manifest.json").stat().st_mtime)
    assert kept[before] == ["_manifest.json", "warehouse.duckdb"]  # for a reader that resolved the link before
    assert all(files == ["_manifest.json"] for name, files in kept.items() if name not in (current.name, before))


def _start_reader(db: Path, stop: Path, mode: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, str(READER), str(db), str(stop), mode], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    first = json.loads(proc.stdout.readline())  # the reader has the file open and has queried it
    assert "error" not in first, first
    return proc


def _results(proc: subprocess.Popen[str]) -> list[dict[str, int | str]]:
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0
    return [json.loads(line) for line in out.splitlines()]


def test_readers_in_other_processes_during_publishes(wh: Warehouse, tmp_path: Path) -> None:
    apply(wh, [1, 2, 3])
    publish_held(wh)
    db, stop = published_db_path(tmp_path), tmp_path / "stop"
    holder = _start_reader(db, stop, "hold")
    refresher = _start_reader(db, stop, "reopen")
    try:
        for i in range(5):
            apply(wh, [10 + i], version=i)
            result = publish_held(wh, grace=dt.timedelta(0), keep_versions=1)  # never waits for the holder
            assert result.tables["freight.parents"] == 4 + i
            with duckdb.connect(str(db), read_only=True) as fresh:  # a new reader sees the new state
                assert fresh.execute("SELECT count(*) FROM freight.parents").fetchall() == [(4 + i,)]
            assert parquet_count(tmp_path, "freight", "parents") == 4 + i
            time.sleep(0.1)
        time.sleep(0.5)  # the refreshing reader gets to query the last state
    finally:
        stop.touch()
        held = _results(holder)
        refreshed = _results(refresher)
    assert [r for r in held + refreshed if "error" in r] == []
    assert {(r["parents"], r["lines"]) for r in held} == {(3, 6)}  # the open session keeps its snapshot
    seen = [r["parents"] for r in refreshed]
    assert seen == sorted(seen) and set(seen) <= set(range(3, 9)) and seen[-1] == 8  # whole states, in order
    assert all(r["lines"] == 2 * r["parents"] for r in refreshed)


def _run(wh: Warehouse, run_id: str, stream: str, status: str, minute: int) -> None:
    at = dt.datetime(2026, 11, 1, 8, minute, tzinfo=dt.UTC)
    wh.run_log.record_run(RunRecord(run_id, stream, at, finished_at=None if status == "running" else at, status=status))


def test_a_run_that_did_not_succeed_is_never_published(wh: Warehouse, tmp_path: Path) -> None:
    apply(wh, [1, 2])
    _run(wh, "r1", "shipments", "success", 0)
    _run(wh, "r1", "dbt_build", "success", 1)
    first = publish_held(wh)
    apply(wh, [3])  # a later run wrote a batch, then one of its streams failed and its build was cut off
    _run(wh, "r2", "shipments", "success", 10)
    _run(wh, "r2", "code_conversions", "failed", 11)
    _run(wh, "r2", "dbt_build", "running", 12)
    with pytest.raises(UnsettledWarehouse, match=r"\(dbt_build running in run r2\)"):  # the failed stream is not named
        publish_held(wh)
    assert published_counts(tmp_path)["freight.parents"] == 2  # readers keep the last publish
    assert (parquet_root(tmp_path)).resolve() == first.parquet_dir
    assert not list(tmp_path.glob(".publish-tmp-*"))  # refused before anything was copied
    _run(wh, "r3", "shipments", "running", 20)  # a stream cut off (a crash) holds back too
    with pytest.raises(UnsettledWarehouse, match=r"shipments running in run r3"):
        publish_held(wh)
    _run(wh, "r3", "shipments", "success", 20)
    _run(wh, "r3", "dbt_build", "partial", 21)  # a build of some models does not vouch for the others
    with pytest.raises(UnsettledWarehouse, match=r"dbt_build partial in run r3"):
        publish_held(wh)
    _run(wh, "r4", "dbt_build", "success", 30)
    assert publish_held(wh).tables["freight.parents"] == 3


def test_the_lake_refuses_a_run_that_did_not_succeed_in_the_same_words(wh: Warehouse) -> None:
    """The lake's publish (a snapshot id recorded) applies the same rule to the same ``sync_runs``."""
    _run(wh, "r1", "shipments", "success", 0)
    _run(wh, "r1", "dbt_build", "failed", 1)
    with pytest.raises(UnsettledWarehouse, match=r"did not succeed: dbt_build failed in run r1$"):
        publish_snapshot(wh.con, "r1")


def test_a_failed_stream_holds_back_no_publish_once_the_build_after_it_succeeded(wh: Warehouse) -> None:
    """A stream is a failure domain: its batches were written whole, the others' data is published."""
    apply(wh, [1, 2])
    _run(wh, "r1", "shipments", "success", 0)
    _run(wh, "r1", "documents", "failed", 1)
    _run(wh, "r1", "dbt_build", "running", 2)  # skipped after the failed stream: cut off
    with pytest.raises(UnsettledWarehouse, match=r"\(dbt_build running in run r1\)"):
        publish_held(wh)
    _run(wh, "b1", "dbt_build", "success", 3)  # the build run that follows a failed stream
    assert publish_held(wh).tables["freight.parents"] == 2


def test_a_retired_streams_failed_run_holds_back_only_until_its_successor_succeeds(wh: Warehouse) -> None:
    apply(wh, [1])
    _run(wh, "old", "shipments", "success", 0)
    _run(wh, "old", "shipment_events", "running", 1)  # an earlier version's detail stream, cut off
    _run(wh, "old", "dbt_build", "success", 2)
    with pytest.raises(UnsettledWarehouse, match=r"shipment_events running in run old"):
        publish_held(wh)
    _run(wh, "new", "shipments", "success", 10)  # the one-pass shipments stream does its work now
    assert publish_held(wh).tables["freight.parents"] == 1


def test_the_runs_that_hold_back_a_publish_are_those_recorded_last_whatever_the_clock_said(wh: Warehouse) -> None:
    """A run while the machine's clock was ahead (minute 50) succeeded; the clock stepped back (NTP, a VM restored)
    and the next run (minute 10) was killed in its shipments stream and its dbt build failed. The publish went
    ahead, half a run and a failed build shown to readers: the older success was the latest start of each."""
    apply(wh, [1])
    _run(wh, "ahead", "shipments", "success", 50)
    _run(wh, "ahead", "dbt_build", "success", 51)
    publish_held(wh)
    apply(wh, [2])
    _run(wh, "after-the-step", "shipments", "running", 10)
    _run(wh, "after-the-step", "dbt_build", "failed", 11)
    with pytest.raises(UnsettledWarehouse, match=r"\(dbt_build failed in run after-the-step, shipments running in "
                                                 r"run after-the-step\)"):
        publish_held(wh)


def test_a_retired_stream_is_settled_by_its_successor_s_success_recorded_after_it_whatever_the_clock_said(
    wh: Warehouse,
) -> None:
    """The retired stream's run, cut off, was dated by a clock ahead (minute 50); the successor's success after the
    upgrade, by the clock stepped back, at minute 10. It settles the retired stream: it was recorded after it. By
    the clock, it did not, and every publish was refused until the clock passed minute 50."""
    apply(wh, [1])
    _run(wh, "old", "shipment_events", "running", 50)
    _run(wh, "new", "shipments", "success", 10)
    _run(wh, "new", "dbt_build", "success", 11)
    assert publish_held(wh).tables["freight.parents"] == 1


def test_a_retired_stream_stays_settled_once_its_successor_succeeded_though_a_later_run_of_it_failed(
    wh: Warehouse,
) -> None:
    """After the upgrade the shipments stream succeeded, then failed in a later run (a failed stream holds back no
    publish). The retired stream, cut off before the upgrade, was settled only while the successor's latest run was a
    success: every publish was refused for it (the other streams' data held back) while ``status`` no longer showed
    it, until the shipments stream succeeded again."""
    apply(wh, [1])
    _run(wh, "old", "shipment_events", "running", 0)
    _run(wh, "new", "shipments", "success", 10)
    _run(wh, "new", "dbt_build", "success", 11)
    _run(wh, "later", "shipments", "failed", 20)
    _run(wh, "later", "dbt_build", "success", 21)
    assert publish_held(wh).tables["freight.parents"] == 1


def test_running_out_of_duckdb_memory_names_the_setting_to_raise(
    wh: Warehouse, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    apply(wh, list(range(1, 2001)))
    publish_held(wh)
    before = published_counts(tmp_path)
    apply(wh, [5000])
    monkeypatch.setenv(PUBLISH_MEMORY_LIMIT_ENV, "1MB")  # the publish's own connections get it
    with pytest.raises(WarehouseOutOfMemory, match=rf"the publish ran out of DuckDB memory .*; the limit is 1MB: "
                       rf"raise {PUBLISH_MEMORY_LIMIT_ENV}"):
        publish_held(wh, settings=StorageSettings.configured())
    assert published_counts(tmp_path) == before  # readers keep the last complete version
    assert clean_leftovers(tmp_path) == []  # and the failed attempt left nothing behind
