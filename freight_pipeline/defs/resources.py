"""Dagster resources: the freight service (with sync tuning) and the warehouse (storage, marts, lake, alerts).

Their fields are derived from the settings models (:mod:`freight_pipeline.config`): one optional field per
setting, unset by default, when the environment, the settings file or the default decides as for a command.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

import dagster as dg
import duckdb
from pydantic import Field, create_model

from freight_pipeline.config import (
    SECRET_SETTINGS,
    AlertSettings,
    LakeConfig,
    MartsSettings,
    ScheduleSettings,
    ServiceSettings,
    Settings,
    SettingsModel,
    StorageSettings,
    SyncTuning,
    default_shown,
    plain_type,
    variable,
)
from freight_pipeline.job.settings import checked_settings
from freight_pipeline.lake.backend import storage_of
from freight_pipeline.sync.settings import SyncSettings
from freight_pipeline.warehouse.backend import StorageBackend
from freight_pipeline.warehouse.paths import working_db_path
from freight_pipeline.warehouse.publish import parquet_root, published_db_path


class SettingsResource(dg.ConfigurableResource):
    """A resource whose fields are the settings of its :attr:`concerns` (derived by :func:`_settings_resource`),
    each unset by default: then the environment, the settings file or the default decides, as for a command."""

    concerns: ClassVar[tuple[type[SettingsModel], ...]] = ()

    def overrides(self) -> dict[str, Any]:
        """The settings this resource's configuration sets (setting name -> value)."""
        return {name: getattr(self, name) for concern in self.concerns for name in concern.settings_fields()
                if getattr(self, name) is not None}

    def settings(self, reads: Collection[type[SettingsModel]] | None = None) -> Settings:
        """Every setting: this resource's fields over the environment, the settings file and the defaults, checked
        as a command checks them (``job.settings``): those of the concerns the caller ``reads`` (default: this
        resource's and the schedules', what a sensor reads); a bad value of another concern is set aside, for the
        run that reads it to refuse."""
        return checked_settings(self.overrides(), origin=f"Dagster resource {type(self).__name__}",
                                reads=(*self.concerns, ScheduleSettings) if reads is None else reads)


def _settings_resource(name: str, doc: str, base: type[SettingsResource]) -> Any:
    """``base`` with one optional field per setting of its concerns, typed and described as the models are."""
    fields: dict[str, Any] = {}
    for concern in base.concerns:
        for setting, field_name in concern.settings_fields().items():
            info = concern.model_fields[field_name]
            described = (f"{info.description} (unset: ${variable(setting)}, the settings file, else "
                         f"{default_shown(setting)})")
            plain = plain_type(concern, setting)
            fields[setting] = (plain if plain is Any else plain | None,
                               Field(default=None, description=described, repr=setting not in SECRET_SETTINGS))
    return create_model(name, __base__=base, __doc__=doc, __module__=__name__, **fields)


class _FreightService(SettingsResource):
    concerns: ClassVar[tuple[type[SettingsModel], ...]] = (ServiceSettings, SyncTuning)

    def service_settings(self) -> ServiceSettings:
        return self.settings().service

    def sync_settings(self) -> SyncSettings:
        return SyncSettings.of(self.settings().sync)


class _Warehouse(SettingsResource):
    concerns: ClassVar[tuple[type[SettingsModel], ...]] = (StorageSettings, MartsSettings, LakeConfig, AlertSettings)

    @property
    def path(self) -> Path:
        return self.settings().storage.data_dir.resolve()

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
        """The storage the settings name (``lake.backend.storage_of``): the lake, else the embedded working
        database."""
        return storage_of(self.settings())

    @contextmanager
    def read_working_db(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read-only connection to the working database; only while no writer holds it (DuckDB's lock).
        In lake mode: to the lake's latest snapshot (readers never wait for writers there)."""
        con = self.backend.connect_read_only(self.path)
        try:
            yield con
        finally:
            con.close()


FreightServiceResource = _settings_resource(
    "FreightServiceResource", "The freight service a run syncs from, and how hard it pulls: every setting of "
    "``config.ServiceSettings`` and ``config.SyncTuning``.", _FreightService)
WarehouseResource = _settings_resource(
    "WarehouseResource", "The data directory (private working database, published DuckDB file and Parquet), how the "
    "marts are built, the lake and where the alerts go: every setting of ``config.StorageSettings``, "
    "``MartsSettings``, ``LakeConfig`` and ``AlertSettings``.",
    _Warehouse)


def run_settings(freight_service: Any, warehouse: Any) -> Settings:
    """A Dagster run's effective settings: both resources' fields over the environment, file and defaults, checked
    as a command checks them (``job.settings``)."""
    return checked_settings({**freight_service.overrides(), **warehouse.overrides()}, origin="Dagster resource")
