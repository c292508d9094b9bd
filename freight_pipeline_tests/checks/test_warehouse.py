"""How the warehouse checks are evaluated: in order, a few at a time, each cursor reading one snapshot."""

from __future__ import annotations

import json

import duckdb
import pytest

from freight_pipeline.checks.warehouse import (
    CHECK_THREADS,
    CheckResult,
    Severity,
    WarehouseCheck,
    _reading_in_one_transaction,
    evaluate_checks,
    notices_check,
    rejected_check,
)
from freight_pipeline.sync.streams import RECORD_SOURCES, SHIPMENTS, TABLE_WRITER
from freight_pipeline.warehouse import meta

CHECKS = 3 * CHECK_THREADS


def _check(number: int) -> WarehouseCheck:
    def evaluate(con: duckdb.DuckDBPyConnection) -> CheckResult:
        (transaction,) = con.execute("SELECT txid_current()").fetchone() or (None,)
        (rows,) = con.execute("SELECT count(*) FROM held").fetchone() or (None,)
        return CheckResult(True, {"number": number, "transaction": transaction, "rows": rows})

    return WarehouseCheck(f"check_{number}", "shipments", Severity.WARN, "a check of the test", evaluate, "docs")


def test_each_cursor_reads_one_snapshot_and_the_next_evaluation_what_was_written_after() -> None:
    """Every check's statements on one cursor run in one transaction (at most one a thread); a write committed
    after is read by the next evaluation, in transactions of its own."""
    with duckdb.connect() as con:
        con.execute("CREATE TABLE held AS SELECT 1 AS n")
        checks = [_check(number) for number in range(CHECKS)]
        results = evaluate_checks(con, checks)
        assert [check for check, _ in results] == checks
        assert [result.figures["number"] for _, result in results] == list(range(CHECKS))
        transactions = {result.figures["transaction"] for _, result in results}
        assert 1 <= len(transactions) <= CHECK_THREADS < CHECKS, transactions  # autocommit: one a statement
        assert {result.figures["rows"] for _, result in results} == {1}
        con.execute("INSERT INTO held VALUES (2)")
        again = evaluate_checks(con, checks)
        assert {result.figures["rows"] for _, result in again} == {2}
        assert transactions.isdisjoint(result.figures["transaction"] for _, result in again)


def test_a_cursor_s_transaction_is_rolled_back_and_the_cursor_closed_at_its_close() -> None:
    with duckdb.connect() as con:
        con.execute("CREATE TABLE held AS SELECT 1 AS n")
        cursor, close = _reading_in_one_transaction(con.cursor)()
        cursor.execute("INSERT INTO held VALUES (2)")  # the checks only read: nothing of a cursor's is kept
        close()
        assert con.execute("SELECT count(*) FROM held").fetchone() == (1,)
        with pytest.raises(duckdb.ConnectionException):
            cursor.execute("SELECT 1")


PARTS_OF_STREAMS = sorted(source for source, tables in RECORD_SOURCES.items()
                          if TABLE_WRITER[tables[0]].name != source)
"""Every source of records logged in ``sync_runs`` under another name: a part of a shipment (events, each mode's
legs, memo lines) under the shipments stream's."""


@pytest.mark.parametrize("part", PARTS_OF_STREAMS)
def test_a_part_s_rejected_records_are_those_of_its_stream_s_latest_run(part: str) -> None:
    """A part's records rejected (``stream`` the part) by a run logged as its stream's: the part's check does not
    pass, and names that run; the rejects of an older run are not counted."""
    writer = TABLE_WRITER[RECORD_SOURCES[part][0]].name
    with duckdb.connect() as con:
        con.execute("CREATE SCHEMA freight_meta")
        con.execute(meta.SYNC_RUNS.ddl())
        con.execute(meta.REJECTED_RECORDS.ddl())
        con.execute("INSERT INTO freight_meta.sync_runs (run_id, stream, started_at) VALUES "
                    "('r1', ?, now() - INTERVAL 2 HOUR), ('r2', ?, now() - INTERVAL 1 HOUR)", [writer, writer])
        con.execute("INSERT INTO freight_meta.rejected_records (stream, source_key, run_id, reason) VALUES "
                    "(?, '10001', 'r2', 'invalid JSON body'), (?, '10002', 'r1', 'older run')", [part, part])
        check = rejected_check(part)
        result = check.evaluate(con)
        assert check.table == RECORD_SOURCES[part][0]
        assert not result.passed
        assert (result.figures["run_id"], result.figures["rejected_records"]) == ("r2", 1)
        assert result.figures["sample"] == [{"source_key": "10001", "reason": "invalid JSON body"}]
        assert rejected_check(SHIPMENTS.name).evaluate(con).passed  # the shipments' own records: none rejected


def test_the_rejected_records_looked_at_are_those_of_the_run_recorded_last_whatever_the_clock_said() -> None:
    """A run while the machine's clock was two hours ahead rejected nothing; the clock stepped back (NTP, a VM
    restored) and the next run, dated earlier, rejected a record. The check looked at the older run (the latest
    start) and passed, the reject of the latest run counted nowhere."""
    with duckdb.connect() as con:
        con.execute("CREATE SCHEMA freight_meta")
        con.execute(meta.SYNC_RUNS.ddl())
        con.execute(meta.REJECTED_RECORDS.ddl())
        con.execute("INSERT INTO freight_meta.sync_runs (run_id, stream, started_at) VALUES "
                    "('run-ahead', 'shipments', now() + INTERVAL 2 HOUR)")
        con.execute("INSERT INTO freight_meta.sync_runs (run_id, stream, started_at) VALUES "
                    "('run-after-the-step', 'shipments', now())")
        con.execute("INSERT INTO freight_meta.rejected_records (stream, source_key, run_id, reason) VALUES "
                    "('shipments', '10001', 'run-after-the-step', 'invalid JSON body')")
        result = rejected_check(SHIPMENTS.name).evaluate(con)
    assert not result.passed
    assert (result.figures["run_id"], result.figures["rejected_records"]) == ("run-after-the-step", 1)


def _run(con: duckdb.DuckDBPyConnection, run_id: str, status: str, found: bool) -> None:
    """A shipments run of ``status``; ``found``: it rejected an event and said a notice."""
    notices = {"extra": {meta.NOTICES: ["the service's clock sends no UTC offset"],
                         meta.NOTICE_KINDS: ["clock_without_offset"]}} if found else {"extra": {}}
    con.execute("INSERT INTO freight_meta.sync_runs (run_id, stream, started_at, status, details) "
                "VALUES (?, 'shipments', now(), ?, ?)", [run_id, status, json.dumps(notices)])
    if found:
        con.execute("INSERT INTO freight_meta.rejected_records (stream, source_key, run_id, reason) VALUES "
                    "('shipment_events', '10001', ?, 'invalid JSON body')", [run_id])


@pytest.mark.parametrize("check", [rejected_check("shipment_events"), notices_check(SHIPMENTS.name)],
                         ids=lambda check: check.name)
def test_what_a_run_met_stays_found_past_a_later_run_that_did_not_succeed(check: WarehouseCheck) -> None:
    """The checks of what the latest run met: a run that failed (or was stopped, or still runs) may not have read
    what the run before it found, so finding nothing it is no pass (was: a pass, so its alert was resolved by the
    failed run and opened again by the next); what it found itself counts; the next run that succeeds decides."""
    with duckdb.connect() as con:
        con.execute("CREATE SCHEMA freight_meta")
        con.execute(meta.SYNC_RUNS.ddl())
        con.execute(meta.REJECTED_RECORDS.ddl())
        assert check.evaluate(con).passed  # no run yet
        _run(con, "found", "success", found=True)
        for run_id, status, found, judged, passed in [
            ("failed", "failed", False, "found", False),  # the finding of the latest success stands
            ("running", "running", False, "found", False),
            ("failed-finding", "failed", True, "failed-finding", False),  # its own finding
            ("clean", "success", False, "clean", True),  # a success that found nothing: over
            ("failed-after-clean", "failed", False, "clean", True),
        ]:
            _run(con, run_id, status, found)
            result = check.evaluate(con)
            assert (result.passed, result.figures["run_id"]) == (passed, judged), run_id
