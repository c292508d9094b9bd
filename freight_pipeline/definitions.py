"""The one Dagster ``Definitions`` object that ``workspace.yaml`` loads."""

from __future__ import annotations

import dagster as dg

from freight_pipeline.config import LakeConfig, ScheduleSettings, StorageSettings, load_settings
from freight_pipeline.defs.checks import build_alerts_sensor, build_sync_freshness
from freight_pipeline.defs.freight_job import freight_job
from freight_pipeline.defs.jobs import code_conversions_job, default_sensor_status, freight_sync_job, schedules
from freight_pipeline.defs.lake import lake_definitions
from freight_pipeline.defs.rebuild import freight_rebuild_job
from freight_pipeline.defs.resources import FreightServiceResource, WarehouseResource
from freight_pipeline.lake.backend import storage_of

# what the definitions are made of (a bad value of another concern, a page size, is for the run that reads it to
# refuse: the schedules and the alerts sensor load all the same); a run reads its own (the resources')
settings = load_settings(reads=(StorageSettings, LakeConfig, ScheduleSettings))
freshness_checks, freshness_sensor = build_sync_freshness(settings.schedules.max_sync_age, default_sensor_status())

lake = lake_definitions(storage_of(settings), settings.lake)  # the backfill and maintenance, when a lake is named

defs = dg.Definitions(
    assets=[freight_job, *lake.assets],
    asset_checks=[*freshness_checks],
    jobs=[freight_sync_job, code_conversions_job, freight_rebuild_job, *lake.jobs],
    schedules=[*schedules, *lake.schedules],
    sensors=[freshness_sensor, build_alerts_sensor(default_sensor_status()), *lake.sensors],
    resources={
        "freight_service": FreightServiceResource(),
        "warehouse": WarehouseResource(),
    },
    executor=dg.in_process_executor,
)
