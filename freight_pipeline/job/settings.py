"""The settings a run reads, refused when they cannot work, the same way however the run starts (the commands'
up-front check, ``commands.preflight``, and a Dagster run, ``defs.freight_job``): the settings models
(``config.load_settings``: flags or a resource's fields, environment, file, defaults, DuckDB's memory sizes
included), then what the models leave to the code that uses them (the lake's URIs, a storage version this DuckDB
writes, alert destinations Apprise knows)."""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from typing import Any

from freight_pipeline.config import CONCERNS, BadSettings, LakeConfig, Settings, SettingsModel, load_settings, where_set
from freight_pipeline.lake.settings import LakeSettings


def checked_settings(overrides: Mapping[str, Any] | None = None, *, origin: str = "flag",
                     reads: Collection[type[SettingsModel]] = CONCERNS) -> Settings:
    """Every setting (``overrides`` by setting name, said to come from ``origin``), or BadSettings with one line per
    problem, each naming the setting and where it was set (of the concerns the caller ``reads``: the others' are
    set aside, ``load_settings``)."""
    settings = load_settings(overrides, origin=origin, reads=reads)
    problems: list[str] = []
    try:
        LakeSettings.of(settings.lake, os.environ)
    except ValueError as exc:  # it names the variables: where else the values came from, said after it
        sources = {settings.sources[name] for name in LakeConfig.settings_fields()}
        elsewhere = sorted(source for source in sources if source != "default" and not source.startswith("environment"))
        problems.append(str(exc).splitlines()[0] + (f" (the lake's settings from {', '.join(elsewhere)})"
                                                    if elsewhere else ""))
    if settings.sources["publish_storage_version"] != "default":  # the default works
        from freight_pipeline.warehouse.ddl import storage_version_problem

        value = settings.storage.storage_version
        if (problem := storage_version_problem(value)) is not None:
            problems.append(f"{where_set(settings, 'publish_storage_version')}={value!r}: {problem}")
    problems += alert_url_problems(settings)
    if problems:
        raise BadSettings(problems)
    return settings


def alert_url_problems(settings: Settings) -> list[str]:
    """A line for each alert destination no Apprise plugin takes (a misspelt scheme), naming where it was set."""
    if not settings.alerts.alert_urls:
        return []
    from freight_pipeline.alerts.delivery import unknown_kinds  # Apprise imported only when there is a destination

    where = where_set(settings, "alert_urls")
    return [f"{where}: {said}" for said in unknown_kinds(settings.alerts.alert_urls)]
