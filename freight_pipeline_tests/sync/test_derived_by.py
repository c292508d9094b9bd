"""Which mappings derived the rows held, from the run log: the last complete rebuild's and those of every run that
may have written since it began; a run that names none (an older version) or whose signature is not stored
is an unknown mapping."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from freight_pipeline.lake.backend import storage_from_env
from freight_pipeline.normalize.signature import EveryRecord, MappingSignature
from freight_pipeline.sync.derived_by import LONGEST_RUN, MAPPING, DerivedBy, note_mapping
from freight_pipeline.sync.rebuild import REBUILD_STATE
from freight_pipeline.warehouse.meta import BUILD_STREAM
from freight_pipeline.warehouse.records import RunRecord
from freight_pipeline.warehouse.store import Warehouse, open_warehouse

T0 = dt.datetime(2026, 11, 29, 8, 0, tzinfo=dt.UTC)


def _mapping(*sources: str, code: str = "release 1") -> MappingSignature:
    """A mapping with one field read from ``sources`` in order."""
    return MappingSignature(code, {"shipments": {"field": "house_reference", "type": "VARCHAR",
                                                 "__sources__": list(sources)}})


def _ran(warehouse: Warehouse, run_id: str, mapping: MappingSignature | None, began: dt.timedelta,
         took: dt.timedelta | None, stream: str = "shipments") -> None:
    """A run of ``stream`` that began ``began`` after T0 and took ``took`` (None: never finished), naming
    ``mapping`` (None: a version that names none) and storing its signature, as a run does."""
    extra = {} if mapping is None else {MAPPING: mapping.id}
    finished = None if took is None else T0 + began + took
    warehouse.run_log.record_run(RunRecord(run_id, stream, T0 + began, finished,
                                           "running" if took is None else "success", extra=extra))
    if mapping is not None:
        note_mapping(warehouse, mapping, run_id)


def test_the_mappings_held_are_the_last_complete_rebuild_s_and_those_of_the_runs_that_may_have_written_since(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old, fixed = _mapping("house_reference"), _mapping("house_reference", "house_bill_number")
    other = _mapping("house_reference", code="release 2")
    minute = dt.timedelta(minutes=1)
    with open_warehouse(tmp_path, storage_from_env()) as warehouse:
        _ran(warehouse, "sync-1", old, 0 * minute, minute)
        _ran(warehouse, "sync-2", fixed, 0 * minute, minute)  # a second writer of a lake, at the same time
        held = DerivedBy.held(warehouse, REBUILD_STATE)
        assert set(held.signatures) == {old.id, fixed.id} and not held.unknown
        assert held.touched_keys(fixed) == {"house_bill_number"}
        every = held.touched_keys(other)  # another release's code: every record
        assert isinstance(every, EveryRecord) and every.why.startswith("the code changed since mapping"), every

        _ran(warehouse, "killed", old, 59 * minute, None)  # one writer at a time: this one was killed before
        _ran(warehouse, "rebuild-1", fixed, 60 * minute, 5 * minute, stream=REBUILD_STATE)
        assert DerivedBy.held(warehouse, REBUILD_STATE).touched_keys(fixed) == frozenset()

        # writers at once (a lake): one still going when the rebuild began may have written after it
        monkeypatch.setattr(warehouse.backend, "concurrent_writers", True)
        assert DerivedBy.held(warehouse, REBUILD_STATE).touched_keys(fixed) == {"house_bill_number"}


def test_a_run_recorded_after_the_last_rebuild_counts_though_a_clock_stepped_back_dates_it_before(
    tmp_path: Path,
) -> None:
    """A rebuild while the clock was two hours ahead, then (the clock stepped back) a sync with another mapping: its
    start is dated before the rebuild's, and its mapping was left out of those the warehouse may hold."""
    fixed, other = _mapping("house_reference", "house_bill_number"), _mapping("house_reference", code="release 2")
    with open_warehouse(tmp_path, storage_from_env()) as warehouse:
        _ran(warehouse, "rebuild-ahead", fixed, dt.timedelta(hours=2), dt.timedelta(minutes=5), stream=REBUILD_STATE)
        _ran(warehouse, "sync-after-step", other, dt.timedelta(0), dt.timedelta(minutes=5))
        assert set(DerivedBy.held(warehouse, REBUILD_STATE).signatures) == {fixed.id, other.id}


def test_a_run_that_names_no_mapping_or_one_not_stored_makes_every_record_touched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fixed = _mapping("house_reference", "house_bill_number")
    minute = dt.timedelta(minutes=1)
    with open_warehouse(tmp_path, storage_from_env()) as warehouse:
        monkeypatch.setattr(warehouse.backend, "concurrent_writers", True)  # the lake's rules: the wider ones
        # a run killed long before the rebuild never finished: it does not count for ever
        _ran(warehouse, "killed", None, -(LONGEST_RUN + minute), None)
        _ran(warehouse, "rebuild-1", fixed, 0 * minute, minute, stream=REBUILD_STATE)
        # the dbt build's runs write no derived row: they name no mapping, and do not count
        _ran(warehouse, "build", None, 5 * minute, minute, stream=BUILD_STREAM)
        assert DerivedBy.held(warehouse, REBUILD_STATE).touched_keys(fixed) == frozenset()
        _ran(warehouse, "rolled-back", None, 10 * minute, minute)  # the version before, after the rebuild
        every = DerivedBy.held(warehouse, REBUILD_STATE).touched_keys(fixed)
        assert isinstance(every, EveryRecord) and "names no mapping" in every.why, every
        assert DerivedBy.since(warehouse, T0 + 9 * minute, REBUILD_STATE).unknown
        assert not DerivedBy.since(warehouse, T0 + 30 * minute, REBUILD_STATE).unknown
        warehouse.run_log.record_run(RunRecord("unstored", "shipments", T0 + 40 * minute, T0 + 41 * minute,
                                               "success", extra={MAPPING: "a mapping whose signature was lost"}))
        assert DerivedBy.since(warehouse, T0 + 30 * minute, REBUILD_STATE).unknown
