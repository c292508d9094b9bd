"""EDI code conversion records (assumption A14): an EDI partner's code <-> the internal code."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from freight_pipeline.simulator.data_format import TAG_STORE, rng_for
from freight_pipeline.simulator.store_api import CODE_CONVERSION_DIRECTIONS

# code table -> (code type, [(partner code, internal code, description)])
_TABLES: dict[str, tuple[str, tuple[tuple[str, str, str], ...]]] = {
    "PACKAGING": ("UNECE_REC21", (
        ("PX", "PLT", "Pallet"), ("CT", "CTN", "Carton"), ("CR", "CRT", "Crate"), ("CS", "CS", "Case"),
        ("BX", "BOX", "Box"), ("BG", "BAG", "Bag"), ("DR", "DRM", "Drum"), ("WW", "IBC", "Intermediate bulk container"),
    )),
    "CONTAINER_TYPE": ("ISO6346", (
        ("22G1", "20DC", "20' dry container"), ("42G1", "40DC", "40' dry container"),
        ("45G1", "40HC", "40' high cube"), ("22R1", "20RF", "20' reefer"), ("45R1", "40RH", "40' reefer high cube"),
        ("22U1", "20OT", "20' open top"), ("42P1", "40FR", "40' flat rack"),
    )),
    "EVENT": ("X12_315", (
        ("AE", "LOADING_END", "Loaded on vessel"), ("VD", "POL_DEPARTURE", "Vessel departure"),
        ("VA", "POD_ARRIVAL", "Vessel arrival"), ("CT", "CUSTOMS_RELEASE", "Customs released"),
        ("OA", "GATE_OUT", "Out-gate"), ("I", "POL_ARRIVAL", "In-gate"), ("D", "DELIVERY_DATE", "Delivered"),
        ("AL", "LOADING_START", "Loaded on rail"), ("TA", "TRANSSHIPMENT_ARRIVAL", "Transshipment arrival"),
        ("TD", "TRANSSHIPMENT_DEPARTURE", "Transshipment departure"),
    )),
    "INCOTERM": ("INCOTERMS2020", (
        ("EXW", "EXW", "Ex Works"), ("FCA", "FCA", "Free Carrier"), ("FOB", "FOB", "Free On Board"),
        ("CFR", "CFR", "Cost and Freight"), ("CIF", "CIF", "Cost, Insurance and Freight"),
        ("DAP", "DAP", "Delivered at Place"), ("DDP", "DDP", "Delivered Duty Paid"),
        ("DAT", "DPU", "Delivered (legacy DAT)"),
    )),
    "UNIT": ("UNECE_REC20", (
        ("KGM", "KG", "Kilogram"), ("LBR", "LB", "Pound"), ("MTQ", "M3", "Cubic metre"), ("CMT", "CM", "Centimetre"),
        ("MTR", "M", "Metre"), ("TNE", "T", "Tonne"),
    )),
    "LOCATION": ("PARTNER_LOCATION", (
        ("HAM", "DEHAM", "Hamburg"), ("BRV", "DEBRV", "Bremerhaven"), ("RTM", "NLRTM", "Rotterdam"),
        ("ANR", "BEANR", "Antwerp"), ("SHA", "CNSHA", "Shanghai"), ("NGB", "CNNGB", "Ningbo"),
        ("SIN", "SGSIN", "Singapore"), ("PUS", "KRPUS", "Busan"), ("NYC", "USNYC", "New York"),
        ("FRA", "DEFRA", "Frankfurt am Main"), ("MUC", "DEMUC", "Munich"), ("PVG", "CNSHA", "Shanghai Pudong"),
    )),
    "CURRENCY": ("ISO4217", (
        ("EUR", "EUR", "Euro"), ("USD", "USD", "US dollar"), ("CNY", "CNY", "Renminbi"), ("RMB", "CNY", "Renminbi"),
        ("CHF", "CHF", "Swiss franc"), ("GBP", "GBP", "Pound sterling"),
    )),
}
# partner -> tables it exchanges
_PARTNERS: dict[str, tuple[str, ...]] = {
    "MAERSK": ("PACKAGING", "CONTAINER_TYPE", "EVENT", "LOCATION"),
    "HAPAGLLOYD": ("CONTAINER_TYPE", "EVENT", "UNIT"),
    "INTTRA": ("PACKAGING", "CONTAINER_TYPE", "EVENT", "INCOTERM", "UNIT"),
    "CARGOWISE": ("PACKAGING", "INCOTERM", "UNIT", "CURRENCY", "LOCATION"),
    "DAKOSY": ("PACKAGING", "CONTAINER_TYPE", "LOCATION"),
    "TRAXON": ("UNIT", "LOCATION", "CURRENCY"),
    "SAP_CUSTOMER_4711": ("PACKAGING", "INCOTERM", "UNIT", "CURRENCY"),
}


def build_code_conversions(seed: int, before_epoch: int, iso: Callable[[int], str]) -> list[dict[str, Any]]:
    """About 200-400 records, ordered by id (ids ascending with small gaps)."""
    rng = rng_for(seed, TAG_STORE, 7)
    records: list[dict[str, Any]] = []
    next_id = 1
    for partner, tables in _PARTNERS.items():
        for table in tables:
            code_type, pairs = _TABLES[table]
            for partner_code, internal, description in pairs:
                for direction in CODE_CONVERSION_DIRECTIONS:
                    if rng.random() < 0.12:
                        continue  # not every mapping is maintained in both directions
                    source, target = (partner_code, internal) if direction == "I" else (internal, partner_code)
                    changed = before_epoch - rng.randint(1, 900) * 86400 - rng.randint(0, 86399)
                    valid_from = dt.date(2019, 1, 1) + dt.timedelta(days=rng.randint(0, 2000))
                    records.append({
                        "id": next_id,
                        "partner": partner,
                        "direction": direction,
                        "code_table": table,
                        "code_type": code_type,
                        "source_code": source,
                        "target_code": target,
                        "description": description if rng.random() < 0.9 else None,
                        "valid_from": valid_from.isoformat(),
                        "last_modified_date_time": iso(changed),
                    })
                    next_id += rng.choice((1, 1, 1, 2))
    return records
