"""The record of the mappings that derived the rows: one entry per mapping (two writers both recorded), what
a rebuild's mapping touches against all of them, and a settled rebuild clearing those it replaced."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from freight_pipeline.lake.backend import storage_from_env
from freight_pipeline.normalize.signature import MappingSignature
from freight_pipeline.sync.derived_by import DERIVED_BY, DerivedBy, note_mapping, settle_mapping
from freight_pipeline.warehouse.store import open_warehouse


def _mapping(*sources: str, code: str = "release 1") -> MappingSignature:
    """A mapping with one field read from ``sources`` in order."""
    return MappingSignature(code, {"shipments": {"field": "house_reference", "type": "VARCHAR",
                                                 "__sources__": list(sources)}})


def test_each_mapping_is_its_own_entry_and_a_rebuild_touches_what_differs_from_any(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old, fixed, other = _mapping("house_reference"), _mapping("house_reference", "house_bill_number"), _mapping(
        "house_reference", code="release 2")
    with open_warehouse(tmp_path, storage_from_env()) as warehouse:
        assert DerivedBy.held(warehouse) is None
        note_mapping(warehouse, old, "sync-1")  # an empty warehouse: no unknown mapping
        with monkeypatch.context() as stale:  # a second writer of a lake, which read before the first wrote
            stale.setattr(DerivedBy, "held", classmethod(lambda cls, warehouse: None))
            note_mapping(warehouse, fixed, "sync-2")
        held = DerivedBy.held(warehouse)
        assert held is not None and set(held.signatures) == {old.id, fixed.id} and not held.unknown
        assert held.touched_keys(fixed) == {"house_bill_number"}
        assert held.touched_keys(other) is None  # another release's code: every record

        began = note_mapping(warehouse, fixed, "rebuild")
        note_mapping(warehouse, other, "sync-3")  # a run of another mapping while the rebuild went on
        settle_mapping(warehouse, fixed, began, "rebuild")
        after = DerivedBy.held(warehouse)
        assert after is not None and set(after.signatures) == {fixed.id, other.id}
        assert json.loads(after.brief()) == {"mappings": sorted([fixed.id, other.id]), "unknown": False}


def test_an_entry_that_cannot_be_read_counts_as_an_unknown_mapping_until_a_rebuild_settles(tmp_path: Path) -> None:
    fixed = _mapping("house_reference", "house_bill_number")
    with open_warehouse(tmp_path, storage_from_env()) as warehouse:
        warehouse.writes.set_cursor(f"{DERIVED_BY}:garbled", "{not json", "old")
        began = note_mapping(warehouse, fixed, "rebuild")
        assert began.unknown and began.touched_keys(fixed) is None
        settle_mapping(warehouse, fixed, began, "rebuild")
        assert DerivedBy.held(warehouse) == DerivedBy({fixed.id: fixed}, False, frozenset({f"{DERIVED_BY}:{fixed.id}"}))
