"""What derives the rows from the service's records: the mapping's signature, and what a change of it can touch.

A :class:`MappingSignature` has two parts:

* ``code``: a digest of every module of the package but the declarations (:mod:`.specs`), of the functions
  and classes those declare, of the versions of the libraries the rows pass through, and of the zone read
  into date-times sent without a UTC offset, with its rules as this process reads them;
* ``declared``: the declarations as data (every value of :mod:`.specs` and every compiled field group of the
  normalizers, :class:`~freight_pipeline.normalize.plain_fields.CompiledFields`), descriptions left out (they
  derive no row).

:func:`touched_keys` compares two signatures. When the only difference is in the source keys of some fields
(a renamed field's alias added, ``Field(..., source=("house_reference", "house_bill_number"))``, or a renamed
nested object's, ``Key(("location", "place"), ...)``), a record
that holds none of the keys added or removed (nor of the kept ones, when their order changed) gives the same
rows under both: a field reads the first of its keys that holds a value. So a rebuild re-derives only the
records whose raw text names one of those keys (``sync.rebuild``). Any other difference (code, a column,
a type, a converter, a table) touches every record: :class:`EveryRecord`, which says why.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import importlib
import importlib.resources
import inspect
import json
import pkgutil
import platform
import types
import zoneinfo
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import freight_pipeline
from freight_pipeline.normalize import specs
from freight_pipeline.normalize.nodes import Key, Node
from freight_pipeline.normalize.plain_fields import CompiledFields, Field
from freight_pipeline.normalize.schema import Column, TableSpec

LIBRARIES = ("duckdb", "orjson", "pyarrow", "pydantic")
"""Libraries the rows pass through (parsing, Arrow, the database): their versions are part of ``code``."""
_NOT_DERIVING = frozenset({"description"})
"""Attributes of columns and tables that derive no row."""
_SOURCES = "__sources__"
"""The key under which a field's source keys appear in ``declared`` (the only part :func:`touched_keys` can
narrow)."""


class Unsignable(TypeError):
    """A declaration of a kind the signature does not know how to write as data."""


@dataclass(frozen=True)
class MappingSignature:
    """The mapping a process derives rows with (module docstring). ``declared`` is None when a declaration
    could not be written as data: then every change touches every record."""

    code: str
    declared: Any

    @functools.cached_property
    def id(self) -> str:
        """A digest of both parts. Each stream of each run signs the mapping anew, and writing the declarations out
        takes about 9 ms: the same data as the last signature's (:data:`_LAST_ID`) has the last one's id."""
        last = _LAST_ID.get(self.code)
        if last is not None and _same(last[0], self.declared):
            return last[1]
        text = json.dumps([self.code, self.declared], sort_keys=True, separators=(",", ":"))
        digest = hashlib.sha256(text.encode()).hexdigest()[:20]
        _LAST_ID.clear()
        _LAST_ID[self.code] = (self.declared, digest)
        return digest

    def as_json(self) -> dict[str, Any]:
        return {"code": self.code, "declared": self.declared}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MappingSignature:
        return cls(str(data["code"]), data.get("declared"))


_LAST_ID: dict[str, tuple[Any, str]] = {}
"""The last signature whose id was written out: its ``code`` -> (its ``declared``, its id)."""


def _same(held: Any, new: Any) -> bool:
    """Whether two values of ``declared`` write the same JSON: equal, and of the same types all through (``==``
    holds ``True == 1``), each part taken as the same where it is the same object (most of them are: each frozen
    declaration is written as data once a process)."""
    if held is new:
        return True
    if type(held) is not type(new):
        return False
    if isinstance(held, dict):
        return held.keys() == new.keys() and all(_same(value, new[key]) for key, value in held.items())
    if isinstance(held, list):
        return len(held) == len(new) and all(map(_same, held, new))
    return bool(held == new)


def current_signature(service_zone: str) -> MappingSignature:
    """The signature of the mapping this process runs, reading offset-less date-times in ``service_zone``."""
    code = hashlib.sha256(f"{_code_digest()}\0{service_zone}\0{_zone_rules(service_zone)}".encode()).hexdigest()
    try:
        declared = _declared()
    except Unsignable:
        declared = None
    return MappingSignature(code, declared)


@dataclass(frozen=True)
class EveryRecord:
    """Any record may derive other rows than those held: every one is re-derived, for the reason ``why``."""

    why: str


def touched_keys(new: MappingSignature, old: MappingSignature) -> frozenset[str] | EveryRecord:
    """The source keys a record must name for ``new`` to derive other rows from it than ``old`` did (empty:
    none; the same mapping), or :class:`EveryRecord` when any record may change (module docstring)."""
    if new.declared is None:
        return EveryRecord("this version's declarations hold a function its signature cannot read "
                           "(a lambda or a nested function)")
    if old.declared is None:
        return EveryRecord(f"mapping {old.id}, which derived rows held, declared a function its signature "
                           "could not read")
    if new.code != old.code:
        return EveryRecord(f"the code changed since mapping {old.id} derived rows held (a module of the package, "
                           "a library's version or the service's zone)")
    keys: set[str] = set()
    if not _only_sources_differ(new.declared, old.declared, keys):
        return EveryRecord(f"the declarations changed in more than fields' source keys since mapping {old.id} "
                           "derived rows held (a column, a type, a converter or a table)")
    return frozenset(keys)


def _only_sources_differ(new: Any, old: Any, keys: set[str]) -> bool:
    """Whether ``new`` and ``old`` differ only in fields' source keys; those that decide it added to ``keys``."""
    if isinstance(new, dict) and isinstance(old, dict):
        if new.keys() != old.keys():
            return False
        if _SOURCES in new:  # a field's, or a nested object's whose own fields' sources may differ too
            if not all(_only_sources_differ(new[name], old[name], keys) for name in new if name != _SOURCES):
                return False
            keys |= _deciding(list(new[_SOURCES]), list(old[_SOURCES]))
            return True
        return all(_only_sources_differ(new[name], old[name], keys) for name in new)
    if isinstance(new, list) and isinstance(old, list):
        return len(new) == len(old) and all(_only_sources_differ(a, b, keys) for a, b in zip(new, old, strict=True))
    return bool(new == old)


def _deciding(new: list[str], old: list[str]) -> set[str]:
    """The keys whose presence in a record decides whether a field with these sources reads another value:
    the keys added or removed, and the kept ones when their order changed."""
    kept_new, kept_old = [k for k in new if k in old], [k for k in old if k in new]
    return set(new) ^ set(old) | (set(kept_new) if kept_new != kept_old else set())


@functools.cache
def _code_digest() -> str:
    """Every module of the package but :mod:`.specs` (its functions and classes are in :func:`_declared_code`),
    and the versions of Python and of :data:`LIBRARIES` (a process reads its files once)."""
    digest = hashlib.sha256()
    root = Path(freight_pipeline.__file__).parent
    declarations = Path(specs.__file__).parent
    for path in sorted(root.rglob("*.py")):
        if declarations in path.parents:
            continue
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    digest.update(_declared_code().encode())
    versions = [platform.python_version(), *(f"{name}=={metadata.version(name)}" for name in LIBRARIES)]
    digest.update("\0".join(versions).encode())
    return digest.hexdigest()


@functools.cache
def _zone_rules(name: str) -> str:
    """A digest of the rules of zone ``name`` where ``zoneinfo`` reads them (the system's zone files first, then
    the ``tzdata`` package): an update of the zone's rules changes the instants of offset-less date-times."""
    for root in zoneinfo.TZPATH:
        path = Path(root) / name
        if path.is_file():
            return hashlib.sha256(path.read_bytes()).hexdigest()
    try:
        rules = importlib.resources.files("tzdata.zoneinfo").joinpath(*name.split("/")).read_bytes()
    except (ModuleNotFoundError, FileNotFoundError, OSError, ValueError):
        return "unknown"
    return hashlib.sha256(rules).hexdigest()


def _declared_code() -> str:
    """The source of every function and class the declaration modules define (builders and groups)."""
    texts: list[str] = []
    for module in _declaration_modules():
        for name, value in sorted(vars(module).items()):
            if isinstance(value, types.FunctionType | type) and value.__module__ == module.__name__:
                texts.append(f"{module.__name__}.{name}\0{inspect.getsource(value)}")
    return "\0".join(texts)


def _declaration_modules() -> list[types.ModuleType]:
    """The declarations' package and every module under it."""
    names = sorted(info.name for info in pkgutil.walk_packages(specs.__path__, f"{specs.__name__}."))
    return [specs, *(importlib.import_module(name) for name in names)]


def _normalizer_modules() -> list[types.ModuleType]:
    package = importlib.import_module("freight_pipeline.normalize")
    return [importlib.import_module(f"{package.__name__}.{info.name}")
            for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda info: info.name)
            if not info.ispkg]


def _declared() -> dict[str, Any]:
    """The declarations as data: every value of the declaration modules (but modules, functions and
    classes), and every compiled field group the normalizer modules hold (what they run, as they run it)."""
    declared: dict[str, Any] = {}
    for module in _declaration_modules():
        for name, value in sorted(vars(module).items()):
            if name.startswith("__") or isinstance(value, types.ModuleType | types.FunctionType | type):
                continue
            declared[f"{module.__name__}.{name}"] = _as_data(value, ())
    for module in _normalizer_modules():
        for name, value in sorted(vars(module).items()):
            if isinstance(value, CompiledFields):
                declared[f"{module.__name__}.{name}"] = _as_data(value, ())
    return declared


_FROZEN = (Field, Key, Node, CompiledFields, Column, TableSpec)
"""Declarations that cannot change once made: each written as data once a process (:data:`_WRITTEN`)."""
_WRITTEN: dict[int, tuple[Any, Any]] = {}
"""id -> (a frozen declaration, its data): a stream's run signs the mapping, and most of it is the same objects."""


def _as_data(value: Any, within: tuple[int, ...]) -> Any:
    """``value`` as JSON data, the same in every process (no address, no order of a set)."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, _FROZEN):
        written = _WRITTEN.get(id(value))
        if written is None or written[0] is not value:
            written = _WRITTEN[id(value)] = (value, _written_as_data(value, within))
        return written[1]
    return _written_as_data(value, within)


def _written_as_data(value: Any, within: tuple[int, ...]) -> Any:
    if id(value) in within:
        raise Unsignable(f"a cycle through {type(value).__qualname__}")
    inner = (*within, id(value))
    if isinstance(value, Field):  # its description derives no row
        return {"field": value.column, "type": value.type, _SOURCES: list(value.keys)}
    if isinstance(value, Key):  # a nested object's, an array's or a group's value: its names, as a field's
        return {"key": _as_data(value.node, inner), "array": value.array, "reads": _as_data(value.reads, inner),
                "kinds": _as_data(value.kinds, inner), _SOURCES: list(value.keys)}
    if isinstance(value, CompiledFields):
        return [{"field": column, "converter": _name(convert), "native": _name(native), _SOURCES: [key, *aliases]}
                for column, key, convert, native, aliases in value]
    if isinstance(value, enum.Enum):
        return f"{type(value).__qualname__}.{value.name}"
    if isinstance(value, functools.partial):
        return {"partial": _as_data(value.func, inner), "args": _as_data(list(value.args), inner),
                "keywords": _as_data(dict(value.keywords), inner)}
    if isinstance(value, types.FunctionType | types.BuiltinFunctionType | type):
        if "<" in value.__qualname__:  # a lambda or a nested function: its name does not say what it does
            raise Unsignable(f"{value.__qualname__} is not a module's function")
        return _name(value)
    if isinstance(value, Mapping):
        return {str(key): _as_data(item, inner) for key, item in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, list | tuple):
        return [_as_data(item, inner) for item in value]
    if isinstance(value, set | frozenset):
        return sorted((_as_data(item, inner) for item in value), key=lambda item: json.dumps(item, sort_keys=True))
    if dataclasses.is_dataclass(value):
        dropped = _NOT_DERIVING if isinstance(value, Column | TableSpec) else frozenset()
        return {"class": _name(type(value)), **{
            f.name: _as_data(getattr(value, f.name), inner) for f in dataclasses.fields(value)
            if f.compare and f.name not in dropped}}
    if hasattr(value, "__dict__") and type(value).__module__.startswith(freight_pipeline.__name__):
        cls = type(value)
        return {"class": _name(cls), **{
            name: _as_data(item, inner) for name, item in sorted(vars(value).items())
            if not isinstance(getattr(cls, name, None), functools.cached_property)}}
    text = str(value)
    if " at 0x" in text:
        raise Unsignable(f"{type(value).__qualname__} has no stable text")
    return f"{type(value).__module__}.{type(value).__qualname__}:{text}"


def _name(value: Any) -> str | None:
    if value is None:
        return None
    return f"{getattr(value, '__module__', '?')}.{getattr(value, '__qualname__', repr(value))}"
