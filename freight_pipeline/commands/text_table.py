"""Plain aligned text tables: numbers right-aligned, everything else left-aligned."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], indent: str = "  ") -> str:
    """``headers`` and ``rows`` as aligned columns separated by two spaces."""
    texts = [[cell(v) for v in row] for row in rows]
    numeric = [
        bool(rows) and all(isinstance(row[i], int | float) or row[i] is None for row in rows)
        for i in range(len(headers))
    ]
    widths = [max([len(h), *(len(t[i]) for t in texts)]) for i, h in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        parts = [v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric, strict=True)]
        return (indent + "  ".join(parts)).rstrip()

    return "\n".join([line(list(headers)), *(line(t) for t in texts)])
