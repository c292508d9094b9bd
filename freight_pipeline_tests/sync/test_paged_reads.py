"""Whole-set reads that replace what the warehouse holds (the code-conversion scroll, each shipment's
memo lookup) must add up to their ``X-Row-Count``: otherwise they are read again, then the stream
fails without writing, so a truncated read never deletes rows."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from freight_pipeline.client import AsyncFreightClient, ProtocolError
from freight_pipeline.simulator.server import RunningSimulator
from freight_pipeline.sync.changes import LookupResult, RowCountMismatch
from freight_pipeline.sync.client_source import ClientSource
from freight_pipeline.sync.code_conversions import EmptyScroll
from freight_pipeline.sync.source import LookupRefused
from freight_pipeline_tests.sync.conftest import SyncFn, query, work_db
from freight_pipeline_tests.sync.expected import assert_converged
from freight_pipeline_tests.sync.faulty_sources import (
    EmptyCodeConversionScroll,
    ReorderedCodeConversionKeys,
    ShiftedCodeConversionScroll,
    ShortCodeConversionScroll,
    ShortMemoLookup,
    factory,
)
from freight_pipeline_tests.sync.settings import TEST_SETTINGS

CODE_CONVERSIONS = ["code_conversions"]


def code_conversion_rows(data_dir: Path) -> list[tuple]:
    return query(work_db(data_dir), "SELECT * FROM freight.code_conversions ORDER BY conversion_id")


def test_a_scroll_missing_rows_fails_and_leaves_the_table_unchanged(
    small_sim: RunningSimulator, work_sync: SyncFn, tmp_path: Path
) -> None:
    work_sync(streams=CODE_CONVERSIONS)
    before = code_conversion_rows(tmp_path)
    expected_total = len(list(small_sim.store.reader.code_conversion_rows()))
    assert len(before) == expected_total
    make, built = factory(ShortCodeConversionScroll, times=None)
    with pytest.raises(RowCountMismatch, match=rf"code-conversion scroll returned {expected_total - 1} rows "
                                               rf"but X-Row-Count said {expected_total} on 3 attempts"):
        work_sync(streams=CODE_CONVERSIONS, source_factory=make)
    assert built[0].reads == 3
    assert code_conversion_rows(tmp_path) == before  # nothing deleted, nothing re-stamped


def test_a_scroll_missing_rows_once_is_read_again(
    small_sim: RunningSimulator, work_sync: SyncFn, tmp_path: Path
) -> None:
    make, built = factory(ShortCodeConversionScroll, times=1)
    result = work_sync(source_factory=make)["code_conversions"]
    assert built[0].reads == 2
    assert result.rows_read == len(list(small_sim.store.reader.code_conversion_rows()))
    assert_converged(small_sim.store, work_db(tmp_path))


def test_an_empty_scroll_while_conversions_are_held_fails_the_stream_and_keeps_them(
    small_sim: RunningSimulator, work_sync: SyncFn, tmp_path: Path
) -> None:
    """Its count agrees (0), so only the emptiness tells: hundreds of conversions do not vanish at once, an answer
    by mistake does. Was: the table emptied, the stream a success."""
    work_sync(streams=CODE_CONVERSIONS)
    before = code_conversion_rows(tmp_path)
    with pytest.raises(EmptyScroll, match=f"answered no record while the warehouse holds {len(before)}"):
        work_sync(streams=CODE_CONVERSIONS, source_factory=EmptyCodeConversionScroll)
    assert code_conversion_rows(tmp_path) == before


def test_unchanged_code_conversions_in_another_key_order_write_nothing(
    small_sim: RunningSimulator, work_sync: SyncFn, tmp_path: Path
) -> None:
    work_sync(streams=CODE_CONVERSIONS)
    before = code_conversion_rows(tmp_path)
    result = work_sync(streams=CODE_CONVERSIONS, source_factory=ReorderedCodeConversionKeys)["code_conversions"]
    assert result.extra["changed"] is False and result.rows_written == 0
    assert code_conversion_rows(tmp_path) == before  # _synced_at and _run_id untouched


@pytest.mark.parametrize("cap", [None, 7, 100, 500])
def test_a_scroll_without_paging_headers_is_read_whole_whatever_page_size_the_service_serves(
    small_sim: RunningSimulator, work_sync: SyncFn, tmp_path: Path, cap: int | None
) -> None:
    """The spec promises X-Page-Count and X-Row-Count for lookups only: a scroll without them, whose first page is
    shorter than asked, may be capped (the spec gives no maximum page size), so the next page is asked at the size
    served (one request more when it was the end). Was: the first short page ended the read, and the full
    replace deleted every conversion after it."""
    work_sync(streams=CODE_CONVERSIONS)  # with headers, at the size asked
    small_sim.set_faults(scroll_headers=False, max_page_size=cap)
    result = work_sync(streams=CODE_CONVERSIONS)["code_conversions"]
    at_service = sorted(row["id"] for row in small_sim.store.reader.code_conversion_rows())
    assert result.status == "success" and result.rows_read == len(at_service)
    assert [row[0] for row in code_conversion_rows(tmp_path)] == at_service


CODE_CONVERSION_LOOKUP = "/service/basicdata/codeconverter/lookup"


class ShortCodeConversionLookup(ClientSource):
    """The code-conversion lookup without criteria answering none (it matches nothing without criteria) or refused
    (``refused``: HTTP 405) when read whole; its count (one row asked) as the service answers it."""

    refused = False

    async def code_conversion_lookup_pages(self, page_size: int) -> AsyncIterator[LookupResult]:
        if self.refused:
            raise LookupRefused("HTTP 405")
        yield LookupResult([], 0, 0)


class RefusedCodeConversionLookup(ShortCodeConversionLookup):
    refused = True


SCROLLS_UNREAD = {  # a scroll that cannot be read whole: its service's mode (or a source) and what tells
    "first-page-to-every-request": ({"scroll_first_rows": 50, "scroll_headers": False}, ClientSource,
                                    r"scroll gave 50 conversions but the code-conversion lookup counts \d+"),
    "a-record-twice": ({}, ShiftedCodeConversionScroll,
                       r"scroll gave \d+ conversions but the code-conversion lookup counts \d+"),
    "spring-page-object": ({"scroll_page_object": True}, ClientSource, "is not a JSON array of objects"),
}


@pytest.mark.parametrize("case", list(SCROLLS_UNREAD))
def test_a_scroll_that_cannot_be_read_whole_is_read_by_the_lookup_without_criteria(
    small_sim: RunningSimulator, work_sync: SyncFn, tmp_path: Path, case: str
) -> None:
    """A service paging its scroll by parameters of its own (the spec shows none) answers its first 50 rows to every
    request, without headers: the lookup's X-Row-Count tells (was: 50 read, a success, the full replace deleting
    every other conversion; then a failed stream every run); one serving a record twice in place of another (was:
    a failed stream); a Spring service's scroll answering a page object (``{"content": [...]}``, was a failed
    stream every run). The lookup without criteria, paged and counted as every lookup, is read instead."""
    faults, source, told = SCROLLS_UNREAD[case]
    small_sim.set_faults(**faults)
    result = work_sync(streams=CODE_CONVERSIONS, source_factory=source)["code_conversions"]
    at_service = sorted(row["id"] for row in small_sim.store.reader.code_conversion_rows())
    assert result.status == "success" and result.rows_read == len(at_service)
    assert result.tallies["code_conversions"].records == len(at_service)  # the scroll's own not counted with them
    assert re.search(told, result.extra["read_by_lookup"]), result.extra["read_by_lookup"]
    assert [row[0] for row in code_conversion_rows(tmp_path)] == at_service


@pytest.mark.parametrize("lookup", [ShortCodeConversionLookup, RefusedCodeConversionLookup])
def test_a_scroll_unread_whose_lookup_cannot_be_read_either_fails_naming_both_and_keeps_the_table(
    small_sim: RunningSimulator, work_sync: SyncFn, tmp_path: Path, lookup: type[ClientSource]
) -> None:
    work_sync(streams=CODE_CONVERSIONS)
    before = code_conversion_rows(tmp_path)
    small_sim.set_faults(scroll_page_object=True)
    lookup_said = "HTTP 405" if lookup.refused else "answers none"  # type: ignore[attr-defined]
    with pytest.raises(ProtocolError, match=f"is not a JSON array of objects.*lookup without criteria.*{lookup_said}"):
        work_sync(streams=CODE_CONVERSIONS, source_factory=lookup)
    assert code_conversion_rows(tmp_path) == before


def test_a_scroll_the_check_of_is_switched_off_is_taken_as_whole(
    small_sim: RunningSimulator, work_sync: SyncFn, tmp_path: Path
) -> None:
    """An operator whose service counts conversions its scroll does not serve switches the check off: the scroll
    is then taken as whole, as asked, the lookup not asked, and the run says so."""
    work_sync(streams=CODE_CONVERSIONS)
    before = code_conversion_rows(tmp_path)
    requests = small_sim.request_count(path=CODE_CONVERSION_LOOKUP)
    result = work_sync(TEST_SETTINGS.replaced(code_conversion_count=False),
                       streams=CODE_CONVERSIONS)["code_conversions"]
    assert result.extra["count_check_off"].startswith("switched off (FREIGHT_CODE_CONVERSION_COUNT=0)")
    assert small_sim.request_count(path=CODE_CONVERSION_LOOKUP) == requests  # the lookup not asked
    assert code_conversion_rows(tmp_path) == before


def test_a_refused_count_lookup_is_said_and_an_unchecked_scroll_deletes_nothing(
    small_sim: RunningSimulator, work_sync: SyncFn, tmp_path: Path
) -> None:
    """A user not granted the lookup (403): the scroll cannot be checked, and without X-Row-Count nothing vouches for
    it, so the conversions it lacks are kept. Was: the table cut to the scroll's first 50 rows, nothing said."""
    work_sync(streams=CODE_CONVERSIONS)
    before = code_conversion_rows(tmp_path)
    small_sim.set_faults(scroll_first_rows=50, scroll_headers=False, forbidden_prefixes=[CODE_CONVERSION_LOOKUP])
    result = work_sync(streams=CODE_CONVERSIONS)["code_conversions"]
    assert result.status == "success" and result.rows_read == 50
    assert result.extra["lookup_row_count"] is None
    assert result.extra["count_check_off"].startswith("the service refused the code-conversion lookup (HTTP 403)")
    assert "no held conversion is deleted" in result.extra["count_check_off"]
    assert code_conversion_rows(tmp_path) == before


class OneConversionDeleted(ClientSource):
    """The service as it is once its lowest conversion is deleted (scroll and ``X-Row-Count`` alike); its lookup
    refused (``refused``), or counting that conversion still on its first answer (deleted while the scroll read)."""

    def __init__(self, client: AsyncFreightClient, refused: bool) -> None:
        super().__init__(client)
        self.refused = refused
        self.counts = 0
        self.gone: int | None = None

    async def code_conversion_pages(self, page_size: int) -> AsyncIterator[LookupResult]:
        async for page in super().code_conversion_pages(page_size):
            self.gone = min(item["id"] for item in page.items) if self.gone is None else self.gone
            fewer = None if page.row_count is None else page.row_count - 1
            yield LookupResult([item for item in page.items if item["id"] != self.gone], fewer, page.page_count)

    async def code_conversion_count(self) -> int | None:
        if self.refused:
            raise LookupRefused("HTTP 405")
        self.counts += 1
        total = await super().code_conversion_count()
        return None if total is None else total - (self.counts > 1)


@pytest.mark.parametrize("scroll_headers", [True, False])
def test_a_refused_count_lookup_leaves_deletions_to_a_scroll_checked_by_its_own_count(
    small_sim: RunningSimulator, work_sync: SyncFn, tmp_path: Path, scroll_headers: bool
) -> None:
    work_sync(streams=CODE_CONVERSIONS)
    before = [row[0] for row in code_conversion_rows(tmp_path)]
    small_sim.set_faults(scroll_headers=scroll_headers)
    make, built = factory(OneConversionDeleted, refused=True)
    result = work_sync(streams=CODE_CONVERSIONS, source_factory=make)["code_conversions"]
    assert result.status == "success" and result.rows_read == len(before) - 1
    assert result.extra["count_check_off"].startswith("the service refused the code-conversion lookup (HTTP 405)")
    held = [row[0] for row in code_conversion_rows(tmp_path)]
    assert held == (before[1:] if scroll_headers else before)  # checked by X-Row-Count: the deletion is applied
    assert built[0].gone == before[0]


def test_a_conversion_deleted_while_the_scroll_reads_is_no_shortfall(
    small_sim: RunningSimulator, work_sync: SyncFn, tmp_path: Path
) -> None:
    """The lookup is asked before and after the scroll; the scroll is held to the smaller count."""
    work_sync(streams=CODE_CONVERSIONS)
    before = [row[0] for row in code_conversion_rows(tmp_path)]
    make, built = factory(OneConversionDeleted, refused=False)
    result = work_sync(streams=CODE_CONVERSIONS, source_factory=make)["code_conversions"]
    assert built[0].counts == 2 and result.extra["lookup_row_count"] == len(before) - 1
    assert "count_check_off" not in result.extra
    assert [row[0] for row in code_conversion_rows(tmp_path)] == before[1:]


@pytest.mark.parametrize("faults", [
    {"scroll_paging": False}, {"scroll_paging": False, "scroll_headers": False}, {"scroll_headers": False},
    {"max_page_size": 10}, {"max_page_size": 10, "scroll_headers": False},
])
def test_the_scroll_agrees_with_the_lookup_count_in_every_scroll_mode(
    small_sim: RunningSimulator, work_sync: SyncFn, tmp_path: Path, faults: dict[str, object]
) -> None:
    small_sim.set_faults(**faults)
    result = work_sync(streams=CODE_CONVERSIONS)["code_conversions"]
    at_service = sorted(row["id"] for row in small_sim.store.reader.code_conversion_rows())
    assert result.status == "success" and result.extra["lookup_row_count"] == len(at_service)
    assert "count_check_off" not in result.extra
    assert [row[0] for row in code_conversion_rows(tmp_path)] == at_service


def memo_rows(data_dir: Path, shipment_id: int) -> list[tuple]:
    return query(work_db(data_dir), "SELECT * FROM freight.shipment_memos WHERE shipment_id = ? ORDER BY memo_id",
                 [shipment_id])


def quarantine(data_dir: Path, shipment_id: int) -> list[tuple]:
    return query(work_db(data_dir),
                 "SELECT stream, reason, attempts FROM freight_meta.quarantine WHERE shipment_id = ?",
                 [shipment_id])


def test_a_memo_lookup_missing_rows_quarantines_that_shipment_and_keeps_its_memos(
    small_sim: RunningSimulator, work_sync: SyncFn, tmp_path: Path
) -> None:
    work_sync()
    victim = next(doc for doc in small_sim.store.reader.expected_documents() if len(doc.get("memos") or []) >= 2)
    before = memo_rows(tmp_path, victim["id"])
    assert len(before) == len(victim["memos"])
    small_sim.advance_clock(60)
    small_sim.touch_shipments([victim["id"]])  # changed: its memos are read again

    make, built = factory(ShortMemoLookup, {(victim["client"], victim["shipment_number"])}, times=None)
    results = work_sync(source_factory=make)  # the run goes on
    assert built[0].shortened == {(victim["client"], victim["shipment_number"]): 3}
    assert results["shipments"].quarantined == 1
    assert results["shipments"].extra["parts"]["shipment_memos"]["quarantined"] == 1
    assert memo_rows(tmp_path, victim["id"]) == before  # the old memos stay while it is quarantined
    ((stream, reason, attempts),) = quarantine(tmp_path, victim["id"])
    assert (stream, attempts) == ("shipment_memos", 1)
    assert re.search(rf"memo lookup .* \(shipment {victim['id']}\) returned {len(before) - 1} rows but "
                     rf"X-Row-Count said {len(before)}", reason), reason

    work_sync()  # healed: the retry queue puts it back to work, and it loads
    assert quarantine(tmp_path, victim["id"]) == []
    assert_converged(small_sim.store, work_db(tmp_path))


def test_a_memo_lookup_without_a_row_count_quarantines_and_keeps_the_memos(
    small_sim: RunningSimulator, work_sync: SyncFn, tmp_path: Path
) -> None:
    work_sync()
    victim = next(doc for doc in small_sim.store.reader.expected_documents() if doc.get("memos"))
    before = memo_rows(tmp_path, victim["id"])
    small_sim.advance_clock(60)
    small_sim.touch_shipments([victim["id"]])
    make, _ = factory(ShortMemoLookup, {(victim["client"], victim["shipment_number"])}, drop_count=True)
    work_sync(source_factory=make)
    ((stream, reason, _),) = quarantine(tmp_path, victim["id"])
    assert stream == "shipment_memos"
    assert re.search(rf"memo lookup .* \(shipment {victim['id']}\) was answered without X-Row-Count", reason)
    assert memo_rows(tmp_path, victim["id"]) == before


def test_a_memo_lookup_missing_rows_once_is_asked_again(
    small_sim: RunningSimulator, work_sync: SyncFn, tmp_path: Path
) -> None:
    victim = next(doc for doc in small_sim.store.reader.expected_documents() if doc.get("memos"))
    make, built = factory(ShortMemoLookup, {(victim["client"], victim["shipment_number"])}, times=1)
    work_sync(source_factory=make)
    assert built[0].shortened == {(victim["client"], victim["shipment_number"]): 1}
    assert_converged(small_sim.store, work_db(tmp_path))
