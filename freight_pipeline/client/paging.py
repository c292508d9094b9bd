"""One page of a lookup or scroll: the raw JSON as received plus typed items built on demand."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import cached_property
from typing import Any, Generic, TypeVar

T = TypeVar("T")

DEFAULT_PAGE_SIZE = 50  # the spec's default
MAX_PAGE_SIZE = 500  # assumption A4; iteration uses it unless told otherwise


class Page(Generic[T]):
    """A page of results.

    raw:        the JSON array as received (list of dicts), for storing documents unchanged
    items:      the same records as models (built on first access)
    page_no / page_size: what was asked for
    page_count: ``X-Page-Count`` (total pages), None if the service did not send it
    row_count:  ``X-Row-Count`` (total records of the query), None if not sent
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
    ) -> None:
        self.raw = raw
        self.page_no = page_no
        self.page_size = page_size
        self.page_count = page_count
        self.row_count = row_count
        self._parse = parse

    @cached_property
    def items(self) -> list[T]:
        return [self._parse(item) for item in self.raw]

    def __len__(self) -> int:
        return len(self.raw)

    def __iter__(self) -> Iterator[T]:
        return iter(self.items)

    @property
    def is_last(self) -> bool:
        """No further page: the headers say so, or the page is short (A15: also without headers)."""
        if len(self.raw) < self.page_size:
            return True
        if self.page_count is not None:
            return self.page_no + 1 >= self.page_count
        return False

    def __repr__(self) -> str:
        return (
            f"Page(page_no={self.page_no}, page_size={self.page_size}, items={len(self.raw)}, "
            f"page_count={self.page_count}, row_count={self.row_count})"
        )


def validate_paging(page_no: int, page_size: int) -> None:
    if isinstance(page_no, bool) or not isinstance(page_no, int) or page_no < 0:
        raise ValueError(f"page_no must be an integer >= 0, got {page_no!r}")
    if isinstance(page_size, bool) or not isinstance(page_size, int) or page_size < 1:
        raise ValueError(f"page_size must be an integer >= 1, got {page_size!r}")
