"""The shape of each kind of record: the fields its table specs declare, the fields a run received, and
what changed (schema drift), as plain values.

A :class:`Shape` is declared beside the normalizer that reads the records (``flatten.DOCUMENT_SHAPE``,
``events.EVENT_SHAPE``, ...), from the same :class:`Field` declarations, so a field is declared once.
A run counts the top-level keys of every record it reads in a :class:`FieldTally` (one dict lookup per
record: records of one shape share one entry), and :func:`compare` turns the tally and what earlier
runs received (:class:`KnownField`) into the run's :class:`FieldChange` list and the fields' new state:

* **new**: a field no spec declares (its value is kept in the raw document only);
* **vanished**: a declared field that earlier runs received, absent from every record of this run,
  when that absence is no accident of a small run: the chance that the ``n`` records read since it last
  came (this run's, and those of the runs just before without it) all lack a field that the runs that
  received it found in a share ``p`` of their records, ``(1 - p) ** n``, is below :data:`CHANCE`. A field
  sent as null is present (a null is not drift); a field whose alias came instead (a rename the spec
  already names) has not vanished.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from freight_pipeline.normalize.plain_fields import Field, alias_groups, source_keys

CHANCE = 0.01
"""Below this chance of being an accident, a declared field missing from every record of a run has vanished."""

NEW = "new"
VANISHED = "vanished"
RECEIVED = "received"


@dataclass(frozen=True)
class Shape:
    """The fields a kind of record declares: ``declared`` (top-level keys, aliases included), and
    ``groups``, the alternative names of one column (any of them present: the column is fed)."""

    label: str
    """What the records are, in a sentence: ``shipment documents``, ``shipment events``."""
    declared: frozenset[str]
    groups: tuple[tuple[str, ...], ...] = ()

    @classmethod
    def of(cls, label: str, fields: Iterable[Field], *other_keys: str) -> Shape:
        """The shape of records whose plain fields are ``fields`` and whose other keys (objects and
        arrays read by groups, keys the spec names that no column takes) are ``other_keys``."""
        fields = tuple(fields)
        return cls(label, source_keys(fields) | frozenset(other_keys), alias_groups(fields))

    def names_of(self, key: str) -> tuple[str, ...]:
        """Every name the column of ``key`` may come under (``key`` alone when it has no alias)."""
        return next((group for group in self.groups if key in group), (key,))


@dataclass
class FieldTally:
    """The top-level keys of the records one run read of one kind, counted per distinct key set."""

    records: int = 0
    shapes: dict[tuple[str, ...], list[Any]] = field(default_factory=dict)
    """Keys in the order sent -> [records with exactly these keys, the key of the first of them]."""

    def see(self, record: Any, record_key: Any) -> None:
        """Count one record (anything but an object counts as a record without fields)."""
        self.records += 1
        keys = tuple(record) if isinstance(record, dict) else ()
        entry = self.shapes.get(keys)
        if entry is None:
            self.shapes[keys] = [1, record_key]
        else:
            entry[0] += 1

    def see_all(self, records: Any, record_key: Any) -> None:
        """Count each item of an array answer (one shipment's events, legs or memo lines)."""
        if isinstance(records, list):
            for record in records:
                self.see(record, record_key)

    def add(self, other: FieldTally) -> None:
        self.records += other.records
        for keys, (count, example) in other.shapes.items():
            entry = self.shapes.get(keys)
            if entry is None:
                self.shapes[keys] = [count, example]
            else:
                entry[0] += count

    def fields(self) -> dict[str, tuple[int, str]]:
        """Each key received -> (records that had it, the key of one of them)."""
        found: dict[str, tuple[int, str]] = {}
        for keys, (count, example) in self.shapes.items():
            for key in keys:
                had = found.get(key)
                found[key] = (count, str(example)) if had is None else (had[0] + count, had[1])
        return found

    def example_without(self, names: tuple[str, ...]) -> str | None:
        """The key of a record that has none of ``names``."""
        return next((str(example) for keys, (_, example) in self.shapes.items()
                     if not any(name in keys for name in names)), None)


@dataclass(frozen=True)
class KnownField:
    """What the runs so far know of one field of one source (a row of ``freight_meta.source_fields``)."""

    source: str
    field: str
    declared: bool
    state: str
    """``received``, ``new`` (no spec declares it) or ``vanished`` (declared, received before, absent now)."""
    changed_run_id: str | None
    changed_at: dt.datetime | None
    first_run_id: str
    first_seen_at: dt.datetime
    last_run_id: str | None
    last_seen_at: dt.datetime | None
    records_read: int
    """Records of the source in the latest run that read it."""
    records_with: int
    """Of those, the records that had the field."""
    example_record_key: str | None
    """A record of that run with the field (for ``vanished``: one without it)."""
    records_read_total: int
    """Records of the source read by the runs that received the field."""
    records_with_total: int
    """Of those, the records that had it."""
    records_since_seen: int = 0
    """Records of the source read since a run last received it (this run's included)."""

    def share(self) -> float:
        """The share of the records that had the field, in the runs that received it."""
        return self.records_with_total / self.records_read_total if self.records_read_total else 1.0


@dataclass(frozen=True)
class FieldChange:
    """A field that changed shape in one run: ``new`` or ``vanished``."""

    source: str
    label: str
    field: str
    change: str
    records_read: int
    records_with: int
    first_run_id: str
    example_record_key: str | None

    def phrase(self) -> str:
        """``house_reference absent from all 40 read (present before)``, ``house_bill_number new (in 40 of 40)``."""
        if self.change == VANISHED:
            return f"{self.field} absent from all {self.records_read:,} read (present before)"
        return f"{self.field} new (in {self.records_with:,} of {self.records_read:,})"


def compare(
    source: str, shape: Shape, tally: FieldTally, known: Mapping[str, KnownField], run_id: str, at: dt.datetime,
) -> tuple[list[FieldChange], list[KnownField]]:
    """This run's changes of shape in ``source``, and the state of every field it knows after the run
    (unchanged when the run read no record of the source)."""
    if tally.records == 0:
        return [], list(known.values())
    seen = tally.fields()
    changes: list[FieldChange] = []
    states: list[KnownField] = []
    for name in sorted(set(seen) | set(known)):
        before = known.get(name)
        declared = name in shape.declared
        count, example = seen.get(name, (0, None))
        if count:
            state = RECEIVED if declared else NEW
        elif before is None:
            continue
        elif not declared:
            state = RECEIVED  # an undeclared field that stopped coming: nothing is kept in raw only any more
        elif any(other in seen for other in shape.names_of(name)):
            state = RECEIVED  # its column's other name came instead
        elif (1.0 - before.share()) ** (before.records_since_seen + tally.records) < CHANCE:
            state = VANISHED
            example = tally.example_without(shape.names_of(name))
        else:  # too few records to tell: a vanished field stays vanished
            state = VANISHED if before.state == VANISHED else RECEIVED
        changed = before is None or before.state != state
        first_run, first_at = (run_id, at) if before is None else (before.first_run_id, before.first_seen_at)
        after = KnownField(
            source, name, declared, state,
            run_id if changed else before.changed_run_id if before else None,
            at if changed else before.changed_at if before else None,
            first_run, first_at,
            run_id if count else before.last_run_id if before else None,
            at if count else before.last_seen_at if before else None,
            tally.records, count, example,
            (before.records_read_total if before else 0) + (tally.records if count else 0),
            (before.records_with_total if before else 0) + count,
            0 if count else (before.records_since_seen if before else 0) + tally.records,
        )
        states.append(after)
        if changed and state in (NEW, VANISHED):
            changes.append(FieldChange(source, shape.label, name, state, tally.records, count, first_run, example))
    return changes, states

