"""Wrappers around the real ``ClientSource`` for faults the simulator cannot make on its own."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from freight_pipeline.client import AsyncFreightClient
from freight_pipeline.client import endpoints as ep
from freight_pipeline.client._core import HeldBody, decoded
from freight_pipeline.client.endpoints import Endpoint
from freight_pipeline.client.errors import BadRequestError
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


class ChangesAgainWhatItListed(ClientSource):
    """Once the walk has read ``victim``'s document, changes it again in the simulator (its clock frozen: in the
    second of the newest change, the run's ceiling) before the walk's next lookup, so the walk lists it twice, the
    second time at the ceiling, and reads it twice, as it was and as it is."""

    def __init__(self, client: AsyncFreightClient, sim: RunningSimulator, victim: int) -> None:
        super().__init__(client)
        self.sim, self.victim = sim, victim
        self.listed, self.changed, self.times_listed = False, asyncio.Event(), 0

    async def lookup_shipments(
        self, criteria: list[Criterion], order_by: list[str], order_mode: list[str], page_size: int
    ) -> LookupResult:
        if self.listed:
            await asyncio.wait_for(self.changed.wait(), 30)
        result = await super().lookup_shipments(criteria, order_by, order_mode, page_size)
        self.times_listed += sum(item.get("id") == self.victim for item in result.items)
        self.listed = self.listed or self.times_listed > 0
        return result

    async def get_shipment(self, shipment_id: int) -> dict[str, Any] | HeldBody:
        document = await super().get_shipment(shipment_id)
        if shipment_id == self.victim and not self.changed.is_set():
            self.sim.touch_shipments([self.victim])
            self.changed.set()
        return document


class DeletesBeforeRetrieve(ClientSource):
    """Deletes the given shipments in the simulator just before the sync retrieves them (a real 404)."""

    def __init__(self, client: AsyncFreightClient, sim: RunningSimulator, victims: set[int]) -> None:
        super().__init__(client)
        self.sim, self.victims = sim, set(victims)

    async def get_shipment(self, shipment_id: int) -> dict[str, Any] | HeldBody:
        if shipment_id in self.victims:
            self.victims.discard(shipment_id)
            self.sim.store.changes.delete_shipment_ids([shipment_id])
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


def is_id_listing(criteria: list[Criterion], order_by: list[str]) -> bool:
    """The reconcile pass's listing of every live id (``ID GT n`` ordered by ID)."""
    return [c["key"] for c in criteria] == ["ID"] and order_by == ["ID"]


class RefusesIdIn(ClientSource):
    """Answers 400 to a shipment lookup by ``ID IN``, as a service that reads the spec's IN otherwise would."""

    async def lookup_shipments(
        self, criteria: list[Criterion], order_by: list[str], order_mode: list[str], page_size: int
    ) -> LookupResult:
        if any(c["key"] == "ID" and c.get("match_mode") == "IN" for c in criteria):
            raise BadRequestError("400 Bad Request: match mode IN is not supported for ID", status_code=400,
                                  method="POST", path="/service/shipment/lookup")
        return await super().lookup_shipments(criteria, order_by, order_mode, page_size)


class NoRowCount(ClientSource):
    """Answers shipment lookups without ``X-Row-Count``, which the spec says is always sent."""

    async def lookup_shipments(
        self, criteria: list[Criterion], order_by: list[str], order_mode: list[str], page_size: int
    ) -> LookupResult:
        result = await super().lookup_shipments(criteria, order_by, order_mode, page_size)
        return LookupResult(result.items, None)


class GarbledListingInstant(ClientSource):
    """Garbles ``last_modified_date_time`` of the first record of every id-listing page (reconcile)."""

    def __init__(self, client: AsyncFreightClient) -> None:
        super().__init__(client)
        self.garbled: list[int] = []

    async def lookup_shipments(
        self, criteria: list[Criterion], order_by: list[str], order_mode: list[str], page_size: int
    ) -> LookupResult:
        result = await super().lookup_shipments(criteria, order_by, order_mode, page_size)
        if is_id_listing(criteria, order_by) and result.items:
            first = dict(result.items[0], last_modified_date_time="not a date")
            self.garbled.append(int(first["id"]))
            return LookupResult([first, *result.items[1:]], result.row_count)
        return result


class ShortListingPages(ClientSource):
    """Drops one record from the middle of id-listing pages (reconcile) while keeping ``X-Row-Count``:
    on the first ``times`` pages of more than one record (None: always)."""

    def __init__(self, client: AsyncFreightClient, times: int | None = 1) -> None:
        super().__init__(client)
        self.times = times
        self.shortened = 0
        self.dropped: list[int] = []

    async def lookup_shipments(
        self, criteria: list[Criterion], order_by: list[str], order_mode: list[str], page_size: int
    ) -> LookupResult:
        result = await super().lookup_shipments(criteria, order_by, order_mode, page_size)
        if is_id_listing(criteria, order_by) and len(result.items) >= 2 and (
            self.times is None or self.shortened < self.times
        ):
            self.shortened += 1
            middle = len(result.items) // 2
            self.dropped.append(int(result.items[middle]["id"]))
            return LookupResult(result.items[:middle] + result.items[middle + 1 :], result.row_count)
        return result


class CapsListingPageSize(ClientSource):
    """A service that answers at most ``cap`` records per id-listing page, whatever was asked
    (``X-Row-Count`` still counts the whole query)."""

    def __init__(self, client: AsyncFreightClient, cap: int) -> None:
        super().__init__(client)
        self.cap = cap

    async def lookup_shipments(
        self, criteria: list[Criterion], order_by: list[str], order_mode: list[str], page_size: int
    ) -> LookupResult:
        result = await super().lookup_shipments(criteria, order_by, order_mode, page_size)
        if is_id_listing(criteria, order_by):
            return LookupResult(result.items[: self.cap], result.row_count)
        return result


class ShortCodeConversionScroll(ClientSource):
    """Drops the last record of the code-conversion scroll's first page (``X-Row-Count`` kept), on the
    first ``times`` reads (None: always)."""

    def __init__(self, client: AsyncFreightClient, times: int | None = 1) -> None:
        super().__init__(client)
        self.times = times
        self.reads = 0

    async def code_conversion_pages(self, page_size: int) -> AsyncIterator[LookupResult]:
        self.reads += 1
        short = self.times is None or self.reads <= self.times
        first = True
        async for page in super().code_conversion_pages(page_size):
            if first and short and page.items:
                page = LookupResult(page.items[:-1], page.row_count)
            first = False
            yield page


class ShiftedCodeConversionScroll(ClientSource):
    """Serves the first record of the code-conversion scroll's first page twice, in place of its last (a scroll
    that shifted between pages: as many records as ``X-Row-Count`` says, one of them twice, one never)."""

    async def code_conversion_pages(self, page_size: int) -> AsyncIterator[LookupResult]:
        first = True
        async for page in super().code_conversion_pages(page_size):
            if first and len(page.items) > 1:
                page = LookupResult([*page.items[:-1], page.items[0]], page.row_count, page.page_count)
            first = False
            yield page


class EmptyCodeConversionScroll(ClientSource):
    """Answers the code-conversion scroll with no record (and ``X-Row-Count: 0``), as a service would by mistake."""

    async def code_conversion_pages(self, page_size: int) -> AsyncIterator[LookupResult]:
        yield LookupResult([], 0, 0)


class ReorderedCodeConversionKeys(ClientSource):
    """The same code conversions with the keys of every record (and nested object) in reverse order."""

    async def code_conversion_pages(self, page_size: int) -> AsyncIterator[LookupResult]:
        async for page in super().code_conversion_pages(page_size):
            yield LookupResult([reverse_keys(item) for item in page.items], page.row_count)


def reverse_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: reverse_keys(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [reverse_keys(v) for v in value]
    return value


class ShortMemoLookup(ClientSource):
    """Drops one memo line of the shipments ``victims`` (client, shipment number) from every memo lookup that asks
    for one of them, alone or with others (``X-Row-Count`` kept), on the first ``times`` lookups of each (None:
    always). With ``drop_count`` it drops the first page's ``X-Row-Count`` instead."""

    def __init__(
        self, client: AsyncFreightClient, victims: set[tuple[str, str]], times: int | None = None,
        drop_count: bool = False,
    ) -> None:
        super().__init__(client)
        self.victims, self.times, self.drop_count = victims, times, drop_count
        self.shortened: dict[tuple[str, str], int] = {}

    async def memo_pages(
        self, client: str, shipment_numbers: Sequence[str], page_size: int
    ) -> AsyncIterator[LookupResult]:
        keys = [(client, number) for number in shipment_numbers if (client, number) in self.victims]
        short = [key for key in keys if self.times is None or self.shortened.get(key, 0) < self.times]
        for key in short:
            self.shortened[key] = self.shortened.get(key, 0) + 1
        async for page in super().memo_pages(client, shipment_numbers, page_size):
            lines = [i for i, line in enumerate(page.items) if (line["client"], line["shipment_number"]) in short]
            if lines:
                items, count = ((page.items, None) if self.drop_count
                                else ([line for i, line in enumerate(page.items) if i != lines[0]], page.row_count))
                page, short = LookupResult(items, count), []
            yield page


class BatchedMemosOtherwise(ClientSource):
    """A service that answers the memo lookup of several shipment numbers otherwise than the sync asked (``how``):
    ``first_number`` (as the lookup of its first number alone), ``foreign_line`` (a line of another client added,
    counted), ``short`` (``X-Row-Count`` one more than the lines answered); a refusal is the simulator's
    ``memo_lookup_by_one``. Counts the lookups of several numbers and of one."""

    HOWS = ("first_number", "foreign_line", "short")

    def __init__(self, client: AsyncFreightClient, how: str) -> None:
        super().__init__(client)
        self.how = how
        self.several = self.one = 0

    async def memo_pages(
        self, client: str, shipment_numbers: Sequence[str], page_size: int
    ) -> AsyncIterator[LookupResult]:
        if len(shipment_numbers) == 1:
            self.one += 1
            async for page in super().memo_pages(client, shipment_numbers, page_size):
                yield page
            return
        self.several += 1
        asked = shipment_numbers[:1] if self.how == "first_number" else shipment_numbers
        async for page in super().memo_pages(client, asked, page_size):
            items, count = list(page.items), page.row_count
            if self.how == "foreign_line":
                items.append({"id": 10**12, "client": f"not-{client}", "memo": "another client's",
                              "shipment_number": shipment_numbers[0], "running_number": 1})
                count = (count or 0) + 1
            elif self.how == "short":
                count = (count or 0) + 1
            yield LookupResult(items, count)


class LineAddedBetween(ClientSource):
    """The service adds a memo line to the victim (without a new last-modified instant) just after the batched
    memo lookup that holds the victim's number was answered, and before the victim's document is read."""

    def __init__(self, client: AsyncFreightClient, sim: RunningSimulator, victim: dict[str, Any]) -> None:
        super().__init__(client)
        self.sim, self.victim = sim, victim
        self.added = asyncio.Event()

    async def memo_pages(
        self, client: str, shipment_numbers: Sequence[str], page_size: int
    ) -> AsyncIterator[LookupResult]:
        async for page in super().memo_pages(client, shipment_numbers, page_size):
            yield page
        victim = (self.victim["client"], self.victim["shipment_number"])
        if len(shipment_numbers) > 1 and victim in {(client, n) for n in shipment_numbers} and not self.added.is_set():
            data = self.sim.store.data  # type: ignore[attr-defined]
            with data.lock:
                data.add_memo(self.victim["id"], "added between the two reads")
                self.sim.store.reader.forget(self.victim["id"])  # type: ignore[attr-defined]
                data.version += 1
            self.added.set()

    async def get_shipment(self, shipment_id: int) -> dict[str, Any] | HeldBody:
        if shipment_id == self.victim["id"]:
            await asyncio.wait_for(self.added.wait(), timeout=30)
        return await super().get_shipment(shipment_id)


class DocumentMemos(ClientSource):
    """Documents whose ``memos`` (the memo lines they list) say ``how``: ``absent`` (no such array), ``bad_id`` (a
    line's id not an integer), ``extra`` (a line the lookups never answer), ``not_objects`` (ids, not lines)."""

    HOWS = ("absent", "bad_id", "extra", "not_objects")

    def __init__(self, client: AsyncFreightClient, how: str) -> None:
        super().__init__(client)
        self.how = how

    async def get_shipment(self, shipment_id: int) -> dict[str, Any] | HeldBody:
        held = await super().get_shipment(shipment_id)
        assert isinstance(held, HeldBody)
        top, memos = dict(held.top), list(held.top.get("memos") or [])
        if self.how == "absent":
            top.pop("memos", None)
        elif self.how == "bad_id":
            top["memos"] = [{**memo, "id": str(memo["id"])} for memo in memos] or [{"id": "1"}]
        elif self.how == "extra":
            top["memos"] = [*memos, {"id": 10**12, "client": top.get("client"), "memo": "never answered"}]
        else:
            top["memos"] = [memo["id"] for memo in memos] or [1]
        return HeldBody(held.body, top)


class FailingRetrieve(ClientSource):
    """``get_shipment`` of ``victim`` fails at once with ``error``; every other retrieve waits ``delay``
    seconds first, so it is still in flight when the victim fails. Counts how those end."""

    def __init__(self, client: AsyncFreightClient, victim: int, error: BaseException, delay: float = 0.5) -> None:
        super().__init__(client)
        self.victim, self.error, self.delay = victim, error, delay
        self.completed = 0
        self.cancelled = 0

    async def get_shipment(self, shipment_id: int) -> dict[str, Any] | HeldBody:
        if shipment_id == self.victim:
            raise self.error
        try:
            await asyncio.sleep(self.delay)
            document = await super().get_shipment(shipment_id)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        self.completed += 1
        return document


class DeletedWhileRead(ClientSource):
    """Lets the victim's document be read, then deletes the shipment in the simulator before its
    events, legs and memos are asked for (a real 404 for those; the memo lookup finds nothing),
    whatever order the concurrent requests take."""

    def __init__(self, client: AsyncFreightClient, sim: RunningSimulator, victim: int) -> None:
        super().__init__(client)
        self.sim, self.victim = sim, victim
        self.document_read = asyncio.Event()

    async def get_shipment(self, shipment_id: int) -> dict[str, Any] | HeldBody:
        doc = await super().get_shipment(shipment_id)
        if shipment_id == self.victim:
            self.sim.store.changes.delete_shipment_ids([shipment_id])
            self.document_read.set()
        return doc

    async def _after_the_document(self, shipment_id: int) -> None:
        if shipment_id == self.victim:
            await self.document_read.wait()

    async def get_shipment_records(self, endpoint: Endpoint, shipment_id: int) -> list[dict[str, Any]] | HeldBody:
        await self._after_the_document(shipment_id)
        return await super().get_shipment_records(endpoint, shipment_id)

    async def memo_pages(
        self, client: str, shipment_numbers: Sequence[str], page_size: int
    ) -> AsyncIterator[LookupResult]:
        await self.document_read.wait()  # only the victim is read in the run this source is made for
        async for page in super().memo_pages(client, shipment_numbers, page_size):
            yield page


class LookupSaysAnotherMode(ClientSource):
    """The shipment lookup tells ``mode`` for the victim while its document tells the truth (the
    shipment changed between the two); records which legs were asked for."""

    def __init__(self, client: AsyncFreightClient, victim: int, mode: str) -> None:
        super().__init__(client)
        self.victim, self.mode = victim, mode
        self.legs_asked: list[str] = []

    async def lookup_shipments(
        self, criteria: list[Criterion], order_by: list[str], order_mode: list[str], page_size: int
    ) -> LookupResult:
        result = await super().lookup_shipments(criteria, order_by, order_mode, page_size)
        items = [{**item, "mode_of_transport": self.mode} if item.get("id") == self.victim else item
                 for item in result.items]
        return LookupResult(items, result.row_count)

    async def get_shipment_records(self, endpoint: Endpoint, shipment_id: int) -> list[dict[str, Any]] | HeldBody:
        legs = {ep.SHIPMENT_AIR_MAIN_CARRIAGE: "air", ep.SHIPMENT_SEA_MAIN_CARRIAGE: "sea"}
        if shipment_id == self.victim and endpoint in legs:
            self.legs_asked.append(legs[endpoint])
        return await super().get_shipment_records(endpoint, shipment_id)


class LookupSaysAnotherNumber(ClientSource):
    """The shipment lookup tells another shipment number for the victim while its document tells the truth (the
    number changed between the two); records the memo lookups of one shipment the victim's true number had."""

    def __init__(self, client: AsyncFreightClient, victim: int) -> None:
        super().__init__(client)
        self.victim = victim
        self.true_number: str | None = None
        self.asked_alone: list[tuple[str, str]] = []

    async def lookup_shipments(
        self, criteria: list[Criterion], order_by: list[str], order_mode: list[str], page_size: int
    ) -> LookupResult:
        result = await super().lookup_shipments(criteria, order_by, order_mode, page_size)
        items = []
        for item in result.items:
            if item.get("id") == self.victim:
                self.true_number = item["shipment_number"]
                item = {**item, "shipment_number": f"{item['shipment_number']}-before"}
            items.append(item)
        return LookupResult(items, result.row_count)

    async def memo_pages(
        self, client: str, shipment_numbers: Sequence[str], page_size: int
    ) -> AsyncIterator[LookupResult]:
        if list(shipment_numbers) == [self.true_number]:
            self.asked_alone.append((client, shipment_numbers[0]))
        async for page in super().memo_pages(client, shipment_numbers, page_size):
            yield page


class InstantsWithoutOffset(ClientSource):
    """A service whose last-modified instants carry no UTC offset (``2026-11-01T10:15:30``)."""

    @staticmethod
    def _strip(item: dict[str, Any]) -> dict[str, Any]:
        stamp = item.get("last_modified_date_time")
        return {**item, "last_modified_date_time": stamp[:19]} if isinstance(stamp, str) else item

    async def lookup_shipments(
        self, criteria: list[Criterion], order_by: list[str], order_mode: list[str], page_size: int
    ) -> LookupResult:
        result = await super().lookup_shipments(criteria, order_by, order_mode, page_size)
        return LookupResult([self._strip(item) for item in result.items], result.row_count)

    async def get_shipment(self, shipment_id: int) -> dict[str, Any]:
        return self._strip(decoded(await super().get_shipment(shipment_id)))


class EfileDeletedAfterItsLookup(ClientSource):
    """The first E-File lookup also lists a file (``PHANTOM``, a copy of its first under another id) that the
    service no longer holds when it is read: deleted between the lookup and its reads."""

    PHANTOM = 999_999
    listed = 0

    async def efile_pages(self, shipment_ids: list[int], page_size: int) -> AsyncIterator[LookupResult]:
        async for page in super().efile_pages(shipment_ids, page_size):
            if not type(self).listed and page.items and page.page_count == 1:
                type(self).listed += 1
                page = LookupResult([*page.items, {**page.items[0], "id": self.PHANTOM}],
                                    None if page.row_count is None else page.row_count + 1, 1)
            yield page


class OverlappingEfilePages(ClientSource):
    """A service whose E-File lookup of one of the shipments ``only`` orders its ties differently from one page's
    query to the next: the first file of every page after the first is the last of the page before
    (``X-Row-Count`` kept)."""

    def __init__(self, client: AsyncFreightClient, only: set[int]) -> None:
        super().__init__(client)
        self.only = only

    async def efile_pages(self, shipment_ids: list[int], page_size: int) -> AsyncIterator[LookupResult]:
        last: Any = None
        async for page in super().efile_pages(shipment_ids, page_size):
            items = list(page.items)
            if len(shipment_ids) == 1 and shipment_ids[0] in self.only and last is not None and items:
                items[0] = last
            last = items[-1] if items else last
            yield LookupResult(items, page.row_count, page.page_count)
