"""``FreightClient``: the blocking client.

A thin driver of :class:`~freight_pipeline.client._core.ClientCore`.

GENERATED from ``async_client.py`` by ``scripts/unasync.py``: edit that file, then run the script.
Same methods as :class:`~freight_pipeline.client.async_client.AsyncFreightClient`, blocking.
Thread-safe: at most ``max_concurrency`` requests are in flight at once (default 8), in any threads.

This module holds the endpoint methods, each a line or two; the driver they run on (transport,
limit, token, lifecycle, the shared helpers) is the base class,
:class:`~freight_pipeline.client._sync_driver.SyncDriver` (generated too).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from freight_pipeline.client import endpoints as ep
from freight_pipeline.client._sync_driver import Criteria, M, OrderBy, SyncDriver
from freight_pipeline.client.calls import (
    Expect,
    as_payload,
    by_id,
    efile_reference,
    efile_retrieve,
    efile_role_add,
    efile_role_delete,
    event_write,
    lookup,
    records,
    scroll,
    send_json,
    webhook,
)
from freight_pipeline.client.endpoints import Endpoint
from freight_pipeline.client.models.common import CarriageLeg
from freight_pipeline.client.models.other_groups import CodeConversion, EFile, EFileReference, EFileRole, WebhookReceipt
from freight_pipeline.client.models.shipment import MemoLine, Shipment, ShipmentEvent
from freight_pipeline.client.paging import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, Page


class FreightClient(SyncDriver):
    """Blocking client of the whole freight interface; use ``with`` (or ``close()``).

    ``*_raw`` methods return the JSON exactly as received (dicts/lists); the typed methods return
    models built from it (each model also keeps it at ``.raw``). Lookups and scrolls return
    :class:`Page` objects that carry both. One pooled ``httpx.Client`` and one token per client.
    """

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
        call = lookup(ep.SHIPMENT_LOOKUP, criteria, page_no, page_size, order_by, order_mode)
        return self._page(Shipment, call)

    def iter_shipment_pages(
        self,
        criteria: Criteria,
        *,
        page_size: int = MAX_PAGE_SIZE,
        order_by: OrderBy = None,
        order_mode: OrderBy = None,
    ) -> Iterator[Page[Shipment]]:
        """Every page of a shipment lookup, from page 0 until the last (see ``paging.PageWalk``)."""
        return self._lookup_pages(ep.SHIPMENT_LOOKUP, Shipment, criteria, page_size, order_by, order_mode)

    def iter_shipments(
        self,
        criteria: Criteria,
        *,
        page_size: int = MAX_PAGE_SIZE,
        order_by: OrderBy = None,
        order_mode: OrderBy = None,
    ) -> Iterator[Shipment]:
        """Every base shipment of a lookup, all pages."""
        return _items(self.iter_shipment_pages(criteria, page_size=page_size, order_by=order_by, order_mode=order_mode))

    def iter_shipments_raw(
        self,
        criteria: Criteria,
        *,
        page_size: int = MAX_PAGE_SIZE,
        order_by: OrderBy = None,
        order_mode: OrderBy = None,
    ) -> Iterator[dict[str, Any]]:
        """Every base shipment of a lookup as received (dicts), all pages."""
        pages = self.iter_shipment_pages(criteria, page_size=page_size, order_by=order_by, order_mode=order_mode)
        return _raw_items(pages)

    def get_shipment_raw(self, shipment_id: int) -> dict[str, Any]:
        """The full shipment document as received (``GET /service/shipment/{id}``)."""
        return self._data(by_id(ep.SHIPMENT_RETRIEVE, Expect.OBJECT, shipment_id))

    def get_shipment(self, shipment_id: int) -> Shipment:
        return self._one(Shipment, by_id(ep.SHIPMENT_RETRIEVE, Expect.OBJECT, shipment_id))

    def get_records_raw(self, endpoint: Endpoint, shipment_id: int) -> list[dict[str, Any] | str]:
        """The array a per-record endpoint answers with (``GET .../{id}/...``, e.g.
        ``endpoints.SHIPMENT_EVENTS``), as received (``endpoints.EFILE_ROLES``' may hold names: strings)."""
        return self._data(records(endpoint, shipment_id))

    def get_shipment_events_raw(self, shipment_id: int) -> list[dict[str, Any]]:
        return self._data(records(ep.SHIPMENT_EVENTS, shipment_id))

    def get_shipment_events(self, shipment_id: int) -> list[ShipmentEvent]:
        return self._many(ShipmentEvent, records(ep.SHIPMENT_EVENTS, shipment_id))

    def get_air_main_carriage_raw(self, shipment_id: int) -> list[dict[str, Any]]:
        return self._data(records(ep.SHIPMENT_AIR_MAIN_CARRIAGE, shipment_id))

    def get_air_main_carriage(self, shipment_id: int) -> list[CarriageLeg]:
        return self._many(CarriageLeg, records(ep.SHIPMENT_AIR_MAIN_CARRIAGE, shipment_id))

    def get_sea_main_carriage_raw(self, shipment_id: int) -> list[dict[str, Any]]:
        return self._data(records(ep.SHIPMENT_SEA_MAIN_CARRIAGE, shipment_id))

    def get_sea_main_carriage(self, shipment_id: int) -> list[CarriageLeg]:
        return self._many(CarriageLeg, records(ep.SHIPMENT_SEA_MAIN_CARRIAGE, shipment_id))

    def create_shipment_event(
        self, shipment_id: int, event: ShipmentEvent | Mapping[str, Any], *, event_type: str | None = None
    ) -> ShipmentEvent | None:
        """Create an event (``POST .../event?type=``); type from ``event_type`` or the event's ``type``.

        Not retried unless the service provably did not process it (see ``retry``). Returns the
        created event, or None when the service answers without a body.
        """
        call = event_write(ep.SHIPMENT_EVENT_CREATE, shipment_id, event, event_type)
        return self._optional(ShipmentEvent, call)

    def update_shipment_event(
        self,
        shipment_id: int,
        event_code: str,
        event: ShipmentEvent | Mapping[str, Any],
        *,
        event_type: str | None = None,
    ) -> ShipmentEvent | None:
        """Update the event ``event_code`` of that type (``PUT .../event/{code}?type=``)."""
        call = event_write(ep.SHIPMENT_EVENT_UPDATE, shipment_id, event, event_type, id=event_code)
        return self._optional(ShipmentEvent, call)

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
        call = lookup(ep.MEMO_LOOKUP, criteria, page_no, page_size, order_by, order_mode)
        return self._page(MemoLine, call)

    def iter_memo_lookup_pages(
        self,
        criteria: Criteria,
        *,
        page_size: int = MAX_PAGE_SIZE,
        order_by: OrderBy = None,
        order_mode: OrderBy = None,
    ) -> Iterator[Page[MemoLine]]:
        """Every page of a memo lookup, from page 0 until the last (see ``paging.PageWalk``)."""
        return self._lookup_pages(ep.MEMO_LOOKUP, MemoLine, criteria, page_size, order_by, order_mode)

    def iter_memos(
        self,
        criteria: Criteria,
        *,
        page_size: int = MAX_PAGE_SIZE,
        order_by: OrderBy = None,
        order_mode: OrderBy = None,
    ) -> Iterator[MemoLine]:
        return _items(self._lookup_pages(ep.MEMO_LOOKUP, MemoLine, criteria, page_size, order_by, order_mode))

    def scroll_memos_page(self, *, page_no: int = 0, page_size: int = DEFAULT_PAGE_SIZE) -> Page[MemoLine]:
        """One page of all memo lines (``GET /service/shipment/memo``, assumption A15)."""
        return self._page(MemoLine, scroll(ep.MEMO_SCROLL, page_no, page_size))

    def iter_memo_pages(self, *, page_size: int = MAX_PAGE_SIZE) -> Iterator[Page[MemoLine]]:
        """Every page of all memo lines."""
        return self._scroll_pages(ep.MEMO_SCROLL, MemoLine, page_size)

    def get_memo_raw(self, memo_id: int) -> dict[str, Any]:
        return self._data(by_id(ep.MEMO_RETRIEVE, Expect.OBJECT, memo_id))

    def get_memo(self, memo_id: int) -> MemoLine:
        return self._one(MemoLine, by_id(ep.MEMO_RETRIEVE, Expect.OBJECT, memo_id))

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
        call = lookup(ep.CODE_CONVERSION_LOOKUP, criteria, page_no, page_size, order_by, order_mode)
        return self._page(CodeConversion, call)

    def iter_code_conversions(
        self,
        criteria: Criteria,
        *,
        page_size: int = MAX_PAGE_SIZE,
        order_by: OrderBy = None,
        order_mode: OrderBy = None,
    ) -> Iterator[CodeConversion]:
        return _items(self.iter_code_conversion_lookup_pages(criteria, page_size=page_size, order_by=order_by,
                                                             order_mode=order_mode))

    def iter_code_conversion_lookup_pages(
        self,
        criteria: Criteria,
        *,
        page_size: int = MAX_PAGE_SIZE,
        order_by: OrderBy = None,
        order_mode: OrderBy = None,
    ) -> Iterator[Page[CodeConversion]]:
        """Every page of a code-conversion lookup, from page 0 until the last (see ``paging.PageWalk``)."""
        return self._lookup_pages(ep.CODE_CONVERSION_LOOKUP, CodeConversion, criteria, page_size, order_by, order_mode)

    def scroll_code_conversions_page(
        self, *, page_no: int = 0, page_size: int = DEFAULT_PAGE_SIZE
    ) -> Page[CodeConversion]:
        """One page of all code conversion records (``GET /service/basicdata/codeconverter``, A15)."""
        return self._page(CodeConversion, scroll(ep.CODE_CONVERSION_SCROLL, page_no, page_size))

    def iter_code_conversion_pages(self, *, page_size: int = MAX_PAGE_SIZE) -> Iterator[Page[CodeConversion]]:
        """Every page of all code conversion records."""
        return self._scroll_pages(ep.CODE_CONVERSION_SCROLL, CodeConversion, page_size)

    def get_code_conversion_raw(self, conversion_id: int) -> dict[str, Any]:
        return self._data(by_id(ep.CODE_CONVERSION_RETRIEVE, Expect.OBJECT, conversion_id))

    def get_code_conversion(self, conversion_id: int) -> CodeConversion:
        call = by_id(ep.CODE_CONVERSION_RETRIEVE, Expect.OBJECT, conversion_id)
        return self._one(CodeConversion, call)

    # --- E-File ------------------------------------------------------------------------------

    def store_efile(self, efile: EFile | Mapping[str, Any]) -> EFile:
        """Store a document (``POST /service/efile``); returns it with its id. Not retried blindly."""
        return self._one(EFile, send_json(ep.EFILE_STORE, Expect.OBJECT, as_payload(efile)))

    def get_efile_raw(self, efile_id: int, *, cascade: bool = False) -> dict[str, Any]:
        return self._data(efile_retrieve(efile_id, cascade))

    def get_efile(self, efile_id: int, *, cascade: bool = False) -> EFile:
        """An E-File; with ``cascade=True`` including its references and roles."""
        return self._one(EFile, efile_retrieve(efile_id, cascade))

    def delete_efile(self, efile_id: int) -> EFile | None:
        """Delete an E-File; returns the deleted record (None if the service sends no body)."""
        return self._optional(EFile, by_id(ep.EFILE_DELETE, Expect.OPTIONAL_JSON, efile_id))

    def get_efile_references_raw(self, efile_id: int) -> list[dict[str, Any]]:
        return self._data(records(ep.EFILE_REFERENCES, efile_id))

    def get_efile_references(self, efile_id: int) -> list[EFileReference]:
        return self._many(EFileReference, records(ep.EFILE_REFERENCES, efile_id))

    def add_efile_reference(self, efile_id: int, reference: EFileReference | Mapping[str, Any]) -> None:
        self._run(efile_reference(ep.EFILE_REFERENCE_ADD, efile_id, reference))

    def delete_efile_reference(self, efile_id: int, reference: EFileReference | Mapping[str, Any]) -> None:
        self._run(efile_reference(ep.EFILE_REFERENCE_DELETE, efile_id, reference))

    def get_efile_roles_raw(self, efile_id: int) -> list[dict[str, Any] | str]:
        """The E-File's roles as received: objects, or role names (strings) as a service may answer them."""
        return self._data(records(ep.EFILE_ROLES, efile_id))

    def get_efile_roles(self, efile_id: int) -> list[EFileRole | str]:
        """The E-File's roles: a model of each object, a role name (string) as received."""
        return self._many_or_names(EFileRole, records(ep.EFILE_ROLES, efile_id))

    def add_efile_role(self, efile_id: int, role: str) -> None:
        """Link a role; the spec sends it as a ``text/plain`` body."""
        self._run(efile_role_add(efile_id, role))

    def delete_efile_role(self, efile_id: int, role: EFileRole | Mapping[str, Any] | str) -> None:
        """Unlink a role; the body is an EFileRole (a plain name is sent as ``{"role": name}``)."""
        self._run(efile_role_delete(efile_id, role))

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
        call = lookup(ep.EFILE_LOOKUP, criteria, page_no, page_size, order_by, order_mode)
        return self._page(EFile, call)

    def iter_efile_lookup_pages(
        self,
        criteria: Criteria,
        *,
        page_size: int = MAX_PAGE_SIZE,
        order_by: OrderBy = None,
        order_mode: OrderBy = None,
    ) -> Iterator[Page[EFile]]:
        """Every page of an E-File lookup, from page 0 until the last (see ``paging.PageWalk``)."""
        return self._lookup_pages(ep.EFILE_LOOKUP, EFile, criteria, page_size, order_by, order_mode)

    def iter_efiles(
        self,
        criteria: Criteria,
        *,
        page_size: int = MAX_PAGE_SIZE,
        order_by: OrderBy = None,
        order_mode: OrderBy = None,
    ) -> Iterator[EFile]:
        return _items(self._lookup_pages(ep.EFILE_LOOKUP, EFile, criteria, page_size, order_by, order_mode))

    # --- webhook -----------------------------------------------------------------------------

    def send_webhook(self, payload: Mapping[str, Any]) -> WebhookReceipt | None:
        """``POST /external/webhook`` with basic auth (webhook credentials). Not retried blindly."""
        return self._optional(WebhookReceipt, webhook(payload))


def _items(pages: Iterator[Page[M]]) -> Iterator[M]:
    for page in pages:
        yield from page.items


def _raw_items(pages: Iterator[Page[Any]]) -> Iterator[dict[str, Any]]:
    for page in pages:
        yield from page.raw
