"""The ``dagster.yaml`` shipped for the local instance (``make ui``, ``sync`` and ``demo`` with
DAGSTER_HOME): Dagster loads it, one queued run at a time, no telemetry, no "community" dialog
(the webserver's ``shouldShowNux`` is ``instance.nux_enabled and not seen``)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from freight_pipeline.commands.dagster_home import TEMPLATE, ensure_dagster_yaml
from freight_pipeline.commands.dagster_storage import KeptOpenSqliteEventLogStorage

EARLIER_VERSION = """\
# Written by `freight-pipeline ui` because none was here; edit freely, it is never overwritten.
run_coordinator:
  module: dagster.core.run_coordinator
  class: QueuedRunCoordinator
  config:
    max_concurrent_runs: 1
telemetry:
  enabled: false
"""
"""What ``ui`` wrote before the template (no ``nux`` section: the dialog showed)."""


def test_the_shipped_dagster_yaml_loads_with_telemetry_and_the_community_dialog_off(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dagster import DagsterInstance, QueuedRunCoordinator

    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    assert ensure_dagster_yaml(tmp_path) is True
    assert (tmp_path / "dagster.yaml").read_text() == TEMPLATE.read_text()
    assert ensure_dagster_yaml(tmp_path) is False
    with DagsterInstance.from_config(str(tmp_path)) as instance:
        assert instance.nux_enabled is False
        assert instance.telemetry_enabled is False
        assert isinstance(instance.run_coordinator, QueuedRunCoordinator)
        assert isinstance(instance.event_log_storage, KeptOpenSqliteEventLogStorage)


def test_an_earlier_dagster_yaml_gets_the_missing_section_and_keeps_the_rest(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dagster import DagsterInstance

    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    path = tmp_path / "dagster.yaml"
    path.write_text(EARLIER_VERSION)
    assert ensure_dagster_yaml(tmp_path) is True
    assert path.read_text().startswith(EARLIER_VERSION)
    assert yaml.safe_load(path.read_text())["nux"] == {"enabled": False}
    assert ensure_dagster_yaml(tmp_path) is False
    with DagsterInstance.from_config(str(tmp_path)) as instance:
        assert instance.nux_enabled is False
        assert instance.telemetry_enabled is False
        assert isinstance(instance.event_log_storage, KeptOpenSqliteEventLogStorage)


def test_a_users_own_choice_is_kept(tmp_path: Path) -> None:
    from dagster import DagsterInstance

    path = tmp_path / "dagster.yaml"
    mine = f"nux:\n  enabled: true\ntelemetry:\n  enabled: true\nstorage:\n  sqlite:\n    base_dir: {tmp_path}\n"
    path.write_text(mine)
    assert ensure_dagster_yaml(tmp_path) is False
    assert path.read_text() == mine
    with DagsterInstance.from_config(str(tmp_path)) as instance:
        assert instance.nux_enabled is True  # the setting is what decides: without it the dialog shows
        assert not isinstance(instance.event_log_storage, KeptOpenSqliteEventLogStorage)  # storage named: theirs
