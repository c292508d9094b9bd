"""What the alerts tests share: the two destinations, runs of the job on one data directory with alerting,
and what arrived."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from freight_pipeline.config import AlertSettings, ServiceSettings
from freight_pipeline.job.run import Alerting, JobReport, run_job
from freight_pipeline.lake.backend import storage_from_env
from freight_pipeline.marts.worker import DbtWorker
from freight_pipeline.simulator.server import RunningSimulator
from freight_pipeline.sync.settings import SyncSettings
from freight_pipeline_tests.alerts.receivers import Mailbox, Received, Webhook, smtp_server, webhook

SETTINGS = SyncSettings(page_size=25, fetch_batch_size=25, concurrency=8, retry_after=dt.timedelta(0),
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
        """Alerting to both destinations. A send the timeout cuts short is sent again by the next run (at least
        once): 10 s, not 3, so that a loaded machine's slow answer is not a second message (with 3 s,
        ``lake/test_lake_alerts.py`` got its ERROR twice in a clean-clone CI that ran at half speed)."""
        alerts = AlertSettings(alert_urls=(self.hook.url, self.mail.url), alert_deployment="test-deploy",
                               alert_timeout_seconds=10, **settings)  # type: ignore[arg-type]
        return Alerting(alerts, HOUR)

    def arrived(self) -> tuple[list[Received], list[Received]]:
        return list(self.hook.received), list(self.mail.received)


@contextmanager
def destinations_running() -> Iterator[Destinations]:
    """A webhook and an SMTP server, stopped after the block."""
    with webhook() as hook, smtp_server() as mail:
        yield Destinations(hook, mail)


@dataclass
class Runs:
    """Runs of the job (streams and checks; no build, no publish) on one data directory."""

    sim: RunningSimulator
    data_dir: Path
    alerting: Alerting
    wait: bool = True
    """Wait for each run's sends to end (their receipts are then there for the next run)."""
    reports: list[JobReport] = field(default_factory=list)
    password: str | None = None
    """The password the runs give (None: the simulator's)."""
    publish: bool = False
    """The runs publish (the checks first; no build)."""

    def run(self, settings: SyncSettings = SETTINGS) -> JobReport:
        service = ServiceSettings(self.sim.base_url, self.sim.username, self.password or self.sim.password)
        backend = storage_from_env()
        with DbtWorker.for_run(self.data_dir, backend.dbt_target, builds=False) as worker:
            report = run_job(service, self.data_dir, settings, backend, worker, marts=False, publish=self.publish,
                             alerting=self.alerting)
        assert report.alerted is not None
        if report.alerted.dispatch is not None and self.wait:
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
