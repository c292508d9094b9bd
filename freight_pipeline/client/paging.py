"""Pages of lookups and scrolls, and the one rule for walking them (:class:`PageWalk`).

Walking pages: the headers decide when they are present (``X-Page-Count``, ``X-Row-Count``, both
promised by the spec for lookups); a short page only ends the walk when the service sends neither (A15).

* Without headers (the spec promises them for lookups only, and shows no parameter of the scrolls), a
  first page shorter than asked is the end, or the service's cap on the page size: the next page, asked
  at the size served, tells them apart (empty or short: the end; full: a cap, and the walk goes on), one
  request more for a result that fits one page. A service that ignores ``page_no`` answers that page with
  the first again: it gave everything at once, and the repeat is no page of its own (:attr:`PageWalk.echoed`).
  A first page longer than asked is a service that ignores ``page_size``: the next page is asked at the size
  served, and the same answer again means it ignores ``page_no`` too and gave everything at once.

* A page-size cap: the spec gives no maximum page size, so a service may answer fewer rows than
  asked. Page 0 shorter than asked while the headers say more rows exist means exactly that; the
  walk goes on with the page size the service used (the length of page 0), so that page numbers
  count the service's pages and no row is skipped.
* A page size ignored: page 0 longer than asked, with headers, is a service serving pages of its own size (its
  headers count those pages); the walk goes on with the size served, as for a cap, so that no page is asked
  past the end (logged at INFO, as a cap is). Only page 0 sets it: a later page longer than asked changes nothing.
* A short or empty page later on while the headers say more follow, or a page equal to the one
  before (a service ignoring ``page_no``, which would otherwise loop forever or silently return a
  part of the result), raises :class:`ProtocolError` instead of ending or looping.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from functools import cached_property
from typing import Any, Generic, TypeVar

from freight_pipeline.client.errors import ProtocolError

T = TypeVar("T")

DEFAULT_PAGE_SIZE = 50  # the spec's default
MAX_PAGE_SIZE = 500  # assumption A4; iteration uses it unless told otherwise

logger = logging.getLogger("freight_pipeline.client")


class Page(Generic[T]):
    """A page of results.

    raw:        the JSON array as received (list of dicts), for storing documents unchanged
    items:      the same records as models (built on first access)
    page_no / page_size: what was asked for
    page_count: ``X-Page-Count`` (total pages), None if the service did not send it
    row_count:  ``X-Row-Count`` (total records of the query), None if not sent (both 0 for a ``204 No Content`` to
                page 0 without them: ``ClientCore.page``)
    method / path: the request that answered it (for error messages)
    """

    def __init__(
        self,
        raw: list[dict[str, Any]],
        *,
        page_no: int,
        page_size: int,
        page_count: int | None,
        row_count: int | None,
        parse: Callable[[dict[str, Any]], T],
        method: str | None = None,
        path: str | None = None,
    ) -> None:
        self.raw = raw
        self.page_no = page_no
        self.page_size = page_size
        self.page_count = page_count
        self.row_count = row_count
        self.method = method
        self.path = path
        self._parse = parse

    @cached_property
    def items(self) -> list[T]:
        return [self._parse(item) for item in self.raw]

    def __len__(self) -> int:
        return len(self.raw)

    def __iter__(self) -> Iterator[T]:
        return iter(self.items)

    @property
    def has_headers(self) -> bool:
        return self.page_count is not None or self.row_count is not None

    @property
    def more_by_headers(self) -> bool:
        """The headers say rows follow this page (False when neither header was sent)."""
        more_pages = self.page_count is not None and self.page_no + 1 < self.page_count
        rows_covered = self.page_no * self.page_size + len(self.raw)
        more_rows = self.row_count is not None and rows_covered < self.row_count
        return more_pages or more_rows

    @property
    def is_last(self) -> bool:
        """No further page: by the headers when sent, else a short page (A15)."""
        if self.has_headers:
            return not self.more_by_headers
        return len(self.raw) < self.page_size

    def __repr__(self) -> str:
        return (
            f"Page(page_no={self.page_no}, page_size={self.page_size}, items={len(self.raw)}, "
            f"page_count={self.page_count}, row_count={self.row_count})"
        )


class PageWalk:
    """Which page to ask for next, page after page (see the module docstring for the rules)."""

    def __init__(self, page_size: int) -> None:
        validate_paging(0, page_size)
        self.page_no = 0
        self.page_size = page_size
        self._previous: list[dict[str, Any]] | None = None
        self._probing = False
        self.echoed = False
        """The page just taken repeats a short first page without headers: not a page of its own (the caller
        leaves it out)."""

    def advance(self, page: Page[Any]) -> bool:
        """Take in ``page``; True when another page is to be fetched (at ``page_no`` / ``page_size``)."""
        probing, self._probing = self._probing, False
        self.echoed = probing and bool(page.raw) and page.raw == self._previous
        if self.echoed:  # a service that ignores page_no gave its whole answer on the first page
            return False
        self._check_not_repeated(page)
        self._previous = page.raw
        if page.page_no == 0 and not page.has_headers and page.raw and len(page.raw) != page.page_size:
            # shorter than asked: the end, or a cap; longer: page_size ignored, maybe everything. Ask the next
            self._probing = True
            self._adopt_service_page_size(page)
            self.page_no += 1
            return True
        if page.page_no == 0 and len(page.raw) > page.page_size:  # with headers: page_size ignored
            self._adopt_service_page_size(page)
        if page.is_last:
            return False
        if len(page.raw) < self.page_size:
            self._adopt_service_page_size(page)
        self.page_no += 1
        return True

    def _check_not_repeated(self, page: Page[Any]) -> None:
        if page.raw and page.raw == self._previous:
            raise _paging_error(
                page,
                f"page {page.page_no} repeats page {page.page_no - 1}; the service seems to ignore page_no, "
                "so paging cannot go on",
            )

    def _adopt_service_page_size(self, page: Page[Any]) -> None:
        """A short page while the headers say more rows follow, a first page with headers longer than asked (or a
        first page without headers shorter or longer than asked): the service's page size on page 0, else an
        error."""
        if not page.has_headers:
            logger.debug("%s %s answered %d rows for page_size %d without X-Page-Count or X-Row-Count: the end, "
                         "a cap on the page size or one it ignores; asking page 1 with page_size %d", page.method,
                         page.path, len(page.raw), page.page_size, len(page.raw))
            self.page_size = len(page.raw)
            return
        if page.page_no != 0 or not page.raw:
            raise _paging_error(
                page,
                f"page {page.page_no} holds {len(page.raw)} of {page.page_size} rows, yet the headers say more "
                f"follow (X-Page-Count {page.page_count}, X-Row-Count {page.row_count})",
            )
        logger.info(
            "%s %s answered %d rows for page_size %d (X-Row-Count %s): the service %s the page size; "
            "paging on with page_size %d",
            page.method,
            page.path,
            len(page.raw),
            page.page_size,
            page.row_count,
            "ignores" if len(page.raw) > page.page_size else "caps",
            len(page.raw),
        )
        self.page_size = len(page.raw)


def _paging_error(page: Page[Any], problem: str) -> ProtocolError:
    where = f"{page.method} {page.path}" if page.method else "a paged request"
    return ProtocolError(f"{where}: {problem}", method=page.method, path=page.path)


def validate_paging(page_no: int, page_size: int) -> None:
    if isinstance(page_no, bool) or not isinstance(page_no, int) or page_no < 0:
        raise ValueError(f"page_no must be an integer >= 0, got {page_no!r}")
    if isinstance(page_size, bool) or not isinstance(page_size, int) or page_size < 1:
        raise ValueError(f"page_size must be an integer >= 1, got {page_size!r}")
