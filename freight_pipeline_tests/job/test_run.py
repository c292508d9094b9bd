"""The sync job without Dagster, over HTTP against the simulator, with real DuckDB and real dbt: every
step in order, an incremental build of what changed, a stream's failure that withholds nothing else,
and a broken guarantee that stops the publish."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from freight_pipeline.cli import main
from freight_pipeline.config import DBT_FULL_REFRESH_ENV, DBT_REPLAY_ENV, FULL_CHECK_ENV, ServiceSettings, environ
from freight_pipeline.job.run import (
    CHECKS_STEP,
    MARTS_STEP,
    PUBLISH_STEP,
    REBUILD_STEP,
    JobReport,
    Step,
    run_job,
    run_rebuild,
)
from freight_pipeline.lake.backend import storage_from_env
from freight_pipeline.marts.kept_builds import KEPT_BUILDS
from freight_pipeline.marts.plan import last_full_check
from freight_pipeline.marts.project import DBT_PROJECT_DIR, build_target, vars_args
from freight_pipeline.marts.results import read_run_results
from freight_pipeline.marts.worker import NEXT_BUILD, DbtWorker, Start, parse_dir
from freight_pipeline.process_end import signals_noted
from freight_pipeline.simulator.config import PERMISSIONS, SimulatorConfig, UserConfig
from freight_pipeline.simulator.server import RunningSimulator, running_simulator
from freight_pipeline.sync.runner import STOPPED
from freight_pipeline.sync.settings import SyncSettings
from freight_pipeline.sync.streams import STREAM_NAMES, stream_step
from freight_pipeline.warehouse import meta
from freight_pipeline.warehouse.meta import BUILD_STREAM
from freight_pipeline.warehouse.paths import read_last_job_run, working_db_path
from freight_pipeline.warehouse.publish import PublishResult, parquet_root, published_db_path
from freight_pipeline.warehouse.store import open_warehouse
from freight_pipeline.warehouse.writer_lock import writer_lock
from freight_pipeline_tests.dbt.freight_db import add_orphan_goods_line
from freight_pipeline_tests.published import published_tables
from freight_pipeline_tests.warehouse.older import read_once

SHIPMENTS = 40
ORPHAN_TEST = "relationships_stg_shipment_goods_shipment_id__shipment_id__ref_stg_shipments_"
SETTINGS = SyncSettings(reconcile_interval=None)

QUIET_RUN_WRITES = (meta.SYNC_RUNS, meta.SYNC_STATE, meta.TABLE_FRESHNESS, meta.COLUMN_NULLS, meta.SOURCE_FIELDS,
                    meta.RAW_PARTS)
"""What a run that reads nothing new writes: its own records, and the parts the freshness sample read again."""


@pytest.fixture(scope="module")
def sim() -> Iterator[RunningSimulator]:
    with running_simulator(shipments=SHIPMENTS, seed=3) as running:
        yield running


def run(sim: RunningSimulator, data_dir: Path, username: str | None = None, password: str | None = None,
        worker_seen: dict[str, bool] | None = None, started_as: list[Start] | None = None) -> JobReport:
    """One run of the job, as ``freight-pipeline sync`` makes it: the worker made first (started when its
    ``Start`` says), never alive once the build is done. ``worker_seen``: for each step, whether the dbt worker's
    process had been started when the step ended; ``started_as``: gets the worker's ``Start``."""
    service = ServiceSettings(sim.base_url, username or sim.username, password or sim.password)
    backend = storage_from_env()
    heard: list[Step] = []
    worker_at_publish: list[bool] = []

    def hear(step: Step) -> None:
        heard.append(step)
        if worker_seen is not None:
            worker_seen[step.name] = worker.process is not None
        if step.name == MARTS_STEP:  # what follows is the publish: the worker's memory is back by then
            worker_at_publish.append(worker.process is not None and worker.process.poll() is None)

    with DbtWorker.for_run(data_dir, backend.dbt_target) as worker:
        if started_as is not None:
            started_as.append(worker.starts)
        report = run_job(service, data_dir, SETTINGS, backend, worker, on_step=hear)
    assert heard == report.steps  # each step was told as it ended
    assert worker.process is None or worker.process.returncode is not None  # it never outlives the run
    assert not any(worker_at_publish), "the dbt worker outlived the build: a replay or no build needs none"
    return report


@pytest.fixture(scope="module")
def first_run(sim: RunningSimulator, tmp_path_factory: pytest.TempPathFactory) -> tuple[JobReport, Path]:
    """The first run of ``sim`` from scratch and its data directory, left as that run left it: the tests
    that go on from there copy it (:func:`copied`). Its dbt worker is held until the first stream has ended
    (``DbtWorker.get_ready``), then started when its build needs dbt (no other test's build kept the statements
    of the same key yet), else never."""
    data_dir = tmp_path_factory.mktemp("first_run")
    worker_seen: dict[str, bool] = {}
    report = run(sim, data_dir, worker_seen=worker_seen)
    first, *after = worker_seen
    assert (first, worker_seen[first]) == (stream_step(STREAM_NAMES[0]), False)
    assert {worker_seen[step] for step in after} == {built_by(data_dir) == "dbt"}, worker_seen
    return report, data_dir


def copied(data_dir: Path, to: Path) -> Path:
    """A copy of ``data_dir`` at ``to`` (its ``parquet`` link is relative: it points into the copy)."""
    shutil.copytree(data_dir, to, symlinks=True)
    return to


def steps(report: JobReport) -> dict[str, str]:
    return {step.name: step.status for step in report.steps}


def published(data_dir: Path, sql: str) -> list[tuple[object, ...]]:
    with duckdb.connect(str(published_db_path(data_dir)), read_only=True) as con:
        return con.execute(sql).fetchall()


def test_a_run_syncs_checks_builds_and_publishes_then_builds_only_what_changed(
    sim: RunningSimulator, first_run: tuple[JobReport, Path], tmp_path: Path
) -> None:
    first, tmp_path = first_run[0], copied(first_run[1], tmp_path / "data")
    assert first.success, first.steps
    assert list(steps(first)) == [*map(stream_step, STREAM_NAMES), CHECKS_STEP, MARTS_STEP, PUBLISH_STEP]
    assert set(steps(first).values()) == {"success"}
    assert first.marts is not None and first.marts.plan.full_refresh
    assert published(tmp_path, "SELECT count(*) FROM analytics.fct_shipments") == [(SHIPMENTS,)]
    logged = published(tmp_path, f"SELECT stream, status FROM freight_meta.sync_runs WHERE run_id = '{first.run_id}'")
    assert sorted(logged) == sorted([(s, "success") for s in STREAM_NAMES] + [(BUILD_STREAM, "success")])

    version = parquet_root(tmp_path).resolve()
    unchanged = run(sim, tmp_path)
    assert unchanged.success and unchanged.marts is not None
    assert not unchanged.marts.plan.run and unchanged.marts.line().startswith("not run: nothing changed")
    assert parquet_root(tmp_path).resolve() != version  # published all the same: the run log moved on
    # and only what a run that reads nothing new writes was exported again: its own records and the parts the
    # freshness sample read; every other table (the raw documents the walk's overlap read again too) kept its file
    assert isinstance(unchanged.publication, PublishResult)
    assert set(unchanged.publication.exported) <= {spec.qualified_name for spec in QUIET_RUN_WRITES}, \
        unchanged.publication.exported

    changed = sim.modify_shipments(3)
    sim.advance_clock(60)
    again = run(sim, tmp_path)
    assert again.success and again.marts is not None
    assert (again.marts.plan.full_refresh, again.marts.plan.views_current) == (False, True)
    assert again.marts.covered == len(changed)
    assert again.marts.line().startswith("3 shipments changed; tests on the changed rows: ")
    with duckdb.connect(str(working_db_path(tmp_path)), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM freight_meta.changed_shipments").fetchone() == (0,)
        held = con.execute("SELECT shipment_id, last_modified_at FROM freight.shipments ORDER BY 1").fetchall()
    assert published(tmp_path, "SELECT shipment_id, last_modified_at FROM analytics.fct_shipments ORDER BY 1") == held

    sim.modify_shipments(4)
    sim.advance_clock(60)
    replayed = run(sim, tmp_path)  # the statements dbt sent for this build's key, on this catalog: no dbt
    assert replayed.success and replayed.marts is not None and replayed.marts.covered == 4
    assert built_by(tmp_path) == "replayed"
    # the incremental builds' marts are what a full rebuild of the same data makes, row for row
    rebuilt = copied(tmp_path, tmp_path.parent / "rebuilt")
    with environ({DBT_FULL_REFRESH_ENV: "1", DBT_REPLAY_ENV: "0"}):
        full = run(sim, rebuilt)
    assert full.success and full.marts is not None and full.marts.plan.full_refresh
    assert built_by(rebuilt) == "dbt"
    incremental, whole = published_tables(tmp_path), published_tables(rebuilt)
    marts = [name for name in incremental if name.startswith("analytics.")]
    assert len(marts) > 5
    assert [name for name in marts if incremental[name] != whole[name]] == []
    # the descriptions, as DuckDB 1.5 reads them: the same text after every kind of run and build
    assert described(rebuilt) == described(tmp_path) == described(first_run[1])


def test_after_a_run_that_changed_nothing_dbt_loads_only_once_a_run_changes_something(
    sim: RunningSimulator, first_run: tuple[JobReport, Path], tmp_path: Path
) -> None:
    """After a run that built, the next run's worker starts at once; after one that changed nothing, it waits for
    the run to change something: never started when nothing changes (nor by a run without the build), started by
    the first batch that changes a shipment, at the end of the code conversions' stream when they alone changed,
    before the first stream when a build is due already (changes a run without the build left). Each such run
    builds as ever (replays off: every build needs dbt)."""
    data_dir = copied(first_run[1], tmp_path / "data")
    shipments, conversions, documents = map(stream_step, STREAM_NAMES)
    backend = storage_from_env()

    def quiet() -> None:  # the word a run that changed nothing leaves (such a run is below, once)
        word = build_target(data_dir) / NEXT_BUILD
        word.write_text(json.dumps({**json.loads(word.read_text()), "built": False}))

    def after_quiet(changed: str) -> dict[str, bool]:
        seen: dict[str, bool] = {}
        starts: list[Start] = []
        report = run(sim, data_dir, worker_seen=seen, started_as=starts)
        assert starts == [Start.WHEN_NEEDED]
        assert report.success and report.marts is not None, report.steps
        assert report.marts.line().startswith(changed), report.marts.line()
        return seen

    with environ({DBT_REPLAY_ENV: "0"}):
        caught_up = run(sim, data_dir)  # what the module's other tests changed in the service since the first run
        assert caught_up.success and caught_up.marts is not None
        if caught_up.marts.plan.run:  # a run after one that built: started at once; nothing changes, nothing built
            starts: list[Start] = []
            nothing = run(sim, data_dir, started_as=starts)
            assert nothing.success and nothing.marts is not None and not nothing.marts.plan.run, nothing.steps
            assert starts == [Start.AT_ONCE]
        seen: dict[str, bool] = {}
        starts = []
        nothing = run(sim, data_dir, worker_seen=seen, started_as=starts)
        assert starts == [Start.WHEN_NEEDED] and nothing.success and nothing.marts is not None
        assert not nothing.marts.plan.run and not any(seen.values()), seen

        with duckdb.connect(str(working_db_path(data_dir))) as con:  # the service's conversions now differ
            con.execute("DELETE FROM freight.code_conversions WHERE rowid = (SELECT min(rowid) "
                        "FROM freight.code_conversions)")
        seen = after_quiet("0 shipments and the code conversions changed")
        # each step is heard as it ends, before the run asks whether its build needs dbt: started then
        assert (seen[shipments], seen[conversions], seen[documents]) == (False, False, True), seen
        assert built_by(data_dir) == "dbt"

        quiet()
        changed = sim.modify_shipments(3)
        sim.advance_clock(60)
        seen = after_quiet(f"{len(changed)} shipments changed")
        assert seen[shipments] and seen[MARTS_STEP], seen

        quiet()
        changed = sim.modify_shipments(2)
        sim.advance_clock(60)
        with DbtWorker.for_run(data_dir, backend.dbt_target) as worker:  # the streams alone (a Dagster selection)
            streams_only = run_job(ServiceSettings(sim.base_url, sim.username, sim.password), data_dir, SETTINGS,
                                   backend, worker, marts=False, publish=False)
        assert streams_only.success and worker.starts is Start.WHEN_NEEDED and worker.process is None
        seen = after_quiet(f"{len(changed)} shipments changed")
        assert all(seen.values()), seen
    assert published(data_dir, "SELECT count(*) FROM analytics.fct_shipments") == [(SHIPMENTS,)]


DESCRIBED_SCHEMAS = ("freight", "freight_history", "freight_meta", "analytics")
"""The published schemas whose every table and column carries its description (the specs', the marts' YAML)."""


def described(data_dir: Path) -> dict[str, str]:
    """Every table's and column's comment in the published file of ``data_dir``, as DuckDB 1.5 reads them."""
    found = read_once(published_db_path(data_dir), "comments")
    assert "comments" in found, found.get("error")
    return {name: text for name, text in found["comments"].items() if name.split(".")[0] in DESCRIBED_SCHEMAS}


def test_every_published_table_and_column_is_described_in_duckdb_1_5(first_run: tuple[JobReport, Path]) -> None:
    comments = described(first_run[1])
    counted: dict[str, list[int]] = {}
    for name, text in comments.items():
        counts = counted.setdefault(name.split(".")[0], [0, 0])
        counts[0] += 1
        counts[1] += bool(text.strip())
    assert {schema: described for schema, (_, described) in counted.items()} == \
        {schema: total for schema, (total, _) in counted.items()}, [name for name, text in comments.items() if not text]
    assert sorted(counted) == sorted(DESCRIBED_SCHEMAS)
    assert counted["analytics"][0] > 150 and counted["freight"][0] > 500
    # and the tables' as SQLAlchemy reflects them, as Superset's dataset editor shows them
    reflected = read_once(published_db_path(first_run[1]), "sqlalchemy-comments")
    assert {name: text for name, text in reflected.get("comments", {}).items()
            if name.split(".")[0] in DESCRIBED_SCHEMAS} == \
        {name: text for name, text in comments.items() if name.count(".") == 1}, reflected.get("error")


def rebuilt(data_dir: Path) -> JobReport:
    """One run of the rebuild job, as ``freight-pipeline rebuild`` makes it."""
    backend = storage_from_env()
    with DbtWorker.for_run(data_dir, backend.dbt_target) as worker:
        return run_rebuild(data_dir, SETTINGS, backend, worker)


def history_compared(report: JobReport) -> set[object]:
    """What the run's history checks compared (``changed shipments`` or ``every shipment``)."""
    (checks,) = [step for step in report.steps if step.name == CHECKS_STEP]
    return {result.figures["compared"] for _, result in checks.checks if "compared" in result.figures}


def full_check_began(data_dir: Path) -> dt.datetime | None:
    with open_warehouse(data_dir, storage_from_env()) as warehouse:
        return last_full_check(warehouse)


def test_a_rebuild_checks_the_history_of_what_it_wrote_and_of_every_shipment_when_a_full_check_is_due(
    first_run: tuple[JobReport, Path], tmp_path: Path
) -> None:
    """A rebuild writes only the rows that came out different (none here: the mapping is the one that wrote
    them), so its checks are a sync's: the history of the shipments written, of every one when a full check
    is due; its full build is recorded as a full check only then."""
    data_dir = copied(first_run[1], tmp_path / "data")
    began = full_check_began(data_dir)
    assert began is not None
    quiet = rebuilt(data_dir)
    assert quiet.success and quiet.marts is not None and quiet.marts.plan.full_refresh
    # the job's runs (its streams, and its dbt build's, which names no mapping) derived every row held by the
    # current mapping: the rebuild reads nothing
    rebuild_step = next(step for step in quiet.steps if step.name == REBUILD_STEP)
    assert rebuild_step.line.startswith("rebuilt 0 shipments: every row held is the current mapping's"), rebuild_step
    assert history_compared(quiet) == {"changed shipments"}
    assert full_check_began(data_dir) == began
    with environ({FULL_CHECK_ENV: "0"}):
        due = rebuilt(data_dir)
    assert due.success and history_compared(due) == {"every shipment"}
    later = full_check_began(data_dir)
    assert later is not None and later > began


def built_by(data_dir: Path) -> str:
    """Who built the models of the last build: ``dbt``, or ``replayed`` (``marts.kept_builds``)."""
    results = read_run_results(build_target(data_dir))
    assert results is not None
    (by,) = {"replayed" if r["thread_id"] == "replayed" else "dbt" for r in results["results"]
             if r["unique_id"].startswith("model.")}
    return by


def kept_for(data_dir: Path) -> Path:
    """The folder of the kept builds of ``data_dir``'s builds."""
    return parse_dir(DBT_PROJECT_DIR, build_target(data_dir), vars_args()) / KEPT_BUILDS


NO_SUCH = "select * from no_such_relation"


def broken(data_dir: Path, breaking: bool) -> int:
    """Break (``breaking``) or mend the last model's statements of every kept build, whichever key is this
    data directory's (they are shared: a build of another test meeting one broken has dbt build); how many
    entries were still whole before."""
    whole = 0
    for path in kept_for(data_dir).glob("*.models.json"):
        entry = json.loads(path.read_text())
        statements = entry["models"][-1]["statements"]
        whole += NO_SUCH not in statements
        statements[:] = [*(s for s in statements if s != NO_SUCH), *([NO_SUCH] if breaking else [])]
        path.write_text(json.dumps(entry))
    return whole


def test_dbt_builds_when_a_kept_statement_fails_or_the_catalog_changed(
    sim: RunningSimulator, first_run: tuple[JobReport, Path], tmp_path: Path
) -> None:
    """A statement that fails rolls the replay back and dbt builds (and its statements are kept anew), in a
    worker started again when the replay had ended the one the run began with; a relation added to the working
    database changes the catalog, and dbt builds too."""
    data_dir = copied(first_run[1], tmp_path / "data")
    for _ in range(2):  # the first incremental build keeps its statements, if no test of this session did
        sim.modify_shipments(2)
        sim.advance_clock(60)
        assert run(sim, data_dir).success
    assert built_by(data_dir) == "replayed"
    broken(data_dir, True)
    (build_target(data_dir) / NEXT_BUILD).unlink()  # no word from the last build: the run starts its worker

    sim.modify_shipments(2)
    sim.advance_clock(60)
    report = run(sim, data_dir)
    assert report.success and report.marts is not None and report.marts.covered == 2
    assert built_by(data_dir) == "dbt"
    assert broken(data_dir, False)  # this build's key was kept anew; the others are mended

    with duckdb.connect(str(working_db_path(data_dir))) as con:  # a catalog no build has met: named anew each
        # time, as the kept builds outlive the session (in the project's target/: a second `make test` has them)
        con.execute(f"CREATE TABLE freight_meta.added_by_hand_{uuid.uuid4().hex[:12]} (x INTEGER)")
    sim.modify_shipments(2)
    sim.advance_clock(60)
    assert run(sim, data_dir).success and built_by(data_dir) == "dbt"
    sim.modify_shipments(2)
    sim.advance_clock(60)
    assert run(sim, data_dir).success and built_by(data_dir) == "replayed"  # kept with the new catalog


def test_a_first_build_replays_the_one_another_data_directory_kept_and_makes_what_dbt_makes(
    sim: RunningSimulator, tmp_path: Path
) -> None:
    """Two data directories synced from scratch from the same service: the first built by dbt (its worker
    started once its first stream had ended), the second replaying the statements the first's dbt sent (the same
    key, the same catalog of a new database), its dbt worker never started; every published table equal. A third,
    whose kept statements fail, has dbt build after all, in a worker started for it."""
    by_dbt, replayed, after_all = tmp_path / "dbt", tmp_path / "replayed", tmp_path / "after_all"
    dbt_seen: dict[str, bool] = {}
    with environ({DBT_REPLAY_ENV: "0"}):
        assert run(sim, by_dbt, worker_seen=dbt_seen).success
    assert built_by(by_dbt) == "dbt" and list(dbt_seen.values())[1:] == [True] * (len(dbt_seen) - 1), dbt_seen
    replayed_seen: dict[str, bool] = {}
    report = run(sim, replayed, worker_seen=replayed_seen)
    assert report.success and report.marts is not None and report.marts.plan.full_refresh
    assert built_by(replayed) == "replayed"
    assert not any(replayed_seen.values()), replayed_seen
    mine, theirs = published_tables(replayed), published_tables(by_dbt)
    assert len([name for name in mine if name.startswith("analytics.")]) > 5
    assert mine.keys() == theirs.keys()
    assert [name for name in mine if mine[name] != theirs[name]] == []

    broken(replayed, True)
    try:
        after_all_seen: dict[str, bool] = {}
        assert run(sim, after_all, worker_seen=after_all_seen).success
    finally:
        broken(replayed, False)
    assert built_by(after_all) == "dbt" and published_tables(after_all) == theirs
    assert after_all_seen[MARTS_STEP] and not after_all_seen[CHECKS_STEP], after_all_seen


def test_a_first_sync_that_cannot_tell_whether_its_build_replays_starts_its_worker_and_syncs_every_stream(
    sim: RunningSimulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plan asked after the first stream fails (a database error): the worker starts as if dbt were needed,
    and the later streams, the checks, the build and the publish run as ever."""

    def failing(*args: object, **kwargs: object) -> None:
        raise duckdb.IOException("the plan could not be read")

    monkeypatch.setattr("freight_pipeline.job.run.planned_build", failing)
    seen: dict[str, bool] = {}
    report = run(sim, tmp_path, worker_seen=seen)
    assert report.success, report.steps
    assert list(seen.values()) == [False] + [True] * (len(seen) - 1), seen


def test_a_stream_that_fails_withholds_nothing_of_the_others(tmp_path: Path) -> None:
    """An account without the E-File permission: the documents stream fails, red; the rest is published."""
    without_efiles = frozenset(p for p in PERMISSIONS if not p.startswith("efile"))
    config = SimulatorConfig(users=(UserConfig("no-documents", "pw-no-docs-1234", without_efiles),))
    with running_simulator(config, shipments=10, seed=5) as sim:
        report = run(sim, tmp_path, "no-documents", "pw-no-docs-1234")
    assert not report.success and report.failed_streams == ["documents"]
    (failed,) = report.failed
    assert failed.name == stream_step("documents") and failed.line.startswith("StreamUnreachable: ")
    assert steps(report)[PUBLISH_STEP] == "success" and report.publication is not None
    assert published(tmp_path, "SELECT count(*) FROM analytics.fct_shipments") == [(10,)]
    assert published(tmp_path, "SELECT last_status FROM freight_meta.table_freshness "
                               "WHERE table_name = 'shipment_documents'") == [("failed",)]


def test_a_broken_guarantee_holds_back_the_build_and_the_publish(
    sim: RunningSimulator, first_run: tuple[JobReport, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A goods line of no shipment: the warehouse check (ERROR) fails, nothing is built or published; the
    dbt test of the same invariant is left out of the builds (checked once a run)."""
    first, tmp_path = first_run[0], copied(first_run[1], tmp_path / "data")
    assert first.success and first.marts is not None and first.marts.summary is not None
    results = read_run_results(build_target(tmp_path))
    assert results is not None
    ran = {r["unique_id"].split(".")[2] for r in results["results"]}
    assert ORPHAN_TEST not in ran and any(name.startswith("composite_relationships_") for name in ran)
    version = parquet_root(tmp_path).resolve()

    add_orphan_goods_line(working_db_path(tmp_path))
    report = run(sim, tmp_path)
    assert not report.success
    assert [(step.name, step.status) for step in report.steps[-3:]] == [
        (CHECKS_STEP, "failed"), (MARTS_STEP, "skipped"), (PUBLISH_STEP, "skipped")]
    checks = report.steps[-3]
    assert checks.line.endswith("did not pass (1 of ERROR severity)")
    assert checks.notes == ["ERROR shipment_goods.no_orphan_rows: orphan_rows=1"]
    assert report.publication is None and parquet_root(tmp_path).resolve() == version  # readers keep the last
    with duckdb.connect(str(working_db_path(tmp_path)), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM freight_meta.sync_runs WHERE run_id = ? AND stream = ?",
                           [report.run_id, BUILD_STREAM]).fetchone() == (0,)  # no build was started
        assert con.execute("SELECT count(*) FROM freight_meta.changed_shipments").fetchone() != (0,)  # still due
    # status says why readers do not see this run: the job's own steps that failed or did not run (was: only the
    # streams' runs, each a success, nothing of the checks that held it back)
    assert main(["status", "--data-dir", str(tmp_path), "--json"]) == 0
    job_steps = [(r["stream"], r["run_id"], r["status"], r["error"])
                 for r in json.loads(capsys.readouterr().out)["unpublished_runs"] if r["stream"].startswith("job ")]
    assert job_steps == [(f"job {step.name}", report.run_id, step.status, step.line) for step in report.steps
                         if step.name in (CHECKS_STEP, PUBLISH_STEP)]
    assert main(["status", "--data-dir", str(first_run[1]), "--json"]) == 0  # a run that published: nothing of them
    assert not json.loads(capsys.readouterr().out).get("unpublished_runs")


GOODS_TEST = ("composite_relationships_stg_good_customs_shipment_id__good_path__ref_stg_shipment_goods___"
              "shipment_id__good_pa")
"""The test a customs record of a goods line the shipment does not hold fails (no warehouse check sees it)."""


def add_customs_of_no_goods_line(data_dir: Path, shipment: int, *, changed: bool) -> None:
    """A customs record of ``shipment`` for a goods line it does not hold; ``changed``: the shipment counts
    as changed since the last build (as when the sync wrote it)."""
    with duckdb.connect(str(working_db_path(data_dir))) as con:
        con.execute("INSERT INTO freight.good_customs SELECT * REPLACE (? AS shipment_id, '99.9' AS good_path) "
                    "FROM freight.good_customs LIMIT 1", [shipment])
        if changed:
            con.execute("INSERT INTO freight_meta.changed_shipments BY NAME SELECT ? AS shipment_id, "
                        "'test' AS run_id, now() AS changed_at", [shipment])


def goods_test_status(report: JobReport, data_dir: Path) -> tuple[str, int | None]:
    """The goods test's status in the run's build, and how many rows it found."""
    results = read_run_results(build_target(data_dir))
    assert results is not None
    (found,) = [r for r in results["results"] if r["unique_id"].split(".")[2].startswith(GOODS_TEST)]
    return found["status"], found["failures"]


def test_between_full_checks_the_tests_read_the_changed_rows_and_a_full_check_reads_every_row(
    sim: RunningSimulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A broken row of an unchanged shipment is not seen by an incremental build, but is by the full
    check when it is due; one of a changed shipment fails the incremental build."""
    monkeypatch.delenv(FULL_CHECK_ENV, raising=False)
    first = run(sim, tmp_path)
    assert first.success and first.marts is not None and first.marts.plan.full_refresh
    assert goods_test_status(first, tmp_path) == ("pass", 0)

    changed = sim.modify_shipments(2)
    sim.advance_clock(60)
    with duckdb.connect(str(working_db_path(tmp_path)), read_only=True) as con:
        unchanged, other = (row[0] for row in con.execute(
            "SELECT shipment_id FROM freight.shipments WHERE NOT list_contains(?, shipment_id) ORDER BY 1 LIMIT 2",
            [changed]).fetchall())
    add_customs_of_no_goods_line(tmp_path, unchanged, changed=False)
    quiet = run(sim, tmp_path)
    assert quiet.success and quiet.marts is not None and quiet.marts.plan.changed_rows
    assert quiet.marts.line().startswith("2 shipments changed; tests on the changed rows: ")
    assert goods_test_status(quiet, tmp_path) == ("pass", 0)  # ran, on the changed rows only

    monkeypatch.setenv(FULL_CHECK_ENV, "0")  # a full check is due
    with duckdb.connect(str(working_db_path(tmp_path))) as con:  # a change, so that a build runs
        con.execute("INSERT INTO freight_meta.changed_shipments BY NAME SELECT ? AS shipment_id, "
                    "'test' AS run_id, now() AS changed_at", [other])
    full = run(sim, tmp_path)
    assert not full.success and [step.name for step in full.failed] == [MARTS_STEP]
    assert goods_test_status(full, tmp_path) == ("fail", 1)

    with duckdb.connect(str(working_db_path(tmp_path))) as con:  # mended: the full check, still due, passes
        con.execute("DELETE FROM freight.good_customs WHERE good_path = '99.9'")
    mended = run(sim, tmp_path)
    assert mended.success and mended.marts is not None and not mended.marts.plan.changed_rows
    assert mended.marts.line().startswith("1 shipments changed; a full check: ")

    monkeypatch.delenv(FULL_CHECK_ENV)  # the next full check a day away
    add_customs_of_no_goods_line(tmp_path, other, changed=True)
    broken = run(sim, tmp_path)
    assert broken.marts is None and [step.name for step in broken.failed] == [MARTS_STEP]
    assert goods_test_status(broken, tmp_path) == ("fail", 1)
    with duckdb.connect(str(working_db_path(tmp_path)), read_only=True) as con:
        state = con.execute("SELECT count(*) FROM freight_meta.changed_shipments WHERE shipment_id = ?",
                            [other]).fetchone()
    assert state == (1,)  # still due for the next build


def test_a_check_that_raises_fails_the_checks_step_after_the_streams_steps(
    sim: RunningSimulator, first_run: tuple[JobReport, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not a ``sync`` step (which says nothing could be opened, and which Dagster reads as every stream's
    failure): each stream's step is reported once, then the checks' failure; nothing is built or published."""
    data_dir = copied(first_run[1], tmp_path / "data")

    def raising(*args: object) -> None:
        raise RuntimeError("a check's query failed")

    monkeypatch.setattr("freight_pipeline.job.run.evaluate_checks", raising)
    sim.modify_shipments(1)
    sim.advance_clock(60)
    report = run(sim, data_dir)
    assert [step.name for step in report.steps] == [*map(stream_step, STREAM_NAMES), CHECKS_STEP]
    assert report.failed[-1].name == CHECKS_STEP and "a check's query failed" in report.failed[-1].line
    assert report.publication is None


def test_while_another_run_writes_the_warehouse_a_run_or_a_rebuild_does_nothing_and_says_which(
    sim: RunningSimulator, tmp_path: Path
) -> None:
    """The engine takes the data directory's writer lock itself (a run Dagster launches while a headless one
    writes): skipped, not a success, nothing opened."""
    backend = storage_from_env()
    with writer_lock(tmp_path, "the-run-that-writes"):
        report = run(sim, tmp_path)
        with DbtWorker.for_run(tmp_path, backend.dbt_target) as worker:
            rebuilt = run_rebuild(tmp_path, SETTINGS, backend, worker)
    for skipped in (report, rebuilt):
        assert skipped.skipped is not None and "run the-run-that-writes, process " in skipped.skipped
        assert skipped.steps == [] and not skipped.success
    assert not working_db_path(tmp_path).exists()


def test_a_stop_whose_exception_was_lost_ends_the_run_as_stopped_before_its_publish(
    sim: RunningSimulator, first_run: tuple[JobReport, Path], tmp_path: Path
) -> None:
    """A stop's exception can be lost: raised while the interpreter runs a garbage collector's callback, it is only
    printed (``Exception ignored in ...``), and a step's query can take Ctrl-C for its own error. The run went on,
    published and recorded itself as ended well (a Dagster run, SIGTERM'd in its streams, published, then the
    command exited 143; a stop in the marts' last queries left ``status`` all green). A stop noted
    (``process_end.stop_requested``) now ends it as stopped before its publish, recorded so."""
    data_dir = copied(first_run[1], tmp_path / "data")
    published = published_db_path(data_dir).resolve()
    sim.modify_shipments(3)
    sim.advance_clock(1)

    def hear(step: Step) -> None:
        if step.name == MARTS_STEP:
            os.kill(os.getpid(), signal.SIGTERM)  # taken by a handler that raises nothing: the stop's exception lost

    service = ServiceSettings(sim.base_url, sim.username, sim.password)
    backend = storage_from_env()
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: None)
    try:
        with signals_noted() as stopped, DbtWorker.for_run(data_dir, backend.dbt_target) as worker, \
                pytest.raises(KeyboardInterrupt):
            run_job(service, data_dir, SETTINGS, backend, worker, on_step=hear)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert stopped == [signal.SIGTERM]
    assert published_db_path(data_dir).resolve() == published, "nothing of the run is published"
    record = read_last_job_run(data_dir)
    assert record is not None and record["stopped"] == STOPPED and record["finished_at"] is not None
