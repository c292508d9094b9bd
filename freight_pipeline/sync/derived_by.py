"""Which mappings derived the rows held, from the run log: each writing run names its mapping.

Every stream run (and every rebuild) names the id of its mapping's signature (``normalize.signature``) in its
``freight_meta.sync_runs`` row from its start (``details.extra.mapping``), and stores the signature itself once
(``freight_meta.sync_state`` entry ``derived_by:<id>``) before it writes a row (:func:`note_mapping`). The rows
held are then derived by the mappings of: the last complete rebuild (it left every row as its mapping derives
it), and every run that may have written since that rebuild began (in a lake also one still running, or that
finished after its start less :data:`CLOCK_MARGIN`: a writer on another host). A run that names no mapping (a
version from before the signatures, or a rollback to one), a mapping whose signature is not stored, or no
complete rebuild at all with such runs before, is an unknown mapping: the next rebuild re-derives every record
(:meth:`DerivedBy.touched_keys`, which says why). Nothing is read, changed and written back: two writers record
theirs at once.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass

from freight_pipeline.normalize.signature import EveryRecord, MappingSignature, touched_keys
from freight_pipeline.sync.streams import STREAM_NAMES
from freight_pipeline.warehouse.records import RunMapping
from freight_pipeline.warehouse.store import Warehouse

DERIVED_BY = "derived_by"
"""The prefix of the signatures' ``sync_state`` entries (``derived_by:<id>``: the signature's JSON)."""
MAPPING = "mapping"
"""The key of ``sync_runs.details.extra`` naming the run's mapping (its signature's id)."""
CLOCK_MARGIN = dt.timedelta(minutes=10)
"""How far another host's clock may be behind: a run that finished that long before a rebuild began counts as
one that may have written after it."""
LONGEST_RUN = dt.timedelta(days=1)
"""A run that never finished (a writer still going, or one killed) counts as one that may have written after a
rebuild began when it began at most this long before (a killed run of long ago does not make every rebuild
re-derive every record)."""


@dataclass(frozen=True)
class DerivedBy:
    """The mappings whose rows the warehouse may hold; ``unknown``: also rows of a mapping not known."""

    signatures: dict[str, MappingSignature]
    unknown: bool = False

    @classmethod
    def held(cls, warehouse: Warehouse, rebuild_stream: str) -> DerivedBy:
        """From the run log: the mappings of the last complete rebuild (a successful run of ``rebuild_stream``, the
        one recorded last) and of every run that may have written since it began: those recorded after it (a run's
        row is recorded as it begins, so a clock stepped back since cannot hide one) and those its instants say may
        have (writers at once); every run when there was none."""
        runs = _writing_runs(warehouse, rebuild_stream)
        complete = [at for at, run in enumerate(runs) if run.stream == rebuild_stream and run.status == "success"
                    and run.started_at is not None]
        if not complete:
            return cls.of(warehouse, {run.mapping for run in runs})
        anchor = runs[complete[-1]]
        assert anchor.started_at is not None
        return cls.of(warehouse, {anchor.mapping} | {run.mapping for run in runs[complete[-1] + 1:]}
                      | cls._writing_since(warehouse, runs, anchor.started_at))

    @classmethod
    def since(cls, warehouse: Warehouse, instant: dt.datetime, rebuild_stream: str) -> DerivedBy:
        """The mappings of every run that may have written after ``instant``."""
        return cls.of(warehouse, cls._writing_since(warehouse, _writing_runs(warehouse, rebuild_stream), instant))

    @staticmethod
    def _writing_since(warehouse: Warehouse, runs: list[RunMapping], instant: dt.datetime) -> set[str | None]:
        """The mappings of the runs that may have written after ``instant``. One writer at a time (this DuckDB
        file): those that began then or later. Writers at once (a lake, hosts with their own clocks): also those
        that finished after it less :data:`CLOCK_MARGIN`, and those that never finished (running, or killed)
        and began at most :data:`LONGEST_RUN` before it."""
        if not warehouse.backend.concurrent_writers:
            return {run.mapping for run in runs if run.started_at is None or run.started_at >= instant}
        finished_after, began_after = instant - CLOCK_MARGIN, instant - LONGEST_RUN
        return {run.mapping for run in runs
                if (run.finished_at is not None and run.finished_at >= finished_after)
                or (run.finished_at is None and (run.started_at is None or run.started_at >= began_after))}

    @classmethod
    def of(cls, warehouse: Warehouse, ids: set[str | None]) -> DerivedBy:
        """The stored signatures of ``ids``; one that is None (a run that named none) or not stored is unknown."""
        stored = {name.removeprefix(f"{DERIVED_BY}:"): text
                  for name, text in warehouse.reads.cursors_with_prefix(f"{DERIVED_BY}:").items()}
        signatures: dict[str, MappingSignature] = {}
        unknown = False
        for mapping in ids:
            try:
                signatures[str(mapping)] = MappingSignature.from_json(json.loads(stored[str(mapping)]))
            except (KeyError, ValueError, TypeError, AttributeError):
                unknown = True
        return cls(signatures, unknown)

    def touched_keys(self, target: MappingSignature) -> frozenset[str] | EveryRecord:
        """The source keys a record must name for ``target`` to derive other rows from it than those held
        (empty: every row is ``target``'s), or :class:`EveryRecord`: any record may change, and why."""
        if self.unknown:
            return EveryRecord("rows held may come from a run that names no mapping, or one whose signature is not "
                               "stored (a warehouse synced before runs recorded their mapping, or a version "
                               "rolled back to)")
        keys: set[str] = set()
        for signature in self.signatures.values():
            touched = touched_keys(target, signature)
            if isinstance(touched, EveryRecord):
                return touched
            keys |= touched
        return frozenset(keys)


def _writing_runs(warehouse: Warehouse, rebuild_stream: str) -> list[RunMapping]:
    """The runs of what writes derived rows: the streams and ``rebuild_stream`` (not the dbt build's)."""
    writers = {*STREAM_NAMES, rebuild_stream}
    return [run for run in warehouse.reads.run_mappings(MAPPING) if run.stream in writers]


def note_mapping(warehouse: Warehouse, signature: MappingSignature, run_id: str) -> None:
    """Before a run writes rows derived by ``signature`` (its ``sync_runs`` row names it already): the signature
    stored, once."""
    name = f"{DERIVED_BY}:{signature.id}"
    if warehouse.reads.get_cursor(name) is None:
        warehouse.writes.set_cursor(name, json.dumps(signature.as_json()), run_id)
