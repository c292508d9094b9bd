"""A bad setup refused before anything runs: each setting the commands read, checked up front.

A command that writes (``sync``, ``demo``, ``ui``) calls :func:`check_setup` first; a setting that
cannot work is :class:`BadSetup`, one line naming the setting and what is wrong with it, which the
command prints and exits 2 on (no traceback, no step started, no dbt worker spawned). The checks are
the parsers the pipeline itself uses later (``config.flag_from_env`` and ``minutes_from_env``,
``LakeSettings.from_env``, ``checked_storage_version``, ...), run once here, so the up-front check and
the use cannot disagree; what only a probe can tell (a memory size DuckDB reads, a directory this
process can write, with room) is probed. Cheap: what is unset is not probed (the defaults work), so a
refusal takes a fraction of a second.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

from freight_pipeline.config import (
    BASE_URL_ENV,
    CODE_CONVERSIONS_ENV,
    DATA_DIR_ENV,
    DBT_FULL_REFRESH_ENV,
    DBT_MEMORY_LIMIT_ENV,
    DBT_REPLAY_ENV,
    DEFAULT_BASE_URL,
    DOCUMENT_CONTENT_ENV,
    DOCUMENTS_ENV,
    DOCUMENTS_RELIST_ENV,
    DUCKDB_MEMORY_LIMIT_ENV,
    HISTORY_ENV,
    LAKE_RETENTION_ENV,
    MAX_SYNC_AGE_ENV,
    MIN_FREE_MB_ENV,
    ON_TIME_TOLERANCE_ENV,
    PUBLISH_MEMORY_LIMIT_ENV,
    PUBLISH_STORAGE_VERSION_ENV,
    RECONCILE_ENV,
    SCHEDULES_RUNNING_ENV,
    USERNAME_ENV,
    flag_from_env,
    minutes_from_env,
)
from freight_pipeline.lake.settings import LakeSettings

FLAGS = (DOCUMENTS_ENV, CODE_CONVERSIONS_ENV, HISTORY_ENV, DOCUMENT_CONTENT_ENV, SCHEDULES_RUNNING_ENV,
         DBT_FULL_REFRESH_ENV, DBT_REPLAY_ENV)
"""The switches, read by ``config.flag_from_env`` wherever they are used."""
MINUTES = (RECONCILE_ENV, DOCUMENTS_RELIST_ENV, MAX_SYNC_AGE_ENV, ON_TIME_TOLERANCE_ENV, LAKE_RETENTION_ENV)
"""The intervals, read by ``config.minutes_from_env`` wherever they are used."""
MEMORY_LIMITS = (DUCKDB_MEMORY_LIMIT_ENV, PUBLISH_MEMORY_LIMIT_ENV, DBT_MEMORY_LIMIT_ENV)
DEFAULT_MIN_FREE_MB = 100


class BadSetup(ValueError):
    """A setting that cannot work; the message is one line naming it."""


def data_dir_setting(arg: Path | None) -> str:
    """What named the data directory: ``--data-dir`` when given, else the variable (or its default)."""
    return "--data-dir" if arg is not None else DATA_DIR_ENV


def check_setup(data_dir: Path, data_dir_named_by: str = DATA_DIR_ENV, *, service: bool = True) -> None:
    """Every setting of the environment and the data directory, or BadSetup for the first that cannot
    work. ``service`` False: the service's URL and user are not read (the demo and the UI bring their
    own simulator)."""
    check_environment(service=service)
    check_data_dir(data_dir, data_dir_named_by)


def check_environment(*, service: bool = True) -> None:
    """The ``FREIGHT_*`` values (and the lake's) through the parsers that read them later."""
    if service:
        check_base_url(os.environ.get(BASE_URL_ENV, DEFAULT_BASE_URL))
        if USERNAME_ENV in os.environ and not os.environ[USERNAME_ENV].strip():
            raise BadSetup(f"{USERNAME_ENV} is set but empty: the user the operator issued (or unset: demo)")
    # imported here: the sync's settings bring the HTTP client, and ``sync`` checks the data directory
    # (:func:`check_data_dir`) and starts the dbt worker before it pays for them
    from freight_pipeline.sync.backfill import backfill_plan_from_env
    from freight_pipeline.sync.settings import SyncSettings

    try:
        for flag in FLAGS:
            flag_from_env(flag, default=False)
        for minutes in MINUTES:
            minutes_from_env(minutes, default=0)
        LakeSettings.from_env()
        backfill_plan_from_env()
        SyncSettings().with_env()  # the service's time zone, the hedge share: as the run reads them
        if os.environ.get(PUBLISH_STORAGE_VERSION_ENV, "").strip():  # unset: the default, which works
            from freight_pipeline.config import DuckDBSettings
            from freight_pipeline.warehouse.ddl import checked_storage_version

            checked_storage_version(DuckDBSettings.from_env().storage_version)
    except ValueError as exc:
        raise BadSetup(str(exc).splitlines()[0]) from None
    min_free_mb()
    for name in MEMORY_LIMITS:
        check_memory_limit(name)


def check_base_url(url: str) -> None:
    parts = urlsplit(url.strip())
    problem = None
    if parts.scheme not in ("http", "https"):
        problem = "is not an http(s) URL"
    elif not parts.hostname:
        problem = "names no host"
    else:
        try:
            parts.port  # noqa: B018 (a port that is not a number raises here)
        except ValueError:
            problem = "has a port that is not a number"
    if problem is not None:
        shown = url if parts.password is None else url.replace(f":{parts.password}@", ":***@")
        raise BadSetup(f"{BASE_URL_ENV}={shown!r} {problem} (e.g. https://tms.example.com)")


def check_memory_limit(name: str) -> None:
    """``name``'s value, when set, is a memory size DuckDB reads (``512MB``, ``2GB``)."""
    value = os.environ.get(name, "").strip()
    if not value:
        return
    import duckdb

    try:
        duckdb.connect(config={"memory_limit": value}).close()
    except duckdb.Error as exc:
        reason = str(exc).strip().splitlines()[0].removeprefix("Parser Error: ")
        raise BadSetup(f"{name}={value!r} is not a memory size DuckDB reads, e.g. 512MB or 2GB ({reason})") from None


def min_free_mb() -> int:
    """``FREIGHT_MIN_FREE_MB`` (whole megabytes), else its default."""
    text = os.environ.get(MIN_FREE_MB_ENV, "").strip()
    if not text:
        return DEFAULT_MIN_FREE_MB
    if not text.isdigit():
        raise BadSetup(f"{MIN_FREE_MB_ENV} must be whole megabytes, got {text!r}")
    return int(text)


def check_data_dir(data_dir: Path, named_by: str = DATA_DIR_ENV) -> None:
    """``data_dir`` is a directory (or can be made one) this process writes, on a disk with room:
    at least ``FREIGHT_MIN_FREE_MB`` free (default 100), a floor below which a sync would fail midway."""
    where = f"{named_by}={data_dir}"
    existing = data_dir
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        what = "is a file" if existing == data_dir else f"is under {existing}, which is a file"
        raise BadSetup(f"{where} {what}, not a directory")
    try:
        with tempfile.TemporaryFile(dir=existing, prefix=".freight-write-probe-"):
            pass
    except OSError as exc:
        inside = "" if existing == data_dir else f" (it would be made in {existing})"
        raise BadSetup(f"{where} is not writable{inside}: {exc.strerror or exc}") from None
    floor_mb = min_free_mb()
    free_mb = shutil.disk_usage(existing).free // 1_000_000
    if free_mb < floor_mb:
        raise BadSetup(f"{where} has {free_mb} MB free on its disk, less than the {floor_mb} MB a run needs at "
                       f"least ({MIN_FREE_MB_ENV})")
