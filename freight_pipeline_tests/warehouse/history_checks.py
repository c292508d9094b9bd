"""Checks of ``freight_history`` shared by the warehouse and the sync tests."""

from __future__ import annotations

import duckdb

from freight_pipeline.warehouse.history import SUBJECTS


def broken_validity(con: duckdb.DuckDBPyConnection) -> dict[str, list[tuple[object, ...]]]:
    """Per history table, the versions whose validity is not contiguous: a ``valid_to`` other than the
    next version's ``valid_from`` (NULL for the last), an empty or inverted interval, or two versions of
    one subject at one instant. Empty lists: every subject's versions follow each other without gap or
    overlap."""
    broken = {}
    for subject in SUBJECTS:
        key = ", ".join(subject.key)
        broken[subject.spec.name] = con.execute(f"""
            SELECT {key}, valid_from, valid_to, lead(valid_from) OVER w AS next_from, count(*) OVER k AS same
            FROM {subject.spec.qualified_name}
            WINDOW w AS (PARTITION BY {key} ORDER BY valid_from), k AS (PARTITION BY {key}, valid_from)
            QUALIFY valid_to IS DISTINCT FROM next_from OR same > 1 OR valid_to <= valid_from""").fetchall()
    return broken


def assert_contiguous(con: duckdb.DuckDBPyConnection) -> None:
    broken = broken_validity(con)
    assert broken == {name: [] for name in broken}, broken
