"""What the history kept and how good the ETAs were, read from the PUBLISHED warehouse (read-only):
the versions of ``freight_history``, the estimate moves of ``analytics.fct_estimate_revisions`` and one
accuracy figure of ``analytics.fct_eta_accuracy`` (the demo's summary)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import duckdb

from freight_pipeline.commands.report import open_published
from freight_pipeline.warehouse.backend import StorageBackend
from freight_pipeline.warehouse.ddl import table_names
from freight_pipeline.warehouse.history import HISTORY_TABLES

ESTIMATE_REVISIONS = "analytics.fct_estimate_revisions"
ETA_ACCURACY = "analytics.fct_eta_accuracy"
WITHIN_HOURS = 24
"""The accuracy figure's tolerance: |estimate - actual| <= 24 hours of the unrounded instants, as
``fct_eta_accuracy_monthly`` counts ``milestones_within_24h``."""


@dataclass(frozen=True)
class TableVersions:
    """One ``freight_history`` table: its rows (versions), those a later version superseded (``valid_to``
    set) and the shipments they belong to."""

    table: str
    versions: int
    superseded: int
    shipments: int


@dataclass(frozen=True)
class EstimateMoves:
    """``fct_estimate_revisions``: the milestones whose estimate moved at least once, and the moves."""

    milestones: int
    moves: int


@dataclass(frozen=True)
class EtaAccuracy:
    """The ETAs of one milestone (``arrival``, ``delivery``, ``leg_arrival``) ``horizon_days`` before
    it happened (``fct_eta_accuracy``): the milestones that happened, those scored (an estimate was on
    record at the horizon), their shipments, the mean absolute error (hours) and how many were within
    WITHIN_HOURS."""

    milestone: str
    horizon_days: int
    happened: int
    scored: int
    shipments: int
    mean_abs_error_hours: float | None
    within: int

    @property
    def within_share(self) -> float | None:
        return self.within / self.scored if self.scored else None


@dataclass(frozen=True)
class HistoryFacts:
    tables: list[TableVersions]
    """The ``freight_history`` tables present, in declaration order."""
    moves: EstimateMoves | None
    """None: the mart is missing (dbt did not build it)."""
    accuracy: EtaAccuracy | None
    """None: the mart is missing."""


def read_history_facts(
    data_dir: Path, backend: StorageBackend, *, milestone: str = "arrival", horizon_days: int = 1
) -> HistoryFacts:
    """The history's versions, the estimate moves and the accuracy of ``milestone``'s ETAs
    ``horizon_days`` out, from what ``backend`` published for ``data_dir``."""
    with open_published(data_dir, backend) as con:
        present = set(table_names(con))
        tables = [_versions(con, spec.qualified_name) for spec in HISTORY_TABLES if spec.qualified_name in present]
        moves = _moves(con) if ESTIMATE_REVISIONS in present else None
        accuracy = _accuracy(con, milestone, horizon_days) if ETA_ACCURACY in present else None
    return HistoryFacts(tables, moves, accuracy)


def _versions(con: duckdb.DuckDBPyConnection, table: str) -> TableVersions:
    row = con.execute(f"SELECT count(*), count(valid_to), count(DISTINCT shipment_id) FROM {table}").fetchone()
    versions, superseded, shipments = row or (0, 0, 0)
    return TableVersions(table, int(versions), int(superseded), int(shipments))


def _moves(con: duckdb.DuckDBPyConnection) -> EstimateMoves:
    row = con.execute(f"SELECT count(*) FILTER (WHERE revisions > 0), coalesce(sum(revisions), 0) "
                      f"FROM {ESTIMATE_REVISIONS}").fetchone()
    milestones, moves = row or (0, 0)
    return EstimateMoves(int(milestones), int(moves))


def _accuracy(con: duckdb.DuckDBPyConnection, milestone: str, horizon_days: int) -> EtaAccuracy:
    row = con.execute(
        "SELECT count(*), count(*) FILTER (WHERE is_scored), count(DISTINCT shipment_id) FILTER (WHERE is_scored), "
        "avg(abs_error_hours) FILTER (WHERE is_scored), count(*) FILTER (WHERE is_scored AND "
        f"abs(epoch(estimated_at) - epoch(actual_at)) <= {WITHIN_HOURS * 3600}) "
        f"FROM {ETA_ACCURACY} WHERE milestone = ? AND horizon_days = ?",
        [milestone, horizon_days],
    ).fetchone()
    happened, scored, shipments, mean, within = row or (0, 0, 0, None, 0)
    return EtaAccuracy(milestone, horizon_days, int(happened), int(scored), int(shipments),
                       None if mean is None else float(mean), int(within))
