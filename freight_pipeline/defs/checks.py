"""Asset checks: the warehouse checks (``checks.warehouse``: keys, orphans, rejects, the retry queue,
data problems) as check specs and results of the ``freight`` tables (the job evaluates them:
``defs.freight_job``), and freshness.

Freshness is Dagster's own check on ``freight/shipments`` (:func:`build_sync_freshness`): it is
evaluated by a sensor, outside the sync runs, so it also warns when runs fail or stop altogether. A second
sensor (:func:`build_alerts_sensor`) sends the same staleness as an alert (``alerts.notify.freshness``, as
``freight-pipeline status --alert`` does), with whatever earlier runs could not send.
"""

import datetime as dt
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import dagster as dg

from freight_pipeline.alerts.notify import freshness
from freight_pipeline.checks.warehouse import CheckResult, Severity, WarehouseCheck
from freight_pipeline.config import ALERT_URLS_ENV
from freight_pipeline.defs.resources import WarehouseResource
from freight_pipeline.defs.sync_assets import metadata_value, table_key
from freight_pipeline.sync.streams import SHIPMENTS

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


def check_result(check: WarehouseCheck, result: CheckResult) -> dg.AssetCheckResult:
    figures: Mapping[str, Any] = result.figures
    return dg.AssetCheckResult(
        check_name=check.name,
        asset_key=table_key(check.table),
        passed=result.passed,
        severity=SEVERITY[check.severity],
        metadata={name: metadata_value(value) for name, value in figures.items()},
    )


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


ALERTS_SENSOR = "alerts_freshness_sensor"
ALERTS_LOOKER = "alerts freshness sensor"
"""Who a freshness look of the sensor was, in ``freight_meta.alerts``."""


def build_alerts_sensor(sensor_status: dg.DefaultSensorStatus) -> dg.SensorDefinition:
    """Every 5 minutes: a freshness look (an alert when no sync succeeded for longer than ``max_sync_age``) and
    the outbox sent; it launches no run."""

    @dg.sensor(name=ALERTS_SENSOR, minimum_interval_seconds=FRESHNESS_SENSOR_INTERVAL_SECONDS,
               default_status=sensor_status,
               description="Alerts when no sync succeeded for longer than max_sync_age_minutes, and sends the "
                           "alerts earlier runs could not (docs/operations.md, Alerts).")
    def alerts_freshness_sensor(context: dg.SensorEvaluationContext, warehouse: WarehouseResource) -> dg.SkipReason:
        settings = warehouse.settings()
        alerted = freshness(warehouse.path, warehouse.backend, settings.alerts, settings.schedules.max_sync_age,
                            ALERTS_LOOKER)
        if alerted is None:
            return dg.SkipReason(f"no alert destination is set ({ALERT_URLS_ENV})")
        if alerted.dispatch is not None:
            alerted.dispatch.join()
        context.log.info(alerted.line)
        return dg.SkipReason(alerted.line)

    return alerts_freshness_sensor
