"""The hand-written lists of marts (dbt_models/README.md, docs/marts.md) name exactly the marts dbt's
manifest declares, and the incremental ones where the docs say which rebuild incrementally."""

from __future__ import annotations

import re
from pathlib import Path

from freight_pipeline_tests.dbt.marts import incremental_marts, marts

REPO = Path(__file__).resolve().parents[2]


def _names(text: str) -> set[str]:
    return set(re.findall(r"`((?:fct|dim)_[a-z_]+)`", text))


def test_the_dbt_readme_lists_every_mart() -> None:
    row = next(line for line in (REPO / "dbt_models" / "README.md").read_text().splitlines()
               if line.startswith("| `models/marts/` |"))
    assert _names(row) == set(marts())


def test_the_marts_page_has_a_row_per_mart_and_names_the_incremental_ones() -> None:
    text = (REPO / "docs" / "marts.md").read_text()
    rows = {m.group(1) for m in re.finditer(r"^\| `((?:fct|dim)_[a-z_]+)` \|", text, re.MULTILINE)}
    assert rows == set(marts())
    incremental = re.search(r"\*\*Incremental marts\.\*\*(.*?) rebuild\s+only", text, re.DOTALL)
    assert incremental is not None
    assert _names(incremental.group(1)) == set(incremental_marts())
