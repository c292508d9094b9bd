"""Wrappers around the real ``ClientSource`` for faults the simulator cannot make on its own."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from freight_pipeline.client import AsyncFreightClient
from freight_pipeline.simulator.server import RunningSimulator
from freight_pipeline.sync.changes import Criterion, LookupResult
from freight_pipeline.sync.client_source import ClientSource


class ModifiesWhilePaging(ClientSource):
    """Before every ``every``-th shipment lookup, changes ``count`` shipments in the simulator
    (and on every other such occasion moves its clock on by a second)."""

    def __init__(self, client: AsyncFreightClient, sim: RunningSimulator, every: int = 2, count: int = 3) -> None:
        super().__init__(client)
        self.sim, self.every, self.count = sim, every, count
        self.lookups = 0
        self.modified: list[int] = []

    async def lookup_shipments(
        self, criteria: list[Criterion], order_by: list[str], order_mode: list[str], page_size: int
    ) -> LookupResult:
        self.lookups += 1
        if self.lookups > 1 and self.lookups % self.every == 0:
            if self.lookups % (2 * self.every) == 0:
                self.sim.advance_clock(1)
            self.modified.extend(self.sim.modify_shipments(self.count))
        return await super().lookup_shipments(criteria, order_by, order_mode, page_size)


class DeletesBeforeRetrieve(ClientSource):
    """Deletes the given shipments in the simulator just before the sync retrieves them (a real 404)."""

    def __init__(self, client: AsyncFreightClient, sim: RunningSimulator, victims: set[int]) -> None:
        super().__init__(client)
        self.sim, self.victims = sim, set(victims)

    async def get_shipment(self, shipment_id: int) -> dict[str, Any]:
        if shipment_id in self.victims:
            self.victims.discard(shipment_id)
            self.sim.store.delete_shipment_ids([shipment_id])
        return await super().get_shipment(shipment_id)


class ShortPages(ClientSource):
    """Drops the last record of shipment lookup pages while keeping ``X-Row-Count``:
    on the first ``times`` multi-record pages (None: always)."""

    def __init__(self, client: AsyncFreightClient, times: int | None = 1) -> None:
        super().__init__(client)
        self.times = times
        self.shortened = 0

    async def lookup_shipments(
        self, criteria: list[Criterion], order_by: list[str], order_mode: list[str], page_size: int
    ) -> LookupResult:
        result = await super().lookup_shipments(criteria, order_by, order_mode, page_size)
        if len(result.items) >= 2 and (self.times is None or self.shortened < self.times):
            self.shortened += 1
            return LookupResult(result.items[:-1], result.row_count)
        return result


def factory(cls: type[ClientSource], *args: Any, **kwargs: Any) -> tuple[Callable[[AsyncFreightClient], Any], list]:
    """A ``source_factory`` for ``sync_all`` plus a list that receives the source it built."""
    built: list[Any] = []

    def make(client: AsyncFreightClient) -> Any:
        source = cls(client, *args, **kwargs)
        built.append(source)
        return source

    return make, built


class IgnoresIdCriterion(ClientSource):
    """Drops ``ID`` criteria from shipment lookups, as a service that did not support them would."""

    async def lookup_shipments(
        self, criteria: list[Criterion], order_by: list[str], order_mode: list[str], page_size: int
    ) -> LookupResult:
        kept = [c for c in criteria if c["key"] != "ID"]
        return await super().lookup_shipments(kept, order_by, order_mode, page_size)
