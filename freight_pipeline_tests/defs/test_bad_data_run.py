"""The whole Dagster job over a source with bad records: it succeeds, publishes, and says what it set aside."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb
import httpx
import pytest

from freight_pipeline.definitions import defs
from freight_pipeline.simulator.config import SimulatorConfig, UserConfig
from freight_pipeline.simulator.server import running_simulator
from freight_pipeline.warehouse.publish import published_db_path


@dataclass
class BadRun:
    result: dg.ExecuteInProcessResult
    data_dir: Path
    truncated: int
    bad_offset: int
    unknown_type: int


def _corrupt(base_url: str, **body: Any) -> None:
    answer = httpx.post(f"{base_url}/_control/corruptions", json=body, timeout=10)
    assert answer.status_code == 200, answer.text


@pytest.fixture(scope="module")
def bad_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BadRun]:
    root = tmp_path_factory.mktemp("bad_data_run")
    password = "pw-" + secrets.token_hex(12)
    config = SimulatorConfig(users=(UserConfig("freight-user", password),))
    with running_simulator(config, shipments=60, seed=5, control=True) as sim, pytest.MonkeyPatch.context() as env:
        with_events = [d["id"] for d in sorted(sim.store.reader.expected_documents(), key=lambda d: d["id"])
                       if sim.store.reader.get_events(d["id"])]
        truncated, bad_offset, unknown_type = with_events[:3]
        _corrupt(sim.base_url, endpoint="shipment", id=truncated, kind="truncated")
        _corrupt(sim.base_url, endpoint="events", id=bad_offset, kind="set", path="[0].date_time.zone_offset",
                 value="+99:00")
        _corrupt(sim.base_url, endpoint="events", id=unknown_type, kind="set", path="[0].type", value="PLANNED")
        env.setenv("FREIGHT_BASE_URL", sim.base_url)
        env.setenv("FREIGHT_USERNAME", sim.username)
        env.setenv("FREIGHT_PASSWORD", password)
        env.setenv("FREIGHT_DATA_DIR", str(root / "data"))
        env.setenv("DAGSTER_HOME", str(root / "dagster_home"))
        env.delenv("FREIGHT_DBT_DATABASE", raising=False)
        with dg.DagsterInstance.ephemeral() as instance:
            result = defs.resolve_job_def("freight_sync_job").execute_in_process(
                instance=instance, raise_on_error=False
            )
            yield BadRun(result, root / "data", truncated, bad_offset, unknown_type)


def _metadata(result: dg.ExecuteInProcessResult, table: str) -> dict[str, Any]:
    (event,) = [e for e in result.get_asset_materialization_events() if e.asset_key == dg.AssetKey(["freight", table])]
    return {k: v.value for k, v in event.materialization.metadata.items()}


def _checks(result: dg.ExecuteInProcessResult) -> dict[tuple[str, str], dg.AssetCheckEvaluation]:
    return {(e.asset_key.path[-1], e.check_name): e for e in result.get_asset_check_evaluations()}


def test_the_run_succeeds_and_publishes(bad_run: BadRun) -> None:
    failures = [e.message for e in bad_run.result.all_events if e.is_failure]
    assert bad_run.result.success, failures
    with duckdb.connect(str(published_db_path(bad_run.data_dir)), read_only=True) as con:
        held = {r[0] for r in con.execute("SELECT shipment_id FROM freight.shipments").fetchall()}
        waiting = con.execute("SELECT stream, record_key FROM freight_meta.quarantine").fetchall()
        nulled = con.execute("SELECT stream, record_key, json_path FROM freight_meta.data_problems").fetchall()
        planned = con.execute("SELECT count(*) FROM analytics.fct_shipment_milestones WHERE shipment_id = ? "
                              "AND NOT is_known_event_type", [bad_run.unknown_type]).fetchone()
    assert len(held) == 59 and bad_run.truncated not in held  # every other shipment is published
    assert waiting == [("shipments", str(bad_run.truncated))]
    assert nulled == [("shipment_events", str(bad_run.bad_offset), "[0].date_time.zone_offset")]
    assert planned == (1,)  # the unknown type is carried into the marts, flagged


def test_metadata_and_checks_say_what_was_set_aside(bad_run: BadRun) -> None:
    shipments, events = _metadata(bad_run.result, "shipments"), _metadata(bad_run.result, "shipment_events")
    # freight/shipments carries the stream's figures (every part), each part's first table its own
    assert (shipments["quarantined"], shipments["retry_queue"], shipments["data_problems"]) == (1, 1, 1)
    assert (events["quarantined"], events["retry_queue"], events["data_problems"]) == (0, 0, 1)
    checks = _checks(bad_run.result)
    waiting = checks[("shipments", "no_quarantined_records")]
    assert not waiting.passed and waiting.severity == dg.AssetCheckSeverity.WARN
    assert waiting.metadata["quarantined_records"].value == 1
    assert waiting.metadata["examples"].value[0]["request"] == f"GET /service/shipment/{bad_run.truncated}"
    nulled = checks[("shipment_events", "no_data_problems")]
    assert not nulled.passed and nulled.severity == dg.AssetCheckSeverity.WARN
    assert nulled.metadata["examples"].value[0]["raw_value"] == '"+99:00"'
    assert checks[("shipment_events", "no_quarantined_records")].passed
