"""``freight-pipeline demo`` end to end on a tiny simulator, and how it treats an existing data directory."""

from __future__ import annotations

import contextlib
import http.server
import os
import re
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from freight_pipeline.checks.warehouse import Severity
from freight_pipeline.cli import INTERRUPTED, main
from freight_pipeline.commands.common import SKIPPED
from freight_pipeline.commands.demo_data import MARKER, DemoBusy, ForeignDataDir, demo_dir_held, prepare_demo_dir
from freight_pipeline.commands.demo_summary import eta_line
from freight_pipeline.commands.history_report import EtaAccuracy
from freight_pipeline.warehouse.publish import published_db_path
from freight_pipeline.warehouse.writer_lock import writer_lock
from freight_pipeline_tests.commands.conftest import cli_env, run_cli
from freight_pipeline_tests.commands.test_runs_at_once import started
from freight_pipeline_tests.serving import serving
from freight_pipeline_tests.sync.test_restore import failed_checks

HISTORY_TABLES = ("freight_history.shipment_versions", "freight_history.event_versions",
                  "freight_history.leg_versions")


def _table_row(out: str, table: str) -> list[str]:
    line = next(line for line in out.splitlines() if line.split()[:1] == [table])
    return line.split()[1:]


class _Hook(http.server.BaseHTTPRequestHandler):
    """A JSON webhook that keeps what it is sent (:func:`webhook`)."""

    received: list[bytes]

    def do_POST(self) -> None:
        self.received.append(self.rfile.read(int(self.headers.get("content-length") or 0)))
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def webhook() -> Iterator[tuple[str, list[bytes]]]:
    """A ``json://`` alert destination on a loopback port, and the messages it received."""
    received: list[bytes] = []
    handler = type("Hook", (_Hook,), {"received": received})
    with serving(http.server.HTTPServer(("127.0.0.1", 0), handler)) as server:
        yield f"json://127.0.0.1:{server.server_address[1]}/hook", received


def test_demo_syncs_changes_and_summarises_and_alerts_none_of_the_settings_destinations(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with webhook() as (url, alerts):  # the team's channel set where the demo is run: no news of the bundled simulator
        done = run_cli(["demo", "--data-dir", str(data_dir), "--shipments", "200"], cli_env(FREIGHT_ALERT_URLS=url))
    assert done.returncode == 0, done.stderr
    assert alerts == []
    # what would have alerted, had the demo used the settings' destinations: the check of the run's notices (its
    # incremental sync finds some of the newest shipments gone: a warning)
    warned = failed_checks(published_db_path(data_dir), Severity.WARN)
    assert "shipments.no_service_notices" in warned, warned
    out = done.stdout
    # the analytic answer: an on-time share per mode, from the published marts
    answer = re.search(r"on-time share of arrived shipments by mode: (.+)", out)
    assert answer, out
    assert re.fullmatch(r"(?:(?:AIR|SEA|RD|RL) \d{1,3}\.\d%(?:, )?)+", answer.group(1)), answer.group(1)
    # tables: rows after the full sync, now, change; 50 modified, 5 created, 2 deleted between the runs,
    # and the demo reconciles ids every run, so the deleted shipments are gone from tables and marts
    assert _table_row(out, "freight.shipments") == ["200", "203", "3"]
    assert _table_row(out, "analytics.fct_shipments")[:2] == ["200", "203"]
    assert "between the runs the service changed: 50 modified, 5 created, 2 deleted; " in out
    # three days passed in the service between the runs: shipments progressed (events came due)
    progressed = re.search(r"; (\d+) progressed \(events come due, estimates revised\)", out)
    assert progressed and 1 <= int(progressed.group(1)) < 200, out
    assert "deleted in the service: 2, still in the warehouse: 0" in out
    # every E-File linked to a live shipment is in freight.shipment_documents, and nothing else
    documents = re.search(r"E-File documents of live shipments: ([\d,]+) in the service, ([\d,]+) in "
                          r"freight.shipment_documents: (.+)", out)
    assert documents, out
    assert documents.group(1) == documents.group(2) and int(documents.group(1).replace(",", "")) > 200
    assert documents.group(3) == "the same pairs"
    full, incremental = _table_row(out, "full"), _table_row(out, "incremental")
    assert full[0] == "sync" and int(full[2]) == 200  # the full sync read every shipment
    assert 55 <= int(incremental[2]) < 200  # the incremental one the changed ones (and its overlap)
    assert f"duckdb.connect('{data_dir / 'warehouse.duckdb'}', read_only=True)" in out
    assert f"{data_dir}/parquet/<schema>/<table>/" in out and "make ui" in out
    assert "demo: incremental sync done" in done.stderr
    # each stream's progress, as `sync` shows it into a pipe: the full sync's shipments, all 200 of them
    assert re.search(r"^    shipments: 0 of 200 shipments \(0 %\); ", done.stderr, re.MULTILINE), done.stderr
    assert re.search(r"^    shipments: 200 shipments done in ", done.stderr, re.MULTILINE), done.stderr
    assert (data_dir / MARKER).is_file()
    _assert_history_lines(out, data_dir / "warehouse.duckdb")


def _assert_history_lines(out: str, database: Path) -> None:
    """The history section says what DuckDB says of the same published file."""
    with duckdb.connect(str(database), read_only=True) as con:
        def one(sql: str) -> tuple[Any, ...]:
            row = con.execute(sql).fetchone()
            assert row is not None
            return row

        for table in HISTORY_TABLES:
            versions, superseded, shipments = one(
                f"SELECT count(*), count(valid_to), count(DISTINCT shipment_id) FROM {table}")
            assert _table_row(out, table) == [f"{versions:,}", f"{superseded:,}", f"{shipments:,}"], out
            assert superseded > 0  # the incremental sync saw new versions of some of them
        # one current header version per shipment ever seen: the 200, and the five created
        versions, superseded, shipments = one(
            "SELECT count(*), count(valid_to), count(DISTINCT shipment_id) FROM freight_history.shipment_versions")
        assert shipments == 205 and versions == shipments + superseded
        milestones, moves = one("SELECT count(*) FILTER (WHERE revisions > 0), sum(revisions) "
                                "FROM analytics.fct_estimate_revisions")
        assert 0 < milestones <= moves
        assert f"  estimates moved: {moves:,} times, on {milestones:,} milestones " in out, out
        # the accuracy figure 1 day out, against fct_eta_accuracy_monthly's counts (its within-24 h rule)
        # and fct_eta_accuracy's errors
        happened, scored, shipments, within = one(
            "SELECT sum(milestones_happened), sum(milestones_scored), sum(shipments_scored), "
            "sum(milestones_within_24h) FROM analytics.fct_eta_accuracy_monthly "
            "WHERE milestone = 'arrival' AND horizon_days = 1")
        (mean,) = one("SELECT avg(abs_error_hours) FROM analytics.fct_eta_accuracy "
                      "WHERE milestone = 'arrival' AND horizon_days = 1 AND is_scored")
    # arrivals between the two syncs had their estimate recorded by the first: some are scored, not all
    assert 0 < scored < happened
    figure = re.search(r"\n  arrival ETAs 1 day out: mean absolute error ([\d.]+) h over ([\d,]+) shipments, "
                       r"([\d.]+)% within ±24 h\n    \(([\d,]+) of ([\d,]+) arrivals scored: ", out)
    assert figure, out
    assert figure.groups() == (f"{mean:.1f}", f"{shipments:,}", f"{within / scored * 100:.1f}", f"{scored:,}",
                               f"{happened:,}")


def test_the_eta_line_says_plainly_when_nothing_was_scored() -> None:
    unscored = EtaAccuracy("arrival", 1, happened=76, scored=0, shipments=0, mean_abs_error_hours=None, within=0)
    assert eta_line(unscored) == (
        "  arrival ETAs 1 day out: none scored: none of the 76 arrivals had an estimate on record a day before it "
        "happened (the history begins with the first sync)")
    no_horizon = EtaAccuracy("arrival", 2, happened=0, scored=0, shipments=0, mean_abs_error_hours=None, within=0)
    assert eta_line(no_horizon) == (
        "  arrival ETAs 2 days out: none scored (analytics.fct_eta_accuracy has no arrival at that horizon)")
    assert eta_line(None) == "  arrival ETAs: analytics.fct_eta_accuracy is missing"
    scored = EtaAccuracy("arrival", 3, happened=40, scored=8, shipments=8, mean_abs_error_hours=5.25, within=6)
    assert eta_line(scored).splitlines() == [
        "  arrival ETAs 3 days out: mean absolute error 5.2 h over 8 shipments, 75.0% within ±24 h",
        "    (8 of 40 arrivals scored: the others had no estimate on record 3 days before they happened; the "
        "history begins with the first sync)",
    ]


def test_a_previous_demo_is_emptied_and_a_foreign_warehouse_refused(tmp_path: Path) -> None:
    demo_dir = tmp_path / "demo"
    prepare_demo_dir(demo_dir, {"seed": 1})
    (demo_dir / "work").mkdir()
    (demo_dir / "warehouse.duckdb").write_text("old")
    (demo_dir / "notes.txt").write_text("mine")
    removed = prepare_demo_dir(demo_dir, {"seed": 2})
    assert sorted(p.name for p in removed) == ["warehouse.duckdb", "work"]
    assert not (demo_dir / "warehouse.duckdb").exists() and (demo_dir / "notes.txt").read_text() == "mine"
    assert '"seed": 2' in (demo_dir / MARKER).read_text()

    real = tmp_path / "real"
    (real / "work").mkdir(parents=True)
    (real / "warehouse.duckdb").write_text("precious")
    with pytest.raises(ForeignDataDir, match="did not create"):
        prepare_demo_dir(real, {})
    assert (real / "warehouse.duckdb").read_text() == "precious"


def _previous_demo(demo_dir: Path) -> None:
    """``demo_dir`` as a demo left it (or fills it while it runs): marked, a working directory, a warehouse."""
    prepare_demo_dir(demo_dir, {"seed": 1})
    (demo_dir / "work").mkdir()
    (demo_dir / "warehouse.duckdb").write_text("being written")


def test_a_second_demo_leaves_a_running_ones_data_directory_alone(tmp_path: Path) -> None:
    demo_dir = tmp_path / "demo"
    _previous_demo(demo_dir)
    with demo_dir_held(demo_dir):  # a demo runs in it
        done = run_cli(["demo", "--data-dir", str(demo_dir), "--shipments", "5"], cli_env(), timeout=120)
        with pytest.raises(DemoBusy, match="another `freight-pipeline demo` runs in"), demo_dir_held(demo_dir):
            pass
    assert done.returncode == SKIPPED, done.stderr
    assert "another `freight-pipeline demo` runs in" in done.stderr and "Traceback" not in done.stderr
    assert (demo_dir / "warehouse.duckdb").read_text() == "being written" and (demo_dir / "work").is_dir()
    with demo_dir_held(demo_dir):  # let go when the block ended
        pass


def test_a_demo_does_not_empty_a_data_directory_a_sync_writes(tmp_path: Path) -> None:
    demo_dir = tmp_path / "demo"
    _previous_demo(demo_dir)
    with writer_lock(demo_dir, "cli-sync-run"), pytest.raises(DemoBusy, match="run cli-sync-run"):
        prepare_demo_dir(demo_dir, {"seed": 2})
    assert (demo_dir / "warehouse.duckdb").read_text() == "being written"
    assert prepare_demo_dir(demo_dir, {"seed": 2})  # once it ended
    assert not (demo_dir / "warehouse.duckdb").exists()


@pytest.mark.parametrize(("flags", "said"), [
    (["--shipments", "-5"], "argument --shipments: must be between 0 and 900000"),
    (["--shipments", "1000000"], "argument --shipments: must be between 0 and 900000"),
    (["--changes", "-1"], "argument --changes: must be at least 0, got -1"),
])
def test_a_demo_flag_out_of_range_is_refused_before_anything_runs(
    flags: list[str], said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as refused:
        main(["demo", "--data-dir", str(tmp_path / "demo"), *flags])
    assert refused.value.code == 2 and said in capsys.readouterr().err
    assert not (tmp_path / "demo").exists()  # no directory made nor marked, no simulator, no sync


def test_a_demo_stopped_by_ctrl_c_says_so_in_one_line_and_exits_130(tmp_path: Path) -> None:
    """Ctrl-C in a terminal reaches the demo's whole process group while its Dagster run syncs: the processes the
    instance of DAGSTER_HOME starts to mirror the run's output (``tail``, Dagster's ``watch_orphans.py``) too."""
    env = cli_env(DAGSTER_HOME=str(tmp_path / "dagster"))
    with started(env, ["demo", "--data-dir", str(tmp_path / "data"), "--shipments", "1000"]) as said:
        said.wait_for("the build, the publish: ")  # the engine's first line, from the Dagster run's op
        os.killpg(said.child.pid, signal.SIGINT)
        code, err = said.ended()
    assert code == INTERRUPTED, err
    assert "Traceback" not in err and "failed" not in err, err
    assert err.splitlines()[-1] == "freight-pipeline demo: interrupted (Ctrl-C); exit 130", err
