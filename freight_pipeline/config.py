"""Runtime configuration from the environment, declared once with its defaults: every ``FREIGHT_*`` variable's
name is declared here (``*_ENV``), and read by the module its setting concerns."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
"""The checkout the package runs from (editable install): dbt project, workspace.yaml, .dagster_home."""

DEFAULT_BASE_URL = "http://127.0.0.1:8765"
DEFAULT_USERNAME = "demo"
DEFAULT_DATA_DIR = "./data"
BASE_URL_ENV = "FREIGHT_BASE_URL"
USERNAME_ENV = "FREIGHT_USERNAME"
PASSWORD_ENV = "FREIGHT_PASSWORD"
DATA_DIR_ENV = "FREIGHT_DATA_DIR"
SCHEDULES_RUNNING_ENV = "FREIGHT_SCHEDULES_RUNNING"
"""``1``: the schedules and the freshness sensor start switched on (``make ui`` sets it)."""
MAX_SYNC_AGE_ENV = "FREIGHT_MAX_SYNC_AGE_MINUTES"
"""Minutes after which the freshness check of ``freight/shipments`` warns (run by ``freight_sync_job`` and a sensor)."""
DEFAULT_MAX_SYNC_AGE_MINUTES = 60
DUCKDB_MEMORY_LIMIT_ENV = "FREIGHT_DUCKDB_MEMORY_LIMIT"
"""DuckDB ``memory_limit`` of the sync's connections to the working database."""
DEFAULT_DUCKDB_MEMORY_LIMIT = "128MB"
PUBLISH_MEMORY_LIMIT_ENV = "FREIGHT_DUCKDB_PUBLISH_MEMORY_LIMIT"
"""DuckDB ``memory_limit`` of the publish's connections (its Parquet export needs more than a batch)."""
DEFAULT_PUBLISH_MEMORY_LIMIT = "512MB"
PUBLISH_STORAGE_VERSION_ENV = "FREIGHT_PUBLISH_STORAGE_VERSION"
"""DuckDB storage version the published ``warehouse.duckdb`` is written in (``v1.5.0``, ``latest``, ...); a new
working database is created in it too, so that a publish stays a byte copy."""
DEFAULT_PUBLISH_STORAGE_VERSION = "v1.5.0"
"""The newest format DuckDB 1.5.x opens: the engine of today's BI tools (Metabase, DBeaver, Superset, Evidence)."""
RECONCILE_ENV = "FREIGHT_RECONCILE_INTERVAL_MINUTES"
DOCUMENTS_ENV = "FREIGHT_SYNC_DOCUMENTS"
"""``0``: the documents stream reads nothing (default on)."""
CODE_CONVERSIONS_ENV = "FREIGHT_SYNC_CODE_CONVERSIONS"
"""``0``: the code-conversions stream reads nothing (default on)."""
HISTORY_ENV = "FREIGHT_HISTORY"
"""``0``: the sync records no versions in ``freight_history`` (default on; the tables stay as they are)."""
DOCUMENT_CONTENT_ENV = "FREIGHT_DOCUMENT_CONTENT"
"""``1``: copy document bytes by content hash under ``<data dir>/documents/`` (default off)."""
DOCUMENTS_RELIST_ENV = "FREIGHT_DOCUMENTS_RELIST_MINUTES"
"""Minutes between full E-File listings of every held shipment (0: every run; default a day)."""
"""Minutes between full id reconciliations of the shipments stream (read by the Dagster resource)."""
SERVICE_TIMEZONE_ENV = "FREIGHT_SERVICE_TIMEZONE"
"""IANA time zone (``Europe/Berlin``) in which date-times the service sends without a UTC offset are read
(default ``UTC``)."""
HEDGE_ENV = "FREIGHT_HEDGE"
"""The most reads hedged (a copy sent when one is slow, ``client.hedge``), as a share of the reads
(default 0.05); ``0``: no hedged reads."""
FRESHNESS_SAMPLE_ENV = "FREIGHT_FRESHNESS_SAMPLE"
"""Open shipments whose events and memo lines each run re-reads to find changes the service makes without
moving their last-modified instant (default 20; 0: none)."""
EVENTS_REFRESH_ENV = "FREIGHT_EVENTS_REFRESH"
"""The rolling re-read of open shipments' events: ``auto`` (default: once a sample found such changes), ``on``,
``off``."""
EVENTS_MAX_AGE_ENV = "FREIGHT_EVENTS_MAX_AGE_MINUTES"
"""With the rolling re-read on: the most an open shipment's events go unread (default 240)."""
EVENTS_REFRESH_SHARE_ENV = "FREIGHT_EVENTS_REFRESH_SHARE"
"""The rolling re-read's requests a run, as a share of the run's other requests (default 1.0; at least
``sync.freshness.MIN_REFRESH_REQUESTS``)."""
ON_TIME_TOLERANCE_ENV = "FREIGHT_ON_TIME_TOLERANCE_MINUTES"
"""Minutes an arrival may be late and still count as on time (dbt var ``on_time_tolerance_minutes``)."""

LAKE_CATALOG_URI_ENV = "FREIGHT_LAKE_CATALOG_URI"
"""``postgresql://user[:password]@host:port/dbname`` (many writers, many machines),
``sqlite:///path/catalog.sqlite`` (several processes of one machine, taking turns) or
``duckdb:///path/catalog.ducklake`` (one process)."""
LAKE_DATA_URI_ENV = "FREIGHT_LAKE_DATA_URI"
"""Where the Parquet files go: a local path or ``s3://bucket/prefix``."""
LAKE_S3_URL_STYLE_ENV = "FREIGHT_LAKE_S3_URL_STYLE"
"""``path`` or ``vhost``; default ``path`` with a custom endpoint (MinIO, moto, Ceph), else ``vhost``."""
LAKE_RETENTION_ENV = "FREIGHT_LAKE_RETENTION_MINUTES"
"""How long DuckLake snapshots stay readable (time travel) before the maintenance job expires them."""
DBT_WORKER_SERVER_ENV = "FREIGHT_DBT_WORKER_SERVER"
"""The socket of a running fork server of dbt workers; unset (the default): each worker is a new process."""
DBT_DATABASE_ENV = "FREIGHT_DBT_DATABASE"
"""The variable ``profiles.yml`` reads the DuckDB path from."""
DBT_MEMORY_LIMIT_ENV = "FREIGHT_DBT_MEMORY_LIMIT"
"""DuckDB ``memory_limit`` of the dbt build, read by ``dbt_models/profiles.yml`` (default there: 512MB), and
of a replayed build (``marts.kept_builds``) while it runs."""
DBT_FULL_REFRESH_ENV = "FREIGHT_DBT_FULL_REFRESH"
"""``1``: the next dbt build rebuilds every mart from scratch."""
DBT_REPLAY_ENV = "FREIGHT_DBT_REPLAY"
"""``0``: every build runs through dbt, none replays the statements kept for its key (``marts.kept_builds``)."""
DBT_TEST_ROWS_ENV = "FREIGHT_DBT_TEST_ROWS"
"""``changed``: the build's data tests on models whose rows change only with their shipment read the
changed shipments' rows only (``dbt_models/macros/test_rows.sql``; set by the pipeline per build,
read at run time, never at parse time); else every row."""
FULL_CHECK_ENV = "FREIGHT_FULL_CHECK_INTERVAL_MINUTES"
"""Minutes between two full checks (``0``: every run is one)."""
BACKFILL_BOUNDARIES_ENV = "FREIGHT_BACKFILL_ID_BOUNDARIES"
"""Comma-separated shipment ids where one backfill partition ends and the next begins (``20000,40000``
-> ``0-19999``, ``20000-39999``, ``40000-``); unset: one partition. Pick them from the service's id
range so each partition holds about as many shipments."""
LAKE_VARIABLES = (LAKE_CATALOG_URI_ENV, LAKE_DATA_URI_ENV, LAKE_S3_URL_STYLE_ENV, LAKE_RETENTION_ENV)
"""The lake's own variables (the S3 credentials are AWS's: ``lake.settings``)."""
MIN_FREE_MB_ENV = "FREIGHT_MIN_FREE_MB"
"""Megabytes the data directory's disk must have free for a command that writes to start."""


@dataclass(frozen=True)
class ServiceSettings:
    """Where the freight service is and who we are there. The password never appears in repr."""

    base_url: str = DEFAULT_BASE_URL
    username: str = DEFAULT_USERNAME
    password: str = field(default="", repr=False)

    @classmethod
    def from_env(cls) -> ServiceSettings:
        return cls(
            base_url=os.environ.get(BASE_URL_ENV, DEFAULT_BASE_URL),
            username=os.environ.get(USERNAME_ENV, DEFAULT_USERNAME),
            password=os.environ.get(PASSWORD_ENV, ""),
        )


MEMORY_LIMIT_VARIABLES = {"sync": DUCKDB_MEMORY_LIMIT_ENV, "publish": PUBLISH_MEMORY_LIMIT_ENV}
"""What a DuckDB connection is for -> the variable of its memory limit (named in messages)."""


@dataclass(frozen=True)
class DuckDBSettings:
    """How the pipeline's DuckDB connections are configured: memory limits by purpose (``sync``: the
    working database's; ``publish``: the publish's, maintenance's and readers') and the storage version
    of the published file (checked when used: ``warehouse.ddl.checked_storage_version``)."""

    sync_memory_limit: str = DEFAULT_DUCKDB_MEMORY_LIMIT
    publish_memory_limit: str = DEFAULT_PUBLISH_MEMORY_LIMIT
    storage_version: str = DEFAULT_PUBLISH_STORAGE_VERSION

    @classmethod
    def from_env(cls) -> DuckDBSettings:
        return cls(
            sync_memory_limit=os.environ.get(DUCKDB_MEMORY_LIMIT_ENV) or DEFAULT_DUCKDB_MEMORY_LIMIT,
            publish_memory_limit=os.environ.get(PUBLISH_MEMORY_LIMIT_ENV) or DEFAULT_PUBLISH_MEMORY_LIMIT,
            storage_version=os.environ.get(PUBLISH_STORAGE_VERSION_ENV, "").strip() or DEFAULT_PUBLISH_STORAGE_VERSION,
        )

    def memory_limit(self, purpose: str = "sync") -> str:
        """The memory limit of a connection for ``purpose`` (``sync`` or ``publish``)."""
        return {"sync": self.sync_memory_limit, "publish": self.publish_memory_limit}[purpose]


def data_dir_from_env() -> Path:
    return Path(os.environ.get(DATA_DIR_ENV, DEFAULT_DATA_DIR)).resolve()


def minutes_from_env(name: str, default: int) -> int:
    """Whole minutes (>= 0) from environment variable ``name``; ``default`` when unset or empty."""
    return _whole_from_env(name, default, "whole minutes")


def count_from_env(name: str, default: int) -> int:
    """A whole number (>= 0) from environment variable ``name``; ``default`` when unset or empty."""
    return _whole_from_env(name, default, "a whole number")


def _whole_from_env(name: str, default: int, what: str) -> int:
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{name} must be {what}, got {text!r}") from None
    if value < 0:
        raise ValueError(f"{name} must not be negative, got {value}")
    return value


def share_from_env(name: str, default: float) -> float:
    """A share within [0, 1] from environment variable ``name``; ``default`` when unset or empty."""
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        share = float(text)
    except ValueError:
        raise ValueError(f"{name} must be a share between 0 and 1 (0.05), got {text!r}") from None
    if not 0 <= share <= 1:
        raise ValueError(f"{name} must be a share between 0 and 1 (0.05), got {text!r}")
    return share


@contextmanager
def environ(values: dict[str, str]) -> Iterator[None]:
    """Set environment variables for the ``with`` block, then restore the previous ones."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def flag_from_env(name: str, default: bool) -> bool:
    """``1/true/yes/on`` or ``0/false/no/off`` (any case) from ``name``; ``default`` when unset or empty.

    Raises ValueError naming the variable for any other value."""
    raw = os.environ.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{name} must be 1/true/yes/on or 0/false/no/off, got {raw!r}")
