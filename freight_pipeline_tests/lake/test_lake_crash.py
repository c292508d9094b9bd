"""A backfill writer SIGKILLed inside a commit, while two others write the same tables: the lake stays
readable and consistent (no shipment half written), the killed partition is not marked complete, the
incremental sync refuses to take over until it is, and after a rerun of that partition the lake
equals the source."""

from __future__ import annotations

import random
import signal
from pathlib import Path

import pytest

from bench.lake_harness import (
    even_boundaries,
    kill_inside_commit,
    partition_keys,
    read_lake,
    service_env,
    start_writer,
    write_expected,
)
from freight_pipeline.config import ServiceSettings, environ
from freight_pipeline.lake.backend import storage_from_env
from freight_pipeline.lake.connect import connect_lake
from freight_pipeline.lake.settings import LakeSettings
from freight_pipeline.simulator.server import RunningSimulator, running_simulator
from freight_pipeline.sync.backfill import BackfillIncomplete
from freight_pipeline.sync.runner import sync_all
from freight_pipeline_tests.sync.settings import TEST_SETTINGS

SHIPMENTS = 90


@pytest.fixture
def sim() -> RunningSimulator:
    with running_simulator(shipments=SHIPMENTS, seed=29) as running:
        yield running


def test_a_writer_killed_inside_a_commit_then_rerun_ends_exact(
    sim: RunningSimulator, lake_env: dict[str, str], tmp_path: Path
) -> None:
    rng = random.Random(12)
    boundaries = even_boundaries(sim, 3)
    keys = partition_keys(boundaries)
    env = {**lake_env, **service_env(sim)}
    data_dir = tmp_path / "data"
    victim = keys[rng.randrange(len(keys))]
    others = {key: start_writer(env, key, boundaries, data_dir, tmp_path / f"{key}.log")
              for key in keys if key != victim}
    killed = start_writer(env, victim, boundaries, data_dir)
    begun = kill_inside_commit(killed, commit=rng.randint(4, 9), delay=rng.uniform(0.0, 0.03))
    for key, proc in others.items():
        assert proc.wait(timeout=600) == 0, (tmp_path / f"{key}.log").read_text()[-3000:]
    assert killed.returncode == -signal.SIGKILL, f"the writer ended before the kill ({begun} commits)"

    # another process reads the lake: every shipment it holds is whole and equal to the source
    expected = write_expected(sim, tmp_path / "expected")
    after_kill = read_lake(env, expected, "--held-only")
    assert after_kill["differences"] == {}, after_kill
    lake = LakeSettings.from_env(env)
    assert lake is not None
    with connect_lake(lake, tmp_path / "scratch", "256MB", read_only=True) as con:
        cursor = con.execute("SELECT cursor_value FROM freight_meta.sync_state WHERE stream = ?",
                             [f"shipments@{victim}"]).fetchone()
    assert cursor is None or '"complete": true' not in cursor[0]
    assert after_kill["rows"]["shipments"] < SHIPMENTS

    service = ServiceSettings(sim.base_url, sim.username, sim.password)
    with environ(lake_env), pytest.raises(BackfillIncomplete, match=victim):
        sync_all(service, data_dir, TEST_SETTINGS, publish_after=False, backend=storage_from_env())

    rerun = start_writer(env, victim, boundaries, data_dir)
    output, _ = rerun.communicate(timeout=600)
    assert rerun.returncode == 0 and output.strip().endswith("done"), output[-3000:]
    with environ(lake_env):
        results, published = sync_all(service, data_dir, TEST_SETTINGS, backend=storage_from_env(),
                                      publish_after=False)
    assert [r.status for r in results] == ["success"] * len(results)
    assert published is None
    final = read_lake(env, expected)
    assert final["differences"] == {}, final
    assert final["rows"]["shipments"] == SHIPMENTS
