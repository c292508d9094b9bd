"""The queries of the README's "Querying the warehouse" section run against published marts.

The section's code is extracted from README.md, not copied: the ``.venv/bin/python -c`` one-liner,
the Python block, and every SQL snippet in them and in the prose (``con.sql(\"\"\"...\"\"\")``,
``.sql('...')``, inline ``select ... read_parquet('data/parquet/...')``). They run in a directory
holding ``data/`` as the pipeline publishes it (``publish()`` of a warehouse built by dbt), so the
README's relative paths resolve exactly as written.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest

from freight_pipeline.config import REPO_ROOT

SECTION = "Querying the warehouse"


def _section(title: str) -> str:
    text = (REPO_ROOT / "README.md").read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def _code_blocks(section: str) -> list[tuple[str, str]]:
    return re.findall(r"^```(\w*)\n(.*?)^```", section, flags=re.DOTALL | re.MULTILINE)


def _prose(section: str) -> str:
    return re.sub(r"^```.*?^```", "", section, flags=re.DOTALL | re.MULTILINE)


def readme_sql() -> list[str]:
    """Every SQL statement of the section: in .sql("...") calls of the code and inline in the prose."""
    section = _section(SECTION)
    code = "\n".join(body for _, body in _code_blocks(section))
    statements = re.findall(r'\.sql\(\s*"""(.*?)"""', code, flags=re.DOTALL)
    statements += re.findall(r"\.sql\('([^']*)'\)", code)
    statements += re.findall(r'\.sql\("([^"]*)"\)', code)
    statements += [body for lang, body in _code_blocks(section) if lang == "sql"]
    statements += [s for s in re.findall(r"`([^`]*)`", _prose(section)) if s.lower().startswith("select ")]
    return [" ".join(s.split()) for s in statements]


def test_the_readme_section_has_the_expected_snippets() -> None:
    """Guards the extraction: if the README changes shape, this fails instead of testing nothing."""
    statements = readme_sql()
    assert len(statements) >= 3, statements
    assert any("fct_on_time_performance" in s for s in statements)
    assert any("read_parquet(" in s for s in statements)
    assert any("fct_shipment_documents" in s for s in statements)
    languages = [lang for lang, _ in _code_blocks(_section(SECTION))]
    assert "python" in languages and "sh" in languages


@pytest.mark.parametrize("sql", readme_sql(), ids=lambda sql: " ".join(sql.split()[:8]))
def test_readme_sql_runs_on_the_published_warehouse(sql: str, published: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(published)  # the README's paths are relative: data/warehouse.duckdb, data/parquet/...
    with duckdb.connect("data/warehouse.duckdb", read_only=True) as con:
        rows = con.sql(sql).fetchall()
    assert rows, sql


def test_readme_shell_commands_run(published: Path) -> None:
    """Each line of the sh block: the ``.venv/bin/python -c`` one-liner runs with this interpreter;
    the DuckDB CLI line runs when the CLI is installed."""
    (block,) = [body for lang, body in _code_blocks(_section(SECTION)) if lang == "sh"]
    ran = 0
    for line in block.splitlines():
        command = shlex.split(line, comments=True)
        if not command:
            continue
        if command[0] == ".venv/bin/python":
            result = subprocess.run(
                [sys.executable, *command[1:]], cwd=published, capture_output=True, text=True, timeout=60, check=False
            )
            assert result.returncode == 0, result.stderr
            assert "mode_of_transport" in result.stdout and "SEA" in result.stdout, result.stdout
            ran += 1
        elif command[0] == "duckdb":
            if shutil.which("duckdb"):
                result = subprocess.run(
                    [*command, "-c", "select count(*) from analytics.fct_shipments"],
                    cwd=published,
                    capture_output=True,
                    text=True,
                    timeout=60,
                    check=False,
                )
                assert result.returncode == 0, result.stderr
        else:
            pytest.fail(f"README command not covered by this test: {line}")
    assert ran == 1


def test_readme_python_block_runs(published: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (block,) = [body for lang, body in _code_blocks(_section(SECTION)) if lang == "python"]
    monkeypatch.chdir(published)
    namespace: dict[str, Any] = {}
    exec(compile(block, "README.md", "exec"), namespace)  # the README's own example, as a reader runs it
    frames = [value for value in namespace.values() if isinstance(value, pd.DataFrame)]
    assert len(frames) == 1 and len(frames[0]) > 0
    namespace["con"].close()


def test_readme_parquet_layout(published: Path) -> None:
    """``data/parquet/<schema>/<table>/data.parquet`` exists for the marts, as the section says."""
    section = _section(SECTION)
    assert "`data/parquet/<schema>/<table>/data.parquet`" in section
    for table in ("fct_shipments", "fct_on_time_performance"):
        assert (published / "data" / "parquet" / "analytics" / table / "data.parquet").is_file()
