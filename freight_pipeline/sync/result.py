"""What one stream did in one run: the figures logged to ``sync_runs`` and shown in Dagster."""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class StreamResult:
    stream: str
    run_id: str
    started_at: dt.datetime
    finished_at: dt.datetime | None = None
    status: str = "running"
    rows_read: int = 0
    rows_written: int = 0
    requests: int = 0
    retries: int = 0
    rejected: int = 0
    quarantined: int = 0
    """Records that failed in this run and wait in the retry queue (``freight_meta.quarantine``)."""
    data_problems: int = 0
    """Values of loaded records that could not be converted (``freight_meta.data_problems``)."""
    cursor_before: str | None = None
    cursor_after: str | None = None
    error: str | None = None
    rows_by_table: dict[str, int] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def add_rows(self, counts: dict[str, int]) -> None:
        for table, count in counts.items():
            self.rows_by_table[table] = self.rows_by_table.get(table, 0) + count
            self.rows_written += count

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)
