"""The one Dagster ``Definitions`` object that ``workspace.yaml`` loads."""

from __future__ import annotations

import datetime as dt

import dagster as dg

from freight_pipeline.config import MAX_SYNC_AGE_ENV, PASSWORD_ENV, minutes_from_env
from freight_pipeline.defs.checks import DEFAULT_MAX_SYNC_AGE, build_sync_freshness, build_warehouse_checks
from freight_pipeline.defs.dbt import DbtCli, dbt_project, freight_dbt_models
from freight_pipeline.defs.jobs import (
    code_conversions_job,
    default_sensor_status,
    freight_build_job,
    freight_sync_job,
    schedules,
)
from freight_pipeline.defs.lake import lake_definitions
from freight_pipeline.defs.publish import published_warehouse
from freight_pipeline.defs.recovery import build_after_failed_streams
from freight_pipeline.defs.resources import FreightServiceResource, WarehouseResource
from freight_pipeline.defs.sync_assets import SYNC_ASSETS
from freight_pipeline.lake.backend import storage_from_env
from freight_pipeline.marts.project import dbt_executable

max_sync_age = dt.timedelta(
    minutes=minutes_from_env(MAX_SYNC_AGE_ENV, int(DEFAULT_MAX_SYNC_AGE.total_seconds() // 60))
)
freshness_checks, freshness_sensor = build_sync_freshness(max_sync_age, default_sensor_status())

lake = lake_definitions(storage_from_env())  # the backfill and maintenance, when FREIGHT_LAKE_* name a lake

defs = dg.Definitions(
    assets=[*SYNC_ASSETS, freight_dbt_models, published_warehouse, *lake.assets],
    asset_checks=[build_warehouse_checks(), *freshness_checks],
    jobs=[freight_sync_job, code_conversions_job, freight_build_job, *lake.jobs],
    schedules=[*schedules, *lake.schedules],
    sensors=[freshness_sensor, build_after_failed_streams],
    resources={
        "freight_service": FreightServiceResource(password=dg.EnvVar(PASSWORD_ENV)),
        "warehouse": WarehouseResource(),
        "dbt": DbtCli(project_dir=dbt_project, dbt_executable=dbt_executable()),
    },
    executor=dg.in_process_executor,
)
