"""The dbt project as Dagster assets: ``dbt build`` into the private working database.

dbt sources carry ``meta.dagster.asset_key: [freight, <table>]`` (``_sources.yml``), so the staging
models depend on the sync assets: one lineage graph. dbt tests attached to models become asset
checks (dagster-dbt's default). The manifest is made at load time when it is missing or older than
a project file (``dbt parse``: no database needed, a few seconds); otherwise loading just reads it.

A failed build raises ``DbtBuildFailed``, whose first line names the failed and skipped nodes (read
from ``run_results.json``); tests of severity warn that found rows are logged as Dagster warnings
and do not fail the build (dbt_models/README.md, "Test severity").
"""

import datetime as dt
import fcntl
import json
import os
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from dataclasses import dataclass
from graphlib import TopologicalSorter
from pathlib import Path
from typing import Any, Self

import dagster as dg
from dagster_dbt import DagsterDbtTranslator, DagsterDbtTranslatorSettings, DbtCliResource, DbtProject, dbt_assets
from dagster_dbt.metadata_set import DbtMetadataSet

from freight_pipeline.config import ON_TIME_TOLERANCE_ENV, REPO_ROOT, environ, minutes_from_env
from freight_pipeline.defs.dbt_plan import plan_build, project_fingerprint, record_build
from freight_pipeline.defs.dbt_warmup import dbt_executable, start_parse, wait_for_parse
from freight_pipeline.defs.resources import WarehouseResource
from freight_pipeline.sync.runner import one_line_error
from freight_pipeline.warehouse import meta
from freight_pipeline.warehouse.backend import StorageBackend
from freight_pipeline.warehouse.records import RunRecord
from freight_pipeline.warehouse.store import open_warehouse

DBT_PROJECT_DIR = REPO_ROOT / "dbt_models"
DATABASE_ENV = "FREIGHT_DBT_DATABASE"
"""The variable ``profiles.yml`` reads the DuckDB path from."""
DBT_BUILD_STREAM = meta.BUILD_STREAM
"""The ``sync_runs`` stream name under which each dbt build is logged."""
ON_TIME_TOLERANCE_VAR = "on_time_tolerance_minutes"
"""The dbt var the tolerance sets (its default is in ``dbt_project.yml``)."""
TARGET_DIR = "dbt-target"
"""dbt's target/log directory of a build, under ``<data_dir>/work/`` (one per data dir, reused: partial parse)."""
PROJECT_FILES = ("dbt_project.yml", "profiles.yml", "packages.yml", "dependencies.yml", "selectors.yml")
PROJECT_DIRS = ("models", "macros", "tests", "seeds", "snapshots", "analyses")
RUN_RESULTS = "run_results.json"
FIRST_LINE_LIMIT = 380
"""Longest first line of ``DbtBuildFailed`` (fewer names per group until it fits)."""
DETAIL_LINES = 20
"""Failed nodes described one per line after the first line; the rest are counted."""


dbt_project = DbtProject(project_dir=DBT_PROJECT_DIR, profiles_dir=DBT_PROJECT_DIR)


def _newest_source_mtime(project_dir: Path) -> float:
    paths = [project_dir / name for name in PROJECT_FILES]
    for directory in PROJECT_DIRS:
        if (project_dir / directory).is_dir():
            paths.extend(p for p in (project_dir / directory).rglob("*") if p.is_file())
    return max((p.stat().st_mtime for p in paths if p.exists()), default=0.0)


def manifest_is_current(project: DbtProject) -> bool:
    manifest = project.manifest_path
    return (
        manifest.is_file()
        and manifest.stat().st_size > 0
        and manifest.stat().st_mtime >= _newest_source_mtime(project.project_dir)
    )


def ensure_manifest(project: DbtProject = dbt_project) -> Path:
    """``target/manifest.json`` of ``project``, parsed first when missing or stale (serialized by a file lock)."""
    if manifest_is_current(project):
        return project.manifest_path
    target = project.project_dir / project.target_path
    target.mkdir(parents=True, exist_ok=True)
    with open(target / ".parse.lock", "a+") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            if not manifest_is_current(project):  # another process may have parsed meanwhile
                dbt = DbtCli(project_dir=project, dbt_executable=dbt_executable())
                dbt.cli(["parse", "--quiet"], target_path=project.target_path).wait()
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)
    if not project.manifest_path.is_file():
        raise FileNotFoundError(f"dbt parse did not write {project.manifest_path}")
    return project.manifest_path


class FreightDbtTranslator(DagsterDbtTranslator):
    """Groups dbt models by their schema (``dbt_staging``, ``dbt_intermediate``, ``dbt_analytics``).

    Asset keys stay dagster-dbt's defaults: ``[<schema>, <model>]`` for models, the configured
    ``meta.dagster.asset_key`` (``[freight, <table>]``) for sources.
    """

    def get_group_name(self, dbt_resource_props: Mapping[str, Any]) -> str | None:
        schema = dbt_resource_props.get("config", {}).get("schema")
        return f"dbt_{schema}" if schema else "dbt"


BUILD = ["build", "--exclude-resource-type", "unit_test", "--log-level-file", "info"]
"""The pipeline's build: models and data tests. dbt unit tests check the SQL's logic, not the data, so
they run in the test suite (``freight_pipeline_tests/dbt``), not in every scheduled run. dbt's log file
keeps info and above (its default, debug, took a quarter of the build's time)."""


class DbtCli(DbtCliResource):
    """``DbtCliResource`` without the dbt adapter that dagster-dbt otherwise builds in this process
    for every dbt command (1.6 s and about 30 MB per build, measured): it serves only
    ``fetch_row_counts()`` and ``fetch_column_metadata()``, which this project does not call (row
    counts come from the warehouse). dagster-dbt runs without one when the hook gives none, as it
    does for dbt Fusion; ``test_dbt_cli_builds_no_adapter`` fails if the hook ever changes."""

    def _initialize_dbt_core_adapter(self, args: Sequence[str]) -> Any:  # dagster-dbt's own hook
        return None


def vars_args() -> list[str]:
    """``--vars`` for what the environment sets (none: ``dbt_project.yml``'s defaults apply)."""
    if not os.environ.get(ON_TIME_TOLERANCE_ENV, "").strip():
        return []
    tolerance = minutes_from_env(ON_TIME_TOLERANCE_ENV, default=0)  # set: the default is never used
    return ["--vars", json.dumps({ON_TIME_TOLERANCE_VAR: tolerance})]


def build_target(warehouse: WarehouseResource) -> Path:
    """dbt's target and log directory for the builds of this data directory."""
    return warehouse.working_db.parent / TARGET_DIR


def target_env(backend: StorageBackend) -> dict[str, str]:
    """dbt's target by environment: the storage's (``lake`` in lake mode, one thread: see the profile),
    else the profile's default."""
    return {} if backend.dbt_target is None else {"DBT_TARGET": backend.dbt_target}


def warm_up(warehouse: WarehouseResource) -> bool:
    """Start parsing the dbt project for this data directory in the background (``dbt_warmup``)."""
    with environ(target_env(warehouse.backend)):
        return start_parse(DBT_PROJECT_DIR, build_target(warehouse), warehouse.working_db, DATABASE_ENV, vars_args())


def dbt_build_args() -> list[str]:
    """``dbt build``, with ``--vars`` for what the environment sets (else ``dbt_project.yml``'s defaults)."""
    return [*BUILD, *vars_args()]


# --- run results ---------------------------------------------------------------------------------

_KINDS = {"model": "model", "test": "test", "unit_test": "unit test", "seed": "seed", "snapshot": "snapshot"}
_FAILED = {"error": "errored", "fail": "failed", "runtime error": "errored"}


@dataclass(frozen=True)
class NodeResult:
    """One node of dbt's ``run_results.json``."""

    unique_id: str
    status: str
    message: str
    failures: int | None

    @property
    def kind(self) -> str:
        resource = self.unique_id.split(".", 1)[0]
        return _KINDS.get(resource, resource.replace("_", " "))

    @property
    def name(self) -> str:
        """``model.pkg.fct_x`` -> ``fct_x``; ``test.pkg.not_null_x.1a2b3c4d5e`` -> ``not_null_x``;
        ``unit_test.pkg.fct_x.test_y`` -> ``fct_x.test_y``."""
        parts = self.unique_id.split(".")[2:]
        if self.unique_id.startswith("test.") and len(parts) > 1:
            parts = parts[:-1]  # the hash dbt appends to a data test's id
        return ".".join(parts) or self.unique_id

    @property
    def failed(self) -> bool:
        return self.status in _FAILED

    @property
    def verb(self) -> str:
        if self.status == "error" and self.kind == "model":
            return "failed"
        return _FAILED.get(self.status, self.status)


def node_results(run_results: Mapping[str, Any]) -> list[NodeResult]:
    return [
        NodeResult(
            str(result.get("unique_id", "?")),
            str(result.get("status", "?")),
            " ".join(str(result.get("message") or "").split()),
            result.get("failures"),
        )
        for result in run_results.get("results", [])
    ]


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _said(node: NodeResult) -> str:
    """dbt's message of the node (``Got 1 result, configured to fail if != 0``), else its failure count."""
    if node.message:
        return node.message
    return "" if node.failures is None else _plural(node.failures, "result")


def _summary(nodes: Sequence[NodeResult], names: int) -> str:
    """``2 tests failed (a, b), 3 models skipped (x, y and 1 more), 40 tests skipped``: the failed
    nodes and skipped models, seeds and snapshots named (at most ``names`` per group), skipped tests
    counted."""
    groups: dict[tuple[str, str], list[str]] = {}
    for node in nodes:
        if node.failed or node.status == "skipped":
            groups.setdefault((node.kind, node.verb), []).append(node.name)

    def counted_only(kind: str, verb: str) -> bool:
        return verb == "skipped" and kind in ("test", "unit test")

    # failures first, then skipped models, then skipped tests (stable: in run order within each)
    ordered = sorted(groups.items(), key=lambda item: (item[0][1] == "skipped", counted_only(*item[0])))
    parts = []
    for (kind, verb), members in ordered:
        head = f"{_plural(len(members), kind)} {verb}"
        if counted_only(kind, verb):
            parts.append(head)
            continue
        shown = ", ".join(members[:names])
        more = f" and {len(members) - names} more" if len(members) > names else ""
        parts.append(f"{head} ({shown}{more})")
    return ", ".join(parts)


def build_failure_message(run_results: Mapping[str, Any] | None, exit_code: int | None, dbt_error: str = "") -> str:
    """The message of ``DbtBuildFailed``: a first line naming the failed and skipped nodes (short
    enough for one log line), then one line per failed node with dbt's message.

    Without run results (dbt stopped before running any node: a compile error, a locked database)
    the first line gives dbt's first error instead, from ``dbt_error`` (the text of dagster-dbt's
    error, whose end lists the errors dbt logged).
    """
    nodes = node_results(run_results or {})
    failed = [node for node in nodes if node.failed]
    if not failed:
        code = "" if exit_code is None else f" with exit code {exit_code}"
        reason = _first_dbt_error(dbt_error)
        return f"dbt build failed{code}" + (f": {reason}" if reason else "") + (f"\n{dbt_error}" if dbt_error else "")
    first = ""
    for names in (3, 2, 1):
        first = f"dbt build failed: {_summary(nodes, names)}"
        if len(first) <= FIRST_LINE_LIMIT:
            break
    details = [f"  {node.kind} {node.name} {node.verb}: {_said(node)}".rstrip(": ") for node in failed]
    if len(details) > DETAIL_LINES:
        details = [*details[:DETAIL_LINES], f"  ... and {len(details) - DETAIL_LINES} more failed"]
    return "\n".join([first, *details])


def _first_dbt_error(text: str) -> str:
    """The first informative line of the errors dagster-dbt parsed from dbt's log."""
    _, found, errors = text.partition("Errors parsed from dbt logs:")
    lines = [line.strip() for line in errors.splitlines() if line.strip()] if found else []
    informative = [line for line in lines if not line.startswith("Encountered an error")]
    return (informative or lines or [""])[0][:FIRST_LINE_LIMIT]


def build_summary(run_results: Mapping[str, Any] | None) -> str:
    """``27 models, 156 data tests: 155 passed, 1 warned``: what the build did, in one line."""
    nodes = node_results(run_results or {})
    tests = Counter(node.status for node in nodes if node.kind == "test")
    statuses = ", ".join(f"{tests[status]} {word}" for status, word in _TEST_STATUS.items() if tests[status])
    models = sum(node.kind == "model" for node in nodes)
    return f"{models} models, {tests.total()} data tests" + (f": {statuses}" if statuses else "")


_TEST_STATUS = {"pass": "passed", "warn": "warned", "fail": "failed", "error": "errored", "skipped": "skipped"}


def build_warnings(run_results: Mapping[str, Any] | None) -> list[str]:
    """One line per node that warned (a test of severity warn that found rows): its name and dbt's
    message (``Got 1 result, configured to warn if != 0``)."""
    return [
        f"dbt {node.kind} {node.name} warned (severity warn, the build goes on): {_said(node)}".rstrip(": ")
        for node in node_results(run_results or {})
        if node.status == "warn"
    ]


class DbtBuildFailed(RuntimeError):
    """A dbt build that failed; the first line of the message names the failed and skipped nodes."""

    @classmethod
    def from_target(cls, target: Path, exit_code: int | None, dbt_error: str = "") -> Self:
        """From the build's ``run_results.json`` in ``target``; the last line points at dbt's log there."""
        message = build_failure_message(read_run_results(target), exit_code, dbt_error)
        log = target / "dbt.log"
        return cls(message + (f"\n  dbt log: {log}" if log.is_file() else ""))


def read_run_results(target: Path) -> dict[str, Any] | None:
    """dbt's ``run_results.json`` in ``target``, or None when dbt wrote none (or an unreadable one)."""
    try:
        results = json.loads((target / RUN_RESULTS).read_text())
    except (OSError, ValueError):
        return None
    return results if isinstance(results, dict) else None


@contextmanager
def logged_build(data_dir: Path, backend: StorageBackend, run_id: str, *, whole: bool) -> Iterator[None]:
    """Log the build in ``freight_meta.sync_runs`` (stream ``dbt_build``): running, then success or failed.

    The publish refuses a working database whose latest build did not succeed (marts half rebuilt).
    A build of a selection (``whole`` False: some models picked in the UI) ends as ``partial``, not
    ``success``: it does not vouch for the marts it skipped, so only a whole build settles them.
    """
    record = RunRecord(run_id, DBT_BUILD_STREAM, dt.datetime.now(dt.UTC))
    with open_warehouse(data_dir, backend) as warehouse:
        warehouse.run_log.record_run(record)
    try:
        yield
    except BaseException as exc:
        record.status, record.error = "failed", one_line_error(exc)
        raise
    else:
        record.status = "success" if whole else "partial"
    finally:
        record.finished_at = dt.datetime.now(dt.UTC)
        with open_warehouse(data_dir, backend) as warehouse:
            warehouse.run_log.record_run(record)


def is_view(spec: dg.AssetSpec) -> bool:
    """A dbt model materialized as a view (dagster-dbt puts the materialization in each spec's metadata)."""
    return DbtMetadataSet.extract(spec.metadata).materialization_type == "view"


VIEW_NOT_REBUILT = "view not re-created: its SQL is the last whole build's (incremental build); its tests ran"


def passed_test_observation(event: object) -> bool:
    """dagster-dbt's observation of a data test that passed (one per test and tested model: 264
    stored Dagster events in a build, a quarter of the step's time in an incremental run). The
    build's summary line counts them; tests that warn, fail or error are still observed."""
    if not isinstance(event, dg.AssetObservation):
        return False
    status = event.metadata.get("status")
    return getattr(status, "value", status) == "pass"


def _dependencies_first(assets_def: dg.AssetsDefinition, keys: AbstractSet[dg.AssetKey]) -> list[dg.AssetKey]:
    """``keys`` in an order that yields every asset after those of ``assets_def`` it depends on."""
    graph = {key: {dep for dep in assets_def.asset_deps.get(key, ()) if dep in keys} for key in keys}
    return list(TopologicalSorter(graph).static_order())


@dbt_assets(
    manifest=ensure_manifest(dbt_project),
    project=dbt_project,
    dagster_dbt_translator=FreightDbtTranslator(settings=DagsterDbtTranslatorSettings(enable_asset_checks=False)),
    name="freight_dbt_models",
)
def freight_dbt_models(
    context: dg.AssetExecutionContext, dbt: DbtCli, warehouse: WarehouseResource
) -> Iterator[Any]:
    """``dbt build`` (models and data tests) into the working database, which no one else holds now."""
    database = warehouse.working_db
    backend = warehouse.backend
    if backend.working_database_missing(warehouse.path):
        raise FileNotFoundError(f"no working database at {database}: run the freight sync first")
    target = build_target(warehouse)
    args = dbt_build_args()
    whole = not context.is_subset
    fingerprint = project_fingerprint(DBT_PROJECT_DIR, args)
    with open_warehouse(warehouse.path, backend) as held:
        plan = plan_build(held, fingerprint, whole=whole)
    if not plan.run:
        context.log.info(f"dbt build not run: {plan.reason}; the marts are current")
        for key in _dependencies_first(context.assets_def, context.selected_asset_keys):
            yield dg.MaterializeResult(asset_key=key, metadata={"dbt_build": f"not run: {plan.reason}"})
        return
    args = [*args, *plan.args]
    context.log.info(f"{plan.reason}: dbt {' '.join(args)} into {backend.describe(warehouse.path)}")
    if plan.views_current:
        selected = context.selected_asset_keys
        views = {spec.key for spec in context.assets_def.specs if spec.key in selected and is_view(spec)}
        for key in _dependencies_first(context.assets_def, views):
            yield dg.MaterializeResult(asset_key=key, metadata={"dbt_build": VIEW_NOT_REBUILT})
    began = dt.datetime.now(dt.UTC)
    wait_for_parse(target)  # started by the sync when this data directory was new to dbt
    with logged_build(warehouse.path, backend, context.run_id, whole=whole), \
            environ({DATABASE_ENV: str(database), **target_env(backend), **plan.env}):
        (target / RUN_RESULTS).unlink(missing_ok=True)  # never read a previous build's results
        invocation = dbt.cli(args, context=context, target_path=target, raise_on_error=False)
        yield from (event for event in invocation.stream() if not passed_test_observation(event))
        results = read_run_results(target)
        context.log.info(f"dbt build: {build_summary(results)}")
        for warning in build_warnings(results):
            context.log.warning(warning)
        if not invocation.is_successful():
            error = invocation.get_error()
            raise DbtBuildFailed.from_target(target, invocation.process.returncode, str(error or ""))
    if whole:
        with open_warehouse(warehouse.path, backend) as held:
            covered = record_build(held, fingerprint, began, context.run_id)
        context.log.info(f"the marts now cover every change: {covered} changed shipments rebuilt")
