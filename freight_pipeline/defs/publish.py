"""The publish asset: the working database (freight, freight_meta and dbt's schemas) goes to readers at once.

It runs after every sync asset and every dbt model of the run, when nothing holds the working
database (``run_stream`` closed its connection, the dbt subprocess exited). A failed stream or dbt
build skips it, so readers keep the previous publish: never a half-applied run or a half-built mart.
How a storage publishes is its own (``StorageBackend.publish``): the embedded file is copied with its
Parquet; a lake records the snapshot the build ended at.
"""


from collections.abc import Sequence
from pathlib import Path
from typing import Any

import dagster as dg

from freight_pipeline.defs.dbt import freight_dbt_models
from freight_pipeline.defs.resources import WarehouseResource
from freight_pipeline.defs.sync_assets import SYNC_ASSETS

PUBLISH_KEY = dg.AssetKey(["freight", "published_warehouse"])
PUBLISH_GROUP = "publish"


def build_publish_asset(upstream: Sequence[dg.AssetsDefinition]) -> dg.AssetsDefinition:
    """The publish asset, depending on every asset in ``upstream`` (sync streams and dbt models)."""

    @dg.asset(
        key=PUBLISH_KEY,
        group_name=PUBLISH_GROUP,
        deps=[key for assets_def in upstream for key in assets_def.keys],
        kinds={"duckdb", "parquet"},
        description="The published warehouse: a read-only DuckDB copy (warehouse.duckdb) and Parquet "
        "(parquet/<schema>/<table>/), each swapped atomically. Analysts and BI read only this.",
    )
    def published_warehouse(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult:
        publication = warehouse.backend.publish(warehouse.path, context.run_id)
        context.log.info(publication.summary())
        return dg.MaterializeResult(
            metadata={name: metadata_value(value) for name, value in publication.metadata().items()}
        )

    return published_warehouse


def metadata_value(value: Any) -> Any:
    """A publication's plain value as Dagster shows it: paths, tables of figures (JSON) and seconds."""
    if isinstance(value, Path):
        return dg.MetadataValue.path(str(value))
    if isinstance(value, dict):
        return dg.MetadataValue.json(value)
    if isinstance(value, float):
        return dg.MetadataValue.float(value)
    return value


published_warehouse = build_publish_asset([*SYNC_ASSETS, freight_dbt_models])
