"""``report.on_time_by_mode`` over a published ``analytics.fct_on_time_performance`` built by hand; the runs after
the last publish ``report.read_report`` shows."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
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
from freight_pipeline.warehouse.paths import run_log_path, working_db_path
from freight_pipeline.warehouse.publish import published_db_path
from freight_pipeline.warehouse.records import RunRecord
from freight_pipeline.warehouse.run_log import GONE, INTERRUPTED
from freight_pipeline.warehouse.store import Warehouse
from freight_pipeline.warehouse.writer_lock import lock_path, writer_lock
from freight_pipeline_tests.warehouse.helpers import T0, TABLES

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
    assert run["error"] == GONE

    lock_path(tmp_path).write_text("")  # a run that ended lets go of the lock (its file emptied) too
    assert read_report(tmp_path, EmbeddedDuckDB())["unpublished_runs"][0]["status"] == INTERRUPTED

    with writer_lock(tmp_path, "killed-run"):  # its process alive, holding the lock: still running
        (run,) = read_report(tmp_path, EmbeddedDuckDB())["unpublished_runs"]
    assert run["status"] == "running" and run["error"] is None
    # a file naming a process that lives but no longer holds the lock (a pid reused, say): gone all the same
    lock_path(tmp_path).write_text(json.dumps({**holder, "pid": os.getpid()}))
    assert read_report(tmp_path, EmbeddedDuckDB())["unpublished_runs"][0]["status"] == INTERRUPTED


def test_the_latest_run_shown_is_the_one_recorded_last_not_the_one_the_clock_dated_last(tmp_path: Path) -> None:
    """A run succeeded while the machine's clock was two hours ahead; the clock stepped back (NTP, a VM restored) and
    the next run failed, started at an earlier instant. ``status`` must show the failure as the stream's last run (in
    the published warehouse and in the run log alike, so not as a run after the publish either); it showed the older
    success, the failure nowhere."""
    with Warehouse(tmp_path, TABLES) as warehouse:
        for run_id, started, status in (("run-ahead", T0 + dt.timedelta(hours=2), "success"),
                                        ("run-after-the-step", T0, "failed")):
            run = RunRecord(run_id, "shipments", started)
            warehouse.run_log.record_run(run)
            run.status, run.finished_at = status, started + dt.timedelta(minutes=5)
            run.error = "boom" if status == "failed" else None
            warehouse.run_log.record_run(run)
    shutil.copyfile(working_db_path(tmp_path), published_db_path(tmp_path))  # published as a run leaves it
    report = read_report(tmp_path, EmbeddedDuckDB())
    (shipments,) = [s for s in report["streams"] if s["stream"] == "shipments"]
    assert (shipments["last_run"]["run_id"], shipments["last_run"]["status"]) == ("run-after-the-step", "failed")
    assert report["unpublished_runs"] == []


def test_a_stream_switched_off_is_shown_switched_off_not_as_a_fresh_success(tmp_path: Path) -> None:
    """FREIGHT_SYNC_DOCUMENTS=0 after a sync: each run of the documents stream is a success that loads nothing.
    ``status`` showed it as a success finished just now, as if its documents were current."""
    with Warehouse(tmp_path, TABLES) as warehouse:
        for run_id, at, extra in (("run-on", T0, {}),
                                  ("run-off", T0 + dt.timedelta(hours=1), {"skipped": "the documents stream is off"})):
            warehouse.run_log.record_run(RunRecord(run_id, "documents", at, at, "success", extra=extra))
    shutil.copyfile(working_db_path(tmp_path), published_db_path(tmp_path))
    (documents,) = [s for s in read_report(tmp_path, EmbeddedDuckDB())["streams"] if s["stream"] == "documents"]
    assert (documents["last_run"]["run_id"], documents["last_run"]["status"]) == ("run-off", "switched off")


def test_a_stream_an_upgrade_retired_is_not_shown_failing_once_its_successor_succeeded(tmp_path: Path) -> None:
    """Events had a stream of their own (shipment_events) before the shipments stream read them; its last run failed
    before the upgrade. After a success of the shipments stream, ``status`` showed shipment_events failing for ever
    (what the publish itself no longer counts: ``meta.RETIRED_STREAMS``); before that success, it still shows."""
    with Warehouse(tmp_path, TABLES) as warehouse:
        warehouse.run_log.record_run(RunRecord("before", "shipments", T0, T0, "success"))
        warehouse.run_log.record_run(RunRecord("before", "shipment_events", T0, T0, "failed", error="boom"))
    shutil.copyfile(working_db_path(tmp_path), published_db_path(tmp_path))
    shown = {s["stream"]: s["last_run"]["status"] for s in read_report(tmp_path, EmbeddedDuckDB())["streams"]
             if s["last_run"]}
    assert shown == {"shipments": "success", "shipment_events": "failed"}
    with Warehouse(tmp_path, TABLES) as warehouse:
        later = T0 + dt.timedelta(days=1)
        warehouse.run_log.record_run(RunRecord("after", "shipments", later, later, "success"))
    shutil.copyfile(working_db_path(tmp_path), published_db_path(tmp_path))
    report = read_report(tmp_path, EmbeddedDuckDB())
    shown = {s["stream"]: s["last_run"]["status"] for s in report["streams"] if s["last_run"]}
    assert shown == {"shipments": "success"}
    assert report["unpublished_runs"] == []
