"""Alerts in lake mode (a real PostgreSQL catalog, a real S3-compatible server): the problems' state and the
outbox are lake tables (``freight_meta.alerts``, ``alert_messages``), written in one commit per look; a failed
stream is said once, not again while it fails, and once resolved."""

from __future__ import annotations

from pathlib import Path

from freight_pipeline.config import environ
from freight_pipeline.lake.connect import connect_lake
from freight_pipeline.lake.settings import LakeSettings
from freight_pipeline.simulator.server import running_simulator
from freight_pipeline.sync.streams import CODE_CONVERSIONS
from freight_pipeline_tests.alerts.harness import FORBIDDEN, Runs, destinations_running, titles

TITLE = "the code_conversions stream failed"


def test_a_failed_stream_is_said_once_and_resolved_once_from_the_lake(
    lake_env: dict[str, str], tmp_path: Path
) -> None:
    with running_simulator(shipments=8, seed=5) as sim, destinations_running() as destinations, environ(lake_env):
        runs = Runs(sim, tmp_path / "data", destinations.alerting())
        sim.set_faults(forbidden_prefixes=FORBIDDEN)
        for _ in range(3):
            assert runs.run().failed_streams == [CODE_CONVERSIONS.name]
        sim.set_faults(forbidden_prefixes=None)
        assert runs.run().success
    said = [f"[test-deploy] ERROR: {TITLE}", f"[test-deploy] resolved: {TITLE}"]
    assert titles(destinations) == [said, said]
    lake = LakeSettings.configured(lake_env)
    assert lake is not None
    with connect_lake(lake, tmp_path / "scratch", "256MB", read_only=True) as con:
        episodes = con.execute("SELECT problem, opened_run, closed_run, times_seen FROM freight_meta.alerts").fetchall()
        queued = con.execute("SELECT kinds, count(*) FROM freight_meta.alert_messages GROUP BY kinds ORDER BY kinds"
                             ).fetchall()
    first, *_, last = runs.reports
    assert episodes == [(f"step.sync_{CODE_CONVERSIONS.name}:failed", first.run_id, last.run_id, 3)]
    assert queued == [("opened", 2), ("resolved", 2)]
