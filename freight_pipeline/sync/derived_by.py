"""The mappings that derived the rows held: kept in ``freight_meta.sync_state`` under :data:`DERIVED_BY`.

Every run that may write rows adds its mapping's signature (``normalize.signature``) before it writes
(:func:`note_mapping`); a rebuild that re-derived what the difference touches leaves only its own
(:func:`settle_mapping`). So a rebuild knows what derived every row: what a mapping fix can have changed is the
records that name the keys the fix touched, and no other (:meth:`DerivedBy.touched_keys`). A warehouse that
held shipments before the signatures were kept has rows of an unknown mapping: its next rebuild re-derives
every record.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from freight_pipeline.normalize.signature import MappingSignature, touched_keys
from freight_pipeline.warehouse.store import Warehouse

DERIVED_BY = "derived_by"
"""``sync_state`` entry: JSON ``{"signatures": {id: signature}, "unknown": bool}``."""


@dataclass(frozen=True)
class DerivedBy:
    """The mappings whose rows the warehouse holds; ``unknown``: also rows of a mapping never recorded."""

    signatures: dict[str, MappingSignature]
    unknown: bool = False

    @classmethod
    def held(cls, warehouse: Warehouse) -> DerivedBy | None:
        """What the warehouse records (None: nothing yet)."""
        text = warehouse.reads.get_cursor(DERIVED_BY)
        return None if text is None else cls.parse(text)

    @classmethod
    def parse(cls, text: str) -> DerivedBy:
        """The entry's JSON text; one that cannot be read counts as an unknown mapping."""
        try:
            data = json.loads(text)
            signatures = {str(key): MappingSignature.from_json(value) for key, value in data["signatures"].items()}
            return cls(signatures, bool(data.get("unknown")))
        except (ValueError, KeyError, TypeError, AttributeError):
            return cls({}, unknown=True)

    def text(self) -> str:
        return json.dumps({"signatures": {key: signature.as_json() for key, signature in self.signatures.items()},
                           "unknown": self.unknown}, sort_keys=True, separators=(",", ":"))

    def brief(self) -> str:
        """The entry as ``status`` shows it: the mappings' ids, not their declarations (about 140 KB each)."""
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
    """Before a run writes rows derived by ``signature``: it is added to those held (on a warehouse that holds
    shipments and no record yet, beside an unknown mapping). What is held afterwards."""
    held = DerivedBy.held(warehouse)
    if held is not None and signature.id in held.signatures:
        return held
    if held is None:
        held = DerivedBy({}, unknown=warehouse.reads.holds_shipments())
    noted = DerivedBy({**held.signatures, signature.id: signature}, held.unknown)
    warehouse.writes.set_cursor(DERIVED_BY, noted.text(), run_id)
    return noted


def settle_mapping(warehouse: Warehouse, signature: MappingSignature, before: DerivedBy, run_id: str) -> None:
    """After a rebuild that re-derived every record ``signature``'s difference from ``before`` touches: only
    ``signature`` derived the rows, but for a mapping a run added meanwhile."""
    now = DerivedBy.held(warehouse) or before
    since = {key: value for key, value in now.signatures.items() if key not in before.signatures}
    warehouse.writes.set_cursor(DERIVED_BY, DerivedBy({**since, signature.id: signature}).text(), run_id)
