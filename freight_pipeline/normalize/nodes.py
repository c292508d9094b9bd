"""The objects the normalizers read, declared as data: every kind of object, its keys, the names each key
may come under and what reads its value.

A :class:`Node` is one kind of object (a shipment document, a goods line, a DateTime object, a location):
its plain fields (:class:`~freight_pipeline.normalize.plain_fields.Field`, one key -> one column), its other
keys (:class:`Key`: a nested object, an array, or a value a column group reads) and the keys the spec names
that nothing reads (``known``: not new when they come). A key whose node is :data:`SAME` holds objects of
the kind it belongs to (goods' ``subgoods``).

The normalizers read every nested key through its :class:`Key` (``Key.of``), so a renamed key takes one
line, as a renamed field does: ``Key(("location", "place"), node=...)`` reads either name. The shape
watcher (:mod:`.shapes`) walks the same declarations, so every level a normalizer reads is watched, and the
declarations are part of the mapping's signature (:mod:`.signature`): a rebuild re-derives only the records
that name a key an alias added.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from freight_pipeline.normalize.converters import BIGINT, BOOLEAN, DATE, DOUBLE, INTEGER, JSON, TIMESTAMPTZ, VARCHAR
from freight_pipeline.normalize.plain_fields import Field, as_items
from freight_pipeline.normalize.problems import Problems

NUMBER = "number"
TEXT = "text"
BOOLEAN_KIND = "boolean"
OBJECT = "object"
ARRAY = "array"
ANY: frozenset[str] = frozenset({NUMBER, TEXT, BOOLEAN_KIND, OBJECT, ARRAY})
"""Every JSON kind of value (a null is none: it says nothing of a key's type)."""

JSON_TYPES: dict[type, str] = {bool: BOOLEAN_KIND, int: NUMBER, float: NUMBER, str: TEXT, dict: OBJECT, list: ARRAY}
"""The JSON kind of each type a JSON parser makes (``bool`` before ``int``, its base)."""


class _KindOfType(dict[type, str | None]):
    """The JSON kind of a parsed value's Python type, found once a type: a subclass's is its base's (a decoded
    answer's ``ReceivedArray``, which the E-File records hold, is an array: looked up by its exact type it was
    none, and the watcher never walked into the references and roles); ``type(None)``'s none."""

    def __missing__(self, kind: type) -> str | None:
        found = next((name for base, name in JSON_TYPES.items() if issubclass(kind, base)), None)
        self[kind] = found
        return found


KIND_OF_TYPE = _KindOfType(JSON_TYPES)
"""The JSON kind of a parsed value's Python type (index it: ``KIND_OF_TYPE[type(value)]``; None for a null)."""

KINDS_OF_COLUMN: dict[str, frozenset[str]] = {
    BIGINT: frozenset({NUMBER}), INTEGER: frozenset({NUMBER}), DOUBLE: frozenset({NUMBER}),
    VARCHAR: frozenset({TEXT}), BOOLEAN: frozenset({BOOLEAN_KIND}),
    DATE: frozenset({TEXT}), TIMESTAMPTZ: frozenset({TEXT}), JSON: frozenset(),
}
"""The kinds a column of each type is declared to read from (its converter may read others too: a number
sent as text). A JSON column keeps any value, so no kind is declared: the kinds earlier runs sent are
the field's (an array of remarks sent as an object is a change, all read)."""

SAME = "same kind"
"""A :class:`Key`'s node when its objects are of the kind it belongs to (goods' ``subgoods``)."""

Item = tuple[int, str, Mapping[str, Any]]
"""An object of an array: its 1-based position, its path, the object."""
ValueReader = Callable[[Any], Any]
"""What reads a value (a converter, a DateTime part's parser); it raises for a value it cannot read."""


@dataclass(frozen=True)
class Key:
    """A key the normalizers read that is not a plain field: a nested object (``node``), an array (``array``:
    of ``node`` objects, or of values), or a value a column group reads (``reads``).

    ``source`` names the key, or every name it may come under in order (the first that holds a value
    wins, as for a :class:`Field`). ``kinds``: the JSON kinds it is declared to hold (default: object for
    a node, array for an array); ``reads``: what reads a value of another kind, when anything can (a
    DateTime sent as ISO text), else None (kept whole when ``kinds`` is :data:`ANY`); ``unread``: what becomes of
    a value it cannot read, when not a column's fate (null, and a data problem): a record's identity, without which
    the record is quarantined or not loaded (:meth:`unread_as`).
    """

    source: str | tuple[str, ...]
    node: Node | str | None = None
    array: bool = False
    reads: ValueReader | None = None
    kinds: frozenset[str] | None = None
    unread: str | None = None
    keys: tuple[str, ...] = field(init=False, repr=False, compare=False)
    """Every name the key may come under, in order (from ``source``)."""
    name: str = field(init=False, repr=False, compare=False)
    """Its first name (the one its paths show)."""

    def __post_init__(self) -> None:  # both read for every object normalized: made once, not at each read
        keys = (self.source,) if isinstance(self.source, str) else tuple(self.source)
        object.__setattr__(self, "keys", keys)
        object.__setattr__(self, "name", keys[0])

    def unread_as(self, unread: str) -> Key:
        """This key where a value it cannot read means ``unread`` (``the record quarantined, freight_meta.quarantine``):
        what the run's notice of a field sent in another kind says of those values."""
        return replace(self, unread=unread)

    def declared_kinds(self) -> frozenset[str]:
        if self.kinds is not None:
            return self.kinds
        return frozenset({ARRAY if self.array else OBJECT})

    def of(self, record: Mapping[str, Any]) -> Any:
        """The value under the first of its names that holds one (None: none does)."""
        source = self.source
        if isinstance(source, str):
            return record.get(source)
        for name in source:
            value = record.get(name)
            if value is not None:
                return value
        return None

    def items_in(self, record: Mapping[str, Any], path: str, problems: Problems) -> Iterable[Item]:
        """(1-based position, path, object) of each object of its array in ``record`` (``plain_fields.as_items``)."""
        return as_items(self.of(record), path, problems)


@dataclass(frozen=True)
class Node:
    """One kind of object the normalizers read: its plain ``fields``, its other ``keys`` and the keys its
    spec names that nothing reads (``known``: an event's ``shipment_id``, the document's ``events``)."""

    fields: tuple[Field, ...] = ()
    keys: tuple[Key, ...] = ()
    known: tuple[str, ...] = ()

    @classmethod
    def of(cls, fields: Iterable[Field] = (), *keys: Key, known: Iterable[str] = ()) -> Node:
        return cls(tuple(fields), keys, tuple(known))

    def names(self) -> frozenset[str]:
        """Every name a key of this kind of object may come under (aliases included) and the known ones."""
        return frozenset({*(name for f in self.fields for name in f.keys),
                          *(name for k in self.keys for name in k.keys), *self.known})

    def alias_groups(self) -> tuple[tuple[str, ...], ...]:
        """The names of each field or key that has more than one (a renamed key's old and new)."""
        return tuple(item.keys for item in (*self.fields, *self.keys) if len(item.keys) > 1)
