"""Alerts from the one engine over HTTP against the simulator, to a JSON webhook and a real SMTP server on
loopback ports: a failed stream, a restore, a release that renames a field and a stale warehouse each arrive
once per destination, nothing more while they stay open, and once "resolved" when they close; a destination
that refuses, hangs or is gone never holds a run, and gets its message with the next run once it answers."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pytest

from bench.before_the_fix import mapping_before_the_fix
from freight_pipeline.alerts.notify import freshness
from freight_pipeline.config import AlertSettings, ServiceSettings
from freight_pipeline.job.run import Alerting, JobReport, run_job
from freight_pipeline.lake.backend import storage_from_env
from freight_pipeline.marts.worker import DbtWorker
from freight_pipeline.normalize import flatten
from freight_pipeline.simulator.releases import NEXT
from freight_pipeline.simulator.server import RunningSimulator, running_simulator
from freight_pipeline.sync import drift
from freight_pipeline.sync.parts import DOCUMENT
from freight_pipeline.sync.settings import SyncSettings
from freight_pipeline.sync.streams import CODE_CONVERSIONS
from freight_pipeline.warehouse.paths import working_db_path
from freight_pipeline_tests.alerts.receivers import Mailbox, Received, Webhook, smtp_server, webhook
from freight_pipeline_tests.sync.expected import assert_converged

SETTINGS = SyncSettings(page_size=25, fetch_batch_size=13, concurrency=8, retry_after=dt.timedelta(0),
                        reconcile_interval=None)
HOUR = dt.timedelta(hours=1)
STILL_OPEN_RUNS = 10
FORBIDDEN = frozenset({"/service/basicdata"})
"""The code conversions' endpoints, refused (403) as to an account without the permission."""


@dataclass
class Destinations:
    hook: Webhook
    mail: Mailbox

    def alerting(self, **settings: object) -> Alerting:
        alerts = AlertSettings(alert_urls=(self.hook.url, self.mail.url), alert_deployment="test-deploy",
                               alert_timeout_seconds=3, **settings)  # type: ignore[arg-type]
        return Alerting(alerts, HOUR)

    def arrived(self) -> tuple[list[Received], list[Received]]:
        return list(self.hook.received), list(self.mail.received)


@pytest.fixture
def destinations() -> Iterator[Destinations]:
    with webhook() as hook, smtp_server() as mail:
        yield Destinations(hook, mail)


@dataclass
class Runs:
    """Runs of the job (streams and checks; no build, no publish) on one data directory."""

    sim: RunningSimulator
    data_dir: Path
    alerting: Alerting
    reports: list[JobReport] = field(default_factory=list)

    def run(self, settings: SyncSettings = SETTINGS) -> JobReport:
        service = ServiceSettings(self.sim.base_url, self.sim.username, self.sim.password)
        backend = storage_from_env()
        with DbtWorker.start(self.data_dir, backend.dbt_target) as worker:
            report = run_job(service, self.data_dir, settings, backend, worker, marts=False, publish=False,
                             alerting=self.alerting)
        assert report.alerted is not None
        if report.alerted.dispatch is not None:
            assert report.alerted.dispatch.join(30)
        self.reports.append(report)
        return report


def titles(destinations: Destinations) -> list[list[str]]:
    """The titles each destination received, webhook then mail."""
    return [[m.title for m in box] for box in destinations.arrived()]


def only_new(destinations: Destinations, before: list[list[str]]) -> list[list[str]]:
    return [now[len(was):] for now, was in zip(titles(destinations), before, strict=True)]


def assert_one_each(destinations: Destinations, before: list[list[str]], title: str) -> list[Received]:
    """Exactly one new message at each destination, titled ``title``, the same text at both; the messages."""
    assert only_new(destinations, before) == [[title], [title]]
    hook, mail = (box[-1] for box in destinations.arrived())
    assert hook.body.strip() == mail.body.strip()
    return [hook, mail]


def test_a_failed_stream_is_said_once_not_while_it_stays_failed_and_once_resolved(
    destinations: Destinations, tmp_path: Path
) -> None:
    with running_simulator(shipments=10, seed=5) as sim:
        runs = Runs(sim, tmp_path, destinations.alerting())
        assert runs.run().success and titles(destinations) == [[], []]
        sim.set_faults(forbidden_prefixes=FORBIDDEN)
        before = titles(destinations)
        failed = runs.run()
        assert failed.failed_streams == [CODE_CONVERSIONS.name]
        (hook, _) = assert_one_each(destinations, before, "[test-deploy] ERROR: the code_conversions stream failed")
        opened, run = hook.body.split("\n\n")
        assert opened.startswith("Opened:\n- ERROR the code_conversions stream failed\n  Found: StreamUnreachable: ")
        assert f"(run {failed.run_id}), found by 1 run\n" in opened
        assert opened.endswith("\n  Next step: docs/real-services.md#one-streams-failure-never-withholds-the-others")
        assert run.startswith(f"Run: {failed.run_id} at ")
        before = titles(destinations)
        for _ in range(STILL_OPEN_RUNS):
            assert runs.run().failed_streams == [CODE_CONVERSIONS.name]
        assert only_new(destinations, before) == [[], []]
        sim.set_faults(forbidden_prefixes=None)
        cleared = runs.run()
        assert cleared.success
        (hook, _) = assert_one_each(destinations, before, "[test-deploy] resolved: the code_conversions stream failed")
        resolved, run = hook.body.split("\n\n")
        assert resolved.startswith("Resolved:\n- the code_conversions stream failed\n  Found last: StreamUnreachable")
        assert f"  Was open since " in resolved
        assert f"(run {failed.run_id}), found by {STILL_OPEN_RUNS + 1} runs\n" in resolved
        assert run.startswith(f"Run: {cleared.run_id} at ")
        before = titles(destinations)
        assert runs.run().success and only_new(destinations, before) == [[], []]
    with duckdb.connect(str(working_db_path(tmp_path)), read_only=True) as con:
        assert con.execute("SELECT problem, opened_run, closed_run, times_seen FROM freight_meta.alerts").fetchall() == [
            ("step.sync_code_conversions:failed", failed.run_id, cleared.run_id, STILL_OPEN_RUNS + 1)]
        assert con.execute("SELECT count(*), count(sent_at), sum(attempts) FROM freight_meta.alert_messages"
                           ).fetchone() == (4, 4, 4)  # two messages, each at two destinations, each sent once
