"""Which dbt build a run needs: none, incremental, or a full refresh. Plain Python, no Dagster.

The incremental marts (``fct_shipments``, ``fct_shipment_milestones``, ``fct_transit_times``)
rebuild only the shipments recorded in ``freight_meta.changed_shipments`` since the last complete
build (``dbt_models/macros/changed_shipments.sql``). A full refresh rebuilds everything: when the
dbt project changed since the marts were built (its models, macros, ``dbt_project.yml`` or the vars
the run passes: one fingerprint), when they were never built by this version, or when asked
(``FREIGHT_DBT_FULL_REFRESH=1``, ``freight-pipeline sync --full-refresh``). When nothing changed at
all (no shipment, no code conversion, the same project) and the last build succeeded, no build runs.
An incremental build of every model leaves the views out (they hold only SQL, unchanged since the
last whole build of the same project) and runs every data test: on the changed shipments' rows only
where the test's model declares its rows change only with their shipment (``changed_rows_column``,
``dbt_models/macros/test_rows.sql``), unless a full check is due. A build's tests run batched after its
models (``marts.worker``, "Batched tests", under :func:`batch_key`). It leaves out the code conversions'
model too when they did not change (:func:`models_only_of`). A full check tests every row (and
the warehouse check ``history_matches_current`` compares every shipment): the first run, then the
first after ``FREIGHT_FULL_CHECK_INTERVAL_MINUTES`` (a day) since the last one that completed; a full
refresh tests every row too. So over a day nothing is tested less than by testing everything every run.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from freight_pipeline.config import DBT_FULL_REFRESH_ENV, DBT_TEST_ROWS_ENV, MartsSettings
from freight_pipeline.sync.streams import CODE_CONVERSIONS
from freight_pipeline.warehouse.store import Warehouse

MARTS_STATE = "dbt_marts"
"""``sync_state`` entry: the fingerprint of the dbt project the marts were built with, when, and when the
last full check (every row tested) began."""
FINGERPRINTED = ("dbt_project.yml", "profiles.yml", "models", "macros")
"""What decides the marts' content and where the views stand (the profile names the schema they are
built in: an incremental build, which leaves the views out, must find them there)."""


def project_fingerprint(project_dir: Path, build_args: Sequence[str]) -> str:
    """A hash of what decides the marts' content: the models, macros, project and profile files and build args."""
    digest = hashlib.sha256(json.dumps(list(build_args)).encode())
    for name in FINGERPRINTED:
        root = project_dir / name
        files = sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else [root]
        for path in files:
            if path.is_file():
                digest.update(str(path.relative_to(project_dir)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


TESTS_DIR = "tests"
"""The project's singular and generic tests: not in the fingerprint (they do not decide the marts'
content), in the batch key (they decide the tests a build runs)."""


def batch_key(project_dir: Path, fingerprint: str, args: Sequence[str], env: Mapping[str, str]) -> str:
    """The key of a build's batched data tests (``marts.worker``): the project's fingerprint,
    its tests, the build's arguments and environment; the same key, the same tests compiled the same way."""
    digest = hashlib.sha256(json.dumps([fingerprint, list(args), sorted(env.items())]).encode())
    root = project_dir / TESTS_DIR
    for path in sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else []:
        digest.update(str(path.relative_to(project_dir)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


VIEWS = "config.materialized:view"
"""dbt's selector of the views (staging and intermediate models)."""
SOURCE = "freight"
"""The dbt source of the sync's tables (``dbt_models/models/staging/_sources.yml``)."""
INDIRECT_SELECTION_ENV = "DBT_INDIRECT_SELECTION"


@dataclass(frozen=True)
class BuildPlan:
    run: bool
    full_refresh: bool
    reason: str
    views_current: bool = False
    """The views stand as the last whole build of this same project created them (a view holds no
    rows, only its SQL, which the fingerprint covers): the build leaves them out and still runs
    their data tests."""

    changed_rows: bool = False
    """The data tests of models whose rows change only with their shipment read the changed shipments'
    rows only (no full check is due)."""

    unchanged_models: tuple[str, ...] = ()
    """dbt selectors of the models an incremental build leaves out as current: those built only from
    tables that did not change since the last complete build (the code conversions' when they did not
    change). Their data tests still run."""

    conversions_at: dt.datetime | None = None
    """When the code conversions' cursor was last set, as the plan read it: the build that follows covers them as
    they were then (``record_build`` keeps it, and the next plan compares with it, not with a clock's reading)."""

    @property
    def args(self) -> list[str]:
        if self.full_refresh:
            return ["--full-refresh"]
        views = ["--exclude", VIEWS] if self.views_current else []
        return [*views, *(arg for selector in self.unchanged_models for arg in ("--exclude", selector))]

    @property
    def env(self) -> dict[str, str]:
        """dbt's environment for the plan: with the views left out, their tests stay in (dbt's
        default, eager indirect selection, leaves out the tests of every node left out)."""
        env = {INDIRECT_SELECTION_ENV: "empty"} if self.views_current else {}
        return {**env, DBT_TEST_ROWS_ENV: "changed"} if self.changed_rows else env


def full_check_due(warehouse: Warehouse, now: dt.datetime | None = None, marts: MartsSettings | None = None) -> bool:
    """Whether this run checks every row: no full check completed yet, or the last one began at least
    ``marts``' interval (None: as configured; ``FREIGHT_FULL_CHECK_INTERVAL_MINUTES``) before ``now``."""
    last = last_full_check(warehouse)
    interval = (marts or MartsSettings.configured()).full_check_interval
    return last is None or (now or dt.datetime.now(dt.UTC)) - last >= interval


def last_full_check(warehouse: Warehouse) -> dt.datetime | None:
    """When the last complete full check began (None: never)."""
    state = _state(warehouse)
    try:
        return dt.datetime.fromisoformat(state["full_check_at"]) if state and state.get("full_check_at") else None
    except (ValueError, TypeError):
        return None


def plan_build(warehouse: Warehouse, fingerprint: str, *, full_refresh: bool = False,
               full_check: bool = True, marts: MartsSettings | None = None) -> BuildPlan:
    """What the build of this run must do, always of every model (``full_refresh``: the run asks for a
    full refresh, as a rebuild does; ``full_check``: every row is tested, else an incremental build
    tests the changed rows)."""
    state = _state(warehouse)
    conversions = warehouse.reads.cursor_updated_at(CODE_CONVERSIONS.name)
    if full_refresh:
        return BuildPlan(True, True, "the run asks for a full refresh (a rebuild)", conversions_at=conversions)
    if (marts or MartsSettings.configured()).dbt_full_refresh:
        return BuildPlan(True, True, f"a full refresh was asked for ({DBT_FULL_REFRESH_ENV})",
                         conversions_at=conversions)
    if state is None:
        return BuildPlan(True, True, "the marts were never built by this version", conversions_at=conversions)
    if state.get("fingerprint") != fingerprint:
        return BuildPlan(True, True, "the dbt project changed since the marts were built", conversions_at=conversions)
    changes = warehouse.reads.pending_changes()
    built_at = dt.datetime.fromisoformat(state["built_at"])
    covered = _instant(state.get("conversions_at"))
    # the cursor as the last build covered it: any other setting is a change (a clock stepped back since dates a
    # later one before that build); a build recorded before it was kept: a setting after that build began
    conversions_changed = conversions is not None and (conversions != covered if "conversions_at" in state
                                                       else conversions > built_at)
    if changes == 0 and not conversions_changed and warehouse.reads.last_run_status("dbt_build") == "success":
        return BuildPlan(False, False, f"nothing changed since the marts were built ({built_at:%Y-%m-%d %H:%M:%S} UTC)",
                         conversions_at=conversions)
    what = f"{changes} shipments" + (" and the code conversions" if conversions_changed else "") + " changed"
    what += "; a full check" if full_check else "; tests on the changed rows"
    unchanged = () if conversions_changed else models_only_of(CODE_CONVERSIONS.tables)
    return BuildPlan(True, False, what, views_current=True, changed_rows=not full_check, unchanged_models=unchanged,
                     conversions_at=conversions)


def next_incremental() -> BuildPlan:
    """The plan of the usual next build after this one: an incremental build of changed shipments alone,
    testing the changed rows (its tests are prepared by a build of another kind: ``marts.build``)."""
    return BuildPlan(True, False, "the next incremental build", views_current=True, changed_rows=True,
                     unchanged_models=models_only_of(CODE_CONVERSIONS.tables))


def models_only_of(tables: Sequence[str]) -> tuple[str, ...]:
    """dbt selectors of the models built from ``tables`` of the ``freight`` source: the source's descendants
    that are models (``source:freight.t+,resource_type:model``, an intersection). Left out when those tables
    did not change, which is sound only while no such model reads another table too (``test_plan`` reads
    dbt's manifest to hold that for the code conversions)."""
    return tuple(f"source:{SOURCE}.{table}+,resource_type:model" for table in tables)


def record_build(warehouse: Warehouse, fingerprint: str, began: dt.datetime, run_id: str, *,
                 full_check: bool, conversions_at: dt.datetime | None = None) -> int:
    """After a complete, successful build that began at ``began``: remember it (and, when it was the
    run's ``full_check``, that the last full check began then; the code conversions' cursor it covered,
    ``BuildPlan.conversions_at``), forget what it covered."""
    last = began if full_check else last_full_check(warehouse)
    built = json.dumps({"fingerprint": fingerprint, "built_at": began.isoformat(),
                        "conversions_at": conversions_at.isoformat() if conversions_at is not None else None,
                        **({"full_check_at": last.isoformat()} if last is not None else {})})
    warehouse.writes.set_cursor(MARTS_STATE, built, run_id)
    return warehouse.writes.forget_changes(began)


def _instant(text: str | None) -> dt.datetime | None:
    try:
        return dt.datetime.fromisoformat(text) if text else None
    except (ValueError, TypeError):
        return None


def _state(warehouse: Warehouse) -> dict[str, str] | None:
    stored = warehouse.reads.get_cursor(MARTS_STATE)
    try:
        state = json.loads(stored) if stored else None
        if state is not None:
            dt.datetime.fromisoformat(state["built_at"])
        return state
    except (ValueError, KeyError, TypeError):
        return None
