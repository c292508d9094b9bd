"""The docs state the code's present: every variable the code reads is documented with its real default,
and every documented one is read; the README's table count and the contract's table list are the
registry's (``normalize.tables.FREIGHT_TABLES``). (The marts: ``test_marts_listed.py``.)

The variables are found in the code, not listed here: a module-level ``<NAME>_ENV = "FREIGHT_..."``
constant, or ``env_var('FREIGHT_...')`` in the YAML of ``dbt_models``. A new variable needs its line in
``docs/operations.md`` (or, for lake mode's, ``docs/lake.md``); its default is compared with the
code's when :func:`code_defaults` knows where the code declares it.
"""

from __future__ import annotations

import ast
import datetime as dt
import re
from collections.abc import Iterator
from pathlib import Path

import yaml

from freight_pipeline.commands.preflight import DEFAULT_MIN_FREE_MB
from freight_pipeline.config import (
    DEFAULT_BASE_URL,
    DEFAULT_DATA_DIR,
    DEFAULT_DUCKDB_MEMORY_LIMIT,
    DEFAULT_MAX_SYNC_AGE_MINUTES,
    DEFAULT_PUBLISH_MEMORY_LIMIT,
    DEFAULT_PUBLISH_STORAGE_VERSION,
    DEFAULT_USERNAME,
)
from freight_pipeline.marts.plan import DEFAULT_FULL_CHECK_MINUTES
from freight_pipeline.marts.project import DEFAULT_DBT_MEMORY_LIMIT, REPLAY_DEFAULT
from freight_pipeline.normalize.tables import FREIGHT_TABLES
from freight_pipeline.sync.settings import SyncSettings

REPO = Path(__file__).resolve().parents[1]
PRODUCT = REPO / "freight_pipeline"
DBT = REPO / "dbt_models"
UNSET = "unset"
"""The default column's word for a variable the code reads only when it is set."""


def code_variables() -> set[str]:
    """Every ``FREIGHT_*`` variable the product reads (and ``DAGSTER_HOME``)."""
    found = {"DAGSTER_HOME"}
    for path in PRODUCT.rglob("*.py"):
        for node in ast.parse(path.read_text(), str(path)).body:
            if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                    and node.targets[0].id.endswith("_ENV") and isinstance(node.value, ast.Constant)
                    and isinstance(node.value.value, str) and node.value.value.startswith("FREIGHT_")):
                found.add(node.value.value)
    for path in DBT.glob("*.yml"):
        found.update(re.findall(r"env_var\('(FREIGHT_[A-Z0-9_]+)'", path.read_text()))
    return found


def profile_default(name: str) -> str:
    """The default ``dbt_models/profiles.yml`` gives ``env_var(name, ...)`` (the same in every target)."""
    defaults = set(re.findall(rf"env_var\('{name}', '([^']*)'\)", (DBT / "profiles.yml").read_text()))
    assert len(defaults) == 1, defaults
    return defaults.pop()


def minutes(interval: dt.timedelta | None) -> str:
    assert interval is not None
    return str(int(interval.total_seconds() // 60))


def flag(value: bool) -> str:
    return "1" if value else "0"


def code_defaults() -> dict[str, str]:
    """The default of each variable, from where the code declares it (``unset``: read only when set)."""
    sync = SyncSettings()
    dbt_vars = yaml.safe_load((DBT / "dbt_project.yml").read_text())["vars"]
    return {
        "FREIGHT_BASE_URL": DEFAULT_BASE_URL,
        "FREIGHT_USERNAME": DEFAULT_USERNAME,
        "FREIGHT_DATA_DIR": DEFAULT_DATA_DIR,
        "FREIGHT_RECONCILE_INTERVAL_MINUTES": minutes(sync.reconcile_interval),
        "FREIGHT_SYNC_DOCUMENTS": flag(sync.documents),
        "FREIGHT_SYNC_CODE_CONVERSIONS": flag(sync.code_conversions),
        "FREIGHT_HISTORY": flag(sync.history),
        "FREIGHT_DOCUMENTS_RELIST_MINUTES": minutes(sync.documents_relist_interval),
        "FREIGHT_DOCUMENT_CONTENT": flag(sync.document_content),
        "FREIGHT_SERVICE_TIMEZONE": sync.service_timezone,
        "FREIGHT_HEDGE": str(sync.hedge_share),
        "FREIGHT_FRESHNESS_SAMPLE": str(sync.freshness_sample),
        "FREIGHT_EVENTS_REFRESH": sync.events_refresh,
        "FREIGHT_EVENTS_MAX_AGE_MINUTES": minutes(sync.events_max_age),
        "FREIGHT_EVENTS_REFRESH_SHARE": str(sync.events_refresh_share),
        "FREIGHT_MAX_SYNC_AGE_MINUTES": str(DEFAULT_MAX_SYNC_AGE_MINUTES),
        "FREIGHT_ON_TIME_TOLERANCE_MINUTES": str(dbt_vars["on_time_tolerance_minutes"]),
        "FREIGHT_DUCKDB_MEMORY_LIMIT": DEFAULT_DUCKDB_MEMORY_LIMIT,
        "FREIGHT_DUCKDB_PUBLISH_MEMORY_LIMIT": DEFAULT_PUBLISH_MEMORY_LIMIT,
        "FREIGHT_PUBLISH_STORAGE_VERSION": DEFAULT_PUBLISH_STORAGE_VERSION,
        "FREIGHT_DBT_MEMORY_LIMIT": DEFAULT_DBT_MEMORY_LIMIT,
        "FREIGHT_MIN_FREE_MB": str(DEFAULT_MIN_FREE_MB),
        "FREIGHT_DBT_FULL_REFRESH": UNSET,
        "FREIGHT_DBT_REPLAY": flag(REPLAY_DEFAULT),
        "FREIGHT_FULL_CHECK_INTERVAL_MINUTES": str(DEFAULT_FULL_CHECK_MINUTES),
        "FREIGHT_DBT_TEST_ROWS": UNSET,
        "FREIGHT_SCHEDULES_RUNNING": UNSET,
        "DAGSTER_HOME": UNSET,
    }


def table_rows(path: Path, header: str) -> Iterator[list[str]]:
    """The cells of each row of the Markdown table under the line ``header``."""
    lines = path.read_text().splitlines()
    start = lines.index(header)
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            return
        yield [cell.strip() for cell in line.strip("|").split(" | ")]


def documented() -> dict[str, str | None]:
    """Each documented variable -> its default cell (None: a table without one, or a row of several)."""
    found: dict[str, str | None] = {}
    for cells in table_rows(REPO / "docs" / "operations.md", "| variable | default | meaning |"):
        names = re.findall(r"`([A-Z][A-Z0-9_]+)`", cells[0])
        for name in names:
            found[name] = cells[1] if len(names) == 1 else None
    for cells in table_rows(REPO / "docs" / "lake.md", "| variable | meaning |"):
        for name in re.findall(r"`(FREIGHT_[A-Z0-9_]+)`", cells[0]):
            found[name] = None
    return found


def test_the_dbt_memory_limit_default_is_the_profiles() -> None:
    """A replayed build sets the limit the profile gives dbt (``marts.project.dbt_memory_limit``)."""
    assert profile_default("FREIGHT_DBT_MEMORY_LIMIT") == DEFAULT_DBT_MEMORY_LIMIT


def test_no_variable_has_two_rows() -> None:
    names = [name for cells in table_rows(REPO / "docs" / "operations.md", "| variable | default | meaning |")
             for name in re.findall(r"`([A-Z][A-Z0-9_]+)`", cells[0])]
    assert sorted(name for name in set(names) if names.count(name) > 1) == []


def default_named(cell: str) -> str:
    """``\\`512MB\\` (...)`` -> ``512MB``; ``unset (...)`` -> ``unset``; ``— (required)`` -> ``—``."""
    if cell.startswith("`"):
        return cell.split("`")[1]
    return cell.split()[0]


def test_every_variable_the_code_reads_is_documented_and_every_documented_one_is_read() -> None:
    docs = documented()
    read = code_variables()
    assert sorted(read - set(docs)) == [], "read by the code, not in docs/operations.md or docs/lake.md"
    assert sorted(set(docs) - read) == [], "documented, but the code does not read it"


def test_each_documented_default_is_the_code_s() -> None:
    docs = documented()
    defaults = code_defaults()
    assert set(defaults) <= code_variables(), "a default of a variable the code does not read"
    wrong = {name: (docs[name], default) for name, default in defaults.items()
             if docs.get(name) is None or default_named(docs[name] or "") != default}
    assert wrong == {}, "documented default cell vs the code's default"


def test_the_readme_counts_the_tables_of_the_registry() -> None:
    counts = re.findall(r"rows of (\d+) tables", (REPO / "README.md").read_text())
    assert counts == [str(len(FREIGHT_TABLES))]


def test_the_warehouse_contract_lists_every_freight_table() -> None:
    text = (REPO / "docs" / "warehouse-contract.md").read_text()
    section = text.split("## Schema `freight`:", 1)[1].split("\n## ", 1)[0]
    rows = [line.split(" | ")[0] for line in section.splitlines() if line.startswith("| `")]
    listed = [name for row in rows for name in re.findall(r"`([a-z_]+)`", row)]
    assert sorted(listed) == sorted(spec.name for spec in FREIGHT_TABLES)


DOCS = (REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *sorted(REPO.glob("*/README.md")),
        *sorted(PRODUCT.glob("*/README.md")))
"""The pages that describe the present (``bench/log.md`` is a dated log: it cites files as they were)."""
TOP = ("freight_pipeline/", "freight_pipeline_tests/", "docs/", "bench/", "dbt_models/", "scripts/", ".ci/")
"""The repository's top folders: a path cited from one of them is the repository's."""
MADE = ("dbt_models/target/", "data/", "work/", "history/", "sources/", "documents/")
"""Folders a run makes (not in a clone): dbt's target, a data directory's, ``$DAGSTER_HOME``'s, the Parquet
export's."""
ROOTS = (REPO, PRODUCT, REPO / "freight_pipeline_tests", REPO / "dbt_models")
CITED = re.compile(r"`([A-Za-z0-9_.][A-Za-z0-9_./-]*\.(?:py|md|sql|yml|yaml|toml|txt|json|png|sh)|[A-Za-z0-9_./-]+/)`")
LINKED = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def cited_paths(doc: Path) -> Iterator[tuple[str, list[Path]]]:
    """Each repository path ``doc`` cites, with where it may be: a backquoted path (from the repository's
    root, the doc's folder, the package, the tests, the dbt project or a subpackage; a bare file name of a
    module or model anywhere in them) and a relative link (from the doc's folder)."""
    text = doc.read_text()
    for cited in CITED.findall(text):
        if cited.startswith(("./", "../", "/")) or cited.startswith(MADE):
            continue
        if cited.startswith(TOP):
            yield cited, [REPO / cited, doc.parent / cited]
        elif "/" in cited.rstrip("/"):  # relative to a package (``client/limiter.py``, ``specs/goods.py``)
            yield cited, [doc.parent / cited, *(root / cited for root in ROOTS),
                          *REPO.glob(f"freight_pipeline/**/{cited.rstrip('/')}")]
        elif cited.endswith((".py", ".sql")):  # a module or model named alone
            yield cited, [*REPO.glob(f"freight_pipeline*/**/{cited}"), *REPO.glob(f"dbt_models/**/{cited}"),
                          *REPO.glob(f"bench/**/{cited}"), *REPO.glob(f"scripts/**/{cited}")]
    for linked in LINKED.findall(text):
        if not linked.startswith(("http://", "https://", "mailto:")):
            yield linked, [doc.parent / linked]


def test_every_repository_path_a_doc_cites_exists() -> None:
    missing = {f"{doc.relative_to(REPO)}: {cited}" for doc in DOCS for cited, where in cited_paths(doc)
               if not any(path.exists() for path in where)}
    assert missing == set()


def test_a_path_that_does_not_exist_is_found(tmp_path: Path) -> None:
    doc = tmp_path / "page.md"
    doc.write_text("see `freight_pipeline_tests/defs/test_stream_failure.py`, `test_gone.py`, [there](gone.md), "
                   "`freight_pipeline/job/run.py` and [here](page.md)")
    found = {cited for cited, where in cited_paths(doc) if not any(path.exists() for path in where)}
    assert found == {"freight_pipeline_tests/defs/test_stream_failure.py", "test_gone.py", "gone.md"}


def test_every_variable_name_is_declared_in_the_config_module_only() -> None:
    """``grep`` finds a ``FREIGHT_*`` name declared in ``freight_pipeline/config.py`` and nowhere else in the
    package: any other module imports it from there."""
    elsewhere = set()
    for path in PRODUCT.rglob("*.py"):
        if path == PRODUCT / "config.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                    and re.fullmatch(r"FREIGHT_[A-Z0-9_]+", node.value)):
                elsewhere.add(f"{path.relative_to(REPO)}: {node.value}")
    assert elsewhere == set()
