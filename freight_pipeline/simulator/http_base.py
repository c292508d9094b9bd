"""What the simulator's service endpoints (``app``) and its control surface (``control``) share: the
service's state, the A3 error answer, and reading a JSON request body."""

from __future__ import annotations

import http
import json
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from freight_pipeline.simulator.auth import Authenticator
from freight_pipeline.simulator.config import SimulatorConfig
from freight_pipeline.simulator.corruptions import Corruptions
from freight_pipeline.simulator.faults import FaultInjector, RequestStats
from freight_pipeline.simulator.json_text import dumps
from freight_pipeline.simulator.releases import CURRENT
from freight_pipeline.simulator.store_api import StoreAPI


class JsonAnswer(JSONResponse):
    """A JSON answer written by orjson (``json_text.dumps``: the same bytes as ``JSONResponse``'s)."""

    def render(self, content: Any) -> bytes:
        return dumps(content)


class ApiError(Exception):
    """An error answer with the A3 JSON body."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


def error_response(status: int, message: str, headers: dict[str, str] | None = None) -> JsonAnswer:
    body = {"status": status, "error": http.HTTPStatus(status).phrase, "message": message}
    return JsonAnswer(body, status_code=status, headers=headers)


@dataclass
class ServiceState:
    store: StoreAPI
    config: SimulatorConfig
    auth: Authenticator
    faults: FaultInjector
    stats: RequestStats
    corruptions: Corruptions
    release: str = CURRENT
    """The release of the interface answered now (``releases.py``)."""


async def json_body(request: Request, *, empty: Any = ...) -> Any:
    raw = await request.body()
    if not raw.strip():
        if empty is ...:
            raise ApiError(400, "request body is required (JSON)")
        return empty
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ApiError(400, f"malformed JSON body: {exc}") from None


async def json_object(request: Request, what: str) -> dict[str, Any]:
    body = await json_body(request)
    if not isinstance(body, dict):
        raise ApiError(400, f"request body must be a JSON object ({what})")
    return body
