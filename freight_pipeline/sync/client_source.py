"""``SourceAPI`` on top of :class:`AsyncFreightClient`: the only place the sync meets the client.

Memos (issue 4 leaves the choice open): the sync asks the memo lookup by ``CLIENT`` and
``SHIPMENT_NUMBER`` of changed shipments (several numbers of one client at once: ``memo_batch``), because the
scroll endpoint has no modification filter and would re-read every memo of the service on every run.

A shipment's document and per-shipment records are handed on as the bodies received (``HeldBody``), decoded
again where they are normalized: the sync's process keeps no decoded copy of them while a batch fills.

Paged reads pass each page on with its ``X-Row-Count``: the client's ``PageWalk`` already refuses
a short page while the headers say more rows follow; the sync also checks that the total received
equals the row count before writing (``changes.read_complete``). The code conversions' count is the
``X-Row-Count`` of their lookup without criteria; a refusal (:data:`REFUSALS`, or a 200 that is no page) is
``LookupRefused``: the stream then goes on unchecked and says so. The same lookup is read whole when the scroll
cannot be (``code_conversions``).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from freight_pipeline.client import APIStatusError, AsyncFreightClient, BadRequestError, NotFoundError, ProtocolError
from freight_pipeline.client._core import HeldBody
from freight_pipeline.client.endpoints import Endpoint
from freight_pipeline.client.models import Criterion
from freight_pipeline.client.stats import StatsSnapshot
from freight_pipeline.sync.changes import Criterion as CriterionDict
from freight_pipeline.sync.changes import LookupResult
from freight_pipeline.sync.source import KEPT_DOCUMENT_ARRAYS, DocumentGone, LookupRefused, ShipmentGone
from freight_pipeline.text import error_in_one_line

logger = logging.getLogger(__name__)

MEMO_ORDER = "ID"
"""The memo lookup's ordering (stable pages), while the service takes it: the spec shows no memo lookup key."""

REFUSALS = frozenset({400, 403, 404, 405, 422})
"""Statuses of a service refusing a request it does not offer this user or in this form (not a passing failure)."""


@contextmanager
def _refusal_as_lookup_refused() -> Iterator[None]:
    """A lookup the sync only checks with or falls back to, refused (:data:`REFUSALS`, or a 200 that is no page: an
    error object, say), raised as LookupRefused naming the cause."""
    try:
        yield
    except APIStatusError as exc:
        if exc.status_code not in REFUSALS:
            raise
        raise LookupRefused(f"HTTP {exc.status_code}") from exc
    except ProtocolError as exc:
        raise LookupRefused(error_in_one_line(exc, 200)) from exc


class ClientSource:
    """Adapts an open ``AsyncFreightClient`` (which bounds concurrency and retries) to ``SourceAPI``."""

    def __init__(self, client: AsyncFreightClient) -> None:
        self.client = client
        self.memo_ordered: bool | None = None
        """Whether this run's memo lookups are ordered by :data:`MEMO_ORDER`: None until the service answered one
        ordered (True), or refused one (400) that it then answered unordered (False)."""

    async def lookup_shipments(
        self, criteria: list[CriterionDict], order_by: list[str], order_mode: list[str], page_size: int
    ) -> LookupResult:
        page = await self.client.lookup_shipments(
            criteria, page_no=0, page_size=page_size, order_by=order_by, order_mode=order_mode
        )
        return LookupResult(page.raw, page.row_count, page.page_count)

    async def get_shipment(self, shipment_id: int) -> HeldBody:
        try:
            return HeldBody.of(await self.client.get_shipment_raw(shipment_id), keep=KEPT_DOCUMENT_ARRAYS)
        except NotFoundError as exc:
            raise ShipmentGone(shipment_id) from exc

    async def get_shipment_records(self, endpoint: Endpoint, shipment_id: int) -> HeldBody:
        try:
            return HeldBody.of(await self.client.get_records_raw(endpoint, shipment_id))
        except NotFoundError as exc:
            raise ShipmentGone(shipment_id) from exc

    async def memo_pages(
        self, client: str, shipment_numbers: Sequence[str], page_size: int
    ) -> AsyncIterator[LookupResult]:
        criteria = [Criterion.one_of("CLIENT", [client]), Criterion.one_of("SHIPMENT_NUMBER", shipment_numbers)]
        ordered = self.memo_ordered is not False
        try:
            async for page in self._memo_lookup_pages(criteria, page_size, ordered):
                if self.memo_ordered is None:
                    self.memo_ordered = True
                yield page
        except BadRequestError:
            if not ordered or self.memo_ordered:  # asked unordered, or the order was answered: not about it
                raise
        else:
            return
        # Refused while no ordered lookup was answered: is it the order, by a key the service's memo lookup lacks?
        # (A 400 again is about something else, and the order stays unknown.)
        async for page in self._memo_lookup_pages(criteria, page_size, False):
            if self.memo_ordered is None:
                self.memo_ordered = False
                logger.warning("%s", self.memo_unordered)
            yield page

    @property
    def memo_unordered(self) -> str | None:
        """Why this run's memo lookups are asked unordered (``SourceAPI.memo_unordered``); None while ordered."""
        if self.memo_ordered is not False:
            return None
        return (f"the memo lookup refused order_by={MEMO_ORDER} (400) and answered without it: this run asked it "
                "unordered")

    async def _memo_lookup_pages(
        self, criteria: list[Criterion], page_size: int, ordered: bool
    ) -> AsyncIterator[LookupResult]:
        pages = (self.client.iter_memo_lookup_pages(criteria, page_size=page_size, order_by=[MEMO_ORDER],
                                                    order_mode=["ASC"])
                 if ordered else self.client.iter_memo_lookup_pages(criteria, page_size=page_size))
        async for page in pages:
            yield LookupResult(page.raw, page.row_count, page.page_count)

    async def efile_pages(self, shipment_ids: list[int], page_size: int) -> AsyncIterator[LookupResult]:
        criteria = [Criterion.one_of("SHIPMENT_ID", shipment_ids)]
        pages = self.client.iter_efile_lookup_pages(
            criteria, page_size=page_size, order_by=["SHIPMENT_ID"], order_mode=["ASC"]
        )
        async for page in pages:
            yield LookupResult(page.raw, page.row_count, page.page_count)

    async def get_efile_references(self, efile_id: int) -> list[dict[str, Any]]:
        try:
            return await self.client.get_efile_references_raw(efile_id)
        except NotFoundError as exc:
            raise DocumentGone(efile_id) from exc

    async def get_efile_roles(self, efile_id: int) -> list[dict[str, Any] | str]:
        try:
            return await self.client.get_efile_roles_raw(efile_id)
        except NotFoundError as exc:
            raise DocumentGone(efile_id) from exc

    async def get_efile(self, efile_id: int) -> dict[str, Any]:
        try:
            return await self.client.get_efile_raw(efile_id, cascade=True)
        except NotFoundError as exc:
            raise DocumentGone(efile_id) from exc

    async def code_conversion_pages(self, page_size: int) -> AsyncIterator[LookupResult]:
        async for page in self.client.iter_code_conversion_pages(page_size=page_size):
            yield LookupResult(page.raw, page.row_count, page.page_count)

    async def code_conversion_lookup_pages(self, page_size: int) -> AsyncIterator[LookupResult]:
        with _refusal_as_lookup_refused():
            async for page in self.client.iter_code_conversion_lookup_pages([], page_size=page_size):
                yield LookupResult(page.raw, page.row_count, page.page_count)

    async def code_conversion_count(self) -> int | None:
        with _refusal_as_lookup_refused():
            page = await self.client.lookup_code_conversions([], page_size=1)
        return page.row_count

    def request_counts(self) -> tuple[int, int]:
        snapshot = self.client.stats.snapshot()
        return snapshot.requests, snapshot.retries

    def client_stats(self) -> StatsSnapshot:
        return self.client.stats.snapshot()

    def in_flight_figures(self) -> dict[str, float]:
        limit = self.client.limit
        stats = limit.stats
        if not stats.acquisitions:
            return {}
        return {"in_flight_limit_mean": round(stats.mean, 2), "in_flight_limit_lowest": round(stats.lowest, 2),
                "in_flight_limit_highest": round(stats.highest, 2), "in_flight_limit_last": round(limit.limit, 2),
                "in_flight_limit_decreases": stats.decreases, "in_flight_mean": round(stats.mean_in_flight, 2)}
