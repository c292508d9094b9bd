"""The ``dagster.yaml`` shipped for the local instance (``make ui``, ``sync`` and ``demo`` with
DAGSTER_HOME): Dagster loads it, one queued run at a time, no telemetry, no "community" dialog
(the webserver's ``shouldShowNux`` is ``instance.nux_enabled and not seen``)."""

from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from freight_pipeline.commands.dagster_home import (
    LOCK_FILE,
    READY_FILE,
    TEMPLATE,
    BadInstance,
    ensure_dagster_yaml,
    prepare_instance,
)
from freight_pipeline.commands.dagster_storage import KeptOpenSqliteEventLogStorage
from freight_pipeline.config import REPO_ROOT

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
    mine = (f"nux:\n  enabled: true\ntelemetry:\n  enabled: true\nstorage:\n  sqlite:\n    base_dir: {tmp_path}\n"
            "retention:\n  schedule:\n    purge_after_days: 90\n")
    path.write_text(mine)
    assert ensure_dagster_yaml(tmp_path) is False
    assert path.read_text() == mine
    with DagsterInstance.from_config(str(tmp_path)) as instance:
        assert instance.nux_enabled is True  # the setting is what decides: without it the dialog shows
        assert not isinstance(instance.event_log_storage, KeptOpenSqliteEventLogStorage)  # storage named: theirs
        assert _ticks_kept(instance)["SCHEDULE"]["SUCCESS"] == 90


TICKS_KEPT = {"STARTED": 30, "SKIPPED": 7, "SUCCESS": 30, "FAILURE": 30}
"""Days the shipped instance keeps each kind of schedule and sensor tick (Dagster's defaults: for ever, but a
sensor's skipped ones, 7)."""


def _ticks_kept(instance: object) -> dict[str, dict[str, int]]:
    from dagster._core.definitions.run_request import InstigatorType
    from dagster._core.instance import DagsterInstance

    assert isinstance(instance, DagsterInstance)
    return {kind.value: {status.value: days for status, days in instance.get_tick_retention_settings(kind).items()}
            for kind in (InstigatorType.SCHEDULE, InstigatorType.SENSOR)}


def test_the_shipped_instance_purges_schedule_and_sensor_ticks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ticks of the 15-minute schedule and the 5-minute sensors, which Dagster's defaults keep for ever (but a sensor's
    skipped ones): the daemon purges them after 30 days, the skipped ones after 7; and so does an instance written by
    an earlier version, whose file gets the section."""
    from dagster import DagsterInstance

    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    for earlier in ("", EARLIER_VERSION):
        (tmp_path / "dagster.yaml").unlink(missing_ok=True)
        if earlier:
            (tmp_path / "dagster.yaml").write_text(earlier)
        assert ensure_dagster_yaml(tmp_path) is True
        assert ensure_dagster_yaml(tmp_path) is False
        with DagsterInstance.from_config(str(tmp_path)) as instance:
            assert _ticks_kept(instance) == {"SCHEDULE": TICKS_KEPT, "SENSOR": TICKS_KEPT}


PREPARE_AT = """
import sys, time
from pathlib import Path
from freight_pipeline.commands.dagster_home import prepare_instance
time.sleep(max(0.0, float(sys.argv[2]) - time.time()))
prepare_instance(Path(sys.argv[1]))
"""


def test_an_instance_prepared_by_three_processes_at_once_is_made_once_then_only_read(tmp_path: Path) -> None:
    """Three commands starting on one new ``DAGSTER_HOME`` at the same instant: one makes the file and the
    storage, the others wait for it (each of them alone used to race to create the same tables); later
    commands only compare the ready file, without the lock, until the file changes."""
    home = tmp_path / "dagster"
    at = time.time() + 4.0  # after every child's imports
    children = [subprocess.Popen([sys.executable, "-c", PREPARE_AT, str(home), str(at)], cwd=REPO_ROOT, text=True,
                                 stderr=subprocess.PIPE) for _ in range(3)]
    said = [child.communicate(timeout=120)[1] for child in children]
    assert [child.returncode for child in children] == [0, 0, 0], said
    with sqlite3.connect(home / "history" / "runs.db") as db:
        assert len(db.execute("SELECT version_num FROM alembic_version").fetchall()) == 1  # one head
    ready = (home / READY_FILE).read_text()
    with open(home / LOCK_FILE, "a") as lock:  # held: a prepared instance does not wait for it
        fcntl.flock(lock, fcntl.LOCK_EX)
        assert prepare_instance(home) is False
    with (home / "dagster.yaml").open("a") as config:
        config.write("# a setting of the user's\n")
    assert prepare_instance(home) is False  # the file is the user's: prepared again, not rewritten
    assert (home / READY_FILE).read_text() != ready


def test_an_instance_an_earlier_release_prepared_gets_the_sections_its_template_gained(tmp_path: Path) -> None:
    """The ready file of an earlier release named only the file and Dagster's version: an upgraded instance was taken
    as prepared, and the template's new ``retention`` section never reached it (its ticks kept for ever)."""
    home = tmp_path / "dagster"
    home.mkdir()
    (home / "dagster.yaml").write_text(EARLIER_VERSION)
    digest = hashlib.sha256(EARLIER_VERSION.encode()).hexdigest()
    (home / READY_FILE).write_text(f"dagster {importlib.metadata.version('dagster')}\n{digest}\n")
    assert "retention" not in EARLIER_VERSION
    assert prepare_instance(home) is True
    assert yaml.safe_load((home / "dagster.yaml").read_text())["retention"]["schedule"]["purge_after_days"]
    assert prepare_instance(home) is False  # prepared for this release now


def test_a_dagster_yaml_dagster_cannot_read_is_named_in_one_line_and_not_marked_prepared(tmp_path: Path) -> None:
    """Not YAML (a user's edit gone wrong): what ``ui`` says (exit 2) and ``sync`` prints is the file and the
    parser's place, not a traceback; the instance is not marked prepared, so the fixed file is prepared."""
    (tmp_path / "dagster.yaml").write_text("run_coordinator:\n  module: [oops\n")
    with pytest.raises(BadInstance) as raised:
        prepare_instance(tmp_path)
    said = str(raised.value)
    assert "\n" not in said and said.startswith(f"the Dagster instance of {tmp_path} cannot be opened (ParserError: ")
    assert f'"{tmp_path / "dagster.yaml"}", line 2, column 11' in said
    assert not (tmp_path / READY_FILE).exists()
    (tmp_path / "dagster.yaml").write_text(TEMPLATE.read_text())
    assert prepare_instance(tmp_path) is False and (tmp_path / READY_FILE).exists()
