"""The simulator's service endpoints: one method per route of the spec (``Endpoints.routes``), the
store's scans and writes in a worker thread (a record's read on the event loop), the answers in the A3
shapes. ``app.py`` assembles them with the control surface, the method guard and the fault edge into the
ASGI app."""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from freight_pipeline.simulator.auth import AuthError
from freight_pipeline.simulator.config import WEBHOOK_ROLE, FaultConfig, UserConfig
from freight_pipeline.simulator.corruptions import Answer
from freight_pipeline.simulator.data_efile import efile_in_shape, reference_from_shape, references_in_shape
from freight_pipeline.simulator.http_base import ApiError, JsonAnswer, ServiceState, json_body, json_object
from freight_pipeline.simulator.json_text import loads
from freight_pipeline.simulator.lookup.match import page_of, run_lookup
from freight_pipeline.simulator.lookup.parse import parse_criteria, parse_page_request
from freight_pipeline.simulator.lookup.specs import (
    CODE_CONVERSION_SPEC,
    EFILE_SPEC,
    MEMO_SPEC,
    SHIPMENT_SPEC,
    ResultCache,
    any_of_values,
    cached_lookup,
    equals_value,
    in_millis,
)
from freight_pipeline.simulator.lookup.types import Criterion, LookupSpec, Page, PageRequest
from freight_pipeline.simulator.releases import base_in_release, in_release, shapes
from freight_pipeline.simulator.store_api import EVENT_CODES, EVENT_TYPES, NotFound

T = TypeVar("T")
_INT_RE = re.compile(r"^[+-]?\d{1,19}$")


def query_bool(request: Request, name: str, default: bool = False) -> bool:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise ApiError(400, f"query parameter {name} must be true or false, got {raw!r}")


def _query_int(request: Request, name: str, default: int) -> int:
    """A non-negative integer query parameter (a size at least 1); 400 for anything else."""
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ApiError(400, f"query parameter {name} must be an integer, got {raw!r}") from None
    if value < (1 if name == "size" else 0):
        raise ApiError(400, f"query parameter {name} is out of range: {raw!r}")
    return value


def event_type(request: Request) -> str:
    raw = request.query_params.get("type")
    if not raw:
        raise ApiError(400, f"query parameter type is required ({' or '.join(EVENT_TYPES)})")
    if raw not in EVENT_TYPES:
        raise ApiError(400, f"bad query parameter type {raw!r}; allowed: {', '.join(EVENT_TYPES)}")
    return raw


def page_request(request: Request, spec: LookupSpec | None, faults: FaultConfig) -> PageRequest:
    """The paging of a lookup or scroll; with ``faults.max_page_size``, pages of at most that many rows are served,
    with ``faults.fixed_page_size`` pages of that many; with ``faults.page_size_limit``, a larger ``page_size`` is
    refused."""
    q = request.query_params
    paging = parse_page_request(
        q.get("page_no"), q.get("page_size"), q.getlist("order_by"), q.getlist("order_mode"), spec
    )
    if faults.page_size_limit is not None and paging.page_size > faults.page_size_limit:
        raise ApiError(400, f"page_size must be between 1 and {faults.page_size_limit}, got {paging.page_size}")
    if faults.max_page_size is not None and paging.page_size > faults.max_page_size:
        paging = dataclasses.replace(paging, page_size=faults.max_page_size)
    if faults.fixed_page_size is not None:
        paging = dataclasses.replace(paging, page_size=faults.fixed_page_size)
    return paging


def paged_json(items: list[Any], page: Page) -> JsonAnswer:
    return JsonAnswer(items, headers=page.headers())


def answer(payload: Any, headers: Mapping[str, str] | None = None) -> Response:
    """``payload`` as JSON, or a corrupted :class:`Answer` as it is (``corruptions``)."""
    if isinstance(payload, Answer):
        return Response(payload.body, status_code=payload.status, media_type="application/json")
    return JsonAnswer(payload, headers=dict(headers or {}))


async def in_thread(fn: Callable[..., T], *args: Any) -> T:
    return await run_in_threadpool(fn, *args)


# --- endpoints ---------------------------------------------------------------------------------------


class Endpoints:
    """Every business endpoint of the spec, plus the token endpoint and the webhook."""

    def __init__(self, state: ServiceState) -> None:
        self.state = state
        self.store = state.store
        self._cache = ResultCache()

    def routes(self) -> list[BaseRoute]:
        r = Route
        return [
            r("/auth/token", self.token, methods=["POST"]),
            r("/external/webhook", self.webhook, methods=["POST"]),
            r("/service/shipment/lookup", self.shipment_lookup, methods=["POST"]),
            r("/service/shipment/memo/lookup", self.memo_lookup, methods=["POST"]),
            r("/service/shipment/memo", self.memo_scroll, methods=["GET"]),
            r("/service/shipment/memo/{id}", self.memo_retrieve, methods=["GET"]),
            r("/service/shipment/{id}", self.shipment_retrieve, methods=["GET"]),
            r("/service/shipment/{id}/events", self.events, methods=["GET"]),
            r("/service/shipment/{id}/airmaincarriage", self.air_main_carriage, methods=["GET"]),
            r("/service/shipment/{id}/seamaincarriage", self.sea_main_carriage, methods=["GET"]),
            r("/service/shipment/{shipmentId}/event", self.event_create, methods=["POST"]),
            r("/service/shipment/{shipmentId}/event/{id}", self.event_update, methods=["PUT"]),
            r("/service/efile", self.efile_store, methods=["POST"]),
            r("/service/efile/lookup", self.efile_lookup, methods=["POST"]),
            r("/service/efile/{id}", self.efile_retrieve, methods=["GET"]),
            r("/service/efile/{id}", self.efile_delete, methods=["DELETE"]),
            r("/service/efile/{id}/reference", self.efile_references, methods=["GET"]),
            r("/service/efile/{id}/reference", self.efile_reference_add, methods=["POST"]),
            r("/service/efile/{id}/reference", self.efile_reference_delete, methods=["DELETE"]),
            r("/service/efile/{id}/role", self.efile_roles, methods=["GET"]),
            r("/service/efile/{id}/role", self.efile_role_add, methods=["POST"]),
            r("/service/efile/{id}/role", self.efile_role_delete, methods=["DELETE"]),
            r("/service/basicdata/codeconverter/lookup", self.codeconverter_lookup, methods=["POST"]),
            r("/service/basicdata/codeconverter", self.codeconverter_scroll, methods=["GET"]),
            r("/service/basicdata/codeconverter/{id}", self.codeconverter_retrieve, methods=["GET"]),
        ]

    # --- helpers ------------------------------------------------------------------------------------

    def _user(self, request: Request, permission: str) -> UserConfig:
        user = self.state.auth.bearer_user(request.headers.get("authorization"))
        self.state.auth.require_permission(user, permission)
        self._refuse_forbidden(request, user, permission)
        return user

    def _refuse_forbidden(self, request: Request, user: UserConfig, permission: str) -> None:
        """403 for every user on a path under ``forbidden_prefixes`` (a permission the operator did not grant)."""
        prefix = self.state.faults.config.forbidden(request.scope["path"])  # not request.url: parsed, a URL costs
        if prefix is not None:
            raise AuthError(
                403, f"user {user.username!r} lacks permission {permission!r} for this endpoint "
                f"(not granted for {prefix})"
            )

    def _id(self, request: Request, name: str = "id") -> int:
        raw = request.path_params[name]
        if not _INT_RE.match(raw):
            raise ApiError(400, f"path parameter {name} must be an integer, got {raw!r}")
        return int(raw)

    async def _lookup(self, request: Request, spec: LookupSpec) -> tuple[list[Any], PageRequest]:
        paging = page_request(request, spec, self.state.faults.config)
        strict = self.state.faults.config.strict_criteria
        criteria = parse_criteria(await json_body(request, empty=[]), spec, strict)
        return criteria, paging

    # --- auth and webhook ------------------------------------------------------------------------------

    async def token(self, request: Request) -> Response:
        body = await json_body(request)
        if self.state.faults.config.token_echo:  # FastAPI's 422, the body echoed as Python's json escapes it
            echo = {"detail": [{"type": "missing", "loc": ["body", "user"], "msg": "Field required", "input": body}]}
            return Response(json.dumps(echo), status_code=422, media_type="application/json")
        try:
            answer = self.state.auth.issue_token(body, self.state.faults.config.token_activation_ms / 1000)
        except ValueError as exc:
            raise ApiError(400, str(exc)) from None
        return JsonAnswer(answer, headers={"Cache-Control": "no-store"})

    async def webhook(self, request: Request) -> Response:
        user = self.state.auth.basic_user(request.headers.get("authorization"), WEBHOOK_ROLE)
        self._refuse_forbidden(request, user, WEBHOOK_ROLE)
        body = await json_body(request)
        if not isinstance(body, dict):
            raise ApiError(400, "webhook body must be a JSON object")
        received_id = await in_thread(self.store.webhooks.record, body)
        return JsonAnswer({"received": True, "id": received_id})

    # --- shipments -----------------------------------------------------------------------------------

    async def shipment_lookup(self, request: Request) -> Response:
        self._user(request, "shipment:lookup")
        criteria, paging = await self._lookup(request, SHIPMENT_SPEC)
        return await in_thread(self._shipment_page, criteria, paging)

    def _shipment_page(self, criteria: list[Criterion], paging: PageRequest) -> Response:
        if paging.page_no > 0:
            count = self.state.faults.paging_modification()
            if count:
                self.store.changes.modify_shipments(count)
        if getattr(self.store.clock, "fractional_stamps", False):  # a store without the mode stamps whole seconds
            criteria = in_millis(criteria, "LAST_MODIFIED_TIME")
        version = self.store.reader.version()  # before the rows: a cached result is never older than its version
        page = cached_lookup(
            self.store.reader.shipment_key_rows, criteria, paging, SHIPMENT_SPEC, self._cache, version
        )
        items = []
        for row in page.rows:
            try:
                items.append(base_in_release(self.state.release, self.store.reader.get_base_shipment(int(row["ID"]))))
            except NotFound:  # deleted between the scan and now
                continue
        return paged_json(items, page)

    async def _record(self, request: Request, permission: str, endpoint: str,
                      read: Callable[[int], Any] | None = None) -> Response:
        """One record's answer (a retrieve or a shipment's detail list) as ``read`` reads it, with its corruptions
        applied. A shipment's record endpoints (no ``read``) answer the JSON the store wrote of the record once
        (``ReaderAPI.record_json``) as it is, where neither the release nor a corruption changes it."""
        self._user(request, permission)
        record_id = self._id(request)
        release = self.state.release
        # read on the event loop: a record's read is one lock and its cached JSON (a thread's hop for it was a
        # fifth of the simulator's CPU); lookups and writes, which scan or change the store, go to a thread
        if read is None:
            text = self.store.reader.record_json(endpoint, record_id)
            if self.state.faults.config.no_content_when_empty and text == b"[]":
                return Response(status_code=204)
            if not shapes(release, endpoint) and not self.state.corruptions.of(endpoint, record_id):
                return Response(text, media_type=JsonAnswer.media_type)
            record = loads(text)
        else:
            record = read(record_id)
        return answer(self.state.corruptions.apply(endpoint, record_id, in_release(release, endpoint, record)))

    async def shipment_retrieve(self, request: Request) -> Response:
        return await self._record(request, "shipment:retrieve", "shipment")

    async def events(self, request: Request) -> Response:
        return await self._record(request, "shipment:events", "events")

    async def air_main_carriage(self, request: Request) -> Response:
        return await self._record(request, "shipment:carriage", "airmaincarriage")

    async def sea_main_carriage(self, request: Request) -> Response:
        return await self._record(request, "shipment:carriage", "seamaincarriage")

    async def event_create(self, request: Request) -> Response:
        self._user(request, "shipment:event-write")
        shipment_id = self._id(request, "shipmentId")
        kind = event_type(request)
        body = await json_object(request, "a ShipmentEvent")
        code = body.get("event")
        if code not in EVENT_CODES:
            raise ApiError(400, f"bad or missing event code {code!r} in the body")
        created = await in_thread(self.store.events.create, shipment_id, kind, body)
        return JsonAnswer(created, status_code=201)

    async def event_update(self, request: Request) -> Response:
        self._user(request, "shipment:event-write")
        shipment_id = self._id(request, "shipmentId")
        code = request.path_params["id"]
        if code not in EVENT_CODES:
            raise ApiError(400, f"unknown event code {code!r} in the path")
        kind = event_type(request)
        body = await json_body(request, empty={})
        if not isinstance(body, dict):
            raise ApiError(400, "request body must be a JSON object (a ShipmentEvent)")
        if body.get("event") not in (None, code):
            raise ApiError(400, f"event code {body.get('event')!r} in the body differs from {code!r} in the path")
        updated = await in_thread(self.store.events.update, shipment_id, code, kind, body)
        return JsonAnswer(updated)

    # --- memos and code conversions --------------------------------------------------------------------

    async def memo_lookup(self, request: Request) -> Response:
        self._user(request, "memo:read")
        criteria, paging = await self._lookup(request, MEMO_SPEC)
        client = equals_value(criteria, "CLIENT")
        numbers = any_of_values(criteria, "SHIPMENT_NUMBER")
        if self.state.faults.config.memo_lookup_by_one and numbers is not None and len(numbers) > 1:
            raise ApiError(400, "SHIPMENT_NUMBER takes one value in the memo lookup")
        if self.state.faults.config.memo_order_refused and request.query_params.getlist("order_by"):
            raise ApiError(400, "order_by: the memo lookup has no such key")
        page = await in_thread(self._memo_page, criteria, paging, client, numbers)
        items: Any = in_release(self.state.release, "memos", list(page.rows))
        if self.state.corruptions.record_ids("memos") and client is not None and numbers:
            items = await in_thread(self._memos_corrupted, client, numbers, items)
        return answer(items, page.headers())

    def _memos_corrupted(self, client: str, numbers: tuple[Any, ...], items: list[dict[str, Any]]) -> Any:
        """A memo lookup's page with the corruptions of the shipments it asks for by client and number. The lookup of
        one shipment answers as its record is corrupted; in a lookup of several, each corrupted shipment's own lines
        are changed where they stand (its whole-answer corruptions, a status or a cut body, end the lookup, as a
        service failing on one record would)."""
        corrupted: dict[str, int] = {}
        for shipment_id in self.state.corruptions.record_ids("memos"):
            try:
                base = self.store.reader.get_base_shipment(shipment_id)
            except NotFound:
                continue
            if base.get("client") == client and base.get("shipment_number") in numbers:
                corrupted[base["shipment_number"]] = shipment_id
        if len(numbers) == 1:
            return self.state.corruptions.apply("memos", corrupted[numbers[0]], items) if corrupted else items
        for number, shipment_id in corrupted.items():
            where = [i for i, item in enumerate(items) if item.get("shipment_number") == number]
            if not where:
                continue
            changed = self.state.corruptions.apply("memos", shipment_id, [items[i] for i in where])
            if isinstance(changed, Answer):
                return changed
            moved = set(where)
            kept = [item for i, item in enumerate(items) if i not in moved]
            items = [*kept[:where[0]], *(changed if isinstance(changed, list) else [changed]), *kept[where[0]:]]
        return items

    def _memo_page(self, criteria: list[Criterion], paging: PageRequest, client: Any | None,
                   numbers: tuple[Any, ...] | None) -> Page:
        """The memo lookup; ``client`` (CLIENT EQUALS) with ``numbers`` (SHIPMENT_NUMBER EQUALS or IN: the sync's
        queries) reads those shipments' lines by their index."""
        rows: Iterable[Mapping[str, Any]] = (
            [row for number in dict.fromkeys(numbers) for row in self.store.reader.memo_rows_of(client, number)]
            if client is not None and numbers else self.store.reader.memo_rows()
        )
        return run_lookup(rows, criteria, paging, MEMO_SPEC)

    async def memo_scroll(self, request: Request) -> Response:
        self._user(request, "memo:read")
        release = self.state.release
        return await self._scroll(request, lambda: in_release(release, "memos", list(self.store.reader.memo_rows())))

    async def memo_retrieve(self, request: Request) -> Response:
        self._user(request, "memo:read")
        (line,) = in_release(self.state.release, "memos", [await in_thread(self.store.reader.get_memo,
                                                                            self._id(request))])
        return JsonAnswer(line)

    async def codeconverter_lookup(self, request: Request) -> Response:
        self._user(request, "codeconverter:read")
        spec = CODE_CONVERSION_SPEC
        criteria, paging = await self._lookup(request, spec)
        page = await in_thread(_run_lookup, self.store.reader.code_conversion_rows, criteria, paging, spec)
        return paged_json(self.state.corruptions.apply_to_items("codeconverter", list(page.rows)), page)

    async def codeconverter_scroll(self, request: Request) -> Response:
        self._user(request, "codeconverter:read")
        return await self._scroll(request, self.store.reader.code_conversion_rows, "codeconverter")

    async def codeconverter_retrieve(self, request: Request) -> Response:
        return await self._record(request, "codeconverter:read", "codeconverter", self.store.reader.get_code_conversion)

    async def _scroll(self, request: Request, rows: Callable[[], Any], endpoint: str | None = None) -> Response:
        paging = page_request(request, None, self.state.faults.config)
        unpaged = not self.state.faults.config.scroll_paging  # every record at once, whatever the query asks
        first_rows = self.state.faults.config.scroll_first_rows  # these first rows, whatever the query asks

        def run() -> Page:
            ordered = sorted(rows(), key=lambda row: row["id"])
            if first_rows is not None:
                return page_of(ordered, PageRequest(page_size=first_rows))
            return page_of(ordered, PageRequest(page_size=max(1, len(ordered))) if unpaged else paging)

        if self.state.faults.config.scroll_page_object:
            return await self._spring_page(request, rows, endpoint)
        page = await in_thread(run)
        items = list(page.rows)
        if endpoint is not None:
            items = self.state.corruptions.apply_to_items(endpoint, items)
        return paged_json(items, page) if self.state.faults.config.scroll_headers else JsonAnswer(items)

    async def _spring_page(self, request: Request, rows: Callable[[], Any], endpoint: str | None) -> Response:
        """A scroll as a Spring Data ``Page``: its own ``page`` / ``size`` parameters, the records in ``content``."""
        number, size = (_query_int(request, name, default) for name, default in (("page", 0), ("size", 20)))
        ordered = await in_thread(lambda: sorted(rows(), key=lambda row: row["id"]))
        items = ordered[number * size:(number + 1) * size]
        if endpoint is not None:
            items = self.state.corruptions.apply_to_items(endpoint, items)
        return JsonAnswer({"content": items, "totalElements": len(ordered), "totalPages": -(-len(ordered) // size),
                           "number": number, "size": size})

    # --- E-File ------------------------------------------------------------------------------------------

    async def efile_store(self, request: Request) -> Response:
        self._user(request, "efile:write")
        body = await json_object(request, "an EFile")
        document = body.get("document")
        if not isinstance(document, str) or not document:
            raise ApiError(400, "document is required: the base64-encoded file content")
        try:
            base64.b64decode(document, validate=True)
        except (binascii.Error, ValueError):
            raise ApiError(400, "document is not valid base64") from None
        shape = self._reference_shape()
        if shape != "type" and isinstance(body.get("references"), list):
            body = {**body, "references": [reference_from_shape(r) for r in body["references"]]}
        stored = await in_thread(self.store.efiles.store, body)
        return JsonAnswer(efile_in_shape(stored, shape), status_code=201)

    async def efile_lookup(self, request: Request) -> Response:
        self._user(request, "efile:read")
        criteria, paging = await self._lookup(request, EFILE_SPEC)
        shipment_ids = any_of_values(criteria, "SHIPMENT_ID")
        page = await in_thread(_run_lookup, lambda: self.store.efiles.rows(shipment_ids), criteria, paging,
                               EFILE_SPEC)
        items = [_efile_summary(row) for row in page.rows]
        return paged_json(items, page)

    async def efile_retrieve(self, request: Request) -> Response:
        self._user(request, "efile:read")  # before the query is read: 401 comes before 400
        cascade = query_bool(request, "cascade")
        shape = self._reference_shape()

        def read(efile_id: int) -> dict[str, Any]:
            return efile_in_shape(self.store.efiles.get(efile_id, cascade), shape)

        return await self._record(request, "efile:read", "efile", read)

    async def efile_delete(self, request: Request) -> Response:
        self._user(request, "efile:delete")
        deleted = await in_thread(self.store.efiles.delete, self._id(request))
        return JsonAnswer(efile_in_shape(deleted, self._reference_shape()))

    async def efile_references(self, request: Request) -> Response:
        shape = self._reference_shape()

        def read(efile_id: int) -> list[dict[str, Any]]:
            return references_in_shape(self.store.efiles.references(efile_id), shape)

        return await self._record(request, "efile:read", "efilereferences", read)

    async def efile_reference_add(self, request: Request) -> Response:
        self._user(request, "efile:write")
        efile_id = self._id(request)
        body = await self._reference_body(request)
        await in_thread(self.store.efiles.add_reference, efile_id, body)
        return Response(status_code=200)

    async def efile_reference_delete(self, request: Request) -> Response:
        self._user(request, "efile:write")
        efile_id = self._id(request)
        body = await self._reference_body(request)
        await in_thread(self.store.efiles.delete_reference, efile_id, body)
        return Response(status_code=200)

    def _reference_shape(self) -> str:
        return self.state.faults.config.efile_reference_shape

    async def _reference_body(self, request: Request) -> Any:
        """An EFileReference body; in the ``key`` shape one sent in that shape is read too."""
        body = await json_object(request, "an EFileReference")
        return body if self._reference_shape() == "type" else reference_from_shape(body)

    async def efile_roles(self, request: Request) -> Response:
        return await self._record(request, "efile:read", "efileroles", self.store.efiles.roles)

    async def efile_role_add(self, request: Request) -> Response:
        self._user(request, "efile:write")
        efile_id = self._id(request)
        role = await _text_body(request)
        if not role:
            raise ApiError(400, "request body must be the role as text/plain")
        await in_thread(self.store.efiles.add_role, efile_id, role)
        return Response(status_code=200)

    async def efile_role_delete(self, request: Request) -> Response:
        self._user(request, "efile:write")
        efile_id = self._id(request)
        body = await json_object(request, "an EFileRole")
        await in_thread(self.store.efiles.delete_role, efile_id, body)
        return Response(status_code=200)


def _run_lookup(
    rows: Callable[[], Any], criteria: list[Criterion], paging: PageRequest, spec: LookupSpec
) -> Page:
    """A lookup over ``rows()``, read in the calling (worker) thread."""
    return run_lookup(rows(), criteria, paging, spec)


def _efile_summary(row: Mapping[str, Any]) -> dict[str, Any]:
    """A19: lookup results are EFiles without document and without cascade."""
    return {**{k: v for k, v in row.items() if k != "document"}, "references": None, "roles": None}


async def _text_body(request: Request) -> str:
    """The text/plain role; a JSON string (sent as application/json) is accepted too."""
    raw = await request.body()
    try:
        text = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise ApiError(400, "role must be UTF-8 text") from None
    if "json" in request.headers.get("content-type", "") and text.startswith('"'):
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            raise ApiError(400, "malformed JSON string body") from None
        text = value.strip() if isinstance(value, str) else ""
    return text
