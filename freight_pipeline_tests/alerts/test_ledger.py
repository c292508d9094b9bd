"""The alerts' state and outbox on a DuckDB of their own (no service): each problem said once when it opens,
again once ``alert_repeat`` passed, once when it is resolved; below ``alert_level`` never; one message per
look per destination; receipts folded in; and the problems a run's steps and checks make."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from freight_pipeline.alerts import ledger
from freight_pipeline.alerts.problems import (
    FRESHNESS_DOCS,
    FRESHNESS_SCOPE,
    NOT_ALERTED_STEPS,
    STEP_DOCS,
    STREAM_DOCS,
    SYNC_STEP,
    Observation,
    Problem,
    of_check,
    of_freshness,
    of_steps,
)
from freight_pipeline.checks.warehouse import (
    CheckResult,
    describe_failure,
    notices_check,
    quarantine_check,
    shape_check,
    warehouse_checks,
)
from freight_pipeline.client.errors import AuthenticationError, FreightConnectionError, ServerError
from freight_pipeline.config import REPO_ROOT, AlertSettings
from freight_pipeline.job.run import CHECKS_STEP, MARTS_STEP, PUBLISH_STEP, REBUILD_STEP, Step, service_unreachable
from freight_pipeline.sync.isolation import CircuitOpen
from freight_pipeline.sync.result import NoticeKind
from freight_pipeline.sync.streams import CODE_CONVERSIONS, DOCUMENTS, SHIPMENTS, STREAMS, Stream, stream_step
from freight_pipeline.warehouse.ddl import ensure_tables
from freight_pipeline.warehouse.meta import ALERT_MESSAGES, ALERTS, SYNC_RUNS

T0 = dt.datetime(2026, 12, 1, 8, 0, tzinfo=dt.UTC)
SETTINGS = AlertSettings(alert_urls=("json://127.0.0.1:9/hook",))
DESTINATIONS = ("dest-a", "dest-b")
TIMEOUT = dt.timedelta(seconds=10)
FAILED = Problem("step.sync_documents:failed", "error", "the documents stream failed", "StreamUnreachable: 403",
                 "docs/real-services.md#one-streams-failure-never-withholds-the-others")
SHAPE = Problem("check.shipments.no_shape_changes:aes", "warning", "shipments.no_shape_changes: aes",
                "aes vanished (0 of 12 records read have it)", "docs/real-services.md#when-the-service-changes-shape")


@pytest.fixture
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    with duckdb.connect() as con:
        ensure_tables(con, [ALERTS, ALERT_MESSAGES, SYNC_RUNS], storage_hints=False)
        yield con


def look(con: duckdb.DuckDBPyConnection, at: dt.datetime, *found: Problem, scopes: tuple[str, ...] = (),
         settings: AlertSettings = SETTINGS, run: str = "run",
         destinations: tuple[str, ...] = DESTINATIONS) -> list[ledger.Change]:
    seen = Observation(scopes=set(scopes))
    for problem in found:
        seen.add(problem)
    return ledger.record(con, seen, ledger.Context(f"{run}-{at:%H%M}", at, "ops"), settings, destinations)


def kinds(changes: list[ledger.Change]) -> list[tuple[str, str]]:
    return [(change.kind, change.problem.key) for change in changes]


def outbox(con: duckdb.DuckDBPyConnection) -> list[tuple]:
    return con.execute("SELECT destination, kinds, level, title FROM freight_meta.alert_messages "
                       "ORDER BY queued_at, destination").fetchall()


def test_a_problem_is_said_when_it_opens_again_a_day_on_and_once_resolved(con: duckdb.DuckDBPyConnection) -> None:
    assert kinds(look(con, T0, FAILED)) == [("opened", FAILED.key)]
    for hours in range(1, 24):  # every hour of the day after: still open, said no more
        assert look(con, T0 + dt.timedelta(hours=hours), FAILED) == []
    assert kinds(look(con, T0 + dt.timedelta(hours=24), FAILED)) == [("repeated", FAILED.key)]
    assert look(con, T0 + dt.timedelta(hours=25), scopes=("step.sync_shipments",)) == []  # not looked at: open
    (resolved,) = look(con, T0 + dt.timedelta(hours=26), scopes=(FAILED.scope,))
    assert (resolved.kind, resolved.opened_at, resolved.times_seen) == ("resolved", T0, 25)
    assert look(con, T0 + dt.timedelta(hours=27), scopes=(FAILED.scope,)) == []
    row = con.execute("SELECT opened_run, last_seen_run, times_seen, closed_run, closed_at FROM freight_meta.alerts"
                      ).fetchall()
    assert row == [("run-0800", "run-0800", 25, "run-1000", T0 + dt.timedelta(hours=26))]
    assert [(d, k, level) for d, k, level, _ in outbox(con)] == [
        ("dest-a", "opened", "error"), ("dest-b", "opened", "error"),
        ("dest-a", "repeated", "error"), ("dest-b", "repeated", "error"),
        ("dest-a", "resolved", "resolved"), ("dest-b", "resolved", "resolved")]
    assert kinds(look(con, T0 + dt.timedelta(hours=28), FAILED)) == [("opened", FAILED.key)]  # a new episode
    assert con.execute("SELECT count(*) FROM freight_meta.alerts WHERE closed_at IS NULL").fetchone() == (1,)


def test_never_repeated_when_the_repeat_is_never(con: duckdb.DuckDBPyConnection) -> None:
    never = SETTINGS.model_copy(update={"alert_repeat": None})
    assert kinds(look(con, T0, FAILED, settings=never)) == [("opened", FAILED.key)]
    assert look(con, T0 + dt.timedelta(days=30), FAILED, settings=never) == []


def test_below_the_alert_level_a_problem_is_kept_but_never_said(con: duckdb.DuckDBPyConnection) -> None:
    errors_only = SETTINGS.model_copy(update={"alert_level": "error"})
    assert kinds(look(con, T0, FAILED, SHAPE, settings=errors_only)) == [("opened", FAILED.key)]
    assert con.execute("SELECT count(*) FROM freight_meta.alerts WHERE closed_at IS NULL").fetchone() == (2,)
    assert kinds(look(con, T0 + dt.timedelta(hours=1), FAILED, scopes=(SHAPE.scope,), settings=errors_only)) == []
    # the warning never said is not said resolved; with the level lowered, an open one is said as it opens
    assert kinds(look(con, T0 + dt.timedelta(hours=2), FAILED, SHAPE)) == [("opened", SHAPE.key)]


def test_one_message_per_look_on_every_change(con: duckdb.DuckDBPyConnection) -> None:
    look(con, T0, SHAPE)
    other = Problem(f"{SHAPE.scope}:emissions", "warning", "shipments.no_shape_changes: emissions",
                    "emissions new (12 of 12 records read have it)", SHAPE.docs)
    changes = look(con, T0 + dt.timedelta(hours=1), FAILED, other, scopes=(SHAPE.scope,))
    assert kinds(changes) == [("opened", FAILED.key), ("opened", other.key), ("resolved", SHAPE.key)]
    messages = con.execute("SELECT destination, problems, kinds, level, title, body FROM freight_meta.alert_messages "
                           "WHERE queued_at > ? ORDER BY destination", [T0]).fetchall()
    assert [m[0] for m in messages] == list(DESTINATIONS)
    _, problems, said, level, title, body = messages[0]
    assert problems.splitlines() == [FAILED.key, other.key, SHAPE.key] and said == "opened+resolved"
    assert level == "error" and title == "[ops] ERROR: the documents stream failed and 1 more; 1 resolved"
    assert body.split("\n\n") == [
        "Opened by this run:\n"
        f"- ERROR the documents stream failed\n  Found: StreamUnreachable: 403\n"
        f"  Next step: {FAILED.docs}\n"
        "- WARNING shipments.no_shape_changes: emissions\n  Found: emissions new (12 of 12 records read have it)\n"
        f"  Next step: {SHAPE.docs}",
        "Resolved:\n"
        "- shipments.no_shape_changes: aes\n  Found last: aes vanished (0 of 12 records read have it)\n"
        "  Was open since 2026-12-01 08:00 UTC (run run-0800), found by 1 run\n"
        f"  Next step: {SHAPE.docs}",
        "Run: run-0900 at 2026-12-01 09:00 UTC"]


def queued_at(con: duckdb.DuckDBPyConnection, at: dt.datetime) -> list[tuple[str, list[str], str]]:
    """(destination, problems, kinds) of the messages queued at ``at``."""
    return [(destination, problems.splitlines(), said) for destination, problems, said in con.execute(
        "SELECT destination, problems, kinds FROM freight_meta.alert_messages WHERE queued_at = ? "
        "ORDER BY destination", [at]).fetchall()]


@pytest.mark.parametrize("repeat", [dt.timedelta(days=1), None], ids=["repeat-daily", "repeat-never"])
def test_a_destination_added_or_changed_while_problems_are_open_is_told_of_them_once(
    con: duckdb.DuckDBPyConnection, repeat: dt.timedelta | None,
) -> None:
    """A webhook rotated (its URL, so its fingerprint, new) or a pager added while a stream stays failed: was told
    nothing until the repeat a day on (never with alert_repeat_minutes=never), the problem marked said."""
    settings = SETTINGS.model_copy(update={"alert_repeat": repeat})
    look(con, T0, FAILED, settings=settings, destinations=("old-hook",))
    at = T0 + dt.timedelta(minutes=15)
    assert look(con, at, FAILED, settings=settings, destinations=("new-hook", "pager")) == []  # nothing changed
    assert queued_at(con, at) == [("new-hook", [FAILED.key], "repeated"), ("pager", [FAILED.key], "repeated")]
    title, body = con.execute("SELECT title, body FROM freight_meta.alert_messages WHERE queued_at = ? LIMIT 1",
                              [at]).fetchone()
    assert title == "[ops] ERROR: the documents stream failed (still open)"
    assert "Open since 2026-12-01 08:00 UTC (run run-0800)" in body
    later = T0 + dt.timedelta(minutes=30)  # told once: nothing more while it stays open
    assert look(con, later, FAILED, settings=settings, destinations=("new-hook", "pager")) == [] and \
        queued_at(con, later) == []
    # a look that changes something tells a destination new to it of what it missed in the same message
    latest = T0 + dt.timedelta(minutes=45)
    assert kinds(look(con, latest, FAILED, SHAPE, settings=settings, destinations=("pager", "mail"))) == [
        ("opened", SHAPE.key)]
    assert queued_at(con, latest) == [("mail", [SHAPE.key, FAILED.key], "opened+repeated"),
                                      ("pager", [SHAPE.key], "opened")]


def test_receipts_are_folded_into_the_outbox(con: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    """A receipt ends the send's claim: the message it could not send goes with the very next look."""
    look(con, T0, FAILED)
    (first, second) = ledger.pending(con, DESTINATIONS, T0, TIMEOUT)
    receipts = tmp_path / "alert-receipts.jsonl"
    receipts.write_text(
        json.dumps({"message_id": first.message_id, "destination": first.destination, "sent": True,
                    "at": T0.isoformat()}) + "\n"
        + json.dumps({"message_id": second.message_id, "destination": second.destination, "sent": False,
                      "at": T0.isoformat(), "error": "timed out after 2 s"}) + "\n" + '{"cut short')
    folded = ledger.fold_receipts(con, receipts)
    assert folded is not None and not receipts.exists()
    assert ledger.pending(con, DESTINATIONS, T0, TIMEOUT) == [second]
    assert con.execute("SELECT destination, sent_at, attempts, last_error FROM freight_meta.alert_messages "
                       "ORDER BY destination").fetchall() == [
        ("dest-a", T0, 1, None), ("dest-b", None, 1, "timed out after 2 s")]
    assert ledger.pending(con, DESTINATIONS, T0 + dt.timedelta(days=ledger.PENDING_DAYS + 1), TIMEOUT) == []


def test_a_message_handed_to_a_send_is_left_to_it_until_its_receipt_or_the_end_of_its_claim(
    con: duckdb.DuckDBPyConnection,
) -> None:
    """A look while a run's sends are under way (``status --alert`` from cron, the sensor) does not send them a
    second time; a send that never wrote a receipt (its process killed) leaves them to the first look after its
    claim: each destination's messages one after the other, each within the timeout."""
    look(con, T0, FAILED)
    look(con, T0 + dt.timedelta(minutes=1), SHAPE)
    claimed = ledger.pending(con, DESTINATIONS, T0 + dt.timedelta(minutes=1), TIMEOUT)
    assert len(claimed) == 2 * len(DESTINATIONS)
    ends = T0 + dt.timedelta(minutes=1) + ledger.SEND_START + 2 * TIMEOUT  # two messages a destination
    assert ledger.pending(con, DESTINATIONS, ends - dt.timedelta(seconds=1), TIMEOUT) == []
    assert ledger.pending(con, DESTINATIONS, ends, TIMEOUT) == claimed
    look(con, ends, FAILED, SHAPE, scopes=("step.sync_documents",))  # nothing new: no message
    assert ledger.pending(con, DESTINATIONS, ends, TIMEOUT) == []  # claimed again, by the look just before


def test_a_runs_steps_make_problems_of_what_failed_and_look_only_where_they_ran() -> None:
    steps = [Step(stream_step(SHIPMENTS.name), "success", 1.0, "read 4"),
             Step(stream_step(CODE_CONVERSIONS.name), "failed", 1.0, "StreamUnreachable: 403"),
             Step(stream_step(DOCUMENTS.name), "skipped", 0.0, "not run"),
             Step(CHECKS_STEP, "success", 0.1, "79 passed"),
             Step(MARTS_STEP, "failed", 2.0, "DbtBuildFailed: 1 test failed"),
             Step(PUBLISH_STEP, "skipped", 0.0, "not run")]
    seen = of_steps(steps, SETTINGS)
    assert {key: (p.level, p.title) for key, p in seen.found.items()} == {
        "step.sync_code_conversions:failed": ("error", "the code_conversions stream failed"),
        "step.marts:failed": ("error", "the marts step failed")}
    assert seen.scopes == {"step.sync", "step.sync_shipments", "step.sync_code_conversions", "step.marts"}
    # a skipped step looked at nothing (its problems stay as they were), nor did a sync run at a rebuild's
    unopened = of_steps([Step("sync", "failed", 0.2, "ServiceUnreachable: connection refused")], SETTINGS)
    assert set(unopened.found) == {"step.sync:failed"} and unopened.scopes == {"step.sync"}
    rebuilt = of_steps([Step(REBUILD_STEP, "success", 3.0, "re-derived 40"), Step(CHECKS_STEP, "success", 0.1, "")],
                       SETTINGS)
    assert not rebuilt.found and rebuilt.scopes == {"step.rebuild"}  # a rebuild says nothing of a sync's start


@pytest.mark.parametrize("stream", STREAMS, ids=lambda stream: stream.name)
def test_a_stream_failed_for_the_service_unreachable_is_the_runs_start_and_leaves_the_streams_problems(
    stream: Stream,
) -> None:
    failed = of_steps([Step(stream_step(stream.name), "failed", 0.1, "AuthenticationError: HTTP 401",
                            unreachable=True)], SETTINGS)
    assert {key: (p.title, p.docs) for key, p in failed.found.items()} == {
        "step.sync:failed": ("the run could not reach the service", STEP_DOCS[SYNC_STEP])}
    assert failed.scopes == {"step.sync"}  # the stream's own failure, if open, stays so


@pytest.mark.parametrize(("error", "unreachable"), [
    (AuthenticationError("refused", status_code=401), True), (FreightConnectionError("refused"), True),
    (CircuitOpen("open"), False), (ServerError("500", status_code=500), False),
])
def test_the_service_unreachable_is_told_by_the_error_or_its_cause(error: Exception, unreachable: bool) -> None:
    assert service_unreachable(error) is unreachable
    wrapped = RuntimeError("the stream failed")
    wrapped.__cause__ = error
    assert service_unreachable(wrapped) is unreachable


def test_a_check_that_finds_several_things_makes_a_problem_of_each() -> None:
    shape = shape_check(SHIPMENTS.name)
    result = CheckResult(False, {"fields": [
        {"field": "aes", "state": "vanished", "records_with": 0, "records_read": 12},
        {"field": "emissions", "state": "new", "records_with": 12, "records_read": 12}]})
    assert {key: p.summary for key, p in of_check(shape, result, SETTINGS).found.items()} == {
        "check.shipments.no_shape_changes:aes": "aes vanished (0 of 12 records read have it)",
        "check.shipments.no_shape_changes:emissions": "emissions new (12 of 12 records read have it)"}
    notices = notices_check(SHIPMENTS.name)
    result = CheckResult(False, {"run_id": "r", "notices": ["the service's data went back: ..."],
                                 "kinds": [NoticeKind.RESTORE.value]})
    (restore,) = of_check(notices, result, SETTINGS).found.values()
    assert restore.key == "check.shipments.no_service_notices:restore" and restore.level == "warning"
    assert restore.docs == "docs/real-services.md#a-service-whose-data-goes-back-in-time"
    assert of_check(notices, CheckResult(True, {}), SETTINGS).scopes == {"check.shipments.no_service_notices"}


def test_quarantined_records_alert_from_the_threshold_on() -> None:
    check = quarantine_check(SHIPMENTS.name)
    for waiting, alerted in ((9, False), (10, True)):
        result = CheckResult(False, {"quarantined_records": waiting})
        assert bool(of_check(check, result, SETTINGS).found) is alerted


def test_freshness_is_a_problem_once_the_last_success_is_older_than_the_limit() -> None:
    hour = dt.timedelta(hours=1)
    assert not of_freshness("shipments", T0 - hour, T0, hour).found
    (stale,) = of_freshness("shipments", T0 - 3 * hour, T0, hour).found.values()
    assert stale.key == f"{FRESHNESS_SCOPE}:shipments" and stale.level == "error"
    assert stale.title == "no successful shipments sync for over 60 min"
    assert stale.summary.startswith("the last successful shipments sync finished 3 h ago, at 2026-12-01 05:00 UTC")
    (never,) = of_freshness("shipments", None, T0, hour).found.values()
    assert never.summary.startswith("no successful sync yet")


def heading_anchors(doc: Path) -> set[str]:
    """The anchors GitHub gives the headings of ``doc``: lower case, punctuation dropped, spaces as hyphens."""
    return {re.sub(r"[^a-z0-9 _-]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
            for line in doc.read_text().splitlines() if line.startswith("#")}


def test_every_next_step_an_alert_names_is_a_section_of_a_doc() -> None:
    """Enumerated from the declarations: every warehouse check's docs, every step's, the streams' and the
    freshness's (a message's "Next step" must lead somewhere)."""
    named = {check.docs for check in warehouse_checks()} | set(STEP_DOCS.values()) | {STREAM_DOCS, FRESHNESS_DOCS}
    named |= {docs for check in warehouse_checks() for docs in check.finding_docs.values()}
    for target in sorted(named):
        path, _, anchor = target.partition("#")
        doc = REPO_ROOT / path
        assert doc.is_file(), target
        assert not anchor or anchor in heading_anchors(doc), target


def test_every_kind_of_notice_is_a_problem_of_its_own_whose_next_step_is_its_section() -> None:
    """Each ``NoticeKind`` a run can record makes a problem keyed by it, whatever the notice's text says, and
    leads to the section about that behaviour (not the check's page of every kind)."""
    check = notices_check(SHIPMENTS.name)
    kinds = [kind.value for kind in NoticeKind]
    result = CheckResult(False, {"run_id": "r", "notices": [f"line {k}" for k in kinds], "kinds": kinds})
    found = of_check(check, result, SETTINGS).found
    assert sorted(found) == sorted(f"check.shipments.no_service_notices:{kind}" for kind in kinds)
    assert {key.rpartition(":")[2]: problem.docs for key, problem in found.items()} == {
        kind.value: kind.docs for kind in NoticeKind}
    assert len({kind.docs for kind in NoticeKind}) > 1 and check.docs not in {kind.docs for kind in NoticeKind}
    unknown = CheckResult(False, {"run_id": "r", "notices": ["an older run's line"], "kinds": ["notice"]})
    assert [problem.docs for problem in of_check(check, unknown, SETTINGS).found.values()] == [check.docs]


def test_the_steps_the_alerts_know_are_the_jobs() -> None:
    """``alerts`` sits below ``job`` (it cannot import its names): the steps it gives a next step are the job's."""
    assert set(STEP_DOCS) == {SYNC_STEP, CHECKS_STEP, MARTS_STEP, PUBLISH_STEP, REBUILD_STEP}
    assert NOT_ALERTED_STEPS == (CHECKS_STEP,)
    failed_at_start = Step(SYNC_STEP, "failed", 0.1, "x")
    assert "step.sync:failed" in of_steps([failed_at_start], SETTINGS).found


@pytest.mark.parametrize("name", [*STEP_DOCS, *(stream_step(stream.name) for stream in STREAMS)])
def test_every_step_that_fails_before_saying_anything_is_a_problem_resolved_by_its_next_success(name: str) -> None:
    """Enumerated from the job's steps and the streams: a step that failed with nothing else to say (the checks
    raised before any result: a DuckDB out-of-memory, say) is an ERROR of its own, never a silent run; the next
    run whose step succeeds (the checks with their results) looked at it and resolves it."""
    (failed,) = of_steps([Step(name, "failed", 0.1, "WarehouseOutOfMemory: the checks ran out")],
                         SETTINGS).found.values()
    assert (failed.key, failed.level, failed.summary) == (
        f"step.{name}:failed", "error", "WarehouseOutOfMemory: the checks ran out")
    results = [(check, CheckResult(True, {})) for check in warehouse_checks()] if name == CHECKS_STEP else []
    later = of_steps([Step(name, "success", 0.1, "done", checks=results)], SETTINGS)
    assert failed.scope in later.scopes and not later.found


@pytest.mark.parametrize("stream", [stream for stream in STREAMS if stream.switch is not None],
                         ids=lambda stream: stream.name)
def test_a_stream_switched_off_resolves_its_failure_but_one_not_run_leaves_it_open(stream: Stream) -> None:
    """A failed stream's message advises switching it off (an account without its permission): the run with it off
    resolves the failure. A stream that did not run for another reason (the stream it reads first failed)
    looked at nothing: its problems stay as they were."""
    name = stream_step(stream.name)
    off = of_steps([Step(name, "skipped", 0.0, f"the {stream.name} stream is off", off=True)], SETTINGS)
    assert off.scopes == {f"step.{name}"} and not off.found
    not_run = of_steps([Step(name, "skipped", 0.0, "not run: it reads the shipments stream first")], SETTINGS)
    assert not not_run.scopes and not not_run.found


def test_the_last_success_is_the_success_recorded_last_not_the_latest_finish_a_clock_dated(
    con: duckdb.DuckDBPyConnection,
) -> None:
    """A shipments run succeeded while the machine's clock was two hours ahead; the clock stepped back and the next
    run succeeded at T0, then the syncs stopped. At T0 + 90 min, with a limit of one hour, the stale-sync alert is
    due: the latest finish (T0 + 2 h 5 min, dated by the clock ahead) kept it back by the size of the step."""
    hour = dt.timedelta(hours=1)
    for run_id, finished in (("run-ahead", T0 + 2 * hour + dt.timedelta(minutes=5)), ("run-after-the-step", T0)):
        con.execute(f"INSERT INTO {SYNC_RUNS.qualified_name} (run_id, stream, started_at, finished_at, status) "
                    "VALUES (?, 'shipments', ?, ?, 'success')", [run_id, finished - dt.timedelta(minutes=5), finished])
    con.execute(f"INSERT INTO {SYNC_RUNS.qualified_name} (run_id, stream, started_at, finished_at, status) "
                "VALUES ('run-failed', 'shipments', ?, ?, 'failed')", [T0 + hour, T0 + hour])
    last = ledger.last_success(con, "shipments")
    assert last == T0
    (stale,) = of_freshness("shipments", last, T0 + 1.5 * hour, hour).found.values()
    assert stale.summary.startswith("the last successful shipments sync finished 90 min ago, at 2026-12-01 08:00 UTC")


def test_a_destination_added_is_not_told_of_a_problem_below_the_alert_level_now(con: duckdb.DuckDBPyConnection) -> None:
    """A warning said while warnings alerted; then alert_level=error and a destination added: the warning, kept and
    open, is below the level now, and never said to it."""
    look(con, T0, SHAPE, destinations=("old-hook",))
    errors_only = SETTINGS.model_copy(update={"alert_level": "error"})
    at = T0 + dt.timedelta(minutes=15)
    assert look(con, at, SHAPE, settings=errors_only, destinations=("old-hook", "pager")) == []
    assert queued_at(con, at) == []


def test_a_check_that_is_one_problem_says_what_it_found_then_what_was_expected() -> None:
    """Enumerated from the checks: each that is one problem (no findings of its own) says its failure, then its
    description as what was expected (was: appended as if found, "rejected_records=1. The latest run rejected no
    records")."""
    ones = [check for check in warehouse_checks() if check.findings is None]
    assert len(ones) > 20
    for check in ones:
        result = CheckResult(False, {"quarantined_records": SETTINGS.alert_quarantined_records, "found": 1})
        (problem,) = of_check(check, result, SETTINGS).found.values()
        said = describe_failure(check, result)
        assert problem.summary == f"{said} (expected: {check.description})", problem.summary
