"""The private working database: every write of a sync is one DuckDB transaction.

Only the pipeline opens ``{data_dir}/work/warehouse.duckdb`` (or, in lake mode, writes the lake);
readers read what the publish made (see :mod:`freight_pipeline.warehouse.backend`). A batch of
changed shipments is written as ONE transaction: their rows in every replaced table are deleted and
the new rows inserted, the raw documents upserted, rejects, failed records and data problems
recorded and the stream cursor advanced. DuckDB's WAL makes a commit durable and an interrupted
transaction invisible, so after a crash at any instant the database holds either the old cursor with
the old rows or the new cursor with the new rows: a cursor never runs ahead of the rows it covers,
and no batch is half written.

Arrow tables go in by ``INSERT ... BY NAME SELECT`` from a name the statement reads
(:func:`~freight_pipeline.warehouse.ddl.arrow_input`, no view in the catalog); key sets (unit ids, raw documents,
rejects) are read the same way, never inlined in SQL.

A :class:`Warehouse` is made of parts sharing one :class:`~freight_pipeline.warehouse.database.Database`:
``writes`` (:class:`~freight_pipeline.warehouse.writes.Writes`), ``reads``
(:class:`~freight_pipeline.warehouse.reads.Reads`) and ``run_log``
(:class:`~freight_pipeline.warehouse.run_log.RunLog`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

import duckdb

from freight_pipeline.normalize.schema import TableSpec
from freight_pipeline.normalize.tables import FREIGHT_TABLES
from freight_pipeline.warehouse.backend import StorageBackend
from freight_pipeline.warehouse.codes_order import location_codes_in_canonical_order
from freight_pipeline.warehouse.database import Database
from freight_pipeline.warehouse.ddl import Catalog, ensure_tables, run
from freight_pipeline.warehouse.embedded import EmbeddedDuckDB
from freight_pipeline.warehouse.history import HISTORY_TABLES, SUBJECTS, ensure_history, macro_sql
from freight_pipeline.warehouse.leg_order import legs_in_leg_no_order
from freight_pipeline.warehouse.paths import working_db_path
from freight_pipeline.warehouse.pending_details import pending_details_into_retries
from freight_pipeline.warehouse.reads import Reads
from freight_pipeline.warehouse.run_log import RunLog
from freight_pipeline.warehouse.writes import Writes

log = logging.getLogger(__name__)


class Warehouse:
    """The working DuckDB database of one data directory, with the given ``freight`` tables.

    ``tables`` are the source tables (normally ``normalize.FREIGHT_TABLES``); the ``freight_meta``
    tables are always added. Opening creates what is missing (:meth:`ensure_schema`). ``backend``:
    where the tables live (default: the embedded DuckDB file with the default DuckDB settings). One
    process writes an embedded warehouse at a time (DuckDB's file lock); use one ``Warehouse`` per
    process and do not share it between threads.
    """

    def __init__(
        self,
        data_dir: Path,
        tables: Sequence[TableSpec],
        *,
        ensure_schema: bool = True,
        backend: StorageBackend | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.backend: StorageBackend = backend or EmbeddedDuckDB()
        self.path = working_db_path(self.data_dir)
        """The embedded working database file; its folder holds the run log in either backend."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        con = self.backend.connect(self.data_dir)
        self.database = Database(con, tables, self.backend)
        self.writes = Writes(self.database)
        self.reads = Reads(self.database)
        self.run_log = RunLog(self.database, self.data_dir)
        try:
            run(con, "SET TimeZone = 'UTC'")
            if ensure_schema:
                self.ensure_schema()
            else:  # nor is anything written into a later generation's tables (a run's alerts, say)
                refuse_newer(self._ensured_signature(), self.data_dir)
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
        """Create schemas and tables (the history's with its macros), add columns specs gained; returns the
        migration steps taken. Skipped when the database says it was ensured for this very schema
        (:func:`schema_signature`, its ``sync_state`` entry :data:`SCHEMA_STATE`): reading the catalog and
        probing the macros took 40 of a 60 ms opening, at every run."""
        specs = (*self.database.tables, *self.database.meta_tables)
        keys, hints = self.backend.key_constraints, self.backend.storage_hints
        signature = schema_signature(specs, keys, hints)
        held = self._ensured_signature()
        if held == signature:
            return []
        refuse_newer(held, self.data_dir)

        def ensure(con: duckdb.DuckDBPyConnection) -> list[str]:
            catalog = Catalog.read(con)  # once: each query of the catalog costs milliseconds at every opening
            return (ensure_tables(con, specs, key_constraints=keys, storage_hints=hints, catalog=catalog)
                    + ensure_history(con, key_constraints=keys, storage_hints=hints, catalog=catalog)
                    + legs_in_leg_no_order(con, specs) + location_codes_in_canonical_order(con, specs)
                    + pending_details_into_retries(con, catalog))

        steps = self.database.write("ensure_schema", ensure)
        primed = self.database.write(
            "prime_tables", lambda con: self.backend.prime_tables(con, (*specs, *HISTORY_TABLES)))
        if primed:
            log.info("primed %d tables never written (%s)", len(primed), ", ".join(primed))
        # after the schema's own commit: a process ended in between leaves no entry, and the next one ensures again
        self.writes.set_cursor(SCHEMA_STATE, signature, SCHEMA_STATE)
        return steps

    def _ensured_signature(self) -> str | None:
        """The signature the database was last ensured for (None: never, or no ``sync_state`` yet)."""
        try:
            return self.reads.get_cursor(SCHEMA_STATE)
        except duckdb.Error:  # a new database: nothing to read yet
            return None


SCHEMA_STATE = "warehouse_schema"
"""``sync_state`` entry: the :func:`schema_signature` the database's schema was last ensured for."""

SCHEMA_GENERATION = 1
"""The generation of the tables this release makes (its :func:`schema_signature`'s ``generation``), one more with each
release whose tables, history or macros change (``warehouse/test_store.py`` fails until it is raised): a working
database a later generation ensured is refused (:func:`refuse_newer`), not ensured back to this one's."""


class NewerWarehouse(RuntimeError):
    """The working database was ensured by a release whose tables are of a later generation than this one's."""


def refuse_newer(held: str | None, data_dir: Path) -> None:
    """:class:`NewerWarehouse` when the signature ``held`` (the working database's, None: none) is of a later
    generation than :data:`SCHEMA_GENERATION` (a signature of a release before generations counts as 0): this
    release would drop the constraints of the columns it does not know and write NULL into them, nothing said."""
    try:
        generation = json.loads(held).get("generation", 0) if held else 0
    except (ValueError, AttributeError):  # not this format: a release before generations
        generation = 0
    if isinstance(generation, int) and generation > SCHEMA_GENERATION:
        raise NewerWarehouse(
            f"{data_dir} was written by a newer release of freight_pipeline (its tables' generation {generation}, "
            f"this release's {SCHEMA_GENERATION}); nothing was written: run that release or a later one on it, or "
            "sync into another data directory")


@functools.cache
def schema_signature(specs: tuple[TableSpec, ...], key_constraints: bool, storage_hints: bool) -> str:
    """What :meth:`Warehouse.ensure_schema` makes of ``specs``, as JSON text: the tables' and the history's
    ``CREATE`` statements, the history's macros (and their :data:`SCHEMA_GENERATION`), DuckDB's version (it
    normalizes the macros and names the types the comparison reads) and a digest of the modules that apply them (a
    change to how the schema is ensured ensures it again)."""
    tables = [spec.ddl(key_constraint=key_constraints, storage_hints=storage_hints)
              for spec in (*specs, *HISTORY_TABLES)]
    code = hashlib.sha256()
    for module in ("freight_pipeline.warehouse.ddl", "freight_pipeline.warehouse.history", __name__):
        code.update(Path(sys.modules[module].__file__ or "").read_bytes())
    declared = hashlib.sha256(json.dumps([tables, [macro_sql(subject) for subject in SUBJECTS]]).encode())
    return json.dumps({"generation": SCHEMA_GENERATION, "schema": declared.hexdigest()[:20],
                       "code": code.hexdigest()[:20], "duckdb": duckdb.__version__})


def open_warehouse(data_dir: Path, backend: StorageBackend) -> Warehouse:
    """The pipeline's warehouse of ``data_dir`` in ``backend``: the freight tables and ``freight_meta``."""
    return Warehouse(Path(data_dir), FREIGHT_TABLES, backend=backend)
