"""The one error normalization raises for a record it cannot turn into rows."""

from __future__ import annotations


class NormalizationError(ValueError):
    """A record that cannot be normalized; the message starts with the field path.

    Example: ``goods[0].subgoods[2].weight: 'abc' is not a number``. The sync stores the raw record
    with this message in ``freight_meta.rejected_records`` instead of writing wrong rows.
    """


class Invalid(Exception):
    """A value a converter cannot read; carries the problem only, the caller adds the path."""


def show(value: object, limit: int = 60) -> str:
    """A short repr of a value for error messages."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def join_path(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key
