"""Reading an answer: JSON from a body, whether it has the expected shape, integer headers."""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
import orjson

from freight_pipeline.client._calls import Expect

logger = logging.getLogger("freight_pipeline.client")


def loads(content: bytes) -> Any:
    """JSON from a body: orjson (fast) first; what it refuses (NaN, integers beyond 64 bits, lone
    surrogates) is read by the standard library, so a bad value reaches normalization (which reports
    it) instead of failing the whole record. ValueError when it is not JSON at all."""
    try:
        return orjson.loads(content)
    except orjson.JSONDecodeError:
        return json.loads(content)


def shape_problem(expect: Expect, data: Any) -> str | None:
    if expect is Expect.OBJECT and not isinstance(data, dict):
        return f"is a JSON {type(data).__name__}, expected an object"
    if expect is Expect.ARRAY and (not isinstance(data, list) or not all(isinstance(x, dict) for x in data)):
        return "is not a JSON array of objects"
    return None


def int_header(headers: httpx.Headers, name: str) -> int | None:
    value = headers.get(name)
    if value is None:
        return None
    try:
        return int(value.strip())
    except ValueError:
        logger.debug("ignoring non-integer %s header %r", name, value)
        return None
