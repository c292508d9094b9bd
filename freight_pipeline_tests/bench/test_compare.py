"""The pure parts of ``bench/compare.py``'s ``history`` and ``rebuild`` scenarios: the history's rows and bytes
read from a DuckDB file, the Parquet bytes of a publish, the summary of the incremental runs, the rebuild's
worst case (the shipments' tables emptied) and what its line says it wrote."""

from __future__ import annotations

from pathlib import Path

import duckdb

from bench.compare import (
    Measured,
    empty_shipment_tables,
    history_storage,
    published_history_bytes,
    runs_summary,
    written_line,
)
from freight_pipeline.normalize.tables import FREIGHT_TABLES
from freight_pipeline.warehouse.history import EVENT_VERSIONS, HISTORY_TABLES
from freight_pipeline.warehouse.paths import working_db_path
from freight_pipeline.warehouse.publish import parquet_root
from freight_pipeline.warehouse.store import Warehouse


def test_history_storage_counts_rows_and_the_blocks_of_each_table(tmp_path: Path) -> None:
    with Warehouse(tmp_path, FREIGHT_TABLES) as warehouse:
        warehouse.con.execute(
            f"INSERT INTO {EVENT_VERSIONS.qualified_name} (shipment_id, event, type, event_at, valid_from, deleted, "
            "run_id, recorded_at) SELECT i, 'POD_ARRIVAL', 'ESTIMATED', now() + i * INTERVAL 1 MINUTE, now(), false, "
            "'run-' || (i % 7), now() FROM range(200000) t(i)")
    database = working_db_path(tmp_path)
    found = history_storage(database)
    assert set(found) == {spec.name for spec in HISTORY_TABLES}
    rows, size = found[EVENT_VERSIONS.name]
    with duckdb.connect(str(database), read_only=True) as con:
        block = con.execute("SELECT block_size FROM pragma_database_size()").fetchall()[0][0]
    assert rows == 200_000 and size > 0 and size % block == 0 and size < database.stat().st_size
    assert all(found[spec.name] == (0, 0) for spec in HISTORY_TABLES if spec != EVENT_VERSIONS)


def test_published_history_bytes_sums_the_history_tables_parquet(tmp_path: Path) -> None:
    version = tmp_path / ".parquet-versions" / "v1"
    for schema, table, size in (("freight_history", "event_versions", 300), ("freight_history", "leg_versions", 20),
                                ("freight", "shipments", 5000)):
        (version / schema / table).mkdir(parents=True)
        (version / schema / table / "data.parquet").write_bytes(b"x" * size)
    parquet_root(tmp_path).symlink_to(version)
    assert published_history_bytes(tmp_path) == 320


def test_runs_summary_gives_median_and_longest_sync_and_the_memory_of_the_first_and_last_runs() -> None:
    syncs, peaks = [2.0, 3.0, 2.5, 9.0, 2.2, 2.4, 2.6], [300, 310, 305, 330, 320, 321, 322]
    runs = [Measured(seconds + 1.5, 0.0, 0, "", {"seconds": seconds, "max_rss_mb": rss})
            for seconds, rss in zip(syncs, peaks, strict=True)]
    assert runs_summary(runs, edge=3) == ("sync median 2.50 s, max 9.00 s (process median 4.00 s); "
                                          "peak RSS first 3 runs 300-310 MB, last 3 320-322 MB")


def test_the_rebuild_s_worst_case_empties_the_shipments_tables_alone_and_its_line_says_what_was_written(
    tmp_path: Path,
) -> None:
    with Warehouse(tmp_path, FREIGHT_TABLES) as warehouse:
        audit = "now(), 'r'"
        warehouse.con.execute(f"INSERT INTO freight.shipments (shipment_id, _synced_at, _run_id) SELECT i, {audit} "
                              "FROM range(5) t(i)")
        warehouse.con.execute(f"INSERT INTO freight.code_conversions (conversion_id, _synced_at, _run_id) "
                              f"VALUES (1, {audit})")
    assert empty_shipment_tables(working_db_path(tmp_path)) == 5
    with duckdb.connect(str(working_db_path(tmp_path)), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM freight.shipments").fetchall() == [(0,)]
        assert con.execute("SELECT count(*) FROM freight.code_conversions").fetchall() == [(1,)]
    line = "  rebuild  9.1 s  rebuilt 2,000 shipments in 1 batches: 70 rows written for the 3 whose rows changed, 0"
    assert written_line(line) == "70 rows written for the 3 whose rows changed"
