"""What one stream did in one run: the figures logged to ``sync_runs`` and shown in Dagster."""

from __future__ import annotations

from dataclasses import dataclass

from freight_pipeline.warehouse.records import RunRecord


@dataclass
class StreamResult(RunRecord):
    """A run of one stream (:class:`~freight_pipeline.warehouse.records.RunRecord`'s fields) and what
    became of its bad records."""

    quarantined: int = 0
    """Records that failed in this run and wait in the retry queue (``freight_meta.quarantine``)."""
    data_problems: int = 0
    """Values of loaded records that could not be converted (``freight_meta.data_problems``)."""

    def add_rows(self, counts: dict[str, int]) -> None:
        for table, count in counts.items():
            self.rows_by_table[table] = self.rows_by_table.get(table, 0) + count
            self.rows_written += count

    def summary(self) -> str:
        """``read 107, wrote 5,230 rows in 401 requests (0 retries, 0 rejected)``, or why it did not run."""
        if "skipped" in self.extra:
            return str(self.extra["skipped"])
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
        return list(self.extra.get("notices", []))

    def add_notice(self, line: str) -> None:
        notices = self.extra.setdefault("notices", [])
        if line not in notices:
            notices.append(line)

    def add_versions(self, versions: dict[str, int]) -> None:
        """Versions added to ``freight_history`` tables, counted in ``extra["versions"]`` per table."""
        counted = self.extra.setdefault("versions", {})
        for table, count in versions.items():
            counted[table] = counted.get(table, 0) + count
