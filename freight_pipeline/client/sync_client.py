"""``FreightClient``: the blocking client. A thin driver of :class:`~freight_pipeline.client._core.ClientCore`."""

from __future__ import annotations

import threading
import time
from collections.abc import Generator, Iterable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any

import httpx

from freight_pipeline.client import endpoints as ep
from freight_pipeline.client._core import (
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_TIMEOUT,
    Action,
    Call,
    ClientCore,
    Expect,
    NeedToken,
    Reply,
    Send,
    Sleep,
    as_id,
    as_payload,
    event_type_param,
    parse_model,
)
from freight_pipeline.client.auth import DEFAULT_REFRESH_MARGIN_S
from freight_pipeline.client.models import (
    CarriageLeg,
    CodeConversion,
    Criterion,
    EFile,
    EFileReference,
    EFileRole,
    MemoLine,
    Shipment,
    ShipmentEvent,
    WebhookReceipt,
)
from freight_pipeline.client.paging import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, Page
from freight_pipeline.client.retry import DEFAULT_RETRY_POLICY, RetryPolicy
from freight_pipeline.client.stats import ClientStats
from freight_pipeline.config import ServiceSettings

Criteria = Iterable[Criterion | Mapping[str, Any]]
OrderBy = Sequence[str] | str | None


class FreightClient:
    """Blocking client of the whole freight interface; use as a context manager (or call ``close``).

    ``*_raw`` methods return the JSON exactly as received (dicts/lists); the typed methods return
    models built from it (each model also keeps it at ``.raw``). Lookups and scrolls return
    :class:`Page` objects that carry both. Thread-safe: one pooled ``httpx.Client`` and one token.
    """

    def __init__(
        self,
        base_url: str,
        username: str,
        password: str,
        *,
        webhook_username: str | None = None,
        webhook_password: str | None = None,
        retry: RetryPolicy = DEFAULT_RETRY_POLICY,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        token_refresh_margin: float = DEFAULT_REFRESH_MARGIN_S,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._core = ClientCore(
            base_url=base_url,
            username=username,
            password=password,
            webhook_username=webhook_username,
            webhook_password=webhook_password,
            retry=retry,
            token_refresh_margin=token_refresh_margin,
        )
        self._http = httpx.Client(
            timeout=timeout,
            limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections),
            transport=transport,
            follow_redirects=False,
        )
        self._token_lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: ServiceSettings, **kwargs: Any) -> FreightClient:
        return cls(settings.base_url, settings.username, settings.password, **kwargs)

    # --- lifecycle and introspection ---------------------------------------------------------

    def __enter__(self) -> FreightClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def __repr__(self) -> str:
        return f"FreightClient(base_url={self._core.base_url!r}, username={self._core.username!r})"

    @property
    def stats(self) -> ClientStats:
        return self._core.stats

    @property
    def base_url(self) -> str:
        return self._core.base_url

    @property
    def username(self) -> str:
        return self._core.username

    @property
    def retry_policy(self) -> RetryPolicy:
        return self._core.retry

    # --- driver ------------------------------------------------------------------------------

    def _drive(self, flow: Generator[Action, Any, Reply]) -> Reply:
        try:
            action = next(flow)
            while True:
                if isinstance(action, Send):
                    try:
                        result: Any = self._http.send(action.request)
                    except httpx.TransportError as exc:
                        result = exc
                elif isinstance(action, Sleep):
                    time.sleep(action.seconds)
                    result = None
                elif isinstance(action, NeedToken):
                    result = self._token(action)
                else:  # pragma: no cover
                    raise TypeError(f"unknown action {action!r}")
                action = flow.send(result)
        except StopIteration as stop:
            return stop.value
        finally:
            flow.close()

    def _token(self, need: NeedToken) -> str:
        token = self._core.valid_token(need.force, need.stale)
        if token is not None:
            return token
        with self._token_lock:
            token = self._core.valid_token(need.force, need.stale)
            if token is not None:
                return token
            return self._core.accept_token(self._drive(self._core.execute(self._core.token_call())))

    def _run(self, call: Call) -> Reply:
        return self._drive(self._core.execute(call))

    def _data(self, call: Call) -> Any:
        return self._run(call).data

    def authenticate(self) -> None:
        """Fetch a token now (otherwise the first call does); raises AuthenticationError early."""
        self._token(NeedToken())

    # --- shipments ---------------------------------------------------------------------------

    def lookup_shipments(
        self,
        criteria: Criteria,
        *,
        page_no: int = 0,
        page_size: int = DEFAULT_PAGE_SIZE,
        order_by: OrderBy = None,
        order_mode: OrderBy = None,
    ) -> Page[Shipment]:
        """One page of base shipments (``POST /service/shipment/lookup``); ``page.raw`` holds the JSON."""
        call = self._core.lookup(ep.SHIPMENT_LOOKUP, criteria, page_no, page_size, order_by, order_mode)
        return self._core.page(self._run(call), call, Shipment)

    def iter_shipment_pages(
        self,
        criteria: Criteria,
        *,
        page_size: int = MAX_PAGE_SIZE,
        order_by: OrderBy = None,
        order_mode: OrderBy = None,
    ) -> Iterator[Page[Shipment]]:
        """Every page of a shipment lookup, from page 0 until the last (by headers or a short page)."""
        criteria = list(criteria)
        page_no = 0
        while True:
            page = self.lookup_shipments(
                criteria, page_no=page_no, page_size=page_size, order_by=order_by, order_mode=order_mode
            )
            yield page
            if page.is_last:
                return
            page_no += 1

    def iter_shipments(
        self,
        criteria: Criteria,
        *,
        page_size: int = MAX_PAGE_SIZE,
        order_by: OrderBy = None,
        order_mode: OrderBy = None,
    ) -> Iterator[Shipment]:
        """Every base shipment of a lookup, all pages."""
        for page in self.iter_shipment_pages(criteria, page_size=page_size, order_by=order_by, order_mode=order_mode):
            yield from page.items

    def iter_shipments_raw(
        self,
        criteria: Criteria,
        *,
        page_size: int = MAX_PAGE_SIZE,
        order_by: OrderBy = None,
        order_mode: OrderBy = None,
    ) -> Iterator[dict[str, Any]]:
        """Every base shipment of a lookup as received (dicts), all pages."""
        for page in self.iter_shipment_pages(criteria, page_size=page_size, order_by=order_by, order_mode=order_mode):
            yield from page.raw

    def get_shipment_raw(self, shipment_id: int) -> dict[str, Any]:
        """The full shipment document as received (``GET /service/shipment/{id}``)."""
        return self._data(self._core.bodiless(ep.SHIPMENT_RETRIEVE, Expect.OBJECT, id=as_id(shipment_id)))

    def get_shipment(self, shipment_id: int) -> Shipment:
        call = self._core.bodiless(ep.SHIPMENT_RETRIEVE, Expect.OBJECT, id=as_id(shipment_id))
        return parse_model(Shipment, call, self._data(call))

    def get_shipment_events_raw(self, shipment_id: int) -> list[dict[str, Any]]:
        return self._data(self._core.bodiless(ep.SHIPMENT_EVENTS, Expect.ARRAY, id=as_id(shipment_id)))

    def get_shipment_events(self, shipment_id: int) -> list[ShipmentEvent]:
        call = self._core.bodiless(ep.SHIPMENT_EVENTS, Expect.ARRAY, id=as_id(shipment_id))
        return [parse_model(ShipmentEvent, call, item) for item in self._data(call)]

    def get_air_main_carriage_raw(self, shipment_id: int) -> list[dict[str, Any]]:
        return self._data(self._core.bodiless(ep.SHIPMENT_AIR_MAIN_CARRIAGE, Expect.ARRAY, id=as_id(shipment_id)))

    def get_air_main_carriage(self, shipment_id: int) -> list[CarriageLeg]:
        call = self._core.bodiless(ep.SHIPMENT_AIR_MAIN_CARRIAGE, Expect.ARRAY, id=as_id(shipment_id))
        return [parse_model(CarriageLeg, call, item) for item in self._data(call)]

    def get_sea_main_carriage_raw(self, shipment_id: int) -> list[dict[str, Any]]:
        return self._data(self._core.bodiless(ep.SHIPMENT_SEA_MAIN_CARRIAGE, Expect.ARRAY, id=as_id(shipment_id)))

    def get_sea_main_carriage(self, shipment_id: int) -> list[CarriageLeg]:
        call = self._core.bodiless(ep.SHIPMENT_SEA_MAIN_CARRIAGE, Expect.ARRAY, id=as_id(shipment_id))
        return [parse_model(CarriageLeg, call, item) for item in self._data(call)]

    def create_shipment_event(
        self, shipment_id: int, event: ShipmentEvent | Mapping[str, Any], *, event_type: str | None = None
    ) -> ShipmentEvent | None:
        """Create an event (``POST .../event?type=``); type from ``event_type`` or the event's ``type``.

        Not retried unless the service provably did not process it (see ``retry``). Returns the
        created event, or None when the service answers without a body.
        """
        body = as_payload(event)
        call = self._core.send_json(
            ep.SHIPMENT_EVENT_CREATE,
            Expect.OPTIONAL_JSON,
            body,
            event_type_param(event_type, body),
            shipmentId=as_id(shipment_id, "shipment_id"),
        )
        data = self._data(call)
        return parse_model(ShipmentEvent, call, data) if isinstance(data, dict) else None

    def update_shipment_event(
        self,
        shipment_id: int,
        event_code: str,
        event: ShipmentEvent | Mapping[str, Any],
        *,
        event_type: str | None = None,
    ) -> ShipmentEvent | None:
        """Update the event ``event_code`` of that type (``PUT .../event/{code}?type=``)."""
        body = as_payload(event)
        call = self._core.send_json(
            ep.SHIPMENT_EVENT_UPDATE,
            Expect.OPTIONAL_JSON,
            body,
            event_type_param(event_type, body),
            shipmentId=as_id(shipment_id, "shipment_id"),
            id=event_code,
        )
        data = self._data(call)
        return parse_model(ShipmentEvent, call, data) if isinstance(data, dict) else None

    # --- memos -------------------------------------------------------------------------------

    def lookup_memos(
        self,
        criteria: Criteria,
        *,
        page_no: int = 0,
        page_size: int = DEFAULT_PAGE_SIZE,
        order_by: OrderBy = None,
        order_mode: OrderBy = None,
    ) -> Page[MemoLine]:
        call = self._core.lookup(ep.MEMO_LOOKUP, criteria, page_no, page_size, order_by, order_mode)
        return self._core.page(self._run(call), call, MemoLine)

    def iter_memos(
        self,
        criteria: Criteria,
        *,
        page_size: int = MAX_PAGE_SIZE,
        order_by: OrderBy = None,
        order_mode: OrderBy = None,
    ) -> Iterator[MemoLine]:
        criteria = list(criteria)
        page_no = 0
        while True:
            page = self.lookup_memos(
                criteria, page_no=page_no, page_size=page_size, order_by=order_by, order_mode=order_mode
            )
            yield from page.items
            if page.is_last:
                return
            page_no += 1

    def scroll_memos_page(self, *, page_no: int = 0, page_size: int = DEFAULT_PAGE_SIZE) -> Page[MemoLine]:
        """One page of all memo lines (``GET /service/shipment/memo``, assumption A15)."""
        call = self._core.scroll(ep.MEMO_SCROLL, page_no, page_size)
        return self._core.page(self._run(call), call, MemoLine)

    def iter_memo_pages(self, *, page_size: int = MAX_PAGE_SIZE) -> Iterator[Page[MemoLine]]:
        """Every page of all memo lines."""
        page_no = 0
        while True:
            page = self.scroll_memos_page(page_no=page_no, page_size=page_size)
            yield page
            if page.is_last:
                return
            page_no += 1

    def get_memo_raw(self, memo_id: int) -> dict[str, Any]:
        return self._data(self._core.bodiless(ep.MEMO_RETRIEVE, Expect.OBJECT, id=as_id(memo_id)))

    def get_memo(self, memo_id: int) -> MemoLine:
        call = self._core.bodiless(ep.MEMO_RETRIEVE, Expect.OBJECT, id=as_id(memo_id))
        return parse_model(MemoLine, call, self._data(call))

    # --- code conversions --------------------------------------------------------------------

    def lookup_code_conversions(
        self,
        criteria: Criteria,
        *,
        page_no: int = 0,
        page_size: int = DEFAULT_PAGE_SIZE,
        order_by: OrderBy = None,
        order_mode: OrderBy = None,
    ) -> Page[CodeConversion]:
        call = self._core.lookup(ep.CODE_CONVERSION_LOOKUP, criteria, page_no, page_size, order_by, order_mode)
        return self._core.page(self._run(call), call, CodeConversion)

    def iter_code_conversions(
        self,
        criteria: Criteria,
        *,
        page_size: int = MAX_PAGE_SIZE,
        order_by: OrderBy = None,
        order_mode: OrderBy = None,
    ) -> Iterator[CodeConversion]:
        criteria = list(criteria)
        page_no = 0
        while True:
            page = self.lookup_code_conversions(
                criteria, page_no=page_no, page_size=page_size, order_by=order_by, order_mode=order_mode
            )
            yield from page.items
            if page.is_last:
                return
            page_no += 1

    def scroll_code_conversions_page(
        self, *, page_no: int = 0, page_size: int = DEFAULT_PAGE_SIZE
    ) -> Page[CodeConversion]:
        """One page of all code conversion records (``GET /service/basicdata/codeconverter``, A15)."""
        call = self._core.scroll(ep.CODE_CONVERSION_SCROLL, page_no, page_size)
        return self._core.page(self._run(call), call, CodeConversion)

    def iter_code_conversion_pages(self, *, page_size: int = MAX_PAGE_SIZE) -> Iterator[Page[CodeConversion]]:
        """Every page of all code conversion records."""
        page_no = 0
        while True:
            page = self.scroll_code_conversions_page(page_no=page_no, page_size=page_size)
            yield page
            if page.is_last:
                return
            page_no += 1

    def get_code_conversion_raw(self, conversion_id: int) -> dict[str, Any]:
        return self._data(self._core.bodiless(ep.CODE_CONVERSION_RETRIEVE, Expect.OBJECT, id=as_id(conversion_id)))

    def get_code_conversion(self, conversion_id: int) -> CodeConversion:
        call = self._core.bodiless(ep.CODE_CONVERSION_RETRIEVE, Expect.OBJECT, id=as_id(conversion_id))
        return parse_model(CodeConversion, call, self._data(call))

    # --- E-File ------------------------------------------------------------------------------

    def store_efile(self, efile: EFile | Mapping[str, Any]) -> EFile:
        """Store a document (``POST /service/efile``); returns it with its id. Not retried blindly."""
        call = self._core.send_json(ep.EFILE_STORE, Expect.OBJECT, as_payload(efile))
        return parse_model(EFile, call, self._data(call))

    def get_efile_raw(self, efile_id: int, *, cascade: bool = False) -> dict[str, Any]:
        params = [("cascade", "true" if cascade else "false")]
        return self._data(self._core.bodiless(ep.EFILE_RETRIEVE, Expect.OBJECT, params, id=as_id(efile_id)))

    def get_efile(self, efile_id: int, *, cascade: bool = False) -> EFile:
        """An E-File; with ``cascade=True`` including its references and roles."""
        params = [("cascade", "true" if cascade else "false")]
        call = self._core.bodiless(ep.EFILE_RETRIEVE, Expect.OBJECT, params, id=as_id(efile_id))
        return parse_model(EFile, call, self._data(call))

    def delete_efile(self, efile_id: int) -> EFile | None:
        """Delete an E-File; returns the deleted record (None if the service sends no body)."""
        call = self._core.bodiless(ep.EFILE_DELETE, Expect.OPTIONAL_JSON, id=as_id(efile_id))
        data = self._data(call)
        return parse_model(EFile, call, data) if isinstance(data, dict) else None

    def get_efile_references_raw(self, efile_id: int) -> list[dict[str, Any]]:
        return self._data(self._core.bodiless(ep.EFILE_REFERENCES, Expect.ARRAY, id=as_id(efile_id)))

    def get_efile_references(self, efile_id: int) -> list[EFileReference]:
        call = self._core.bodiless(ep.EFILE_REFERENCES, Expect.ARRAY, id=as_id(efile_id))
        return [parse_model(EFileReference, call, item) for item in self._data(call)]

    def add_efile_reference(self, efile_id: int, reference: EFileReference | Mapping[str, Any]) -> None:
        self._run(
            self._core.send_json(ep.EFILE_REFERENCE_ADD, Expect.NOTHING, as_payload(reference), id=as_id(efile_id))
        )

    def delete_efile_reference(self, efile_id: int, reference: EFileReference | Mapping[str, Any]) -> None:
        self._run(
            self._core.send_json(ep.EFILE_REFERENCE_DELETE, Expect.NOTHING, as_payload(reference), id=as_id(efile_id))
        )

    def get_efile_roles_raw(self, efile_id: int) -> list[dict[str, Any]]:
        return self._data(self._core.bodiless(ep.EFILE_ROLES, Expect.ARRAY, id=as_id(efile_id)))

    def get_efile_roles(self, efile_id: int) -> list[EFileRole]:
        call = self._core.bodiless(ep.EFILE_ROLES, Expect.ARRAY, id=as_id(efile_id))
        return [parse_model(EFileRole, call, item) for item in self._data(call)]

    def add_efile_role(self, efile_id: int, role: str) -> None:
        """Link a role; the spec sends it as a ``text/plain`` body."""
        if not isinstance(role, str) or not role.strip():
            raise ValueError(f"role must be a non-empty string, got {role!r}")
        self._run(Call(ep.EFILE_ROLE_ADD, Expect.NOTHING, path_params={"id": as_id(efile_id)}, text_body=role))

    def delete_efile_role(self, efile_id: int, role: EFileRole | Mapping[str, Any] | str) -> None:
        """Unlink a role; the body is an EFileRole (a plain name is sent as ``{"role": name}``)."""
        body = {"role": role} if isinstance(role, str) else as_payload(role)
        self._run(self._core.send_json(ep.EFILE_ROLE_DELETE, Expect.NOTHING, body, id=as_id(efile_id)))

    def lookup_efiles(
        self,
        criteria: Criteria,
        *,
        page_no: int = 0,
        page_size: int = DEFAULT_PAGE_SIZE,
        order_by: OrderBy = None,
        order_mode: OrderBy = None,
    ) -> Page[EFile]:
        """E-Files by REFERENCE or SHIPMENT_ID (results carry no document, A19)."""
        call = self._core.lookup(ep.EFILE_LOOKUP, criteria, page_no, page_size, order_by, order_mode)
        return self._core.page(self._run(call), call, EFile)

    def iter_efiles(
        self,
        criteria: Criteria,
        *,
        page_size: int = MAX_PAGE_SIZE,
        order_by: OrderBy = None,
        order_mode: OrderBy = None,
    ) -> Iterator[EFile]:
        criteria = list(criteria)
        page_no = 0
        while True:
            page = self.lookup_efiles(
                criteria, page_no=page_no, page_size=page_size, order_by=order_by, order_mode=order_mode
            )
            yield from page.items
            if page.is_last:
                return
            page_no += 1

    # --- webhook -----------------------------------------------------------------------------

    def send_webhook(self, payload: Mapping[str, Any]) -> WebhookReceipt | None:
        """``POST /external/webhook`` with basic auth (webhook credentials). Not retried blindly."""
        if not isinstance(payload, Mapping):
            raise TypeError("the webhook payload must be a JSON object (a mapping)")
        call = self._core.send_json(ep.WEBHOOK, Expect.OPTIONAL_JSON, dict(payload))
        data = self._data(call)
        return parse_model(WebhookReceipt, call, data) if isinstance(data, dict) else None
