"""The mappings that derived the rows held: ``freight_meta.sync_state`` entries ``derived_by:<id>``, one per mapping.

Every run that may write rows records its mapping's signature (``normalize.signature``) before it writes
(:func:`note_mapping`); a rebuild that re-derived what the difference touches leaves only its own
(:func:`settle_mapping`). So a rebuild knows what derived every row: what a mapping fix can have changed is the
records that name the keys the fix touched, and no other (:meth:`DerivedBy.touched_keys`). A warehouse that
held shipments before the signatures were kept has rows of an unknown mapping (entry :data:`UNKNOWN`): its
next rebuild re-derives every record. One entry per mapping, each written on its own: two writers of a lake
that record theirs at once both stay recorded (no entry is read, changed and written back).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from freight_pipeline.normalize.signature import MappingSignature, touched_keys
from freight_pipeline.warehouse.store import Warehouse

DERIVED_BY = "derived_by"
"""What ``freight-pipeline status`` calls the entries, and the prefix of their names (``derived_by:<id>``: the
signature's JSON; null once a rebuild replaced its rows)."""
UNKNOWN = f"{DERIVED_BY}:unknown"
"""Entry set (``true``) when the first mapping was recorded on a warehouse that held shipments already."""


@dataclass(frozen=True)
class DerivedBy:
    """The mappings whose rows the warehouse holds; ``unknown``: also rows of a mapping never recorded."""

    signatures: dict[str, MappingSignature]
    unknown: bool = False
    entries: frozenset[str] = frozenset()
    """The names of the entries read (an unreadable one too: a settled rebuild clears them all)."""

    @classmethod
    def held(cls, warehouse: Warehouse) -> DerivedBy | None:
        """What the warehouse records (None: nothing yet)."""
        entries = warehouse.reads.cursors_with_prefix(f"{DERIVED_BY}:")
        return cls.of(entries) if entries else None

    @classmethod
    def of(cls, entries: Mapping[str, str]) -> DerivedBy:
        """From the entries (name -> JSON text) with a value; one that cannot be read counts as unknown."""
        signatures: dict[str, MappingSignature] = {}
        unknown = False
        for name, text in entries.items():
            if name == UNKNOWN:
                unknown = True
                continue
            try:
                signature = MappingSignature.from_json(json.loads(text))
            except (ValueError, KeyError, TypeError, AttributeError):
                unknown = True
                continue
            signatures[name.removeprefix(f"{DERIVED_BY}:")] = signature
        return cls(signatures, unknown, frozenset(entries))

    def brief(self) -> str:
        """The entries as ``status`` shows them: the mappings' ids, not their declarations (about 140 KB each)."""
        return json.dumps({"mappings": sorted(self.signatures), "unknown": self.unknown})

    def touched_keys(self, target: MappingSignature) -> frozenset[str] | None:
        """The source keys a record must name for ``target`` to derive other rows from it than those held
        (empty: every row is ``target``'s); None: any record may change."""
        if self.unknown:
            return None
        keys: set[str] = set()
        for signature in self.signatures.values():
            touched = touched_keys(target, signature)
            if touched is None:
                return None
            keys |= touched
        return frozenset(keys)


def note_mapping(warehouse: Warehouse, signature: MappingSignature, run_id: str) -> DerivedBy:
    """Before a run writes rows derived by ``signature``: recorded beside those held (on a warehouse that holds
    shipments and no record yet, beside an unknown mapping). What is held afterwards."""
    held = DerivedBy.held(warehouse)
    if held is not None and signature.id in held.signatures:
        return held
    if held is None:
        held = DerivedBy({}, unknown=warehouse.reads.holds_shipments())
        if held.unknown:
            warehouse.writes.set_cursor(UNKNOWN, "true", run_id)
    name = f"{DERIVED_BY}:{signature.id}"
    warehouse.writes.set_cursor(name, json.dumps(signature.as_json()), run_id)
    return DerivedBy({**held.signatures, signature.id: signature}, held.unknown,
                     held.entries | {name} | ({UNKNOWN} if held.unknown else set()))


def settle_mapping(warehouse: Warehouse, signature: MappingSignature, before: DerivedBy, run_id: str) -> None:
    """After a rebuild that re-derived every record ``signature``'s difference from ``before`` touches: the
    mappings of ``before`` derived no row any longer (one a run recorded meanwhile stays)."""
    for name in sorted(before.entries - {f"{DERIVED_BY}:{signature.id}"}):
        warehouse.writes.set_cursor(name, None, run_id)
