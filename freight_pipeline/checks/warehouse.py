"""The checks of the working warehouse, all evaluated with one read-only DuckDB connection.

* ``primary_key_unique`` on every ``freight`` table;
* ``no_orphan_rows`` on every table that points at ``freight.shipments`` (ERROR for tables written
  with the shipment, WARN for the separately fetched detail tables, as in the dbt project);
* ``no_rejected_records`` on each stream's first table (WARN when its latest run rejected records);
* ``no_quarantined_records`` on each stream's first table (WARN while records of the stream wait in
  the retry queue: how many, since when, examples with reason and request);
* ``no_data_problems`` on each stream's first table (WARN while loaded records of the stream hold
  values that could not be converted: how many, examples with path, raw value and reason);
* ``no_service_notices`` on each stream's first table (WARN when its latest run met something of the
  service's behaviour its users should know: ``StreamResult.notices``, the lines the run said, one
  ``NoticeKind`` each, whose meanings the check's description lists);
* ``history_matches_current`` on each table the history versions (ERROR: the current versions of
  ``freight_history`` equal the rows held, row for row, unless the history is switched off and behind;
  between two full checks, of the shipments changed since the last complete build only:
  ``marts.plan.full_check_due``);
* ``no_shape_changes`` on the first table of each source whose shape is watched (WARN while a field of its
  records is new, no spec declaring it, or vanished, declared and received before but absent from every
  record of the latest run: ``freight_meta.source_fields``, ``sync.drift``).

A result's figures are plain values (numbers, text, lists and dicts of them, instants); the Dagster
asset checks (``defs.checks``) show them as asset check metadata, ``freight-pipeline sync`` prints
the checks that did not pass.
"""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import duckdb

from freight_pipeline.checks import queries
from freight_pipeline.cursors import Connect, on_cursors
from freight_pipeline.normalize.schema import TableSpec
from freight_pipeline.normalize.tables import FREIGHT_TABLES
from freight_pipeline.sync.drift import SOURCE_SHAPES
from freight_pipeline.sync.parts import DOCUMENT_PART, EVENTS
from freight_pipeline.sync.result import NoticeKind
from freight_pipeline.sync.streams import RECORD_SOURCES, TABLE_SOURCE, runs_of
from freight_pipeline.warehouse.ddl import catalog_cursors
from freight_pipeline.warehouse.history import SUBJECTS, Subject


class Severity(enum.StrEnum):
    """How bad a failed check is: ERROR breaks a guarantee of the pipeline, WARN asks for a look."""

    ERROR = "ERROR"
    WARN = "WARN"


@dataclass(frozen=True)
class CheckResult:
    passed: bool
    figures: Mapping[str, Any] = field(default_factory=dict)
    """What was found, as plain values (``datetime`` for instants, lists and dicts for samples)."""


@dataclass(frozen=True)
class WarehouseCheck:
    name: str
    table: str
    """The ``freight`` table the check is about."""
    severity: Severity
    description: str
    evaluate: Callable[[duckdb.DuckDBPyConnection], CheckResult]
    docs: str
    """Where a user reads what to do when it does not pass: a repository doc and its section's anchor."""
    also_reads: tuple[str, ...] = ()
    """Other ``freight`` tables the check reads (an orphan check's parent)."""
    findings: Callable[[CheckResult], dict[str, str]] | None = None
    """The separate things a result that did not pass found, each a problem of its own for the alerts
    (item -> one line: a field of the records, a column, a kind of notice); None: the check is one."""
    finding_docs: Mapping[str, str] = field(default_factory=dict, hash=False)
    """A finding's own next step where it is not :attr:`docs` (item -> a doc's section: a kind of notice's)."""

    @property
    def label(self) -> str:
        """``shipment_goods.no_orphan_rows``: the check's name in messages."""
        return f"{self.table}.{self.name}"


def primary_key_check(table: TableSpec) -> WarehouseCheck:
    def evaluate(con: duckdb.DuckDBPyConnection) -> CheckResult:
        count, sample = queries.duplicate_keys(con, table)
        return CheckResult(count == 0, {"duplicate_keys": count, "sample": sample})

    return WarehouseCheck(
        "primary_key_unique",
        table.name,
        Severity.ERROR,
        f"No two rows of {table.qualified_name} share ({', '.join(table.primary_key)}).",
        evaluate,
        "docs/warehouse-contract.md#schema-freight-normalized-source-tables",
    )


def orphan_check(table: TableSpec) -> WarehouseCheck:
    parent = queries.PARENT
    embedded = TABLE_SOURCE.get(table.name) == DOCUMENT_PART.stream
    severity = Severity.ERROR if embedded else Severity.WARN

    def evaluate(con: duckdb.DuckDBPyConnection) -> CheckResult:
        count = queries.orphan_rows(con, table, parent)
        return CheckResult(count == 0, {"orphan_rows": count})

    return WarehouseCheck(
        "no_orphan_rows",
        table.name,
        severity,
        f"Every non-null {parent.primary_key[0]} of {table.qualified_name} is in {parent.qualified_name} "
        f"({severity.value} severity).",
        evaluate,
        "docs/warehouse-contract.md#schema-freight-normalized-source-tables",
        also_reads=(parent.name,),
    )


def rejected_check(stream: str) -> WarehouseCheck:
    """``stream``: a source of records, a part of a shipment (``shipment_events``) logged in ``sync_runs`` as the
    stream that reads it (``shipments``), whose latest run is the one looked at."""
    runs = runs_of(stream)

    def evaluate(con: duckdb.DuckDBPyConnection) -> CheckResult:
        run_id, count, sample = "", 0, []
        for run_id in queries.judged_runs(con, runs):
            count, sample = queries.rejected_records(con, stream, run_id)
            if count:
                break
        return CheckResult(count == 0, {"run_id": run_id, "rejected_records": count, "sample": sample})

    return WarehouseCheck(
        "no_rejected_records",
        RECORD_SOURCES[stream][0],
        Severity.WARN,
        f"The latest {stream} run rejected no records (freight_meta.rejected_records; WARN severity; when it did not "
        "succeed, nor the latest that did: a failed run may not have read them again).",
        evaluate,
        "docs/sync.md#when-the-source-sends-bad-data",
    )


def quarantine_check(stream: str) -> WarehouseCheck:
    def evaluate(con: duckdb.DuckDBPyConnection) -> CheckResult:
        count, oldest, examples = queries.quarantined_records(con, stream)
        return CheckResult(count == 0, {"quarantined_records": count, "oldest_failure": oldest, "examples": examples})

    return WarehouseCheck(
        "no_quarantined_records",
        RECORD_SOURCES[stream][0],
        Severity.WARN,
        f"No {stream} record waits in the retry queue (freight_meta.quarantine; WARN severity): "
        "a quarantined record failed after the client's retries and is retried with backoff until it loads.",
        evaluate,
        "docs/sync.md#when-the-source-sends-bad-data",
    )


def data_problems_check(stream: str) -> WarehouseCheck:
    def evaluate(con: duckdb.DuckDBPyConnection) -> CheckResult:
        count, examples = queries.data_problems(con, stream)
        return CheckResult(count == 0, {"data_problems": count, "examples": examples})

    return WarehouseCheck(
        "no_data_problems",
        RECORD_SOURCES[stream][0],
        Severity.WARN,
        f"No value of a loaded {stream} record failed to convert (freight_meta.data_problems; WARN "
        "severity): such a value is null in its column, the record and its children are loaded.",
        evaluate,
        "docs/sync.md#when-the-source-sends-bad-data",
    )


def notices_check(stream: str) -> WarehouseCheck:
    def evaluate(con: duckdb.DuckDBPyConnection) -> CheckResult:
        run_id, notices = "", []
        for run_id in queries.judged_runs(con, stream):
            if notices := queries.run_notices(con, stream, run_id):
                break
        return CheckResult(not notices, {"run_id": run_id, "notices": [line for _, line in notices],
                                         "kinds": [kind for kind, _ in notices]})

    return WarehouseCheck(
        "no_service_notices",
        RECORD_SOURCES[stream][0],
        Severity.WARN,
        f"The latest {stream} run met nothing of the service's behaviour its users should know of (WARN "
        "severity; the run publishes; when it did not succeed, nor the latest that did): "
        f"{'; '.join(kind.meaning for kind in NoticeKind)}.",
        evaluate,
        "docs/real-services.md#what-a-run-says-it-met",
        findings=lambda result: dict(zip(result.figures["kinds"], result.figures["notices"], strict=True)),
        finding_docs={kind.value: kind.docs for kind in NoticeKind},
    )


def shape_check(stream: str) -> WarehouseCheck:
    def evaluate(con: duckdb.DuckDBPyConnection) -> CheckResult:
        counts, fields = queries.shape_changes(con, stream)
        return CheckResult(not fields, {**{f"{state}_fields": n for state, n in counts.items() if n}, "fields": fields})

    return WarehouseCheck(
        "no_shape_changes",
        RECORD_SOURCES[stream][0],
        Severity.WARN,
        f"Every field of the {stream} records, at every level a table spec reads, is declared, no declared field "
        "that earlier runs received is absent from every object of its path in the latest run, and none came in "
        "a JSON kind earlier runs never sent it in (freight_meta.source_fields; WARN severity: the run "
        "publishes; a renamed field or key takes its new name in its Field's or Key's source).",
        evaluate,
        "docs/real-services.md#when-the-service-changes-shape",
        findings=lambda result: {f["field"]: f"{f['field']} {f['state']} ({f['records_with']} of {f['records_read']} "
                                            f"records read have it)" for f in result.figures["fields"]},
    )


def null_check(stream: str) -> WarehouseCheck:
    def evaluate(con: duckdb.DuckDBPyConnection) -> CheckResult:
        jumped = queries.null_jumps(con, stream)
        return CheckResult(not jumped, {"columns_jumped": len(jumped), "columns": jumped})

    return WarehouseCheck(
        "no_null_share_jumps",
        RECORD_SOURCES[stream][0],
        Severity.WARN,
        f"No column of the tables the {stream} records fill is null in far more of the rows the latest run "
        "wrote than in the runs before (freight_meta.column_nulls; WARN severity: the run publishes; a field "
        "renamed where no declaration watches it, a mapping's fault, or the service sending null).",
        evaluate,
        "docs/real-services.md#when-the-service-changes-shape",
        findings=lambda result: {c["column"]: f"{c['column']} null in {c['nulls']} of {c['rows']} rows"
                                 for c in result.figures["columns"]},
    )


def events_age_check() -> WarehouseCheck:
    def evaluate(con: duckdb.DuckDBPyConnection) -> CheckResult:
        found = queries.events_freshness(con)
        if found is None or not found["rolling_reread"] or found["oldest_age_minutes"] is None:
            return CheckResult(True, {"rolling_reread": False, **(found or {})})
        return CheckResult(found["oldest_age_minutes"] <= (found["max_age_minutes"] or 0), found)

    return WarehouseCheck(
        "events_within_max_age",
        RECORD_SOURCES[EVENTS][0],
        Severity.WARN,
        "While the rolling re-read of open shipments' events is on (the service changes events without moving a "
        "shipment's last-modified instant, or FREIGHT_EVENTS_REFRESH=on): no open shipment's events went unread "
        "longer than FREIGHT_EVENTS_MAX_AGE_MINUTES (freight_meta.raw_parts.fetched_at; WARN severity).",
        evaluate,
        "docs/real-services.md#events-changed-without-the-shipments-stamp",
    )


def history_check(subject: Subject, *, changed_only: bool = False) -> WarehouseCheck:
    """``changed_only``: compare the shipments changed since the last complete build, not every one."""
    tables = [source.table.name for source in subject.sources]

    def evaluate(con: duckdb.DuckDBPyConnection) -> CheckResult:
        behind = queries.history_behind(con, subject)
        if behind is not None:
            return CheckResult(True, {"not_compared": behind})
        count, sample = queries.history_disagreements(con, subject, changed_only=changed_only)
        return CheckResult(count == 0, {"rows_disagreeing": count, "shipments": sample,
                                        "compared": "changed shipments" if changed_only else "every shipment"})

    return WarehouseCheck(
        "history_matches_current",
        tables[0],
        Severity.ERROR,
        f"The current versions of {subject.spec.qualified_name} equal the rows of "
        f"{' and '.join(f'freight.{t}' for t in tables)}, row for row: the history follows the service, also "
        "when its data goes back (not compared while the history is switched off and behind; between two full "
        "checks, the shipments changed since the last complete build).",
        evaluate,
        "docs/sync.md#history-every-version-the-sync-saw",
        also_reads=tuple(tables[1:]),
    )


def warehouse_checks(
    tables: Sequence[TableSpec] = FREIGHT_TABLES, *, changed_only: bool = False,
) -> list[WarehouseCheck]:
    """Every check of the warehouse of ``tables`` (``changed_only``: no full check is due; the history is
    compared on the changed shipments)."""
    names = {t.name for t in tables}
    return [
        *(primary_key_check(t) for t in tables),
        *(orphan_check(t) for t in queries.child_tables(tables)),
        *(rejected_check(stream) for stream in RECORD_SOURCES),
        *(quarantine_check(stream) for stream in RECORD_SOURCES),
        *(data_problems_check(stream) for stream in RECORD_SOURCES),
        *(notices_check(stream) for stream in RECORD_SOURCES),
        *(history_check(s, changed_only=changed_only) for s in SUBJECTS
          if all(source.table.name in names for source in s.sources)),
        *(shape_check(stream) for stream in RECORD_SOURCES if stream in SOURCE_SHAPES),
        *(null_check(stream) for stream in RECORD_SOURCES),
        events_age_check(),
    ]


CHECK_THREADS = 4
"""Checks evaluated at once, each thread on a cursor of its own (each is one small query: run one after
another, 79 of them took 0.47-0.69 s on 2,000 shipments, four at a time 0.22 s)."""


def evaluate_checks(con: duckdb.DuckDBPyConnection,
                    checks: Sequence[WarehouseCheck]) -> list[tuple[WarehouseCheck, CheckResult]]:
    """Each of ``checks`` with its result on the database of ``con`` (which has no transaction open), in
    order, :data:`CHECK_THREADS` at a time; each cursor uses the catalog ``con`` uses (a lake's, which a new
    cursor does not inherit) and reads in one transaction (:func:`_reading_in_one_transaction`)."""
    results = on_cursors(_reading_in_one_transaction(catalog_cursors(con)),
                         lambda cursor, check: check.evaluate(cursor), checks, CHECK_THREADS, "checks")
    return list(zip(checks, results, strict=True))


def _reading_in_one_transaction(make: Callable[[], duckdb.DuckDBPyConnection]) -> Connect:
    """Cursors ``make`` makes, each in a transaction from its first statement to its close (rolled back: the
    checks only read), so that its checks read one snapshot. In a lake a statement in a transaction of its own
    first reads the latest snapshot from the catalog: a quiet run's checks step (60 shipments, SQLite catalog)
    took 1.34-1.57 s so, 1.12-1.17 s in one a cursor. No check catches a failed statement (it fails the step), so
    none goes on in a transaction another one's failure aborted (the kept dbt tests do: ``marts.kept_builds``)."""
    def connect() -> tuple[duckdb.DuckDBPyConnection, Callable[[], None]]:
        cursor = make()
        try:
            cursor.execute("BEGIN TRANSACTION")
        except BaseException:
            cursor.close()
            raise

        def close() -> None:
            try:
                cursor.execute("ROLLBACK")
            finally:
                cursor.close()

        return cursor, close

    return connect


def describe_failure(check: WarehouseCheck, result: CheckResult) -> str:
    """``ERROR shipment_goods.no_orphan_rows: orphan_rows=3``: a failed check in one line."""
    counts = ", ".join(f"{name}={value}" for name, value in result.figures.items()
                       if isinstance(value, int | str | dt.datetime) and value not in ("", None))
    return f"{check.severity.value} {check.label}" + (f": {counts}" if counts else "")
