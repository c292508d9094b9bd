"""What the sync needs from the freight service, in raw JSON, as one small protocol.

``ClientSource`` maps it onto :class:`freight_pipeline.client.AsyncFreightClient`; the sync never
touches HTTP itself. Everything returns the documents exactly as received (raw dicts), because the
warehouse keeps the raw document and normalizes from it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol

from freight_pipeline.sync.changes import Criterion, LookupResult


class ShipmentGone(LookupError):
    """The service answered 404 for a shipment (deleted between lookup and retrieve)."""


class SourceAPI(Protocol):
    async def lookup_shipments(
        self, criteria: list[Criterion], order_by: list[str], order_mode: list[str], page_size: int
    ) -> LookupResult: ...

    async def get_shipment(self, shipment_id: int) -> dict[str, Any]:
        """Raises ShipmentGone on 404."""

    async def get_events(self, shipment_id: int) -> list[dict[str, Any]]: ...

    async def get_air_legs(self, shipment_id: int) -> list[dict[str, Any]]: ...

    async def get_sea_legs(self, shipment_id: int) -> list[dict[str, Any]]: ...

    async def get_memos(self, client: str, shipment_number: str) -> list[dict[str, Any]]: ...

    def iter_code_conversions(self) -> AsyncIterator[list[dict[str, Any]]]: ...

    def request_counts(self) -> tuple[int, int]:
        """(requests, retries) made so far by this source."""
