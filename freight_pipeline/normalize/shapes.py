"""The shape of each kind of record, at every level: the keys its normalizer reads (:mod:`.nodes`), the
keys and JSON kinds a run received, and what changed (schema drift), as plain values.

A :class:`Shape` is a source's declared :class:`~freight_pipeline.normalize.nodes.Node`, compiled into one
:class:`WatchedPath` per kind of object in it: ``""`` (the record itself), ``goods[]`` (every goods line,
subgoods at any depth included: the same kind), ``goods[].hs_codes[]``, ``employees``,
``main_carriage.carriage_legs[].origin.location``. A field is named by its path and key:
``house_reference``, ``goods[].weight``, ``addresses[].references[].value``.

A run counts, in a :class:`FieldTally`, the keys of every object of every watched path and the JSON kind of
each value (one dict lookup per object: objects of one shape share one entry), and probes a value of a kind
its key is not declared to hold with what reads it (so a number sent as text is known to be read, or not).
:func:`compare` turns the tally and what earlier runs received (:class:`KnownField`) into the run's
:class:`FieldChange` list and the fields' new state:

* **new**: a key no declaration names (its value is kept in the raw document only);
* **vanished**: a declared key absent from every object of its path in this run, when that absence is no
  accident of a small run: after ``N`` records (with objects of its path) of which ``W`` held it, the chance
  that the ``n`` records read since it last came all lack it, ``((N - W + 1) / (N + 2)) ** n`` (Laplace's
  estimate of how often it is absent; ``1 / (N + 2)`` for a key that came in every record), is below
  :data:`CHANCE` for a key that came in every record so far, below :data:`CHANCE_IF_OPTIONAL` for one absent
  from some record before (its presence varies by design: a key in 61 % of the records is named after 15
  records without it, one in 5 % after some 270). Records, not objects, are counted: the objects of one
  record are alike (one form of DateTime in a document). A key sent as null is present (a null is not
  drift); a key whose alias came instead (a rename the declaration already names) has not vanished; an
  empty array says nothing of its elements. When a key no declaration names came in every object of the path
  in the run (a rename, most likely), a key that came in every record before and is absent from all now has
  vanished, however few the records (the run's 4 containers of one shipment with ``iso_code`` and no
  ``container_iso_code``);
* **retyped**: a declared key received in a JSON kind earlier runs never sent it in (a number as text, an
  object as an array), with how many of those values could be read. Values that were all read are taken
  into the key's kinds (the change is reported once, and resolved by the next run); values that could not
  be read (null in their column, each a data problem) keep it open until they can. The elements of an
  array of objects below the top (``goods[].hs_codes[]``) sent as anything but an object (or null) are never
  read (a data problem each, no row): the path is the field, retyped (``goods[].hs_codes[] object -> text in
  473 of 936, 473 not read``), open until a run reads objects only there (:func:`compare_elements`).
"""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from freight_pipeline.normalize.converters import CONVERTERS, JSON
from freight_pipeline.normalize.nodes import ARRAY, KIND_OF_TYPE, KINDS_OF_COLUMN, OBJECT, SAME, Key, Node, ValueReader
from freight_pipeline.normalize.plain_fields import Field

CHANCE = 0.01
"""Below this chance of being an accident, a declared key that came in every record so far and is missing from
every object of a run has vanished."""
CHANCE_IF_OPTIONAL = 1e-6
"""The same for a declared key that was absent from some record before: its presence varies by design (one of
two forms of an object, one mode of transport) and goes with that of other keys, and a run's records are alike
(one client's, one day's), so the odds of independent records overstate the evidence (at :data:`CHANCE`, runs
of a few records named the ``until`` of one DateTime form, absent by design from the other form)."""

MAX_SIGNATURES_KEPT = 4096
"""Signatures whose probes a path keeps (a hostile service could send a new one with every object)."""

NEW = "new"
VANISHED = "vanished"
RETYPED = "retyped"
RECEIVED = "received"
OPEN_STATES = (NEW, VANISHED, RETYPED)


def field_name(path: str, key: str) -> str:
    """``house_reference`` at the top, ``goods[].weight`` below."""
    return f"{path}.{key}" if path else key


Signature = tuple[tuple[str, ...], tuple[type, ...]]
"""An object's keys in the order sent, and the Python type of each value."""
Probe = tuple[int, str, ValueReader | None]
"""(position in the signature, key, what reads it) of a value of a kind its key is not declared to hold."""
Descent = tuple[int, str, bool]
"""(a watched child's place in ``WatchedPath.children``, the key holding it, whether it is an array)."""
_NULL = type(None)


class WatchedPath:
    """One kind of object at one place in a source's records, as the tally walks it."""

    __slots__ = ("_probes", "children", "declared", "fates", "groups", "kinds", "path", "readers")

    def __init__(self, path: str, node: Node) -> None:
        self.path = path
        self.declared = node.names()
        self.groups = node.alias_groups()
        self.kinds: dict[str, frozenset[str]] = {}
        self.readers: dict[str, ValueReader | None] = {}
        self.fates = {name: key.unread for key in node.keys if key.unread for name in key.keys}
        """Name -> what becomes of a value of it that cannot be read, when not a column's fate (``Key.unread``)."""
        for item in node.fields:  # a JSON column keeps any value whole: nothing to probe
            self._declare(item.keys, KINDS_OF_COLUMN[item.type], CONVERTERS[item.type] if item.type != JSON else None)
        for key in node.keys:
            self._declare(key.keys, key.declared_kinds(), key.reads)
        self.children: tuple[tuple[tuple[str, ...], bool, WatchedPath], ...] = ()
        """Each watched child: its key's names in order (``Key.keys``), whether it is an array, its path."""
        self._probes: dict[Signature, tuple[Probe, ...]] = {}

    def _declare(self, names: Iterable[str], kinds: frozenset[str], reads: ValueReader | None) -> None:
        for name in names:
            self.kinds[name], self.readers[name] = kinds, reads

    def field(self, key: str) -> str:
        return field_name(self.path, key)

    def names_of(self, key: str) -> tuple[str, ...]:
        """Every name the column of ``key`` may come under (``key`` alone when it has no alias)."""
        return next((group for group in self.groups if key in group), (key,))

    def probes(self, signature: Signature) -> tuple[Probe, ...]:
        """The values of an object of this signature to probe: declared keys holding a kind not declared
        (kept for the signatures seen: every batch's tally meets the same few again)."""
        probes = self._probes.get(signature)
        if probes is None:
            probes = self._find_probes(signature)
            if len(self._probes) < MAX_SIGNATURES_KEPT:
                self._probes[signature] = probes
        return probes

    def descent(self, signature: Signature) -> tuple[Descent, ...]:
        """Where an object of this signature leads the walk: each watched child it holds a value for (under
        the first of the child's names whose value is not null), when that value is of the child's kind (an
        array for an array, an object else); a value of another kind leads nowhere."""
        keys, types = signature
        held = {name: kind for name, kind in zip(keys, types, strict=True) if kind is not _NULL}
        found = []
        for index, (names, array, _) in enumerate(self.children):
            name = next((name for name in names if name in held), None)
            if name is not None and KIND_OF_TYPE[held[name]] == (ARRAY if array else OBJECT):
                found.append((index, name, array))
        return tuple(found)

    def _find_probes(self, signature: Signature) -> tuple[Probe, ...]:
        found = []
        for index, (name, kind) in enumerate(zip(*signature, strict=True)):
            declared = self.kinds.get(name)
            value_kind = KIND_OF_TYPE[kind]
            if declared is not None and value_kind is not None and value_kind not in declared and (
                    declared or self.readers[name] is not None):  # a JSON column's (no kind declared): read whole
                found.append((index, name, self.readers[name]))
        return tuple(found)

    def __repr__(self) -> str:
        return f"WatchedPath({self.path!r})"


class Shape:
    """The keys a source's records declare at every level (``root``), compiled into :attr:`paths`. The first shape
    of each label is pickled as that label (a tally sent back by a worker process names its shape, the worker
    has the same: ``sync.workers``)."""

    def __init__(self, label: str, root: Node) -> None:
        self.label = label
        """What the records are, in a sentence: ``shipment documents``, ``shipment events``."""
        self.root = root
        self.paths: dict[str, WatchedPath] = {}
        self.top = self._compile(root, "")
        _SHAPES.setdefault(label, self)

    def __reduce__(self) -> str | tuple[Any, ...]:
        if _SHAPES.get(self.label) is self:
            return (shape_labelled, (self.label,))
        return super().__reduce__()

    @classmethod
    def of(cls, label: str, fields: Iterable[Field] = (), *keys: Key, known: Iterable[str] = ()) -> Shape:
        """The shape of records whose plain fields are ``fields`` and whose other keys are ``keys``."""
        return cls(label, Node.of(fields, *keys, known=known))

    def _compile(self, node: Node, path: str) -> WatchedPath:
        watched = self.paths[path] = WatchedPath(path, node)
        children = []
        for key in node.keys:
            if key.node is None:
                continue
            if key.node == SAME:
                children.append((key.keys, key.array, watched))
                continue
            assert isinstance(key.node, Node)
            child = field_name(path, key.name) + ("[]" if key.array else "")
            children.append((key.keys, key.array, self._compile(key.node, child)))
        watched.children = tuple(children)
        return watched

    @property
    def declared(self) -> frozenset[str]:
        """The top-level keys the records declare (aliases and known keys included)."""
        return self.top.declared

    def names_of(self, key: str) -> tuple[str, ...]:
        return self.top.names_of(key)


_SHAPES: dict[str, Shape] = {}
"""The first shape made of each label."""


def shape_labelled(label: str) -> Shape:
    """The first shape made of ``label`` (what a pickled shape names)."""
    return _SHAPES[label]


@dataclass
class FieldCount:
    """One key at one path in one run: the objects that had it, one of them, the kinds of its values."""

    records: int = 0
    example: str | None = None
    kinds: dict[str, int] = field(default_factory=dict)
    """JSON kind -> values of that kind (a null counts as none)."""
    unread: dict[str, int] = field(default_factory=dict)
    """JSON kind -> values of that kind, not declared for the key, that what reads it could not read."""


_NOT_AN_OBJECT: Signature = ((), ())


class _Seen:
    """The objects of one signature at one path: how many, the record key of the first, its probes and the
    values per probe that could not be read, and where such an object leads the walk."""

    __slots__ = ("count", "descent", "example", "probes", "unread")

    def __init__(self, example: Any, probes: tuple[Probe, ...], unread: list[int] | None,
                 descent: tuple[Descent, ...], count: int = 0) -> None:
        self.count, self.example, self.probes, self.unread, self.descent = count, example, probes, unread, descent


class _Elements:
    """The elements of one array of objects in one run that were not objects (nor null): per JSON kind, and
    the record key of the first record that had one."""

    __slots__ = ("example", "kinds")

    def __init__(self, example: Any) -> None:
        self.example = example
        self.kinds: dict[str, int] = {}


class FieldTally:
    """The keys of the objects one run read of one source, at every watched path, counted per signature."""

    def __init__(self, shape: Shape) -> None:
        self.shape = shape
        self.records = 0
        """Records of the source (the objects at its top)."""
        self.by_path: dict[str, dict[Signature, _Seen]] = {}
        """Path -> signature -> the objects with it."""
        self.holders: dict[str, dict[tuple[str, ...], int]] = {}
        """Path -> the keys its objects in one record had between them -> records (the vanished rule's unit)."""
        self.elements: dict[str, _Elements] = {}
        """Path of an array of objects below the top -> its elements that were not objects (nor null)."""

    def see(self, record: Any, record_key: Any) -> None:
        """Count one record and every watched object in it (anything but an object counts as a record
        without fields)."""
        self.see_all([record], record_key)

    def see_all(self, records: Any, record_key: Any) -> None:
        """Count each item of an array answer (one shipment's events, legs or memo lines)."""
        if not isinstance(records, list):
            return
        self.records += len(records)
        objects = [record for record in records if isinstance(record, dict)]
        if len(objects) < len(records):
            table = self.by_path.setdefault(self.shape.top.path, {})
            entry = table.get(_NOT_AN_OBJECT)
            if entry is None:
                entry = table[_NOT_AN_OBJECT] = _Seen(record_key, (), None, ())  # an empty object's too: no keys
            entry.count += len(records) - len(objects)
            if not objects:
                holders = self.holders.setdefault(self.shape.top.path, {})
                holders[()] = holders.get((), 0) + 1
        if objects:
            self._count(self.shape.top, objects, record_key)

    def _count(self, watched: WatchedPath, objects: list[dict[str, Any]], example: Any) -> None:
        """Count ``objects`` (all at ``watched``, of one record), then the objects under them, a path at a time
        (each object's signature tells which of its values lead to watched objects)."""
        table = self.by_path.get(watched.path)
        if table is None:
            table = self.by_path[watched.path] = {}
        held: set[tuple[str, ...]] = set()
        below: dict[int, list[Any]] = {}
        for obj in objects:
            keys = tuple(obj)
            signature = (keys, tuple(map(type, obj.values())))
            entry = table.get(signature)
            if entry is None:
                probes = watched.probes(signature)
                entry = table[signature] = _Seen(example, probes, [0] * len(probes), watched.descent(signature))
            entry.count += 1
            if entry.probes:
                _probe(obj, entry.probes, entry.unread)
            held.add(keys)
            for index, key, array in entry.descent:
                found = below.get(index)
                if found is None:
                    found = below[index] = []
                if array:
                    items = obj[key]
                    objs = [item for item in items if isinstance(item, dict)]
                    found.extend(objs)
                    if len(objs) < len(items):  # rare: elements no object (null ones are none)
                        self._not_objects(watched.children[index][2].path, items, example)
                else:
                    found.append(obj[key])
        holders = self.holders.get(watched.path)
        if holders is None:
            holders = self.holders[watched.path] = {}
        keys = held.pop() if len(held) == 1 else tuple(sorted({key for keys in held for key in keys}))
        holders[keys] = holders.get(keys, 0) + 1
        for index in sorted(below):  # in the order the children are declared
            if below[index]:
                self._count(watched.children[index][2], below[index], example)

    def _not_objects(self, path: str, items: list[Any], example: Any) -> None:
        """Count the elements of an array of objects at ``path`` that are neither an object nor null, by kind."""
        elements = self.elements.get(path)
        for item in items:
            kind = KIND_OF_TYPE[type(item)]
            if kind is None or kind == OBJECT:
                continue
            if elements is None:
                elements = self.elements[path] = _Elements(example)
            elements.kinds[kind] = elements.kinds.get(kind, 0) + 1

    def add(self, other: FieldTally) -> None:
        self.records += other.records
        for path, theirs in other.elements.items():
            elements = self.elements.get(path)
            if elements is None:
                elements = self.elements[path] = _Elements(theirs.example)
            for kind, count in theirs.kinds.items():
                elements.kinds[kind] = elements.kinds.get(kind, 0) + count
        for path, holders in other.holders.items():
            mine_holders = self.holders.setdefault(path, {})
            for keys, count in holders.items():
                mine_holders[keys] = mine_holders.get(keys, 0) + count
        for path, table in other.by_path.items():
            mine = self.by_path.setdefault(path, {})
            for signature, seen in table.items():
                entry = mine.get(signature)
                if entry is None:
                    unread = list(seen.unread) if seen.unread is not None else None
                    mine[signature] = _Seen(seen.example, seen.probes, unread, seen.descent, seen.count)
                else:
                    entry.count += seen.count
                    if seen.unread:
                        entry.unread = [a + b for a, b in zip(entry.unread or (), seen.unread, strict=True)]

    def records_at(self, watched: WatchedPath) -> int:
        """Objects read at ``watched``."""
        return sum(entry.count for entry in self.by_path.get(watched.path, {}).values())

    def holding_at(self, watched: WatchedPath) -> tuple[int, dict[str, int]]:
        """Records with objects at ``watched``, and per key, the records with an object that had it."""
        records, per_key = 0, {}
        for keys, count in self.holders.get(watched.path, {}).items():
            records += count
            for key in keys:
                per_key[key] = per_key.get(key, 0) + count
        return records, per_key

    def fields(self, watched: WatchedPath | None = None) -> dict[str, FieldCount]:
        """Each key received at ``watched`` (default: the top) with its counts."""
        found: dict[str, FieldCount] = {}
        table = self.by_path.get((watched or self.shape.top).path, {})
        for (keys, types), seen in table.items():
            for key, kind in zip(keys, types, strict=True):
                counted = found.get(key)
                if counted is None:
                    counted = found[key] = FieldCount(example=str(seen.example))
                counted.records += seen.count
                value_kind = KIND_OF_TYPE[kind]
                if value_kind is not None:
                    counted.kinds[value_kind] = counted.kinds.get(value_kind, 0) + seen.count
            for (index, key, _), failed in zip(seen.probes, seen.unread or (), strict=False):
                if failed:
                    kind = KIND_OF_TYPE[types[index]]
                    found[key].unread[kind] = found[key].unread.get(kind, 0) + failed
        return found

    def example_without(self, names: tuple[str, ...], watched: WatchedPath | None = None) -> str | None:
        """The key of a record with an object at ``watched`` that has none of ``names``."""
        table = self.by_path.get((watched or self.shape.top).path, {})
        return next((str(entry.example) for (keys, _), entry in table.items()
                     if not any(name in keys for name in names)), None)


def _probe(obj: dict[str, Any], probes: tuple[Probe, ...], unread: list[int]) -> None:
    values = list(obj.values())
    for position, (index, _, reads) in enumerate(probes):
        if reads is None:
            unread[position] += 1
            continue
        try:
            reads(values[index])
        except Exception:  # whatever the reader raises for it: the value cannot be read
            unread[position] += 1


@dataclass(frozen=True)
class KnownField:
    """What the runs so far know of one field of one source (a row of ``freight_meta.source_fields``)."""

    source: str
    field: str
    """Its path and key: ``house_reference``, ``goods[].weight``."""
    declared: bool
    state: str
    """``received``, ``new`` (no declaration names it), ``vanished`` (declared, received before, absent now)
    or ``retyped`` (declared, received in a kind earlier runs never sent it in)."""
    changed_run_id: str | None
    changed_at: dt.datetime | None
    first_run_id: str
    first_seen_at: dt.datetime
    last_run_id: str | None
    last_seen_at: dt.datetime | None
    records_read: int
    """Objects of its path in the latest run that read any."""
    records_with: int
    """Of those, the objects that had the field."""
    example_record_key: str | None
    """A record of that run with the field (for ``vanished``: one without it)."""
    records_read_total: int
    """Records with objects of its path read by the runs that received the field."""
    records_with_total: int
    """Of those, the records with an object that had it."""
    records_since_seen: int = 0
    """Records with objects of its path read since a run last received it (this run's included)."""
    path: str = ""
    """The path of the objects it is a key of (``""``: the records themselves)."""
    kinds: tuple[str, ...] | None = None
    """The JSON kinds its values came in (None: no value yet but null)."""
    kinds_read: Mapping[str, int] | None = None
    """Its values in the latest run that received it, per kind."""
    unread: int = 0
    """Of those, values of a kind not in ``kinds`` that could not be read."""

    def share(self) -> float:
        """The share of the records (with objects of its path) that had the field, in the runs that received it."""
        return self.records_with_total / self.records_read_total if self.records_read_total else 1.0

    def always_came(self) -> bool:
        """Whether every record with objects of its path had it, in the runs that received it (else: optional,
        judged at its rate against :data:`CHANCE_IF_OPTIONAL`)."""
        return self.records_with_total >= self.records_read_total

    def absent_by_accident(self, records: int) -> float:
        """The chance that ``records`` more records (and those since it was last seen) lack the field by
        accident: Laplace's estimate of how often a record lacks it, ``(N - W + 1) / (N + 2)`` after ``N``
        records of which ``W`` had it (``1 / (N + 2)`` for a field that came in every one), to their number."""
        absent = max(self.records_read_total - self.records_with_total, 0) + 1
        return (absent / (self.records_read_total + 2)) ** (self.records_since_seen + records)

    @property
    def key(self) -> str:
        return self.field[len(self.path) + 1:] if self.path else self.field


@dataclass(frozen=True)
class FieldChange:
    """A field that changed shape in one run: ``new``, ``vanished`` or ``retyped``."""

    source: str
    label: str
    field: str
    change: str
    records_read: int
    records_with: int
    first_run_id: str
    example_record_key: str | None
    kinds_before: tuple[str, ...] = ()
    """``retyped``: the kinds earlier runs sent it in."""
    kinds_new: Mapping[str, int] = field(default_factory=dict)
    """``retyped``: values of the other kinds this run, per kind."""
    unread: int = 0
    """``retyped``: of those, the values that could not be read (null in their column, data problems; or
    :attr:`unread_as`)."""
    unread_as: str | None = None
    """What became of those values when not a column's fate (``Key.unread``: the record quarantined, ...)."""

    def phrase(self) -> str:
        """``house_reference absent from all 40 read (present before)``, ``house_bill_number new (in 40 of
        40)``, ``goods[].quantity number -> text in 194 of 194, all read``."""
        if self.change == VANISHED:
            return f"{self.field} absent from all {self.records_read:,} read (present before)"
        if self.change == RETYPED:
            values = sum(self.kinds_new.values())
            lost = "not objects" if self.field.endswith("[]") else "null"  # an array's elements, or a key's values
            fate = self.unread_as or f"{lost}, freight_meta.data_problems"
            read = "all read" if not self.unread else f"{self.unread:,} not read ({fate})"
            return (f"{self.field} {'/'.join(self.kinds_before)} -> {'/'.join(sorted(self.kinds_new))} in "
                    f"{values:,} of {self.records_with:,}, {read}")
        return f"{self.field} new (in {self.records_with:,} of {self.records_read:,})"


def compare(
    source: str, shape: Shape, tally: FieldTally, known: Mapping[str, KnownField], run_id: str, at: dt.datetime,
) -> tuple[list[FieldChange], list[KnownField]]:
    """This run's changes of shape in ``source`` (every watched path), and the state of every field it knows
    after the run (unchanged at a path the run read no object of)."""
    if tally.records == 0:
        return [], list(known.values())
    by_path: dict[str, dict[str, KnownField]] = {}
    for known_field in known.values():
        by_path.setdefault(known_field.path, {})[known_field.key] = known_field
    changes: list[FieldChange] = []
    states: list[KnownField] = []
    for watched in shape.paths.values():
        here = by_path.pop(watched.path, {})
        elements = here.pop("", None)  # the kind of an array's elements is a field named by its path
        records = tally.records_at(watched)
        if records:
            found, after = compare_path(source, shape.label, watched, tally, here, run_id, at)
            changes += found
            states += after
        else:
            states += here.values()
        if watched.path.endswith("[]"):
            change, state = compare_elements(source, shape.label, watched, tally, elements, run_id, at)
            changes += [change] if change else []
            states += [state] if state else []
        elif elements is not None:
            states.append(elements)
    for rest in by_path.values():  # a path no longer declared: kept as it was
        states += rest.values()
    return changes, states


def compare_path(
    source: str, label: str, watched: WatchedPath, tally: FieldTally, known: Mapping[str, KnownField], run_id: str,
    at: dt.datetime,
) -> tuple[list[FieldChange], list[KnownField]]:
    """:func:`compare` at one path that the run read objects of; ``known``: its fields, by key."""
    records = tally.records_at(watched)
    holding, held = tally.holding_at(watched)
    seen = tally.fields(watched)
    # a key no declaration names in every object of the path: its shape changed (a rename, most likely), so a
    # key that came in every record before and in none now has vanished, however few records tell
    replaced = any(name not in watched.declared and got.records == records for name, got in seen.items())
    changes: list[FieldChange] = []
    states: list[KnownField] = []
    for name in sorted(set(seen) | set(known)):
        before = known.get(name)
        declared = name in watched.declared
        got = seen.get(name)
        count = got.records if got else 0
        example = got.example if got else None
        kinds = baseline = _kinds_before(before)
        retyped: tuple[dict[str, int], int] | None = None
        if count:
            assert got is not None
            kinds, retyped = _kinds_after(baseline, got, watched.kinds.get(name) if declared else None)
            state = RETYPED if retyped else RECEIVED if declared else NEW
        elif before is None:
            continue
        elif not declared:
            state = RECEIVED  # an undeclared field that stopped coming: nothing is kept in raw only any more
        elif any(other in seen for other in watched.names_of(name)):
            state = RECEIVED  # its column's other name came instead
        elif (replaced and before.always_came()) or before.absent_by_accident(holding) < (
                CHANCE if before.always_came() else CHANCE_IF_OPTIONAL):
            state = VANISHED
            example = tally.example_without(watched.names_of(name), watched)
        else:  # too few records to tell: a vanished field stays vanished
            state = VANISHED if before.state == VANISHED else RECEIVED
        changed = before is None or before.state != state
        first_run, first_at = (run_id, at) if before is None else (before.first_run_id, before.first_seen_at)
        after = KnownField(
            source, watched.field(name), declared, state,
            run_id if changed else before.changed_run_id if before else None,
            at if changed else before.changed_at if before else None,
            first_run, first_at,
            run_id if count else before.last_run_id if before else None,
            at if count else before.last_seen_at if before else None,
            records, count, example,
            (before.records_read_total if before else 0) + (holding if count else 0),
            (before.records_with_total if before else 0) + held.get(name, 0),
            0 if count else (before.records_since_seen if before else 0) + holding,
            watched.path, kinds,
            dict(got.kinds) if got else before.kinds_read if before else None,
            retyped[1] if retyped else 0,
        )
        states.append(after)
        if changed and state in OPEN_STATES:
            new_kinds, unread = retyped if retyped else ({}, 0)
            changes.append(FieldChange(source, label, after.field, state, records, count, first_run, example,
                                       baseline or (), new_kinds, unread, watched.fates.get(name)))
    return changes, states


def compare_elements(
    source: str, label: str, watched: WatchedPath, tally: FieldTally, before: KnownField | None, run_id: str,
    at: dt.datetime,
) -> tuple[FieldChange | None, KnownField | None]:
    """:func:`compare` of the kind of the elements of an array of objects below the top (``goods[].hs_codes[]``):
    elements sent as anything but an object (or null) are never read (each is a data problem, its row is not
    written), so they are **retyped** (``goods[].hs_codes[] object -> text in 473 of 473, 473 not read``), kept
    open until a run reads only objects there. A field is kept for the path only once such an element came."""
    other = tally.elements.get(watched.path)
    if other is None and before is None:
        return None, None
    objects = tally.records_at(watched)
    others = sum(other.kinds.values()) if other else 0
    if not objects and not others:
        return None, before  # the run read nothing there
    state = RETYPED if others else RECEIVED
    changed = before is None or before.state != state
    first_run, first_at = (run_id, at) if before is None else (before.first_run_id, before.first_seen_at)
    kinds_read = {**({OBJECT: objects} if objects else {}), **(other.kinds if other else {})}
    example = str(other.example) if other else before.example_record_key if before else None
    elements = objects + others
    after = KnownField(
        source=source, field=watched.path, declared=True, state=state,
        changed_run_id=run_id if changed else before.changed_run_id if before else None,
        changed_at=at if changed else before.changed_at if before else None,
        first_run_id=first_run, first_seen_at=first_at, last_run_id=run_id, last_seen_at=at,
        records_read=elements, records_with=elements, example_record_key=example,
        records_read_total=(before.records_read_total if before else 0) + elements,
        records_with_total=(before.records_with_total if before else 0) + elements,
        records_since_seen=0, path=watched.path, kinds=(OBJECT,), kinds_read=kinds_read, unread=others,
    )
    if not (changed and state == RETYPED):
        return None, after
    assert other is not None
    return FieldChange(source, label, watched.path, RETYPED, elements, elements, first_run, example, (OBJECT,),
                       dict(other.kinds), others), after


def _kinds_before(before: KnownField | None) -> tuple[str, ...] | None:
    """The kinds a field came in before this run: those of earlier runs, and the new kinds of a run that
    reported it retyped, once all its values of them were read (taken in: that change is resolved)."""
    if before is None or before.kinds is None:
        return None
    if before.state == RETYPED and not before.unread and before.kinds_read:
        return tuple(sorted({*before.kinds, *before.kinds_read}))
    return before.kinds


def _kinds_after(
    kinds: tuple[str, ...] | None, got: FieldCount, declared: frozenset[str] | None
) -> tuple[tuple[str, ...] | None, tuple[dict[str, int], int] | None]:
    """The field's kinds after this run, and (values of kinds it never came in, of those not read) when a
    declared field came in a kind neither earlier runs sent it in nor its declaration names (``declared``: a
    DateTime's time as text or as an object is no change). The first values but null set its kinds; a run's
    new kinds are taken in by the next run when all their values were read (:func:`_kinds_before`)."""
    if not got.kinds:
        return kinds, None
    if kinds is None or declared is None:
        return tuple(sorted({*(kinds or ()), *got.kinds})), None
    other = {kind: count for kind, count in got.kinds.items() if kind not in kinds and kind not in declared}
    if not other:
        return kinds, None
    return kinds, (other, sum(got.unread.get(kind, 0) for kind in other))


def fields_lost(held: Any, read: Any) -> list[str]:
    """The fields of ``held`` (a record's answer as read before, decoded) that ``read`` (the same record's answer
    read again) lost where it still has objects: a key absent from every object of its path now, or one whose
    values are now all of other JSON kinds (nulls aside): a rename, a drop or a retype, the shape of the answer
    changed, not (only) its values. An array emptied, an object gone, a value sent as null, an item or a key
    added lose nothing. Named as :func:`field_name` names them (``location``, ``goods[].weight``)."""
    before, after = _fields_by_path(held), _fields_by_path(read)
    lost = []
    for path, fields in before.items():
        now = after.get(path)
        if now is None:  # no object at the path any more: nothing to compare its keys with
            continue
        for key, kinds in fields.items():
            kinds_now = now.get(key)
            if kinds_now is None or (kinds and kinds_now and kinds.isdisjoint(kinds_now)):
                lost.append(field_name(path, key))
    return sorted(lost)


def values_changed(held: Any, read: Any, lost: Collection[str]) -> bool:
    """Whether ``read`` (a record's answer read again) holds another value than ``held`` (the answer before) in a
    field both answers have, the fields ``lost`` (:func:`fields_lost`'s) and what is under them aside: a change of the
    record, not only of its shape (a release renames and drops fields; it does not change the others' values).
    Compared as each field's values, a multiset (an array's order aside), named as :func:`field_name` names them."""
    def values(answer: Any) -> Counter[tuple[str, str]]:
        found: Counter[tuple[str, str]] = Counter()

        def walk(item: Any, name: str) -> None:
            if name in lost:
                return
            if isinstance(item, dict):
                for key, inner in item.items():
                    walk(inner, field_name(name, key))
            elif isinstance(item, list):
                for element in item:
                    walk(element, f"{name}[]")
            else:
                found[(name, json.dumps(item))] += 1

        for record in answer if isinstance(answer, list) else [answer]:
            walk(record, "")
        return found

    before, after = values(held), values(read)
    shared = {name for name, _ in before} & {name for name, _ in after}
    return (Counter({k: n for k, n in before.items() if k[0] in shared})
            != Counter({k: n for k, n in after.items() if k[0] in shared}))


def _fields_by_path(value: Any) -> dict[str, dict[str, set[str]]]:
    """Path -> key -> the JSON kinds of its non-null values, of every object in ``value`` (an answer: a record,
    or an array of records, each at the top path ``""``)."""
    found: dict[str, dict[str, set[str]]] = {}

    def walk(item: Any, path: str) -> None:
        if isinstance(item, dict):
            fields = found.setdefault(path, {})
            for key, inner in item.items():
                kinds = fields.setdefault(key, set())
                kind = KIND_OF_TYPE[type(inner)]
                if kind is not None:
                    kinds.add(kind)
                if isinstance(inner, dict):
                    walk(inner, field_name(path, key))
                elif isinstance(inner, list):
                    for element in inner:
                        walk(element, field_name(path, key) + "[]")

    for record in value if isinstance(value, list) else [value]:
        walk(record, "")
    return found
