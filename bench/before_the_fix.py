"""The mapping before a one-line fix: the shipments' house and master references read from their old names
only (no alias for the 2026.2 release's ``house_bill_number``, ``master_bill_number``). What the rebuild's
test and the bench sync with, so that a rebuild with the code as it is has a fix to apply.

``python -m bench.before_the_fix ARGS``: ``freight-pipeline ARGS`` with that mapping.
"""

from __future__ import annotations

import dataclasses
import sys

from freight_pipeline.normalize import flatten
from freight_pipeline.normalize.plain_fields import CompiledFields, Field, compile_fields
from freight_pipeline.normalize.shapes import Shape
from freight_pipeline.normalize.specs.shipments import SHIPMENT_FIELDS, SHIPMENT_TIMESTAMP_FIELDS


def mapping_before_the_fix() -> tuple[CompiledFields, Shape]:
    """The shipments' compiled fields (``flatten._SHIPMENT``) and the document's declared shape
    (``drift.SOURCE_SHAPES[DOCUMENT]``) without the aliases."""
    plain = (*(Field(f.column, f.type, f.description) if len(f.keys) > 1 else f for f in SHIPMENT_FIELDS),
             *SHIPMENT_TIMESTAMP_FIELDS)
    shape = flatten.DOCUMENT_SHAPE
    return compile_fields(plain), Shape(shape.label, dataclasses.replace(shape.root, fields=plain))


def main(argv: list[str]) -> int:
    from freight_pipeline.cli import main as cli
    from freight_pipeline.sync import drift
    from freight_pipeline.sync.parts import DOCUMENT

    flatten._SHIPMENT, drift.SOURCE_SHAPES[DOCUMENT] = mapping_before_the_fix()
    return cli(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
