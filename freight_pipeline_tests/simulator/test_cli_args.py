"""``freight-pipeline simulator`` argument checks: sizes, ports, the control surface's host, the clock."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from freight_pipeline.cli import build_parser
from freight_pipeline.simulator.cli import active_faults, config_from_args
from freight_pipeline.simulator.config import MAX_SHIPMENTS, FaultConfig


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


# FaultConfig field -> the flag that sets it (every field has one).
FAULT_FLAGS = {
    "seed": "--fault-seed", "rate_limit_rate": "--rate-limit-rate", "retry_after_s": "--retry-after",
    "server_error_rate": "--fault-rate", "drop_rate": "--drop-rate", "latency_ms": "--latency-ms",
    "latency_jitter_ms": "--latency-jitter-ms", "modify_during_paging_rate": "--modify-during-paging-rate",
    "modify_during_paging_count": "--modify-during-paging-count", "exempt_auth": "--exempt-auth",
    "paths": "--fault-path", "max_page_size": "--max-page-size", "fixed_page_size": "--fixed-page-size N",
    "page_size_limit": "--page-size-limit N",
    "max_in_flight": "--max-in-flight",
    "in_flight_retry_after": "--no-in-flight-retry-after", "forbidden_prefixes": "--forbid",
    "strict_criteria": "--strict-criteria", "memo_lookup_by_one": "--memo-lookup-by-one",
    "memo_order_refused": "--memo-order-refused", "no_content_when_empty": "--no-content-when-empty",
    "scroll_headers": "--no-scroll-headers", "efile_reference_shape": "--efile-reference-shape",
    "json_bom": "--json-bom", "json_latin1": "--json-latin1", "scroll_paging": "--no-scroll-paging",
    "scroll_first_rows": "--scroll-first-rows N", "scroll_page_object": "--scroll-page-object",
    "token_echo": "--token-echo", "redirect_to": "--redirect-to URL",
    "token_activation_ms": "--token-activation-ms MS",
    "tail_rate": "--tail RATE:MS", "tail_ms": "--tail RATE:MS", "tail_kinds": "--tail-kind KIND",
}


def test_help_lists_a_flag_for_every_fault_setting(capsys: pytest.CaptureFixture[str]) -> None:
    assert set(FAULT_FLAGS) == {f.name for f in dataclasses.fields(FaultConfig)}
    with pytest.raises(SystemExit) as stopped:
        build_parser().parse_args(["simulator", "--help"])
    assert stopped.value.code == 0
    shown = capsys.readouterr().out
    for flag in [*FAULT_FLAGS.values(), "--offset-change INSTANT=OFFSET", "--start INSTANT", "{type,key}",
                 "--naive-clock ZONE", "--release {2026.1,2026.2,2026.3}", "--fractional-stamps"]:
        assert flag in shown, flag


def test_service_mode_flags_become_config() -> None:
    args = build_parser().parse_args([
        "simulator", "--max-page-size", "100", "--max-in-flight", "4", "--no-in-flight-retry-after",
        "--forbid", "/service/efile", "--forbid", "/service/basicdata", "--strict-criteria", "--memo-lookup-by-one",
        "--no-scroll-headers", "--efile-reference-shape", "key", "--fault-path", "/service/shipment/lookup",
        "--utc-offset", "+02:00", "--offset-change", "2026-10-25T03:00:00+02:00=+01:00",
        "--start", "2026-10-25T02:00:00+02:00",
    ])
    config = config_from_args(args)
    assert config.faults == FaultConfig(
        max_page_size=100, max_in_flight=4, in_flight_retry_after=False,
        forbidden_prefixes=frozenset({"/service/efile", "/service/basicdata"}), strict_criteria=True,
        memo_lookup_by_one=True, scroll_headers=False, efile_reference_shape="key",
        paths=frozenset({"/service/shipment/lookup"}),
    )
    assert config.offset_changes == (("2026-10-25T03:00:00+02:00", "+01:00"),)
    assert (config.utc_offset, config.start) == ("+02:00", "2026-10-25T02:00:00+02:00")
    assert active_faults(config.faults) == {
        "seed": 0, "paths": ["/service/shipment/lookup"], "max_page_size": 100, "max_in_flight": 4,
        "in_flight_retry_after": False, "forbidden_prefixes": ["/service/basicdata", "/service/efile"],
        "strict_criteria": True, "memo_lookup_by_one": True, "scroll_headers": False, "efile_reference_shape": "key",
    }
    tailed = config_from_args(build_parser().parse_args(
        ["simulator", "--tail", "0.02:5000", "--tail-kind", "shipment", "--tail-kind", "legs"]))
    assert tailed.faults == FaultConfig(tail_rate=0.02, tail_ms=5000.0, tail_kinds=frozenset({"shipment", "legs"}))
    assert active_faults(tailed.faults) == {
        "seed": 0, "tail_rate": 0.02, "tail_ms": 5000.0, "tail_kinds": ["legs", "shipment"]}
    defaults = config_from_args(build_parser().parse_args(["simulator"]))
    assert defaults.faults == FaultConfig() and active_faults(defaults.faults) == {}
    assert (defaults.offset_changes, defaults.start) == ((), None)


@pytest.mark.parametrize(
    ("flags", "fragment"),
    [
        (["--max-page-size", "0"], "--max-page-size: must be at least 1"),
        (["--max-in-flight", "x"], "--max-in-flight: must be an integer"),
        (["--forbid", "service/efile"], "--forbid: must be a path starting with '/'"),
        (["--efile-reference-shape", "value"], "invalid choice: 'value'"),
        (["--offset-change", "2026-10-25T03:00:00+02:00"], "--offset-change: must be INSTANT=OFFSET"),
        (["--offset-change", "2026-10-25T03:00:00=+01:00"], "with a UTC offset"),
        (["--naive-clock", "Mars/Olympus_Mons"], "--naive-clock: 'Mars/Olympus_Mons' is not an IANA time zone"),
        (["--naive-clock", "+01:00"], "--naive-clock: '+01:00' is not an IANA time zone"),
        (["--tail", "0.02"], "--tail: must be RATE:MS"),
        (["--tail", "2:5000"], "--tail: must be RATE:MS with RATE in [0, 1]"),
        (["--tail-kind", "documents"], "invalid choice: 'documents'"),
    ],
)
def test_bad_service_mode_values_end_with_a_usage_error(
    capsys: pytest.CaptureFixture[str], flags: list[str], fragment: str
) -> None:
    with pytest.raises(SystemExit) as stopped:
        build_parser().parse_args(["simulator", *flags])
    assert stopped.value.code == 2
    assert fragment in capsys.readouterr().err


def test_offset_changes_out_of_order_are_refused() -> None:
    args = build_parser().parse_args([
        "simulator", "--offset-change", "2026-10-25T03:00:00+02:00=+01:00",
        "--offset-change", "2026-03-29T02:00:00+01:00=+02:00",
    ])
    with pytest.raises(ValueError, match="in time order"):
        config_from_args(args)


def test_fractional_stamps_become_config_off_by_default() -> None:
    assert config_from_args(build_parser().parse_args(["simulator", "--fractional-stamps"])).fractional_stamps
    assert not config_from_args(build_parser().parse_args(["simulator"])).fractional_stamps


def test_a_naive_clock_becomes_config_and_takes_no_offset() -> None:
    config = config_from_args(build_parser().parse_args(
        ["simulator", "--naive-clock", "Europe/Berlin", "--start", "2026-10-25T01:30:00"]
    ))
    assert (config.naive_clock, config.offset_changes, config.start) == ("Europe/Berlin", (), "2026-10-25T01:30:00")
    assert config_from_args(build_parser().parse_args(["simulator"])).naive_clock is None
    assert config_from_args(build_parser().parse_args(["simulator"])).utc_offset == "+01:00"
    for flags in (["--utc-offset", "+02:00"], ["--offset-change", "2026-10-25T03:00:00+02:00=+01:00"]):
        args = build_parser().parse_args(["simulator", "--naive-clock", "Europe/Berlin", *flags])
        with pytest.raises(ValueError, match="--naive-clock follows its zone's own rules"):
            config_from_args(args)
