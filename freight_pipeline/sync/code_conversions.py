"""The code-conversions stream: the whole (small) set through the scroll endpoint, every run.

The warehouse compares the new set with what it holds and writes nothing when they are equal, so
an unchanged run leaves the table, its ``_synced_at`` and its Parquet untouched.

The table is replaced by what was read, so a truncated read would delete rows: the scroll must add
up to its ``X-Row-Count`` (every page agreeing on it), else it is read again and finally the stream
fails without writing (``changes.read_complete``).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from typing import Any

from freight_pipeline.normalize import NormalizationError, normalize_code_conversions, to_arrow_batch
from freight_pipeline.sync.changes import read_complete
from freight_pipeline.sync.result import StreamResult
from freight_pipeline.sync.source import SourceAPI
from freight_pipeline.warehouse import Reject, Warehouse

STREAM = "code_conversions"
TABLE = "code_conversions"

Progress = Callable[[str], None]


async def sync_code_conversions(
    source: SourceAPI, warehouse: Warehouse, run_id: str, progress: Progress | None = None, *, attempts: int = 3
) -> StreamResult:
    say = progress or (lambda message: None)
    result = StreamResult(STREAM, run_id, dt.datetime.now(dt.UTC))
    requests_before, retries_before = source.request_counts()
    result.cursor_before = warehouse.get_cursor(STREAM)
    records = await read_complete(source.code_conversion_pages, "code-conversion scroll", attempts)
    result.rows_read = len(records)
    good: list[dict[str, Any]] = []
    rejects: list[Reject] = []
    for record in records:
        try:
            normalize_code_conversions([record])
        except NormalizationError as exc:
            rejects.append(Reject(STREAM, str(record.get("id")), json.dumps(record, default=str), str(exc)))
            continue
        good.append(record)
    table = to_arrow_batch(normalize_code_conversions(good))[TABLE]
    outcome = warehouse.replace_table(run_id, TABLE, table, stream=STREAM, rejects=rejects)
    result.add_rows({TABLE: outcome.rows_written})
    result.rejected = len(rejects)
    result.extra["changed"] = outcome.changed
    say(f"code conversions: {len(records)} read, {'changed' if outcome.changed else 'unchanged'}")
    requests_after, retries_after = source.request_counts()
    result.requests = requests_after - requests_before
    result.retries = retries_after - retries_before
    result.cursor_after = warehouse.get_cursor(STREAM)
    return result
