"""The storage boundary: what the warehouse needs of where its tables live (:class:`StorageBackend`).

Two implementations: the embedded DuckDB file of the data directory
(:class:`~freight_pipeline.warehouse.embedded.EmbeddedDuckDB`, the default) and a DuckLake
(:class:`~freight_pipeline.lake.backend.LakeBackend`). One is chosen once, from the configuration, at
the top (``lake.backend.storage_from_env``, called by the Dagster resources, the commands and the
dashboard's page) and passed down; nothing below asks which one it has.

Both publish by the same rule (:func:`unsettled_runs`): only a settled warehouse, one whose latest
dbt build succeeded and whose streams are not half run, becomes what readers read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import duckdb

from freight_pipeline.config import StorageSettings
from freight_pipeline.normalize.schema import TableSpec
from freight_pipeline.warehouse import meta
from freight_pipeline.warehouse.ddl import first, qualified, run

T = TypeVar("T")


class UnsettledWarehouse(RuntimeError):
    """The working database holds a run that did not succeed: publishing it could show part of a run."""


def unsettled_runs(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str, str]]:
    """(stream, run_id, status) of every stream whose latest ``sync_runs`` row (``meta.latest_runs``: the one recorded
    last) holds back a publish: the dbt build's when not a success, another stream's when still running (a failed
    stream's does not); a retired stream's not once its successor succeeded after it
    (``meta.settled_retired_streams``), whatever the successor's runs did since."""
    table = qualified(meta.SYNC_RUNS)
    exists = first(run(con, "SELECT count(*) FROM duckdb_tables() WHERE schema_name = ? AND table_name = ?",
                       [meta.SYNC_RUNS.schema, meta.SYNC_RUNS.name]))
    if not exists or not exists[0]:
        return []
    latest = run(con, f"SELECT stream, run_id, status FROM {meta.latest_runs(table)} "
                      f"WHERE stream NOT IN ({meta.settled_retired_streams(table)}) ORDER BY stream")
    return [
        (stream, run_id, status)
        for stream, run_id, status in latest
        if status != "success" and (stream == meta.BUILD_STREAM or status != "failed")
    ]


class Publication(Protocol):
    """What a publish did, for the log and the publish asset's metadata."""

    def summary(self) -> str:
        """One line for the log."""
        ...

    def metadata(self) -> dict[str, Any]:
        """Plain values (paths as ``Path``, tables of figures as dicts) for the publish asset."""
        ...


@dataclass(frozen=True)
class PublishedState:
    """An open read-only connection to what readers read, and which publish it is."""

    con: duckdb.DuckDBPyConnection
    where: str
    """Where it is, in words for messages: ``at <file>``, or ``in the DuckLake ... (snapshot 7, published ...)``."""
    database: str
    """The published database (a file, or the lake's description)."""
    parquet: str
    """Where a table's Parquet files are, in words for readers (a folder per table, or the lake's data files)."""
    version: str | None
    """Which publish (a version, or ``snapshot 7``); None when unknown."""
    published_at: str | None
    """When it was published (ISO 8601), None when unknown."""
    is_published: bool = True
    """False: nothing was published yet and the connection reads the latest state (a lake before its
    first publish, whose marts may be half built)."""


class StorageBackend(Protocol):
    """Where the warehouse's tables live: how to connect, write, publish and read what was published."""

    duckdb_settings: StorageSettings
    """The configuration of its DuckDB connections (memory limits, the published file's storage version)."""
    key_constraints: bool
    """Whether tables are created with their PRIMARY KEY (DuckDB enforces it; a DuckLake has no keys)."""
    storage_hints: bool
    """Whether tables are created with their columns' DuckDB storage compression (``Column.compression``: a
    DuckDB file; a DuckLake stores Parquet)."""
    concurrent_writers: bool
    """Whether several processes may commit at once: then a stream's cursor row is appended, never
    replaced (a lake refuses a commit deleting from a table another writer inserted into meanwhile)."""
    deletes_return_rows: bool
    """Whether a ``DELETE`` takes a ``RETURNING`` clause (a DuckDB file; DuckLake 1.5.5 refuses it)."""
    readers_see_commits: bool
    """Whether readers see every commit as it happens (a lake's latest snapshot), so that a sync needs
    no publish of its own; else readers see only what :meth:`publish` copied."""
    dbt_target: str | None
    """The dbt profile's target that builds the marts here (None: the profile's default)."""

    def dbt_environment(self) -> dict[str, str]:
        """The variables the dbt process of :attr:`dbt_target` reads to find this storage (a lake's location, however
        it was set); none for the embedded file (its path is the run's data directory's)."""
        ...

    def describe(self, data_dir: Path) -> str:
        """Where the working warehouse of ``data_dir`` is, for messages (never a secret)."""
        ...

    def published_where(self, data_dir: Path) -> str:
        """Where readers read, in words for messages: ``at <file>`` or ``in the <lake>``."""
        ...

    def working_database_missing(self, data_dir: Path) -> bool:
        """True when ``data_dir`` certainly holds no working database yet (a lake's catalog: never)."""
        ...

    def nothing_published(self, data_dir: Path) -> bool:
        """True when it is certain, without connecting, that nothing is published yet (a lake cannot
        tell without a connection: False)."""
        ...

    def connect(self, data_dir: Path) -> duckdb.DuckDBPyConnection:
        """A read-write connection to the working warehouse, created if missing (a new embedded file
        in the published file's storage version, so that a publish is a byte copy)."""
        ...

    def connect_read_only(self, data_dir: Path) -> duckdb.DuckDBPyConnection:
        """A read-only connection to the working warehouse's latest state (FileNotFoundError: none yet)."""
        ...

    def retried(self, what: str, attempt: Callable[[], T]) -> T:
        """``attempt()``, one writing transaction, run again while it meets a concurrent writer's commit
        it cannot be merged with (``what`` names it in messages); once where there is one writer."""
        ...

    def writing(self) -> AbstractContextManager[None]:
        """What a writing transaction runs inside, from BEGIN to COMMIT: a lock that makes one machine's
        writers take turns where the catalog admits one writer (a lake's SQLite catalog), else nothing."""
        ...

    def prime_tables(self, con: duckdb.DuckDBPyConnection, specs: Sequence[TableSpec]) -> list[str]:
        """In a writing transaction after ``specs``' tables were ensured: whatever makes them quick to read in this
        storage (a lake: :meth:`~freight_pipeline.lake.backend.LakeBackend.prime_tables`); the tables it touched."""
        ...

    def publish(self, data_dir: Path, run_id: str) -> Publication:
        """Make the settled working warehouse what readers read (UnsettledWarehouse otherwise)."""
        ...

    def open_published(self, data_dir: Path, spill: str) -> PublishedState | None:
        """What readers read, opened read-only (None: nothing there to open); a lake's connection
        spills to ``work/<spill>``."""
        ...

