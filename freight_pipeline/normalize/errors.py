"""The one error normalization raises for a record it cannot turn into rows."""

from __future__ import annotations


class NormalizationError(ValueError):
    """A record that cannot be normalized at all (not an object, no usable id, wrong shape); the
    message starts with the field path, e.g. ``id: 'abc' is not an integer id``.

    Bad values inside a usable record are not errors: they are nulled and reported (``problems``).
    Only a strict sink (``problems.StrictProblems``) raises this for them.
    """


class RecordShapeError(NormalizationError):
    """An endpoint's answer for one record has the wrong shape (an object around the array, a single
    object for a list): the record is quarantined whole, never guessed at."""


class Invalid(Exception):
    """A value a converter cannot read; carries the problem only, the caller adds the path."""


def show(value: object, limit: int = 60) -> str:
    """A short repr of a value for error messages (never raises, whatever the value's depth)."""
    try:
        text = repr(value)
    except RecursionError:
        text = f"<{type(value).__name__} nested too deeply to show>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def join_path(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key
