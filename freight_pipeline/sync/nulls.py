"""The second line of defence against a silent NULL, which needs no declaration: per column of the rows a
stream's run wrote, its share of nulls against that column's share in the runs before, kept in
``freight_meta.column_nulls``.

A column whose share jumps (under :data:`FLOOR` in the runs before, over :data:`BOUND` in this run, each of
at least :data:`MIN_ROWS` rows) is reported by the run that meets it (its ``sync_runs.details`` ``extra.
null_jumps``, its result line) and stays ``jumped`` for ``status`` and the Dagster check
``no_null_share_jumps`` until a run's share is back under the bound; the runs while it is jumped are not
taken into what later runs are compared with. A rename the shape watcher misses, a mapping's fault, a service
that starts sending null all land here. The counts come free with the Arrow tables each batch writes.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from freight_pipeline.sync.result import NullCounts
from freight_pipeline.sync.streams import TABLE_SOURCE
from freight_pipeline.warehouse.store import Warehouse

FLOOR = 0.05
"""A column null in fewer than this share of the rows of the runs before..."""
BOUND = 0.50
"""... and in more than this share of a run's rows has jumped."""
MIN_ROWS = 20
"""Rows a run, and the runs before it, must have written for their shares to be compared."""
RECENT_RUNS = 10
"""Runs a column's share is compared with (the latest that wrote rows of its table)."""

USUAL = "usual"
JUMPED = "jumped"


@dataclass(frozen=True)
class NullJump:
    """A column whose share of nulls jumped in one run."""

    table: str
    column: str
    rows: int
    nulls: int
    runs_before: int
    rows_before: int
    nulls_before: int

    def phrase(self) -> str:
        """``shipment_goods.weight null in 194 of 194 rows, 0.0% of 1,204 in the 3 runs before``."""
        return f"{self.table}.{self.column} {self.counts_text()}"

    def counts_text(self) -> str:
        runs = "the run" if self.runs_before == 1 else f"the {self.runs_before} runs"
        return (f"null in {self.nulls:,} of {self.rows:,} rows, {self.nulls_before / self.rows_before:.1%} of "
                f"{self.rows_before:,} in {runs} before")


def jump_phrases(jumps: list[NullJump]) -> list[str]:
    """One phrase per table and counts: ``carriage_legs.origin_location_name, origin_unloc and 8 more null in 251
    of 251 rows, 0.0% of 4,440 in the run before`` (a renamed object nulls its columns together)."""
    grouped: dict[tuple[str, str], list[str]] = {}
    for jump in jumps:
        grouped.setdefault((jump.table, jump.counts_text()), []).append(jump.column)
    phrases = []
    for (table, counts), columns in grouped.items():
        named = ", ".join(columns[:3]) + (f" and {len(columns) - 3} more" if len(columns) > 3 else "")
        phrases.append(f"{table}.{named} {counts}")
    return phrases


def note_nulls(warehouse: Warehouse, run_id: str, counts: Mapping[str, NullCounts],
               at: dt.datetime | None = None) -> list[NullJump]:
    """Compare each column of the rows this run wrote (``counts``, by table) with the runs before it; record
    every column's state in one transaction; this run's jumps."""
    written = {table: counted for table, counted in counts.items() if counted.rows}
    if not written:
        return []
    at = at or dt.datetime.now(dt.UTC)
    known = {(row["table_name"], row["column_name"]): row for row in warehouse.reads.column_nulls(list(written))}
    jumps: list[NullJump] = []
    rows: list[dict[str, Any]] = []
    for table, counted in written.items():
        for column, nulls in counted.nulls.items():
            row, jump = _next_state(table, column, counted.rows, nulls, known.get((table, column)), run_id, at)
            rows.append(row)
            if jump is not None:
                jumps.append(jump)
    warehouse.writes.record_column_nulls(rows)
    return jumps


def _next_state(table: str, column: str, rows: int, nulls: int, before: Mapping[str, Any] | None, run_id: str,
                at: dt.datetime) -> tuple[dict[str, Any], NullJump | None]:
    recent = _recent(before)
    state = before["state"] if before else USUAL
    rows_before, nulls_before = sum(r[1] for r in recent), sum(r[2] for r in recent)
    compared = rows >= MIN_ROWS and rows_before >= MIN_ROWS
    share = nulls / rows
    jump = None
    if state == JUMPED:
        if compared and share <= BOUND:
            state = USUAL
    elif compared and nulls_before / rows_before < FLOOR and share > BOUND:
        state = JUMPED
        jump = NullJump(table, column, rows, nulls, len(recent), rows_before, nulls_before)
    if state == USUAL:
        recent = [*recent, [run_id, rows, nulls]][-RECENT_RUNS:]
    changed = before is None or before["state"] != state
    return {
        "table_name": table, "column_name": column, "stream": TABLE_SOURCE.get(table), "state": state,
        "recent_runs": json.dumps(recent), "latest_run_id": run_id, "rows_latest": rows, "nulls_latest": nulls,
        "changed_run_id": run_id if changed else before["changed_run_id"] if before else None,
        "changed_at": at if changed else before["changed_at"] if before else None,
    }, jump


def _recent(row: Mapping[str, Any] | None) -> list[list[Any]]:
    if row is None or row.get("recent_runs") is None:
        return []
    value = row["recent_runs"]
    return list(json.loads(value) if isinstance(value, str) else value)


def jump_record(jump: NullJump) -> dict[str, Any]:
    """A jump as kept in ``sync_runs.details`` (the run's result line: :func:`jump_phrases`)."""
    return {**asdict(jump), "phrase": jump.phrase()}
