"""The private working database: every write of a sync is one DuckDB transaction.

Only the pipeline opens ``{data_dir}/work/warehouse.duckdb``; readers open the published copy (see
:mod:`freight_pipeline.warehouse.publish`). A batch of changed shipments is written as ONE
transaction: their rows in every replaced table are deleted and the new rows inserted, the raw
documents upserted, rejects, failed records and data problems recorded and the stream cursor
advanced. DuckDB's WAL makes a commit durable and an interrupted transaction invisible, so after a
crash at any instant the database holds either the old cursor with the old rows or the new cursor
with the new rows: a cursor never runs ahead of the rows it covers, and no batch is half written.

Arrow tables go in by registering them with the connection and ``INSERT ... BY NAME SELECT``;
key sets (unit ids, raw documents, rejects) are registered the same way, never inlined in SQL.

A :class:`Warehouse` is made of parts sharing one :class:`~freight_pipeline.warehouse.database.Database`:
``writes`` (:class:`~freight_pipeline.warehouse.writes.Writes`), ``reads``
(:class:`~freight_pipeline.warehouse.reads.Reads`) and ``run_log``
(:class:`~freight_pipeline.warehouse.run_log.RunLog`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb

from freight_pipeline.lake.connect import connect_lake
from freight_pipeline.lake.settings import LakeSettings
from freight_pipeline.normalize.schema import TableSpec
from freight_pipeline.warehouse.database import Database
from freight_pipeline.warehouse.ddl import connect, ensure_tables, memory_limit, run, storage_version
from freight_pipeline.warehouse.paths import LAKE_SCRATCH, working_db_path
from freight_pipeline.warehouse.publish import PublishResult, publish
from freight_pipeline.warehouse.reads import Reads
from freight_pipeline.warehouse.run_log import RunLog
from freight_pipeline.warehouse.writes import Writes


class Warehouse:
    """The working DuckDB database of one data directory, with the given ``freight`` tables.

    ``tables`` are the source tables (normally ``normalize.FREIGHT_TABLES``); the ``freight_meta``
    tables are always added. Opening creates what is missing (:meth:`ensure_schema`). One process
    writes at a time (DuckDB's file lock); use one ``Warehouse`` per process and do not share it
    between threads.
    """

    def __init__(
        self,
        data_dir: Path,
        tables: Sequence[TableSpec],
        *,
        ensure_schema: bool = True,
        lake: LakeSettings | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.lake = lake
        self.path = working_db_path(self.data_dir)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        con = (
            # a new working database in the published file's format, so that a publish is a byte copy
            connect(self.path, new_storage_version=None if self.path.exists() else storage_version())
            if lake is None
            else connect_lake(lake, self.path.parent / LAKE_SCRATCH, memory_limit())
        )
        self.database = Database(con, tables, lake)
        self.writes = Writes(self.database)
        self.reads = Reads(self.database)
        self.run_log = RunLog(self.database, self.data_dir)
        try:
            run(con, "SET TimeZone = 'UTC'")
            if ensure_schema:
                self.ensure_schema()
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> Warehouse:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection (DuckDB checkpoints the WAL into the file on close)."""
        self.database.close()

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        """The connection to the working database (for the queries of ``warehouse.documents``)."""
        return self.database.con

    def ensure_schema(self) -> list[str]:
        """Create schemas and tables, add columns specs gained; returns the migration steps taken."""
        specs = (*self.database.tables, *self.database.meta_tables)
        return self.database.write(
            "ensure_schema", lambda con: ensure_tables(con, specs, key_constraints=self.lake is None)
        )

    def publish(self, schemas: Sequence[str] | None = None, **options: Any) -> PublishResult:
        """Publish this working database (see :func:`freight_pipeline.warehouse.publish.publish`)."""
        return publish(self.data_dir, schemas, connection=self.con, **options)
