"""The warehouse: a private working DuckDB database written in one transaction per batch, and the
atomic publish of a read-only copy plus Parquet for readers (see ``store`` and ``publish``)."""

from freight_pipeline.warehouse.ddl import WarehouseOutOfMemory, explained_out_of_memory
from freight_pipeline.warehouse.meta import META_SCHEMA, META_TABLES
from freight_pipeline.warehouse.paths import read_run_log, run_log_path, working_db_path
from freight_pipeline.warehouse.publish import (
    PublishResult,
    UnsettledWarehouse,
    clean_leftovers,
    parquet_root,
    publish,
    published_db_path,
)
from freight_pipeline.warehouse.records import (
    Backoff,
    BatchWrite,
    DataProblem,
    Quarantined,
    RawDocument,
    Reject,
    ReplaceOutcome,
    RunLike,
    RunRecord,
    WriteStats,
)
from freight_pipeline.warehouse.store import Warehouse

__all__ = [
    "META_SCHEMA",
    "META_TABLES",
    "Backoff",
    "BatchWrite",
    "DataProblem",
    "PublishResult",
    "Quarantined",
    "RawDocument",
    "Reject",
    "ReplaceOutcome",
    "RunLike",
    "RunRecord",
    "UnsettledWarehouse",
    "Warehouse",
    "WarehouseOutOfMemory",
    "WriteStats",
    "clean_leftovers",
    "explained_out_of_memory",
    "parquet_root",
    "publish",
    "published_db_path",
    "read_run_log",
    "run_log_path",
    "working_db_path",
]
