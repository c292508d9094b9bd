"""The demo's closing summary: runs, changes, tables, cursors, the history and one ETA accuracy figure,
one analytic answer, where to look next."""

from __future__ import annotations

import datetime as dt
import os
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from freight_pipeline.commands.history_report import ETA_ACCURACY, WITHIN_HOURS, EtaAccuracy, HistoryFacts
from freight_pipeline.commands.job_progress import JobOutcome
from freight_pipeline.commands.report import describe_cursor
from freight_pipeline.commands.text_table import format_table
from freight_pipeline.config import RECONCILE_ENV, LakeConfig, variable
from freight_pipeline.sync.settings import SyncSettings


class ChangingService(Protocol):
    def progress_shipments(self) -> list[int]: ...
    def modify_shipments(self, count: int) -> list[int]: ...
    def create_shipments(self, count: int) -> list[int]: ...
    def delete_shipments(self, count: int) -> list[int]: ...


def service_document_pairs(live_ids: Iterable[int], efiles: Iterable[Mapping[str, Any]]) -> set[tuple[int, int]]:
    """(shipment id, E-File id) for every E-File reference (type SHIPMENT) to a live shipment."""
    live = set(live_ids)
    return {(int(r["value"]), int(efile["id"])) for efile in efiles for r in efile["references"] or ()
            if r["type"] == "SHIPMENT" and str(r["value"]).isdigit() and int(r["value"]) in live}


@dataclass(frozen=True)
class DocumentCheck:
    """The E-File documents of the service against those the warehouse holds."""

    in_service: set[tuple[int, int]]
    in_warehouse: set[tuple[int, int]]

    def line(self) -> str:
        same = "the same pairs" if self.in_service == self.in_warehouse else (
            f"{len(self.in_service - self.in_warehouse)} missing, {len(self.in_warehouse - self.in_service)} extra")
        return (f"  E-File documents of live shipments: {len(self.in_service):,} in the service, "
                f"{len(self.in_warehouse):,} in freight.shipment_documents: {same}")


@dataclass(frozen=True)
class Changes:
    modified: list[int]
    created: list[int]
    deleted: list[int]
    progressed: list[int] = field(default_factory=list)
    """Shipments brought up to the service's clock (events come due, estimates revised)."""

    @classmethod
    def make(cls, service: ChangingService, count: int) -> Changes:
        """Bring the shipments up to the clock, then modify ``count`` of them, create about a tenth as
        many and delete about a twenty-fifth."""
        created = max(1, count // 10) if count else 0
        deleted = max(1, count // 25) if count else 0
        progressed = service.progress_shipments()
        modified = service.modify_shipments(count)
        return cls(modified, service.create_shipments(created), service.delete_shipments(deleted), progressed)

    def describe(self) -> str:
        text = f"{len(self.modified)} modified, {len(self.created)} created, {len(self.deleted)} deleted"
        if self.progressed:
            text += f"; {len(self.progressed)} progressed (events come due, estimates revised)"
        return text


@dataclass(frozen=True)
class DemoRun:
    label: str
    outcome: JobOutcome
    report: dict[str, Any]
    """``report.read_report`` of the warehouse published by this run."""


@dataclass(frozen=True)
class DemoFacts:
    """What the summary reports besides the runs."""

    data_dir: Path
    shipments: int
    seed: int
    changes: Changes
    lingering: list[int]
    """Deleted shipments still in the warehouse after the incremental sync."""
    on_time: list[dict[str, Any]]
    documents: DocumentCheck | None = None
    lake: dict[str, str] = field(default_factory=dict)
    """The lake variables of a ``--lake`` demo (empty: the embedded DuckDB file)."""
    history: HistoryFacts | None = None
    """What freight_history kept and how good the ETAs were (None: not read)."""


def render_summary(runs: list[DemoRun], facts: DemoFacts) -> str:
    """The whole summary as text (stdout)."""
    last = runs[-1].report
    sections = [
        f"== freight-pipeline demo: {facts.shipments} simulated shipments (seed {facts.seed}) "
        f"synced into {facts.data_dir} ==",
        "runs of the Dagster job " + runs[0].outcome.job_name + f" ({_instance()})\n" + _runs_table(runs),
        "step timings (seconds)\n" + _steps_table(runs),
        f"between the runs the service changed: {facts.changes.describe()}\n" + _shipment_check(runs, facts),
        "tables (published warehouse)\n" + _tables_table(runs),
        "cursors\n" + format_table(("stream", "cursor"), [(s["stream"], describe_cursor(s["cursor"])) for s in
                                                          last["streams"]]),
        *([_history(facts.history)] if facts.history is not None else []),
        "on-time arrival by mode (analytics.fct_on_time_performance)\n" + _on_time(facts.on_time),
        _explore_lake(facts.data_dir, facts.lake) if facts.lake else _explore(facts.data_dir),
    ]
    return "\n\n".join(sections)


def _instance() -> str:
    home = os.environ.get("DAGSTER_HOME")
    return f"recorded in DAGSTER_HOME={home}" if home else "ephemeral instance: set DAGSTER_HOME to keep the runs"


def _run_totals(report: dict[str, Any], run_id: str) -> dict[str, int]:
    totals = {"shipments_read": 0, "rows_read": 0, "rows_written": 0, "requests": 0, "retries": 0, "rejected": 0}
    for stream in report["streams"]:
        run = stream.get("last_run") or {}
        if run.get("run_id") != run_id:
            continue
        for key in ("rows_read", "rows_written", "requests", "retries", "rejected"):
            totals[key] += int(run.get(key) or 0)
        if stream["stream"] == "shipments":
            totals["shipments_read"] = int(run.get("rows_read") or 0)
    return totals


def _runs_table(runs: list[DemoRun]) -> str:
    rows = []
    for run in runs:
        t = _run_totals(run.report, run.outcome.run_id)
        rows.append((run.label, round(run.outcome.seconds, 1), t["shipments_read"], t["rows_read"], t["rows_written"],
                     t["requests"], t["retries"], t["rejected"], run.outcome.run_id[:8]))
    headers = ("run", "seconds", "shipments read", "records read", "rows written", "requests", "retries", "rejected",
               "dagster run")
    return format_table(headers, rows)


def _steps_table(runs: list[DemoRun]) -> str:
    keys = list(dict.fromkeys(k for run in runs for k in run.outcome.steps))
    rows = [(key, *(_seconds(run.outcome, key) for run in runs)) for key in keys]
    return format_table(("step", *(run.label for run in runs)), rows) if rows else "  (no steps recorded)"


def _seconds(outcome: JobOutcome, key: str) -> float | None:
    step = outcome.steps.get(key)
    return round(step.seconds, 2) if step and step.seconds is not None else None


def _shipment_check(runs: list[DemoRun], facts: DemoFacts) -> str:
    before = runs[0].report["tables"].get("freight.shipments", 0)
    after = runs[-1].report["tables"].get("freight.shipments", 0)
    lines = [f"  freight.shipments: {before:,} rows after the full sync, {after:,} after the incremental one"]
    if facts.changes.deleted:
        lines.append(
            f"  deleted in the service: {len(facts.changes.deleted)}, still in the warehouse: {len(facts.lingering)}"
        )
    if facts.documents is not None:
        lines.append(facts.documents.line())
    if facts.lingering:
        every = SyncSettings().reconcile_interval
        when = "never by default" if every is None else f"every {format_interval(every)} by default"
        lines.append(
            "  (deletions have no change feed: the shipments stream's reconcile pass removes them when next due, "
            f"{when}, see {RECONCILE_ENV})"
        )
    return "\n".join(lines)


def format_interval(interval: dt.timedelta) -> str:
    """``6 h``, ``1 h 30 min``, ``45 min``, ``0 min`` (every run): whole minutes, seconds dropped."""
    hours, minutes = divmod(int(interval.total_seconds() // 60), 60)
    parts = ([f"{hours} h"] if hours else []) + ([f"{minutes} min"] if minutes or not hours else [])
    return " ".join(parts)


def _tables_table(runs: list[DemoRun]) -> str:
    first, last = runs[0].report["tables"], runs[-1].report["tables"]
    rows = [(name, first.get(name), rows, rows - first.get(name, 0)) for name, rows in sorted(last.items())]
    return format_table(("table", "after full sync", "now", "change"), rows)


def _on_time(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "  (analytics.fct_on_time_performance is empty or missing)"
    table = format_table(
        ("mode", "planned", "arrived", "on time", "on-time share", "avg delay (min)"),
        [
            (r["mode_of_transport"] or "unknown", r["planned"], r["arrived"], r["on_time"], _pct(r["on_time_share"]),
             r["avg_delay_minutes"])
            for r in rows
        ],
    )
    ranked = sorted((r for r in rows if r["on_time_share"] is not None), key=lambda r: -r["on_time_share"])
    answer = ", ".join(f"{r['mode_of_transport'] or 'unknown'} {_pct(r['on_time_share'])}" for r in ranked)
    return f"  on-time share of arrived shipments by mode: {answer or 'no arrivals yet'}\n{table}"


def _history(history: HistoryFacts) -> str:
    lines = [f"history (freight_history: the versions the syncs saw) and ETA accuracy ({ETA_ACCURACY})"]
    if history.tables:
        lines.append(format_table(("table", "versions", "superseded", "shipments"),
                                  [(t.table, t.versions, t.superseded, t.shipments) for t in history.tables]))
    else:
        lines.append("  (no freight_history tables)")
    if history.moves is not None:
        lines.append(f"  estimates moved: {history.moves.moves:,} times, on {history.moves.milestones:,} milestones "
                     "(arrival, delivery, leg arrival: analytics.fct_estimate_revisions)")
    lines.append(eta_line(history.accuracy))
    return "\n".join(lines)


def eta_line(accuracy: EtaAccuracy | None, milestone: str = "arrival") -> str:
    """One accuracy figure of ``fct_eta_accuracy`` (its ETAs ``horizon_days`` out), or why there is none."""
    if accuracy is None:
        return f"  {milestone} ETAs: {ETA_ACCURACY} is missing"
    days = accuracy.horizon_days
    out = f"{accuracy.milestone} ETAs {days} day{'' if days == 1 else 's'} out"
    before = "a day" if days == 1 else f"{days} days"
    if accuracy.happened == 0:
        return f"  {out}: none scored ({ETA_ACCURACY} has no {accuracy.milestone} at that horizon)"
    if accuracy.scored == 0 or accuracy.mean_abs_error_hours is None:
        return (f"  {out}: none scored: none of the {accuracy.happened:,} {accuracy.milestone}s had an estimate on "
                f"record {before} before it happened (the history begins with the first sync)")
    return (f"  {out}: mean absolute error {accuracy.mean_abs_error_hours:.1f} h over {accuracy.shipments:,} "
            f"shipments, {_pct(accuracy.within_share)} within ±{WITHIN_HOURS} h\n"
            f"    ({accuracy.scored:,} of {accuracy.happened:,} {accuracy.milestone}s scored: the others had no "
            f"estimate on record {before} before they happened; the history begins with the first sync)")


def _pct(share: float | None) -> str:
    return "-" if share is None else f"{share * 100:.1f}%"


def _explore_lake(data_dir: Path, lake: dict[str, str]) -> str:
    lake_variables = {variable(name) for name in LakeConfig.settings_fields()}
    variables = " ".join(f"{name}={value}" for name, value in lake.items() if name in lake_variables)
    on_s3 = any(value.startswith("s3://") for value in lake.values())
    snippet = (
        "from pathlib import Path; from freight_pipeline.lake.settings import LakeSettings; "
        "from freight_pipeline.lake.backend import connect_published; "
        "con = connect_published(LakeSettings.configured(), Path('/tmp/lake-reader')); "
        "print(con.sql('SELECT * FROM analytics.fct_on_time_performance LIMIT 10'))"
    )
    lines = ["explore the lake (DuckLake: SQLite catalog, Parquet data)"]
    if on_s3:
        lines.append("  its S3 server stopped with the demo; `make demo LAKE=local` keeps the Parquet in "
                     f"{data_dir}/work/lake/data")
    else:
        lines += [f"  {variables} .venv-lake/bin/freight-pipeline status --data-dir {data_dir}",
                  f"  {variables} .venv-lake/bin/python -c \"{snippet}\""]
    lines.append("  scaled out (PostgreSQL catalog, S3, partitioned backfill): docs/lake.md")
    return "\n".join(lines)


def _explore(data_dir: Path) -> str:
    db = data_dir / "warehouse.duckdb"
    query = "SELECT * FROM analytics.fct_on_time_performance LIMIT 10"
    cli = f"  duckdb -readonly {db}" + ("" if shutil.which("duckdb") else "   (the duckdb CLI is not installed here)")
    return "\n".join(
        [
            "explore",
            cli,
            f"  .venv/bin/python -c \"import duckdb; con = duckdb.connect('{db}', read_only=True); "
            f"print(con.sql('{query}'))\"",
            f"  Parquet: {data_dir}/parquet/<schema>/<table>/  (e.g. {data_dir}/parquet/freight/shipments/*.parquet)",
            f"  freight-pipeline status --data-dir {data_dir}",
            f"  freight-pipeline dashboard --data-dir {data_dir}   (the BI dashboard at http://127.0.0.1:8501; "
            "`make dashboard` for ./data)",
            "  make ui   (Dagster UI at http://127.0.0.1:3000 with its own simulator and the schedules running)",
        ]
    )
