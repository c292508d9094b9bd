"""Asset checks: the warehouse checks (``checks.warehouse``: keys, orphans, rejects, the retry queue,
data problems) as one multi-asset check on the ``freight`` tables, and freshness.

Freshness is Dagster's own check on ``freight/shipments`` (:func:`build_sync_freshness`): it is
evaluated by a sensor, outside the sync runs, so it also warns when runs fail or stop altogether.
"""

import datetime as dt
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg
import duckdb

from freight_pipeline.checks.warehouse import CheckResult, Severity, WarehouseCheck, warehouse_checks
from freight_pipeline.config import DEFAULT_MAX_SYNC_AGE_MINUTES
from freight_pipeline.defs.resources import WarehouseResource
from freight_pipeline.defs.sync_assets import table_key
from freight_pipeline.normalize.schema import TableSpec
from freight_pipeline.normalize.tables import FREIGHT_TABLES
from freight_pipeline.sync.streams import SHIPMENTS

DEFAULT_MAX_SYNC_AGE = dt.timedelta(minutes=DEFAULT_MAX_SYNC_AGE_MINUTES)
FRESHNESS_SENSOR = "shipments_freshness_sensor"
FRESHNESS_SENSOR_INTERVAL_SECONDS = 300
SEVERITY = {Severity.ERROR: dg.AssetCheckSeverity.ERROR, Severity.WARN: dg.AssetCheckSeverity.WARN}


def check_spec(check: WarehouseCheck) -> dg.AssetCheckSpec:
    return dg.AssetCheckSpec(
        check.name,
        asset=table_key(check.table),
        additional_deps=[table_key(table) for table in check.also_reads],
        description=check.description,
    )


def metadata_value(value: Any) -> Any:
    """A check's figure as Dagster shows it: samples as JSON, instants as timestamps."""
    if value is None:
        return dg.MetadataValue.null()
    if isinstance(value, dt.datetime):
        return dg.MetadataValue.timestamp(value)
    if isinstance(value, list | dict):
        return dg.MetadataValue.json(value)
    return value


def check_result(check: WarehouseCheck, result: CheckResult) -> dg.AssetCheckResult:
    figures: Mapping[str, Any] = result.figures
    return dg.AssetCheckResult(
        check_name=check.name,
        asset_key=table_key(check.table),
        passed=result.passed,
        severity=SEVERITY[check.severity],
        metadata={name: metadata_value(value) for name, value in figures.items()},
    )


@dataclass(frozen=True)
class FreightCheck:
    """A warehouse check as Dagster sees it: its spec, and its evaluation as an asset check result."""

    spec: dg.AssetCheckSpec
    evaluate: Callable[[duckdb.DuckDBPyConnection], dg.AssetCheckResult]


def freight_checks(tables: Sequence[TableSpec] = FREIGHT_TABLES) -> list[FreightCheck]:
    """The warehouse checks of ``tables`` (``checks.warehouse``) as asset checks."""
    return [
        FreightCheck(check_spec(check), lambda con, check=check: check_result(check, check.evaluate(con)))
        for check in warehouse_checks(tables)
    ]


def build_sync_freshness(
    max_age: dt.timedelta, sensor_status: dg.DefaultSensorStatus
) -> tuple[Sequence[dg.AssetChecksDefinition], dg.SensorDefinition]:
    """A WARN check that ``freight/shipments`` materialized within ``max_age``, and the sensor evaluating it.

    Dagster 1.13 calls these builders superseded by ``FreshnessPolicy``, which is still a preview
    (off unless ``dagster.yaml`` enables it) and is no asset check; so the checks stay, quietly.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.SupersessionWarning)
        checks = dg.build_last_update_freshness_checks(
            assets=[table_key(SHIPMENTS.tables[0])], lower_bound_delta=max_age, severity=dg.AssetCheckSeverity.WARN
        )
        sensor = dg.build_sensor_for_freshness_checks(
            freshness_checks=checks,
            name=FRESHNESS_SENSOR,
            minimum_interval_seconds=FRESHNESS_SENSOR_INTERVAL_SECONDS,
            default_status=sensor_status,
        )
    return checks, sensor


def build_warehouse_checks() -> dg.AssetChecksDefinition:
    """One subsettable multi-asset check: the selected checks share one read-only connection."""
    checks = {c.spec.key: c for c in freight_checks()}

    @dg.multi_asset_check(
        name="freight_warehouse_checks",
        specs=[c.spec for c in checks.values()],
        can_subset=True,
        description="Keys, orphans and rejects of the freight tables in the working database.",
    )
    def freight_warehouse_checks(
        context: dg.AssetCheckExecutionContext, warehouse: WarehouseResource
    ) -> Iterator[dg.AssetCheckResult]:
        selected = [check for key, check in checks.items() if key in context.selected_asset_check_keys]
        with warehouse.read_working_db() as con:
            for check in selected:
                yield check.evaluate(con)

    return freight_warehouse_checks
