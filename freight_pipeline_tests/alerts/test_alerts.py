"""Alerts from the one engine over HTTP against the simulator, to a JSON webhook and a real SMTP server on
loopback ports: a failed stream, a restore, a release that renames a field and a stale warehouse each arrive
once per destination, nothing more while they stay open, and once "resolved" when they close; a destination
that refuses, hangs or is gone never holds a run, and gets its message with the next run once it answers."""

from __future__ import annotations

import contextlib
import json
import logging
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import get_args

import dagster as dg
import duckdb
import pytest

from bench.before_the_fix import mapping_before_the_fix
from freight_pipeline.alerts import notify
from freight_pipeline.config import ALERT_URLS_ENV, AlertSettings
from freight_pipeline.definitions import defs
from freight_pipeline.defs.checks import ALERTS_SENSOR
from freight_pipeline.defs.names import FREIGHT_SYNC_JOB
from freight_pipeline.defs.resources import WarehouseResource
from freight_pipeline.defs.sync_assets import stream_keys
from freight_pipeline.job import run as job_run
from freight_pipeline.job.run import Alerting, Step
from freight_pipeline.lake.backend import storage_from_env
from freight_pipeline.normalize import flatten
from freight_pipeline.normalize.tables import FREIGHT_TABLES
from freight_pipeline.simulator.releases import NEXT
from freight_pipeline.simulator.server import LOCALHOST, running_simulator
from freight_pipeline.sync import drift
from freight_pipeline.sync.parts import DOCUMENT
from freight_pipeline.sync.streams import CODE_CONVERSIONS, stream_step
from freight_pipeline.warehouse.embedded import EmbeddedDuckDB
from freight_pipeline.warehouse.paths import working_db_path
from freight_pipeline.warehouse.store import SCHEMA_GENERATION, SCHEMA_STATE, Warehouse
from freight_pipeline_tests.alerts.harness import (
    FORBIDDEN,
    HOUR,
    SETTINGS,
    STILL_OPEN_RUNS,
    Destinations,
    Runs,
    assert_one_each,
    destinations_running,
    only_new,
    titles,
)
from freight_pipeline_tests.alerts.receivers import Mode, free_port, webhook
from freight_pipeline_tests.commands.conftest import cli_env, run_cli
from freight_pipeline_tests.sync.expected import assert_converged, differences


@pytest.fixture
def destinations() -> Iterator[Destinations]:
    with destinations_running() as running:
        yield running


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
        assert opened.startswith("Opened by this run:\n- ERROR the code_conversions stream failed\n"
                                 "  Found: StreamUnreachable: ")
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
        assert "  Was open since " in resolved
        assert f"(run {failed.run_id}), found by {STILL_OPEN_RUNS + 1} runs\n" in resolved
        assert run.startswith(f"Run: {cleared.run_id} at ")
        before = titles(destinations)
        assert runs.run().success and only_new(destinations, before) == [[], []]
    with duckdb.connect(str(working_db_path(tmp_path)), read_only=True) as con:
        episodes = con.execute("SELECT problem, opened_run, closed_run, times_seen FROM freight_meta.alerts").fetchall()
        assert episodes == [("step.sync_code_conversions:failed", failed.run_id, cleared.run_id, STILL_OPEN_RUNS + 1)]
        assert con.execute("SELECT count(*), count(sent_at), sum(attempts) FROM freight_meta.alert_messages"
                           ).fetchone() == (4, 4, 4)  # two messages, each at two destinations, each sent once


def test_credentials_refused_are_one_problem_of_the_runs_start_with_its_next_step_not_a_failure_per_stream(
    destinations: Destinations, tmp_path: Path
) -> None:
    """Was: "ERROR: the shipments stream failed and 1 more", each stream a problem of its own whose next step was
    the streams' failure domains, the run's start never opened (the docs' table names it for this)."""
    with running_simulator(shipments=10, seed=5) as sim:
        runs = Runs(sim, tmp_path, destinations.alerting(), password="not-the-password")
        failed = runs.run()
        assert set(failed.failed_streams) == {"shipments", CODE_CONVERSIONS.name}
        # and 1 more: no successful shipments sync yet (the freshness)
        (hook, _) = assert_one_each(destinations, [[], []],
                                    "[test-deploy] ERROR: the run could not reach the service and 1 more")
        assert hook.body.startswith("Opened by this run:\n- ERROR the run could not reach the service\n"
                                    "  Found: AuthenticationError: ")
        assert "  Next step: docs/operations.md#connecting-to-the-real-service\n" in hook.body
        assert "not-the-password" not in hook.body
        before = titles(destinations)
        runs.password = None
        assert runs.run().success
        (hook, _) = assert_one_each(destinations, before,
                                    "[test-deploy] resolved: no successful shipments sync for over 60 min and 1 more")
        assert "Resolved:\n" in hook.body and "\n- the run could not reach the service\n" in hook.body


def test_a_failed_publish_is_said_by_the_look_after_it_and_the_published_copy_holds_each_runs_look(
    destinations: Destinations, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run that publishes looks at its problems before the publish (so the published ``freight_meta.alerts`` is its
    own look, was the run before's) and at the publish after it: a failed publish is said, and resolved by the next
    that succeeds; each run's messages go once, after the publish."""
    def published_open() -> list[str]:
        with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as con:
            return [p for (p,) in con.execute("SELECT problem FROM freight_meta.alerts WHERE closed_at IS NULL "
                                              "ORDER BY 1").fetchall()]

    with running_simulator(shipments=10, seed=5) as sim:
        runs = Runs(sim, tmp_path, destinations.alerting(), publish=True)
        assert runs.run().success and titles(destinations) == [[], []] and published_open() == []
        sim.set_faults(forbidden_prefixes=FORBIDDEN)
        before = titles(destinations)
        failed = runs.run()
        assert failed.failed_streams == [CODE_CONVERSIONS.name]
        assert_one_each(destinations, before, "[test-deploy] ERROR: the code_conversions stream failed")
        assert published_open() == ["step.sync_code_conversions:failed"]  # this run's own look
        original = EmbeddedDuckDB.publish

        def refused(self: EmbeddedDuckDB, data_dir: Path, run_id: str) -> object:
            raise OSError("No space left on device")

        monkeypatch.setattr(EmbeddedDuckDB, "publish", refused)
        before = titles(destinations)
        unpublished = runs.run()
        assert [s.status for s in unpublished.steps if s.name == "publish"] == ["failed"]
        assert "after the publish: 2 problems open; a message on 1 opened" in unpublished.alerted.line
        assert_one_each(destinations, before, "[test-deploy] ERROR: the publish step failed")
        monkeypatch.setattr(EmbeddedDuckDB, "publish", original)
        sim.set_faults(forbidden_prefixes=None)
        before = titles(destinations)
        assert runs.run().success
        # the run's two looks, a message each (the publish's after the rest), sent together after the publish
        assert only_new(destinations, before) == [["[test-deploy] resolved: the code_conversions stream failed",
                                                   "[test-deploy] resolved: the publish step failed"]] * 2
        # the publish's own outcome is looked at after it: the copy it made shows the failure before it open
        assert published_open() == ["step.publish:failed"]
        assert runs.run().success and published_open() == []


def test_a_restore_is_said_once_and_resolved_by_the_next_run_that_meets_none(
    destinations: Destinations, tmp_path: Path
) -> None:
    with running_simulator(shipments=40, seed=5, control=True) as sim:
        runs = Runs(sim, tmp_path, destinations.alerting())
        runs.run()
        sim.advance_clock(60)
        sim.modify_shipments(8)
        sim.create_shipments(4)
        sim.advance_clock(60)
        runs.run()
        assert titles(destinations) == [[], []]
        sim.reset_to_snapshot()  # the test server's nightly reset: its data goes back
        sim.advance_clock(60)
        restored = runs.run()
        (hook, _) = assert_one_each(destinations, [[], []],
                                    "[test-deploy] WARNING: shipments.no_service_notices: restore")
        assert "  Found: the service's data went back: " in hook.body
        assert "  Next step: docs/real-services.md#a-service-whose-data-goes-back-in-time" in hook.body
        assert f"Run: {restored.run_id} at " in hook.body
        assert_converged(sim.store, working_db_path(tmp_path))  # the data is exact all the same
        before = titles(destinations)
        sim.advance_clock(60)
        runs.run()
        assert_one_each(destinations, before, "[test-deploy] resolved: shipments.no_service_notices: restore")
        before = titles(destinations)
        for _ in range(3):
            runs.run()
        assert only_new(destinations, before) == [[], []]


def test_a_release_that_renames_a_field_is_one_message_until_the_mapping_takes_the_new_name(
    destinations: Destinations, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shipments mapping before the one-line alias: the release's rename is a field vanished and one new
    (with what else the release changed), said in one message; the alias shipped, the rename is resolved."""
    fields, shape = mapping_before_the_fix()
    monkeypatch.setattr(flatten, "_SHIPMENT", fields)
    monkeypatch.setitem(drift.SOURCE_SHAPES, DOCUMENT, shape)
    with running_simulator(shipments=40, seed=7) as sim:
        runs = Runs(sim, tmp_path, destinations.alerting())
        runs.run()
        sim.set_release(NEXT)
        sim.modify_shipments(12)
        sim.advance_clock(1)
        renamed = runs.run()
        (hook, mail) = destinations.arrived()
        assert len(hook) == len(mail) == 1 and hook[0].body.strip() == mail[0].body.strip()
        assert hook[0].title.startswith("[test-deploy] WARNING: shipments.no_shape_changes: ")
        opened = hook[0].body.split("\n\n")[0]
        for found in ("house_reference vanished (0 of ", "house_bill_number new (", "aes vanished (0 of ",
                      "emissions new ("):
            assert f"  Found: {found}" in opened, found
        # each problem its line of what was found, the next step once for all that share it
        more = re.search(r" and (\d+) more$", hook[0].title)
        assert more and opened.count("\n  Found: ") == opened.count("\n- WARNING ") == int(more.group(1)) + 1
        assert opened.endswith("\n  Next step: docs/real-services.md#when-the-service-changes-shape") and \
            opened.count("  Next step: ") == 1
        before = titles(destinations)
        for _ in range(STILL_OPEN_RUNS):
            sim.modify_shipments(3)
            sim.advance_clock(1)
            runs.run()
        assert only_new(destinations, before) == [[], []]

        monkeypatch.undo()  # the fix shipped: the mapping reads the new name
        sim.modify_shipments(3)
        sim.advance_clock(1)
        runs.run()
        (title,), (same,) = only_new(destinations, before)
        assert title == same == "[test-deploy] resolved: shipments.no_shape_changes: house_bill_number and 3 more"
        resolved = destinations.hook.received[-1].body
        assert [line.removeprefix("- shipments.no_shape_changes: ") for line in resolved.splitlines()
                if line.startswith("- ")] == ["house_bill_number", "house_reference", "master_bill_number",
                                              "master_reference"]  # the two renames of the release
        assert f"(run {renamed.run_id}), found by {STILL_OPEN_RUNS + 1} runs" in resolved
        before = titles(destinations)
        sim.modify_shipments(3)
        sim.advance_clock(1)
        runs.run()  # what else the release changed stays open, and said no more
        assert only_new(destinations, before) == [[], []]
    with duckdb.connect(str(working_db_path(tmp_path)), read_only=True) as con:
        still_open = {p for (p,) in con.execute("SELECT problem FROM freight_meta.alerts WHERE closed_at IS NULL")
                      .fetchall()}
    assert "check.shipments.no_shape_changes:aes" in still_open
    assert not {f"check.shipments.no_shape_changes:{name}" for name in (
        "house_reference", "house_bill_number", "master_reference", "master_bill_number")} & still_open


DESTINATION_FAULTS = (*(mode for mode in get_args(Mode) if mode != "accept"), "unreachable")
"""Every way a destination fails: each failing mode the receivers play, and a port nothing listens on."""


@pytest.mark.parametrize("fault", DESTINATION_FAULTS)
def test_a_destination_that_fails_never_holds_the_run_and_gets_the_message_with_the_next_run(
    fault: str, tmp_path: Path
) -> None:
    port = free_port()
    title = "[test-deploy] ERROR: the code_conversions stream failed"
    with running_simulator(shipments=10, seed=5) as sim, contextlib.ExitStack() as held:
        failing = None if fault == "unreachable" else held.enter_context(webhook(port, fault))  # type: ignore[arg-type]
        # a timeout no run outlasts: the hanging send is still open when the run returns, on any machine's
        # speed (a send that times out: test_delivery.py)
        alerts = AlertSettings(alert_urls=(f"json://{LOCALHOST}:{port}/hook",), alert_deployment="test-deploy",
                               alert_timeout_seconds=300)
        runs = Runs(sim, tmp_path, Alerting(alerts, HOUR), wait=False)
        sim.set_faults(forbidden_prefixes=FORBIDDEN)
        report = runs.run()
        assert report.failed_streams == [CODE_CONVERSIONS.name]  # as without alerts, and the rest exact:
        assert set(differences(sim.store, working_db_path(tmp_path))) <= set(CODE_CONVERSIONS.tables)
        dispatch = report.alerted.dispatch if report.alerted else None
        assert dispatch is not None
        if fault == "hang":
            assert failing is not None and not dispatch.join(0)  # the run ended while its message waits
            failing.release.set()  # the destination drops the connection without an answer
        assert dispatch.join(60)
        (receipt,) = dispatch.receipts
        assert not receipt.sent and receipt.error is not None and str(port) not in receipt.error
        assert report.alerted is not None
        assert report.alerted.undelivered() == f"alerts: 0 sent, 1 not ({receipt.error}): sent again by the next run"
        if failing is not None:
            assert failing.posts == 1 and failing.received == []
            held.close()  # the destination goes away, and comes back answering
        runs.wait = True
        with webhook(port) as answering:
            runs.run()  # the problem still open: no new message, the one unsent goes out
            assert [m.title for m in answering.received] == [title]
            runs.run()
            assert [m.title for m in answering.received] == [title]
    with duckdb.connect(str(working_db_path(tmp_path)), read_only=True) as con:
        assert con.execute("SELECT count(*), count(sent_at), max(attempts) FROM freight_meta.alert_messages"
                           ).fetchone() == (1, 1, 2)


def test_a_dagster_run_says_which_of_its_alerts_were_not_delivered(tmp_path: Path) -> None:
    """The op waits for its run's sends and logs those that failed, as the command says them (was: only the look's
    line, "1 message queued", in the run's log and ``sync --dagster``'s output, whatever became of it)."""
    with running_simulator(shipments=10, seed=5) as sim, webhook(mode="refuse") as refusing, \
            pytest.MonkeyPatch.context() as env, dg.DagsterInstance.ephemeral() as instance:
        sim.set_faults(forbidden_prefixes=FORBIDDEN)
        for name, value in {"FREIGHT_BASE_URL": sim.base_url, "FREIGHT_USERNAME": sim.username,
                            "FREIGHT_PASSWORD": sim.password, "FREIGHT_DATA_DIR": str(tmp_path),
                            ALERT_URLS_ENV: refusing.url}.items():
            env.setenv(name, value)
        run = defs.resolve_job_def(FREIGHT_SYNC_JOB).execute_in_process(
            instance=instance, raise_on_error=False, asset_selection=stream_keys(CODE_CONVERSIONS.name))
        logged = [(entry.level, entry.user_message) for entry in instance.all_logs(run.run_id)]
    assert not run.success and refusing.posts == 1
    undelivered = [message for level, message in logged if message.startswith("alerts: 0 sent, 1 not (")]
    assert undelivered and undelivered[0].endswith("): sent again by the next run"), logged
    assert (logging.WARNING, undelivered[0]) in logged


def test_a_stale_warehouse_is_said_once_by_status_alert_not_by_the_sensor_after_and_resolved_by_a_sync(
    destinations: Destinations, tmp_path: Path
) -> None:
    """cron's ``status --alert`` finds the last successful sync 3 hours old (the limit: 1 hour); the Dagster
    sensor's looks after it say nothing more; the next sync that succeeds resolves it."""
    with running_simulator(shipments=10, seed=5) as sim:
        runs = Runs(sim, tmp_path, destinations.alerting())
        runs.run()
        with duckdb.connect(str(working_db_path(tmp_path))) as con:  # no sync since, for three hours
            con.execute("UPDATE freight_meta.sync_runs SET started_at = started_at - INTERVAL 3 HOUR, "
                        "finished_at = finished_at - INTERVAL 3 HOUR")
        urls = " ".join(runs.alerting.settings.alert_urls)
        looked = run_cli(["status", "--alert", "--data-dir", str(tmp_path)],
                         cli_env(FREIGHT_ALERT_URLS=urls, FREIGHT_ALERT_DEPLOYMENT="test-deploy"))
        assert looked.returncode == 0, looked.stderr
        assert looked.stderr == "alerts: 1 problem open; a message on 1 opened queued for 2 destinations\n"
        (hook, _) = assert_one_each(destinations, [[], []],
                                    "[test-deploy] ERROR: no successful shipments sync for over 60 min")
        assert "  Found: the last successful shipments sync finished 3 h ago, at " in hook.body
        assert "(FREIGHT_MAX_SYNC_AGE_MINUTES: 60); readers see data that old" in hook.body
        assert "  Next step: docs/operations.md#running-it-from-cron" in hook.body
        assert hook.body.endswith("Run: status --alert at " + hook.body.rsplit(" at ", 1)[1])

        sensor = defs.resolve_sensor_def(ALERTS_SENSOR)
        resource = WarehouseResource(data_dir=str(tmp_path), alert_urls=urls, alert_deployment="test-deploy")
        before = titles(destinations)
        for _ in range(STILL_OPEN_RUNS):
            with dg.build_sensor_context(resources={"warehouse": resource}) as context:
                skipped = sensor(context)
            assert isinstance(skipped, dg.SkipReason) and skipped.skip_message == "alerts: 1 problem open"
        assert only_new(destinations, before) == [[], []]

        fresh = runs.run()
        assert fresh.success
        (hook, _) = assert_one_each(destinations, before,
                                    "[test-deploy] resolved: no successful shipments sync for over 60 min")
        assert f"found by {STILL_OPEN_RUNS + 1} runs" in hook.body and f"Run: {fresh.run_id} at " in hook.body


def test_status_alert_on_a_directory_without_a_warehouse_makes_none_and_says_so(tmp_path: Path) -> None:
    """A mistyped data directory: no working database made there, no "no successful sync yet" alert sent."""
    mistyped = tmp_path / "dat"
    looked = run_cli(["status", "--alert", "--data-dir", str(mistyped)],
                     cli_env(FREIGHT_ALERT_URLS=f"json://{LOCALHOST}:9/hook"))
    assert looked.returncode == 2, looked.stderr
    assert looked.stderr == (f"status: {mistyped} holds no warehouse: nothing was synced there (--data-dir, "
                             "FREIGHT_DATA_DIR); nothing looked at, and nothing made there\n")
    assert not mistyped.exists()
    # the Dagster sensor's look: the same, every five minutes (was: the directory and a working database made)
    resource = WarehouseResource(data_dir=str(mistyped), alert_urls=f"json://{LOCALHOST}:9/hook")
    with dg.build_sensor_context(resources={"warehouse": resource}) as context:
        skipped = defs.resolve_sensor_def(ALERTS_SENSOR)(context)
    assert isinstance(skipped, dg.SkipReason) and skipped.skip_message.startswith(
        f"alerts: not looked at: {mistyped} holds no warehouse")
    assert not mistyped.exists()


@pytest.mark.parametrize("failure", ["unrecorded", "undelivered"])
def test_status_alert_exits_1_when_the_alerting_itself_failed(tmp_path: Path, failure: str) -> None:
    """cron's look that could not record the problems (a disk full; here a newer release's data, refused), so that no
    message went, or whose message a destination refused: the alerting's own failure, which no message tells, exits
    1 for cron's mail and a wrapper (was: 0, its line alone in a log)."""
    with Warehouse(tmp_path, FREIGHT_TABLES, backend=EmbeddedDuckDB()) as warehouse:  # no sync yet: a problem open
        if failure == "unrecorded":
            signature = json.loads(warehouse.reads.get_cursor(SCHEMA_STATE) or "{}")
            warehouse.writes.set_cursor(SCHEMA_STATE, json.dumps({**signature, "generation": SCHEMA_GENERATION + 1}),
                                        "newer")
    with webhook(mode="refuse") as refusing:
        looked = run_cli(["status", "--alert", "--data-dir", str(tmp_path)], cli_env(FREIGHT_ALERT_URLS=refusing.url))
    assert looked.returncode == 1, looked.stderr
    if failure == "unrecorded":
        assert looked.stderr.startswith("alerts: the problems could not be recorded (NewerWarehouse: "), looked.stderr
        assert refusing.posts == 0
    else:
        assert refusing.posts == 1 and looked.stderr.splitlines()[-1].startswith("alerts: 0 sent, 1 not ("), \
            looked.stderr


def test_status_alert_without_a_destination_says_how_to_set_one(tmp_path: Path) -> None:
    looked = run_cli(["status", "--alert", "--data-dir", str(tmp_path)], cli_env())
    assert looked.returncode == 2
    assert looked.stderr == ("status: no alert destination is set (FREIGHT_ALERT_URLS; docs/operations.md, "
                             "Alerts)\n")


def test_a_stream_switched_off_as_its_failure_advises_is_resolved_once(destinations: Destinations,
                                                                      tmp_path: Path) -> None:
    """The failure of a stream the account cannot reach advises switching it off: the first run with it off
    resolves the failure (once), and later runs with it off say nothing."""
    with running_simulator(shipments=10, seed=5) as sim:
        runs = Runs(sim, tmp_path, destinations.alerting())
        sim.set_faults(forbidden_prefixes=FORBIDDEN)
        failed = runs.run()
        assert failed.failed_streams == [CODE_CONVERSIONS.name]
        (hook, _) = assert_one_each(destinations, [[], []], "[test-deploy] ERROR: the code_conversions stream failed")
        assert f"{CODE_CONVERSIONS.switch.variable}=0" in hook.body  # the advice this test follows
        off = SETTINGS.replaced(code_conversions=False)
        before = titles(destinations)
        assert runs.run(off).success
        assert_one_each(destinations, before, "[test-deploy] resolved: the code_conversions stream failed")
        before = titles(destinations)
        assert runs.run(off).success and only_new(destinations, before) == [[], []]


def test_checks_that_raise_before_any_result_are_an_error_resolved_by_the_next_checks(
    destinations: Destinations, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fault the simulator cannot make: the checks' step raising (DuckDB out of memory) is one ERROR, not a run
    that failed in silence with "0 problems open"; the next run whose checks run resolves it."""
    with running_simulator(shipments=10, seed=5) as sim:
        runs = Runs(sim, tmp_path, destinations.alerting())

        def out_of_memory(*_: object) -> None:
            raise duckdb.OutOfMemoryException("Out of Memory Error: could not allocate block of size 256 KiB")

        with monkeypatch.context() as patch:
            patch.setattr(job_run, "evaluate_checks", out_of_memory)
            crashed = runs.run()
        assert not crashed.success
        (hook, _) = assert_one_each(destinations, [[], []], "[test-deploy] ERROR: the checks step failed")
        assert "Found: WarehouseOutOfMemory: the sync ran out of DuckDB memory" in hook.body
        before = titles(destinations)
        assert runs.run().success
        assert_one_each(destinations, before, "[test-deploy] resolved: the checks step failed")


def test_a_look_while_a_runs_sends_are_under_way_leaves_them_to_that_send(tmp_path: Path) -> None:
    """``status --alert`` from cron (or the sensor) while a run's send still waits on a slow destination: the
    message is that send's, not sent a second time by the look."""
    backend = storage_from_env()
    with Warehouse(tmp_path, FREIGHT_TABLES, backend=backend):
        pass  # the run made its tables
    with webhook(mode="hang") as hook:
        settings = AlertSettings(alert_urls=(hook.url,), alert_timeout_seconds=30)
        failed = [Step(stream_step(CODE_CONVERSIONS.name), "failed", 1.0, "StreamUnreachable: 403")]
        run = notify.after_run(failed, "run-1", tmp_path, backend, settings, HOUR)
        assert run is not None and run.dispatch is not None
        deadline = time.monotonic() + 30
        while hook.posts < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert hook.posts == 1  # the run's send, waiting on the destination
        cron = notify.freshness(tmp_path, backend, settings, HOUR, "status --alert")
        assert cron is not None and cron.dispatch is None, cron.line
        assert cron.line == "alerts: 2 problems open"
        hook.release.set()  # the hanging post ends without an answer: the run's receipt says so
        assert run.dispatch.join(30)
    assert hook.posts == 1  # once; sent again by the first look after that receipt (test_ledger.py)
