"""``freight-pipeline sync``: settings checked first, one-line failures without secrets, real runs: one
with Dagster and one without into two data directories (a module fixture), which publish the same tables;
a stream the account cannot reach, whose one Dagster run fails and says why in its events."""

from __future__ import annotations

import logging
import re
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest

from freight_pipeline.cli import main
from freight_pipeline.config import REPO_ROOT, environ
from freight_pipeline.simulator.config import PERMISSIONS, SimulatorConfig, UserConfig
from freight_pipeline.simulator.server import RunningSimulator, running_simulator
from freight_pipeline.sync.runner import STOPPED
from freight_pipeline_tests.commands.conftest import cli_env, run_cli, run_stopped_in_a_query, shown, unpublished
from freight_pipeline_tests.published import published_tables


@dataclass(frozen=True)
class Synced:
    """``freight-pipeline sync`` of the module's simulator into an empty data directory."""

    done: subprocess.CompletedProcess[str]
    data_dir: Path


@pytest.fixture(scope="module")
def in_dagster(sim: RunningSimulator, tmp_path_factory: pytest.TempPathFactory) -> Synced:
    """The sync as a Dagster run (``DAGSTER_HOME`` set), verbose, into ``--data-dir`` while ``FREIGHT_DATA_DIR``
    names another directory."""
    root = tmp_path_factory.mktemp("in_dagster")
    env = cli_env(
        FREIGHT_BASE_URL=sim.base_url, FREIGHT_USERNAME=sim.username, FREIGHT_PASSWORD=sim.password,
        FREIGHT_DATA_DIR=str(root / "ignored"), DAGSTER_HOME=str(root / "dagster_home"),
        PYTHONPROFILEIMPORTTIME="1",  # each import a line on stderr: what the run imported (pandas it need not)
        FREIGHT_SYNC_CODECONVERSIONS="0",  # a typo: said, and nothing reads it (the stream runs)
    )
    return Synced(run_cli(["sync", "--data-dir", str(root / "data"), "--verbose"], env), root / "data")


@pytest.fixture(scope="module")
def without_dagster(sim: RunningSimulator, tmp_path_factory: pytest.TempPathFactory) -> Synced:
    """The sync without Dagster (no ``DAGSTER_HOME``)."""
    data_dir = tmp_path_factory.mktemp("without_dagster") / "data"
    env = cli_env(FREIGHT_BASE_URL=sim.base_url, FREIGHT_USERNAME=sim.username, FREIGHT_PASSWORD=sim.password)
    return Synced(run_cli(["sync", "--data-dir", str(data_dir)], env), data_dir)


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
    # the reason is said once, on that line, naming each step it failed
    assert last.startswith("sync failed in steps sync_shipments, sync_code_conversions: "), done.stderr
    assert "AuthenticationError" in last and f"user {sim.username!r}" in last
    assert done.stderr.count("refused the credentials") == 1
    assert "Traceback" not in done.stderr
    assert secret not in done.stderr + done.stdout


def test_sync_runs_the_job_and_publishes(sim: RunningSimulator, in_dagster: Synced) -> None:
    done, data_dir, home = in_dagster.done, in_dagster.data_dir, in_dagster.data_dir.parent / "dagster_home"
    assert done.returncode == 0, done.stderr
    assert "sync succeeded" in done.stderr.splitlines()[-1]
    # the engine's own lines, as a run without Dagster says them
    said = [line.split()[0] for line in done.stderr.splitlines() if line.startswith("  ") and line[2] != " "]
    assert said == ["sync_shipments", "sync_code_conversions", "sync_documents", "checks", "marts", "publish"]
    typo = "FREIGHT_SYNC_CODECONVERSIONS is set but is not a setting (a typo?): nothing reads it"
    assert f"sync: {typo}\n" in done.stderr  # by the command; and in the Dagster run's log (the daemon's runs too)
    # each stream's progress (the op runs the engine in this process: its tallies reach the command), into a
    # pipe as plain lines: commands/test_sync_progress.py
    assert "    shipments: 0 of 100 shipments (0 %); " in done.stderr
    assert "    documents: 100 shipments done in " in done.stderr
    progress = [line for line in done.stderr.splitlines() if line.startswith("    ")]  # verbose: the op's lines too
    assert len(progress) == len(set(progress)), progress  # each tally once, not also as the op logged it for the UI
    assert done.stdout == ""  # dbt's log does not leak to stdout
    # pyarrow imports pandas at its first list conversion unless it is left out (``commands.common.without_pandas``):
    # half a second of every run, Dagster's included, for nothing it uses (its modules never load; what asks for
    # it is refused, a line of its own too)
    assert "import time:" in done.stderr and not re.search(r"\|\s+pandas\.", done.stderr)
    assert sim.password not in done.stderr
    assert not (data_dir.parent / "ignored").exists()  # --data-dir wins over FREIGHT_DATA_DIR
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
        warned = [entry.user_message for entry in instance.all_logs(runs[0].run_id) if entry.level == logging.WARNING]
        assert [message for message in warned if typo in message] == [typo]


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

    import dagster as dg

    from freight_pipeline.defs.freight_job import PUBLISH_KEY, stream_check_key
    from freight_pipeline.defs.sync_assets import stream_keys
    from freight_pipeline.job.run import FAILED_STEP

    home = tmp_path / "dagster_home"
    with environ({"DAGSTER_HOME": str(home)}), dg.DagsterInstance.from_config(str(home)) as instance:
        runs = instance.get_runs()
        # one run: it failed, and published every other stream
        assert [(r.job_name, r.status.value) for r in runs] == [("freight_sync_job", "FAILURE")]
        events = [entry.dagster_event for entry in instance.all_logs(runs[0].run_id) if entry.dagster_event]
    assert published.startswith(f"published anyway by run {runs[0].run_id} "), published
    assert "; the documents tables hold their last successful sync" in published, published  # as without Dagster
    # what only Dagster says (moved from defs/test_freight_job.py, which ran the same scenario once more):
    # the documents stream's tables not materialized, its check red with the engine's reason, the rest
    # materialized and checked, the op's failure naming the failed step
    done_keys = {e.asset_key for e in events if e.is_step_materialization}
    assert not done_keys & set(stream_keys("documents"))
    assert set(stream_keys("shipments")) | {dg.AssetKey(["analytics", "fct_shipments"]), PUBLISH_KEY} <= done_keys
    checks = {dg.AssetCheckKey(e.event_specific_data.asset_key, e.event_specific_data.check_name):
              e.event_specific_data for e in events if e.event_type_value == "ASSET_CHECK_EVALUATION"}
    red = checks[stream_check_key("documents")]
    assert not red.passed and (red.description or "").startswith("StreamUnreachable: ")
    assert checks[stream_check_key("shipments")].passed
    assert checks[dg.AssetCheckKey(dg.AssetKey(["freight", "shipment_documents"]), "primary_key_unique")].passed
    (failure,) = [e for e in events if e.is_step_failure]
    assert failure.step_failure_data is not None and failure.step_failure_data.user_failure_data is not None
    assert failure.step_failure_data.user_failure_data.metadata[FAILED_STEP].value == "sync_documents"


def test_sync_without_dagster_says_each_step_and_publishes(
    sim: RunningSimulator, without_dagster: Synced, tmp_path: Path
) -> None:
    """No DAGSTER_HOME: the job runs without Dagster (no instance is made), a line per step as it ends."""
    env = cli_env(FREIGHT_BASE_URL=sim.base_url, FREIGHT_USERNAME=sim.username, FREIGHT_PASSWORD=sim.password)
    done = without_dagster.done
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if not line.startswith("    ")]  # not the progress lines
    assert lines[0].endswith("(without Dagster)") and lines[-1].startswith("sync succeeded in ")
    said = [line.split()[0] for line in lines[1:-1]]
    assert said == ["sync_shipments", "sync_code_conversions", "sync_documents", "checks", "marts", "publish"]
    assert lines[4].endswith(" passed") and "the marts were never built by this version: " in lines[5]
    assert done.stdout == "" and sim.password not in done.stderr
    with duckdb.connect(str(without_dagster.data_dir / "warehouse.duckdb"), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM analytics.fct_shipments").fetchone() == (100,)
    # --full-refresh (the same switch in either way of running: commands.sync sets it before choosing),
    # on a copy (the fixture's directory stays as the first sync left it)
    data_dir = tmp_path / "data"
    shutil.copytree(without_dagster.data_dir, data_dir, symlinks=True)
    again = run_cli(["sync", "--data-dir", str(data_dir), "--full-refresh", "--verbose"], env)
    assert again.returncode == 0, again.stderr
    assert "a full refresh was asked for" in again.stderr  # nothing changed, yet every mart was rebuilt


def test_a_data_directory_publishes_the_same_either_way(in_dagster: Synced, without_dagster: Synced) -> None:
    """The same service synced into two data directories, as a Dagster run and without Dagster: the same
    published tables, row for row (moved from defs/test_freight_job.py, which ran both once more)."""
    assert in_dagster.done.returncode == 0 and without_dagster.done.returncode == 0
    first, second = published_tables(without_dagster.data_dir), published_tables(in_dagster.data_dir)
    assert first.keys() == second.keys() and len(first) > 40
    assert {name: rows for name, rows in first.items() if rows != second[name]} == {}


def test_sync_refuses_settings_that_mean_nothing_before_anything_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through ``main`` in this process, as the missing password above (commands/test_bad_setup.py runs
    such refusals in a child process too)."""
    for name, value in cli_env(FREIGHT_BASE_URL="http://127.0.0.1:9", FREIGHT_PASSWORD="x",
                               FREIGHT_SYNC_DOCUMENTS="maybe").items():
        monkeypatch.setenv(name, value)
    for name in ("FREIGHT_USERNAME", "FREIGHT_DATA_DIR", "DAGSTER_HOME"):
        monkeypatch.delenv(name, raising=False)
    assert main(["sync", "--data-dir", str(tmp_path / "data")]) == 2
    err = capsys.readouterr().err
    assert err.strip() == "sync: FREIGHT_SYNC_DOCUMENTS='maybe': must be 1/true/yes/on or 0/false/no/off"
    assert main(["sync", "--data-dir", str(tmp_path / "data"), "--no-dagster", "--job", "code_conversions_job"]) == 2
    assert "--job and --partition name a Dagster job's run" in capsys.readouterr().err
    assert not (tmp_path / "data" / "warehouse.duckdb").exists()


VARYING = (
    (re.compile(r"\b\d+(?:\.\d+)? s\b"), "# s"),  # timings
    (re.compile(r"http://\S+"), "URL"),
    (re.compile(r"-> \S+"), "-> DIR"),
    (re.compile(r"\(run [^)]+\)"), "(run ID)"),
    (re.compile(r"published v\S+"), "published VERSION"),
    (re.compile(r" in [\d,]+ requests"), " in # requests"),  # hedged reads vary
    (re.compile(r"; [\d,]+ requests?, "), "; # requests, "),  # a stream's progress line: the same
    (re.compile(r"[\d,.]+ (\w+)/s\b"), r"# \1/s"),  # its rate
)
"""What differs between two runs of one service: masked before the documented sample is compared."""
MIDWAY = re.compile(r"^ {4}\w+: [1-9][\d,]* of ")
"""A stream's progress line between its first and its last: there when the stream took over 15 s (a busy machine)."""


def masked(text: str) -> list[str]:
    lines = []
    for line in text.strip().splitlines():
        if MIDWAY.match(line):
            continue
        for pattern, mask in VARYING:
            line = pattern.sub(mask, line)
        lines.append(" ".join(line.split()))
    return lines


def documented_sample() -> str:
    """The sample of a run without Dagster in docs/operations.md (the fenced block that starts ``sync: http``)."""
    text = (REPO_ROOT / "docs" / "operations.md").read_text()
    found = re.search(r"```\n(sync: http.*?)```", text, re.S)
    assert found, "docs/operations.md has no sample of a run"
    return found.group(1)


def test_the_documented_sample_of_a_run_is_what_the_command_says(without_dagster: Synced) -> None:
    """The sample in docs/operations.md is this module's run (the simulator's 100 shipments, seed 5, every
    stream on), but for what differs between runs (:data:`VARYING`): step for step, the rows, the checks,
    the models, the tests and the tables as the command says them."""
    assert without_dagster.done.returncode == 0, without_dagster.done.stderr
    assert masked(documented_sample()) == masked(without_dagster.done.stderr), without_dagster.done.stderr


@pytest.mark.parametrize(("stop", "said"), [("SIGTERM", "terminated (SIGTERM)"), ("SIGINT", "interrupted (Ctrl-C)")])
def test_a_stop_a_duckdb_query_takes_still_stops_the_sync_as_stopped_not_failed(
    sim: RunningSimulator, tmp_path: Path, stop: str, said: str
) -> None:
    """DuckDB turns the KeyboardInterrupt of a stop that comes while it runs a query in the main thread into an
    error of its own (``RuntimeError: Query interrupted``), which the step's ``except Exception`` took as its
    failure: ``sync failed in step publish: RuntimeError: Query interrupted``, exit 1, and the run went on."""
    env = cli_env(FREIGHT_BASE_URL=sim.base_url, FREIGHT_USERNAME=sim.username, FREIGHT_PASSWORD=sim.password)
    done = run_stopped_in_a_query(stop, "freight_pipeline.warehouse.embedded:EmbeddedDuckDB.publish",
                                  ["sync", "--no-dagster", "--data-dir", str(tmp_path / "data")], env)
    assert done.returncode == 128 + getattr(signal, stop), done.stderr
    assert done.stderr.splitlines()[-1] == (f"freight-pipeline sync: {said} in step publish: every batch it "
                                            "committed before is kept, the next run goes on from the last; "
                                            f"exit {done.returncode}"), done.stderr
    # its run log row says stopped too (it said ``RuntimeError: Query interrupted``)
    assert [row for row in shown(unpublished(tmp_path / "data", published=False)) if row[1] != "success"] == [
        ("job publish", "failed", STOPPED)]
