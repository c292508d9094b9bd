"""Plain-text helpers shared across the layers (the commands' and the dashboard's messages)."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def one_line(text: str, limit: int = 400) -> str:
    """The first non-empty line of ``text``, shortened to ``limit`` characters."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    line = lines[0] if lines else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."


def error_in_one_line(error: BaseException, limit: int | None = None) -> str:
    """``error``'s message with every run of blanks and line ends as one space, at most ``limit`` characters (None:
    whole); its type's name when it says nothing."""
    return " ".join(str(error).split())[:limit] or type(error).__name__


def int_between(lowest: int, highest: int | None = None, why: str = "") -> Callable[[str], int]:
    """An argparse ``type``: an integer from ``lowest`` to ``highest`` (None: no bound above); ``why`` says what the
    bounds are for, after the range."""

    def number(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
        if value < lowest or (highest is not None and value > highest):
            bounds = f"at least {lowest}" if highest is None else f"between {lowest} and {highest}"
            raise argparse.ArgumentTypeError(f"must be {bounds}{f' ({why})' if why else ''}, got {value}")
        return value

    return number


def port_parser(lowest: int) -> Callable[[str], int]:
    """An argparse ``type`` for a TCP port: an integer from ``lowest`` (0: the system picks a free one) to 65535."""
    return int_between(lowest, 65535)
