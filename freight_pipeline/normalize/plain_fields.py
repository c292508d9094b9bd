"""Plain fields (one source key -> one column) and the readers of nested containers.

A :class:`Field` maps one source key to one column: the same object gives the table spec its
:class:`Column` and gives the flattener its converter, so the declaration exists once. The functions
that apply fields to a record (``copy_fields``, ``as_object``, ``as_items``) never raise for a
value: they turn :class:`Invalid` into a null column and one entry in the record's :class:`Problems`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from freight_pipeline.normalize.converters import (
    BOOLEAN,
    CONVERTERS,
    VARCHAR,
    Converter,
    Row,
    json_or_report,
    to_instant,
    to_json,
    to_str,
)
from freight_pipeline.normalize.errors import Invalid, join_path, show
from freight_pipeline.normalize.problems import Problems
from freight_pipeline.normalize.schema import Column

# --- containers ------------------------------------------------------------------------------------


def as_object(value: Any, path: str, problems: Problems) -> Mapping[str, Any] | None:
    """A nested object, or None when null/absent or not an object (reported)."""
    if value is None or isinstance(value, dict):
        return value
    problems.add(path, value, f"{show(value)} is not an object")
    return None


def as_list(value: Any, path: str, problems: Problems) -> Sequence[Any]:
    """A nested array; null or absent is empty (many services send null for an empty collection:
    nothing is lost, so nothing is reported); anything else is empty and reported."""
    if isinstance(value, list):
        return value
    if value is not None:
        problems.add(path, value, f"{show(value)} is not an array (read as no items)")
    return ()


def as_items(value: Any, path: str, problems: Problems) -> Iterable[tuple[int, str, Mapping[str, Any]]]:
    """(1-based position, path, object) for each object of an array; null elements are skipped,
    other non-objects skipped and reported."""
    for index, item in enumerate(as_list(value, path, problems)):
        if item is None:
            continue
        item_path = f"{path}[{index}]"
        if not isinstance(item, dict):
            problems.add(item_path, item, f"{show(item)} is not an object")
            continue
        yield index + 1, item_path, item


# --- plain fields ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Field:
    """One source key -> one column. ``source`` defaults to the column name.

    A renamed field takes one line: ``source`` names the keys the value may come from, in order, and
    the first that holds a value wins, e.g. ``Field("house_reference", VARCHAR, source=("house_reference",
    "house_bill_number"))`` reads a service before and after a release that renamed the field.
    """

    column: str
    type: str
    description: str = ""
    source: str | tuple[str, ...] | None = None

    @property
    def keys(self) -> tuple[str, ...]:
        """Every source key the column may come from, in order."""
        if self.source is None:
            return (self.column,)
        return (self.source,) if isinstance(self.source, str) else tuple(self.source)

    @property
    def key(self) -> str:
        """The first source key."""
        return self.keys[0]

    def as_column(self) -> Column:
        return Column(self.column, self.type, self.description)


# Python type a value already has when no conversion is needed (skips the converter call for ASCII
# text and booleans; numbers always go through their converter for the range and finiteness checks).
_NATIVE_TYPES: dict[str, type] = {VARCHAR: str, BOOLEAN: bool}

class CompiledFields(tuple[tuple[str, str, Converter, type | None, tuple[str, ...]], ...]):
    """Fields as :func:`copy_fields` runs them: (column, first key, converter, native type, other keys). A type
    of its own so that the mapping's signature finds every group a normalizer holds (``normalize.signature``)."""

    __slots__ = ()


def compile_fields(fields: Iterable[Field]) -> CompiledFields:
    return CompiledFields((f.column, f.key, CONVERTERS[f.type], _NATIVE_TYPES.get(f.type), f.keys[1:])
                          for f in fields)


def field_value(record: Mapping[str, Any], key: str, fields: CompiledFields) -> Any:
    """The value of ``record``'s field ``key`` as its column reads it (:func:`copy_fields`): under the first of the
    field's names in ``fields`` that holds one (an alias the mapping gives a renamed field)."""
    value = record.get(key)
    if value is not None:
        return value
    for _, first, _, _, aliases in fields:
        if aliases and (first == key or key in aliases):
            return next((record[name] for name in (first, *aliases) if record.get(name) is not None), None)
    return None


def source_keys(fields: Iterable[Field]) -> frozenset[str]:
    """Every source key of ``fields`` (aliases included): what a record's keys are compared with."""
    return frozenset(key for f in fields for key in f.keys)


def alias_groups(fields: Iterable[Field]) -> tuple[tuple[str, ...], ...]:
    """The source keys of each field that has more than one (a renamed field's old and new names)."""
    return tuple(f.keys for f in fields if len(f.keys) > 1)


def copy_fields(row: Row, source: Mapping[str, Any], fields: CompiledFields, path: str, problems: Problems) -> Row:
    """Convert each declared field of ``source`` into ``row``; absent and null stay absent (null);
    a value that cannot be converted stays null and is reported. A field with aliases takes the first
    of its keys that holds a value."""
    get = source.get
    for column, key, convert, native, aliases in fields:
        value = get(key)
        if value is None:
            if not aliases:
                continue
            key, value = next(((alias, get(alias)) for alias in aliases if get(alias) is not None), (key, None))
            if value is None:
                continue
        if native is not None and type(value) is native and (native is bool or (native is str and value.isascii())):
            row[column] = value  # the common case, without a converter call
            continue
        if convert is to_json:
            row[column] = json_or_report(value, join_path(path, key), problems)
            continue
        try:
            row[column] = to_instant(value, problems.zone) if convert is to_instant else convert(value)
        except Invalid as exc:
            problems.add(join_path(path, key), value, str(exc))
    return row


def string_lines(value: Any, path: str, problems: Problems) -> list[tuple[int, str | None]]:
    """An array of strings as (1-based position, text); elements are coerced to text (null if they cannot be)."""
    lines: list[tuple[int, str | None]] = []
    for index, item in enumerate(as_list(value, path, problems)):
        if item is None:
            lines.append((index + 1, None))
            continue
        try:
            lines.append((index + 1, to_str(item)))
        except Invalid as exc:
            problems.add(f"{path}[{index}]", item, str(exc))
            lines.append((index + 1, None))
    return lines


def columns_of(*parts: Iterable[Column] | Iterable[Field]) -> tuple[Column, ...]:
    """Flatten Columns and Fields (as columns) into one tuple, in order."""
    out: list[Column] = []
    for part in parts:
        for item in part:
            out.append(item.as_column() if isinstance(item, Field) else item)
    return tuple(out)
