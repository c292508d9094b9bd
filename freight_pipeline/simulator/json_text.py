"""The simulator's JSON text, read and written by orjson (its answers' JSON was a fifth of its CPU), with
the standard library for what orjson refuses, so that nothing the store holds becomes unanswerable."""

from __future__ import annotations

import json
from typing import Any

import orjson


def dumps(value: Any) -> bytes:
    """``value`` as compact UTF-8 JSON (the bytes of Starlette's ``JSONResponse``); an integer beyond 64 bits,
    which orjson cannot write, by the standard library."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


def loads(text: str | bytes) -> Any:
    """JSON text read; what orjson refuses (an integer beyond 64 bits, NaN) by the standard library."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)
