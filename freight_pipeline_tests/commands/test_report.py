"""``report.on_time_by_mode`` over a published ``analytics.fct_on_time_performance`` built by hand; the runs after
the last publish ``report.read_report`` shows."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
import yaml

from freight_pipeline.commands.report import on_time_by_mode, read_report
from freight_pipeline.config import REPO_ROOT
from freight_pipeline.warehouse.embedded import EmbeddedDuckDB
from freight_pipeline.warehouse.paths import run_log_path
from freight_pipeline.warehouse.publish import published_db_path
from freight_pipeline.warehouse.run_log import INTERRUPTED
from freight_pipeline.warehouse.writer_lock import lock_path, writer_lock

MART_YML = REPO_ROOT / "dbt_models" / "models" / "marts" / "fct_on_time_performance.yml"
COLUMNS = {
    "arrival_month": "DATE",
    "mode_of_transport": "VARCHAR",
    "lane": "VARCHAR",
    "shipments_planned": "BIGINT",
    "shipments_arrived": "BIGINT",
    "shipments_on_time": "BIGINT",
    "shipments_judged_by_date": "BIGINT",
    "avg_arrival_delay_minutes": "DOUBLE",
}


def _mart_columns() -> set[str]:
    (model,) = yaml.safe_load(MART_YML.read_text())["models"]
    return {column["name"] for column in model["columns"]}


def _publish(data_dir: Path, rows: list[tuple[object, ...]]) -> None:
    assert set(COLUMNS) <= _mart_columns()  # the hand-built table uses the mart's real column names
    with duckdb.connect(str(published_db_path(data_dir))) as con:
        con.execute("CREATE SCHEMA analytics")
        con.execute(
            "CREATE TABLE analytics.fct_on_time_performance ("
            + ", ".join(f"{name} {kind}" for name, kind in COLUMNS.items()) + ")"
        )
        con.executemany(
            f"INSERT INTO analytics.fct_on_time_performance VALUES ({', '.join('?' * len(COLUMNS))})", rows
        )


def test_average_delay_is_weighted_by_the_arrivals_with_a_delay_in_minutes(tmp_path: Path) -> None:
    """Date-only arrivals count as arrived but have no delay in minutes: they must not dilute the
    average. SEA: 4 timed arrivals averaging 10 min, 2 timed (of 3 arrived) averaging 40 min and a
    lane whose 6 arrivals are all date-only -> (4*10 + 2*40) / 6 = 20, not 160 / 13."""
    _publish(tmp_path, [
        ("2026-03-01", "SEA", "CNSHA-NLRTM", 5, 4, 3, 0, 10.0),
        ("2026-03-01", "SEA", "CNSHA-DEHAM", 4, 3, 1, 1, 40.0),
        ("2026-04-01", "SEA", "SGSIN-NLRTM", 7, 6, 6, 6, None),
        ("2026-03-01", "AIR", "HKHKG-DEFRA", 2, 2, 1, 2, None),
    ])

    by_mode = {row["mode_of_transport"]: row for row in on_time_by_mode(tmp_path, EmbeddedDuckDB())}

    assert by_mode["SEA"]["planned"] == 16 and by_mode["SEA"]["arrived"] == 13 and by_mode["SEA"]["on_time"] == 10
    assert by_mode["SEA"]["on_time_share"] == pytest.approx(10 / 13)
    assert by_mode["SEA"]["avg_delay_minutes"] == pytest.approx(20.0)
    # only date-only arrivals: no average delay at all, while the on-time share is still known
    assert by_mode["AIR"]["avg_delay_minutes"] is None
    assert by_mode["AIR"]["on_time_share"] == pytest.approx(0.5)


def _run_log_row(run_id: str, stream: str = "shipments") -> dict[str, object]:
    return {"run_id": run_id, "stream": stream, "started_at": "2026-12-01T10:00:00+00:00", "finished_at": None,
            "status": "running", "rows_read": 0, "rows_written": 0, "requests": 0, "retries": 0, "rejected": 0,
            "error": None}


def test_a_killed_run_is_reported_interrupted_not_running(tmp_path: Path) -> None:
    """The run log says a run is running from its start until its finish is written: a run killed between
    (SIGKILL, a crash, the machine stopped) never writes it. ``status`` must not show it running forever: its
    writer lock names a process that is gone. A run whose process lives is still running."""
    _publish(tmp_path, [("2026-03-01", "SEA", "CNSHA-NLRTM", 1, 1, 1, 0, 0.0)])
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    run_log_path(tmp_path).parent.mkdir(parents=True, exist_ok=True)
    run_log_path(tmp_path).write_text(json.dumps([_run_log_row("killed-run")]))
    holder = {"run_id": "killed-run", "pid": dead.pid, "host": socket.gethostname(),
              "since": "2026-12-01T10:00:00+00:00"}
    lock_path(tmp_path).write_text(json.dumps(holder))

    (run,) = read_report(tmp_path, EmbeddedDuckDB())["unpublished_runs"]
    assert run["run_id"] == "killed-run" and run["status"] == INTERRUPTED
    assert "killed or crashed" in run["error"]

    lock_path(tmp_path).write_text("")  # a run that ended lets go of the lock (its file emptied) too
    assert read_report(tmp_path, EmbeddedDuckDB())["unpublished_runs"][0]["status"] == INTERRUPTED

    with writer_lock(tmp_path, "killed-run"):  # its process alive, holding the lock: still running
        (run,) = read_report(tmp_path, EmbeddedDuckDB())["unpublished_runs"]
    assert run["status"] == "running" and run["error"] is None
    # a file naming a process that lives but no longer holds the lock (a pid reused, say): gone all the same
    lock_path(tmp_path).write_text(json.dumps({**holder, "pid": os.getpid()}))
    assert read_report(tmp_path, EmbeddedDuckDB())["unpublished_runs"][0]["status"] == INTERRUPTED
