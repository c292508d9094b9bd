"""What one stream did in one run: the figures logged to ``sync_runs`` and shown in Dagster."""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

import pyarrow as pa

from freight_pipeline.normalize.shapes import FieldTally
from freight_pipeline.warehouse.meta import NOTICE_KINDS, NOTICES
from freight_pipeline.warehouse.records import RunRecord
from freight_pipeline.warehouse.run_log import SKIPPED


class NoticeKind(enum.StrEnum):
    """What a run met of the service's behaviour (``StreamResult.notices``), one kind per notice line, each
    with what it means to a user (:attr:`meaning`: the check ``no_service_notices`` lists them) and whether it
    is said again while it holds (:attr:`lasts`)."""

    meaning: str
    docs: str
    """The section of a repository doc that says what the pipeline does about it (an alert's next step)."""
    lasts: bool
    """Said by every run while it holds (its alert stays open until a run no longer meets it); else said by the
    run that met it only (an event, or a finding the pipeline then acts on: its alert closes with the next run)."""

    def __new__(cls, value: str, meaning: str, section: str, lasts: bool) -> NoticeKind:
        kind = str.__new__(cls, value)
        kind._value_ = value
        kind.meaning = meaning
        kind.docs = f"docs/real-services.md#{section}"
        kind.lasts = lasts
        return kind

    @property
    def said_by(self) -> str:
        return "every run while it holds" if self.lasts else "the run that met it"

    RESTORE = ("restore", "the service's data gone back (a restore, reconciled in that run)",
               "a-service-whose-data-goes-back-in-time", False)
    RESTORE_PROBE_REFUSED = ("restore_probe_refused",
                             "the restore probe's lookup refused (a restore noticed by the reconcile interval only)",
                             "a-service-whose-data-goes-back-in-time", True)
    CLOCK_WITHOUT_OFFSET = ("clock_without_offset", "a clock without a UTC offset (FREIGHT_SERVICE_TIMEZONE)",
                            "a-clock-without-a-utc-offset", True)
    CHANGES_WITHOUT_STAMP = ("changes_without_stamp",
                             "events changed without the shipment's last-modified stamp (open shipments' events "
                             "re-read on a rolling basis)", "events-changed-without-the-shipments-stamp", False)
    MEMO_BATCH_OFF = ("memo_batch_off",
                      "the batched memo lookup refused or disagreeing (memo lines looked up one shipment at a time)",
                      "memo-lines-read-a-page-at-a-time-checked-shipment-by-shipment", True)


@dataclass
class NullCounts:
    """The rows a run wrote of one table, and of those, the rows with each column null."""

    rows: int = 0
    nulls: dict[str, int] = field(default_factory=dict)

    def add(self, table: pa.Table) -> None:
        """Count the rows of one written Arrow table (its columns know their nulls)."""
        self.rows += table.num_rows
        for name, column in zip(table.column_names, table.columns, strict=True):
            self.nulls[name] = self.nulls.get(name, 0) + column.null_count


def count_nulls(nulls: dict[str, NullCounts], tables: Mapping[str, pa.Table]) -> None:
    """Count the rows of ``tables`` (table name -> the rows written: ``WriteStats.written``) in ``nulls``."""
    for name, table in tables.items():
        if table.num_rows:
            nulls.setdefault(name, NullCounts()).add(table)


@dataclass
class StreamResult(RunRecord):
    """A run of one stream (:class:`~freight_pipeline.warehouse.records.RunRecord`'s fields) and what
    became of its bad records."""

    quarantined: int = 0
    """Records that failed in this run and wait in the retry queue (``freight_meta.quarantine``)."""
    data_problems: int = 0
    """Values of loaded records that could not be converted (``freight_meta.data_problems``)."""
    tallies: dict[str, FieldTally] = field(default_factory=dict)
    """The fields of the records read, per source (a part of a shipment, or the stream): compared with the
    table specs and earlier runs once the stream succeeded (``sync.drift``)."""
    nulls: dict[str, NullCounts] = field(default_factory=dict)
    """The rows written per table and their nulls per column: compared with the runs before once the stream
    succeeded (``sync.nulls``)."""

    @classmethod
    def begun(cls, run_id: str, stream: str) -> StreamResult:
        """A stream's result as its run begins, known to the :func:`results_begun` block it runs in: what it counted
        (read, written in the batches it committed) is logged for it when it fails."""
        result = cls(run_id, stream, dt.datetime.now(dt.UTC))
        begun = _begun.get()
        if begun is not None:
            begun.append(result)
        return result

    def count_nulls(self, tables: Mapping[str, pa.Table]) -> None:
        """Count the rows of ``tables`` (table name -> the rows written: ``WriteStats.written``) in :attr:`nulls`."""
        count_nulls(self.nulls, tables)

    def add_rows(self, counts: dict[str, int]) -> None:
        for table, count in counts.items():
            self.rows_by_table[table] = self.rows_by_table.get(table, 0) + count
            self.rows_written += count

    def summary(self) -> str:
        """``read 107, wrote 5,230 rows in 401 requests (0 retries, 0 rejected)``, or why it did not run."""
        if SKIPPED in self.extra:
            return str(self.extra[SKIPPED])
        return (f"read {self.rows_read:,}, wrote {self.rows_written:,} rows in {self.requests:,} requests "
                f"({self.retries} retries, {self.rejected} rejected)")

    def bad_records(self) -> str | None:
        """What is wrong with records of the stream, in one line; None when nothing is."""
        waiting = self.extra.get("retry_queue", 0)
        if not (self.quarantined or self.data_problems or waiting):
            return None
        return (f"{self.quarantined} records quarantined in this run, {waiting} waiting in the retry queue, "
                f"{self.data_problems} unconvertible values nulled (freight_meta.quarantine, "
                "freight_meta.data_problems)")

    @property
    def notices(self) -> list[str]:
        """What the run met that its users should know of, a line each, said once a run: the service's
        behaviour (a clock without an offset, a restore), not a record's fault."""
        return list(self.extra.get(NOTICES, []))

    def add_notice(self, kind: NoticeKind, line: str) -> None:
        """Say ``line`` once a run; ``kind`` names what was met (the alert it opens: ``alerts.problems``)."""
        notices = self.extra.setdefault(NOTICES, [])
        if line not in notices:
            notices.append(line)
            self.extra.setdefault(NOTICE_KINDS, []).append(kind.value)

    def shape_changes(self) -> list[str]:
        """``shipment documents changed shape: house_reference absent from all 40 read (present before),
        house_bill_number new (in 40 of 40)``: one line per source whose records changed shape in this run."""
        by_label: dict[str, list[str]] = {}
        for change in self.extra.get("shape_changes", ()):
            by_label.setdefault(change["label"], []).append(change["phrase"])
        return [f"{label} changed shape: {', '.join(phrases)}" for label, phrases in by_label.items()]

    def null_jumps(self) -> list[str]:
        """``columns null far more often than before: shipment_goods.weight null in 194 of 194 rows (100 %), ...``:
        one line for the columns whose share of nulls jumped in this run (``sync.nulls``)."""
        phrases = self.extra.get("null_jump_lines", ())
        return [f"columns null far more often than before: {'; '.join(phrases)}"] if phrases else []

    def add_versions(self, versions: dict[str, int]) -> None:
        """Versions added to ``freight_history`` tables, counted in ``extra["versions"]`` per table."""
        counted = self.extra.setdefault("versions", {})
        for table, count in versions.items():
            counted[table] = counted.get(table, 0) + count


_begun: ContextVar[list[StreamResult] | None] = ContextVar("stream_results_begun", default=None)


@contextmanager
def results_begun() -> Iterator[list[StreamResult]]:
    """The results the streams run in the block began (:meth:`StreamResult.begun`), in order: a failed stream's run
    is logged with what it had counted until it failed (the batches it committed are in the warehouse)."""
    begun: list[StreamResult] = []
    token = _begun.set(begun)
    try:
        yield begun
    finally:
        _begun.reset(token)
