"""``freight-pipeline simulator``: argument parsing, and a real process stopped with SIGTERM."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time

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


@pytest.mark.parametrize("store", ["fake", "real"])
@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT])
def test_serves_until_stopped(store: str, stop_signal: signal.Signals) -> None:
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
        token = httpx.post(f"{base_url}/auth/token", json={"username": "demo", "password": "demo-password"})
        assert token.status_code == 200
        assert httpx.get(f"{base_url}/_control/stats").json()["total"] == 1
        process.send_signal(stop_signal)
        assert process.wait(timeout=10) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
