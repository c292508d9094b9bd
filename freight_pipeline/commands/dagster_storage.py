"""Dagster's SQLite event log, kept open while a run writes it: the event storage of the project's
``dagster.yaml``.

Dagster's ``SqliteEventLogStorage`` opens a connection for every event it stores, commits it with an
fsync and closes it, and closing the last connection of a WAL database checkpoints it (another
fsync): about 20 ms an event on these machines. A run of the freight job stores some 600 events (the
planned and reported asset materializations and checks, each in the run's shard and in the index),
which made the Dagster run 12-30 s slower than the job it wraps (docs/performance.md).

This storage is the same database, files and schema (the webserver, the daemon and Dagster's own
class read and write them as before); as it writes, it differs in two things only:

- the connection of each of the last few shards used stays open (one per shard, used under the
  storage's lock), so that a commit is not followed by a checkpoint;
- its commits are ``synchronous=NORMAL``, SQLite's recommended setting in WAL mode: a commit is not
  flushed to the disk at once, so a power cut (not a crashed or killed process) can lose the last
  events of a run; the database stays consistent.

And it deletes a run's events whole (``DagsterInstance.delete_run``, which the run history's pruning calls:
``freight_pipeline.defs.run_history``): Dagster's own class deletes the rows of the run's shard but leaves its file
(some 1.3 MB for a run of the freight job; a shard already gone it creates again, empty, to delete from it), and
leaves the run's rows of ``asset_check_executions`` in the index. Here the shard's file goes (its connection closed
first), and so do those rows.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import Any

import sqlalchemy as db
from dagster import Field, StringSource
from dagster._core.storage.event_log.schema import AssetCheckExecutionsTable
from dagster._core.storage.event_log.sqlite.sqlite_event_log import INDEX_SHARD_NAME, SqliteEventLogStorage
from dagster._core.storage.sql import create_engine
from dagster._serdes import ConfigurableClassData
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import StaticPool

KEPT_SHARDS = 4
"""Shards whose connection stays open (the index and the runs being written); older ones are closed."""
SQLITE_BUSY_TIMEOUT_S = 30


def default_base_dir() -> str:
    """Where Dagster's default SQLite storage keeps event logs: ``$DAGSTER_HOME/history/runs/``."""
    home = os.environ.get("DAGSTER_HOME")
    if not home:
        raise ValueError("DAGSTER_HOME is not set: the event log storage needs it or a base_dir in dagster.yaml")
    return os.path.join(home, "history", "runs", "")


class KeptOpenSqliteEventLogStorage(SqliteEventLogStorage):
    """Dagster's SQLite event log storage with the connections of recent shards kept open and commits
    not flushed one by one (the module's doc says why and what it costs)."""

    def __init__(self, base_dir: str, inst_data: ConfigurableClassData | None = None) -> None:
        self._engines: OrderedDict[str, Engine] = OrderedDict()
        self._tables: set[str] = set()
        super().__init__(base_dir, inst_data)

    @classmethod
    def config_type(cls) -> Any:
        return {"base_dir": Field(StringSource, is_required=False)}

    @classmethod
    def from_config_value(  # type: ignore[override]
        cls, inst_data: ConfigurableClassData | None, config_value: Mapping[str, Any]
    ) -> KeptOpenSqliteEventLogStorage:
        return cls(config_value.get("base_dir") or default_base_dir(), inst_data=inst_data)

    def _engine(self, shard: str) -> Engine:
        """The shard's engine (one connection, kept), the most recently used shard last."""
        engine = self._engines.get(shard)
        if engine is None:
            engine = create_engine(
                self.conn_string_for_shard(shard),
                poolclass=StaticPool,
                connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S, "check_same_thread": False},
            )
            db.event.listen(engine, "connect", _not_flushed_per_commit)
            self._engines[shard] = engine
            while len(self._engines) > KEPT_SHARDS:
                self._engines.popitem(last=False)[1].dispose()
        self._engines.move_to_end(shard)
        return engine

    @contextmanager
    def _connect(self, shard: str) -> Iterator[Connection]:
        with self._db_lock:
            engine = self._engine(shard)
            if shard not in self._initialized_dbs:
                self._initdb(engine)
                self._initialized_dbs.add(shard)
            with engine.connect() as conn, conn.begin():
                yield conn

    def has_table(self, table_name: str) -> bool:
        """Dagster's answer (asked for each asset check event, on a connection of its own), kept once yes."""
        if table_name not in self._tables:
            if not super().has_table(table_name):
                return False
            self._tables.add(table_name)
        return True

    def delete_events(self, run_id: str) -> None:
        """The run's events gone: its rows of the index (events, their tags, its asset check executions) and its
        shard's file (Dagster's own class empties the file and keeps it, and keeps the check executions)."""
        checks = self.has_table(AssetCheckExecutionsTable.name)
        with self.index_connection() as conn:
            self.delete_events_for_run(conn, run_id)
            if checks:
                conn.execute(AssetCheckExecutionsTable.delete().where(AssetCheckExecutionsTable.c.run_id == run_id))
        if self.supports_global_concurrency_limits:
            self.free_concurrency_slots_for_run(run_id)
        if run_id == INDEX_SHARD_NAME:  # no run's shard: the index itself
            return
        with self._db_lock:
            engine = self._engines.pop(run_id, None)
            if engine is not None:
                engine.dispose()
            self._initialized_dbs.discard(run_id)
            shard = self.path_for_shard(run_id)
            for path in (shard, f"{shard}-wal", f"{shard}-shm"):
                with suppress(FileNotFoundError):
                    os.remove(path)

    def close_connections(self) -> None:
        """Close every kept connection (the last one to close checkpoints its database)."""
        with self._db_lock:
            while self._engines:
                self._engines.popitem()[1].dispose()

    def wipe(self) -> None:
        self.close_connections()
        super().wipe()

    def dispose(self) -> None:
        self.close_connections()
        super().dispose()


def _not_flushed_per_commit(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()
