"""Plain-text helpers shared across the layers (the commands' and the dashboard's messages)."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def one_line(text: str, limit: int = 400) -> str:
    """The first non-empty line of ``text``, shortened to ``limit`` characters."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    line = lines[0] if lines else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."


def port_parser(lowest: int) -> Callable[[str], int]:
    """An argparse ``type`` for a TCP port: an integer from ``lowest`` (0: the system picks a free one) to 65535."""

    def port(text: str) -> int:
        try:
            number = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
        if not lowest <= number <= 65535:
            raise argparse.ArgumentTypeError(f"must be between {lowest} and 65535, got {number}")
        return number

    return port
