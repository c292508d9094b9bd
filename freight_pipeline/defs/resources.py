"""Dagster resources: the freight service (with sync tuning) and the warehouse data directory.

Unset connection fields fall back to the environment when a run starts (``FREIGHT_BASE_URL``,
``FREIGHT_USERNAME``, ``FREIGHT_DATA_DIR``), with the defaults of :mod:`freight_pipeline.config`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
import duckdb
from pydantic import Field

from freight_pipeline.config import (
    BASE_URL_ENV,
    DEFAULT_BASE_URL,
    DEFAULT_USERNAME,
    PASSWORD_ENV,
    RECONCILE_ENV,
    USERNAME_ENV,
    ServiceSettings,
    data_dir_from_env,
)
from freight_pipeline.lake.backend import storage_from_env
from freight_pipeline.sync.settings import SyncSettings
from freight_pipeline.warehouse.backend import StorageBackend
from freight_pipeline.warehouse.paths import working_db_path
from freight_pipeline.warehouse.publish import parquet_root, published_db_path

_DEFAULTS = SyncSettings()


def _minutes(delta: dt.timedelta) -> int:
    return int(delta.total_seconds() // 60)


def reconcile_minutes_of(settings: SyncSettings) -> int | None:
    """``settings.reconcile_interval`` in whole minutes; None (never) stays None, unlike 0 (every run)."""
    interval = settings.reconcile_interval
    return None if interval is None else _minutes(interval)


DEFAULT_RECONCILE_MINUTES = reconcile_minutes_of(_DEFAULTS)


class FreightServiceResource(dg.ConfigurableResource):
    """The freight service a run syncs from, and how hard it pulls (defaults: ``SyncSettings``)."""

    base_url: str | None = Field(
        default=None, description=f"service root URL; default env {BASE_URL_ENV}, else {DEFAULT_BASE_URL}"
    )
    username: str | None = Field(
        default=None, description=f"service user; default env {USERNAME_ENV}, else {DEFAULT_USERNAME}"
    )
    password: str = Field(description=f"service password; set it with dg.EnvVar('{PASSWORD_ENV}')", repr=False)
    concurrency: int = Field(
        default=_DEFAULTS.concurrency,
        description="the most requests in flight at once; the limit in force adapts within it (AIMD)",
    )
    initial_concurrency: int = Field(
        default=_DEFAULTS.initial_concurrency, description="requests in flight at the start of a run"
    )
    adaptive_concurrency: bool = Field(
        default=_DEFAULTS.adaptive_concurrency,
        description="false: exactly `concurrency` requests in flight, never adapted to the service",
    )
    page_size: int = Field(default=_DEFAULTS.page_size, description="lookup page size (1-500)")
    fetch_batch_size: int = Field(
        default=_DEFAULTS.fetch_batch_size,
        description="shipments (document, events, legs, memos) written per transaction, with the cursor",
    )
    fetch_window: int = Field(
        default=_DEFAULTS.fetch_window, description="the most shipments being fetched at once (bounds memory)"
    )
    overlap_minutes: int = Field(
        default=_minutes(_DEFAULTS.overlap), description="how far before the cursor each run re-reads"
    )
    start_cursor: str | None = Field(
        default=None, description="sync only shipments modified since 'YYYY-MM-DD[ HH:MM:SS]' (service wall clock)"
    )
    reconcile_interval_minutes: int | None = Field(
        default=None,
        description=(
            "how often a run lists every live id to remove deleted shipments (0: every run); "
            f"default env {RECONCILE_ENV}, else "
            f"{'never' if DEFAULT_RECONCILE_MINUTES is None else DEFAULT_RECONCILE_MINUTES}"
        ),
    )

    breaker_max_share: float = Field(
        default=_DEFAULTS.breaker_max_share,
        description="a stream's run fails when more than this share of its records failed (and at least "
        "breaker_min_failures did): an outage is never quarantined",
    )
    breaker_min_failures: int = Field(
        default=_DEFAULTS.breaker_min_failures, description="failures below this count never trip the breaker"
    )
    backfill_batch_size: int = Field(
        default=500,
        description="lake mode: shipments per transaction of a backfill partition (each commit of a lake "
        "costs catalog queries and a Parquet file per table: 500 took half the time of 100)",
    )
    retry_after_minutes: int = Field(
        default=_minutes(_DEFAULTS.retry_after),
        description="a quarantined record is retried after this long, doubling per failure up to a day",
    )

    def service_settings(self) -> ServiceSettings:
        return ServiceSettings(
            base_url=self.base_url or os.environ.get(BASE_URL_ENV, DEFAULT_BASE_URL),
            username=self.username or os.environ.get(USERNAME_ENV, DEFAULT_USERNAME),
            password=self.password,
        )

    def sync_settings(self) -> SyncSettings:
        """The configured fields, with what the environment sets (``SyncSettings.with_env``); a configured
        reconcile interval wins over ``FREIGHT_RECONCILE_INTERVAL_MINUTES``."""
        settings = SyncSettings(
            page_size=self.page_size,
            concurrency=self.concurrency,
            initial_concurrency=self.initial_concurrency,
            adaptive_concurrency=self.adaptive_concurrency,
            fetch_batch_size=self.fetch_batch_size,
            fetch_window=self.fetch_window,
            overlap=dt.timedelta(minutes=self.overlap_minutes),
            start_cursor=self.start_cursor,
            breaker_max_share=self.breaker_max_share,
            breaker_min_failures=self.breaker_min_failures,
            retry_after=dt.timedelta(minutes=self.retry_after_minutes),
            reconcile_interval=None if DEFAULT_RECONCILE_MINUTES is None else dt.timedelta(
                minutes=DEFAULT_RECONCILE_MINUTES),
        ).with_env()
        if self.reconcile_interval_minutes is None:
            return settings
        return dataclasses.replace(settings, reconcile_interval=dt.timedelta(minutes=self.reconcile_interval_minutes))


class WarehouseResource(dg.ConfigurableResource):
    """The data directory: private working database, published DuckDB file and Parquet."""

    data_dir: str | None = Field(default=None, description="data directory; default env FREIGHT_DATA_DIR, else ./data")

    @property
    def path(self) -> Path:
        return Path(self.data_dir).resolve() if self.data_dir else data_dir_from_env()

    @property
    def working_db(self) -> Path:
        return working_db_path(self.path)

    @property
    def published_db(self) -> Path:
        return published_db_path(self.path)

    @property
    def parquet_dir(self) -> Path:
        return parquet_root(self.path)

    @property
    def backend(self) -> StorageBackend:
        """The storage the configuration names (``lake.backend.storage_from_env``): the lake of
        ``FREIGHT_LAKE_*`` when set, else the embedded working database."""
        return storage_from_env()

    @contextmanager
    def read_working_db(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read-only connection to the working database; only while no writer holds it (DuckDB's lock).
        In lake mode: to the lake's latest snapshot (readers never wait for writers there)."""
        con = self.backend.connect_read_only(self.path)
        try:
            yield con
        finally:
            con.close()
