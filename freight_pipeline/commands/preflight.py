"""A bad setup refused before anything runs: each setting the commands read, checked up front.

A command that writes (``sync``, ``rebuild``, ``demo``, ``ui``) calls :func:`check_setup` first; settings
that cannot work are :class:`BadSetup`, one line for each, naming the setting, its value and what is allowed,
which the command prints and exits 2 on (no traceback, no request, no step started, no dbt worker spawned).
The checks are the settings models the pipeline itself reads (``config.load_settings``) and the parsers it
uses later (``LakeSettings.of``, ``checked_storage_version``), run once here, so the up-front check and the use
cannot disagree; what only a probe can tell (a memory size DuckDB reads, a directory this process can write,
with room) is probed. Cheap: what is not set is not probed (the defaults work), so a refusal takes a fraction
of a second.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from freight_pipeline.config import DATA_DIR_ENV, MIN_FREE_MB_ENV, BadSettings, Settings
from freight_pipeline.job.settings import checked_settings
from freight_pipeline.warehouse.paths import checked_db_path, working_db_path


class BadSetup(ValueError):
    """Settings that cannot work; the message is one line for each, naming it."""


def data_dir_setting(arg: Path | None) -> str:
    """What named the data directory: ``--data-dir`` when given, else the variable (or its default)."""
    return "--data-dir" if arg is not None else DATA_DIR_ENV


def check_setup(data_dir: Path, data_dir_named_by: str = DATA_DIR_ENV, *,
                overrides: Mapping[str, Any] | None = None) -> Settings:
    """Every setting (``overrides``: the command's flags, by setting name) and the data directory, or BadSetup
    with a line for each that cannot work."""
    settings = check_settings(overrides)
    check_data_dir(data_dir, data_dir_named_by, settings.storage.min_free_mb)
    return settings


def check_settings(overrides: Mapping[str, Any] | None = None) -> Settings:
    """The settings as the run will read them (``job.settings.checked_settings``); BadSetup with one line per
    problem."""
    try:
        return checked_settings(overrides)
    except BadSettings as exc:
        raise BadSetup(str(exc)) from None


def nearest_existing(path: Path) -> Path:
    """``path``, or the nearest of its parents that exists (where it would be made)."""
    while not path.exists():
        path = path.parent
    return path


def not_a_directory(data_dir: Path, named_by: str = DATA_DIR_ENV) -> str | None:
    """What is wrong with ``data_dir`` when it is a file, or under one, in one line naming what named it; None
    otherwise (a directory, or one that can be made)."""
    existing = nearest_existing(data_dir)
    if existing.is_dir():
        return None
    what = "is a file" if existing == data_dir else f"is under {existing}, which is a file"
    return f"{named_by}={data_dir} {what}, not a directory"


def check_data_dir(data_dir: Path, named_by: str = DATA_DIR_ENV, floor_mb: int | None = None) -> None:
    """``data_dir`` is a directory (or can be made one) this process writes, on a disk with room: at least
    ``floor_mb`` free (None: the setting ``min_free_mb``, default 100), a floor below which a sync would fail
    midway."""
    where = f"{named_by}={data_dir}"
    try:
        checked_db_path(working_db_path(data_dir))
    except ValueError as exc:
        raise BadSetup(f"{where}: {exc}") from None
    if problem := not_a_directory(data_dir, named_by):
        raise BadSetup(problem)
    existing = nearest_existing(data_dir)
    try:
        with tempfile.TemporaryFile(dir=existing, prefix=".freight-write-probe-"):
            pass
    except OSError as exc:
        inside = "" if existing == data_dir else f" (it would be made in {existing})"
        raise BadSetup(f"{where} is not writable{inside}: {exc.strerror or exc}") from None
    if floor_mb is None:
        from freight_pipeline.config import StorageSettings

        floor_mb = StorageSettings.configured().min_free_mb
    free_mb = shutil.disk_usage(existing).free // 1_000_000
    if free_mb < floor_mb:
        raise BadSetup(f"{where} has {free_mb} MB free on its disk, less than the {floor_mb} MB a run needs at "
                       f"least ({MIN_FREE_MB_ENV})")
