"""The lookup engine: criteria parsing and validation, matching, ordering and paging.

Generic over rows of mappings: a :class:`LookupSpec` names a group's identifier keys, how each is
read from a row and whether it compares as integer or string. Used for shipments (rows of
``store.shipment_key_rows()``), memo lines, code conversions and E-Files. Semantics follow
docs/assumptions.md A4-A7 (and A13, A14, A19 for the key sets).

Every problem raises :class:`CriteriaError` with a message naming it (HTTP 400).
"""

from __future__ import annotations

from freight_pipeline.simulator.lookup.match import (  # noqa: F401 (the lookup engine's names)
    compile_criteria,
    order_rows,
    page_of,
    run_lookup,
)
from freight_pipeline.simulator.lookup.parse import (  # noqa: F401 (the lookup engine's names)
    parse_criteria,
    parse_page_request,
)
from freight_pipeline.simulator.lookup.specs import (  # noqa: F401 (the lookup engine's names)
    CODE_CONVERSION_SPEC,
    EFILE_SPEC,
    MEMO_SPEC,
    SHIPMENT_SPEC,
    SPECS,
    ResultCache,
    any_of_values,
    cached_lookup,
    equals_value,
)
from freight_pipeline.simulator.lookup.types import (  # noqa: F401 (the lookup engine's names)
    CRITERION_FIELDS,
    DATE,
    MATCH_MODES,
    MAX_NESTING,
    MONTH,
    ORDER_MODES,
    TIME,
    CriteriaError,
    Criterion,
    KeyKind,
    LookupSpec,
    Page,
    PageRequest,
    Predicate,
    Row,
    ValueFormat,
    one_of,
)
