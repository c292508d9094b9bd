"""The simulator's HTTP service: a Starlette ASGI app over a :class:`StoreAPI`.

``create_app(store, config)`` returns a :class:`SimulatorApp` (an ASGI callable) that serves every
endpoint of the spec with the choices of docs/assumptions.md, wrapped in the fault and
accounting edge (``faults.EdgeMiddleware``), plus the opt-in control surface (``control.py``).
A wrong method on a fixed path is answered 405 before routing, so before authentication (A27).
Store calls run in a worker thread so a large lookup never stalls the event loop.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Match, Route

from freight_pipeline.simulator.auth import Authenticator, AuthError
from freight_pipeline.simulator.config import SimulatorConfig
from freight_pipeline.simulator.control import control_routes
from freight_pipeline.simulator.corruptions import Corruptions
from freight_pipeline.simulator.endpoints import Endpoints
from freight_pipeline.simulator.faults import UNMATCHED, ASGIApp, EdgeMiddleware, FaultInjector, RequestStats, Scope
from freight_pipeline.simulator.http_base import ApiError, ServiceState, error_response
from freight_pipeline.simulator.lookup.types import CriteriaError
from freight_pipeline.simulator.store_api import Conflict, Invalid, NotFound, StoreAPI

TEMPLATES_KEPT = 16384
"""Request paths whose route template is kept (all forgotten when there are more)."""


class SimulatorApp:
    """The ASGI application plus handles on its parts (store, auth, faults, stats)."""

    def __init__(self, store: StoreAPI, config: SimulatorConfig | None = None) -> None:
        config = config or SimulatorConfig()
        self.state = ServiceState(
            store, config, Authenticator(config), FaultInjector(config.faults), RequestStats(), Corruptions(),
            config.release,
        )
        endpoints = Endpoints(self.state)
        routes: list[BaseRoute] = endpoints.routes()
        if config.control:
            routes += control_routes(self.state)
        self.starlette = Starlette(routes=routes, exception_handlers=_exception_handlers())
        self._routes = [r for r in routes if isinstance(r, Route)]
        self._literal_methods = literal_methods(self._routes)
        self._templates: dict[tuple[str, object], str] = {}
        guarded = MethodGuard(self.starlette, self._literal_methods)
        self._edge = EdgeMiddleware(guarded, self.state.faults, self.state.stats, self.path_template)

    @property
    def store(self) -> StoreAPI:
        return self.state.store

    def path_template(self, scope: Scope) -> str:
        """The route's path template of the request (``/service/shipment/{id}``), which the fault edge counts
        and decides by; each path's matched once (the routes are fixed, and a client reads a path again)."""
        path = str(scope["path"])
        if path in self._literal_methods:
            return path
        key = (path, scope.get("method"))
        template = self._templates.get(key)
        if template is None:
            if len(self._templates) >= TEMPLATES_KEPT:
                self._templates.clear()
            template = self._templates[key] = self._matched_template(scope)
        return template

    def _matched_template(self, scope: Scope) -> str:
        partial: str | None = None
        for route in self._routes:
            match, _ = route.matches(scope)
            if match is Match.FULL:
                return route.path
            if match is Match.PARTIAL and partial is None:
                partial = route.path
        return partial or UNMATCHED

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        await self._edge(scope, receive, send)


def create_app(store: StoreAPI, config: SimulatorConfig | None = None) -> SimulatorApp:
    return SimulatorApp(store, config)


def literal_methods(routes: list[Route]) -> dict[str, frozenset[str]]:
    """Fixed path (no ``{param}``) -> every method its routes answer."""
    methods: dict[str, set[str]] = {}
    for route in routes:
        if "{" not in route.path:
            methods.setdefault(route.path, set()).update(route.methods or ())
    return {path: frozenset(found) for path, found in methods.items()}


class MethodGuard:
    """405 with ``Allow`` for a wrong method on a fixed path, before a ``{id}`` route can take it.

    Without it ``GET /service/shipment/lookup`` would match ``GET /service/shipment/{id}`` and be
    asked for a token (A27: a wrong method is answered before authentication).
    """

    def __init__(self, app: ASGIApp, methods: Mapping[str, frozenset[str]]) -> None:
        self.app = app
        self.methods = methods

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        allowed = self.methods.get(scope["path"]) if scope["type"] == "http" else None
        if allowed is None or scope["method"] in allowed:
            await self.app(scope, receive, send)
            return
        message = f"method {scope['method']} not allowed for {scope['path']}"
        response = error_response(405, message, {"Allow": ", ".join(sorted(allowed))})
        await response(scope, receive, send)


# --- errors ----------------------------------------------------------------------------------------


def _exception_handlers() -> dict[Any, Callable[..., Any]]:
    async def api_error(_: Request, exc: Exception) -> Response:
        assert isinstance(exc, ApiError | AuthError)
        return error_response(exc.status, exc.message, exc.headers)

    async def criteria_error(_: Request, exc: Exception) -> Response:
        return error_response(400, str(exc))

    async def not_found(_: Request, exc: Exception) -> Response:
        return error_response(404, str(exc) or "not found")

    async def conflict(_: Request, exc: Exception) -> Response:
        return error_response(409, str(exc) or "already exists")

    async def http_exception(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        if exc.status_code == 404:
            message = f"no such path: {request.url.path}"
        elif exc.status_code == 405:
            message = f"method {request.method} not allowed for {request.url.path}"
        else:
            message = str(exc.detail)
        return error_response(exc.status_code, message, dict(exc.headers or {}))

    async def server_error(_: Request, exc: Exception) -> Response:
        return error_response(500, f"internal error: {type(exc).__name__}")

    return {
        ApiError: api_error,
        AuthError: api_error,
        CriteriaError: criteria_error,
        Invalid: criteria_error,
        NotFound: not_found,
        Conflict: conflict,
        HTTPException: http_exception,
        Exception: server_error,
    }


# --- request helpers ---------------------------------------------------------------------------------
