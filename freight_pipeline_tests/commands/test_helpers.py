"""The commands' small parts: error lines, redaction, tables, the Dagster instance file, ``ui``'s checks."""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from dagster._utils.error import SerializableErrorInfo

from freight_pipeline.cli import SUBCOMMANDS, build_parser, main
from freight_pipeline.commands.common import StoppedIn, redact, resolve_data_dir, say, stopped_as_such
from freight_pipeline.commands.dagster_home import ensure_dagster_yaml
from freight_pipeline.commands.demo_summary import Changes, DemoFacts, DemoRun, _shipment_check, format_interval
from freight_pipeline.commands.execute import dagster_instance, describe_error
from freight_pipeline.commands.job_progress import JobOutcome
from freight_pipeline.commands.processes import stop_child
from freight_pipeline.commands.sync import published_anyway
from freight_pipeline.commands.text_table import format_table
from freight_pipeline.job.run import JobReport, StopNoticed
from freight_pipeline.sync.settings import SyncSettings


def test_describe_error_names_the_users_exception_not_dagsters_wrapper() -> None:
    cause = SerializableErrorInfo(
        "freight_pipeline.client.errors.AuthenticationError: refused user 'demo'\nmore detail\n", [],
        "AuthenticationError",
    )
    wrapper = SerializableErrorInfo('Error occurred while executing op "x":\n', [],
                                    "DagsterExecutionStepExecutionError", cause=cause)
    assert describe_error(wrapper) == "AuthenticationError: refused user 'demo'"
    assert describe_error(None) == "unknown error"


def test_describe_error_of_a_failed_dbt_build_is_its_first_line() -> None:
    """The dbt asset's DbtBuildFailed: the reason is ``DbtBuildFailed: <first line>`` (the failed
    tests and skipped models), the 400-character limit counted after Dagster's ``module.Class: ``."""
    first = "dbt build failed: 1 test failed (" + "x" * 320 + "), 3 models skipped (fct_shipments and 2 more)"
    cause = SerializableErrorInfo(
        f"freight_pipeline.defs.dbt.DbtBuildFailed: {first}\n  test x failed: Got 1 result\n", [], "DbtBuildFailed"
    )
    wrapper = SerializableErrorInfo('Error occurred while executing op "freight_dbt_models":\n', [],
                                    "DagsterExecutionStepExecutionError", cause=cause)
    assert len(first) <= 400
    assert describe_error(wrapper) == f"DbtBuildFailed: {first}"


class _Writes:
    """A stream that keeps each write apart."""

    def __init__(self) -> None:
        self.writes: list[str] = []

    def write(self, text: str) -> int:
        self.writes.append(text)
        return len(text)

    def flush(self) -> None:
        self.writes.append("<flush>")


def test_a_line_said_is_one_write_with_its_newline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lines said from two threads (the run's and Dagster's) never run into each other: each is written whole."""
    stream = _Writes()
    monkeypatch.setattr(sys, "stderr", stream)
    say("Dependencies for step freshness_check failed: ['freight_job']. Not executing.")
    say("sync failed in step sync_documents: StreamUnreachable")
    assert stream.writes == ["Dependencies for step freshness_check failed: ['freight_job']. Not executing.\n",
                             "<flush>", "sync failed in step sync_documents: StreamUnreachable\n", "<flush>"]


def test_redact_and_format_table() -> None:
    assert redact("login demo with s3cr3t-pw failed", "s3cr3t-pw", None) == "login demo with *** failed"
    table = format_table(("name", "rows"), [("a", 1234), ("long_name", None)])
    assert table.splitlines() == ["  name        rows", "  a          1,234", "  long_name      -"]


def test_dagster_yaml_is_written_once_and_configures_one_queued_run(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from dagster import DagsterInstance, QueuedRunCoordinator

    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    assert ensure_dagster_yaml(tmp_path) is True
    assert ensure_dagster_yaml(tmp_path) is False
    with DagsterInstance.from_config(str(tmp_path)) as instance:
        coordinator = instance.run_coordinator
        assert isinstance(coordinator, QueuedRunCoordinator)
        assert instance.get_concurrency_config().run_queue_config.max_concurrent_runs == 1


def test_ui_refuses_a_busy_port(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["ui", "--data-dir", str(tmp_path), "--port", str(port)]) == 2
    assert f"port {port} on 127.0.0.1 is in use" in capsys.readouterr().err


@pytest.mark.parametrize("port", ["99999", "0", "-1"])
def test_dashboard_refuses_a_port_out_of_range_in_its_usage_line(port: str, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as refused:
        main(["dashboard", "--data-dir", str(tmp_path), "--port", port])
    assert refused.value.code == 2
    assert f"argument --port: must be between 1 and 65535, got {port}" in capsys.readouterr().err


def test_a_relative_dagster_home_is_the_directory_it_names_from_here(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", "relative/home")  # Dagster itself refuses a relative one
    with dagster_instance() as instance:
        assert Path(instance.root_directory) == tmp_path / "relative" / "home"
        assert instance.get_runs_count() == 0
    assert (tmp_path / "relative" / "home" / "dagster.yaml").is_file()


def test_settings_shows_the_data_directory_a_sync_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FREIGHT_DATA_DIR", "~/freight")
    assert resolve_data_dir(None) == tmp_path / "home" / "freight"  # where `sync` writes
    assert main(["settings"]) == 0
    row = next(line.split() for line in capsys.readouterr().out.splitlines() if line.split()[1:2] == ["data_dir"])
    assert row[2] == str(tmp_path / "home" / "freight")


def test_the_demo_shows_the_reconcile_interval_in_hours_and_minutes() -> None:
    assert format_interval(dt.timedelta(hours=6)) == "6 h"
    assert format_interval(dt.timedelta(minutes=90)) == "1 h 30 min"
    assert format_interval(dt.timedelta(minutes=45, seconds=59)) == "45 min"
    assert format_interval(dt.timedelta(0)) == "0 min"
    runs = [DemoRun(label, JobOutcome("j", label), {"tables": {"freight.shipments": 10}}) for label in ("a", "b")]
    facts = DemoFacts(Path("data"), 10, 1, Changes([], [], [7]), lingering=[7], on_time=[])
    text = _shipment_check(runs, facts)
    every = SyncSettings().reconcile_interval
    assert every is not None
    assert f"when next due, every {format_interval(every)} by default," in text, text
    assert str(every) not in text  # not the raw timedelta ("6:00:00")


def test_without_pandas_pyarrow_converts_lists_and_pandas_is_refused_by_name() -> None:
    """`freight-pipeline sync` (without Dagster or as a Dagster run) marks pandas absent
    (``commands.common.without_pandas``): pyarrow converts lists without importing it, and code that wanted
    pandas would fail naming it (the CLI syncs in child processes, ``test_sync_command.py``, run whole jobs so)."""
    script = (
        "import sys\n"
        "from freight_pipeline.commands.common import without_pandas\n"
        "without_pandas()\n"
        "import pyarrow as pa\n"
        "assert pa.array([1, None]).to_pylist() == [1, None] and pa.table({'a': ['x']}).num_rows == 1\n"
        "try:\n    import pandas\nexcept ImportError as exc:\n    print(exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "'pandas': pandas is left out of `freight-pipeline sync`" in done.stdout


def test_a_child_that_outlives_its_sigterm_is_killed_and_named_without_its_arguments(
    caplog: pytest.LogCaptureFixture,
) -> None:
    script = ("import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); "
              "time.sleep(60)")
    child = subprocess.Popen([sys.executable, "-c", script, "--password=s3cr3t-arg"], stdout=subprocess.PIPE)
    assert child.stdout is not None and child.stdout.readline() == b"ready\n"
    with caplog.at_level(logging.WARNING):
        returncode = stop_child(child, timeout=0.5)
    child.stdout.close()
    assert returncode == -9
    assert f"{Path(sys.executable).name} (pid {child.pid}) outlived its SIGTERM by 0.5 s: killed" in caplog.text
    assert "s3cr3t" not in caplog.text


PLAN = ["rebuild", "checks", "marts", "publish"]


@pytest.mark.parametrize(("said", "raised", "where"), [
    (["rebuild"], StopNoticed(["rebuild"]), "in step rebuild"),  # its query took the stop: the step failed
    (["rebuild"], StopNoticed([]), "in step checks"),  # its exception lost: noticed before the next step
    (["rebuild"], KeyboardInterrupt(), "in step checks"),  # raised where it came, between the steps
])
def test_a_stopped_run_is_said_stopped_in_the_step_the_stop_came_in(
    said: list[str], raised: KeyboardInterrupt, where: str
) -> None:
    """A stop a step's query took for its own error fails that step, and the run notices it before the next
    (``job.run._unless_stopped``): the stop came in the failed step, not in the next, which never began (was:
    "terminated (SIGTERM) in step checks" of a rebuild stopped in its rebuild, in one CI run)."""
    def run() -> JobReport:
        raise raised

    with pytest.raises(StoppedIn) as stopped:
        stopped_as_such(PLAN, said, run)
    assert str(stopped.value).startswith(f"{where}: every batch it committed before is kept")


@pytest.mark.parametrize("command", [None, *SUBCOMMANDS])
def test_every_help_is_plain_text_for_its_user(command: str | None) -> None:
    """``--help`` of the command and of each subcommand says nothing in the docstrings' markup (was: the command's
    description was its module's docstring, "The ``freight-pipeline`` command: a thin dispatcher; ...")."""
    parser = build_parser(command)
    helped = parser.format_help() if command is None else next(
        action.choices[command].format_help() for action in parser._actions
        if isinstance(action, argparse._SubParsersAction))
    assert not re.search(r"``|:(func|class|data|meth|attr):|\bdispatcher\b", helped), helped


def test_a_failed_run_that_published_names_the_streams_that_failed_and_none_when_none_did() -> None:
    """A run that failed after its publish for another reason than a stream (Dagster's storage full as it records
    the run's end) said "every other stream's data ...; a failed stream's tables hold their last successful sync",
    of a stream that had not failed."""
    said = published_anyway("run-1", 2.0, ["documents"])
    assert said.startswith("published anyway by run run-1 (2.0 s): every other stream's data") and \
        "the documents tables hold their last successful sync" in said
    said = published_anyway("run-1", 2.0, [])
    assert said.startswith("published by run run-1 before it failed (2.0 s): every stream's data") and \
        "hold their last successful sync" not in said
