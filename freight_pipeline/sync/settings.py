"""Tuning of a sync run, declared once with documented defaults."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass


@dataclass(frozen=True)
class SyncSettings:
    page_size: int = 500
    """Lookup page size (the simulator's maximum, assumption A4)."""
    concurrency: int = 8
    """Detail requests in flight at once, over one pooled connection set."""
    overlap: dt.timedelta = dt.timedelta(minutes=10)
    """How far before the cursor each run re-reads, to catch late commits and clock skew."""
    start_cursor: str | None = None
    """First run only: sync shipments modified at or after this ``YYYY-MM-DD[ HH:MM:SS]`` (None: all)."""
    reconcile_interval: dt.timedelta | None = dt.timedelta(hours=6)
    """How often a run also lists every live shipment id (one lookup per ``page_size`` shipments) to
    delete what vanished from the source and refetch what is missing or stale: deletions have no
    change feed, so this bounds how long a deleted shipment lingers. 0: every run; None: never."""
    count_attempts: int = 3
    """How often one lookup is re-asked when its page disagrees with ``X-Row-Count``."""
    detail_batch_size: int = 200
    """Shipments per detail-stream transaction (events, legs, memos)."""

    def __post_init__(self) -> None:
        if not 1 <= self.page_size <= 500:
            raise ValueError(f"page_size must be between 1 and 500, got {self.page_size}")
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {self.concurrency}")
        if self.overlap < dt.timedelta(0):
            raise ValueError("overlap must not be negative")
        if self.reconcile_interval is not None and self.reconcile_interval < dt.timedelta(0):
            raise ValueError("reconcile_interval must not be negative")
        if self.detail_batch_size < 1:
            raise ValueError(f"detail_batch_size must be at least 1, got {self.detail_batch_size}")
