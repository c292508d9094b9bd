"""The commands' small parts: error lines, redaction, tables, the Dagster instance file, ``ui``'s checks."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from dagster._utils.error import SerializableErrorInfo

from freight_pipeline.cli import main
from freight_pipeline.commands.common import redact
from freight_pipeline.commands.dagster_home import ensure_dagster_yaml
from freight_pipeline.commands.execute import describe_error
from freight_pipeline.commands.text_table import format_table


def test_describe_error_names_the_users_exception_not_dagsters_wrapper() -> None:
    cause = SerializableErrorInfo(
        "freight_pipeline.client.errors.AuthenticationError: refused user 'demo'\nmore detail\n", [],
        "AuthenticationError",
    )
    wrapper = SerializableErrorInfo('Error occurred while executing op "x":\n', [],
                                    "DagsterExecutionStepExecutionError", cause=cause)
    assert describe_error(wrapper) == "AuthenticationError: refused user 'demo'"
    assert describe_error(None) == "unknown error"


def test_redact_and_format_table() -> None:
    assert redact("login demo with s3cr3t-pw failed", "s3cr3t-pw", None) == "login demo with *** failed"
    table = format_table(("name", "rows"), [("a", 1234), ("long_name", None)])
    assert table.splitlines() == ["  name        rows", "  a          1,234", "  long_name      -"]


def test_dagster_yaml_is_written_once_and_configures_one_queued_run(tmp_path: Path) -> None:
    from dagster import DagsterInstance, QueuedRunCoordinator

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
