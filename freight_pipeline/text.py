"""Plain-text helpers shared across the layers (the commands' and the dashboard's messages)."""

from __future__ import annotations


def one_line(text: str, limit: int = 400) -> str:
    """The first non-empty line of ``text``, shortened to ``limit`` characters."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    line = lines[0] if lines else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."
