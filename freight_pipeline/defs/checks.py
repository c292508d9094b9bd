"""Asset checks on the working database, all evaluated with one read-only DuckDB connection.

* ``primary_key_unique`` on every ``freight`` table;
* ``no_orphan_rows`` on every table that points at ``freight.shipments`` (ERROR for tables written
  with the shipment, WARN for the separately fetched detail tables, as in the dbt project);
* ``no_rejected_records`` on each stream's first table (WARN when its latest run rejected records);
* ``no_quarantined_records`` on each stream's first table (WARN while records of the stream wait in
  the retry queue: how many, since when, examples with reason and request);
* ``no_data_problems`` on each stream's first table (WARN while loaded records of the stream hold
  values that could not be converted: how many, examples with path, raw value and reason).

Freshness is Dagster's own check on ``freight/shipments`` (:func:`build_sync_freshness`): it is
evaluated by a sensor, outside the sync runs, so it also warns when runs fail or stop altogether.
"""

import datetime as dt
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import dagster as dg
import duckdb

from freight_pipeline.defs import queries
from freight_pipeline.defs.resources import WarehouseResource
from freight_pipeline.defs.sync_assets import table_key
from freight_pipeline.normalize.schema import TableSpec
from freight_pipeline.normalize.tables import FREIGHT_TABLES
from freight_pipeline.sync.parts import DOCUMENT_PART
from freight_pipeline.sync.streams import RECORD_SOURCES, SHIPMENTS, TABLE_SOURCE

DEFAULT_MAX_SYNC_AGE = dt.timedelta(minutes=60)
FRESHNESS_SENSOR = "shipments_freshness_sensor"
FRESHNESS_SENSOR_INTERVAL_SECONDS = 300
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
    embedded = TABLE_SOURCE.get(table.name) == DOCUMENT_PART.stream
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


def rejected_check(stream: str) -> FreightCheck:
    spec = dg.AssetCheckSpec(
        "no_rejected_records",
        asset=table_key(RECORD_SOURCES[stream][0]),
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


def quarantine_check(stream: str) -> FreightCheck:
    spec = dg.AssetCheckSpec(
        "no_quarantined_records",
        asset=table_key(RECORD_SOURCES[stream][0]),
        description=f"No {stream} record waits in the retry queue (freight_meta.quarantine; WARN severity): "
        "a quarantined record failed after the client's retries and is retried with backoff until it loads.",
    )

    def evaluate(con: duckdb.DuckDBPyConnection) -> dg.AssetCheckResult:
        count, oldest, examples = queries.quarantined_records(con, stream)
        return _result(
            spec,
            count == 0,
            dg.AssetCheckSeverity.WARN,
            quarantined_records=count,
            oldest_failure=dg.MetadataValue.timestamp(oldest) if oldest else dg.MetadataValue.null(),
            examples=dg.MetadataValue.json(examples),
        )

    return FreightCheck(spec, evaluate)


def data_problems_check(stream: str) -> FreightCheck:
    spec = dg.AssetCheckSpec(
        "no_data_problems",
        asset=table_key(RECORD_SOURCES[stream][0]),
        description=f"No value of a loaded {stream} record failed to convert (freight_meta.data_problems; WARN "
        "severity): such a value is null in its column, the record and its children are loaded.",
    )

    def evaluate(con: duckdb.DuckDBPyConnection) -> dg.AssetCheckResult:
        count, examples = queries.data_problems(con, stream)
        return _result(
            spec, count == 0, dg.AssetCheckSeverity.WARN, data_problems=count, examples=dg.MetadataValue.json(examples)
        )

    return FreightCheck(spec, evaluate)


def freight_checks(tables: Sequence[TableSpec] = FREIGHT_TABLES) -> list[FreightCheck]:
    return [
        *(primary_key_check(t) for t in tables),
        *(orphan_check(t) for t in queries.child_tables(tables)),
        *(rejected_check(stream) for stream in RECORD_SOURCES),
        *(quarantine_check(stream) for stream in RECORD_SOURCES),
        *(data_problems_check(stream) for stream in RECORD_SOURCES),
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
