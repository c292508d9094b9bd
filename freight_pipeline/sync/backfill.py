"""The first full sync split by shipment id range, for several writers at once (lake mode).

Each partition walks only the shipments whose ``ID`` lies in its range (two more AND-ed criteria on
every lookup of the change walk) under a cursor of its own, ``shipments@<range>``, so partitions
run in parallel and each resumes where it stopped. A partition whose walk completes stores its
cursor at the run's ceiling with ``complete`` and the list of every partition of the plan.

The incremental stream then takes over (:func:`takeover_cursor`): with no ``shipments`` cursor of
its own, it starts from the LOWEST ceiling the partitions reached, which is a valid cursor for their
union (each partition holds everything of its range up to its own ceiling, which is at or above the
lowest); it refuses to start while a partition of the plan has not completed, naming it, because
starting would skip what that partition has not read (unless completed partitions of a later plan, the
boundaries changed since, hold all of its ids).

Id ranges rather than clients: ids are what the lookup can bound with plain GE/LT criteria (no IN or
OR, whose semantics the spec leaves vague), every shipment has exactly one, and fixed-width ranges
of the service's increasing ids split the history evenly; the last range is open-ended so that a
shipment created during the backfill is never outside every partition.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from freight_pipeline.config import LakeConfig
from freight_pipeline.sync.changes import Criterion
from freight_pipeline.sync.cursor import CursorError, ShipmentKey

CURSOR_PREFIX = "shipments@"
_KEY = re.compile(r"^(\d+)-(\d*)$")


class BackfillIncomplete(RuntimeError):
    """The incremental sync cannot take over: a partition of the backfill has not completed."""


@dataclass(frozen=True, order=True)
class IdRange:
    """Shipment ids ``low <= id < high`` (``high`` None: no upper bound)."""

    low: int
    high: int | None = None

    def __post_init__(self) -> None:
        if self.low < 0 or (self.high is not None and self.high <= self.low):
            raise ValueError(f"an id range needs 0 <= low < high, got {self.low}-{self.high}")

    @property
    def key(self) -> str:
        """The partition key: ``<low>-<last id>``, or ``<low>-`` when open-ended."""
        return f"{self.low}-{'' if self.high is None else self.high - 1}"

    @classmethod
    def parse(cls, key: str) -> IdRange:
        match = _KEY.match(key.strip())
        if not match:
            raise ValueError(f"partition key {key!r} is not <first id>-<last id> or <first id>-")
        low, last = match.groups()
        return cls(int(low), int(last) + 1 if last else None)

    @property
    def cursor_stream(self) -> str:
        return CURSOR_PREFIX + self.key

    def criteria(self) -> list[Criterion]:
        found = [{"key": "ID", "match_mode": "GE", "value": str(self.low)}]
        if self.high is not None:
            found.append({"key": "ID", "match_mode": "LT", "value": str(self.high)})
        return found

    def __contains__(self, shipment_id: object) -> bool:
        if not isinstance(shipment_id, int):
            return False
        return self.low <= shipment_id and (self.high is None or shipment_id < self.high)


def id_ranges_between(boundaries: list[int]) -> tuple[IdRange, ...]:
    """The ranges that ``boundaries`` (increasing ids) cut the ids into: from 0, the last open-ended."""
    if any(b <= a for a, b in zip([0, *boundaries], boundaries, strict=False)):
        raise ValueError(f"boundaries must be increasing ids above 0, got {boundaries}")
    edges = [0, *boundaries]
    return tuple(IdRange(low, high) for low, high in zip(edges, [*boundaries, None], strict=True))


def backfill_plan(lake: LakeConfig) -> tuple[IdRange, ...]:
    """The partitions the setting ``backfill_id_boundaries`` cuts the ids into (checked by the settings)."""
    return id_ranges_between(list(lake.backfill_id_boundaries))


def completed_cursor(ceiling: ShipmentKey, plan: tuple[IdRange, ...]) -> str:
    """A completed partition's cursor: the run's ceiling, marked complete, with the whole plan."""
    data = json.loads(ceiling.to_json())
    data.update(complete=True, partitions=[r.key for r in plan])
    return json.dumps(data, sort_keys=True)


def takeover_cursor(cursors: dict[str, str]) -> ShipmentKey | None:
    """Where the incremental stream starts after a backfill, from the stored ``shipments@`` cursors
    (stream -> value): None when there are none (no backfill ran)."""
    partitions = {stream[len(CURSOR_PREFIX):]: value for stream, value in cursors.items()
                  if stream.startswith(CURSOR_PREFIX)}
    if not partitions:
        return None
    complete: dict[str, ShipmentKey] = {}
    planned: set[str] = set()
    for key, value in partitions.items():
        try:
            data = json.loads(value)
        except ValueError:
            data = None
        if not isinstance(data, dict):
            raise CursorError(f"stored cursor of backfill partition {key!r} is not valid: {value[:200]!r}")
        if data.get("complete"):
            complete[key] = ShipmentKey.from_json(value)
            planned.update(data.get("partitions") or ())
    ranges = [found for found in map(_range_of, complete) if found is not None]
    unfinished = sorted(key for key in (planned | set(partitions)) - set(complete)
                        if not _covered(_range_of(key), ranges))
    if unfinished:
        raise BackfillIncomplete(
            f"the backfill partitions {', '.join(unfinished)} have not completed; run them (job "
            "freight_backfill_job) before the incremental sync, which starts where all of them reached"
        )
    return min(complete.values())


def _range_of(key: str) -> IdRange | None:
    """The id range of a stored partition key (None: not one)."""
    try:
        return IdRange.parse(key)
    except ValueError:
        return None


def _covered(wanted: IdRange | None, complete: list[IdRange]) -> bool:
    """Whether the ``complete`` partitions' ranges together hold every id of ``wanted``: a partition of an earlier
    plan (the boundaries changed since) that never completed is no gap when the new plan's partitions completed."""
    if wanted is None:
        return False
    position: int | None = wanted.low
    while position is not None and (wanted.high is None or position < wanted.high):
        reaches = [r.high for r in complete if position in r]
        if not reaches:
            return False
        position = None if None in reaches else max(h for h in reaches if h is not None)
    return True
