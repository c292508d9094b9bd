"""What the warehouse must hold for a simulator store: the oracle of the sync tests.

Built from the store directly (not over HTTP), normalized with the same table specs, and compared
with the warehouse with ``EXCEPT ALL`` both ways, so a missing row, an extra row and a duplicate
row all count as differences.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

import duckdb

from freight_pipeline.normalize.documents import document_row, shipment_ids_of
from freight_pipeline.normalize.events import normalize_events
from freight_pipeline.normalize.flatten import normalize_shipment, to_arrow_batch
from freight_pipeline.normalize.legs import normalize_main_carriage
from freight_pipeline.normalize.problems import Problems
from freight_pipeline.normalize.records import normalize_code_conversions, normalize_memos
from freight_pipeline.normalize.tables import FREIGHT_TABLES
from freight_pipeline.simulator.store import SimulatorStore

Rows = dict[str, list[dict[str, Any]]]


def expected_rows(store: SimulatorStore) -> Rows:
    rows: Rows = {spec.name: [] for spec in FREIGHT_TABLES}

    def add(produced: Rows) -> None:
        for table, table_rows in produced.items():
            rows[table].extend(table_rows)

    efiles: dict[int, list[dict[str, Any]]] = {}
    for efile in store.efile_rows():
        for shipment_id in shipment_ids_of(efile["references"] or []):
            efiles.setdefault(shipment_id, []).append(efile)
    for doc in store.expected_documents():
        shipment_id = doc["id"]
        rows["shipment_documents"] += [
            document_row(shipment_id, efile, efile["references"], store.get_efile_roles(efile["id"]), Problems())
            for efile in efiles.get(shipment_id, [])
        ]
        add(normalize_shipment(doc))
        add(normalize_events(shipment_id, store.get_events(shipment_id)))
        if doc.get("mode_of_transport") == "AIR":
            add(normalize_main_carriage(shipment_id, store.get_air_main_carriage(shipment_id), kind="air"))
        if doc.get("mode_of_transport") == "SEA":
            add(normalize_main_carriage(shipment_id, store.get_sea_main_carriage(shipment_id), kind="sea"))
        add(normalize_memos(doc.get("memos") or [], {(doc.get("client"), doc.get("shipment_number")): shipment_id}))
    add(normalize_code_conversions(list(store.code_conversion_rows())))
    return rows


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
    arrow = to_arrow_batch(expected_rows(store))
    found: dict[str, tuple[int, int]] = {}
    with duckdb.connect(str(database), read_only=True) as con:
        for spec in FREIGHT_TABLES:
            cols = ", ".join(f'"{c.name}"' for c in spec.columns)
            con.register("expected_rows", arrow[spec.name])
            where = _leaving_out(spec.column_names, except_shipments, except_conversions)
            actual = f"SELECT {cols} FROM {spec.schema}.{spec.name}{where}"
            expected = f"SELECT {cols} FROM expected_rows{where}"
            missing = con.execute(f"SELECT count(*) FROM ({expected} EXCEPT ALL {actual})").fetchall()[0][0]
            extra = con.execute(f"SELECT count(*) FROM ({actual} EXCEPT ALL {expected})").fetchall()[0][0]
            con.unregister("expected_rows")
            if missing or extra:
                found[spec.name] = (missing, extra)
    return found


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
