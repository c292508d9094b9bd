"""What every ``freight`` table must hold for a simulator store: the oracle of ``bench/lake.py`` and of
the sync and lake tests.

Built from the store directly (not over HTTP) and normalized with the same table specs as the sync.
"""

from __future__ import annotations

from typing import Any

from freight_pipeline.datetimes import DEFAULT_SERVICE_TIMEZONE, ServiceZone
from freight_pipeline.normalize.documents import document_row, shipment_ids_of
from freight_pipeline.normalize.events import normalize_events
from freight_pipeline.normalize.flatten import normalize_shipment
from freight_pipeline.normalize.legs import normalize_main_carriage
from freight_pipeline.normalize.problems import Problems, StrictProblems
from freight_pipeline.normalize.records import normalize_code_conversions, normalize_memos
from freight_pipeline.normalize.tables import FREIGHT_TABLES
from freight_pipeline.simulator.store import SimulatorStore

Rows = dict[str, list[dict[str, Any]]]


def expected_rows(store: SimulatorStore, zone: ServiceZone | None = None) -> Rows:
    """Every table's rows for ``store``, its date-times without an offset read in ``zone`` (default: the zone
    of the store's clock when it sends none, as a sync set to that zone reads them; else UTC)."""
    if zone is None:
        zone = ServiceZone(store.clock.naive_zone or DEFAULT_SERVICE_TIMEZONE)
    rows: Rows = {spec.name: [] for spec in FREIGHT_TABLES}

    def problems() -> Problems:
        """A strict sink in ``zone``: the oracle's records have no bad value."""
        return StrictProblems(zone=zone)

    def add(produced: Rows) -> None:
        for table, table_rows in produced.items():
            rows[table].extend(table_rows)

    efiles: dict[int, list[dict[str, Any]]] = {}
    for efile in store.efiles.rows():
        for shipment_id in shipment_ids_of(efile["references"] or []):
            efiles.setdefault(shipment_id, []).append(efile)
    for doc in store.reader.expected_documents():
        shipment_id = doc["id"]
        rows["shipment_documents"] += [
            document_row(shipment_id, efile, efile["references"], store.efiles.roles(efile["id"]),
                         Problems(zone=zone))
            for efile in efiles.get(shipment_id, [])
        ]
        add(normalize_shipment(doc, problems()))
        add(normalize_events(shipment_id, store.reader.get_events(shipment_id), problems()))
        if doc.get("mode_of_transport") == "AIR":
            add(normalize_main_carriage(shipment_id, store.reader.get_air_main_carriage(shipment_id), kind="air",
                                       problems=problems()))
        if doc.get("mode_of_transport") == "SEA":
            add(normalize_main_carriage(shipment_id, store.reader.get_sea_main_carriage(shipment_id), kind="sea",
                                       problems=problems()))
        add(normalize_memos(doc.get("memos") or [], {(doc.get("client"), doc.get("shipment_number")): shipment_id},
                            problems()))
    add(normalize_code_conversions(list(store.reader.code_conversion_rows()), problems()))
    return rows
