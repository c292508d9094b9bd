"""``Criterion``: one lookup criterion, outgoing only and strict."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from pydantic import ConfigDict, field_validator

from freight_pipeline.client.models.base import FreightModel, _as_text
from freight_pipeline.client.models.keys import MatchMode


class Criterion(FreightModel):
    """One lookup criterion; a lookup body is a list of them (AND-ed, assumption A5).

    ``value`` accepts str, int, date or time and is sent as a string (dates ``YYYY-MM-DD``).
    Outgoing only, so strict: an unknown field (``mode=`` for ``match_mode=``) raises.
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True, coerce_numbers_to_str=True)
    _lenient: ClassVar[bool] = False

    key: str
    match_mode: MatchMode = "EQUALS"
    value: str | None = None
    values: list[str] | None = None
    identifiers: list[Criterion] | None = None

    @field_validator("value", mode="before")
    @classmethod
    def _value_to_text(cls, value: Any) -> Any:
        return _as_text(value)

    @field_validator("values", mode="before")
    @classmethod
    def _values_to_text(cls, value: Any) -> Any:
        if isinstance(value, list | tuple | set | frozenset):
            return [_as_text(v) for v in value]
        return value

    @field_validator("key")
    @classmethod
    def _key_not_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("criterion key must not be empty")
        return value

    @classmethod
    def one_of(cls, key: str, values: Sequence[Any]) -> Criterion:
        """``key`` equal to any of ``values``, in the least ambiguous form a service must accept:
        ``IN`` with ``values`` for several, ``EQUALS`` with ``value`` for one (the spec names ``IN``
        for membership and ``value`` for a single value; ``EQUALS`` with ``values`` it never names)."""
        if not values:
            raise ValueError(f"criterion {key!r} needs at least one value")
        if len(values) == 1:
            return cls(key=key, match_mode="EQUALS", value=values[0])
        return cls(key=key, match_mode="IN", values=list(values))
