"""``freight-pipeline rebuild``: the job with the rebuild in place of the streams, in a child process: no
service setting needed and no request made; a line per step; a full build of the marts; the publish;
``--restart``; ``--all`` (every shipment re-derived, though the mapping that derived them is the current one)."""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import duckdb

from freight_pipeline.cli import TERMINATED
from freight_pipeline.config import ServiceSettings
from freight_pipeline.lake.backend import storage_from_env
from freight_pipeline.simulator.config import SimulatorConfig
from freight_pipeline.simulator.server import running_simulator
from freight_pipeline.sync.rebuild import REBUILD_STATE, RebuildState
from freight_pipeline.sync.runner import STOPPED, sync_all
from freight_pipeline.sync.settings import SyncSettings
from freight_pipeline.sync.streams import SHIPMENTS
from freight_pipeline.warehouse.run_log import GONE, INTERRUPTED
from freight_pipeline.warehouse.store import open_warehouse
from freight_pipeline_tests.commands.conftest import cli_env, run_cli, run_stopped_in_a_query, shown, unpublished
from freight_pipeline_tests.commands.test_runs_at_once import started


def test_rebuild_rederives_builds_in_full_and_publishes_without_the_service(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with running_simulator(shipments=15, seed=3) as sim:
        sync_all(ServiceSettings(sim.base_url, sim.username, sim.password), data_dir, backend=storage_from_env(),
                 streams=(SHIPMENTS.name,))
        served = sim.request_count()
        done = run_cli(["rebuild", "--data-dir", str(data_dir), "--batch-size", "4", "--all", "-v"], cli_env())
        assert sim.request_count() == served
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert lines[0].endswith("from its raw records (no request to the service)")
    assert lines[-1].startswith("rebuild succeeded in ")
    assert [line.split()[1] for line in lines if line.startswith("    rebuild:")] == ["4", "8", "12", "15"]
    steps = [line.split()[0] for line in lines[1:-1] if not line.startswith("    ")]
    assert steps == ["rebuild", "checks", "marts", "publish"]
    assert "rebuilt 15 shipments from their raw records in 4 batches" in done.stderr
    assert "the run asks for a full refresh (a rebuild)" in done.stderr
    with duckdb.connect(str(data_dir / "warehouse.duckdb"), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM analytics.fct_shipments").fetchone() == (15,)
        assert con.execute("SELECT status, rows_read FROM freight_meta.sync_runs WHERE stream = 'rebuild'"
                           ).fetchall() == [("success", 15)]


def test_rebuild_refuses_a_batch_size_below_one(tmp_path: Path) -> None:
    done = run_cli(["rebuild", "--data-dir", str(tmp_path), "--batch-size", "0"], cli_env())
    assert done.returncode == 2 and "--batch-size must be at least 1" in done.stderr


def test_restart_rebuilds_from_the_first_shipment_what_an_interrupted_rebuild_left_half_done(tmp_path: Path) -> None:
    """``--restart``: the progress an interrupted rebuild left (what a SIGKILL after a batch leaves:
    sync/test_rebuild.py) is ignored; every shipment is rebuilt and the entry cleared."""
    data_dir = tmp_path / "data"
    with running_simulator(shipments=9, seed=4) as sim:
        sync_all(ServiceSettings(sim.base_url, sim.username, sim.password), data_dir, backend=storage_from_env(),
                 streams=(SHIPMENTS.name,))
    with open_warehouse(data_dir, storage_from_env()) as warehouse:
        half = warehouse.reads.raw_records(None, 6).last
        warehouse.writes.set_cursor(REBUILD_STATE, RebuildState(half).text("killed-run"), "killed-run")
    done = run_cli(["rebuild", "--data-dir", str(data_dir), "--batch-size", "4", "--restart", "--all",
                    "--workers", "1"], cli_env())
    assert done.returncode == 0, done.stderr
    assert "rebuilt 9 shipments from their raw records in 3 batches" in done.stderr
    assert "resumed after" not in done.stderr
    with duckdb.connect(str(data_dir / "work" / "warehouse.duckdb"), read_only=True) as con:
        assert con.execute("SELECT cursor_value FROM freight_meta.sync_state WHERE stream = ?",
                           [REBUILD_STATE]).fetchall() == [(None,)]
        assert con.execute("SELECT rows_read, details->>'$.extra.resumed_after' FROM freight_meta.sync_runs "
                           "WHERE stream = 'rebuild'").fetchall() == [(9, None)]


def test_rebuild_of_a_data_dir_without_a_working_database_refuses_and_keeps_what_is_published(tmp_path: Path) -> None:
    """The working database lost (or ``--data-dir`` mistyped): a rebuild has nothing to re-derive from, and must
    not publish an empty warehouse over the one analysts read."""
    data_dir = tmp_path / "data"
    with running_simulator(shipments=6, seed=4) as sim:
        sync_all(ServiceSettings(sim.base_url, sim.username, sim.password), data_dir, backend=storage_from_env(),
                 streams=(SHIPMENTS.name,))
    (data_dir / "work" / "warehouse.duckdb").unlink()
    done = run_cli(["rebuild", "--data-dir", str(data_dir)], cli_env())
    assert done.returncode == 2, done.stderr
    assert "holds no working database" in done.stderr
    assert not (data_dir / "work" / "warehouse.duckdb").exists()
    with duckdb.connect(str(data_dir / "warehouse.duckdb"), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM freight.shipments").fetchone() == (6,)


def test_a_rebuild_stopped_by_sigterm_says_so_in_one_line_and_the_next_goes_on_from_its_last_batch(
    published: Path, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    shutil.copytree(published, data_dir)
    argv = ["rebuild", "--data-dir", str(data_dir), "--all", "--workers", "0"]
    with started(cli_env(), [*argv, "--batch-size", "1", "-v"]) as said:
        said.wait_for("    rebuild: 1 ")  # its first batch committed, 99 to go
        os.kill(said.child.pid, signal.SIGTERM)
        code, err = said.ended()
    assert code == TERMINATED, err
    assert "Traceback" not in err, err
    assert err.splitlines()[-1] == ("freight-pipeline rebuild: terminated (SIGTERM) in step rebuild: every batch it "
                                    "committed before is kept, the next run goes on from the last; exit 143"), err
    assert rebuild_rows(data_dir) == [("rebuild", "failed", STOPPED)]  # its run log row; not also `job rebuild`
    done = run_cli(argv, cli_env())
    assert done.returncode == 0, done.stderr
    assert ", resumed after shipment " in done.stderr  # not skipped: the lock was let go


def test_a_rebuild_whose_stop_a_duckdb_query_takes_is_logged_as_stopped(published: Path, tmp_path: Path) -> None:
    """SIGTERM met in a DuckDB statement of a batch's write (DuckDB's own ``RuntimeError: Query interrupted``): the
    command said it stopped, and its run log row said ``RuntimeError: Query interrupted`` (a CI run's flake of the
    test above, the stop coming in a statement rather than between two)."""
    data_dir = tmp_path / "data"
    shutil.copytree(published, data_dir)
    done = run_stopped_in_a_query("SIGTERM", "freight_pipeline.warehouse.writes:Writes.apply_batch",
                                  ["rebuild", "--data-dir", str(data_dir), "--all", "--workers", "0"], cli_env())
    assert done.returncode == TERMINATED, done.stderr
    assert done.stderr.splitlines()[-1].startswith("freight-pipeline rebuild: terminated (SIGTERM) in step rebuild: ")
    assert rebuild_rows(data_dir) == [("rebuild", "failed", STOPPED)]


def rebuild_rows(data_dir: Path) -> list[tuple[str, str, str | None]]:
    """The rows ``freight-pipeline status --json`` shows of the latest rebuild (the run log's ``rebuild`` and the
    job's ``job rebuild``)."""
    return [row for row in shown(unpublished(data_dir)) if "rebuild" in row[0]]


def test_a_rebuild_killed_is_shown_once_as_interrupted(published: Path, tmp_path: Path) -> None:
    """``kill -9`` after its first batch: ``status`` showed the rebuild twice, its run log row and the job's record of
    its step (``job rebuild``), both interrupted."""
    data_dir = tmp_path / "data"
    shutil.copytree(published, data_dir)
    with started(cli_env(), ["rebuild", "--data-dir", str(data_dir), "--all", "--workers", "0", "--batch-size", "1",
                             "-v"]) as said:
        said.wait_for("    rebuild: 1 ")
        os.kill(said.child.pid, signal.SIGKILL)
        said.ended()
    assert rebuild_rows(data_dir) == [("rebuild", INTERRUPTED, GONE)]


def test_a_rebuild_that_fails_before_its_run_is_logged_keeps_its_line_in_status(tmp_path: Path) -> None:
    """Refused before it logs its run (the held rows read in another zone): the job's record says why, as
    ``job rebuild`` (the run log holds no row of it)."""
    data_dir = tmp_path / "data"
    berlin = SyncSettings().replaced(service_timezone="Europe/Berlin")
    with running_simulator(SimulatorConfig(shipments=4, seed=5, naive_clock="Europe/Berlin")) as sim:
        sync_all(ServiceSettings(sim.base_url, sim.username, sim.password), data_dir, berlin,
                 backend=storage_from_env(), streams=(SHIPMENTS.name,))
    done = run_cli(["rebuild", "--data-dir", str(data_dir), "--workers", "0"], cli_env())
    assert done.returncode == 1, done.stderr
    ((stream, status, error),) = rebuild_rows(data_dir)
    assert (stream, status) == ("job rebuild", "failed") and error.startswith("ZoneChanged: "), error
