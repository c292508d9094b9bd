"""What the job and the freshness look call: the look's problems recorded, then the outbox sent.

Both run under the warehouse's writer lock (the job holds it; ``status --alert`` and the sensor take it, and
leave the look to the run that holds it). Nothing here raises into a run: a look that cannot be recorded is
said in :attr:`Alerted.line`, and its problems are found again by the next look.
"""

from __future__ import annotations

import datetime as dt
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from freight_pipeline.alerts import ledger
from freight_pipeline.alerts.delivery import RECEIPTS_FILE, Destination, Dispatch
from freight_pipeline.alerts.problems import Observation, RunStep, of_freshness, of_steps
from freight_pipeline.config import AlertSettings
from freight_pipeline.normalize.tables import FREIGHT_TABLES
from freight_pipeline.sync.runner import one_line_error
from freight_pipeline.sync.streams import SHIPMENTS
from freight_pipeline.warehouse.backend import StorageBackend
from freight_pipeline.warehouse.paths import working_db_path
from freight_pipeline.warehouse.store import Warehouse
from freight_pipeline.warehouse.writer_lock import WarehouseBusy, writer_lock


@dataclass
class Alerted:
    """What a look did with its problems."""

    line: str
    """``alerts: 2 problems open, 1 message queued for 2 destinations``, or why it could not record them."""
    dispatch: Dispatch | None = None
    """The sends under way (``join`` waits for them)."""
    held: list[ledger.Outgoing] = field(default_factory=list)
    """The messages a look that holds its sends claimed (:func:`after_run` ``hold``), sent by :func:`send_held`."""
    changed: bool = False
    """The look queued a message."""
    unrecorded: bool = False
    """The look could not record the problems (a disk full, a newer release's data): none was sent, none is known."""

    def undelivered(self) -> str | None:
        """Once its sends ended (waited for: each destination at most its timeout), one line on those that failed;
        None when every message was sent (or none was to be)."""
        if self.dispatch is None:
            return None
        self.dispatch.join()
        failed = [r for r in self.dispatch.receipts if not r.sent]
        if not failed:
            return None
        sent = len(self.dispatch.receipts) - len(failed)
        return f"alerts: {sent} sent, {len(failed)} not ({failed[0].error}): sent again by the next run"


def after_run(steps: Sequence[RunStep], run_id: str, data_dir: Path, backend: StorageBackend,
              settings: AlertSettings, max_sync_age: dt.timedelta, *, dagster_run: bool = False,
              found: Observation | None = None, ensure_schema: bool = False, hold: bool = False) -> Alerted | None:
    """The run's problems (its ``steps``, and what else it ``found``) and the warehouse's freshness recorded,
    their messages sent (``hold``: claimed, sent by :func:`send_held`: a look recorded before the publish, so that the
    published copy holds it, whose messages go once the data is published); None when no destination is set.
    ``ensure_schema``: the run may not have made its tables (a lake run that failed before it opened the warehouse);
    the job's run did."""
    if not settings.alert_urls:
        return None
    seen = of_steps(steps, settings).merge(found or Observation())
    return _look(seen, run_id, data_dir, backend, settings, max_sync_age, dagster_run=dagster_run,
                 ensure_schema=ensure_schema, hold=hold)


def send_held(first: Alerted, then: Alerted | None, data_dir: Path, settings: AlertSettings) -> Alerted:
    """The messages ``first`` held and ``then`` (a later look of the same run: the publish's) claimed, sent together;
    one line for both (the later look's said after the first's when it queued a message)."""
    line = first.line
    if then is not None and then.changed:
        line += f"; after the publish: {then.line.removeprefix('alerts: ')}"
    held = [*first.held, *(then.held if then is not None else ())]
    dispatch = _dispatch(held, settings, data_dir) if held else None
    return Alerted(line, dispatch, changed=first.changed or (then is not None and then.changed))


def _dispatch(outgoing: Sequence[ledger.Outgoing], settings: AlertSettings, data_dir: Path) -> Dispatch:
    """The sends of ``outgoing`` to the destinations of ``settings``, under way."""
    receipts = working_db_path(data_dir).parent / RECEIPTS_FILE
    destinations = [Destination(url) for url in settings.alert_urls]
    return Dispatch(outgoing, destinations, settings.alert_timeout_seconds, receipts)


def freshness(data_dir: Path, backend: StorageBackend, settings: AlertSettings, max_sync_age: dt.timedelta,
              looker: str) -> Alerted | None:
    """A look at the warehouse's freshness alone (``status --alert``, the Dagster sensor), named ``looker``, under
    the writer lock; while a run holds it, that run's end looks instead. None when no destination is set. A data
    directory without a working database is not looked at (a look would make one there: a volume not mounted, a
    mistyped directory; a run that failed made it all the same)."""
    if not settings.alert_urls:
        return None
    if backend.working_database_missing(data_dir):
        return Alerted(f"alerts: not looked at: {data_dir} holds no warehouse (no run has written there: a mistyped "
                       "directory, or a volume not mounted?); nothing made there")
    try:
        with writer_lock(data_dir, looker, brief=True):  # a run that starts meanwhile waits for it
            return _look(Observation(), looker, data_dir, backend, settings, max_sync_age)
    except WarehouseBusy as busy:
        return Alerted(f"alerts: not looked at now: {busy}; that run looks at the freshness when it ends")


def _look(seen: Observation, run_id: str, data_dir: Path, backend: StorageBackend, settings: AlertSettings,
          max_sync_age: dt.timedelta, *, dagster_run: bool = False, ensure_schema: bool = True,
          hold: bool = False) -> Alerted:
    """``seen`` and the freshness (the age of the shipments' last successful sync) recorded in one transaction
    with the receipts of the last sends, then the unsent messages sent, or held for :func:`send_held` (``hold``)
    (``ensure_schema``: create the tables a warehouse of an earlier version lacks)."""
    destinations = [Destination(url) for url in settings.alert_urls]
    fingerprints = [d.fingerprint for d in destinations]
    receipts = working_db_path(data_dir).parent / RECEIPTS_FILE
    now = dt.datetime.now(dt.UTC)
    link = f"{settings.dagster_url}/runs/{run_id}" if dagster_run and settings.dagster_url else None
    context = ledger.Context(run_id, now, settings.alert_deployment or socket.gethostname(), link)
    try:
        with Warehouse(data_dir, FREIGHT_TABLES, backend=backend, ensure_schema=ensure_schema) as warehouse:

            def write(con: duckdb.DuckDBPyConnection) -> tuple[list[ledger.Change], int, int, Path | None,
                                                             list[ledger.Outgoing]]:
                folded = ledger.fold_receipts(con, receipts)
                looked = Observation().merge(seen).merge(
                    of_freshness(SHIPMENTS.name, ledger.last_success(con, SHIPMENTS.name), now, max_sync_age))
                changes = ledger.record(con, looked, context, settings, fingerprints)
                outgoing = ledger.pending(con, fingerprints, now, dt.timedelta(seconds=settings.alert_timeout_seconds))
                return changes, ledger.queued_by(con, context), ledger.open_count(con), folded, outgoing

            changes, queued, open_now, folded, outgoing = warehouse.database.write("alerts", write)
    except Exception as exc:  # never into the run: the next look finds the same problems
        return Alerted(f"alerts: the problems could not be recorded ({one_line_error(exc)}); the next run "
                       "looks again", unrecorded=True)
    if folded is not None:
        folded.unlink(missing_ok=True)
    dispatch = _dispatch(outgoing, settings, data_dir) if outgoing and not hold else None
    said = ", ".join(f"{sum(c.kind == kind for c in changes)} {kind}" for kind in ledger.KINDS
                     if any(c.kind == kind for c in changes))
    line = f"alerts: {_count(open_now, 'problem')} open" + (
        f"; a message on {said} queued for {_count(queued, 'destination')}" if changes
        else f"; the problems still open queued for {_count(queued, 'destination')} that had not heard of them"
        if queued else "")
    if len(outgoing) > queued:
        line += f"; {_count(len(outgoing) - queued, 'message')} unsent before, queued again"
    return Alerted(line, dispatch, held=list(outgoing) if hold else [], changed=bool(queued))


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"
