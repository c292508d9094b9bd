"""The open working database the warehouse's parts share (:class:`Database`): one connection, the
specs of its tables, one transaction at a time with the Arrow tables its statements read."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import TypeVar

import duckdb
import pyarrow as pa

from freight_pipeline.normalize.schema import TableSpec
from freight_pipeline.warehouse import meta
from freight_pipeline.warehouse.backend import StorageBackend
from freight_pipeline.warehouse.ddl import arrow_input
from freight_pipeline.warehouse.history import HISTORY_TABLES

T = TypeVar("T")


class Database:
    """The connection to the working database, the specs of its tables (``tables``, the source tables,
    ``meta_tables``, always the ``freight_meta`` ones, and ``history_tables``, always the
    ``freight_history`` ones) and its writing transactions.

    ``backend``: where the connection leads (it decides whether a write that met a concurrent
    writer's commit runs again, :meth:`write`).
    """

    def __init__(
        self, con: duckdb.DuckDBPyConnection, tables: Sequence[TableSpec], backend: StorageBackend
    ) -> None:
        self._con: duckdb.DuckDBPyConnection | None = con
        self.backend = backend
        self.tables: tuple[TableSpec, ...] = tuple(tables)
        self.meta_tables: tuple[TableSpec, ...] = meta.META_TABLES
        self.history_tables: tuple[TableSpec, ...] = HISTORY_TABLES
        self._by_name: dict[str, TableSpec] = {}
        for spec in (*self.tables, *self.meta_tables):
            self._by_name[spec.qualified_name] = spec
            self._by_name.setdefault(spec.name, spec)
        self._in_transaction: ExitStack | None = None
        self.cursor_writes = 0
        """Moves at each write of a cursor (``Writes._set_cursor``, its only writer), committed or not."""
        self.cursors_kept: tuple[int, dict[str, str | None]] | None = None
        """Every stream's latest cursor, read when :attr:`cursor_writes` had the value kept with it
        (:meth:`~freight_pipeline.warehouse.reads.Reads.get_cursor`)."""

    @property
    def in_transaction(self) -> bool:
        return self._in_transaction is not None

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        if self._con is None:
            raise RuntimeError("the warehouse is closed")
        return self._con

    def close(self) -> None:
        """Close the connection (DuckDB checkpoints the WAL into the file on close)."""
        if self._con is not None:
            self._con.close()
            self._con = None

    def spec(self, name: str) -> TableSpec:
        """The spec of ``name`` (``shipments`` or ``freight.shipments``)."""
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"unknown warehouse table {name!r}") from None

    @property
    def unit_tables(self) -> tuple[TableSpec, ...]:
        """The per-shipment tables (those with a replace key)."""
        return tuple(spec for spec in self.tables if spec.replace_key is not None)

    def write(self, what: str, body: Callable[[duckdb.DuckDBPyConnection], T]) -> T:
        """``body`` in ONE transaction (:meth:`transaction`), run again from the start when its commit met
        a concurrent writer's that could not be merged (``StorageBackend.retried``; ``what`` names it)."""

        def attempt() -> T:
            with self.transaction() as con:
                return body(con)

        return self.backend.retried(what, attempt)

    @contextmanager
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """BEGIN ... COMMIT inside ``backend.writing()``, ROLLBACK on any error; the Arrow tables registered
        inside stay readable until it ends."""
        con = self.con
        with self.backend.writing(), ExitStack() as registered:
            self._in_transaction = registered
            con.begin()
            try:
                yield con
            except BaseException:
                con.rollback()
                raise
            else:
                con.commit()
            finally:
                self._in_transaction = None

    @contextmanager
    def registered(self, table: pa.Table) -> Iterator[str]:
        """An Arrow table readable under a unique name by the statements ``ddl.run`` executes during the block
        (:func:`~freight_pipeline.warehouse.ddl.arrow_input`); inside a transaction, until the transaction
        ends (a batch names the same ids' table in several statements)."""
        if self._in_transaction is not None:
            yield self._in_transaction.enter_context(arrow_input(self.con, table, "_wh"))
            return
        with arrow_input(self.con, table, "_wh") as name:
            yield name
