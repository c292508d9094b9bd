"""The upgrade that puts the location codes a warehouse holds in their canonical order
(``normalize.groups.codes_in_canonical_order``).

Releases before it stored each location's codes (``*_location_codes``) in the order the service sent them. This one
stores them ordered by code, then type, so that the same codes in any order are the same value; rows an older
release wrote would keep the order sent until their shipment changes (a closed one: never), and one table would hold
the same codes as two texts. So the schema's upgrade (``Warehouse.ensure_schema``) rewrites the rows held once, as
this release would write them, inside its transaction. It touches only rows out of that order, so running it again
changes nothing. No history table holds the codes, and no mart reads them: nothing else moves. (The column of a
code type, filled from the first code of its type, differs from what this release derives only for a location with
two codes of one type sent in another order than theirs: left as held, it is written as this release derives it when
a re-read finds it so, counted apart as rows an older mapping derived, ``sync.freshness.answered_as_held``.)
"""

from __future__ import annotations

import json
from collections.abc import Collection

import duckdb
import pyarrow as pa

from freight_pipeline.normalize.groups import codes_in_canonical_order
from freight_pipeline.normalize.schema import TableSpec
from freight_pipeline.warehouse.ddl import qualified, quote, run

REORDERED = "_codes_reordered"
CODES_SUFFIX = "location_codes"


def _canonical(text: str) -> str | None:
    """``text``'s codes in their canonical order; None when it is no JSON array (left as it is)."""
    try:
        codes = json.loads(text)
    except ValueError:
        return None
    return codes_in_canonical_order(codes) if isinstance(codes, list) else None


def location_codes_in_canonical_order(con: duckdb.DuckDBPyConnection, tables: Collection[TableSpec]) -> list[str]:
    """Rewrite, in ``tables`` (those of the ``freight`` schema with a ``*_location_codes`` column and a primary key),
    every row whose codes stand in another order than this release writes them; the steps."""
    steps = []
    for spec in tables:
        columns = [c.name for c in spec.columns if c.name.endswith(CODES_SUFFIX)]
        if not columns or not spec.primary_key:
            continue
        keys = list(spec.primary_key)
        table = qualified(spec)
        for column in columns:
            rows = run(con, f"SELECT {', '.join(quote(k) for k in keys)}, CAST({quote(column)} AS VARCHAR) "
                            f"FROM {table} WHERE json_array_length({quote(column)}) > 1")
            changed = [(*row[:-1], canonical) for row in rows
                       if (canonical := _canonical(row[-1])) is not None and canonical != row[-1]]
            if not changed:
                continue
            reordered = pa.table({name: [row[i] for row in changed] for i, name in enumerate([*keys, "codes"])})
            con.register(REORDERED, reordered)
            try:
                matched = " AND ".join(f"{table}.{quote(k)} = r.{quote(k)}" for k in keys)
                run(con, f"UPDATE {table} SET {quote(column)} = r.codes::JSON FROM {REORDERED} r WHERE {matched}")
            finally:
                con.unregister(REORDERED)
            steps.append(f"{spec.qualified_name}.{column}: the codes of {len(changed)} rows in their canonical order")
    return steps
