"""The one Dagster ``Definitions`` object that ``workspace.yaml`` loads."""

from __future__ import annotations

import datetime as dt

import dagster as dg

from freight_pipeline.config import MAX_SYNC_AGE_ENV, PASSWORD_ENV, minutes_from_env
from freight_pipeline.defs.checks import DEFAULT_MAX_SYNC_AGE, build_sync_freshness
from freight_pipeline.defs.freight_job import freight_job
from freight_pipeline.defs.jobs import code_conversions_job, default_sensor_status, freight_sync_job, schedules
from freight_pipeline.defs.lake import lake_definitions
from freight_pipeline.defs.rebuild import freight_rebuild_job
from freight_pipeline.defs.resources import FreightServiceResource, WarehouseResource
from freight_pipeline.lake.backend import storage_from_env

max_sync_age = dt.timedelta(
    minutes=minutes_from_env(MAX_SYNC_AGE_ENV, int(DEFAULT_MAX_SYNC_AGE.total_seconds() // 60))
)
freshness_checks, freshness_sensor = build_sync_freshness(max_sync_age, default_sensor_status())

lake = lake_definitions(storage_from_env())  # the backfill and maintenance, when FREIGHT_LAKE_* name a lake

defs = dg.Definitions(
    assets=[freight_job, *lake.assets],
    asset_checks=[*freshness_checks],
    jobs=[freight_sync_job, code_conversions_job, freight_rebuild_job, *lake.jobs],
    schedules=[*schedules, *lake.schedules],
    sensors=[freshness_sensor],
    resources={
        "freight_service": FreightServiceResource(password=dg.EnvVar(PASSWORD_ENV)),
        "warehouse": WarehouseResource(),
    },
    executor=dg.in_process_executor,
)
