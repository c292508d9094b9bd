"""``freight-pipeline sync``: settings checked first, one-line failures without secrets, a real run."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from freight_pipeline.cli import main
from freight_pipeline.config import environ
from freight_pipeline.simulator.config import PERMISSIONS, SimulatorConfig, UserConfig
from freight_pipeline.simulator.server import RunningSimulator, running_simulator
from freight_pipeline_tests.commands.conftest import cli_env, run_cli


def test_missing_password_exits_2_before_anything_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("FREIGHT_PASSWORD", raising=False)
    monkeypatch.setenv("FREIGHT_BASE_URL", "http://127.0.0.1:9")
    assert main(["sync", "--data-dir", str(tmp_path / "data")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "FREIGHT_PASSWORD is not set" in err
    assert not (tmp_path / "data").exists()


def test_wrong_password_fails_with_one_line_naming_the_user(sim: RunningSimulator, tmp_path: Path) -> None:
    secret = "not-the-password-4711"
    env = cli_env(FREIGHT_BASE_URL=sim.base_url, FREIGHT_USERNAME=sim.username, FREIGHT_PASSWORD=secret)
    done = run_cli(["sync", "--data-dir", str(tmp_path)], env)
    assert done.returncode == 1, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("sync failed in step sync_"), done.stderr
    assert "AuthenticationError" in last and f"user {sim.username!r}" in last
    assert done.stderr.count("refused the credentials") == 1  # the reason is said once, on that line
    assert "Traceback" not in done.stderr
    assert secret not in done.stderr + done.stdout


def test_sync_runs_the_job_and_publishes(sim: RunningSimulator, tmp_path: Path) -> None:
    home = tmp_path / "dagster_home"
    env = cli_env(
        FREIGHT_BASE_URL=sim.base_url, FREIGHT_USERNAME=sim.username, FREIGHT_PASSWORD=sim.password,
        FREIGHT_DATA_DIR=str(tmp_path / "ignored"), DAGSTER_HOME=str(home),
    )
    data_dir = tmp_path / "data"
    done = run_cli(["sync", "--data-dir", str(data_dir)], env)
    assert done.returncode == 0, done.stderr
    assert "sync succeeded" in done.stderr.splitlines()[-1]
    # the engine's own lines, as a run without Dagster says them
    said = [line.split()[0] for line in done.stderr.splitlines() if line.startswith("  ") and line[2] != " "]
    assert said == ["sync_shipments", "sync_code_conversions", "sync_documents", "checks", "marts", "publish"]
    assert done.stdout == ""  # dbt's log does not leak to stdout
    assert sim.password not in done.stderr
    assert not (tmp_path / "ignored").exists()  # --data-dir wins over FREIGHT_DATA_DIR
    con = duckdb.connect(str(data_dir / "warehouse.duckdb"), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM freight.shipments").fetchone() == (100,)
        assert con.execute("SELECT count(*) FROM analytics.fct_shipments").fetchone() == (100,)
    finally:
        con.close()
    assert "QueuedRunCoordinator" in (home / "dagster.yaml").read_text()  # the persistent instance was used

    from dagster import DagsterInstance

    with environ({"DAGSTER_HOME": str(home)}), DagsterInstance.from_config(str(home)) as instance:
        runs = instance.get_runs()
        assert [(r.job_name, r.status.value) for r in runs] == [("freight_sync_job", "SUCCESS")]


def test_a_stream_the_account_cannot_reach_fails_the_sync_which_publishes_the_rest(tmp_path: Path) -> None:
    without_efiles = frozenset(p for p in PERMISSIONS if not p.startswith("efile"))
    config = SimulatorConfig(users=(UserConfig("no-documents-role", "pw-no-docs-4711", without_efiles),))
    with running_simulator(config, shipments=40, seed=5) as sim:
        env = cli_env(FREIGHT_BASE_URL=sim.base_url, FREIGHT_USERNAME="no-documents-role",
                      FREIGHT_PASSWORD="pw-no-docs-4711", DAGSTER_HOME=str(tmp_path / "dagster_home"))
        done = run_cli(["sync", "--data-dir", str(tmp_path / "data")], env)
        status = run_cli(["status", "--data-dir", str(tmp_path / "data")], env)
    assert done.returncode == 1, done.stderr
    documents = next(line for line in status.stdout.splitlines() if line.strip().startswith("documents "))
    assert " failed " in documents and "StreamUnreachable" in documents, status.stdout
    failed, published = done.stderr.strip().splitlines()[-2:]
    assert failed.startswith("sync failed in step sync_documents: StreamUnreachable: the account cannot reach the "
                             "documents stream's endpoints (403"), failed
    assert "FREIGHT_SYNC_DOCUMENTS=0" in failed
    assert published.startswith("published anyway by run "), published
    assert "pw-no-docs-4711" not in done.stderr + done.stdout
    with duckdb.connect(str(tmp_path / "data" / "warehouse.duckdb"), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM analytics.fct_shipments").fetchone() == (40,)
        assert con.execute("SELECT last_status FROM freight_meta.table_freshness "
                           "WHERE table_name = 'shipment_documents'").fetchone() == ("failed",)

    from dagster import DagsterInstance

    home = tmp_path / "dagster_home"
    with environ({"DAGSTER_HOME": str(home)}), DagsterInstance.from_config(str(home)) as instance:
        runs = instance.get_runs()
        # one run: it failed, and published every other stream
        assert [(r.job_name, r.status.value) for r in runs] == [("freight_sync_job", "FAILURE")]
    assert published.startswith(f"published anyway by run {runs[0].run_id} "), published


def test_sync_without_dagster_says_each_step_and_publishes(sim: RunningSimulator, tmp_path: Path) -> None:
    """No DAGSTER_HOME: the job runs without Dagster (no instance is made), a line per step as it ends."""
    env = cli_env(FREIGHT_BASE_URL=sim.base_url, FREIGHT_USERNAME=sim.username, FREIGHT_PASSWORD=sim.password)
    data_dir = tmp_path / "data"
    done = run_cli(["sync", "--data-dir", str(data_dir)], env)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert lines[0].endswith("(without Dagster)") and lines[-1].startswith("sync succeeded in ")
    said = [line.split()[0] for line in lines[1:-1]]
    assert said == ["sync_shipments", "sync_code_conversions", "sync_documents", "checks", "marts", "publish"]
    assert lines[4].endswith(" passed") and "the marts were never built by this version: " in lines[5]
    assert done.stdout == "" and sim.password not in done.stderr
    with duckdb.connect(str(data_dir / "warehouse.duckdb"), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM analytics.fct_shipments").fetchone() == (100,)
    # --full-refresh (the same switch in either way of running: commands.sync sets it before choosing)
    again = run_cli(["sync", "--data-dir", str(data_dir), "--full-refresh", "--verbose"], env)
    assert again.returncode == 0, again.stderr
    assert "a full refresh was asked for" in again.stderr  # nothing changed, yet every mart was rebuilt


def test_sync_refuses_settings_that_mean_nothing_before_anything_runs(tmp_path: Path) -> None:
    env = cli_env(FREIGHT_BASE_URL="http://127.0.0.1:9", FREIGHT_PASSWORD="x", FREIGHT_SYNC_DOCUMENTS="maybe")
    done = run_cli(["sync", "--data-dir", str(tmp_path / "data")], env)
    assert done.returncode == 2
    assert done.stderr.strip() == "sync: FREIGHT_SYNC_DOCUMENTS must be 1/true/yes/on or 0/false/no/off, got 'maybe'"
    both = run_cli(["sync", "--data-dir", str(tmp_path / "data"), "--no-dagster", "--job", "code_conversions_job"], env)
    assert both.returncode == 2 and "--job and --partition name a Dagster job's run" in both.stderr
    assert not (tmp_path / "data" / "warehouse.duckdb").exists()
