"""Field-level data problems: a value normalization could not convert is reported, never raised.

Every flattener takes a :class:`Problems` sink. A value that cannot be converted (text in a number,
an impossible date or offset, an object where a list belongs, ...) becomes null in its column and
one :class:`Problem` here; the record and all its other values stay. The sync stores the problems
in ``freight_meta.data_problems``. :class:`StrictProblems` (the default when a caller passes no
sink) raises :class:`NormalizationError` on the first problem instead: for fixtures and tools that
must not accept bad data quietly.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from freight_pipeline.datetimes import ServiceZone
from freight_pipeline.normalize.errors import NormalizationError


@dataclass(frozen=True)
class Problem:
    """One value that could not be converted: where it was, what it was, why it was refused."""

    path: str
    """JSON path in the record, e.g. ``goods[0].subgoods[1].weight`` or ``[3].date_time.zone_offset``."""
    value: Any
    """The raw value as received."""
    reason: str


class Problems(list[Problem]):
    """Collects the problems of one record (a plain list of :class:`Problem`), and carries the run's
    ``zone``, in which the record's date-times without a UTC offset are read (default UTC): the one value
    of the run a flattener needs besides the record, handed to each with the sink it already takes."""

    def __init__(self, problems: Iterable[Problem] = (), zone: ServiceZone | None = None) -> None:
        super().__init__(problems)
        self.zone = zone if zone is not None else ServiceZone()

    def add(self, path: str, value: Any, reason: str) -> None:
        self.append(Problem(path, value, reason))


class StrictProblems(Problems):
    """A sink that refuses the record on its first problem (``NormalizationError`` naming the path)."""

    def add(self, path: str, value: Any, reason: str) -> None:
        raise NormalizationError(f"{path}: {reason}" if path else reason)


def sink(problems: Problems | None) -> Problems:
    """``problems``, or a strict sink when None."""
    return StrictProblems() if problems is None else problems
