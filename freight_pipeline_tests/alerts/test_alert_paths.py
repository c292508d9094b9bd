"""The same alert whichever way the run was started: ``freight-pipeline sync`` headless (cron) and as a Dagster
run, each from a child process, against one service whose code conversions the account cannot reach; the URL's
secrets in no output and no table."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from freight_pipeline.alerts.delivery import RECEIPTS_FILE
from freight_pipeline.simulator.config import FaultConfig
from freight_pipeline.simulator.server import LOCALHOST, RunningSimulator, running_simulator
from freight_pipeline.warehouse.paths import working_db_path
from freight_pipeline_tests.alerts.harness import FORBIDDEN
from freight_pipeline_tests.alerts.receivers import Webhook, webhook
from freight_pipeline_tests.commands.conftest import cli_env, run_cli

HOOK_SECRET = "s3cret-hook-token"
DAGSTER_URL = "http://dagster.example.test:3000"
TITLE = "[test-deploy] ERROR: the code_conversions stream failed"
BODY = """Opened by this run:
- ERROR the code_conversions stream failed
  Found: StreamUnreachable: the account cannot reach the code_conversions stream's endpoints (403 on every call, \
e.g. GET /service/basicdata/codeconverter): ask the service's operator for the permission, or switch the stream off \
with FREIGHT_SYNC_CODE_CONVERSIONS=0
  Next step: docs/real-services.md#one-streams-failure-never-withholds-the-others

Run: <run> at <time>"""


@pytest.fixture(scope="module")
def service() -> Iterator[tuple[RunningSimulator, Webhook]]:
    with running_simulator(shipments=20, seed=5, faults=FaultConfig(forbidden_prefixes=FORBIDDEN)) as sim, \
            webhook() as hook:
        yield sim, hook


def synced(service: tuple[RunningSimulator, Webhook], tmp_path: Path, **env: str) -> tuple[str, str]:
    """``freight-pipeline sync`` into a new data directory; its output, after the one message it sent."""
    sim, hook = service
    url = f"json://alerts:{HOOK_SECRET}@{LOCALHOST}:{hook.port}/hook"
    before = len(hook.received)
    done = run_cli(["sync", "--data-dir", str(tmp_path / "data")], cli_env(
        FREIGHT_BASE_URL=sim.base_url, FREIGHT_USERNAME=sim.username, FREIGHT_PASSWORD=sim.password,
        FREIGHT_ALERT_URLS=url, FREIGHT_ALERT_DEPLOYMENT="test-deploy", FREIGHT_DAGSTER_URL=DAGSTER_URL, **env))
    assert done.returncode == 1, done.stderr
    output = done.stdout + done.stderr
    assert HOOK_SECRET not in output and sim.password not in output
    (message,) = hook.received[before:]  # sent before the command ended
    assert message.title == TITLE
    with duckdb.connect(str(working_db_path(tmp_path / "data")), read_only=True) as con:
        for table in ("alerts", "alert_messages"):
            text = con.execute(f"SELECT string_agg(CAST(t AS VARCHAR), ' ') FROM freight_meta.{table} t").fetchone()
            assert text and HOOK_SECRET not in str(text[0]) and "alerts:" not in str(text[0])
        assert con.execute("SELECT count(*), count(sent_at) FROM freight_meta.alert_messages").fetchone() == (1, 0)
    (receipt,) = (working_db_path(tmp_path / "data").parent / RECEIPTS_FILE).read_text().splitlines()
    assert json.loads(receipt)["sent"] is True  # folded into the outbox by the next look
    # the published copy holds this run's look (was: the run before's, here none: the problem not open there)
    with duckdb.connect(str(tmp_path / "data" / "warehouse.duckdb"), read_only=True) as published:
        assert published.execute("SELECT problem FROM freight_meta.alerts WHERE closed_at IS NULL").fetchall() == [
            ("step.sync_code_conversions:failed",)]
        assert published.execute("SELECT count(*) FROM freight_meta.alert_messages").fetchone() == (1,)
    return message.body, output


def normalized(body: str) -> tuple[str, set[str]]:
    """``body`` with its instants and run ids as ``<time>`` and ``<run>``, and the run ids it named."""
    runs = set(re.findall(r"run (\S+?)[),]|Run: (\S+)", body)[0]) - {""}
    body = re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", "<time>", body)
    for run in runs:
        body = body.replace(run, "<run>")
    return body, runs


def test_the_headless_sync_sends_the_alert(service: tuple[RunningSimulator, Webhook], tmp_path: Path) -> None:
    body, output = synced(service, tmp_path)
    said, runs = normalized(body)
    assert said == BODY
    (run,) = runs
    assert run.startswith("cli-") and f"by run {run} " in output
    assert "alerts: 1 problem open; a message on 1 opened queued for 1 destination" in output


def test_the_dagster_run_sends_the_same_alert(service: tuple[RunningSimulator, Webhook], tmp_path: Path) -> None:
    body, output = synced(service, tmp_path, DAGSTER_HOME=str(tmp_path / "dagster_home"))
    said, runs = normalized(body)
    (run,) = runs
    link = f" ({DAGSTER_URL}/runs/<run>)"
    assert said.replace(link, "") == BODY and said.endswith(link)  # and a link to the run in the Dagster UI
    assert f"by run {run} " in output
