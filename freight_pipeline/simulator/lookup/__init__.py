"""The lookup engine: criteria parsing and validation, matching, ordering and paging.

Generic over rows of mappings: a :class:`LookupSpec` names a group's identifier keys, how each is
read from a row and whether it compares as integer or string. Used for shipments (rows of
``store.reader.shipment_key_rows()``), memo lines, code conversions and E-Files. Semantics follow
docs/assumptions.md A4-A7 (and A13, A14, A19 for the key sets).

Its modules: :mod:`.types` (criteria, specs, pages), :mod:`.parse` (criteria and paging read from a
request), :mod:`.match` (matching, ordering, paging) and :mod:`.specs` (the four key sets, the
result cache).

Every problem raises :class:`CriteriaError` with a message naming it (HTTP 400).
"""
