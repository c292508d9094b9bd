"""DuckDB connections to the lake: extensions from their signed packages, the S3 secret, ``ATTACH``.

The extensions are not downloaded: each comes from its PyPI package (``duckdb-extension-ducklake``
and friends, built and signed for duckdb 1.5.5), loaded by path, with automatic installation off. DuckDB checks
an extension file's signature as it loads it, hashing the whole file (67 MB for a SQLite catalog's two: 140 ms
of every connection); a process has it checked once per file, and its later connections load the files it
checked, unchanged since, without checking them again (:func:`checked_before`).
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib
import random
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import duckdb

from freight_pipeline.lake.settings import LAKE_ALIAS, LakeSettings
from freight_pipeline.warehouse.ddl import literal

_PACKAGES = {
    "ducklake": "duckdb_extension_ducklake",
    "postgres_scanner": "duckdb_extension_postgres_scanner",
    "sqlite_scanner": "duckdb_extension_sqlite_scanner",
    "httpfs": "duckdb_extension_httpfs",
}
COMMIT_RETRIES = 50
"""DuckLake retries a commit that met a concurrent one (``ducklake_max_retry_count``, default 10): with
several writers committing every batch, 10 was not always enough (seen with the SQLite catalog)."""


CONFLICT_ATTEMPTS = 20
"""How often a writing transaction that met a conflicting concurrent commit runs again (``Warehouse``)."""
ATTACH_ATTEMPTS = 12
"""How often ``ATTACH`` is tried: the first attach of a new catalog creates its tables, and several
writers starting at once race to do it. The losers see one of :data:`CREATION_RACES` (a SQLite catalog is
also created under a file lock beside it: :func:`catalog_writes`)."""
CREATION_RACES = ("already exists", "database is locked", "unique constraint", "duplicate key",
                  "could not serialize", "conflict", "deadlock")
"""What a concurrent creation of one catalog makes the loser's ``ATTACH`` say (SQLite, PostgreSQL, DuckLake's own
conflict check), lower case: it is tried again."""


def is_creation_race(exc: BaseException) -> bool:
    """An ``ATTACH`` that failed because another process was creating the same catalog."""
    text = str(exc).lower()
    return any(race in text for race in CREATION_RACES)


@contextlib.contextmanager
def catalog_writes(lake: LakeSettings) -> Iterator[None]:
    """One process at a time creates a SQLite catalog or writes to it, from BEGIN to COMMIT: an exclusive
    lock on ``<catalog file>.lock`` beside it. DuckLake holds a SQLite transaction open for the whole of a
    DuckDB one, so two writers' transactions that overlap fail (``database is locked``, after SQLite's 5 s
    wait) and are redone whole. A SQLite catalog's writers share one machine (SQLite's own rule), so they
    take turns here; a PostgreSQL catalog relies on the retries alone; a DuckDB one has a single writer."""
    catalog = Path(lake.target)  # resolved by LakeSettings
    path = catalog.with_name(catalog.name + ".lock")
    held: set[Path] = _TURNS.__dict__.setdefault("held", set())
    if lake.kind != "sqlite" or path in held:  # this thread's turn already (a connection opened inside it)
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        held.add(path)
        try:
            yield
        finally:
            held.discard(path)
            fcntl.flock(lock, fcntl.LOCK_UN)


_TURNS = threading.local()
"""The catalog locks this thread holds (:func:`catalog_writes` is reentrant per thread)."""


def write_ahead_logged(catalog: Path) -> None:
    """Put a SQLite catalog in WAL mode (kept in the file), under :func:`catalog_writes`: readers then never
    hold up a writer's commit (in the default journal mode an open reading transaction does, for SQLite's
    5 s, then the commit fails). Checked at each writing attach (one query once it is set); a catalog another
    process has open keeps its mode until a later attach."""
    with contextlib.closing(sqlite3.connect(catalog, timeout=1.0)) as db, \
            contextlib.suppress(sqlite3.OperationalError):
        if db.execute("PRAGMA journal_mode").fetchone() != ("wal",):
            db.execute("PRAGMA journal_mode=WAL")


def is_commit_conflict(exc: BaseException) -> bool:
    """A commit that failed because a concurrent transaction committed first."""
    text = str(exc)
    return isinstance(exc, duckdb.TransactionException) and (
        "conflict" in text.lower() or "Failed to commit DuckLake transaction" in text
    )


class LakeCommitConflict(RuntimeError):
    """A write that kept meeting concurrent commits it could not be merged with; the message says why."""


class LakeUnavailable(RuntimeError):
    """The lake's catalog or data path cannot be reached or its extension not loaded."""


def extension_path(name: str) -> Path:
    """The extension file shipped by its package, for this duckdb version."""
    try:
        package = importlib.import_module(_PACKAGES[name])
    except ImportError:
        raise LakeUnavailable(
            f"lake mode needs DuckDB's {name} extension package ({_PACKAGES[name]}), which is not installed: "
            f"it exists for duckdb 1.5.5 only, and this environment has duckdb {duckdb.__version__}. Use the lake "
            "environment: `make setup-lake` (.venv-lake), or pip install -e '.[lake]' with constraints-lake.txt "
            "(docs/lake.md, Configuration)"
        ) from None
    folder = Path(package.__file__ or "").parent / "extensions" / f"v{duckdb.__version__}"
    found = sorted(folder.glob(f"{name}.duckdb_extension"))
    if not found:
        raise LakeUnavailable(f"{_PACKAGES[name]} has no {name} extension for duckdb {duckdb.__version__} in {folder}")
    return found[0]


def needed_extensions(lake: LakeSettings) -> list[str]:
    names = ["ducklake"]
    if lake.kind == "postgres":
        names.append("postgres_scanner")
    elif lake.kind == "sqlite":
        names.append("sqlite_scanner")
    if lake.s3 is not None:
        names.append("httpfs")
    return names


_CHECKED: dict[Path, tuple[int, int, int]] = {}
"""Extension files whose signature DuckDB checked in this process, with their (inode, size, mtime) then."""
_CHECKED_LOCK = threading.Lock()


def _file_state(path: Path) -> tuple[int, int, int]:
    stat = path.stat()
    return stat.st_ino, stat.st_size, stat.st_mtime_ns


def checked_before(names: Iterable[str]) -> bool:
    """Whether DuckDB checked the signature of each of ``names``' extension files in this process, and each file is
    as it was then (the same inode, size and modification time)."""
    paths = [extension_path(name) for name in names]
    with _CHECKED_LOCK:
        return bool(paths) and all(_CHECKED.get(path) == _file_state(path) for path in paths)


def load_extensions(con: duckdb.DuckDBPyConnection, names: Iterable[str], *, checked: bool = True) -> None:
    """LOAD each extension by path; ``checked``: the connection checks their signatures (DuckDB's default), and a
    file it loaded is remembered as checked (:func:`checked_before`)."""
    for name in names:
        path = extension_path(name)
        before = _file_state(path)
        con.execute(f"LOAD {literal(str(path))}")
        if checked and _file_state(path) == before:
            with _CHECKED_LOCK:
                _CHECKED[path] = before


def secret_sql(lake: LakeSettings) -> str | None:
    """``CREATE SECRET`` for the S3 data path (None: local data). Holds the key: never log it."""
    s3 = lake.s3
    if s3 is None:
        return None
    options = [f"REGION {literal(s3.region)}", f"URL_STYLE {literal(s3.url_style)}",
               f"USE_SSL {'true' if s3.use_ssl else 'false'}"]
    if s3.endpoint:
        options.append(f"ENDPOINT {literal(s3.endpoint)}")
    if s3.key_id:
        options.append(f"KEY_ID {literal(s3.key_id)}")
    if s3.secret:
        options.append(f"SECRET {literal(s3.secret)}")
    if s3.session_token:
        options.append(f"SESSION_TOKEN {literal(s3.session_token)}")
    if not s3.key_id:
        options.append("PROVIDER credential_chain")
    return f"CREATE OR REPLACE TEMPORARY SECRET freight_lake_s3 (TYPE s3, {', '.join(options)})"


CATALOG_SECRET = "freight_lake_catalog"
"""The connection's secret holding the PostgreSQL catalog's password (:func:`catalog_secret_sql`)."""


def catalog_secret_sql(lake: LakeSettings) -> str | None:
    """``CREATE SECRET`` holding the catalog's password (None: it has none), which ``ATTACH`` names
    (``META_SECRET``) instead of carrying it in its connection string: the PostgreSQL extension repeats that string
    in the error of every statement while the catalog is unreachable. Holds the password: never log it."""
    password = lake.catalog_password
    if password is None:
        return None
    return f"CREATE OR REPLACE TEMPORARY SECRET {CATALOG_SECRET} (TYPE postgres, PASSWORD {literal(password)})"


def attach_sql(lake: LakeSettings, *, read_only: bool = False, snapshot: int | None = None) -> str:
    options = [f"DATA_PATH {literal(lake.data_uri)}"]
    if lake.catalog_password is not None:
        options.append(f"META_SECRET {literal(CATALOG_SECRET)}")
    if read_only:
        options.append("READ_ONLY")
    if snapshot is not None:
        options.append(f"SNAPSHOT_VERSION {int(snapshot)}")
    return f"ATTACH IF NOT EXISTS {literal('ducklake:' + lake.attach_target)} AS {LAKE_ALIAS} ({', '.join(options)})"


def prepare(
    con: duckdb.DuckDBPyConnection, lake: LakeSettings, *, read_only: bool = False, snapshot: int | None = None,
    checked: bool = True,
) -> None:
    """Load the extensions, create the S3 secret, attach the lake as ``lake`` and make it the default
    catalog. Errors name the catalog and data path without secrets. ``checked``: as :func:`load_extensions`."""
    try:
        load_extensions(con, needed_extensions(lake), checked=checked)
        for secret in (secret_sql(lake), catalog_secret_sql(lake)):
            if secret is not None:
                con.execute(secret)
        con.execute(f"SET ducklake_max_retry_count = {COMMIT_RETRIES}")
        for attempt in range(1, ATTACH_ATTEMPTS + 1):
            try:
                if read_only:  # a reader never waits for a writer's turn (nor creates a catalog)
                    con.execute(attach_sql(lake, read_only=True, snapshot=snapshot))
                else:
                    with catalog_writes(lake):
                        if lake.kind == "sqlite":
                            write_ahead_logged(Path(lake.target))
                        con.execute(attach_sql(lake, snapshot=snapshot))
                break
            except duckdb.Error as exc:
                if attempt == ATTACH_ATTEMPTS or not is_creation_race(exc):
                    raise
                time.sleep(random.uniform(0.1, 0.3) * attempt)
        con.execute(f"USE {LAKE_ALIAS}")
    except duckdb.Error as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        for hidden in (lake.s3.secret if lake.s3 else None, lake.s3.session_token if lake.s3 else None, lake.target,
                       lake.catalog_password):
            if hidden:
                first_line = first_line.replace(hidden, "***")
        raise LakeUnavailable(f"cannot open the {lake.describe()}: {first_line}") from None


def connect_lake(
    lake: LakeSettings, scratch: Path, memory_limit: str, *, read_only: bool = False, snapshot: int | None = None,
    threads: int | None = None,
) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with the lake attached as its default catalog (as of ``snapshot``: time
    travel, read-only); spills go to ``scratch``; ``threads``: DuckDB's (None: its default, one a core)."""
    scratch.mkdir(parents=True, exist_ok=True)
    trusted = checked_before(needed_extensions(lake))  # DuckDB checked these very files in this process already
    con = duckdb.connect(config={
        "memory_limit": memory_limit, "preserve_insertion_order": False,
        "autoinstall_known_extensions": False, "temp_directory": str(scratch),
        **({"allow_unsigned_extensions": True} if trusted else {}),
        **({"threads": threads} if threads is not None else {}),
    })
    try:
        prepare(con, lake, read_only=read_only, snapshot=snapshot, checked=not trusted)
    except BaseException:
        con.close()
        raise
    return con
