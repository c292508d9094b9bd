"""The event log storage of the shipped ``dagster.yaml``: Dagster's own SQLite files, written with the
run's connection kept open; what it stores is what Dagster's own class (the webserver's, an older
instance's) reads."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest
from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage

from freight_pipeline.commands.dagster_home import ensure_dagster_yaml
from freight_pipeline.commands.dagster_storage import KEPT_SHARDS, KeptOpenSqliteEventLogStorage


@dg.asset(check_specs=[dg.AssetCheckSpec("positive", asset="numbers")])
def numbers() -> dg.MaterializeResult:
    return dg.MaterializeResult(metadata={"rows": 3}, check_results=[dg.AssetCheckResult(passed=True)])


def test_runs_read_back_through_dagsters_own_storage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    ensure_dagster_yaml(tmp_path)
    with dg.DagsterInstance.get() as instance:
        storage = instance.event_log_storage
        assert isinstance(storage, KeptOpenSqliteEventLogStorage)
        runs = [dg.materialize([numbers], instance=instance) for _ in range(KEPT_SHARDS + 2)]
        assert all(run.success for run in runs)
        assert len(storage._engines) <= KEPT_SHARDS  # older shards' connections are closed
        written = {run.run_id: instance.all_logs(run.run_id) for run in runs}
    theirs = SqliteEventLogStorage(str(tmp_path / "history" / "runs"))
    try:
        for run_id, events in written.items():
            assert [e.dagster_event_type for e in theirs.get_logs_for_run(run_id)] == [
                e.dagster_event_type for e in events]
        latest = theirs.get_latest_materialization_events([dg.AssetKey("numbers")])[dg.AssetKey("numbers")]
        assert latest is not None and latest.run_id == runs[-1].run_id
        check = dg.AssetCheckKey(dg.AssetKey("numbers"), "positive")
        assert len(theirs.get_asset_check_execution_history(check, limit=100)) == len(runs)
    finally:
        theirs.dispose()


def test_a_deleted_run_leaves_neither_its_shard_nor_its_check_executions(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``DagsterInstance.delete_run`` with this storage: the run's shard file goes (Dagster's own class empties it and
    keeps it, some 1.3 MB a run of the freight job), its check executions too; the other runs' stay, readable."""
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    ensure_dagster_yaml(tmp_path)
    check = dg.AssetCheckKey(dg.AssetKey("numbers"), "positive")
    shards = tmp_path / "history" / "runs"
    with dg.DagsterInstance.get() as instance:
        old, kept = (dg.materialize([numbers], instance=instance).run_id for _ in range(2))
        assert (shards / f"{old}.db").exists()
        instance.delete_run(old)
        assert sorted(path.name for path in shards.glob(f"{old}*")) == []
        assert instance.get_run_by_id(old) is None
        history = instance.event_log_storage.get_asset_check_execution_history(check, limit=100)
        assert [execution.run_id for execution in history] == [kept]
        assert [record.run_id for record in instance.fetch_materializations(numbers.key, limit=10).records] == [kept]
        instance.delete_run(old)  # again: nothing made anew
        assert not (shards / f"{old}.db").exists()
        assert [e.dagster_event_type for e in instance.all_logs(kept)][-1] == dg.DagsterEventType.RUN_SUCCESS
