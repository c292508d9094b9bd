"""Each problem's state and the outbox, in ``freight_meta`` (``alerts``, ``alert_messages``): written in one
transaction per look, so that a crash neither forgets a problem nor queues its message twice.

A problem found that is not open opens (``opened``); one still open is said again once
``alert_repeat_minutes`` passed since it was last said (``repeated``); an open one of a scope the look
looked at and did not find closes (``resolved``, when it had been said). A look that changed what is said
queues ONE message on all of it (a release that renames three fields is one message, not three), once per
destination; it stays in the outbox until that destination accepted it (``delivery`` appends its receipts
to a file, folded in by the next look: :func:`fold_receipts`).
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb

from freight_pipeline.alerts.problems import RANK, Observation, Problem, alerts_at, scope_of
from freight_pipeline.config import AlertSettings
from freight_pipeline.warehouse.ddl import insert_values, qualified
from freight_pipeline.warehouse.meta import ALERT_MESSAGES, ALERTS, SYNC_RUNS

PENDING_LIMIT = 50
"""Unsent messages sent again per destination by one look, oldest first."""
PENDING_DAYS = 7
"""Unsent messages older than this are not sent again (the problem's state says what is open)."""
SEND_START = dt.timedelta(seconds=30)
"""Added to a claimed message's sends' timeouts (:func:`pending`): until its send's thread starts, and the end of the
process that holds it (``freight-pipeline sync`` waits for its sends)."""


@dataclass(frozen=True)
class Outgoing:
    """One message for one destination (its URL's fingerprint)."""

    message_id: str
    destination: str
    level: str
    """error, warning, or resolved (it only resolves)."""
    title: str
    body: str


@dataclass(frozen=True)
class Context:
    """Who looked, when, and what each message says around its problems."""

    run_id: str
    now: dt.datetime
    deployment: str
    run_link: str | None = None
    """The run in the Dagster UI, when the look is a Dagster run and its address is set."""

    @property
    def message_id(self) -> str:
        """The id of the message this look queues (one per destination)."""
        return f"{self.run_id}|{self.now.isoformat()}"


@dataclass(frozen=True)
class Change:
    """A problem whose state a look changed in a way that is said: opened, still open (repeated), resolved."""

    kind: str
    problem: Problem
    opened_at: dt.datetime
    opened_run: str
    times_seen: int


KINDS = ("opened", "repeated", "resolved")


def record(con: duckdb.DuckDBPyConnection, seen: Observation, context: Context, settings: AlertSettings,
           destinations: Sequence[str]) -> list[Change]:
    """The look's problems into ``freight_meta.alerts`` and, when it changed what is said, one message on every
    change into the outbox for each of ``destinations`` (fingerprints), in the caller's transaction; the
    changes said."""
    alerts = qualified(ALERTS)
    open_rows = {row[0]: row for row in con.execute(
        "SELECT problem, opened_at, opened_run, times_seen, last_alerted_at, level, title, summary, docs "
        f"FROM {alerts} WHERE closed_at IS NULL ORDER BY opened_at, problem").fetchall()}
    changes: list[Change] = []
    now = context.now
    for key, problem in seen.found.items():
        row = open_rows.get(key)
        if row is None:
            alerted = alerts_at(problem.level, settings)
            con.execute(f"INSERT INTO {alerts} VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, NULL, NULL)",
                        [key, now, problem.level, problem.title, problem.summary, problem.docs, context.run_id, now,
                         context.run_id, now if alerted else None])
            if alerted:
                changes.append(Change("opened", problem, now, context.run_id, 1))
            continue
        _, opened_at, opened_run, times_seen, last_alerted, *_ = row
        due = alerts_at(problem.level, settings) and (
            last_alerted is None or (settings.alert_repeat is not None and now - last_alerted >= settings.alert_repeat))
        con.execute(f"UPDATE {alerts} SET level = ?, title = ?, summary = ?, docs = ?, last_seen_at = ?, "
                    "last_seen_run = ?, times_seen = times_seen + 1, "
                    "last_alerted_at = CASE WHEN ? THEN ? ELSE last_alerted_at END WHERE problem = ? AND opened_at = ?",
                    [problem.level, problem.title, problem.summary, problem.docs, now, context.run_id, due, now, key,
                     opened_at])
        if due:  # a problem that became severe enough (a lowered alert_level) opens now
            changes.append(Change("opened" if last_alerted is None else "repeated", problem, opened_at, opened_run,
                                  times_seen + 1))
    for key, (_, opened_at, opened_run, times_seen, last_alerted, level, title, summary, docs) in open_rows.items():
        if key in seen.found or scope_of(key) not in seen.scopes:
            continue
        con.execute(f"UPDATE {alerts} SET closed_at = ?, closed_run = ? WHERE problem = ? AND opened_at = ?",
                    [now, context.run_id, key, opened_at])
        if last_alerted is not None:  # what was never said is not said resolved
            changes.append(Change("resolved", Problem(key, level, title, summary, docs), opened_at, opened_run,
                                  times_seen))
    missed = _unheard(con, destinations, {change.problem.key for change in changes}, settings)
    by_changes: dict[tuple[Change, ...], list[str]] = {}  # the destinations each message goes to
    for destination in destinations:
        told = (*changes, *missed.get(destination, ()))
        if told:
            by_changes.setdefault(told, []).append(destination)
    message_id = context.message_id
    for told, to in by_changes.items():
        title, body = message(told, context)
        kinds = "+".join(kind for kind in KINDS if any(change.kind == kind for change in told))
        level = max((c.problem.level for c in told if c.kind != "resolved"), key=RANK.__getitem__, default="")
        problems = "\n".join(change.problem.key for change in told)
        insert_values(con, f"INSERT INTO {qualified(ALERT_MESSAGES)} VALUES",
                      "(?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, 0, NULL, NULL)",
                      [(message_id, destination, problems, kinds, level or "resolved", title, body, now,
                        context.run_id) for destination in to])
    return changes


def _unheard(con: duckdb.DuckDBPyConnection, destinations: Sequence[str], said_now: set[str],
             settings: AlertSettings) -> dict[str, list[Change]]:
    """For each of ``destinations``, the open problems said before (``last_alerted_at``), of a level that alerts now,
    that no message queued for it since they opened names, but those ``said_now``: a destination added or changed
    while they were open (a webhook rotated, a pager added) is told they are still open, at once, not a day later, or
    never with ``alert_repeat_minutes=never``."""
    if not destinations:
        return {}
    rows = con.execute(
        "SELECT d.destination, a.problem, a.level, a.title, a.summary, a.docs, a.opened_at, a.opened_run, "
        f"a.times_seen FROM {qualified(ALERTS)} a, (SELECT unnest(?) AS destination) d "
        "WHERE a.closed_at IS NULL AND a.last_alerted_at IS NOT NULL AND NOT EXISTS ("
        f"SELECT 1 FROM {qualified(ALERT_MESSAGES)} m WHERE m.destination = d.destination "
        "AND m.queued_at >= a.opened_at AND list_contains(string_split(m.problems, chr(10)), a.problem)) "
        "ORDER BY a.opened_at, a.problem", [list(destinations)]).fetchall()
    missed: dict[str, list[Change]] = {}
    for destination, key, level, title, summary, docs, opened_at, opened_run, times_seen in rows:
        if key not in said_now and alerts_at(level, settings):
            missed.setdefault(destination, []).append(
                Change("repeated", Problem(key, level, title, summary, docs), opened_at, opened_run, times_seen))
    return missed


def queued_by(con: duckdb.DuckDBPyConnection, context: Context) -> int:
    """The destinations the look of ``context`` queued a message for."""
    row = con.execute(f"SELECT count(*) FROM {qualified(ALERT_MESSAGES)} WHERE message_id = ?",
                      [context.message_id]).fetchone()
    return int(row[0]) if row else 0


def message(changes: Sequence[Change], context: Context) -> tuple[str, str]:
    """The title and text of one message on ``changes``: the problems opened, still open and resolved, each with
    what was found, since when and by which run, and the next step; the run (and its link) once."""
    head = f"[{context.deployment}] " if context.deployment else ""
    said = [c for c in changes if c.kind != "resolved"]
    resolved = [c for c in changes if c.kind == "resolved"]
    if said:
        level = max((c.problem.level for c in said), key=RANK.__getitem__)
        first = said[0]
        title = f"{head}{level.upper()}: {first.problem.title}" + (" (still open)" if first.kind == "repeated" else "")
        others = len(said) - 1
        title += f" and {others} more" if others else ""
        title += f"; {len(resolved)} resolved" if resolved else ""
    else:
        title = f"{head}resolved: {resolved[0].problem.title}" + (
            f" and {len(resolved) - 1} more" if len(resolved) > 1 else "")
    sections = []
    for kind, heading in (("opened", "Opened by this run"), ("repeated", "Still open"), ("resolved", "Resolved")):
        of_kind = [c for c in changes if c.kind == kind]
        if not of_kind:
            continue
        lines = [f"{heading}:"]
        for index, change in enumerate(of_kind):
            problem = change.problem
            lines.append(f"- {problem.title}" if kind == "resolved" else f"- {problem.level.upper()} {problem.title}")
            lines.append(f"  {'Found last' if kind == 'resolved' else 'Found'}: {problem.summary}")
            if change.opened_at != context.now:  # not opened by this very look
                lines.append(f"  {'Was open' if kind == 'resolved' else 'Open'} since {_instant(change.opened_at)} "
                             f"(run {change.opened_run}), found by {_times(change.times_seen)}")
            following = of_kind[index + 1] if index + 1 < len(of_kind) else None
            if following is None or following.problem.docs != problem.docs:  # said once for a group that shares it
                lines.append(f"  Next step: {problem.docs}")
        sections.append("\n".join(lines))
    run = f"Run: {context.run_id} at {_instant(context.now)}" + (f" ({context.run_link})" if context.run_link else "")
    return title, "\n\n".join([*sections, run])


def pending(con: duckdb.DuckDBPyConnection, destinations: Sequence[str], now: dt.datetime,
            timeout: dt.timedelta) -> list[Outgoing]:
    """The outbox's unsent messages for ``destinations`` that no earlier look's send may still be sending, oldest
    first (then by destination), at most :data:`PENDING_LIMIT` each; claimed for the caller's send in its
    transaction (``sending_until``: now, plus ``timeout`` for each message claimed for its destination, plus
    :data:`SEND_START`), so that a look while they are sent (``status --alert`` as a run's sends end) does not send
    them twice. A receipt releases the claim (:func:`fold_receipts`); a send that never wrote one (its process
    killed) is taken again once the claim ended."""
    if not destinations:
        return []
    rows = con.execute(
        f"SELECT message_id, destination, level, title, body FROM {qualified(ALERT_MESSAGES)} "
        "WHERE sent_at IS NULL AND destination IN (SELECT unnest(?)) AND queued_at >= ? "
        "AND (sending_until IS NULL OR sending_until <= ?) "
        "QUALIFY row_number() OVER (PARTITION BY destination ORDER BY queued_at, message_id) <= ? "
        "ORDER BY queued_at, message_id, destination",
        [list(destinations), now - dt.timedelta(days=PENDING_DAYS), now, PENDING_LIMIT]).fetchall()
    by_destination: dict[str, list[str]] = {}
    for message_id, destination, *_ in rows:
        by_destination.setdefault(destination, []).append(message_id)
    for destination, ids in by_destination.items():  # sent one after the other, each within the timeout
        con.execute(f"UPDATE {qualified(ALERT_MESSAGES)} SET sending_until = ? "
                    "WHERE destination = ? AND message_id IN (SELECT unnest(?))",
                    [now + SEND_START + timeout * len(ids), destination, ids])
    return [Outgoing(*row) for row in rows]


def fold_receipts(con: duckdb.DuckDBPyConnection, receipts: Path) -> Path | None:
    """The receipts the last dispatch appended (``delivery``), applied to the outbox in the caller's
    transaction; the file folded in (to delete once the transaction commits), None when there was none."""
    folding = receipts.with_suffix(".folding")
    if receipts.exists():
        if folding.exists():  # a look that crashed after its rename: both are folded (applying is idempotent)
            with folding.open("a") as kept:
                kept.write(receipts.read_text())
            receipts.unlink()
        else:
            os.replace(receipts, folding)
    if not folding.exists():
        return None
    for line in folding.read_text().splitlines():
        try:
            receipt = json.loads(line)
        except ValueError:
            continue  # a line cut short by a crash: that message stays unsent and goes again
        con.execute(
            f"UPDATE {qualified(ALERT_MESSAGES)} SET attempts = attempts + 1, sending_until = NULL, "
            "sent_at = CASE WHEN ? THEN coalesce(sent_at, CAST(? AS TIMESTAMPTZ)) ELSE sent_at END, "
            "last_error = CASE WHEN ? THEN NULL ELSE ? END WHERE message_id = ? AND destination = ?",
            [receipt["sent"], receipt["at"], receipt["sent"], receipt.get("error"), receipt["message_id"],
             receipt["destination"]])
    return folding


def last_success(con: duckdb.DuckDBPyConnection, stream: str) -> dt.datetime | None:
    """When ``stream``'s latest successful run, the success recorded last (``meta.latest_runs``), finished (None: none
    did): the latest finish, after a clock stepped back, was one dated ahead of the real time, which delayed the
    stale-sync alert by the size of the step."""
    row = con.execute(f"SELECT arg_max(finished_at, rowid) FROM {qualified(SYNC_RUNS)} "
                      "WHERE stream = ? AND status = 'success'", [stream]).fetchone()
    return row[0] if row else None


def _times(n: int) -> str:
    return "1 run" if n == 1 else f"{n} runs"


def _instant(at: dt.datetime) -> str:
    return f"{at.astimezone(dt.UTC):%Y-%m-%d %H:%M} UTC"


def open_count(con: duckdb.DuckDBPyConnection) -> int:
    row = con.execute(f"SELECT count(*) FROM {qualified(ALERTS)} WHERE closed_at IS NULL").fetchone()
    return int(row[0]) if row else 0
