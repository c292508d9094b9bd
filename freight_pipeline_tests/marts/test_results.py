"""``DbtBuildFailed``'s message and the warning lines, from run results shaped as dbt writes them.

(A real failing build's ``run_results.json`` is tested in ``freight_pipeline_tests/dbt/test_unknown_values.py``
and through Dagster in ``test_publish_guard.py``; these cover the caps and the fallbacks.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from dbt_common.exceptions import CompilationError, DbtDatabaseError, DbtRuntimeError

from freight_pipeline.marts.results import (
    FIRST_LINE_LIMIT,
    DbtBuildFailed,
    build_failure_message,
    build_warnings,
    first_error_line,
)


def _result(unique_id: str, status: str, message: str | None = None, failures: int | None = None) -> dict[str, Any]:
    return {"unique_id": unique_id, "status": status, "message": message, "failures": failures}


def _test(name: str) -> str:
    return f"test.freight_marts.{name}.0123456789"


def test_failed_and_skipped_nodes_are_named_in_run_order_failures_first() -> None:
    run_results = {
        "results": [
            _result("model.freight_marts.stg_shipments", "success"),
            _result(_test("unique_stg_shipments_shipment_id"), "fail", "Got 2 results, configured to fail if != 0", 2),
            _result(_test("accepted_values_stg_shipments_mode"), "warn", "Got 1 result, configured to warn if != 0", 1),
            _result("model.freight_marts.fct_shipments", "skipped"),
            _result("unit_test.freight_marts.fct_shipments.test_lane", "skipped"),
            _result(_test("not_null_fct_shipments_shipment_id"), "skipped"),
            _result(_test("not_null_fct_transit_times_shipment_id"), "skipped"),
            _result("model.freight_marts.fct_transit_times", "error", "Binder Error: column x\n  not found", None),
        ]
    }
    first, *details = build_failure_message(run_results, 1).splitlines()
    assert first == (
        "dbt build failed: 1 test failed (unique_stg_shipments_shipment_id), 1 model failed (fct_transit_times), "
        "1 model skipped (fct_shipments), 1 unit test skipped, 2 tests skipped"
    )
    assert details == [
        "  test unique_stg_shipments_shipment_id failed: Got 2 results, configured to fail if != 0",
        "  model fct_transit_times failed: Binder Error: column x not found",
    ]
    assert build_warnings(run_results) == [
        "dbt test accepted_values_stg_shipments_mode warned (severity warn, the build goes on): "
        "Got 1 result, configured to warn if != 0"
    ]


def test_a_long_list_is_capped_and_counted() -> None:
    names = [f"relationships_stg_good_table_{n:02d}_shipment_id__shipment_id__ref_stg_shipments_" for n in range(30)]
    run_results = {"results": [_result(_test(name), "fail", "Got 1 result", 1) for name in names]}
    message = build_failure_message(run_results, 1)
    first, *details = message.splitlines()
    assert len(first) <= FIRST_LINE_LIMIT
    assert first.startswith(f"dbt build failed: 30 tests failed ({names[0]}")
    assert first.endswith(" more)")
    assert len(details) == 21 and details[-1] == "  ... and 10 more failed"


def test_without_run_results_the_first_line_is_dbts_first_error(tmp_path: Path) -> None:
    """dbt stopped before running a node (here a compile error): no run_results.json; dagster-dbt's
    error text ends with the errors dbt logged."""
    dagster_dbt_error = (
        "The dbt CLI process with command\n\n`dbt build`\n\nfailed with exit code `2`. Check the stdout in the "
        "Dagster compute logs for the full information about the error.\n\nErrors parsed from dbt logs:\n\n"
        "Encountered an error:\nCompilation Error in model fct_x (models/marts/fct_x.sql)\n  'oops' is undefined"
    )
    error = DbtBuildFailed.from_target(tmp_path, 2, dagster_dbt_error)
    first, *rest = str(error).splitlines()
    assert first == "dbt build failed with exit code 2: Compilation Error in model fct_x (models/marts/fct_x.sql)"
    assert "'oops' is undefined" in rest[-1]
    assert build_failure_message(None, None) == "dbt build failed"
    assert build_warnings(None) == []


@pytest.mark.parametrize("error_type", [DbtRuntimeError, DbtDatabaseError, CompilationError])
def test_a_bare_header_of_dbt_s_error_is_named_with_the_line_that_says_what_failed(
    tmp_path: Path, error_type: type[Exception]
) -> None:
    """dbt's exceptions say their kind on a line of its own (``Runtime Error``) and what failed under it: the
    first line keeps both, from the worker's reply (the exception's type and text) and from dagster-dbt's."""
    cause = "Out of Memory Error: failed to allocate data of size 32.0 KiB (1008.0 KiB/976.5 KiB used)"
    raised = error_type(cause)
    header = str(raised).splitlines()[0]
    from_worker = f"{type(raised).__name__}: {raised}"
    from_dagster_dbt = f"failed with exit code `2`.\n\nErrors parsed from dbt logs:\n\nEncountered an error:\n{raised}"
    for text, first_error in ((from_worker, first_error_line(from_worker)), (from_dagster_dbt, None)):
        first = str(DbtBuildFailed.from_target(tmp_path, 2, text, first_error=first_error)).splitlines()[0]
        assert first.startswith("dbt build failed with exit code 2: ") and first.endswith(f"{header}: {cause}"), first


def test_the_dbt_log_is_named_when_it_is_in_the_target(tmp_path: Path) -> None:
    (tmp_path / "run_results.json").write_text(
        '{"results": [{"unique_id": "model.p.fct_x", "status": "error", "message": "boom", "failures": null}]}'
    )
    (tmp_path / "dbt.log").write_text("...")
    assert str(DbtBuildFailed.from_target(tmp_path, 1)).splitlines() == [
        "dbt build failed: 1 model failed (fct_x)",
        "  model fct_x failed: boom",
        f"  dbt log: {tmp_path / 'dbt.log'}",
    ]
