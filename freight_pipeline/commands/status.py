"""``freight-pipeline status``: what the published warehouse holds and how the last runs went."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import duckdb

from freight_pipeline.commands.common import (
    add_data_dir_argument,
    alerts_sent,
    resolve_data_dir,
    say,
    say_bad,
    say_unknown,
)
from freight_pipeline.commands.preflight import data_dir_setting, not_a_directory
from freight_pipeline.commands.report import NothingPublished, describe_cursor, read_report, runs_never_published
from freight_pipeline.commands.text_table import format_table
from freight_pipeline.config import (
    ALERT_URLS_ENV,
    AlertSettings,
    BadSettings,
    LakeConfig,
    ScheduleSettings,
    Settings,
    StorageSettings,
)
from freight_pipeline.job.settings import checked_settings
from freight_pipeline.lake.backend import storage_of
from freight_pipeline.lake.settings import LakeConfigError
from freight_pipeline.sync.freshness import parts_named
from freight_pipeline.sync.streams import STREAM_NAMES
from freight_pipeline.text import one_line
from freight_pipeline.warehouse.backend import StorageBackend

STATUS_LOOKER = "status --alert"
"""Who a freshness look of ``status --alert`` was, in ``freight_meta.alerts``."""
READS = (StorageSettings, LakeConfig, ScheduleSettings, AlertSettings)
"""The concerns ``status`` reads: a bad value of another (a page size) is said, not refused, so the freshness look
that alerts when syncs stop goes on while a bad setting stops them."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_data_dir_argument(parser)
    parser.add_argument("--json", action="store_true", help="print the status as one JSON document")
    parser.add_argument("--alert", action="store_true",
                        help="instead: alert when no sync succeeded for longer than FREIGHT_MAX_SYNC_AGE_MINUTES, "
                             "and send what earlier runs could not (for cron; docs/operations.md, Alerts)")


def run(args: argparse.Namespace) -> int:
    try:  # a bad setting: one line each, as every command says it, not a traceback
        configured = checked_settings(reads=READS)  # as a run checks them: an alert URL Apprise does not know too
        data_dir = resolve_data_dir(args.data_dir, configured)
        backend = storage_of(configured)
    except (BadSettings, LakeConfigError) as exc:
        say_bad("status", exc)
        return 2
    if problem := not_a_directory(data_dir, data_dir_setting(args.data_dir)):
        say(f"status: {problem}")
        return 2
    say_unknown("status", configured)
    for line in configured.set_aside:
        say(f"status: {line} (a sync refuses it; status does not read it)")
    if args.alert:
        return _alert(data_dir, configured, backend)
    try:
        report = read_report(data_dir, backend)
    except NothingPublished as exc:
        runs = runs_never_published(data_dir)
        if not runs:
            say(f"status: {exc}")
            return 1
        say(f"status: nothing published yet {backend.published_where(data_dir)}: no run has published (a failed "
            "run never does); the latest run of each stream:")
        print(json.dumps({"published": None, "unpublished_runs": runs}, indent=2) if args.json
              else render_runs(runs))
        return 1
    except duckdb.Error as exc:
        say(f"status: cannot read the published warehouse in {data_dir}: {one_line(str(exc))}")
        return 1
    print(json.dumps(report, indent=2) if args.json else render_status(report))
    return 0


def _alert(data_dir: Path, configured: Settings, backend: StorageBackend) -> int:
    """``status --alert``: the freshness looked at and the outbox sent; 2 when no destination is set, or when
    ``data_dir`` holds no warehouse (a look would make one there, and alert that nothing was synced)."""
    from freight_pipeline.alerts.notify import freshness

    if configured.alerts.alert_urls and backend.working_database_missing(data_dir):  # a mistyped directory, most likely
        say(f"status: {data_dir} holds no warehouse: nothing was synced there (--data-dir, FREIGHT_DATA_DIR); nothing "
            "looked at, and nothing made there")
        return 2
    alerted = freshness(data_dir, backend, configured.alerts, configured.schedules.max_sync_age, STATUS_LOOKER)
    if alerted is None:
        say(f"status: no alert destination is set ({ALERT_URLS_ENV}; docs/operations.md, Alerts)")
        return 2
    with alerts_sent(alerted):
        pass
    # for cron and its wrappers: a look that could not record the problems (the disk full), or a message not
    # delivered, is the alerting's own failure, which no message would tell
    return 1 if alerted.unrecorded or alerted.undelivered() else 0


def render_status(report: dict[str, Any]) -> str:
    """The report as plain aligned text: streams, tables, rejects and bad data."""
    published = report.get("published") or {}
    head = f"published warehouse: {report['database']}"
    if published.get("published_at"):
        head += f"\n  published at {published['published_at']} (version {published.get('version')})"
    head += f"\n  parquet: {report['parquet']}"
    parts = [head, "streams (cursor and last run)\n" + render_streams(report["streams"])]
    if notices := render_notices(report["streams"]):
        parts.append("notices: what the last runs met of the service\n" + notices)
    if report.get("unpublished_runs"):
        parts.append(
            "runs after the last publish (working database; readers see none of them yet)\n"
            + render_runs(report["unpublished_runs"])
        )
    if report.get("events_freshness"):
        parts.append("events of open shipments (freight_meta.raw_parts)\n" + render_events_freshness(report))
    parts.append("tables\n" + render_tables(report["tables"]))
    parts.append("rejects\n" + render_rejects(report))
    parts.append("bad data (freight_meta.quarantine, freight_meta.data_problems)\n" + render_bad_data(report))
    parts.append("shape of the records (freight_meta.source_fields)\n" + render_shape_changes(report))
    parts.append("columns null far more often than before (freight_meta.column_nulls)\n" + render_null_jumps(report))
    return "\n\n".join(parts)


def render_streams(streams: list[dict[str, Any]]) -> str:
    headers = ("stream", "cursor", "last run", "finished (UTC)", "tables as of (UTC)", "read", "written", "requests",
               "retries", "rejected", "error")
    rows = []
    for s in streams:
        run = s.get("last_run") or {}
        rows.append(
            (
                s["stream"],
                _short(describe_cursor(s.get("cursor")), 48),
                run.get("status"),
                _utc_text(run.get("finished_at")),
                _utc_text(s.get("synced_through")),
                run.get("rows_read"),
                run.get("rows_written"),
                run.get("requests"),
                run.get("retries"),
                run.get("rejected"),
                _short(run.get("error"), 60),
            )
        )
    return format_table(headers, rows) if rows else "  (no stream has run yet)"


def render_notices(streams: list[dict[str, Any]]) -> str:
    """Each notice of the streams' last runs once, with the streams that met it; empty when none did."""
    met: dict[str, list[str]] = {}
    for s in streams:
        for notice in (s.get("last_run") or {}).get("notices") or []:
            met.setdefault(notice, []).append(s["stream"])
    return "\n".join(f"  {', '.join(names)}: {notice}" for notice, names in met.items())


def render_runs(runs: list[dict[str, Any]]) -> str:
    rows = [
        (r["stream"], r.get("run_id"), r.get("status"), _utc_text(r.get("started_at")), _short(r.get("error"), 80))
        for r in runs
    ]
    return format_table(("stream", "run", "status", "started (UTC)", "error"), rows)


def render_tables(tables: dict[str, int]) -> str:
    if not tables:
        return "  (no tables)"
    return format_table(("table", "rows"), sorted(tables.items()))


def render_rejects(report: dict[str, Any]) -> str:
    """Per stream: the records its latest run rejected, and the failures ``freight_meta.rejected_records`` logged in
    all runs (a record that failed in two runs and loaded since: 0 and 2)."""
    logged: dict[str, int] = report.get("rejected_records") or {}
    latest: dict[str, int] = report.get("rejected_in_last_run") or {}
    names = [*STREAM_NAMES, *sorted((set(logged) | set(latest)) - set(STREAM_NAMES))]
    rows = [(name, latest.get(name, 0), logged.get(name, 0)) for name in names]
    return format_table(("stream", "rejected by its last run", "failures logged (all runs)"),
                        [*rows, ("total", sum(latest.values()), sum(logged.values()))])


def render_bad_data(report: dict[str, Any]) -> str:
    """Per stream: records waiting in the retry queue and since when, and nulled unconvertible values."""
    queue: dict[str, dict[str, Any]] = report.get("retry_queue") or {}
    problems: dict[str, int] = report.get("data_problems") or {}
    if not queue and not problems:
        return "  none: no record waits in the retry queue, no value was nulled"
    names = [s for s in (*STREAM_NAMES, *sorted((set(queue) | set(problems)) - set(STREAM_NAMES)))
             if s in queue or s in problems]
    rows = [
        (
            name,
            (queue.get(name) or {}).get("records", 0),
            _utc_text((queue.get(name) or {}).get("since")),
            _utc_text((queue.get(name) or {}).get("next_attempt")),
            problems.get(name, 0),
        )
        for name in names
    ]
    headers = ("stream", "waiting for retry", "failing since (UTC)", "next retry (UTC)", "values nulled")
    return format_table(headers, rows)


def render_shape_changes(report: dict[str, Any]) -> str:
    """The fields that are new (no spec declares them: kept in the raw record only), vanished or retyped now."""
    changes: list[dict[str, Any]] = report.get("shape_changes") or []
    if not changes:
        return ("  no change: every field received is declared, no declared field stopped coming, none changed "
                "its JSON kind")
    rows = [
        (c["stream"], c["field"], c["state"], f"{c.get('records_with') or 0:,} of {c.get('records_read') or 0:,}",
         _kinds_text(c), c.get("changed_run_id"), _utc_text(c.get("changed_at")), c.get("example_record_key"))
        for c in changes
    ]
    headers = ("stream", "field", "state", "objects with it", "kinds", "since run", "since (UTC)", "example record")
    return format_table(headers, rows) + (
        "\n  a renamed field: name its new key in the column's Field(source=(old, new)), or the Key's of a nested "
        "object (docs/real-services.md, \"When the service changes shape\")")


def render_events_freshness(report: dict[str, Any]) -> str:
    """How long the events of the open shipment read longest ago have gone unread, and why that matters."""
    found = report["events_freshness"]
    age = found.get("oldest_age_minutes")
    line = (f"  {found.get('open_shipments') or 0:,} open shipments; the events of the one read longest ago: "
            + (f"{age // 60} h {age % 60} min ago" if age is not None else "never read"))
    if found.get("found_run_id"):
        what = parts_named(found.get("parts_found") or [])
        line += (f"\n  the service changes {what} without moving last-modified (found by run "
                 f"{found['found_run_id']} at {_utc_text(found.get('found_at'))})")
    if found.get("rolling_reread"):
        bound = found.get("max_age_minutes") or 0
        state = "within" if age is not None and age <= bound else "OVER"
        line += f"\n  re-read on a rolling basis: {state} the bound of {bound // 60} h {bound % 60} min"
    else:
        line += "\n  no rolling re-read: each change the service stamps is read by the walk"
    return line


def render_null_jumps(report: dict[str, Any]) -> str:
    """The columns whose share of nulls jumped in a run and stays so."""
    jumps: list[dict[str, Any]] = report.get("null_jumps") or []
    if not jumps:
        return "  none: no column's share of nulls jumped in the rows the runs wrote"
    rows = []
    for jump in jumps:
        recent = _json_value(jump.get("recent_runs")) or []
        rows_before, nulls_before = sum(r[1] for r in recent), sum(r[2] for r in recent)
        before = f"{nulls_before / rows_before:.1%} of {rows_before:,}" if rows_before else None
        latest = jump.get("rows_latest") or 0
        now = f"{(jump.get('nulls_latest') or 0) / latest:.0%} of {latest:,}" if latest else None
        rows.append((jump["stream"], f"{jump['table_name']}.{jump['column_name']}", now, before,
                     jump.get("changed_run_id"), _utc_text(jump.get("changed_at"))))
    headers = ("stream", "column", "null in the latest run", "in the runs before", "since run", "since (UTC)")
    return format_table(headers, rows) + (
        "\n  a field renamed or dropped where no declaration watches it, a mapping's fault, or the service sending "
        "null (docs/real-services.md, \"When the service changes shape\")")


def _kinds_text(change: dict[str, Any]) -> str | None:
    """``number -> text: 194, 0 not read`` for a retyped field; its kinds otherwise."""
    kinds, read = _json_value(change.get("kinds")), _json_value(change.get("kinds_read"))
    before = "/".join(kinds or ())
    if change["state"] != "retyped" or not isinstance(read, dict):
        return before or None
    other = {kind: n for kind, n in read.items() if kind not in (kinds or ())}
    counted = ", ".join(f"{kind} {n:,}" for kind, n in sorted(other.items()))
    return f"{before} -> {counted}, {change.get('unread') or 0:,} not read"


def _json_value(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def _utc_text(iso: str | None) -> str | None:
    """``2026-11-01T08:00:00+00:00`` -> ``2026-11-01 08:00:00``."""
    return iso.replace("T", " ").removesuffix("+00:00") if iso else iso


def _short(text: str | None, limit: int) -> str | None:
    if text is None or len(text) <= limit:
        return text
    return text[: limit - 3] + "..."
