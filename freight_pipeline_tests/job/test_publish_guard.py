"""Readers never get half-built marts: a failed dbt build holds back every publish until a whole build
succeeds, whichever way the job is started (it is one engine; until issue 33 this was a Dagster test).

Real simulator, real sync, real dbt; the job's daily selection (the code conversions, the build, the
publish) runs on a working database given, in turn, a value the service controls (an event type
outside ESTIMATED/ACTUAL: the build only warns, and publishes) and a table the marts cannot read (a
column of a type the marts cannot read: the build fails, named; a publish alone is refused).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from freight_pipeline.config import ServiceSettings
from freight_pipeline.job.run import MARTS_STEP, PUBLISH_STEP, JobReport, run_job
from freight_pipeline.lake.backend import storage_from_env
from freight_pipeline.marts.worker import DbtWorker
from freight_pipeline.simulator.server import RunningSimulator, running_simulator
from freight_pipeline.sync.runner import sync_all
from freight_pipeline.sync.settings import SyncSettings
from freight_pipeline.warehouse.meta import BUILD_STREAM
from freight_pipeline.warehouse.paths import working_db_path
from freight_pipeline.warehouse.publish import parquet_root, published_db_path
from freight_pipeline_tests.dbt.freight_db import record_change

NEW_TYPE = "PLANNED"
TYPE_TEST = "accepted_values_stg_shipment_events_event_type___freight_event_types_"


def _published_version(data_dir: Path) -> Path:
    return parquet_root(data_dir).resolve()


def _dbt_build_run(data_dir: Path, run_id: str) -> tuple[str, str | None]:
    """(status, error) of the run's dbt build in ``sync_runs``."""
    with duckdb.connect(str(working_db_path(data_dir)), read_only=True) as con:
        row = con.execute("SELECT status, error FROM freight_meta.sync_runs WHERE run_id = ? AND stream = ?",
                          [run_id, BUILD_STREAM]).fetchone()
    assert row is not None
    return str(row[0]), row[1]


def _set_one_event_type(data_dir: Path, old: str, new: str) -> None:
    """As if the sync had written an event of type ``new``: the row and its versions (the history check
    compares them), and its shipment among the changes."""
    with duckdb.connect(str(working_db_path(data_dir))) as con:
        shipment_id, event = con.execute(
            "UPDATE freight.shipment_events SET type = ? WHERE rowid = (SELECT min(rowid) FROM "
            "freight.shipment_events WHERE type = ?) RETURNING shipment_id, event", [new, old]).fetchone() or (0, "")
        con.execute("UPDATE freight_history.event_versions SET type = ? "
                    "WHERE shipment_id = ? AND event = ? AND type = ?", [new, shipment_id, event, old])
        record_change(con, shipment_id)


def _retype_direction(data_dir: Path, sql_type: str, value: str) -> None:
    """Give ``direction`` of ``freight.shipments`` and of its versions (which the staging views trim, the
    history check compares, and the sync does not retype) another type; one shipment changed, so the
    incremental marts read it."""
    with duckdb.connect(str(working_db_path(data_dir))) as con:
        for table in ("freight.shipments", "freight_history.shipment_versions"):
            con.execute(f"ALTER TABLE {table} ALTER direction TYPE {sql_type} USING {value}")
        (shipment_id,) = con.execute("SELECT min(shipment_id) FROM freight.shipments").fetchone() or (None,)
        record_change(con, shipment_id)


@pytest.fixture
def synced(tmp_path: Path) -> Iterator[tuple[RunningSimulator, Path]]:
    """A data dir synced (no dbt) and published."""
    data_dir = tmp_path / "data"
    with running_simulator(shipments=40, seed=11) as sim:
        sync_all(ServiceSettings(sim.base_url, sim.username, sim.password), data_dir, backend=storage_from_env())
        yield sim, data_dir


def daily(sim: RunningSimulator, data_dir: Path, streams: tuple[str, ...] = ("code_conversions",),
          marts: bool = True) -> JobReport:
    """The daily selection of the job (or ``streams`` and ``marts`` given)."""
    backend = storage_from_env()
    with DbtWorker.for_run(data_dir, backend.dbt_target) as worker:
        return run_job(ServiceSettings(sim.base_url, sim.username, sim.password), data_dir,
                       SyncSettings(reconcile_interval=None), backend, worker, streams=streams, marts=marts)


def test_a_failed_dbt_build_is_not_published_until_a_whole_build_succeeds(
    synced: tuple[RunningSimulator, Path]
) -> None:
    sim, data_dir = synced
    good = daily(sim, data_dir)
    assert good.success, good.steps
    published = _published_version(data_dir)

    # a value the service controls: the build warns, names the test in the step's notes, publishes
    _set_one_event_type(data_dir, "ACTUAL", NEW_TYPE)
    warned = daily(sim, data_dir)
    assert warned.success, warned.steps
    assert _dbt_build_run(data_dir, warned.run_id) == ("success", None)
    marts = next(step for step in warned.steps if step.name == MARTS_STEP)
    assert [note for note in marts.notes if TYPE_TEST in note] == [
        f"dbt test {TYPE_TEST} warned (severity warn, the build goes on): Got 1 result, configured to warn if != 0"]
    assert _published_version(data_dir) != published
    published = _published_version(data_dir)
    with duckdb.connect(str(published_db_path(data_dir)), read_only=True) as con:
        assert con.execute("SELECT unknown_event_types FROM analytics.fct_shipment_milestones "
                           "WHERE unknown_type_events > 0").fetchall() == [(NEW_TYPE,)]

    # a table the marts cannot read: the build fails, named; the publish does not run
    _retype_direction(data_dir, "INTEGER", "1")
    failed = daily(sim, data_dir)
    assert not failed.success and [step.name for step in failed.failed] == [MARTS_STEP]
    (step,) = failed.failed
    assert step.line.startswith("dbt build failed: "), step.line
    assert [(s.name, s.status, s.line) for s in failed.steps if s.name == PUBLISH_STEP] == [  # said, not left out
        (PUBLISH_STEP, "skipped", "not run: the build failed; readers keep the last publish")]
    assert failed.publication is None
    status, error = _dbt_build_run(data_dir, failed.run_id)
    assert status == "failed" and error is not None and error.startswith("DbtBuildFailed: dbt build failed: ")
    assert _published_version(data_dir) == published

    # even a run without the build (the code conversions and the publish) must not publish half-built marts
    no_dbt = daily(sim, data_dir, marts=False)
    assert [(s.name, s.status) for s in no_dbt.failed] == [(PUBLISH_STEP, "failed")]
    assert "UnsettledWarehouse" in no_dbt.failed[0].line
    assert f"dbt_build failed in run {failed.run_id}" in no_dbt.failed[0].line
    assert _published_version(data_dir) == published

    _retype_direction(data_dir, "VARCHAR", "'E'")
    healed = daily(sim, data_dir)
    assert healed.success, healed.steps
    assert _published_version(data_dir) != published
    with duckdb.connect(str(published_db_path(data_dir)), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM analytics.fct_shipments").fetchone() == (40,)
        statuses = con.execute("SELECT status FROM freight_meta.sync_runs WHERE stream = ? ORDER BY started_at",
                               [BUILD_STREAM]).fetchall()
    assert [s for (s,) in statuses] == ["success", "success", "failed", "success"]
