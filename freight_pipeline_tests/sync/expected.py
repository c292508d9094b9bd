"""The warehouse compared with what it must hold for a simulator store: the oracle of the sync tests.

The expected rows (:func:`bench.expected_rows.expected_rows`, built from the store directly, not
over HTTP) are compared with the warehouse with ``EXCEPT ALL`` both ways, so a missing row, an extra
row and a duplicate row all count as differences.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

import duckdb

from bench.expected_rows import expected_rows
from freight_pipeline.normalize.flatten import to_arrow_batch
from freight_pipeline.normalize.tables import FREIGHT_TABLES
from freight_pipeline.simulator.store import SimulatorStore


def differences(
    store: SimulatorStore,
    database: Path,
    *,
    except_shipments: Collection[int] = (),
    except_conversions: Collection[int] = (),
) -> dict[str, tuple[int, int]]:
    """Per table with differences: (rows missing from the warehouse, rows it has in excess).

    Rows of ``except_shipments`` and ``except_conversions`` are left out on both sides (records a
    test made bad on purpose and checks on its own).
    """
    return rows_differences(expected_rows(store), database, except_shipments=except_shipments,
                            except_conversions=except_conversions)


def rows_differences(
    expected: dict[str, list[dict[str, Any]]],
    database: Path,
    *,
    except_shipments: Collection[int] = (),
    except_conversions: Collection[int] = (),
) -> dict[str, tuple[int, int]]:
    """:func:`differences` against rows given per table (an oracle a test adjusted itself)."""
    arrow = to_arrow_batch(expected)
    found: dict[str, tuple[int, int]] = {}
    with duckdb.connect(str(database), read_only=True) as con:
        for spec in FREIGHT_TABLES:
            cols = ", ".join(f'"{c.name}"' for c in spec.columns)
            con.register("expected_rows", arrow[spec.name])
            where = _leaving_out(spec.column_names, except_shipments, except_conversions)
            actual = f"SELECT {cols} FROM {spec.schema}.{spec.name}{where}"
            expected_sql = f"SELECT {cols} FROM expected_rows{where}"
            if not _same_row_hashes(con, cols, expected_sql, actual):
                missing = con.execute(f"SELECT count(*) FROM ({expected_sql} EXCEPT ALL {actual})").fetchall()[0][0]
                extra = con.execute(f"SELECT count(*) FROM ({actual} EXCEPT ALL {expected_sql})").fetchall()[0][0]
                if missing or extra:
                    found[spec.name] = (missing, extra)
            con.unregister("expected_rows")
    return found


def _same_row_hashes(con: duckdb.DuckDBPyConnection, cols: str, expected_sql: str, actual_sql: str) -> bool:
    """Whether both sides hold the same multiset of row hashes: then they hold the same rows (but for a 64-bit
    hash collision), and the ``EXCEPT ALL`` counts, about 1 ms per column of a table, need not run (a table
    of 63 columns: 60 ms, its hashes 5 ms). Different hashes (a difference, or the same values in another
    type) leave the counting to ``EXCEPT ALL``."""
    hashes = "SELECT list_sort(list(hash({cols}))) FROM ({rows})"
    same = con.execute(f"SELECT ({hashes.format(cols=cols, rows=expected_sql)}) IS NOT DISTINCT FROM "
                       f"({hashes.format(cols=cols, rows=actual_sql)})").fetchall()
    return bool(same[0][0])


def assert_converged(store: SimulatorStore, database: Path) -> None:
    diff = differences(store, database)
    assert diff == {}, f"warehouse differs from the source (missing, extra) per table: {diff}"


def _leaving_out(columns: list[str], shipments: Collection[int], conversions: Collection[int]) -> str:
    conditions = []
    if shipments and "shipment_id" in columns:
        ids = ", ".join(str(int(i)) for i in shipments)
        conditions.append(f"(shipment_id IS NULL OR shipment_id NOT IN ({ids}))")
    if conversions and "conversion_id" in columns:
        conditions.append(f"conversion_id NOT IN ({', '.join(str(int(i)) for i in conversions)})")
    return f" WHERE {' AND '.join(conditions)}" if conditions else ""
