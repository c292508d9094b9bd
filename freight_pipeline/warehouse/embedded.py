"""The default storage (:class:`EmbeddedDuckDB`): the working warehouse is the DuckDB file
``work/warehouse.duckdb`` of the data directory, one writer at a time (DuckDB's file lock), and
readers read the copy and the Parquet the publish makes (:mod:`freight_pipeline.warehouse.publish`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TypeVar

import duckdb

from freight_pipeline.config import StorageSettings
from freight_pipeline.normalize.schema import TableSpec
from freight_pipeline.warehouse.backend import PublishedState
from freight_pipeline.warehouse.ddl import checked_storage_version, connect
from freight_pipeline.warehouse.paths import checked_db_path, working_db_path
from freight_pipeline.warehouse.publish import MANIFEST, PublishResult, parquet_root, publish, published_db_path

T = TypeVar("T")


class EmbeddedDuckDB:
    """The working warehouse in a DuckDB file; published as a read-only copy plus Parquet."""

    key_constraints = True
    storage_hints = True
    concurrent_writers = False
    deletes_return_rows = True
    readers_see_commits = False
    dbt_target: str | None = None

    def __init__(self, duckdb_settings: StorageSettings | None = None) -> None:
        self.duckdb_settings = duckdb_settings or StorageSettings()

    def dbt_environment(self) -> dict[str, str]:
        return {}

    def describe(self, data_dir: Path) -> str:
        return str(working_db_path(data_dir))

    def published_where(self, data_dir: Path) -> str:
        return f"at {published_db_path(Path(data_dir))}"

    def working_database_missing(self, data_dir: Path) -> bool:
        return not working_db_path(data_dir).exists()

    def nothing_published(self, data_dir: Path) -> bool:
        return not published_db_path(Path(data_dir)).is_file()

    def connect(self, data_dir: Path) -> duckdb.DuckDBPyConnection:
        path = checked_db_path(working_db_path(data_dir))
        path.parent.mkdir(parents=True, exist_ok=True)
        # a new working database in the published file's format, so that a publish is a byte copy
        new = None if path.exists() else checked_storage_version(self.duckdb_settings.storage_version)
        return connect(path, self.duckdb_settings, new_storage_version=new)

    def connect_read_only(self, data_dir: Path) -> duckdb.DuckDBPyConnection:
        path = working_db_path(data_dir)
        if not path.exists():
            raise FileNotFoundError(f"no working database at {path}: run the sync first")
        return duckdb.connect(str(path), read_only=True)

    def retried(self, what: str, attempt: Callable[[], T]) -> T:
        """``attempt()`` once: DuckDB's file lock admits one writer, so no commit meets another's."""
        return attempt()

    def writing(self) -> AbstractContextManager[None]:
        """Nothing: DuckDB's file lock admits one writing process."""
        return nullcontext()

    def prime_tables(self, con: duckdb.DuckDBPyConnection, specs: Sequence[TableSpec]) -> list[str]:
        """Nothing: a DuckDB file plans a scan of an empty table as quickly as any."""
        return []

    def publish(self, data_dir: Path, run_id: str) -> PublishResult:
        """The copy and the Parquet of :func:`freight_pipeline.warehouse.publish.publish` (``run_id``
        is in the working database's run log already)."""
        return publish(Path(data_dir), settings=self.duckdb_settings)

    def open_published(self, data_dir: Path, spill: str) -> PublishedState | None:
        """The published file read-only (None: nothing published), with the version its Parquet manifest names."""
        path = published_db_path(Path(data_dir))
        if not path.is_file():
            return None
        try:
            manifest = json.loads((parquet_root(data_dir) / MANIFEST).read_text())
        except (OSError, ValueError):
            manifest = {}
        con = duckdb.connect(str(path), read_only=True)
        return PublishedState(con, self.published_where(data_dir), str(path),
                              f"{parquet_root(data_dir)}/<schema>/<table>/", manifest.get("version"),
                              manifest.get("published_at"))
