"""The pure parts of ``bench/compare.py``'s ``history`` and ``rebuild`` scenarios: the history's rows and bytes
read from a DuckDB file, the Parquet bytes of a publish, the summary of the incremental runs, the rebuild's
worst case (the shipments' tables emptied) and what its line says it wrote, a step's seconds read from a run's
output, and the package a baseline checkout's process and its children import."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import duckdb

from bench.compare import (
    REPO,
    Measured,
    checkout_env,
    empty_shipment_tables,
    freight_pipeline,
    history_storage,
    publish_part,
    published_history_bytes,
    runs_summary,
    step_seconds,
    written_line,
)
from freight_pipeline.job.run import PUBLISH_STEP, Step
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


def test_a_step_s_seconds_are_read_from_the_lines_a_run_prints_and_only_from_its_own_line() -> None:
    steps = [Step("sync_shipments", "success", 1.69, "read 10, wrote 365 rows in 82 requests", ["a note: 12.5 s"]),
             Step("sync_documents", "skipped", 0.0, "the documents stream is off (FREIGHT_SYNC_DOCUMENTS=0)"),
             Step("marts", "success", 0.02, "not run: nothing changed since the marts were built"),
             Step(PUBLISH_STEP, "success", 4.21, "published v1: 47 tables (7 exported, 40 unchanged)")]
    output = "\n".join(["sync: http://127.0.0.1:1 as 'demo' -> /tmp/data (without Dagster)",
                        "    shipments: 30 shipments done in 0.6 s, 46 shipments/s; 82 requests, 0 retries",
                        *(line for step in steps for line in step.lines()),
                        "sync succeeded in 5.3 s (run cli-1); see `freight-pipeline status`"])
    assert [step_seconds(output, step.name) for step in steps] == [1.69, None, 0.02, 4.21]
    assert step_seconds(output, "shipments") is None  # a progress line is no step line
    assert publish_part(Measured(5.3, 0.0, 0, output)) == ", the publish 4.2 s"
    failed = Step(PUBLISH_STEP, "failed", 0.5, "unused").lines()
    assert publish_part(Measured(1.0, 0.0, 0, "\n".join(failed))) == ", the publish 0.5 s"
    assert publish_part(Measured(1.0, 0.0, 0, "sync failed in step sync_shipments: ...")) == ""


def test_a_checkout_s_command_and_the_processes_it_starts_import_the_checkout_not_this_repository(
    tmp_path: Path,
) -> None:
    """Run as the bench runs it (in this repository's folder), a checkout's ``freight-pipeline`` imports the
    checkout's package, and so does a child it starts with ``python -m`` (the dbt worker, the workers' server):
    the bench at 1f1037a measured this checkout on the baseline's side."""
    package = tmp_path / "freight_pipeline"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "child.py").write_text("import freight_pipeline\nprint(freight_pipeline.__file__)\n")
    (package / "cli.py").write_text(
        "import subprocess, sys\nimport freight_pipeline\nprint(freight_pipeline.__file__, flush=True)\n"
        "subprocess.run([sys.executable, '-m', 'freight_pipeline.child'], check=True)\n")
    ran = subprocess.run(freight_pipeline(tmp_path), env={**os.environ, **checkout_env(tmp_path)}, cwd=REPO,
                         capture_output=True, text=True, check=True)
    assert ran.stdout.splitlines() == [str(package / "__init__.py")] * 2
    assert freight_pipeline(None) == [str(REPO / ".venv" / "bin" / "freight-pipeline")] and checkout_env(None) == {}
