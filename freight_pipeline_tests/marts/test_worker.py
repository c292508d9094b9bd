"""The dbt worker process: made ready, then one command or none; it never outlives the run that started it.

Real dbt on a small ``freight`` database (``freight_db``) in the data directory's working-database place.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import signal
import subprocess
import time
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import duckdb
import pytest

from freight_pipeline.config import DBT_WORKER_SERVER_ENV
from freight_pipeline.marts.build import PreparedTests
from freight_pipeline.marts.kept_builds import KEPT_BUILDS, kept_build
from freight_pipeline.marts.plan import next_incremental, project_fingerprint
from freight_pipeline.marts.project import DBT_PROJECT_DIR, RUN_RESULTS, build_target, dbt_build_args, vars_args
from freight_pipeline.marts.results import read_run_results
from freight_pipeline.marts.worker import (
    LOG,
    NEXT_BUILD,
    REPLY,
    DbtWorker,
    Start,
    WorkerReply,
    _Statements,
    parse_dir,
)
from freight_pipeline.warehouse.paths import working_db_path
from freight_pipeline_tests.dbt.freight_db import add_orphan_goods_line, build_working_database

ONE_MART = ["build", "--exclude-resource-type", "unit_test", "--select", "+dim_code_conversions"]
"""One mart and the staging view it reads."""
WHOLE_BUILD = ["build", "--exclude-resource-type", "unit_test"]


def kept_tests(data_dir: Path, key: str) -> list[dict[str, Any]] | None:
    """The batched tests kept for ``key`` where ``data_dir``'s workers keep them: the shared parse folder (which
    every data directory of the session, and of earlier sessions, shares: a test's own keys are its own)."""
    shared = parse_dir(DBT_PROJECT_DIR, build_target(data_dir), vars_args())
    held = kept_build(shared, key, working_db_path(data_dir).name)
    return None if held is None else held.tests


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("worker")
    build_working_database(root, shipments=10)
    return root


@pytest.fixture(scope="module")
def first_command(data_dir: Path) -> tuple[DbtWorker, WorkerReply]:
    """A worker of ``data_dir`` and its reply to :data:`ONE_MART` (so this session's shared parse exists),
    in a process of its own as the pipeline starts it by default (the suite's other workers are forked by
    its fork server: ``marts/test_worker_server.py``)."""
    with pytest.MonkeyPatch.context() as environment:
        environment.delenv(DBT_WORKER_SERVER_ENV, raising=False)
        with DbtWorker.for_run(data_dir, None) as worker:
            return worker, worker.run(ONE_MART, {"DBT_INDIRECT_SELECTION": "empty"})


def test_a_command_runs_with_its_environment_and_leaves_dbts_results(
    first_command: tuple[DbtWorker, WorkerReply], data_dir: Path
) -> None:
    worker, reply = first_command
    assert (reply.success, reply.exit_code, reply.error) == (True, 0, None)
    target = build_target(data_dir)
    assert worker.target == target and json.loads((target / REPLY).read_text())["success"] is True
    results = read_run_results(target)
    assert results is not None
    # indirect selection "empty" (from the request's environment): the models alone, not their tests
    assert sorted(r["unique_id"] for r in results["results"]) == [
        "model.freight_marts.dim_code_conversions", "model.freight_marts.stg_code_conversions"]
    assert not (target / "manifest.json").exists()  # --no-write-json: only the results are written
    with duckdb.connect(str(working_db_path(data_dir)), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM analytics.dim_code_conversions").fetchone() != (0,)
    assert isinstance(worker.process, subprocess.Popen) and worker.process.returncode == 0


def test_the_next_worker_renders_from_the_templates_the_first_compiled(
    first_command: tuple[DbtWorker, WorkerReply], data_dir: Path
) -> None:
    """Jinja's code of the templates the first command's worker compiled was kept (``jinja_cache``): the
    next worker, the same command, takes them from there (it compiles only the few macros the first build
    did not render: this one finds the tables made)."""
    assert first_command[1].success
    with DbtWorker.for_run(data_dir, None) as worker:
        reply = worker.run(ONE_MART, {"DBT_INDIRECT_SELECTION": "empty"})
    assert reply.success
    templates = json.loads((build_target(data_dir) / REPLY).read_text())["templates"]
    assert templates["from_cache"] > 20 and templates["compiled"] * 10 < templates["from_cache"], templates


def test_a_failed_node_is_exit_code_1_with_its_results(
    first_command: tuple[DbtWorker, WorkerReply], tmp_path: Path
) -> None:
    """A broken pipeline guarantee (a goods line of no shipment): the relationships test fails. The
    worker of this new data directory parsed into the folder the first command's worker parsed into
    (``parse_dir``: by the database's file name, not its path), a partial parse."""
    assert first_command[1].success
    database = build_working_database(tmp_path, shipments=5)
    add_orphan_goods_line(database)
    log = parse_dir(DBT_PROJECT_DIR, build_target(tmp_path), []) / "dbt.log"
    before = log.stat().st_size
    with DbtWorker.for_run(tmp_path, None) as worker:
        reply = worker.run(["build", "--exclude-resource-type", "unit_test", "--select", "stg_shipments",
                            "stg_shipment_goods"], {"DBT_INDIRECT_SELECTION": "cautious"})
    assert (reply.success, reply.exit_code, reply.error) == (False, 1, None)
    with log.open(errors="replace") as text:
        text.seek(before)
        parsed = text.read()
    assert "Running with dbt" in parsed and "Unable to do partial parsing" not in parsed, parsed[-2000:]
    results = read_run_results(build_target(tmp_path))
    assert results is not None
    failed = [r["unique_id"].split(".")[2] for r in results["results"] if r["status"] == "fail"]
    assert failed == ["relationships_stg_shipment_goods_shipment_id__shipment_id__ref_stg_shipments_"]


def test_a_command_that_fails_before_its_nodes_is_exit_code_2_with_dbts_error(data_dir: Path) -> None:
    """A var out of range (dbt_models/macros/eta.sql) stops the build while it compiles; so does a target
    the profile lacks."""
    with DbtWorker.for_run(data_dir, None) as worker:
        reply = worker.run(["build", "--select", "fct_eta_accuracy", "--vars", '{"eta_horizons_days": [-1]}'], {})
    assert (reply.success, reply.exit_code) == (False, 2)
    assert reply.error is not None and "-1 is not a whole number of days" in reply.error
    with DbtWorker.for_run(data_dir, "no_such_target") as worker:
        reply = worker.run(ONE_MART, {})
    assert (reply.success, reply.exit_code) == (False, 2)
    assert reply.error is not None and "no_such_target" in reply.error


def test_no_command_ends_the_worker_at_once_even_while_it_loads_dbt(data_dir: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DBT_WORKER_SERVER_ENV, raising=False)  # a process of its own, which imports dbt
    worker = DbtWorker.for_run(data_dir, None)
    assert isinstance(worker.process, subprocess.Popen)
    worker.close()  # straight away: it is still importing dbt
    assert worker.process.returncode == 0  # it ended by itself (killed after the wait, it would be -9)


def test_the_worker_ends_when_its_run_is_gone_mid_command(data_dir: Path) -> None:
    """The run was killed while its build ran: the worker's input ends, and so does the worker, at once,
    without a reply and before dbt finished the build."""
    target = build_target(data_dir)
    for leftover in (REPLY, RUN_RESULTS, "dbt.log"):
        (target / leftover).unlink(missing_ok=True)
    worker = DbtWorker.for_run(data_dir, None)
    assert worker.process.stdin is not None
    worker.process.stdin.write(json.dumps({"args": WHOLE_BUILD, "env": {}}) + "\n")
    worker.process.stdin.flush()
    log = target / "dbt.log"
    while " START " not in (log.read_text() if log.exists() else "") and worker.process.poll() is None:
        time.sleep(0.05)  # until the build runs its first node
    worker.process.stdin.close()  # what the kernel does when the run's process dies
    assert worker.process.wait(timeout=30) == 0
    assert not (target / REPLY).exists() and read_run_results(target) is None
    text = log.read_text()
    started = re.search(r" \d+ of (\d+) START ", text)
    assert started is not None, text[-3000:]
    nodes, finished = int(started.group(1)), text.count("Finished running node")
    assert finished < nodes, (finished, nodes)  # it stopped before the build's end (a node or two may finish)


def test_a_first_syncs_worker_is_held_until_its_first_stream_has_ended(data_dir: Path, tmp_path: Path) -> None:
    """No working database yet (a first sync of the embedded warehouse): no process until ``get_ready`` (the job
    calls it when the first stream has ended) or a command, none at ``get_ready`` when the build will not need dbt;
    a data directory with one, or the lake's target, starts at once (after a run that built, or with no word:
    ``test_the_last_runs_word_says_when_the_next_worker_starts``)."""
    with DbtWorker.for_run(tmp_path / "first", None) as held:
        assert held.process is None
        held.get_ready()
        launched = held.process
        assert launched is not None and launched.poll() is None
        held.get_ready()  # once
        assert held.process is launched
    assert launched.returncode == 0
    with DbtWorker.for_run(tmp_path / "again", None) as held:
        held.run(ONE_MART, {"DBT_INDIRECT_SELECTION": "empty"})  # asked before any stream ended: started for it
        assert held.process is not None and held.process.returncode is not None
    with DbtWorker.for_run(tmp_path / "closed", None) as held:
        held.close()
        held.get_ready()  # the run ended it (no build): not started after all
        assert held.process is None
    with DbtWorker.for_run(tmp_path / "replays", None) as held:
        held.get_ready(needed=False)  # the build will replay: not started, nor by a later stream's end
        held.get_ready()
        assert held.process is None
        held.run(ONE_MART, {"DBT_INDIRECT_SELECTION": "empty"})  # the replay failed after all: started for dbt
        assert held.process is not None and held.process.returncode is not None
    for directory, target in ((data_dir, None), (tmp_path / "lake", "no_such_target")):
        with DbtWorker.for_run(directory, target) as started:
            assert started.process is not None


def test_a_worker_that_cannot_start_when_the_run_is_ready_is_started_by_the_build(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A process that cannot be started when a batch changes a shipment (from the writer's thread: no file
    descriptor left, say) fails neither that batch nor its stream: said in the log, and the build starts it, whose
    failure is the marts step's."""
    attempts: list[int] = []

    def launch() -> subprocess.Popen[str]:
        attempts.append(1)
        raise OSError(24, "Too many open files")

    worker = DbtWorker(launch, tmp_path, tmp_path, "warehouse.duckdb", starts=Start.WHEN_NEEDED)
    with caplog.at_level("WARNING", logger="freight_pipeline.marts.worker"):
        worker.get_ready()
    assert (worker.process, worker.held, len(attempts)) == (None, False, 1)
    assert "could not be started yet ([Errno 24] Too many open files)" in caplog.text
    worker.get_ready()  # not tried again at every batch
    assert len(attempts) == 1
    with pytest.raises(OSError, match="Too many open files"):
        worker.run(ONE_MART, {})
    assert len(attempts) == 2


def test_a_worker_ended_by_the_run_is_started_again_for_a_command(data_dir: Path) -> None:
    """Ended (``close``: a replay needed no dbt), then asked for a command after all (the replay failed): a new
    process runs it."""
    with DbtWorker.for_run(data_dir, None) as worker:
        first = worker.process
        worker.close()
        assert first is not None and first.returncode == 0
        reply = worker.run(ONE_MART, {"DBT_INDIRECT_SELECTION": "empty"})
        assert reply.success and worker.process is not first and worker.process.returncode == 0


def test_a_worker_that_dies_is_reported_with_its_log(data_dir: Path) -> None:
    worker = DbtWorker.for_run(data_dir, None)
    worker.process.kill()
    worker.process.wait()
    (build_target(data_dir) / LOG).write_text("something dbt said\n")
    reply = worker.run(ONE_MART, {})
    assert not reply.success and reply.exit_code == -9
    assert reply.error is not None and "ended without a reply" in reply.error and "something dbt said" in reply.error
    worker.close()


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=lambda stop: signal.Signals(stop).name)
def test_a_worker_a_stop_signal_ended_stops_the_run_as_stopped(data_dir: Path, stop: int) -> None:
    """A service manager's stop (SIGTERM to each process of the service), or Ctrl-C to the terminal's group, may end
    the worker before the run that waits for it notices its own: its missing reply was a failed build
    (``DbtBuildFailed ... exit code -15``), not a stop. A worker SIGKILLed is a failure still (above). (SIGHUP goes to
    a terminal's session, which a forked worker is not of: its fork server's may ignore it.)"""
    worker = DbtWorker.for_run(data_dir, None)
    os.kill(worker.process.pid, stop)  # a process of its own, or one the fork server forked
    worker.process.wait()
    with pytest.raises(KeyboardInterrupt):
        worker.run(ONE_MART, {})
    worker.close()


def test_batched_tests_are_dbts_own_tests_run_after_the_models_and_judged_as_dbt_judges_them(tmp_path: Path) -> None:
    """The first build of a batch key runs its tests through dbt and keeps them; the next builds of the key,
    those of another data directory too, run the models through dbt and the same tests batched: the same
    tests, the same verdicts (a pass, then a failure once a goods line of no shipment is added), in dbt's
    results."""
    first, other = tmp_path / "first", tmp_path / "other"
    build_working_database(first, shipments=5)
    database = build_working_database(other, shipments=5)
    build = ["build", "--exclude-resource-type", "unit_test", "--select", "stg_shipments", "stg_shipment_goods"]
    env = {"DBT_INDIRECT_SELECTION": "cautious"}
    key = f"key-{uuid.uuid4().hex}"

    def built(data_dir: Path) -> tuple[bool, dict[str, str]]:
        with DbtWorker.for_run(data_dir, None) as worker:
            reply = worker.run(build, env, batch_tests=key)
        results = read_run_results(build_target(data_dir))
        assert results is not None
        return reply.success, {r["unique_id"]: (r["status"], r["thread_id"] == "batched-tests")
                               for r in results["results"]}

    success, by_dbt = built(first)
    assert success and kept_tests(first, key) and not (build_target(first) / KEPT_BUILDS).exists()
    tests = {uid for uid in by_dbt if uid.startswith("test.")}
    assert tests and not any(batched for _, batched in by_dbt.values())
    success, again = built(other)
    assert success and again.keys() == by_dbt.keys()
    assert {uid for uid, (status, batched) in again.items() if batched} == tests  # the same tests, batched
    assert all(again[uid][0] == by_dbt[uid][0] == "pass" for uid in tests)

    add_orphan_goods_line(database)
    with DbtWorker.for_run(other, None) as worker:
        reply = worker.run(build, env, batch_tests=key)
    assert (reply.success, reply.exit_code, reply.error) == (False, 1, None)
    results = read_run_results(build_target(other))
    assert results is not None
    failed = [(r["unique_id"].split(".")[2], r["message"]) for r in results["results"] if r["status"] == "fail"]
    assert failed == [("relationships_stg_shipment_goods_shipment_id__shipment_id__ref_stg_shipments_",
                       "Got 1 result, configured to fail if != 0")]


def test_tests_prepared_by_a_full_build_are_those_dbt_runs_in_the_incremental_build(tmp_path: Path) -> None:
    """The tests a full build compiles ahead for the next incremental build (``PreparedTests``) are the same
    tests, the same statements, as those the incremental build keeps when dbt runs them itself."""
    database = build_working_database(tmp_path, shipments=5)
    args = dbt_build_args()
    fingerprint = project_fingerprint(DBT_PROJECT_DIR, args)
    left_out = ["--exclude", "tag:warehouse_checked"]
    prepared = PreparedTests.of(fingerprint, args, left_out)
    with DbtWorker.for_run(tmp_path, None) as worker:
        assert worker.run([*args, "--full-refresh", *left_out], {}, prepare=prepared).success
    assert kept_tests(tmp_path, prepared.key)  # kept by this build, or an earlier one of the same tests
    with duckdb.connect(str(database)) as con:  # the sync's log of changed shipments (none here)
        con.execute("CREATE SCHEMA freight_meta; CREATE TABLE freight_meta.changed_shipments (shipment_id BIGINT)")
    plan = next_incremental()
    by_dbt_key = f"by-dbt-{uuid.uuid4().hex}"
    with DbtWorker.for_run(tmp_path, None) as worker:  # the same build under a key not kept: dbt runs its tests
        assert worker.run([*args, *plan.args, *left_out], plan.env, batch_tests=by_dbt_key).success
    by_dbt = {test["unique_id"]: test for test in kept_tests(tmp_path, by_dbt_key) or []}
    ahead = {test["unique_id"]: test for test in kept_tests(tmp_path, prepared.key) or []}
    assert len(by_dbt) > 50 and ahead == by_dbt
    assert all("freight_meta" in test["sql"] for uid, test in by_dbt.items() if "stg_shipment_goods" in uid)


def test_a_run_that_builds_nothing_starts_no_worker_whatever_the_last_word(data_dir: Path, tmp_path: Path) -> None:
    """A run without the build (a Dagster selection without the marts: ``for_run(builds=False)``) starts its worker
    only for a command, under every word the last run may have left and on every kind of data directory: the same
    words start one at once, or hold it, for a run that builds."""
    target = build_target(data_dir)
    words = {"none": None, "unreadable": "{not json", "built, no replay": {"replayable": False, "built": True},
             "built, a full check due": {"replayable": True, "until": "2000-01-01T00:00:00+00:00", "built": True},
             "built nothing": {"replayable": False, "built": False},
             "replays": {"replayable": True, "until": None, "built": True}}
    building = {}
    for name, word in words.items():
        (target / NEXT_BUILD).unlink(missing_ok=True)
        if word is not None:
            (target / NEXT_BUILD).write_text(word if isinstance(word, str) else json.dumps(word))
        with DbtWorker.for_run(data_dir, None, builds=False) as idle:
            idle.get_ready()  # what the job says after a stream: no build is coming, so nothing starts
            assert (idle.starts, idle.process) == (Start.WHEN_ASKED, None), name
        with DbtWorker.for_run(data_dir, None) as usual:
            building[name] = usual.starts
    assert building == {"none": Start.AT_ONCE, "unreadable": Start.AT_ONCE, "built, no replay": Start.AT_ONCE,
                        "built, a full check due": Start.AT_ONCE, "built nothing": Start.WHEN_NEEDED,
                        "replays": Start.WHEN_ASKED}
    for directory, dbt_target in ((tmp_path / "first", None), (tmp_path / "lake", "no_such_target")):
        with DbtWorker.for_run(directory, dbt_target, builds=False) as idle:
            idle.get_ready()
            assert (idle.starts, idle.process) == (Start.WHEN_ASKED, None), directory
    with DbtWorker.for_run(data_dir, None, builds=False) as asked:
        reply = asked.run(ONE_MART, {"DBT_INDIRECT_SELECTION": "empty"})  # a command after all: started for it
        assert reply.success and asked.process is not None


def test_the_last_runs_word_says_when_the_next_worker_starts(data_dir: Path) -> None:
    """The last build's word (``DbtWorker.expect``): the next build will likely replay its kept statements
    (``marts.kept_builds``), so no process starts, unless the run asks for a command after all; not when
    the word says otherwise, nor once a full check falls due: then at once. A run that built nothing
    (``expect_no_change``) leaves the replay's word as it was, and the next worker held until the run says its
    build needs dbt (``get_ready``: a "no" keeps it held, a "yes" starts it)."""
    target = build_target(data_dir)
    with DbtWorker.for_run(data_dir, None) as worker:
        worker.expect(True, dt.datetime.now(dt.UTC) + dt.timedelta(hours=1))
    assert json.loads((target / NEXT_BUILD).read_text())["replayable"] is True
    with DbtWorker.for_run(data_dir, None) as deferred:
        assert deferred.process is None
    with DbtWorker.for_run(data_dir, None) as deferred:
        assert deferred.process is None
        reply = deferred.run(ONE_MART, {"DBT_INDIRECT_SELECTION": "empty"})  # started now
        assert reply.success and deferred.process is not None
    for replayable, until in ((False, None), (True, dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1))):
        deferred.expect(replayable, until)
        with DbtWorker.for_run(data_dir, None) as worker:
            assert worker.process is not None
    (target / NEXT_BUILD).write_text("{not json")
    with DbtWorker.for_run(data_dir, None) as worker:
        assert worker.starts is Start.AT_ONCE and worker.process is not None
        worker.expect_no_change()  # over a word it cannot read: the replay's part is missing (no replay expected)
    with DbtWorker.for_run(data_dir, None) as held:
        assert (held.starts, held.process, held.held) == (Start.WHEN_NEEDED, None, True)
        held.get_ready(needed=False)  # nothing changed yet
        assert held.process is None and held.held
        held.get_ready()  # a batch changed a shipment
        launched = held.process
        assert launched is not None and launched.poll() is None and not held.held
        held.get_ready()
        assert held.process is launched
        held.expect(True, None)
    with DbtWorker.for_run(data_dir, None) as worker:
        worker.expect_no_change()
    assert json.loads((target / NEXT_BUILD).read_text()) == {"replayable": True, "until": None, "built": False}
    with DbtWorker.for_run(data_dir, None) as deferred:  # the replay's word stands
        assert deferred.starts is Start.WHEN_ASKED and deferred.process is None
        deferred.get_ready()
        assert deferred.process is None
    deferred.expect(False, None)


def _result(unique_id: str, status: str = "success") -> SimpleNamespace:
    """dbt's result of a node, as much of it as the statements' keeping reads."""
    node = SimpleNamespace(unique_id=unique_id, resource_type=unique_id.split(".")[0], relation_name=f'"{unique_id}"')
    return SimpleNamespace(node=node, status=status)


def test_a_builds_statements_are_kept_only_when_every_model_succeeded_and_none_depends_on_the_invocation() -> None:
    """The schemas' creation, then the models in the order they began (a model begins after those it reads
    ended); nothing kept when a model did not succeed, a statement had bindings or holds the invocation's id
    or start time, or one that is not a read was sent outside the models (a project's hook)."""
    statements = _Statements()
    for connection, sql in [("list_warehouse", "select 1"), ("create_warehouse_analytics", "create schema a"),
                            ("model.p.b", "BEGIN"), ("model.p.b", "insert into b select 1"), ("model.p.a", "create a"),
                            ("test.p.t.1", "select 0"), ("model.p.b", "COMMIT"),
                            ("master", "/* {\"app\": \"dbt\"} */ select * from information_schema.tables")]:
        statements.sent(connection, sql)
    results = [_result("model.p.a"), _result("test.p.t.1", "pass"), _result("model.p.b")]
    assert statements.kept(results, ["run-id"]) == (["create schema a"], [
        {"unique_id": "model.p.b", "relation_name": '"model.p.b"', "statements": ["BEGIN", "insert into b select 1",
                                                                                  "COMMIT"]},
        {"unique_id": "model.p.a", "relation_name": '"model.p.a"', "statements": ["create a"]}])
    assert statements.kept([_result("model.p.a", "error"), _result("model.p.b")], []) is None
    assert statements.kept(results, ["into b"]) is None
    statements.sent("master", "/* a comment */ insert into audit values (1)")  # an on-run-end hook's
    assert statements.kept(results, []) is None
    statements.elsewhere.clear()
    statements.sent("model.p.a", None)  # sent with bindings
    assert statements.kept(results, []) is None
