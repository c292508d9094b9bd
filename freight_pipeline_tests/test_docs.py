"""The docs state the code's present: the settings table is the settings models' (``config``), every variable a
doc names is one the code reads, the README's table count and the contract's table list are the registry's
(``normalize.tables.FREIGHT_TABLES``), the table of the kinds of notices is ``sync.result.NoticeKind``, every
path a doc cites exists. (The marts: ``test_marts_listed.py``.)
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import yaml

from freight_pipeline.checks.warehouse import notices_check
from freight_pipeline.commands.settings import reference_table
from freight_pipeline.config import FORMER_NAMES, INTERNAL_VARIABLES, MartsSettings, setting_names, variable
from freight_pipeline.normalize.tables import FREIGHT_TABLES
from freight_pipeline.sync.result import NoticeKind

REPO = Path(__file__).resolve().parents[1]
PRODUCT = REPO / "freight_pipeline"
DBT = REPO / "dbt_models"
OPERATIONS = REPO / "docs" / "operations.md"
REAL_SERVICES = REPO / "docs" / "real-services.md"
TABLE_BEGINS = "<!-- the settings: `freight-pipeline settings --markdown` writes this table; a test compares -->"
TABLE_ENDS = "<!-- end of the settings -->"


def settings_table(text: str) -> str:
    """The table between :data:`TABLE_BEGINS` and :data:`TABLE_ENDS` in ``text``."""
    return text.split(TABLE_BEGINS, 1)[1].split(TABLE_ENDS, 1)[0].strip()


def test_the_docs_settings_table_is_the_models() -> None:
    assert settings_table(OPERATIONS.read_text()) == reference_table()


def test_a_default_changed_in_the_docs_table_is_found() -> None:
    text = OPERATIONS.read_text()
    changed = text.replace("| `FREIGHT_PAGE_SIZE` | `500` |", "| `FREIGHT_PAGE_SIZE` | `250` |")
    assert changed != text and settings_table(changed) != reference_table()


def known_variables() -> set[str]:
    """Every ``FREIGHT_*`` variable the code reads: each setting's, the former names, the others'."""
    return {variable(name) for name in setting_names()} | set(FORMER_NAMES) | set(INTERNAL_VARIABLES)


NOT_VARIABLES = {"FREIGHT_TABLES"}
"""``FREIGHT_*`` names in the docs that are no variable: the registry of tables (``normalize.tables``)."""
TESTS_VARIABLES = {"FREIGHT_DASHBOARD_SCREENSHOT", "FREIGHT_DESCRIPTIONS_SCREENSHOT"}
"""Read by the test suite, not the product (``dashboard/test_dashboard.py``)."""
VARIABLE = re.compile(r"\bFREIGHT_[A-Z0-9_]*[A-Z0-9]\b(?!_\*)")
"""A variable's name (``FREIGHT_LAKE_*``, a family of them, is not one)."""


def test_every_variable_a_doc_or_the_dbt_project_names_is_read() -> None:
    known = known_variables() | NOT_VARIABLES | TESTS_VARIABLES
    named = {f"{doc.relative_to(REPO)}: {name}" for doc in DOCS for name in VARIABLE.findall(doc.read_text())
             if name not in known}
    named |= {f"{path.relative_to(REPO)}: {name}" for path in DBT.glob("*.yml")
              for name in re.findall(r"env_var\('(FREIGHT_[A-Z0-9_]+)'", path.read_text()) if name not in known}
    assert named == set()


def test_a_variable_no_setting_has_is_found_in_a_doc() -> None:
    doc = "set `FREIGHT_HEDGE_SHARE`, `FREIGHT_LAKE_*`, or `FREIGHT_RECONCILE_MINUTES` (gone)"
    assert {name for name in VARIABLE.findall(doc) if name not in known_variables()} == {"FREIGHT_RECONCILE_MINUTES"}


def test_every_variable_that_is_not_a_setting_is_documented() -> None:
    text = OPERATIONS.read_text()
    assert [name for name in INTERNAL_VARIABLES if f"`{name}`" not in text] == []


def profile_default(name: str) -> str:
    """The default ``dbt_models/profiles.yml`` gives ``env_var(name, ...)`` (the same in every target)."""
    defaults = set(re.findall(rf"env_var\('{name}', '([^']*)'\)", (DBT / "profiles.yml").read_text()))
    assert len(defaults) == 1, defaults
    return defaults.pop()


def test_the_dbt_defaults_are_the_settings() -> None:
    """dbt run by hand reads the profile's memory limit and the project's tolerance: the settings' defaults."""
    assert profile_default(variable("dbt_memory_limit")) == MartsSettings().dbt_memory_limit
    tolerance = yaml.safe_load((DBT / "dbt_project.yml").read_text())["vars"]["on_time_tolerance_minutes"]
    description = MartsSettings.model_fields["on_time_tolerance"].description or ""
    assert f"unset: the project's {tolerance}" in description


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


def notice_table(text: str) -> list[tuple[str, str, str, str]]:
    """The rows (kind, meaning, said by, the section's anchor) of real-services.md's table of the kinds of notices."""
    section = text.split("## What a run says it met", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([a-z_]+)` \| (.+?) \| ([a-z ]+) \| \[[^]]+\]\(#([a-z0-9-]+)\) \|$", section,
                      re.MULTILINE)
    return [(kind, meaning, said_by, f"docs/real-services.md#{anchor}") for kind, meaning, said_by, anchor in rows]


def declared_notices() -> list[tuple[str, str, str, str]]:
    return [(kind.value, kind.meaning, kind.said_by, kind.docs) for kind in NoticeKind]


def test_the_notices_table_is_the_kinds_and_the_check_names_each() -> None:
    """Every ``NoticeKind`` in real-services.md's table with its meaning, the runs that say it and its section as
    declared (the alerts' next step), and in the description of the check ``no_service_notices``."""
    assert notice_table(REAL_SERVICES.read_text()) == declared_notices()
    assert all(kind.meaning in notices_check("shipments").description for kind in NoticeKind)


def test_a_kind_missing_from_the_notices_table_is_found() -> None:
    text = REAL_SERVICES.read_text()
    row = next(line for line in text.splitlines() if line.startswith("| `memo_batch_off` |"))
    assert notice_table(text.replace(row + "\n", "")) != declared_notices()
    assert notice_table(text.replace(row, row.replace("every run while it holds", "the run that met it"))) != \
        declared_notices()


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
