"""The Dagster instance directory: ``$DAGSTER_HOME`` with the project's ``dagster.yaml``.

The file shipped next to this module (``dagster.yaml``: one queued run at a time, telemetry off,
no "community" dialog in the UI, the event log kept open while a run writes it, schedule and sensor
ticks purged after 30 days) is copied when the instance has none. An existing file is the user's and
stays as it is, except that a top-level ``telemetry`` or ``nux`` section it lacks is appended (switched
off), so an instance written by an earlier version loses the dialog too, and so is the ``retention`` of
the ticks (an earlier version's kept every tick for ever) and the event log storage when it names no
storage (Dagster's default SQLite files, which the storage keeps: ``dagster_storage``).

Several ``freight-pipeline`` processes may start on one new instance at once (the backfill's partitions,
each launched by a command of its own): :func:`prepare_instance` writes the file and creates the
instance's storage (its SQLite databases, their tables and migration stamps) once, under a file lock in the
directory, so that the others wait for it instead of racing to create the same tables.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import os
from pathlib import Path

import yaml

from freight_pipeline.config import environ

TEMPLATE = Path(__file__).with_name("dagster.yaml")
DAGSTER_YAML = TEMPLATE.read_text()
"""The shipped instance configuration (what a new ``$DAGSTER_HOME/dagster.yaml`` holds)."""
SWITCHED_OFF = {
    "telemetry": "# added by freight-pipeline: no usage data leaves the machine\ntelemetry:\n  enabled: false\n",
    "nux": "# added by freight-pipeline: no \"community\" dialog over the Dagster UI\nnux:\n  enabled: false\n",
}
"""Sections appended to an existing ``dagster.yaml`` that lacks them."""
TICK_RETENTION = "# added by freight-pipeline, as in its template:\n" + \
    DAGSTER_YAML[DAGSTER_YAML.index("# Schedule and sensor"):]
"""Appended to an existing ``dagster.yaml`` without ``retention``: the template's section (its last)."""
STORAGE_SECTIONS = ("storage", "run_storage", "event_log_storage", "schedule_storage")
EVENT_LOG_STORAGE = (
    "# added by freight-pipeline: Dagster's SQLite event log, kept open while a run writes it\n"
    "event_log_storage:\n  module: freight_pipeline.commands.dagster_storage\n  class: KeptOpenSqliteEventLogStorage\n"
)
"""Appended to an existing ``dagster.yaml`` that names no storage (so Dagster's default SQLite one)."""


def dagster_home(default: Path) -> Path:
    """``$DAGSTER_HOME`` when set, else ``default``; created when missing."""
    home = Path(os.environ.get("DAGSTER_HOME") or default).expanduser().resolve()
    home.mkdir(parents=True, exist_ok=True)
    return home


class BadInstance(RuntimeError):
    """``$DAGSTER_HOME``'s instance cannot be opened (its ``dagster.yaml`` is not valid YAML, names what Dagster
    does not know, ...): the file and Dagster's reason, in one line."""


LOCK_FILE = ".freight-instance.lock"
READY_FILE = ".freight-instance-ready"
"""Written once the instance is prepared: what it was prepared for (:func:`_prepared_for`)."""


def _prepared_for(home: Path) -> str:
    """The ``dagster.yaml``, the Dagster version and the shipped template an instance was prepared for (the version
    from the package's metadata: a command that finds its instance prepared imports no Dagster for it; the template:
    a release whose template gained a section appends it to an instance an earlier release prepared)."""
    config = home / "dagster.yaml"
    text = config.read_text() if config.exists() else ""
    return (f"dagster {importlib.metadata.version('dagster')}\n{hashlib.sha256(text.encode()).hexdigest()}\n"
            f"template {hashlib.sha256(DAGSTER_YAML.encode()).hexdigest()[:16]}\n")


def prepare_instance(home: Path) -> bool:
    """``home`` (``$DAGSTER_HOME``)'s ``dagster.yaml`` (:func:`ensure_dagster_yaml`: True when written) and
    its instance's run, event log and schedule storage created, by one process at a time (an exclusive lock
    on ``home/.freight-instance.lock``, held only while they are made). Then :data:`READY_FILE` says for
    which file and version, so that the next command only reads it (a changed file or a new Dagster
    prepares it again)."""
    ready = home / READY_FILE
    if ready.exists() and ready.read_text() == _prepared_for(home):
        return False
    from dagster import DagsterInstance

    home.mkdir(parents=True, exist_ok=True)
    with open(home / LOCK_FILE, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            written = ensure_dagster_yaml(home)
            try:
                with environ({"DAGSTER_HOME": str(home)}), DagsterInstance.get() as instance:
                    instance.get_runs_count()  # each storage makes its tables (and stamps their migration) on first use
                    instance.event_log_storage.get_maximum_record_id()
                    instance.all_instigator_state()
            except Exception as exc:
                reason = " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
                raise BadInstance(f"the Dagster instance of {home} cannot be opened ({type(exc).__name__}: {reason}): "
                                  f"fix {home / 'dagster.yaml'}, or move it away for the shipped one") from exc
            ready.write_text(_prepared_for(home))
            return written
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def ensure_dagster_yaml(home: Path) -> bool:
    """Write ``home/dagster.yaml`` from the template unless one exists, or append the ``telemetry``, ``nux``,
    ``retention`` and event log storage sections an existing one lacks; True when the file was written or changed."""
    path = home / "dagster.yaml"
    if not path.exists():
        path.write_text(DAGSTER_YAML)
        return True
    text = path.read_text()
    try:
        config = yaml.safe_load(text) or {}
    except yaml.YAMLError:
        return False  # not ours to repair: Dagster reports it
    if not isinstance(config, dict):
        return False
    missing = [section for key, section in {**SWITCHED_OFF, "retention": TICK_RETENTION}.items() if key not in config]
    if not any(key in config for key in STORAGE_SECTIONS):
        missing.append(EVENT_LOG_STORAGE)
    if not missing:
        return False
    path.write_text(text + ("" if text.endswith("\n") or not text else "\n") + "".join(missing))
    return True
