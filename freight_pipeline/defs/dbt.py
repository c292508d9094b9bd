"""The dbt project as Dagster sees it: its models as asset specs, and the build's results as their
materializations. The build itself is the job's (``marts.build``, in ``job.run``).

dbt sources carry ``meta.dagster.asset_key: [freight, <table>]`` (``_sources.yml``), so the staging
models depend on the sync assets: one lineage graph. The manifest is made at load time when it is
missing or older than a project file (``dbt parse``: no database needed, a few seconds); otherwise
loading just reads it, and the specs dagster-dbt made from it (cached beside it).
"""

import fcntl
import graphlib
import hashlib
import json
import os
import tempfile
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

import dagster as dg
from dagster._serdes import deserialize_value, serialize_value

from freight_pipeline.marts.project import DBT_PROJECT_DIR
from freight_pipeline.marts.results import NodeResult

PROJECT_FILES = ("dbt_project.yml", "profiles.yml", "packages.yml", "dependencies.yml", "selectors.yml")
PROJECT_DIRS = ("models", "macros", "tests", "seeds", "snapshots", "analyses")
TARGET = "target"
"""dbt's target directory of the parse (``<project>/target``), where the specs' cache lives too."""
SPECS_CACHE = "dagster_asset_specs.json"
TRANSLATION = Path(__file__).with_name("dbt_translation.py")
UNIQUE_ID = "dagster_dbt/unique_id"
"""Where dagster-dbt's spec of a model names its dbt node."""


def manifest_path(project_dir: Path = DBT_PROJECT_DIR) -> Path:
    return project_dir / TARGET / "manifest.json"


def _newest_source_mtime(project_dir: Path) -> float:
    paths = [project_dir / name for name in PROJECT_FILES]
    for directory in PROJECT_DIRS:
        if (project_dir / directory).is_dir():
            paths.extend(p for p in (project_dir / directory).rglob("*") if p.is_file())
    return max((p.stat().st_mtime for p in paths if p.exists()), default=0.0)


def manifest_is_current(project_dir: Path = DBT_PROJECT_DIR) -> bool:
    manifest = manifest_path(project_dir)
    return (
        manifest.is_file()
        and manifest.stat().st_size > 0
        and manifest.stat().st_mtime >= _newest_source_mtime(project_dir)
    )


def ensure_manifest(project_dir: Path = DBT_PROJECT_DIR) -> Path:
    """``target/manifest.json`` of the project, parsed first when missing or stale (serialized by a file lock)."""
    if manifest_is_current(project_dir):
        return manifest_path(project_dir)
    target = project_dir / TARGET
    target.mkdir(parents=True, exist_ok=True)
    with open(target / ".parse.lock", "a+") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            if not manifest_is_current(project_dir):  # another process may have parsed meanwhile
                from freight_pipeline.defs.dbt_translation import parse_project

                parse_project(project_dir, TARGET)
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)
    if not manifest_path(project_dir).is_file():
        raise FileNotFoundError(f"dbt parse did not write {manifest_path(project_dir)}")
    return manifest_path(project_dir)


@dataclass(frozen=True)
class DbtAssets:
    """The dbt project's models as Dagster specs (keys, lineage, descriptions, groups, code from the
    manifest, as dagster-dbt's ``@dbt_assets`` makes them), and what the build's results are to them."""

    specs: tuple[dg.AssetSpec, ...]
    keys: dict[str, dg.AssetKey]
    """Unique id of each model (seed, snapshot) -> its asset key."""
    tests: dict[str, str]
    """Unique id of each data test -> the unique id of the model it tests."""


def dbt_assets_of(project_dir: Path = DBT_PROJECT_DIR) -> DbtAssets:
    """The project's models as specs, as dagster-dbt makes them from the manifest (``dbt_translation``),
    cached beside the manifest: loading the definitions then imports neither dagster-dbt nor dbt (3 s
    of every Dagster run), and a new manifest, dagster-dbt or translation makes the cache again."""
    manifest = ensure_manifest(project_dir)
    cache = manifest.with_name(SPECS_CACHE)
    made_from = _made_from(manifest)
    cached = _read_cache(cache)
    if cached.get("made_from") != made_from:
        from freight_pipeline.defs.dbt_translation import translate

        specs, tests = translate(json.loads(manifest.read_text()), project_dir)
        cached = {"made_from": made_from, "specs": serialize_value(specs), "tests": tests}
        with tempfile.NamedTemporaryFile("w", dir=cache.parent, prefix=".specs-", delete=False) as out:
            json.dump(cached, out)
        os.replace(out.name, cache)  # whole, whoever writes last
    specs = tuple(dg.AssetSpec(**{**fields, "deps": [dg.AssetDep(**dep) for dep in fields["deps"]]}, skippable=True)
                  for fields in deserialize_value(cached["specs"], list))
    return DbtAssets(specs, {str(spec.metadata[UNIQUE_ID]): spec.key for spec in specs}, cached["tests"])


def _read_cache(cache: Path) -> dict[str, Any]:
    """The specs' cache, or nothing when it is missing or unreadable (emptied by a crash, cut short): then it is
    made again, rather than the definitions failing to load."""
    try:
        cached = json.loads(cache.read_text())
    except (OSError, ValueError):
        return {}
    return cached if isinstance(cached, dict) else {}


def _made_from(manifest: Path) -> dict[str, Any]:
    """What the cached specs depend on: the manifest's version, dagster-dbt's and the translation's."""
    stat = manifest.stat()
    return {"manifest": [stat.st_mtime_ns, stat.st_size], "dagster_dbt": version("dagster-dbt"),
            "translation": hashlib.sha256(TRANSLATION.read_bytes()).hexdigest()}


NOT_REBUILT = "not_rebuilt"
"""The metadata of a model materialized by a build that did not run it: why it is current all the same."""


def model_results(dbt: DbtAssets, nodes: Sequence[NodeResult], *,
                  built: bool = False) -> Iterator[dg.MaterializeResult]:
    """A materialization of each model the build ran without error, with dbt's figures and its tests'
    results (every test of it that ran: passed, warned, failed); ``built``: the build succeeded, so every other
    model is current as well (dbt had nothing of it to redo; a view holds no data of its own), and is materialized
    saying so (:data:`NOT_REBUILT`)."""
    tests: dict[str, dict[str, str]] = {}
    for node in nodes:
        if node.unique_id in dbt.tests:
            tests.setdefault(dbt.tests[node.unique_id], {})[node.name] = node.status
    ran: dict[str, dg.MaterializeResult | None] = {}
    for node in nodes:
        key = dbt.keys.get(node.unique_id)
        if key is None:
            continue
        if node.status != "success":
            ran[node.unique_id] = None
            continue
        metadata: dict[str, Any] = {"unique_id": node.unique_id, "dbt_status": node.status}
        if node.seconds is not None:
            metadata["execution_duration"] = dg.MetadataValue.float(round(node.seconds, 3))
        if node.rows is not None:
            metadata["rows_affected"] = node.rows
        if node.message:
            metadata["dbt_message"] = node.message
        if node.unique_id in tests:
            counts = Counter(tests[node.unique_id].values())
            metadata["tests"] = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
            metadata["test_results"] = dg.MetadataValue.json(dict(sorted(tests[node.unique_id].items())))
        ran[node.unique_id] = dg.MaterializeResult(asset_key=key, metadata=metadata)
    for unique_id in dependency_order(dbt):  # Dagster takes a multi-asset's results upstream first
        if unique_id in ran:
            result = ran[unique_id]
            if result is not None:
                yield result
        elif built:
            yield dg.MaterializeResult(asset_key=dbt.keys[unique_id], metadata={
                "unique_id": unique_id, "dbt_status": "current", NOT_REBUILT: dg.MetadataValue.text(
                    "current, not rebuilt: the build had nothing of it to redo (no row it reads changed since it "
                    "was built; a view holds no data of its own)")})


def dependency_order(dbt: DbtAssets) -> list[str]:
    """The unique ids of the project's models, each after every model it reads."""
    id_of = {key: unique_id for unique_id, key in dbt.keys.items()}
    sorter = graphlib.TopologicalSorter({
        id_of[spec.key]: [id_of[dep.asset_key] for dep in spec.deps if dep.asset_key in id_of] for spec in dbt.specs})
    return list(sorter.static_order())
