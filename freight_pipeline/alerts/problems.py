"""What is wrong now, as problems with stable keys: from a run's steps and checks, and from the age of the
last successful sync.

A problem's key is ``<scope>:<item>``. A look (a run, ``status --alert``, the freshness sensor) names the scopes
it looked at; an open problem of a scope looked at that the look did not find is resolved. A run whose checks
did not run leaves the checks' problems as they were; a run of some streams leaves the others'.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from freight_pipeline.checks.warehouse import CheckResult, Severity, WarehouseCheck, describe_failure
from freight_pipeline.config import MAX_SYNC_AGE_ENV, AlertSettings
from freight_pipeline.sync.streams import STREAM_OF_STEP

Level = Literal["error", "warning"]
RANK: dict[str, int] = {"warning": 1, "error": 2}
QUARANTINE_CHECK = "no_quarantined_records"
"""The check whose problem waits for :attr:`AlertSettings.alert_quarantined_records` records."""
FRESHNESS_SCOPE = "freshness"
OTHER_STEP_DOCS = "docs/operations.md#commands"
SYNC_STEP = "sync"
"""The step a sync run fails in when it could not start (``job.run``: no client, no warehouse)."""
STEP_DOCS = {  # the steps of ``job.run`` (a test compares their names)
    SYNC_STEP: "docs/operations.md#connecting-to-the-real-service",
    "checks": "docs/operations.md#freight-pipeline-sync-with-or-without-dagster",
    "marts": "docs/marts.md",
    "publish": "docs/operations.md#alerts",
    "rebuild": OTHER_STEP_DOCS,
}
STREAM_DOCS = "docs/real-services.md#one-streams-failure-never-withholds-the-others"
FRESHNESS_DOCS = "docs/operations.md#running-it-from-cron"
BACKFILL_STEP = "backfill partition"
"""A run of one partition of lake mode's backfill, to the alerts (:func:`backfill_step`)."""
MAINTENANCE_STEP = "lake_maintenance"
"""A run of lake mode's maintenance job, to the alerts."""
LAKE_STEP_DOCS = {  # lake mode's Dagster jobs, each run one step (``defs.lake``)
    BACKFILL_STEP: "docs/lake.md#the-first-full-sync-split",
    MAINTENANCE_STEP: "docs/lake.md#maintenance",
}
BAD_RECORDS_DOCS = "docs/sync.md#when-the-source-sends-bad-data"
NOT_ALERTED_STEPS = ("checks",)
"""Steps whose failure is said by their results' problems (each check that did not pass); one that failed before
any result (the checks raised) is the step's own problem, as any other step's failure."""


class RunStep(Protocol):
    """What the alerts read of a step of a run (``job.run.Step``)."""

    name: str
    status: str
    line: str
    checks: list[tuple[WarehouseCheck, CheckResult]]
    off: bool
    """A stream's step skipped because the stream is switched off."""
    unreachable: bool
    """A stream's step that failed because the service refused the credentials or could not be reached: the run's
    start failed, not the stream (:data:`SYNC_STEP`'s problem)."""


@dataclass(frozen=True)
class Problem:
    key: str
    level: Level
    title: str
    """A few words: ``sync_memos failed``, ``shipments.no_shape_changes: goods[].weight``."""
    summary: str
    """What was found, in one line with its figures."""
    docs: str
    """The next step: a repository doc and its section's anchor."""

    @property
    def scope(self) -> str:
        return scope_of(self.key)


def scope_of(key: str) -> str:
    return key.partition(":")[0]


@dataclass
class Observation:
    """The problems one look found, and the scopes it looked at."""

    found: dict[str, Problem] = field(default_factory=dict)
    scopes: set[str] = field(default_factory=set)

    def add(self, problem: Problem) -> None:
        self.found[problem.key] = problem
        self.scopes.add(problem.scope)

    def merge(self, other: Observation) -> Observation:
        self.found.update(other.found)
        self.scopes |= other.scopes
        return self


def alerts_at(level: str, settings: AlertSettings) -> bool:
    """Whether a problem of ``level`` is sent (``alert_level``: the least severe that is)."""
    return RANK[level] >= RANK[settings.alert_level]


def of_steps(steps: Sequence[RunStep], settings: AlertSettings) -> Observation:
    """A run's problems: each step that failed (the checks' only when no check ran: else its checks say it), each
    check that did not pass (a check that finds several things: each of them), looked at for every step that ran
    (a run that ran a stream also looked at its own start). Streams that failed for the service refusing the
    credentials or being unreachable are one problem, the run's start (:data:`SYNC_STEP`), with its next step;
    their own problems stay as they were."""
    seen = Observation()
    for step in steps:
        if step.status == "skipped":  # it looked at nothing: its problems stay as they were, ...
            if step.off:  # ... but a stream switched off: what it failed is over (as its failure's message advises)
                seen.scopes.add(_step_scope(step.name))
            continue
        if step.status == "failed" and step.unreachable:  # the run's start: the stream itself looked at nothing
            seen.add(Problem(f"{_step_scope(SYNC_STEP)}:failed", "error", "the run could not reach the service",
                             step.line, STEP_DOCS[SYNC_STEP]))
            continue
        if step.name in NOT_ALERTED_STEPS and (step.checks or step.status != "failed"):
            for check, result in step.checks:
                seen.merge(of_check(check, result, settings))
            if step.checks:  # its checks ran: a failure of the step itself before them is over
                seen.scopes.add(_step_scope(step.name))
            continue
        seen.scopes.add(_step_scope(step.name))
        if step.name in STREAM_OF_STEP:  # the run opened its client and warehouse: its start did not fail
            seen.scopes.add(_step_scope(SYNC_STEP))
        if step.status == "failed":
            stream = STREAM_OF_STEP.get(step.name)
            title = f"the {stream} stream failed" if stream else f"the {step.name} step failed"
            seen.add(Problem(f"{_step_scope(step.name)}:failed", "error", title, step.line,
                             STREAM_DOCS if stream else _step_docs(step.name)))
    return seen


def backfill_step(partition: str) -> str:
    """The step a run of one backfill partition is, to the alerts: ``backfill partition 0-99999``."""
    return f"{BACKFILL_STEP} {partition}"


def of_bad_records(step: str, line: str) -> Observation:
    """Records a step (a backfill partition) rejected, quarantined or nulled values of, said by ``line``: a
    warning, in the step's scope (its next run without them resolves it)."""
    seen = Observation(scopes={_step_scope(step)})
    seen.add(Problem(f"{_step_scope(step)}:bad_records", "warning", f"{step}: records rejected or quarantined",
                     line, BAD_RECORDS_DOCS))
    return seen


def of_check(check: WarehouseCheck, result: CheckResult, settings: AlertSettings) -> Observation:
    """One check's problems (none when it passed, or below the quarantine's threshold)."""
    scope = f"check.{check.label}"
    seen = Observation(scopes={scope})
    if result.passed:
        return seen
    if check.name == QUARANTINE_CHECK and \
            int(result.figures.get("quarantined_records", 0)) < settings.alert_quarantined_records:
        return seen
    level: Level = "error" if check.severity is Severity.ERROR else "warning"
    line = describe_failure(check, result)
    items = check.findings(result) if check.findings is not None else {"": line}
    for item, said in items.items():
        title = f"{check.label}: {item}" if item else f"{check.label} did not pass"
        seen.add(Problem(f"{scope}:{item}", level, title, said if item else f"{said} (expected: {check.description})",
                         check.finding_docs.get(item, check.docs)))
    return seen


def of_freshness(stream: str, last_success: dt.datetime | None, now: dt.datetime,
                 max_age: dt.timedelta) -> Observation:
    """The ``stream``'s last successful sync older than ``max_age`` (or none at all): a stale warehouse."""
    scope = FRESHNESS_SCOPE
    seen = Observation(scopes={scope})
    if last_success is not None and now - last_success <= max_age:
        return seen
    since = ("no successful sync yet" if last_success is None
             else f"the last successful {stream} sync finished {_age(now - last_success)} ago, at "
                  f"{last_success.astimezone(dt.UTC):%Y-%m-%d %H:%M} UTC")
    seen.add(Problem(f"{scope}:{stream}", "error", f"no successful {stream} sync for over {_age(max_age)}",
                     f"{since} ({MAX_SYNC_AGE_ENV}: {int(max_age.total_seconds() // 60)}); readers see "
                     "data that old", FRESHNESS_DOCS))
    return seen


def _step_docs(name: str) -> str:
    lake = BACKFILL_STEP if name.startswith(f"{BACKFILL_STEP} ") else name
    return STEP_DOCS.get(name) or LAKE_STEP_DOCS.get(lake, OTHER_STEP_DOCS)


def _step_scope(name: str) -> str:
    return f"step.{name}"


def _age(age: dt.timedelta) -> str:
    minutes = int(age.total_seconds() // 60)
    if minutes < 120:
        return f"{minutes} min"
    hours = minutes / 60
    return f"{hours:.0f} h" if hours < 48 else f"{hours / 24:.0f} days"
