"""The publish asset: the working database (freight, freight_meta and dbt's schemas) goes to readers at once.

It runs after every sync asset and every dbt model of the run, when nothing holds the working
database (``run_stream`` closed its connection, the dbt subprocess exited). A failed stream or dbt
build skips it, so readers keep the previous publish: never a half-applied run or a half-built mart.
"""


from collections.abc import Sequence

import dagster as dg

from freight_pipeline.defs.dbt import freight_dbt_models
from freight_pipeline.defs.resources import WarehouseResource
from freight_pipeline.defs.sync_assets import SYNC_ASSETS
from freight_pipeline.lake.snapshots import publish_snapshot
from freight_pipeline.sync.runner import open_warehouse
from freight_pipeline.warehouse.publish import publish

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
        if warehouse.lake is not None:
            return publish_lake(context, warehouse)
        result = publish(warehouse.path)
        context.log.info(
            f"published {result.version} (storage {result.storage_version}"
            f"{', converted from the working database' if result.converted else ''}): {len(result.tables)} tables "
            f"({len(result.exported)} exported, {len(result.reused)} unchanged) in {result.seconds:.1f} s"
        )
        return dg.MaterializeResult(
            metadata={
                "version": result.version,
                "published_path": dg.MetadataValue.path(str(result.database)),
                "parquet_dir": dg.MetadataValue.path(str(warehouse.parquet_dir)),
                "parquet_version_dir": dg.MetadataValue.path(str(result.parquet_dir)),
                "tables": len(result.tables),
                "row_counts": dg.MetadataValue.json(dict(sorted(result.tables.items()))),
                "exported_tables": len(result.exported),
                "unchanged_tables": len(result.reused),
                "seconds": dg.MetadataValue.float(round(result.seconds, 3)),
                "storage_version": result.storage_version,
                "converted": result.converted,
            }
        )

    return published_warehouse


def publish_lake(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult:
    """Lake mode: record the snapshot this run's whole, successful build ended at (what readers open)."""
    with open_warehouse(warehouse.path) as held:
        snapshot = publish_snapshot(held.con, context.run_id)
        counts = held.reads.row_counts()
    lake = warehouse.lake
    context.log.info(f"published snapshot {snapshot.snapshot_id} of the {lake.describe() if lake else 'lake'}")
    return dg.MaterializeResult(
        metadata={
            "snapshot_id": snapshot.snapshot_id,
            "lake": lake.describe() if lake else "",
            "row_counts": dg.MetadataValue.json(dict(sorted(counts.items()))),
        }
    )


published_warehouse = build_publish_asset([*SYNC_ASSETS, freight_dbt_models])
