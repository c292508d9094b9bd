"""Publish the working database for readers: a DuckDB file and Parquet folders, each swapped atomically.

Layout under ``data_dir``::

    work/warehouse.duckdb              private working database (only the pipeline opens it)
    warehouse.duckdb -> .parquet-versions/<v>/warehouse.duckdb
                                       symlink to the current published copy; readers open it read-only
    parquet -> .parquet-versions/<v>   symlink to the current Parquet version
    .parquet-versions/<v>/<schema>/<table>/data.parquet
    .parquet-versions/<v>/_manifest.json   rows and content fingerprint of every table

The DuckDB file: the working database is checkpointed (its WAL folded into the file) and copied
byte for byte to ``.publish-tmp-<v>/warehouse.duckdb`` while the pipeline holds it (nothing can
write it meanwhile); the copy is opened once (which proves it readable, exports the Parquet and,
when ``schemas`` is given, drops the other schemas). The published file must be in the configured
storage version (``StorageSettings.storage_version``: ``FREIGHT_PUBLISH_STORAGE_VERSION``, default
``v1.5.0``, which DuckDB 1.5 and later open, as the BI tools' drivers do; duckdb 2.0's own format
only 2.0 does): a copy already in it is
published as it is, another (a working database created before the setting, or under another one)
is converted into ``.publish-tmp-<v>.duckdb`` by ``COPY FROM DATABASE`` (every schema, table,
view, constraint and comment; the data compacted). The file is fsynced, moved into its version's directory
beside the Parquet, and the ``warehouse.duckdb`` symlink is swapped to it with one ``rename`` (a regular file there,
published before the symlink, is replaced by it). A new working database is created in the published format (see
:class:`~freight_pipeline.warehouse.embedded.EmbeddedDuckDB`), so a publish is normally a byte copy.
A reader that has the old file open keeps its old snapshot (its inode lives until it closes; the
DuckDB lock is per inode, so the swap never fails because of it); the next connection opens the new
file whole, in a process that keeps another connection open too: DuckDB shares one instance per database file
among a process's connections, keyed by the file's resolved path, so a file renamed over one path was answered
from the old instance for as long as a connection to it stayed open (a BI tool's connection pool, never all
closed at once, read the old publish for ever). The catalog name is ``warehouse`` in the copy as for readers (the
resolved file's name), so dbt's views, which name it, resolve in both. A superseded version's database file is
deleted once superseded for ``grace`` and no longer the one before the current (its Parquet is kept for
``keep_versions`` publishes).

Parquet: every publish writes a complete new version directory, then replaces the ``parquet``
symlink with one ``rename``: a reader resolving ``parquet/<schema>/<table>/`` sees either the old
version or the new one, every table of one version together, never a half-written file. Tables
whose content fingerprint (column names and types, row count, sum of row hashes) equals the
previous version's are hard-linked, not rewritten: an unchanged table keeps its file. Superseded
versions are kept for ``keep_versions`` publishes and at least ``grace`` after they stopped being
current (in the order of publishes, each manifest's ``sequence``: a version's name is the clock's
reading, which may step back), so a scan that resolved the old path just before the swap can still
open its files (on Linux an already open file stays readable after deletion anyway).

Only a settled working database is published: when the latest ``freight_meta.sync_runs`` row of the
dbt build (``meta.BUILD_STREAM``) is not a success, or a stream's latest run is still ``running``
(cut off), the database may hold marts half rebuilt or part of a run, so
:class:`~freight_pipeline.warehouse.backend.UnsettledWarehouse` is raised and readers keep the
previous publish until a run of each such stream succeeds. A stream that *failed* holds back
nothing: a stream is a failure domain of its own, each of its batches was written whole with its
cursor, its tables stay as last written (``freight_meta.table_freshness`` says since when), and the
other streams' data is published.

A crashed publish leaves at most ``.publish-tmp-*`` files or folders and ``.parquet-versions/tmp-*``
directories, removed by the next publish; the published file and the symlink are only ever
replaced by complete ones. Publishes are serialized by an ``flock`` on ``.publish.lock``. A data directory on a
filesystem that makes no symbolic links fails the publish (:class:`NoSymlinks`) before anything readers see changes.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from freight_pipeline.config import DATA_DIR_ENV, StorageSettings
from freight_pipeline.cursors import each_closed, on_cursors
from freight_pipeline.process_end import unless_stop_asked
from freight_pipeline.warehouse.backend import UnsettledWarehouse, unsettled_runs
from freight_pipeline.warehouse.comments import TableDescriptions, catalog_comments, describe_tables
from freight_pipeline.warehouse.ddl import (
    catalog_cursors,
    checked_storage_version,
    connect,
    explained_out_of_memory,
    first,
    literal,
    quote,
    run,
    storage_tag,
)
from freight_pipeline.warehouse.paths import DB_NAME, working_db_path

log = logging.getLogger(__name__)

PUBLISHED_DB = DB_NAME
PARQUET_LINK = "parquet"
VERSIONS_DIR = ".parquet-versions"
MANIFEST = "_manifest.json"
TMP_DB_PREFIX = ".publish-tmp-"
TMP_VERSION_PREFIX = "tmp-"
LOCK_FILE = ".publish.lock"
PARQUET_FILE = "data.parquet"
CONVERTED = "publish_converted"
"""The alias under which the copy's conversion to the published storage version is attached."""
ROW_GROUP_BYTES = "32MB"
"""Parquet row groups by size, not by rows: a row group of raw JSON documents is held whole in memory."""


@dataclass(frozen=True)
class PublishResult:
    database: Path
    version: str
    parquet_dir: Path
    tables: dict[str, int]
    """Rows per published table (``schema.table``)."""
    exported: list[str] = field(default_factory=list)
    """Tables written to Parquet by this publish."""
    reused: list[str] = field(default_factory=list)
    """Unchanged tables whose previous Parquet file was kept (hard link)."""
    seconds: float = 0.0
    storage_version: str = ""
    """The published file's storage version as DuckDB tags it (``v1.5.0+``: DuckDB 1.5.0 and later open it)."""
    converted: bool = False
    """The working database was in another storage version: the published file is its conversion."""

    def summary(self) -> str:
        """One line for the log."""
        return (
            f"published {self.version} (storage {self.storage_version}"
            f"{', converted from the working database' if self.converted else ''}): {len(self.tables)} tables "
            f"({len(self.exported)} exported, {len(self.reused)} unchanged) in {self.seconds:.1f} s"
        )

    def metadata(self) -> dict[str, Any]:
        """What the publish asset shows."""
        return {
            "version": self.version,
            "published_path": self.database,
            "parquet_dir": parquet_root(self.database.parent),
            "parquet_version_dir": self.parquet_dir,
            "tables": len(self.tables),
            "row_counts": dict(sorted(self.tables.items())),
            "exported_tables": len(self.exported),
            "unchanged_tables": len(self.reused),
            "seconds": round(self.seconds, 3),
            "storage_version": self.storage_version,
            "converted": self.converted,
        }


def published_db_path(data_dir: Path) -> Path:
    return Path(data_dir) / PUBLISHED_DB


def parquet_root(data_dir: Path) -> Path:
    """``parquet/``: the stable path readers use; ``parquet/<schema>/<table>/`` holds one table."""
    return Path(data_dir) / PARQUET_LINK


def publish(
    data_dir: Path,
    schemas: Sequence[str] | None = None,
    *,
    settings: StorageSettings,
    connection: duckdb.DuckDBPyConnection | None = None,
    keep_versions: int = 2,
    grace: dt.timedelta = dt.timedelta(minutes=10),
) -> PublishResult:
    """Publish the working database of ``data_dir`` (see the module doc).

    ``schemas``: the schemas to publish (e.g. ``("freight", "freight_meta", "analytics")``);
    None publishes every schema that has tables. ``settings``: the publish's memory limit and the
    published file's storage version. ``connection``: an open connection to the working database
    (e.g. ``Warehouse.con``) with no transaction in progress; without one the file is opened here
    (it must not be open in another process, e.g. dbt).
    """
    started = time.monotonic()
    data_dir = Path(data_dir)
    work = working_db_path(data_dir)
    if not work.exists():
        raise FileNotFoundError(f"no working database at {work}")
    storage = checked_storage_version(settings.storage_version)
    with _publish_lock(data_dir), explained_out_of_memory("the publish", settings, "publish"):
        clean_leftovers(data_dir)
        version = dt.datetime.now(dt.UTC).strftime("v%Y%m%dT%H%M%S%fZ") + f"-{uuid.uuid4().hex[:6]}"
        copy = data_dir / f"{TMP_DB_PREFIX}{version}" / PUBLISHED_DB
        converted = data_dir / f"{TMP_DB_PREFIX}{version}.duckdb"
        versions = data_dir / VERSIONS_DIR
        stage = versions / f"{TMP_VERSION_PREFIX}{version}"
        try:
            with _opened_snapshot(work, copy, connection, settings) as con:
                previous = _current_manifest(data_dir)
                stage.mkdir(parents=True)
                if schemas is not None:
                    _drop_other_schemas(con, schemas)
                manifest, exported, reused = _export_parquet(con, stage, schemas, previous)
                ready, tag = _in_storage_version(con, copy, converted, storage, narrowed=schemas is not None)
            manifest["version"] = version
            manifest["sequence"] = max(_sequences(versions).values(), default=0) + 1
            manifest["storage_version"] = tag
            _write_json(stage / MANIFEST, manifest)
            _fsync_path(ready)
            os.replace(ready, stage / PUBLISHED_DB)
            _fsync_tree(stage)
            # before anything readers see is replaced: a filesystem without symlinks fails the publish whole
            link = _staged_link(parquet_root(data_dir), Path(VERSIONS_DIR) / version)
            db_link = _staged_link(published_db_path(data_dir), Path(VERSIONS_DIR) / version / PUBLISHED_DB)
            unless_stop_asked()  # a stop of a run's thread no signal reaches, before readers see anything
        except BaseException:
            clean_leftovers(data_dir)  # a failed attempt leaves nothing behind (a killed one: the next publish)
            raise

        final = versions / version
        os.rename(stage, final)
        _fsync_path(versions)
        published = published_db_path(data_dir)
        _remove_stale_wal(published)
        os.replace(db_link, published)
        _swap_link(link, parquet_root(data_dir))
        _fsync_path(data_dir)
        shutil.rmtree(copy.parent, ignore_errors=True)
        prune_versions(data_dir, keep=keep_versions, grace=grace)
    tables = {name: int(info["rows"]) for name, info in manifest["tables"].items()}
    log.info("published %s (%s%s): %d tables (%d exported, %d unchanged)", version, tag,
             ", converted" if ready == converted else "", len(tables), len(exported), len(reused))
    return PublishResult(published, version, final, tables, exported, reused, time.monotonic() - started,
                         tag, ready == converted)


# --- steps --------------------------------------------------------------------------------------


@contextmanager
def _opened_snapshot(
    work: Path, copy: Path, connection: duckdb.DuckDBPyConnection | None, settings: StorageSettings
) -> Iterator[duckdb.DuckDBPyConnection]:
    """The snapshot taken (:func:`_snapshot`) and a connection whose current database is the copy. Without
    ``connection``, one DuckDB instance does both, the working database attached for the snapshot and detached (its
    file lock released) before the copy is attached: each instance a publish made cost 15-20 ms of CPU, a tenth of
    a quiet run's publish (``docs/performance.md``). Each is attached under its file's own name, the name a connection
    to the file gives it."""
    if connection is not None:
        _snapshot(work, copy, connection)
        con = connect(copy, settings, "publish")
    else:
        con = connect(":memory:", settings, "publish")
        try:
            # spills beside the copy, as an instance of the copy's own did (in the attempt's folder, removed with it)
            run(con, f"SET temp_directory = '{_sql_path(copy)}.tmp'")
            run(con, f"ATTACH '{_sql_path(work)}' AS {quote(work.stem)}")
            run(con, f"USE {quote(work.stem)}")
            _snapshot(work, copy, con)
            run(con, "USE memory")
            run(con, f"DETACH {quote(work.stem)}")
            run(con, f"ATTACH '{_sql_path(copy)}' AS {quote(copy.stem)}")
            run(con, f"USE {quote(copy.stem)}")
        except BaseException:
            con.close()
            raise
    try:
        yield con
    finally:
        con.close()


def _snapshot(work: Path, target: Path, con: duckdb.DuckDBPyConnection) -> None:
    """Byte copy of the checkpointed working database, open in ``con`` (its current database), the sync's tables
    described in its catalog first (:func:`~freight_pipeline.warehouse.comments.describe_tables`)."""
    target.parent.mkdir()
    _require_settled(con)
    describe_tables(con)
    run(con, "CHECKPOINT")
    wal = work.with_name(work.name + ".wal")
    if wal.exists() and wal.stat().st_size > 0:
        raise RuntimeError(f"{wal} is not empty after CHECKPOINT: a transaction is still open")
    shutil.copyfile(work, target)


def _require_settled(con: duckdb.DuckDBPyConnection) -> None:
    unsettled = unsettled_runs(con)
    if unsettled:
        what = ", ".join(f"{stream} {status} in run {run_id}" for stream, run_id, status in unsettled)
        raise UnsettledWarehouse(
            f"not published: the working database holds runs that did not succeed ({what}); readers keep "
            "the previous publish until a run of each of these succeeds"
        )


EXPORT_THREADS = 2
"""Tables exported (or linked, unchanged) at once (a small table's COPY runs on one core)."""


def _export_parquet(
    con: duckdb.DuckDBPyConnection, stage: Path, schemas: Sequence[str] | None,
    previous: tuple[Path, dict[str, Any]] | None,
) -> tuple[dict[str, Any], list[str], list[str]]:
    """Write each table of the copy to Parquet under ``stage`` (or link its unchanged previous file),
    :data:`EXPORT_THREADS` tables at a time, each thread on a cursor of its own."""
    prev_dir, prev_manifest = previous if previous else (None, {"tables": {}})
    columns = _columns(con)
    sizes = _base_tables(con, schemas)
    held = catalog_comments(con, {schema for schema, _ in sizes})
    arrow_types = _parquet_arrow_types(con, stage, {kind for table in sizes for _, kind in columns[table]})
    sums = _row_sums(con, list(sizes))

    def export(cursor: duckdb.DuckDBPyConnection, found: tuple[str, str]) -> tuple[dict[str, Any], bool]:
        schema, table = found
        described = TableDescriptions.of(held, schema, table, [name for name, _ in columns[(schema, table)]])
        rows, hashes = sums[(schema, table)]
        fingerprint = _fingerprint(rows, hashes, columns[(schema, table)], described)
        target = stage / schema / table / PARQUET_FILE
        target.parent.mkdir(parents=True, exist_ok=True)
        before = prev_manifest["tables"].get(f"{schema}.{table}")
        reused = (prev_dir is not None and bool(before) and before.get("fingerprint") == fingerprint
                  and _link(prev_dir / schema / table / PARQUET_FILE, target))
        if not reused:
            arrow_schema = pa.schema([(name, arrow_types[kind]) for name, kind in columns[(schema, table)]])
            run(cursor,
                f"COPY (SELECT * FROM {quote(schema)}.{quote(table)}) TO '{_sql_path(target)}' "
                f"(FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE_BYTES '{ROW_GROUP_BYTES}'"
                f"{_kv_metadata(described, arrow_schema)})")
        return {"rows": rows, "fingerprint": fingerprint, "file": f"{schema}/{table}/{PARQUET_FILE}"}, reused

    # the largest first, so that the last to end is a small one (not the raw store alone on one core); a cursor a
    # thread, not a table (each new one costs its making and a USE)
    largest_first = sorted(sizes, key=sizes.__getitem__, reverse=True)
    done = dict(zip(largest_first, on_cursors(each_closed(catalog_cursors(con)), export, largest_first,
                                              EXPORT_THREADS, "publish"), strict=True))
    by_name = {f"{schema}.{table}": done[(schema, table)] for schema, table in sizes}
    entries = {name: entry for name, (entry, _) in by_name.items()}
    exported = [name for name, (_, reused) in by_name.items() if not reused]
    reused = [name for name, (_, was) in by_name.items() if was]
    manifest = {"published_at": dt.datetime.now(dt.UTC).isoformat(), "tables": entries}
    return manifest, exported, reused


def _in_storage_version(
    con: duckdb.DuckDBPyConnection, copy: Path, converted: Path, storage: str, *, narrowed: bool
) -> tuple[Path, str]:
    """The file to publish and its storage tag: ``copy`` (open in ``con``) when it is in ``storage``'s
    format, else ``converted``, a new file of that format holding everything of the copy."""
    run(con, f"ATTACH '{_sql_path(converted)}' AS {CONVERTED} (STORAGE_VERSION '{storage}')")
    wanted, have = storage_tag(con, CONVERTED), storage_tag(con, _current_database(con))
    if wanted == have:
        run(con, f"DETACH {CONVERTED}")
        converted.unlink()
        if narrowed:  # the dropped schemas' blocks are freed in the file
            run(con, "CHECKPOINT")
        return copy, have
    # in insertion order: with it off (``ddl.connect``), a table larger than a row group came out with its row groups
    # in another order, and the rowids that say which run of a stream was recorded last (``meta.latest_runs``) with it
    ordered = first(run(con, "SELECT current_setting('preserve_insertion_order')"))
    run(con, "SET preserve_insertion_order = true")
    try:
        run(con, f"COPY FROM DATABASE {quote(_current_database(con))} TO {CONVERTED}")
    finally:
        run(con, f"SET preserve_insertion_order = {'true' if ordered and ordered[0] else 'false'}")
    run(con, f"DETACH {CONVERTED}")
    return converted, wanted


def _current_database(con: duckdb.DuckDBPyConnection) -> str:
    return str(first(run(con, "SELECT current_database()"))[0])


def _sql_path(path: Path) -> str:
    return str(path).replace("'", "''")


def _base_tables(con: duckdb.DuckDBPyConnection, schemas: Sequence[str] | None) -> dict[tuple[str, str], int]:
    """(schema, table) -> its estimated size, of every table of ``schemas`` (None: all), by name."""
    rows = run(
        con,
        "SELECT schema_name, table_name, estimated_size FROM duckdb_tables() "
        "WHERE database_name = current_database() AND NOT temporary ORDER BY schema_name, table_name",
    )
    return {(s, t): int(size or 0) for s, t, size in rows if schemas is None or s in schemas}


def _drop_other_schemas(con: duckdb.DuckDBPyConnection, schemas: Sequence[str]) -> None:
    """Drop schemas not published (``main`` and system schemas stay)."""
    rows = run(
        con, "SELECT schema_name FROM duckdb_schemas() WHERE database_name = current_database() AND NOT internal"
    )
    for (schema,) in rows:
        if schema not in schemas and schema != "main":
            run(con, f"DROP SCHEMA {quote(schema)} CASCADE")


def _columns(con: duckdb.DuckDBPyConnection) -> dict[tuple[str, str], list[tuple[str, str]]]:
    """(schema, table) -> its (column name, data type) in order, of every table: one catalog query (one a
    table took a fifth of a publish)."""
    columns: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for schema, table, column, data_type in run(
        con,
        "SELECT schema_name, table_name, column_name, data_type FROM duckdb_columns() "
        "WHERE database_name = current_database() ORDER BY schema_name, table_name, column_index",
    ):
        columns.setdefault((schema, table), []).append((column, data_type))
    return columns


def _parquet_arrow_types(con: duckdb.DuckDBPyConnection, stage: Path, kinds: set[str]) -> dict[str, pa.DataType]:
    """DuckDB type -> the Arrow type pyarrow reads from a Parquet column DuckDB wrote of it, for each of ``kinds``:
    from one empty file of a column per type (a column's Arrow type depends on its DuckDB type alone)."""
    listed = sorted(kinds)
    if not listed:
        return {}
    probe = stage / "arrow-types.parquet"
    columns = ", ".join(f"NULL::{kind} AS c{number}" for number, kind in enumerate(listed))
    try:
        run(con, f"COPY (SELECT {columns} LIMIT 0) TO '{_sql_path(probe)}' (FORMAT parquet)")
        read = pq.read_schema(probe)
    finally:
        probe.unlink(missing_ok=True)
    return {kind: read.field(f"c{number}").type for number, kind in enumerate(listed)}


def _kv_metadata(described: TableDescriptions, arrow_schema: pa.Schema) -> str:
    """The ``KV_METADATA`` option of a table's Parquet file (empty when nothing is described): its description, and
    ``arrow_schema`` (what pyarrow reads from the file) with each field's description, which pyarrow, pandas and
    Polars read back as field metadata."""
    if described.empty:
        return ""
    pairs = described.parquet_metadata(arrow_schema)
    return ", KV_METADATA {" + ", ".join(f"{literal(key)}: {literal(value)}" for key, value in pairs.items()) + "}"


def _row_sums(
    con: duckdb.DuckDBPyConnection, tables: Sequence[tuple[str, str]]
) -> dict[tuple[str, str], tuple[int, str]]:
    """Each of ``tables``' row count and the sum of its rows' hashes (as text), in one statement: a statement a table
    cost 1.7-2.0 ms of CPU in a quiet run's publish, most of it the statement's own."""
    if not tables:
        return {}
    branches = [f"SELECT {number} AS n, count(*) AS count, coalesce(sum(hash(*COLUMNS(*))::HUGEINT), 0)::VARCHAR "
                f"AS hashes FROM {quote(schema)}.{quote(table)}" for number, (schema, table) in enumerate(tables)]
    found = {int(n): (int(count), str(hashes)) for n, count, hashes in run(con, " UNION ALL ".join(branches))}
    return {table: found[number] for number, table in enumerate(tables)}


def _fingerprint(rows: int, hashes: str, columns: list[tuple[str, str]], described: TableDescriptions) -> str:
    """A table's content fingerprint: its column names and types (``columns``), row count, sum of row hashes
    (:func:`_row_sums`), and the descriptions its file carries."""
    text = json.dumps([columns, rows, hashes, described.table, described.columns])
    return hashlib.sha256(text.encode()).hexdigest()


def _link(source: Path, target: Path) -> bool:
    if not source.is_file():
        return False
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)
    return True


class NoSymlinks(OSError):
    """The data directory's filesystem makes no symbolic links, which the ``parquet`` swap is."""


def _staged_link(link: Path, target: Path) -> Path:
    """A new symlink beside ``link`` to ``target`` (relative), to be renamed over ``link``; :class:`NoSymlinks`
    naming the data directory when its filesystem makes none (vfat, exFAT, an SMB share without Unix extensions)."""
    staged = link.with_name(f"{link.name}.{TMP_VERSION_PREFIX}{uuid.uuid4().hex[:8]}")
    try:
        os.symlink(target, staged)
    except OSError as exc:
        raise NoSymlinks(
            exc.errno, f"not published: the data directory {link.parent} is on a filesystem that makes no symbolic "
            f"links ({exc.strerror}), and {link.name} is one (swapped to each new version): put the data "
            f"directory ({DATA_DIR_ENV}) on a local filesystem such as ext4, xfs or APFS") from exc
    return staged


def _swap_link(staged: Path, link: Path) -> None:
    """Rename ``staged`` (:func:`_staged_link`) over ``link``; a real directory there is moved aside once."""
    if link.exists() and not link.is_symlink():
        aside = link.parent / VERSIONS_DIR / ("v0-legacy-" + uuid.uuid4().hex[:6])
        log.warning("moving the pre-existing directory %s to %s", link, aside)
        os.rename(link, aside)
    os.replace(staged, link)


def _current_manifest(data_dir: Path) -> tuple[Path, dict[str, Any]] | None:
    link = parquet_root(data_dir)
    try:
        current = link.resolve(strict=True)
        return current, json.loads((current / MANIFEST).read_text())
    except (OSError, ValueError):
        return None


def _remove_stale_wal(published: Path) -> None:
    """A WAL next to the published file belongs to the old file (someone opened it read-write);
    replayed against the new file it would corrupt it."""
    wal = published.with_name(published.name + ".wal")
    if wal.exists():
        log.warning("removing %s: readers must open the published database read-only", wal)
        wal.unlink()


# --- housekeeping -------------------------------------------------------------------------------


def clean_leftovers(data_dir: Path) -> list[Path]:
    """Remove what a crashed publish left: temporary database copies, staged versions, temp links."""
    data_dir = Path(data_dir)
    removed: list[Path] = []
    for path in data_dir.glob(f"{TMP_DB_PREFIX}*"):  # the copy, its WAL, and DuckDB's spill folder ``.tmp``
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        removed.append(path)
    for link in (PARQUET_LINK, PUBLISHED_DB):
        for path in data_dir.glob(f"{link}.{TMP_VERSION_PREFIX}*"):
            path.unlink(missing_ok=True)
            removed.append(path)
    versions = data_dir / VERSIONS_DIR
    if versions.is_dir():
        for path in versions.glob(f"{TMP_VERSION_PREFIX}*"):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    for path in removed:
        log.info("removed leftover of an interrupted publish: %s", path)
    return removed


def _sequences(versions: Path) -> dict[Path, int]:
    """Each complete version under ``versions`` -> its place in the order of publishes (its manifest's ``sequence``;
    0: a version without one, made before the manifests counted). Not its name: a name is the clock's reading, and
    a clock stepped back names a later publish earlier."""
    found: dict[Path, int] = {}
    if not versions.is_dir():
        return found
    for path in versions.iterdir():
        if not path.is_dir() or path.name.startswith(TMP_VERSION_PREFIX):
            continue
        try:
            found[path] = int(json.loads((path / MANIFEST).read_text()).get("sequence", 0))
        except (OSError, ValueError, TypeError, AttributeError):
            found[path] = 0
    return found


def prune_versions(data_dir: Path, *, keep: int = 2, grace: dt.timedelta = dt.timedelta(minutes=10)) -> list[Path]:
    """Delete superseded versions beyond the ``keep`` newest, and the database file of every superseded version but
    the one published before the current (a reader that resolved the link just before the swap opens it), once
    superseded for ``grace``, newest meaning published last (:func:`_sequences`); a version's successor is the one
    published after it. Returns the versions deleted."""
    versions = Path(data_dir) / VERSIONS_DIR
    try:
        current = parquet_root(data_dir).resolve(strict=True)
    except OSError:
        return []
    sequences = _sequences(versions)
    complete = sorted(sequences, key=lambda path: (sequences[path], path.name))
    removed: list[Path] = []
    now = time.time()
    old = [p for p in complete if p.resolve() != current]
    for index, path in enumerate(old):
        successor = old[index + 1] if index + 1 < len(old) else current
        if now - successor.stat().st_mtime < grace.total_seconds():
            continue
        if index < len(old) - keep:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
        elif index < len(old) - 1:  # its Parquet kept; its database file too while it was the one before current
            for name in (PUBLISHED_DB, f"{PUBLISHED_DB}.wal"):
                (path / name).unlink(missing_ok=True)
    return removed


@contextmanager
def _publish_lock(data_dir: Path) -> Iterator[None]:
    data_dir.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: no inter-process serialization
        yield
        return
    with open(data_dir / LOCK_FILE, "a+") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _write_json(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, indent=2, sort_keys=True))


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_tree(root: Path) -> None:
    for directory, _, files in os.walk(root):
        for name in files:
            _fsync_path(Path(directory) / name)
        _fsync_path(Path(directory))
