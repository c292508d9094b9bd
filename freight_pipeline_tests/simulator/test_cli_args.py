"""``freight-pipeline simulator`` argument checks: sizes, ports, the control surface's host, the clock."""

from __future__ import annotations

import subprocess
import sys

import pytest

from freight_pipeline.cli import build_parser
from freight_pipeline.simulator.cli import config_from_args
from freight_pipeline.simulator.config import MAX_SHIPMENTS


@pytest.mark.parametrize(
    ("flags", "fragment"),
    [
        (["--shipments", "-1"], f"--shipments: must be between 0 and {MAX_SHIPMENTS}"),
        (["--shipments", str(MAX_SHIPMENTS + 1)], "generated ids must fit int32"),
        (["--shipments", "many"], "--shipments: must be an integer, got 'many'"),
        (["--port", "70000"], "--port: must be between 0 and 65535"),
    ],
)
def test_bad_values_end_with_a_usage_error(
    capsys: pytest.CaptureFixture[str], flags: list[str], fragment: str
) -> None:
    with pytest.raises(SystemExit) as stopped:
        build_parser().parse_args(["simulator", *flags])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert fragment in err
    assert "Traceback" not in err


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
def test_control_on_loopback_is_allowed(host: str) -> None:
    args = build_parser().parse_args(["simulator", "--host", host, "--control", "--shipments", str(MAX_SHIPMENTS)])
    assert config_from_args(args).control


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.20", "::", "example.com"])
def test_control_on_another_host_is_refused(host: str) -> None:
    args = build_parser().parse_args(["simulator", "--host", host, "--control"])
    with pytest.raises(ValueError, match="--control needs a loopback --host"):
        config_from_args(args)
    assert not config_from_args(build_parser().parse_args(["simulator", "--host", host])).control


def test_the_process_refuses_control_on_all_interfaces() -> None:
    finished = subprocess.run(
        [sys.executable, "-m", "freight_pipeline.cli", "simulator", "--host", "0.0.0.0", "--control", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert finished.returncode == 2
    assert "simulator: --control needs a loopback --host" in finished.stderr
    assert "the control surface has no authentication" in finished.stderr
    assert "Traceback" not in finished.stderr
    assert "base URL" not in finished.stdout


def test_the_served_clock_follows_real_time_unless_frozen() -> None:
    assert config_from_args(build_parser().parse_args(["simulator"])).wall_clock
    assert not config_from_args(build_parser().parse_args(["simulator", "--frozen-clock"])).wall_clock
