"""The run log: one ``freight_meta.sync_runs`` row per stream and run, and ``work/latest_runs.json``
(the latest run of each stream, ``paths.run_log_path``) for a look without DuckDB (:class:`RunLog`).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb

from freight_pipeline.warehouse import meta
from freight_pipeline.warehouse.database import Database
from freight_pipeline.warehouse.ddl import insert_values, qualified, run, scalar
from freight_pipeline.warehouse.paths import read_last_job_run, read_run_log, replace_json, run_log_path
from freight_pipeline.warehouse.records import RunLike
from freight_pipeline.warehouse.writer_lock import Holder, lock_state, runs_it, writer_locks

INTERRUPTED = "interrupted"
"""The status of a run the run log says is running while no process runs it any more (:func:`logged_runs`)."""
SKIPPED = "skipped"
"""The key, in a run's ``details.extra``, saying why a stream switched off read and wrote nothing (a success)."""
SWITCHED_OFF = "switched off"
"""The status a run of a stream switched off (:data:`SKIPPED`) is shown with (``table_freshness.last_status``)."""
LOADED_SUCCESS = (f"(status = 'success' AND (NOT contains(details, '\"{SKIPPED}\":') "
                  f"OR json_extract(details, '{meta.extra_path(SKIPPED)}') IS NULL))")
"""A condition true of the ``sync_runs`` rows of runs that succeeded doing their stream's work: not those of a stream
switched off (:data:`SKIPPED`), a success that loaded nothing. Their details are parsed only where their text names
the key (``json.dumps`` writes it ``"skipped":``): over 500,000 rows 40 ms, against 330 ms parsing every one."""
SHOWN_STATUS = f"CASE WHEN status = 'success' AND NOT {LOADED_SUCCESS} THEN '{SWITCHED_OFF}' ELSE status END"
"""The status of a ``sync_runs`` row as said to readers: :data:`SWITCHED_OFF` for the success of a stream switched
off, which loaded nothing."""


def current_runs(table: str) -> str:
    """``meta.latest_runs`` as said to readers: without the row of a stream an upgrade retired
    (``meta.RETIRED_STREAMS``: events, legs and memo lines had streams of their own) once its successor succeeded
    after it (``meta.settled_retired_streams``). Its last run, failed before the upgrade, showed as failing for ever
    and its data as never loaded, while the successor loads them."""
    return f"(SELECT * FROM {meta.latest_runs(table)} WHERE stream NOT IN ({meta.settled_retired_streams(table)}))"


GONE = ("its process is gone before it recorded its end (killed, crashed, or its end could not be written: a disk "
        "full); the next run goes on from its last commit")
"""The error said of a run, or of the step of the job's it was in, whose process is gone before it recorded its end
(whether killed, or ended unable to write it: the run log cannot tell which)."""
NOT_BEGUN = "not run: its process is gone (killed, crashed, or unable to record its steps) before it began"
"""The error said of each step after that one that such a run of the job planned."""
JOB = "job"
"""The name ``runs_after_publish`` shows the job's latest run under while it runs, and, prefixed, its own steps
(``job checks``, ``job publish``: ``sync_runs`` logs the streams' and the build's runs only)."""


LockStates = list[tuple[bool, Holder]]
"""Each writer lock of a data directory as :func:`lock_states` found it."""


def lock_states(data_dir: Path) -> LockStates:
    """Each writer lock of ``data_dir`` as it is (``writer_lock.writer_locks``): the warehouse's, which a sync or a
    rebuild holds, and a lake's backfill partitions', each of which its partition's run holds."""
    return [lock_state(data_dir, name) for name in writer_locks(data_dir)]


def _gone(run_id: Any, before: LockStates, after: LockStates) -> bool:
    """Whether run ``run_id``, which the logs say is running, is not: no writer lock was held by it before the logs
    were read nor after (a run starting or ending between is taken for running; ``writer_lock.runs_it``)."""
    return not any(runs_it(state, run_id) for state in [*before, *after])


def _judged(runs: list[dict[str, Any]], before: LockStates, after: LockStates) -> list[dict[str, Any]]:
    return [{**run, "status": INTERRUPTED, "error": GONE}
            if run.get("status") == "running" and _gone(run.get("run_id"), before, after) else run
            for run in runs]


def logged_runs(data_dir: Path) -> list[dict[str, Any]]:
    """The latest run of each stream, as the run log file of ``data_dir`` says (read without DuckDB). A run it says
    is running whose process is gone (killed, crashed: its finish was never written; no writer lock, the
    warehouse's nor a backfill partition's, held by it) is :data:`INTERRUPTED`."""
    before = lock_states(data_dir)  # looked at before and after the log: a run starting or ending between
    runs = read_run_log(data_dir)
    after = lock_states(data_dir)
    return _judged(runs, before, after)


def runs_after_publish(data_dir: Path, published: Mapping[str, str | None]) -> list[dict[str, Any]]:
    """What readers of the last publish do not see: each stream's latest run the run log holds when it is not the
    one published (``published``: each stream's latest published run id; :func:`logged_runs`), then the steps of the
    job's latest run of its own (``paths.LAST_JOB_RUN``: the checks, the publish) that failed or did not run, as runs
    of ``job <step>`` (why a run that synced did not publish: ``sync_runs`` logs the streams' and the build's runs
    only). A job's run still running is shown as ``job`` running; one that did not end (its process gone: killed or
    crashed, :data:`INTERRUPTED`) or that a stop ended (``failed``, then ``skipped``), with each step it planned and
    did not finish that no row of it in the run log says (a stream's or the build's under its name, ``job <step>``
    otherwise), in place of an earlier run's row of the same name."""
    before = lock_states(data_dir)  # looked at before and after the logs: a run starting or ending between
    logged = read_run_log(data_dir)
    last = read_last_job_run(data_dir) or {}
    after = lock_states(data_dir)
    runs = _judged(logged, before, after)
    own_rows = {run["stream"] for run in runs if run.get("run_id") == last.get("run_id")}
    unfinished = _unfinished_steps(last, own_rows, before, after)
    replaced = {run["stream"] for run in unfinished}
    logged_as = {step.get("step"): step.get("logged_as") for step in last.get("planned") or []
                 if isinstance(step, dict)}
    steps = [{"stream": f"{JOB} {step.get('step')}", "run_id": last.get("run_id"), "status": step.get("status"),
              "finished_at": last.get("finished_at"), "error": step.get("line")}
             for step in last.get("steps") or []
             if isinstance(step, dict) and logged_as.get(step.get("step")) not in own_rows]  # else its row says it
    return [*(run for run in runs if published.get(run["stream"]) != run["run_id"] and run["stream"] not in replaced),
            *unfinished, *steps]


def _unfinished_steps(last: Mapping[str, Any], own_rows: set[str], before: LockStates,
                      after: LockStates) -> list[dict[str, Any]]:
    """Of the job's latest run (``last``, ``paths.LAST_JOB_RUN``): ``job`` running while it runs; after its process
    went before it recorded its end, or a stop ended it, each step it planned and did not end that the run log holds
    no row of (``own_rows``: the streams it logged rows of): the first as the one it was in, the others as not run."""
    run_id = last.get("run_id")
    planned = [step for step in last.get("planned") or [] if isinstance(step, dict)]
    stopped = last.get("stopped")
    if not planned or (last.get("finished_at") is not None and not stopped):  # ended, or of an earlier version
        return []
    started = {"run_id": run_id, "started_at": last.get("started_at"), "finished_at": last.get("finished_at")}
    if not stopped and not _gone(run_id, before, after):
        return [{"stream": JOB, **started, "status": "running", "error": None}]
    ended = set(last.get("ended") or [])
    left = [step for step in planned if step.get("step") not in ended]
    found = []
    for i, step in enumerate(left):
        name = step.get("logged_as") or f"{JOB} {step.get('step')}"
        if name in own_rows:  # its own row says how far it came
            continue
        if stopped:
            status, error = ("failed", str(stopped)) if i == 0 else ("skipped", f"not run: {stopped}")
        else:
            status = INTERRUPTED
            error = GONE if i == 0 else NOT_BEGUN
        found.append({"stream": name, **started, "status": status, "error": error})
    return found


class RunLog:
    """Recording runs: in the working database, and in the run log file of ``data_dir``."""

    def __init__(self, database: Database, data_dir: Path) -> None:
        self.database = database
        self.data_dir = data_dir

    def record_run(self, record: RunLike, tables: Sequence[str] = ()) -> None:
        """Insert or update the ``sync_runs`` row of ``(record.run_id, record.stream)``: call at start and
        finish; with ``tables`` (those the stream writes) also their ``table_freshness`` rows."""
        self.database.write("record_run", lambda con: _insert_run(con, record, tables))
        self._write_run_log()

    def _write_run_log(self) -> None:
        cur = self.database.con.execute(
            f"SELECT * EXCLUDE (details) REPLACE ({SHOWN_STATUS} AS status) "
            f"FROM {current_runs(qualified(meta.SYNC_RUNS))} ORDER BY stream"
        )
        names = [d[0] for d in cur.description]
        latest = [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
        replace_json(run_log_path(self.data_dir), latest, default=_iso)


def _insert_run(con: duckdb.DuckDBPyConnection, record: RunLike, tables: Sequence[str]) -> None:
    """The ``sync_runs`` row of ``record`` (replacing its earlier one) and the freshness of ``tables``. A finish
    updates the row its start wrote, in one statement instead of a delete and an insert (embedded 1.4-2.3 ms against
    5.0-6.5 ms); a start, or a finish whose row is not there once, writes it anew."""
    details = {
        "rows_by_table": getattr(record, "rows_by_table", {}),
        "extra": getattr(record, "extra", {}),
    }
    r = record
    values = {
        "started_at": r.started_at, "finished_at": r.finished_at, "status": r.status, "rows_read": r.rows_read,
        "rows_written": r.rows_written, "requests": r.requests, "retries": r.retries, "rejected": r.rejected,
        "quarantined": getattr(r, "quarantined", 0), "data_problems": getattr(r, "data_problems", 0),
        "error": r.error, "cursor_before": r.cursor_before, "cursor_after": r.cursor_after,
        "details": json.dumps(details, default=str, sort_keys=True),
    }
    table = qualified(meta.SYNC_RUNS)
    key = [r.run_id, r.stream]
    assignments = ", ".join(f"{name} = ?" for name in values)
    if r.finished_at is None or scalar(con, f"UPDATE {table} SET {assignments} WHERE run_id = ? AND stream = ?",
                                       [*values.values(), *key]) != 1:
        run(con, f"DELETE FROM {table} WHERE run_id = ? AND stream = ?", key)
        run(con, f"INSERT INTO {table} (run_id, stream, {', '.join(values)}) "
                 f"VALUES ({', '.join('?' for _ in range(len(values) + 2))})", [*key, *values.values()])
    if tables:
        _record_freshness(con, record, tables)


def _iso(value: Any) -> str:
    return value.isoformat() if isinstance(value, dt.datetime | dt.date) else str(value)


def _record_freshness(con: duckdb.DuckDBPyConnection, record: RunLike, tables: Sequence[str]) -> None:
    """The ``table_freshness`` rows of ``tables`` after ``record``: a success moves ``synced_through``
    to its finish; a failure, a start or a stream switched off (``last_status`` says so) keeps the one before."""
    table = qualified(meta.TABLE_FRESHNESS)
    names = list(tables)
    marks = ", ".join("?" for _ in names)
    success = record.status == "success"
    switched_off = success and bool(getattr(record, "extra", {}).get(SKIPPED))
    moves = success and not switched_off
    status = SWITCHED_OFF if switched_off else record.status
    error = None if success else record.error
    if not moves:  # the rows held keep their synced_through: one UPDATE when each table has its one row
        changed = scalar(con, f"UPDATE {table} SET stream = ?, last_run_id = ?, last_status = ?, last_attempt_at = ?, "
                           f"last_error = ? WHERE table_name IN ({marks})",
                      [record.stream, record.run_id, status, record.started_at, error, *names])
        if changed == len(names):
            return
    # a success, a table without its row or with two (a lake's writers beside each other): its rows anew; the rows
    # held are read only when they are kept (in a lake a statement costs about 15 ms of CPU)
    held = {} if moves else dict(
        run(con, f"SELECT table_name, synced_through FROM {table} WHERE table_name IN ({marks})", names))
    run(con, f"DELETE FROM {table} WHERE table_name IN ({marks})", names)
    rows = [
        [name, record.stream, record.finished_at if moves else held.get(name),
         record.run_id, status, record.started_at, error]
        for name in names
    ]
    insert_values(con, f"INSERT INTO {table} (table_name, stream, synced_through, last_run_id, last_status, "
                       "last_attempt_at, last_error) VALUES", "(?, ?, ?, ?, ?, ?, ?)", rows)
