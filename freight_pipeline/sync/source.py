"""What the sync needs from the freight service, in raw JSON, as one small protocol.

``ClientSource`` maps it onto :class:`freight_pipeline.client.AsyncFreightClient`; the sync never
touches HTTP itself. Everything returns the documents exactly as received (raw dicts), because the
warehouse keeps the raw document and normalizes from it. Paged reads yield each page with its
``X-Row-Count``, so the sync can check that it received every record before it writes (or deletes)
anything on the strength of them (``changes.read_complete``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any, Protocol

from freight_pipeline.client._core import HeldBody
from freight_pipeline.client.endpoints import Endpoint
from freight_pipeline.client.stats import StatsSnapshot
from freight_pipeline.sync.changes import Criterion, LookupResult


class ShipmentGone(LookupError):
    """The service answered 404 for a shipment (deleted between lookup and retrieve)."""


DOCUMENT_MEMOS = "memos"
"""The document's array of its memo lines (id, client, memo, shipment_number, running_number)."""
KEPT_DOCUMENT_ARRAYS: tuple[str, ...] = (DOCUMENT_MEMOS,)
"""The arrays of a document kept beside its held body (``HeldBody.top``): the memo ids a batched memo lookup's
share is checked against (``memo_batch``)."""

class DocumentGone(LookupError):
    """The service answered 404 for an E-File (deleted between lookup and read)."""


class LookupRefused(LookupError):
    """The service refused a lookup the sync only checks with (400, 403, 404, 405, 422, or an answer that is not a
    page): what it would have checked cannot be checked."""


class SourceAPI(Protocol):
    memo_unordered: str | None
    """Why this run's memo lookups are asked unordered (the service refused their ordering, and answered them
    without it); None while they are ordered."""

    async def lookup_shipments(
        self, criteria: list[Criterion], order_by: list[str], order_mode: list[str], page_size: int
    ) -> LookupResult:
        """Page 0 of a shipment lookup."""

    async def get_shipment(self, shipment_id: int) -> dict[str, Any] | HeldBody:
        """The document (or its body held: ``HeldBody``, whose ``top`` has its client, number and mode, and the
        arrays of :data:`KEPT_DOCUMENT_ARRAYS`); raises ShipmentGone on 404."""

    async def get_shipment_records(self, endpoint: Endpoint, shipment_id: int) -> list[dict[str, Any]] | HeldBody:
        """The records a per-shipment endpoint (events, main-carriage legs) answers with (or their body held);
        raises ShipmentGone on 404."""

    def memo_pages(
        self, client: str, shipment_numbers: Sequence[str], page_size: int
    ) -> AsyncIterator[LookupResult]:
        """Every page of the memo lookup of ``client``'s ``shipment_numbers`` (one: a shipment's own lookup), in
        ID order while the service takes it (:attr:`memo_unordered`), from page 0, ``page_size`` rows asked per
        page."""

    def efile_pages(self, shipment_ids: list[int], page_size: int) -> AsyncIterator[LookupResult]:
        """Every page of the E-File lookup of these shipments (SHIPMENT_ID any of them), from page 0, ``page_size``
        rows asked per page."""

    async def get_efile_references(self, efile_id: int) -> list[dict[str, Any]]:
        """Raises DocumentGone on 404 (the E-File was deleted since it was listed)."""

    async def get_efile_roles(self, efile_id: int) -> list[dict[str, Any] | str]:
        """Raises DocumentGone on 404."""

    async def get_efile(self, efile_id: int) -> dict[str, Any]:
        """The E-File with its document, references and roles (cascade); raises DocumentGone on 404."""

    def code_conversion_pages(self, page_size: int) -> AsyncIterator[LookupResult]:
        """Every page of the code-conversion scroll, from page 0, ``page_size`` rows asked per page."""

    def code_conversion_lookup_pages(self, page_size: int) -> AsyncIterator[LookupResult]:
        """Every page of the code-conversion lookup without criteria, from page 0, ``page_size`` rows asked per page
        (the read when the scroll cannot be read whole); raises LookupRefused when the service refuses it."""

    async def code_conversion_count(self) -> int | None:
        """``X-Row-Count`` of the code-conversion lookup without criteria (one row asked): every conversion the
        service holds; None when it answers without that header; raises LookupRefused when it refuses it."""

    def request_counts(self) -> tuple[int, int]:
        """(requests, retries) made so far by this source."""

    def client_stats(self) -> StatsSnapshot:
        """The client's counters so far (a stream's are the difference of two): requests, hedged
        reads, latencies per kind of call."""

    def in_flight_figures(self) -> dict[str, float]:
        """How the limit on requests in flight moved so far (``in_flight_limit_mean``, ``_lowest``,
        ``_highest``, ``_last``, ``_decreases``) and the mean in flight (``in_flight_mean``), for the run's figures."""
