"""The job's one op in Dagster, a test per concern: a selection runs only what it selects. A failed
stream failing one run that publishes every other stream (its check red, the op's failure naming the
step) and a data directory publishing the same either way the job is started are tested on the CLI's
runs, in ``freight_pipeline_tests/commands/test_sync_command.py`` (the same runs, not once more here).
The scenarios themselves (incremental builds, a broken guarantee) are the engine's, tested once in
``freight_pipeline_tests/job``.

Real simulator over HTTP, real DuckDB, dbt and Dagster. (No ``from __future__ import annotations``:
Dagster reads annotations.)
"""

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from freight_pipeline.definitions import defs
from freight_pipeline.defs.freight_job import DBT, stream_check_key
from freight_pipeline.defs.names import FREIGHT_SYNC_JOB
from freight_pipeline.defs.sync_assets import stream_keys
from freight_pipeline.marts.project import build_target
from freight_pipeline.marts.worker import NEXT_BUILD, DbtWorker, Start
from freight_pipeline.simulator.server import RunningSimulator, running_simulator
from freight_pipeline.warehouse.meta import BUILD_STREAM
from freight_pipeline.warehouse.paths import working_db_path
from freight_pipeline.warehouse.publish import published_db_path


@contextmanager
def job_env(sim: RunningSimulator, data_dir: Path, username: str, password: str) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as env:
        env.setenv("FREIGHT_BASE_URL", sim.base_url)
        env.setenv("FREIGHT_USERNAME", username)
        env.setenv("FREIGHT_PASSWORD", password)
        env.setenv("FREIGHT_DATA_DIR", str(data_dir))
        env.delenv("FREIGHT_DBT_DATABASE", raising=False)
        yield


def materialized(result: dg.ExecuteInProcessResult) -> set[dg.AssetKey]:
    return {event.asset_key for event in result.get_asset_materialization_events()}


def logged_streams(data_dir: Path, run_id: str) -> set[str]:
    with duckdb.connect(str(working_db_path(data_dir)), read_only=True) as con:
        return {s for (s,) in con.execute("SELECT stream FROM freight_meta.sync_runs WHERE run_id = ?",
                                          [run_id]).fetchall()}


def test_a_selection_runs_only_what_it_selects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the code conversions: that stream alone, no build, no publish, and no dbt worker loading dbt for a
    build that does not come (a word from the last run that starts one at once is left for both). Only the
    marts: no stream, the checks and the build on what the working database holds, no publish."""
    job = defs.resolve_job_def(FREIGHT_SYNC_JOB)
    workers: list[DbtWorker] = []
    for_run = DbtWorker.for_run.__func__  # type: ignore[attr-defined]

    def recorded(cls: type[DbtWorker], *args: object, **kwargs: object) -> DbtWorker:
        workers.append(for_run(cls, *args, **kwargs))
        return workers[-1]

    monkeypatch.setattr(DbtWorker, "for_run", classmethod(recorded))
    word = build_target(tmp_path) / NEXT_BUILD
    with running_simulator(shipments=12, seed=4) as sim, job_env(sim, tmp_path, sim.username, sim.password), \
            dg.DagsterInstance.ephemeral() as instance:
        codes = job.execute_in_process(instance=instance, raise_on_error=False,
                                       asset_selection=stream_keys("code_conversions"))  # a first sync
        word.write_text("{not json")  # no word it can read: a later run that builds starts its worker at once
        again = job.execute_in_process(instance=instance, raise_on_error=False,
                                       asset_selection=stream_keys("code_conversions"))
        word.write_text("{not json")
        marts = job.execute_in_process(instance=instance, raise_on_error=False,
                                       asset_selection=list(DBT.keys.values()))
    assert codes.success and again.success and marts.success
    assert [(worker.starts, worker.process is not None) for worker in workers] == [
        (Start.WHEN_ASKED, False), (Start.WHEN_ASKED, False), (Start.AT_ONCE, True)]
    assert materialized(codes) == set(stream_keys("code_conversions"))
    assert {(c.asset_key, c.check_name) for c in codes.get_asset_check_evaluations()} >= {
        (stream_check_key("code_conversions").asset_key, "stream_synced"),
        (dg.AssetKey(["freight", "code_conversions"]), "primary_key_unique")}
    assert logged_streams(tmp_path, codes.run_id) == {"code_conversions"}
    assert materialized(marts) == set(DBT.keys.values())
    assert logged_streams(tmp_path, marts.run_id) == {BUILD_STREAM}
    assert not published_db_path(tmp_path).exists()  # neither selected the publish
