"""The dbt project builds on a real ``freight`` schema, with the expected grain, tests and unit tests.

The ``freight`` tables are created from the table specs' DDL and filled by the project's normalizer
(documents of the bundled simulator when it exists, else handmade ones; see ``freight_db``). dbt
runs through ``dagster_dbt.DbtCliResource``, the same way the Dagster assets run it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from freight_pipeline.normalize import FREIGHT_TABLES
from freight_pipeline_tests.dbt.freight_db import build_freight_database

ROOT = Path(__file__).resolve().parents[2]
DBT_DIR = ROOT / "dbt_models"
DBT = str(Path(sys.executable).with_name("dbt"))
SHIPMENTS = 200
MARTS = (
    "fct_shipments",
    "fct_shipment_milestones",
    "fct_transit_times",
    "fct_on_time_performance",
    "dim_code_conversions",
)


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    # the file name matters: a DuckDB file named like a schema ("freight.duckdb") makes
    # "freight.<table>" ambiguous
    path = tmp_path_factory.mktemp("dbt") / "warehouse.duckdb"
    info = build_freight_database(path, shipments=SHIPMENTS)
    return {"path": path, **info}


@pytest.fixture(scope="module")
def dbt_build(warehouse: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    from dagster_dbt import DbtCliResource

    target = tmp_path_factory.mktemp("dbt_target")
    previous = os.environ.get("FREIGHT_DBT_DATABASE")
    os.environ["FREIGHT_DBT_DATABASE"] = str(warehouse["path"])
    try:
        dbt = DbtCliResource(project_dir=str(DBT_DIR), profiles_dir=str(DBT_DIR), dbt_executable=DBT)
        invocation = dbt.cli(["build"], raise_on_error=False, target_path=target).wait()
        run_results = invocation.get_artifact("run_results.json")
        yield {"successful": invocation.is_successful(), "run_results": run_results, "target": target}
    finally:
        if previous is None:
            os.environ.pop("FREIGHT_DBT_DATABASE", None)
        else:
            os.environ["FREIGHT_DBT_DATABASE"] = previous


def _results(run_results: dict[str, Any]) -> dict[str, str]:
    return {r["unique_id"]: r["status"] for r in run_results["results"]}


def _query(warehouse: dict[str, Any], sql: str) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(warehouse["path"]), read_only=True) as con:
        return con.execute(sql).fetchall()


def test_dbt_build_succeeds(dbt_build: dict[str, Any]) -> None:
    statuses = _results(dbt_build["run_results"])
    failed = {uid: status for uid, status in statuses.items() if status not in ("success", "pass", "warn")}
    assert failed == {}
    assert dbt_build["successful"]
    # every model and test ran; warnings would point at data the spec does not allow
    warned = sorted(uid for uid, status in statuses.items() if status == "warn")
    assert warned == []
    assert sum(uid.startswith("model.") for uid in statuses) == len(FREIGHT_TABLES) + 1 + len(MARTS)


def test_unit_tests_ran_and_passed(dbt_build: dict[str, Any]) -> None:
    statuses = _results(dbt_build["run_results"])
    unit = {uid.rsplit(".", 1)[-1]: status for uid, status in statuses.items() if uid.startswith("unit_test.")}
    assert unit == {
        "test_milestone_delay_is_actual_minus_planned": "pass",
        "test_on_time_share_with_tolerance": "pass",
        "test_on_time_tolerance_is_a_var": "pass",
    }


def test_marts_land_in_analytics_and_staging_in_staging(dbt_build: dict[str, Any], warehouse: dict[str, Any]) -> None:
    rows = _query(
        warehouse,
        "select table_schema, table_name, table_type from information_schema.tables "
        "where table_schema in ('analytics', 'staging', 'intermediate')",
    )
    by_schema: dict[str, dict[str, str]] = {}
    for schema, name, kind in rows:
        by_schema.setdefault(schema, {})[name] = kind
    assert by_schema["analytics"] == dict.fromkeys(MARTS, "BASE TABLE")
    assert by_schema["staging"] == {f"stg_{spec.name}": "VIEW" for spec in FREIGHT_TABLES}


def test_mart_grain(dbt_build: dict[str, Any], warehouse: dict[str, Any]) -> None:
    counts = warehouse["counts"]
    assert counts["shipments"] == SHIPMENTS
    (shipments,) = _query(warehouse, "select count(*) from analytics.fct_shipments")[0]
    assert shipments == counts["shipments"]
    (duplicates,) = _query(
        warehouse,
        "select count(*) from (select shipment_id, event_code from analytics.fct_shipment_milestones "
        "group by all having count(*) > 1)",
    )[0]
    assert duplicates == 0
    (milestones, source_keys) = _query(
        warehouse,
        "select (select count(*) from analytics.fct_shipment_milestones), "
        "(select count(distinct (shipment_id, event)) from freight.shipment_events)",
    )[0]
    assert milestones == source_keys > 0
    (transit, transit_unique) = _query(
        warehouse, "select count(*), count(distinct shipment_id) from analytics.fct_transit_times"
    )[0]
    assert 0 < transit == transit_unique <= shipments
    (conversions,) = _query(warehouse, "select count(*) from analytics.dim_code_conversions")[0]
    assert conversions == counts["code_conversions"]


def test_marts_carry_lane_carrier_and_on_time_figures(dbt_build: dict[str, Any], warehouse: dict[str, Any]) -> None:
    by_mode = {
        mode: (total, lanes, carriers)
        for mode, total, lanes, carriers in _query(
            warehouse,
            "select mode_of_transport, count(*), count(lane), count(carrier_name) "
            "from analytics.fct_shipments group by all",
        )
    }
    for mode in ("AIR", "SEA"):
        total, lanes, carriers = by_mode[mode]
        # every AIR/SEA shipment has main-carriage legs naming an airline or a vessel
        assert lanes == total and carriers >= 0.9 * total, (mode, total, lanes, carriers)
    # the on-time mart adds up to the shipments with a planned arrival
    planned, arrived, on_time, late, bad_share = _query(
        warehouse,
        "select sum(shipments_planned), sum(shipments_arrived), sum(shipments_on_time), sum(shipments_late), "
        "count(*) filter (where on_time_share < 0 or on_time_share > 1) from analytics.fct_on_time_performance",
    )[0]
    (planned_source,) = _query(
        warehouse,
        "select count(*) from freight.shipment_events "
        "where event = 'POD_ARRIVAL' and type = 'ESTIMATED' and event_at is not null",
    )[0]
    assert planned == planned_source
    assert arrived == on_time + late and on_time > 0 and bad_share == 0


def test_dbt_parse_needs_no_database(tmp_path: Path) -> None:
    """Dagster parses the project at load time (``dbt parse``), before any warehouse exists."""
    env = {**os.environ, "FREIGHT_DBT_DATABASE": str(tmp_path / "missing" / "warehouse.duckdb")}
    result = subprocess.run(
        [
            DBT,
            "parse",
            "--project-dir",
            str(DBT_DIR),
            "--profiles-dir",
            str(DBT_DIR),
            "--target-path",
            str(tmp_path / "target"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert not (tmp_path / "missing").exists()
    manifest = json.loads((tmp_path / "target" / "manifest.json").read_text())
    keys = {source["name"]: source["config"]["meta"]["dagster"]["asset_key"] for source in manifest["sources"].values()}
    assert keys == {spec.name: ["freight", spec.name] for spec in FREIGHT_TABLES}


def test_staging_files_match_table_specs(tmp_path: Path) -> None:
    """The generated sources and staging models are up to date with ``normalize/tables.py``."""
    sys.path.insert(0, str(DBT_DIR / "scripts"))
    try:
        import generate_staging
    finally:
        sys.path.remove(str(DBT_DIR / "scripts"))
    stale = [
        str(path.relative_to(ROOT))
        for path, text in generate_staging.render().items()
        if not path.exists() or path.read_text() != text
    ]
    assert stale == [], "run: .venv/bin/python dbt_models/scripts/generate_staging.py"


def test_source_freshness_passes_on_fresh_data(dbt_build: dict[str, Any], warehouse: dict[str, Any]) -> None:
    env = {**os.environ, "FREIGHT_DBT_DATABASE": str(warehouse["path"])}
    result = subprocess.run(
        [
            DBT,
            "source",
            "freshness",
            "--project-dir",
            str(DBT_DIR),
            "--profiles-dir",
            str(DBT_DIR),
            "--target-path",
            str(Path(dbt_build["target"]) / "freshness"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    sources = json.loads((Path(dbt_build["target"]) / "freshness" / "sources.json").read_text())
    checked = {r["unique_id"].rsplit(".", 1)[-1]: r["status"] for r in sources["results"]}
    assert checked == {"shipments": "pass", "shipment_events": "pass", "code_conversions": "pass"}


def test_every_mart_column_is_documented(dbt_build: dict[str, Any], warehouse: dict[str, Any]) -> None:
    manifest = json.loads((Path(dbt_build["target"]) / "manifest.json").read_text())
    models = {n["name"]: n for n in manifest["nodes"].values() if n["resource_type"] == "model"}
    for mart in MARTS:
        built = [
            name
            for (name,) in _query(
                warehouse,
                "select column_name from information_schema.columns "
                f"where table_schema = 'analytics' and table_name = '{mart}' order by ordinal_position",
            )
        ]
        documented = {name: c["description"] for name, c in models[mart]["columns"].items()}
        assert sorted(built) == sorted(documented), mart
        assert all(documented.values()), mart
        assert models[mart]["description"], mart
