"""One bad record never stops the pipeline; a broken pipeline guarantee does, and says which.

Two real dbt builds on real DuckDB files made by ``freight_db``:

* values the service controls but the spec does not list (an event type, an event code, a mode of
  transport, directions): the build succeeds, the tests on them warn, the marts carry the rows;
* an orphan goods line (the sync writes goods only with their shipment): the build fails, and
  ``DbtBuildFailed``'s first line, made from the build's ``run_results.json``, names the failed
  test and the skipped marts.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pytest
from dagster._utils.error import SerializableErrorInfo, serializable_error_info_from_exc_info

from freight_pipeline.commands.execute import describe_error
from freight_pipeline.marts.results import DbtBuildFailed, build_warnings, read_run_results
from freight_pipeline_tests.dbt.dbt_cli import run_dbt_in_worker
from freight_pipeline_tests.dbt.freight_db import (
    UNKNOWN_CODE,
    UNKNOWN_CONVERSION_DIRECTION,
    UNKNOWN_DIRECTION,
    UNKNOWN_MODE,
    UNKNOWN_TYPE,
    UnknownValues,
    add_orphan_goods_line,
    add_unknown_values,
    build_freight_database,
)

SHIPMENTS = 40
WARNED = {
    "accepted_values_stg_shipment_events_event_type___freight_event_types_",
    "accepted_values_stg_shipment_events_event_code___freight_event_codes_",
    "accepted_values_stg_shipments_mode_of_transport___freight_modes_of_transport_",
    "accepted_values_stg_shipments_direction___freight_shipment_directions_",
    "accepted_values_stg_code_conversions_direction___freight_conversion_directions_",
    "accepted_values_fct_shipment_milestones_event_code___freight_event_codes_",
    "accepted_values_fct_shipments_mode_of_transport___freight_modes_of_transport_",
    "accepted_values_dim_code_conversions_direction___freight_conversion_directions_",
}
ORPHAN_TEST = "relationships_stg_shipment_goods_shipment_id__shipment_id__ref_stg_shipments_"
SKIPPED_MARTS = (  # every mart on fct_shipments
    "fct_shipments", "fct_on_time_performance", "fct_transit_times", "fct_eta_accuracy", "fct_eta_accuracy_monthly",
    "fct_estimate_revisions",
)


@dataclass
class Build:
    database: Path
    target: Path
    returncode: int
    output: str
    run_results: dict[str, Any]

    def statuses(self) -> dict[str, str]:
        """Test/model name (without dbt's hash) -> status."""
        out = {}
        for result in self.run_results["results"]:
            kind, _, name, *rest = result["unique_id"].split(".")
            out[name if kind == "test" else ".".join([name, *rest])] = result["status"]
        return out

    def query(self, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
        with duckdb.connect(str(self.database), read_only=True) as con:
            return con.execute(sql, params or []).fetchall()


def _build(tmp: Path, database: Path) -> Build:
    result, target = run_dbt_in_worker(["build"], tmp, database)
    run_results = json.loads((target / "run_results.json").read_text())
    return Build(database, target, result.returncode, result.stdout + result.stderr, run_results)


@pytest.fixture(scope="module")
def unknown(tmp_path_factory: pytest.TempPathFactory) -> tuple[Build, UnknownValues]:
    tmp = tmp_path_factory.mktemp("dbt_unknown")
    database = tmp / "warehouse.duckdb"
    build_freight_database(database, shipments=SHIPMENTS)
    where = add_unknown_values(database)
    return _build(tmp, database), where


@pytest.fixture(scope="module")
def broken(tmp_path_factory: pytest.TempPathFactory) -> Build:
    tmp = tmp_path_factory.mktemp("dbt_broken")
    database = tmp / "warehouse.duckdb"
    build_freight_database(database, shipments=SHIPMENTS)
    add_unknown_values(database)  # warnings as well: they must not be reported as failures
    add_orphan_goods_line(database)
    return _build(tmp, database)


def test_unknown_source_values_only_warn(unknown: tuple[Build, UnknownValues]) -> None:
    build, _ = unknown
    assert build.returncode == 0, build.output
    statuses = build.statuses()
    assert {name for name, status in statuses.items() if status not in ("success", "pass", "warn")} == set()
    assert {name for name, status in statuses.items() if status == "warn"} == WARNED
    # each warning is logged in Dagster: one line per test, naming it
    warnings = build_warnings(build.run_results)
    assert len(warnings) == len(WARNED)
    for name in WARNED:
        line = next(w for w in warnings if f" {name} " in w)
        assert line.startswith(f"dbt test {name} warned") and "Got 1 result" in line, line


def test_milestones_carry_unknown_event_types_and_codes(unknown: tuple[Build, UnknownValues]) -> None:
    build, where = unknown
    rows = build.query(
        "select shipment_id, event_code, is_known_event_code, is_known_event_type, unknown_type_events, "
        "unknown_event_types, has_planned, has_actual from analytics.fct_shipment_milestones "
        "where not is_known_event_code or not is_known_event_type order by all"
    )
    assert sorted(rows) == sorted(
        [
            # the ESTIMATED and ACTUAL arrival are still the plan and the actual
            (where.extra_type_shipment, "POD_ARRIVAL", True, False, 1, UNKNOWN_TYPE, True, True),
            # a milestone whose only event has an unknown type keeps its row
            (where.only_type_shipment, where.only_type_code, True, False, 1, UNKNOWN_TYPE, False, False),
            (where.code_shipment, UNKNOWN_CODE, False, True, 0, None, False, True),
        ]
    )
    # nothing is dropped: one milestone per (shipment, event code) of the source
    (milestones, source_keys) = build.query(
        "select (select count(*) from analytics.fct_shipment_milestones), "
        "(select count(distinct (shipment_id, event)) from freight.shipment_events)"
    )[0]
    assert milestones == source_keys


def test_shipment_marts_carry_unknown_modes_and_directions(unknown: tuple[Build, UnknownValues]) -> None:
    build, where = unknown
    flagged = build.query(
        "select shipment_id, mode_of_transport, is_known_mode_of_transport, direction, is_known_direction "
        "from analytics.fct_shipments where not (is_known_mode_of_transport and is_known_direction)"
    )
    by_id = {row[0]: row[1:] for row in flagged}
    assert by_id.keys() == {where.mode_shipment, where.direction_shipment}
    assert by_id[where.mode_shipment][:2] == (UNKNOWN_MODE, False) and by_id[where.mode_shipment][3] is True
    assert by_id[where.direction_shipment][1:] == (True, UNKNOWN_DIRECTION, False)
    (shipments,) = build.query("select count(*) from analytics.fct_shipments")[0]
    assert shipments == SHIPMENTS
    assert build.query(
        "select shipment_id, mode_of_transport from analytics.fct_transit_times where not is_known_mode_of_transport"
    ) == [(where.mode_shipment, UNKNOWN_MODE)]
    assert build.query(
        "select direction, direction_name, partner_code, is_known_direction from analytics.dim_code_conversions "
        "where conversion_id = ?",
        [where.conversion_id],
    ) == [(UNKNOWN_CONVERSION_DIRECTION, None, None, False)]


def test_on_time_counts_unknown_modes_in_their_own_bucket(unknown: tuple[Build, UnknownValues]) -> None:
    build, _ = unknown
    assert build.query(
        "select mode_of_transport, shipments_planned, shipments_arrived, unknown_modes_of_transport "
        "from analytics.fct_on_time_performance where mode_of_transport = 'UNKNOWN' or unknown_modes_of_transport "
        "is not null"
    ) == [("UNKNOWN", 1, 1, UNKNOWN_MODE)]
    (modes,) = build.query("select list(distinct mode_of_transport) from analytics.fct_on_time_performance")[0]
    assert set(modes) <= {"SEA", "AIR", "RD", "RL", "UNKNOWN"} and "UNKNOWN" in modes
    # every shipment with a planned arrival is counted, the one of an unknown mode too
    (planned, with_plan) = build.query(
        "select (select sum(shipments_planned) from analytics.fct_on_time_performance), "
        "(select count(*) from analytics.fct_shipment_milestones where event_code = 'POD_ARRIVAL' and has_planned)"
    )[0]
    assert planned == with_plan
    (flagged,) = build.query(
        "select sum(shipments_with_unknown_type_arrivals) from analytics.fct_on_time_performance"
    )[0]
    assert flagged == 1  # extra_type_shipment's arrival, judged on its ESTIMATED and ACTUAL events


def test_a_broken_pipeline_guarantee_fails_the_build(broken: Build) -> None:
    assert broken.returncode == 1, broken.output
    statuses = broken.statuses()
    assert statuses[ORPHAN_TEST] == "fail"
    assert {name for name in SKIPPED_MARTS if statuses[name] == "skipped"} == set(SKIPPED_MARTS)
    assert statuses["fct_shipment_milestones"] == "success"  # does not depend on the goods
    assert {name for name, status in statuses.items() if status == "warn"} == WARNED - {
        "accepted_values_fct_shipments_mode_of_transport___freight_modes_of_transport_"  # its model was skipped
    }


def test_the_failure_names_the_failed_test_and_the_skipped_models(broken: Build) -> None:
    """``DbtBuildFailed`` from the real ``run_results.json``: the first line names the failed test
    and the skipped marts (skipped tests only counted), the next lines say what dbt said."""
    message = str(DbtBuildFailed.from_target(broken.target, broken.returncode))
    first, *details = message.splitlines()
    assert first.startswith(f"dbt build failed: 1 test failed ({ORPHAN_TEST}), 6 models skipped ("), first
    # three named, the others counted
    named = first.split("6 models skipped (", 1)[1].split(" and 3 more)", 1)[0].split(", ")
    assert len(named) == 3 and set(named) <= set(SKIPPED_MARTS), first
    assert "fct_shipment_milestones" not in first and "warn" not in first
    assert first.endswith(" tests skipped") and "unit tests skipped" in first
    # one line per failed node, then where dbt logged; warnings are not failures
    assert details == [f"  test {ORPHAN_TEST} failed: Got 1 result, configured to fail if != 0",
                       f"  dbt log: {broken.target / 'dbt.log'}"]


def test_the_cli_reason_is_the_first_line(broken: Build) -> None:
    """``describe_error`` (the reason ``freight-pipeline sync`` prints) of the exception as Dagster
    records it, under its step-execution wrapper, is ``DbtBuildFailed: <first line>``."""
    try:
        raise DbtBuildFailed.from_target(broken.target, broken.returncode)
    except DbtBuildFailed as exc:
        first = str(exc).splitlines()[0]
        info = serializable_error_info_from_exc_info(sys.exc_info())
    wrapper = SerializableErrorInfo(
        'Error occurred while executing op "freight_dbt_models":\n', [], "DagsterExecutionStepExecutionError",
        cause=info,
    )
    assert describe_error(wrapper) == f"DbtBuildFailed: {first}"
    assert len(first) <= 400


def test_run_results_are_read_from_the_target(broken: Build, tmp_path: Path) -> None:
    assert read_run_results(broken.target) == broken.run_results
    assert read_run_results(tmp_path) is None
