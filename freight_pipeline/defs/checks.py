"""Asset checks on the working database, all evaluated with one read-only DuckDB connection.

* ``primary_key_unique`` on every ``freight`` table;
* ``no_orphan_rows`` on every table that points at ``freight.shipments`` (ERROR for tables written
  with the shipment, WARN for the separately fetched detail tables, as in the dbt project);
* ``last_sync_fresh`` on ``freight/shipments`` (WARN when the last successful run is too old);
* ``no_rejected_records`` on each stream's first table (WARN when its latest run rejected records).
"""

import datetime as dt
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import dagster as dg
import duckdb

from freight_pipeline.defs import queries
from freight_pipeline.defs.resources import WarehouseResource
from freight_pipeline.defs.sync_assets import ROOT_STREAM, table_key
from freight_pipeline.normalize import FREIGHT_TABLES, STREAM_TABLES, TABLE_STREAM, TableSpec

DEFAULT_MAX_SYNC_AGE = dt.timedelta(minutes=60)
Evaluate = Callable[[duckdb.DuckDBPyConnection], dg.AssetCheckResult]


@dataclass(frozen=True)
class FreightCheck:
    spec: dg.AssetCheckSpec
    evaluate: Evaluate


def _result(
    spec: dg.AssetCheckSpec, passed: bool, severity: dg.AssetCheckSeverity, **metadata: object
) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(
        check_name=spec.name, asset_key=spec.asset_key, passed=passed, severity=severity, metadata=metadata
    )


def primary_key_check(table: TableSpec) -> FreightCheck:
    spec = dg.AssetCheckSpec(
        "primary_key_unique",
        asset=table_key(table.name),
        description=f"No two rows of {table.qualified_name} share ({', '.join(table.primary_key)}).",
    )

    def evaluate(con: duckdb.DuckDBPyConnection) -> dg.AssetCheckResult:
        count, sample = queries.duplicate_keys(con, table)
        return _result(
            spec, count == 0, dg.AssetCheckSeverity.ERROR, duplicate_keys=count, sample=dg.MetadataValue.json(sample)
        )

    return FreightCheck(spec, evaluate)


def orphan_check(table: TableSpec) -> FreightCheck:
    parent = queries.PARENT
    embedded = TABLE_STREAM.get(table.name) == ROOT_STREAM
    severity = dg.AssetCheckSeverity.ERROR if embedded else dg.AssetCheckSeverity.WARN
    spec = dg.AssetCheckSpec(
        "no_orphan_rows",
        asset=table_key(table.name),
        additional_deps=[table_key(parent.name)],
        description=f"Every non-null {parent.primary_key[0]} of {table.qualified_name} is in "
        f"{parent.qualified_name} ({severity.value} severity).",
    )

    def evaluate(con: duckdb.DuckDBPyConnection) -> dg.AssetCheckResult:
        count = queries.orphan_rows(con, table, parent)
        return _result(spec, count == 0, severity, orphan_rows=count)

    return FreightCheck(spec, evaluate)


def freshness_check(max_age: dt.timedelta) -> FreightCheck:
    spec = dg.AssetCheckSpec(
        "last_sync_fresh",
        asset=table_key(ROOT_STREAM),
        description=f"The last successful {ROOT_STREAM} sync (freight_meta.sync_runs) finished less than "
        f"{max_age} ago (WARN severity).",
    )

    def evaluate(con: duckdb.DuckDBPyConnection) -> dg.AssetCheckResult:
        finished = queries.last_success(con, ROOT_STREAM)
        age = dt.datetime.now(dt.UTC) - finished if finished else None
        return _result(
            spec,
            age is not None and age <= max_age,
            dg.AssetCheckSeverity.WARN,
            last_success=dg.MetadataValue.timestamp(finished) if finished else dg.MetadataValue.null(),
            age_minutes=dg.MetadataValue.float(round(age.total_seconds() / 60, 2)) if age else dg.MetadataValue.null(),
            max_age_minutes=dg.MetadataValue.float(max_age.total_seconds() / 60),
        )

    return FreightCheck(spec, evaluate)


def rejected_check(stream: str) -> FreightCheck:
    spec = dg.AssetCheckSpec(
        "no_rejected_records",
        asset=table_key(STREAM_TABLES[stream][0]),
        description=f"The latest {stream} run rejected no records (freight_meta.rejected_records; WARN severity).",
    )

    def evaluate(con: duckdb.DuckDBPyConnection) -> dg.AssetCheckResult:
        run_id = queries.latest_run_id(con, stream)
        count, sample = queries.rejected_records(con, stream, run_id) if run_id else (0, [])
        return _result(
            spec,
            count == 0,
            dg.AssetCheckSeverity.WARN,
            run_id=run_id or "",
            rejected_records=count,
            sample=dg.MetadataValue.json(sample),
        )

    return FreightCheck(spec, evaluate)


def freight_checks(
    tables: Sequence[TableSpec] = FREIGHT_TABLES, max_sync_age: dt.timedelta = DEFAULT_MAX_SYNC_AGE
) -> list[FreightCheck]:
    return [
        *(primary_key_check(t) for t in tables),
        *(orphan_check(t) for t in queries.child_tables(tables)),
        freshness_check(max_sync_age),
        *(rejected_check(stream) for stream in STREAM_TABLES),
    ]


def build_warehouse_checks(max_sync_age: dt.timedelta = DEFAULT_MAX_SYNC_AGE) -> dg.AssetChecksDefinition:
    """One subsettable multi-asset check: the selected checks share one read-only connection."""
    checks = {c.spec.key: c for c in freight_checks(max_sync_age=max_sync_age)}

    @dg.multi_asset_check(
        name="freight_warehouse_checks",
        specs=[c.spec for c in checks.values()],
        can_subset=True,
        description="Keys, orphans, freshness and rejects of the freight tables in the working database.",
    )
    def freight_warehouse_checks(
        context: dg.AssetCheckExecutionContext, warehouse: WarehouseResource
    ) -> Iterator[dg.AssetCheckResult]:
        selected = [check for key, check in checks.items() if key in context.selected_asset_check_keys]
        with warehouse.read_working_db() as con:
            for check in selected:
                yield check.evaluate(con)

    return freight_warehouse_checks
