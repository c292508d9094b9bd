"""Lenient reading (the rules: the package docstring): drift reports, field problems, the FreightModel base."""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, PrivateAttr, ValidationError, model_validator

logger = logging.getLogger("freight_pipeline.client")

_reported: set[tuple[str, ...]] = set()
_report_lock = threading.Lock()


def _report_once(key: tuple[str, ...], message: str, *args: Any) -> None:
    """Log a warning the first time ``key`` is seen in this process (drift is reported, not repeated)."""
    with _report_lock:
        if key in _reported:
            return
        _reported.add(key)
    logger.warning(message, *args)


def _report_unknown_event_code(code: str) -> None:
    _report_once(("event", code), "unknown shipment event code %r kept as received (not in the spec's list)", code)


# --- lenient reading ----------------------------------------------------------------------------

_TRUE_TEXTS = frozenset({"J", "JA", "Y", "YES", "TRUE", "T", "1"})
_FALSE_TEXTS = frozenset({"N", "NEIN", "NO", "FALSE", "F", "0"})


def _flag(value: Any) -> Any:
    """``J``/``Y``/``true``/... and ``N``/``false``/... texts as booleans; an empty text as null."""
    if isinstance(value, str):
        text = value.strip().upper()
        if not text:
            return None
        if text in _TRUE_TEXTS:
            return True
        if text in _FALSE_TEXTS:
            return False
    return value


Flag = Annotated[bool | None, BeforeValidator(_flag)]


@dataclasses.dataclass(frozen=True)
class FieldProblem:
    """A field a model could not read: where (``goods[0].weight``), why, and the value as received."""

    path: str
    message: str
    value: Any = None

    def within(self, prefix: str) -> FieldProblem:
        return dataclasses.replace(self, path=f"{prefix}.{self.path}" if self.path else prefix)

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


@functools.cache
def _empty_when_null(cls: type[BaseModel]) -> frozenset[str]:
    """Input keys (names and aliases) of the array fields that default to an empty array."""
    found: set[str] = set()
    for name, info in cls.model_fields.items():
        if info.default_factory is list:
            found.update({name, info.alias or name})
    return frozenset(found)


def _nulls_as_empty(cls: type[BaseModel], data: dict[str, Any]) -> dict[str, Any]:
    """A20: a null array is an empty array (a new dict; the one received stays untouched)."""
    nulls = [key for key in _empty_when_null(cls) if key in data and data[key] is None]
    return {**data, **{key: [] for key in nulls}} if nulls else data


@dataclasses.dataclass
class _Readable:
    """What is left of a record after its unreadable parts are taken out."""

    data: dict[str, Any]
    problems: list[FieldProblem] = dataclasses.field(default_factory=list)
    kept: dict[str, list[int]] = dataclasses.field(default_factory=dict)  # array key -> indexes kept


def _without_unreadable(cls: type[BaseModel], data: dict[str, Any], error: ValidationError) -> _Readable:
    """``data`` without the fields and array items ``error`` names (null items are dropped silently)."""
    readable = _Readable(dict(data))
    dropped: dict[str, set[int]] = {}
    problems: dict[str, FieldProblem] = {}
    kinds: dict[tuple[str, str, str], FieldProblem] = {}  # (model, field, pydantic error type) -> first problem
    for detail in error.errors():
        loc = detail["loc"]
        if not loc or not isinstance(loc[0], str) or loc[0] not in data:
            raise error  # not about one field: the record as a whole cannot be read
        key, value = loc[0], data[loc[0]]
        if len(loc) > 1 and isinstance(loc[1], int) and isinstance(value, list):
            dropped.setdefault(key, set()).add(loc[1])
            path, value = f"{key}[{loc[1]}]", value[loc[1]]
            if value is None:
                continue
        else:
            readable.data.pop(key, None)
            path = key
        problem = problems.setdefault(path, FieldProblem(path, detail["msg"], value))
        kinds.setdefault((cls.__name__, key, detail["type"]), problem)
    for key, indexes in dropped.items():
        if key in readable.data:
            readable.kept[key] = [index for index in range(len(data[key])) if index not in indexes]
            readable.data[key] = [data[key][index] for index in readable.kept[key]]
    readable.problems = list(problems.values())
    for kind, problem in kinds.items():
        _report_once(
            kind,  # not the message: it may hold the value, and every distinct value would be reported
            "%s.%s cannot be read (%s); left out of the model, kept in .raw and .problems",
            cls.__name__,
            problem.path,
            problem.message,
        )
    return readable


def _nested_problems(prefix: str, value: Any, kept: list[int] | None = None) -> list[FieldProblem]:
    """Problems of nested models, with array indexes of the record as received."""
    if isinstance(value, FreightModel):
        return [p.within(prefix) for p in value.problems]
    if isinstance(value, list):
        found: list[FieldProblem] = []
        for index, item in enumerate(value):
            found.extend(_nested_problems(f"{prefix}[{kept[index] if kept else index}]", item))
        return found
    return []


class FreightModel(BaseModel):
    """Base of every resource model: lenient (see module docstring), keeps unknown fields and the raw dict."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, protected_namespaces=(), coerce_numbers_to_str=True)
    _lenient: ClassVar[bool] = True  # False: validation errors are raised (outgoing models)

    _raw: dict[str, Any] | None = PrivateAttr(default=None)
    _readable: _Readable | None = PrivateAttr(default=None)

    @model_validator(mode="wrap")
    @classmethod
    def _read(cls, data: Any, handler: Any) -> Any:
        if not isinstance(data, dict):
            return handler(data)
        readable: _Readable | None = None
        if cls._lenient:
            instance, readable = cls._read_leniently(data, handler)
        else:
            instance = handler(data)
        if isinstance(instance, FreightModel):
            instance._raw = data
            if readable is not None:  # a recursive model passes this validator twice: keep what the inner found
                instance._readable = readable
        return instance

    @classmethod
    def _read_leniently(cls, data: dict[str, Any], handler: Any) -> tuple[Any, _Readable | None]:
        """Validate; on errors once more without the unreadable parts (a second failure is raised)."""
        cleaned = _nulls_as_empty(cls, data)
        try:
            return handler(cleaned), None
        except ValidationError as exc:
            readable = _without_unreadable(cls, cleaned, exc)
        return handler(readable.data), readable

    @property
    def raw(self) -> dict[str, Any]:
        """The dict this model was built from, as received; else its own dump with the spec's names."""
        if self._raw is not None:
            return self._raw
        return self.model_dump(by_alias=True, exclude_none=True)

    @property
    def extra_fields(self) -> dict[str, Any]:
        """Fields the spec does not name (kept, never dropped)."""
        return dict(self.__pydantic_extra__ or {})

    @property
    def problems(self) -> list[FieldProblem]:
        """Fields that could not be read, here and in nested models (spec names, indexes as received)."""
        readable = self._readable or _Readable({})
        found = list(readable.problems)
        for name, info in type(self).model_fields.items():
            key = info.alias or name
            kept = readable.kept.get(key, readable.kept.get(name))
            found.extend(_nested_problems(key, getattr(self, name), kept))
        return found

    @classmethod
    def from_raw(cls, data: Mapping[str, Any]) -> Any:
        return cls.model_validate(data)

    @classmethod
    def list_from_raw(cls, data: Sequence[Mapping[str, Any]]) -> list[Any]:
        return [cls.model_validate(item) for item in data]

    def to_payload(self) -> dict[str, Any]:
        """The JSON body to send: spec field names, nulls left out."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


# --- values sent as text (Criterion.value, EFileReference.value) --------------------------------


def _as_text(value: Any) -> Any:
    if isinstance(value, bool):
        return "J" if value else "N"
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, int | float):
        return str(value)
    return value
