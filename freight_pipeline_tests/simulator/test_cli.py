"""``freight-pipeline simulator``: argument parsing, and a real process stopped with SIGTERM."""

from __future__ import annotations

import contextlib
import math
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest

import freight_pipeline.simulator.store  # noqa: F401  # the "real" runs serve it: a broken store must fail, not skip
from freight_pipeline.cli import build_parser
from freight_pipeline.simulator.cli import config_from_args


def test_flags_become_config() -> None:
    args = build_parser().parse_args(
        [
            "simulator",
            "--shipments",
            "10",
            "--seed",
            "3",
            "--port",
            "0",
            "--latency-ms",
            "5",
            "--fault-rate",
            "0.1",
            "--rate-limit-rate",
            "0.2",
            "--drop-rate",
            "0.05",
            "--control",
            "--user",
            "ops:secret:shipment:lookup,memo:read",
            "--token-lifetime",
            "60",
            "--exempt-auth",
        ]
    )
    config = config_from_args(args)
    assert (config.shipments, config.seed, config.control, config.token_lifetime_s) == (10, 3, True, 60)
    assert config.faults.server_error_rate == 0.1
    assert config.faults.rate_limit_rate == 0.2
    assert config.faults.drop_rate == 0.05
    assert config.faults.latency_ms == 5
    assert config.faults.exempt_auth
    ops = config.user("ops")
    assert ops is not None
    assert ops.permissions == {"shipment:lookup", "memo:read"}
    assert config.user("demo") is not None
    assert "secret" not in repr(config)


_WITH_FAKE_STORE = (
    "import sys; import freight_pipeline.simulator.server as server; "
    "from freight_pipeline_tests.simulator.fake_store import FakeStore; "
    "server.make_store = lambda config: FakeStore(config.shipments); "
    "from freight_pipeline.cli import main; sys.exit(main(sys.argv[1:]))"
)


@contextlib.contextmanager
def _started(store: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``freight-pipeline simulator`` of 30 shipments (on a ``fake`` or the ``real`` store) in a process of its
    own, and its base URL once it announced it; killed after the block if it still runs."""
    if store == "real":
        command = [sys.executable, "-m", "freight_pipeline.cli"]
    else:
        command = [sys.executable, "-c", _WITH_FAKE_STORE]
    process = subprocess.Popen(
        [*command, "simulator", "--shipments", "30", "--port", "0", "--control"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        base_url = None
        deadline = time.monotonic() + 60
        while base_url is None and time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                break
            match = re.search(r"base URL: (http://\S+)", line)
            base_url = match.group(1) if match else None
        assert base_url, process.stderr.read() if process.stderr else ""
        yield process, base_url
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.parametrize("store", ["fake", "real"])
@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT])
def test_serves_until_stopped(store: str, stop_signal: signal.Signals) -> None:
    with _started(store) as (process, base_url):
        token = httpx.post(f"{base_url}/auth/token", json={"username": "demo", "password": "demo-password"})
        assert token.status_code == 200
        assert httpx.get(f"{base_url}/_control/stats").json()["total"] == 1
        process.send_signal(stop_signal)
        assert process.wait(timeout=10) == 0


def test_a_signal_right_after_the_announcement_stops_it() -> None:
    """SIGTERM the moment the base URL is said (uvicorn still starting, its own handlers not yet set) stops the
    simulator as it starts, not never (it was ignored then: a bench that stopped a simulator early hung)."""
    with _started("fake") as (process, _):
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0


def test_a_served_process_announces_and_plays_the_service_modes() -> None:
    flags = [
        "--shipments", "30", "--port", "0", "--control", "--max-page-size", "3", "--forbid", "/service/efile",
        "--strict-criteria", "--utc-offset", "+02:00", "--offset-change", "2026-10-25T03:00:00+02:00=+01:00",
        "--start", "2026-10-25T02:00:00+02:00",
    ]
    process = subprocess.Popen(
        [sys.executable, "-c", _WITH_FAKE_STORE, "simulator", *flags],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert process.stdout is not None
        lines: list[str] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line or "stop with Ctrl-C" in line:
                break
            lines.append(line.rstrip())
        announced = "\n".join(lines)
        assert "  faults: seed=0, max_page_size=3, forbidden_prefixes=['/service/efile'], strict_criteria=True" in (
            announced
        ), announced
        assert (
            "  clock: starts 2026-10-25T02:00:00+02:00; offset +02:00, +01:00 from 2026-10-25T03:00:00+02:00"
            in announced
        )
        found = re.search(r"base URL: (http://\S+)", announced)
        assert found, announced
        base_url = found.group(1)
        token = httpx.post(f"{base_url}/auth/token", json={"username": "demo", "password": "demo-password"})
        headers = {"Authorization": f"Bearer {token.json()['access_token']}"}
        memos = httpx.get(f"{base_url}/service/shipment/memo", params={"page_size": 50}, headers=headers)
        assert len(memos.json()) == 3
        assert memos.headers["X-Page-Count"] == str(math.ceil(int(memos.headers["X-Row-Count"]) / 3))
        assert httpx.get(f"{base_url}/service/efile/1", headers=headers).status_code == 403
        strict = [{"key": "ID", "match_mode": "EQUALS", "values": [1, 2]}]
        assert httpx.post(f"{base_url}/service/shipment/lookup", json=strict, headers=headers).status_code == 400
        faults = httpx.get(f"{base_url}/_control/faults").json()
        assert (faults["max_page_size"], faults["strict_criteria"]) == (3, True)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
