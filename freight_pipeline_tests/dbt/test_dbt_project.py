"""The dbt project builds on a real ``freight`` schema, with the expected grain, tests and unit tests.

The ``freight`` tables are created from the table specs' DDL and filled by the project's normalizer
(documents of the bundled simulator when it exists, else handmade ones; see ``freight_db``). dbt
runs in the pipeline's dbt worker, the same way the job runs it.
"""

from __future__ import annotations

import importlib
import json
import re
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml

from freight_pipeline.config import REPO_ROOT
from freight_pipeline.normalize.tables import FREIGHT_TABLES
from freight_pipeline.warehouse.history import HISTORY_TABLES
from freight_pipeline_tests.dbt.dbt_cli import DBT_DIR, run_dbt

MARTS = (
    "fct_shipments",
    "fct_shipment_milestones",
    "fct_transit_times",
    "fct_on_time_performance",
    "fct_shipment_documents",
    "dim_code_conversions",
    "fct_eta_accuracy",
    "fct_eta_accuracy_monthly",
    "fct_estimate_revisions",
)
INTERMEDIATE = ("int_main_carriage_legs", "int_milestone_estimate_versions", "int_milestone_actuals")
SOURCE_TABLES = (*FREIGHT_TABLES, *HISTORY_TABLES)
"""Every table a staging view sits on: ``freight`` and ``freight_history``."""


def _results(run_results: dict[str, Any]) -> dict[str, str]:
    return {r["unique_id"]: r["status"] for r in run_results["results"]}


def _query(warehouse: dict[str, Any], sql: str) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(warehouse["path"]), read_only=True) as con:
        con.execute("set TimeZone = 'UTC'")
        return con.execute(sql).fetchall()


def _project_var(name: str) -> Any:
    return yaml.safe_load((DBT_DIR / "dbt_project.yml").read_text())["vars"][name]


def test_dbt_build_succeeds(dbt_build: dict[str, Any]) -> None:
    statuses = _results(dbt_build["run_results"])
    failed = {uid: status for uid, status in statuses.items() if status not in ("success", "pass", "warn")}
    assert failed == {}
    assert dbt_build["successful"]
    # every model and test ran; warnings would point at data the spec does not allow
    warned = sorted(uid for uid, status in statuses.items() if status == "warn")
    assert warned == []
    assert sum(uid.startswith("model.") for uid in statuses) == len(SOURCE_TABLES) + len(INTERMEDIATE) + len(MARTS)
    # the build logged into its temporary target, not into dbt_models/logs
    assert (Path(dbt_build["target"]) / "dbt.log").is_file()


def test_the_unit_tests_pass_whatever_vars_a_run_sets(warehouse: dict[str, Any], tmp_path: Path) -> None:
    """dbt_models/README.md's per-run override (``--vars '{on_time_tolerance_minutes: 30, ...}'``): every unit test
    pins the vars it is about (was: the on-time unit test failed, its mart and 8 nodes skipped)."""
    done, _ = run_dbt(["test", "--select", "test_type:unit", "--vars",
                       "{on_time_tolerance_minutes: 30, eta_horizons_days: [10, 5, 2]}"], tmp_path, warehouse["path"])
    assert done.returncode == 0, done.stdout[-3000:]


def test_unit_tests_ran_and_passed(dbt_build: dict[str, Any]) -> None:
    statuses = _results(dbt_build["run_results"])
    unit = {uid.rsplit(".", 1)[-1]: status for uid, status in statuses.items() if uid.startswith("unit_test.")}
    assert unit == {
        "test_main_carriage_legs_one_source_in_leg_no_order": "pass",
        "test_lane_and_carrier_from_main_carriage_legs": "pass",
        "test_milestone_delay_is_actual_minus_planned": "pass",
        "test_milestone_keeps_the_date_of_a_date_only_event": "pass",
        "test_milestone_carries_unknown_event_types_and_codes": "pass",
        "test_on_time_carries_unknown_modes_and_event_types": "pass",
        "test_code_conversion_with_unknown_direction_is_kept": "pass",
        "test_transit_time_from_actual_departure_and_arrival": "pass",
        "test_on_time_share_with_tolerance": "pass",
        "test_on_time_tolerance_is_a_var": "pass",
        "test_on_time_tolerance_as_long_as_a_setting_takes": "pass",
        "test_on_time_by_day_when_an_instant_is_missing": "pass",
        "test_eta_horizons_are_a_var_and_the_version_in_force_starts_at_the_horizon": "pass",
        "test_revisions_count_moves_between_consecutive_estimates": "pass",
        "test_document_type_matches_short_words_whole": "pass",
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
    assert by_schema["staging"] == {f"stg_{spec.name}": "VIEW" for spec in SOURCE_TABLES}
    assert by_schema["intermediate"] == dict.fromkeys(INTERMEDIATE, "VIEW")


def test_mart_grain(dbt_build: dict[str, Any], warehouse: dict[str, Any]) -> None:
    counts = warehouse["counts"]
    assert counts["shipments"] == warehouse["shipments"]
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
    # one row per shipment with an actual POL_DEPARTURE and an actual POD_ARRIVAL instant
    (transit, transit_unique, both_actuals) = _query(
        warehouse,
        "select count(*), count(distinct shipment_id), "
        "(select count(*) from (select shipment_id from freight.shipment_events "
        "  where type = 'ACTUAL' and event_at is not null and event in ('POL_DEPARTURE', 'POD_ARRIVAL') "
        "  group by shipment_id having count(distinct event) = 2)) "
        "from analytics.fct_transit_times",
    )[0]
    assert 0 < transit == transit_unique == both_actuals <= shipments
    (conversions,) = _query(warehouse, "select count(*) from analytics.dim_code_conversions")[0]
    assert conversions == counts["code_conversions"]


def _expected_lanes_and_carriers(warehouse: dict[str, Any]) -> dict[int, tuple[str | None, str | None]]:
    """Lane and carrier of every shipment, recomputed in Python from the freight tables: the legs of
    the air/sea endpoints, else the embedded main-carriage legs, in leg_no order."""
    modes = dict(_query(warehouse, "select shipment_id, mode_of_transport from freight.shipments"))
    legs: dict[int, dict[str, list[tuple[Any, ...]]]] = {}
    for source, shipment_id, position, leg_no, origin, destination, airline, vessel in _query(
        warehouse,
        "select 'air', shipment_id, position, leg_no, origin_unloc, destination_unloc, airline_name, null "
        "from freight.air_main_carriage_legs "
        "union all select 'sea', shipment_id, position, leg_no, origin_unloc, destination_unloc, null, vessel_name "
        "from freight.sea_main_carriage_legs "
        "union all select 'embedded', shipment_id, leg_position, leg_no, origin_unloc, destination_unloc, "
        "airline_name, vessel_name from freight.carriage_legs where carriage = 'main'",
    ):
        legs.setdefault(shipment_id, {}).setdefault(source, []).append(
            (leg_no is None, leg_no or 0, position, origin, destination, airline, vessel)
        )
    expected: dict[int, tuple[str | None, str | None]] = {}
    for shipment_id, mode in modes.items():
        sources = legs.get(shipment_id, {})
        endpoint = [sorted(sources[kind]) for kind in ("air", "sea") if kind in sources]
        chosen = min(endpoint) if endpoint else sorted(sources.get("embedded", []))
        if not chosen:
            expected[shipment_id] = (None, None)
            continue
        origin, destination = chosen[0][3], chosen[-1][4]
        lane = f"{origin}-{destination}" if origin and destination else None
        names = [leg[5] for leg in chosen] if mode == "AIR" else [leg[6] for leg in chosen] if mode == "SEA" else []
        expected[shipment_id] = (lane, next((name for name in names if name is not None), None))
    return expected


def test_lane_and_carrier_match_a_recomputation_from_the_legs(
    dbt_build: dict[str, Any], warehouse: dict[str, Any]
) -> None:
    built = {
        shipment_id: (lane, carrier)
        for shipment_id, lane, carrier in _query(
            warehouse, "select shipment_id, lane, carrier_name from analytics.fct_shipments"
        )
    }
    expected = _expected_lanes_and_carriers(warehouse)
    assert built == expected
    # the data exercises the rules: multi-leg main carriages, endpoint and embedded sources, carriers
    (multi_leg, endpoint, embedded) = _query(
        warehouse,
        "select count(*) filter (where main_carriage_leg_count > 1), "
        "count(*) filter (where main_carriage_source in ('airmaincarriage', 'seamaincarriage')), "
        "count(*) filter (where main_carriage_source = 'shipment') from analytics.fct_shipments",
    )[0]
    assert multi_leg > 0 and endpoint > 0 and embedded > 0
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


def test_on_time_mart_matches_a_recomputation_from_the_events(
    dbt_build: dict[str, Any], warehouse: dict[str, Any]
) -> None:
    """The mart's counts per month and mode equal those recomputed from freight.shipment_events:
    planned = a POD_ARRIVAL estimate with at least a date; exact when both sides have an instant
    (actual <= planned + tolerance), else by day (actual date <= planned date)."""
    tolerance = int(_project_var("on_time_tolerance_minutes"))
    recomputed = _query(
        warehouse,
        f"""
        with arrivals as (
            select
                shipment_id,
                max(event_at) filter (where type = 'ESTIMATED') as planned_at,
                max(event_date) filter (where type = 'ESTIMATED') as planned_date,
                max(event_at) filter (where type = 'ACTUAL') as actual_at,
                max(event_date) filter (where type = 'ACTUAL') as actual_date
            from freight.shipment_events
            where event = 'POD_ARRIVAL'
            group by shipment_id
        ),
        judged as (
            select
                cast(date_trunc('month', coalesce(planned_at, cast(planned_date as timestamptz))) as date) as month,
                shipments.mode_of_transport,
                actual_date is not null as arrived,
                planned_at is null or actual_at is null as by_date,
                case
                    when planned_at is not null and actual_at is not null
                        then actual_at <= planned_at + to_minutes({tolerance})
                    else actual_date <= planned_date
                end as on_time
            from arrivals
            join freight.shipments using (shipment_id)
            where planned_date is not null
        )
        select month, mode_of_transport, count(*),
            count(*) filter (where arrived),
            count(*) filter (where arrived and on_time),
            count(*) filter (where arrived and not on_time),
            count(*) filter (where arrived and by_date)
        from judged group by all
        """,
    )
    mart = _query(
        warehouse,
        "select arrival_month, mode_of_transport, sum(shipments_planned), sum(shipments_arrived), "
        "sum(shipments_on_time), sum(shipments_late), sum(shipments_judged_by_date) "
        "from analytics.fct_on_time_performance group by all",
    )

    def by_key(rows: list[tuple[Any, ...]]) -> dict[tuple[Any, Any], tuple[int, ...]]:
        return {(month, mode): tuple(int(n) for n in counts) for month, mode, *counts in rows}

    assert by_key(mart) == by_key(recomputed)
    totals = [sum(counts[i] for counts in by_key(recomputed).values()) for i in range(5)]
    planned, arrived, on_time, late, by_date = totals
    # the data covers what is being compared: arrivals on time, late, and judged by day
    assert planned > arrived > 0 and on_time > 0 and late > 0 and by_date > 0, totals
    tolerances, bad_share = _query(
        warehouse,
        "select list(distinct on_time_tolerance_minutes), "
        "count(*) filter (where on_time_share < 0 or on_time_share > 1) from analytics.fct_on_time_performance",
    )[0]
    assert tolerances == [tolerance] and bad_share == 0


def test_dbt_parse_needs_no_database(tmp_path: Path) -> None:
    """Dagster parses the project at load time (``dbt parse``), before any warehouse exists."""
    result, target = run_dbt(["parse"], tmp_path, tmp_path / "missing" / "warehouse.duckdb")
    assert result.returncode == 0, result.stdout + result.stderr
    assert not (tmp_path / "missing").exists()
    manifest = json.loads((target / "manifest.json").read_text())
    keys = {source["name"]: source["config"]["meta"]["dagster"]["asset_key"] for source in manifest["sources"].values()}
    assert keys == {spec.name: [spec.schema, spec.name] for spec in SOURCE_TABLES}
    # dbt_project.yml flags: no usage events sent (no network; no .user.yml next to profiles.yml)
    assert manifest["metadata"]["send_anonymous_usage_stats"] is False


def _generate_staging() -> Any:
    """The generator module, imported without writing __pycache__ into dbt_models/scripts."""
    sys.path.insert(0, str(DBT_DIR / "scripts"))
    previous, sys.dont_write_bytecode = sys.dont_write_bytecode, True
    try:
        return importlib.import_module("generate_staging")
    finally:
        sys.dont_write_bytecode = previous
        sys.path.remove(str(DBT_DIR / "scripts"))


def test_staging_files_match_table_specs() -> None:
    """The generated sources, staging models and code-list macros are up to date with
    ``normalize/tables.py`` and ``client/models.py``."""
    generate_staging = _generate_staging()
    stale = [
        str(path.relative_to(REPO_ROOT))
        for path, text in generate_staging.render().items()
        if not path.exists() or path.read_text() != text
    ]
    assert stale == [], "run: .venv/bin/python dbt_models/scripts/generate_staging.py"


def test_accepted_values_use_the_code_list_macros(dbt_build: dict[str, Any]) -> None:
    """No YAML file repeats a code list: accepted_values of codes call the generated macros, and
    those return the client's lists."""
    from freight_pipeline.client.models import EVENT_CODES, EVENT_TYPES

    generate_staging = _generate_staging()
    assert generate_staging.CODE_LISTS["freight_event_codes"][0] == EVENT_CODES
    assert generate_staging.CODE_LISTS["freight_event_types"][0] == EVENT_TYPES
    codes = {code for code_list in generate_staging.CODE_LISTS.values() for code in code_list.values}
    literal, via_macro = [], []
    for path in sorted((DBT_DIR / "models").rglob("*.yml")):
        for model in yaml.safe_load(path.read_text()).get("models", []):
            for column in model.get("columns", []):
                for test in column.get("data_tests", []):
                    if isinstance(test, dict) and "accepted_values" in test:
                        values = test["accepted_values"]["arguments"]["values"]
                        if isinstance(values, str):
                            via_macro.append((model["name"], column["name"], values))
                        elif codes & set(values):
                            literal.append((model["name"], column["name"], values))
    assert literal == []
    assert ("fct_shipment_milestones", "event_code", "{{ freight_event_codes() }}") in via_macro
    # the macro renders to the list in the compiled test (the SQL the build ran, under target/compiled/)
    target = Path(dbt_build["target"])
    manifest = json.loads((target / "manifest.json").read_text())
    compiled = [
        (target / "compiled" / node["package_name"] / node["original_file_path"] / node["path"]).read_text()
        for node in manifest["nodes"].values()
        if node["resource_type"] == "test" and node["name"].startswith("accepted_values_fct_shipment_milestones_event")
    ]
    assert len(compiled) == 1 and all(f"'{code}'" in compiled[0] for code in EVENT_CODES)


def test_every_leg_position_is_described_in_leg_no_order() -> None:
    """Every model column carrying a leg's position (the freight tables' ``position`` / ``leg_position``, and the
    models' columns made of them) says it counts in ``leg_no`` order, as the contract does, never in the order the
    service answered."""
    described = {}
    for path in sorted((DBT_DIR / "models").rglob("*.yml")):
        for model in yaml.safe_load(path.read_text()).get("models", []):
            for column in model.get("columns", []):
                if column["name"] in ("leg_position", "source_position") or (
                        column["name"] == "position" and "leg" in model["name"]):
                    described[(model["name"], column["name"])] = column.get("description", "")
    assert {("fct_eta_accuracy", "leg_position"), ("fct_estimate_revisions", "leg_position"),
            ("int_main_carriage_legs", "source_position"), ("stg_sea_main_carriage_legs", "position")} <= set(described)
    assert {key: text for key, text in described.items() if "in leg_no order" not in text} == {}


# Every data test of severity warn: (test, model, column). The rule (dbt_models/README.md, "Test
# severity"): a test on what the service sends warns, a test on what the pipeline guarantees fails.
WARN_TESTS = {
    # codes, types, modes and directions as sent by the service
    ("accepted_values", "stg_shipment_events", "event_code"),
    ("accepted_values", "stg_shipment_events", "event_type"),
    ("accepted_values", "stg_shipments", "mode_of_transport"),
    ("accepted_values", "stg_shipments", "direction"),
    ("accepted_values", "stg_code_conversions", "direction"),
    ("accepted_values", "fct_shipment_milestones", "event_code"),
    ("accepted_values", "fct_shipments", "mode_of_transport"),
    ("accepted_values", "dim_code_conversions", "direction"),
    # rows fetched apart from their shipment: whether it exists is the service's
    ("relationships", "stg_shipment_events", "shipment_id"),
    ("relationships", "stg_air_main_carriage_legs", "shipment_id"),
    ("relationships", "stg_sea_main_carriage_legs", "shipment_id"),
    ("relationships", "stg_shipment_memos", "shipment_id"),
    ("relationships", "stg_shipment_documents", "shipment_id"),
    ("relationships", "fct_shipment_documents", "shipment_id"),
    ("relationships", "int_main_carriage_legs", "shipment_id"),
    ("relationships", "fct_shipment_milestones", "shipment_id"),
    # the key after staging upper-cases event and type: case variants sent by the service collapse
    ("unique_combination_of_columns", "stg_shipment_events", None),
    ("unique_combination_of_columns", "stg_event_versions", None),
    # instants sent by the service
    ("value_between", "fct_transit_times", "transit_hours"),
}


def test_tests_on_source_values_warn_and_on_pipeline_guarantees_fail(dbt_build: dict[str, Any]) -> None:
    """Only the tests listed in WARN_TESTS warn; every other test (keys unique and not null,
    relationships within one stream, carriage values, the marts' own buckets and counts) is an
    error. Code lists say who controls them, and their accepted_values tests follow."""
    manifest = json.loads((Path(dbt_build["target"]) / "manifest.json").read_text())
    severities: dict[tuple[str, str, str | None], str] = {}
    for node in manifest["nodes"].values():
        if node["resource_type"] == "test" and node.get("test_metadata"):
            model = node["attached_node"].rsplit(".", 1)[-1]
            key = (node["test_metadata"]["name"], model, node.get("column_name"))
            assert key not in severities, key
            severities[key] = node["config"]["severity"].lower()
    assert {key for key, severity in severities.items() if severity == "warn"} == WARN_TESTS
    assert set(severities.values()) == {"warn", "error"}
    assert len(severities) > 100  # the scan saw the project's tests
    for key in [("unique", "stg_shipments", "shipment_id"), ("accepted_values", "stg_carriage_legs", "carriage"),
                ("accepted_values", "int_main_carriage_legs", "leg_source"),
                ("accepted_values", "fct_on_time_performance", "mode_of_transport"),
                ("relationships", "stg_shipment_goods", "shipment_id")]:
        assert severities[key] == "error", key
    generate_staging = _generate_staging()
    by_service = {name for name, code_list in generate_staging.CODE_LISTS.items() if code_list.sent_by_service}
    assert by_service == {
        "freight_event_codes", "freight_event_types", "freight_modes_of_transport",
        "freight_shipment_directions", "freight_conversion_directions",
    }


def test_source_freshness_passes_on_fresh_data(
    dbt_build: dict[str, Any], warehouse: dict[str, Any], tmp_path: Path
) -> None:
    result, target = run_dbt(["source", "freshness"], tmp_path, warehouse["path"])
    assert result.returncode == 0, result.stdout + result.stderr
    sources = json.loads((target / "sources.json").read_text())
    checked = {r["unique_id"].rsplit(".", 1)[-1]: r["status"] for r in sources["results"]}
    assert checked == {"shipments": "pass", "shipment_events": "pass", "code_conversions": "pass"}


def test_every_model_and_column_is_documented(dbt_build: dict[str, Any], warehouse: dict[str, Any]) -> None:
    """Every model (staging, intermediate, marts) and every column it builds has a description: the marts' become
    the published file's comments (``persist_docs``), the others are what dbt's docs show."""
    manifest = json.loads((Path(dbt_build["target"]) / "manifest.json").read_text())
    models = {n["name"]: n for n in manifest["nodes"].values() if n["resource_type"] == "model"}
    assert set(MARTS) <= set(models) and len(models) > len(MARTS)
    for name, model in models.items():
        built = [column for (column,) in _query(
            warehouse, "select column_name from information_schema.columns "
            f"where table_schema = '{model['schema']}' and table_name = '{name}' order by ordinal_position")]
        documented = {column: c["description"] for column, c in model["columns"].items()}
        assert built and sorted(built) == sorted(documented), name
        assert all(text.strip() for text in documented.values()), name
        assert model["description"].strip(), name


def test_report_average_delay_by_mode_matches_the_milestones(published: Path) -> None:
    """``on_time_by_mode`` (the demo's on-time table) on the published marts: per mode, the average
    delay is the mean delay_minutes of the planned and arrived POD_ARRIVAL milestones that have one,
    date-only arrivals left out (the mart's per-group averages are rounded to 2 decimals)."""
    from freight_pipeline.commands.report import on_time_by_mode
    from freight_pipeline.warehouse.embedded import EmbeddedDuckDB

    data_dir = published / "data"
    with duckdb.connect(str(data_dir / "warehouse.duckdb"), read_only=True) as con:
        rows = con.execute(
            "select s.mode_of_transport, avg(m.delay_minutes), count(*) filter (where m.delay_minutes is null) "
            "from analytics.fct_shipment_milestones m join analytics.fct_shipments s using (shipment_id) "
            "where m.event_code = 'POD_ARRIVAL' and (m.planned_at is not null or m.planned_date is not null) "
            "and (m.actual_at is not null or m.actual_date is not null) group by all"
        ).fetchall()
    expected = {mode: avg for mode, avg, _ in rows}
    # the data covers the case: some mode has arrivals without a delay in minutes (judged by date)
    assert any(untimed for _, _, untimed in rows), rows

    report = {row["mode_of_transport"]: row["avg_delay_minutes"] for row in on_time_by_mode(data_dir, EmbeddedDuckDB())}

    assert report.keys() == expected.keys()
    for mode, avg in expected.items():
        assert report[mode] == (None if avg is None else pytest.approx(float(avg), abs=0.01)), mode


def test_var_defaults_are_declared_once_in_dbt_project_yml() -> None:
    """Every ``var()`` the SQL uses is declared in ``dbt_project.yml`` and called without a default
    of its own, so that file holds the only default (a second one could silently disagree)."""
    declared = yaml.safe_load((DBT_DIR / "dbt_project.yml").read_text())["vars"]
    calls = [
        (path.relative_to(DBT_DIR), match)
        for folder in ("models", "macros", "tests", "snapshots", "analyses")  # not target/
        for path in sorted((DBT_DIR / folder).glob("**/*.sql"))
        for match in re.findall(r"\bvar\(([^)]*)\)", path.read_text())
    ]
    assert calls, "no var() call found: the scan is broken"
    for path, args in calls:
        name, *default = [arg.strip() for arg in args.split(",")]
        assert not default, f"{path}: var({args}) repeats a default"
        assert name.strip("'\"") in declared, f"{path}: var {name} is not declared in dbt_project.yml"


def test_documents_per_shipment_by_type(dbt_build: dict[str, Any], warehouse: dict[str, Any]) -> None:
    """``fct_shipment_documents`` counts the documents of each shipment by type (freight_db.DOCUMENT_SETS)."""
    from freight_pipeline_tests.dbt.freight_db import DOCUMENT_SETS

    ids = [r[0] for r in _query(warehouse, "select shipment_id from freight.shipments order by shipment_id")]
    names = {"Commercial invoice": "COMMERCIAL_INVOICE", "Bill of lading": "BILL_OF_LADING",
             "Packing list": "PACKING_LIST", "Air waybill": "AIR_WAYBILL"}
    want: dict[tuple[int, str], int] = {}
    for n, shipment_id in enumerate(ids):
        for kind in DOCUMENT_SETS[n % len(DOCUMENT_SETS)]:
            want[(shipment_id, names[kind])] = want.get((shipment_id, names[kind]), 0) + 1
    got = _query(warehouse, "select shipment_id, document_type, document_count, is_transport_document "
                            "from analytics.fct_shipment_documents")
    assert {(s, t): c for s, t, c, _ in got} == want
    assert {t for _, t, _, transport in got if transport} == {"BILL_OF_LADING", "AIR_WAYBILL"}
    # the README's question: shipments without a commercial invoice (every fourth has no document at all)
    (missing,) = _query(warehouse, "select count(*) from analytics.fct_shipments s where not exists (select 1 from "
                                   "analytics.fct_shipment_documents d where d.shipment_id = s.shipment_id "
                                   "and d.document_type = 'COMMERCIAL_INVOICE')")[0]
    assert missing == len([n for n in range(len(ids)) if "Commercial invoice" not in DOCUMENT_SETS[n % 4]]) > 0
