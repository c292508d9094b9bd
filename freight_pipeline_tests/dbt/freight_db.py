"""A small DuckDB database with the ``freight`` tables, for building the dbt project in tests.

Documents come from the bundled simulator (``freight_pipeline.simulator.store.SimulatorStore``)
when it exists, else from a small handmade generator below shaped as the spec describes; either
way they go through the project's normalizer and the tables are created from the table specs'
DDL, so the dbt project is tested against the real column names and types. The ``freight_history``
tables are created as the warehouse creates them, holding the rows as first versions (what a first
sync records).

Usable from the command line to get a database for a manual ``dbt build``::

    .venv/bin/python -m freight_pipeline_tests.dbt.freight_db /tmp/try/warehouse.duckdb 200
    FREIGHT_DBT_DATABASE=/tmp/try/warehouse.duckdb .venv/bin/dbt build --project-dir dbt_models \
        --profiles-dir dbt_models --target-path /tmp/try/target --log-path /tmp/try/logs

(Not ``freight.duckdb``: a file named like the schema makes ``freight.<table>`` ambiguous.)
"""

from __future__ import annotations

import datetime as dt
import importlib
import random
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from freight_pipeline.normalize.events import normalize_events
from freight_pipeline.normalize.flatten import merge_rows, normalize_shipment, to_arrow_batch
from freight_pipeline.normalize.legs import normalize_main_carriage
from freight_pipeline.normalize.records import normalize_code_conversions, normalize_memos
from freight_pipeline.normalize.tables import FREIGHT_TABLES
from freight_pipeline.warehouse.history import ensure_history
from freight_pipeline.warehouse.paths import working_db_path
from freight_pipeline_tests.normalize import samples

RUN_ID = "test-run"


@dataclass
class Documents:
    """What a sync would fetch: per shipment the document, its events and main-carriage legs."""

    source: str
    shipments: list[tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]] = field(
        default_factory=list
    )
    memos: list[dict[str, Any]] = field(default_factory=list)
    conversions: list[dict[str, Any]] = field(default_factory=list)


def simulator_documents(shipments: int, seed: int = 7) -> Documents | None:
    """Documents of the bundled simulator, or None while ``simulator/store.py`` does not exist."""
    try:
        module = importlib.import_module("freight_pipeline.simulator.store")
    except ModuleNotFoundError as exc:
        if exc.name != "freight_pipeline.simulator.store":
            raise
        return None
    store = module.SimulatorStore(shipments=shipments, seed=seed)
    docs = Documents("simulator")
    for row in store.reader.shipment_key_rows():
        shipment_id = int(row["ID"])
        docs.shipments.append(
            (
                store.reader.get_shipment(shipment_id),
                store.reader.get_events(shipment_id),
                store.reader.get_air_main_carriage(shipment_id),
                store.reader.get_sea_main_carriage(shipment_id),
            )
        )
    docs.memos = list(store.reader.memo_rows())
    docs.conversions = list(store.reader.code_conversion_rows())
    return docs


# --- handmade documents (fallback) ---------------------------------------------------------------

PORTS = {
    "SEA": [("DEHAM", "Hamburg"), ("CNSHA", "Shanghai"), ("NLRTM", "Rotterdam"), ("SGSIN", "Singapore")],
    "AIR": [("DEFRA", "Frankfurt"), ("USORD", "Chicago"), ("HKHKG", "Hong Kong"), ("AEDXB", "Dubai")],
    "RD": [("DEMUC", "Munich"), ("PLWAW", "Warsaw"), ("ITMIL", "Milan")],
    "RL": [("DEDUI", "Duisburg"), ("CNXIY", "Xi'an"), ("PLMAL", "Malaszewicze")],
}
VESSELS = ["EVER GIVEN", "MSC OSCAR", "MAERSK ESSEN"]
AIRLINES = ["Lufthansa Cargo", "Cathay Cargo", "Emirates SkyCargo"]
UTC1 = "+01:00"


def _dt(instant: dt.datetime, offset: str = UTC1) -> dict[str, Any]:
    hours = int(offset[1:3]) * (1 if offset[0] == "+" else -1)
    local = instant + dt.timedelta(hours=hours)
    return {"date": local.date().isoformat(), "time": local.time().isoformat("seconds"), "zone_offset": offset}


def _location(code: str, name: str) -> dict[str, Any]:
    return {"codes": [{"type": "UNLOC", "code": code}, {"type": "SERVICE", "code": f"S{code}"}], "name": name}


def _good(rng: random.Random, good_id: int, depth: int, dangerous: bool) -> dict[str, Any]:
    subgoods = [_good(rng, good_id * 10 + i, depth + 1, dangerous and i == 1) for i in (1, 2)] if depth < 2 else []
    return {
        "id": good_id,
        "level": depth,
        "quantity": rng.randint(1, 20),
        "weight": round(rng.uniform(10, 900), 2),
        "weight_unit": "KG",
        "volume": round(rng.uniform(0.1, 9), 2),
        "description": [f"goods line {good_id}"],
        "marks": ["N/M"],
        "hs_codes": [{"id": good_id * 7, "goodId": good_id, "hsCode": "847130"}],
        "subgoods": subgoods,
        # dangerous goods only on the deepest line, so the flag must look at every depth
        "dangerousGoods": (
            [{"id": good_id, "dangerous_good_legislation": "IMDG", "un_number": "1203"}]
            if dangerous and not subgoods
            else []
        ),
    }


def _leg(
    mode: str, leg_no: int, origin: tuple[str, str], destination: tuple[str, str], start: dt.datetime, carrier: str
) -> dict[str, Any]:
    hours = 30 if mode == "AIR" else 400
    leg: dict[str, Any] = {
        "leg_no": leg_no,
        "mot": "SEA" if mode == "SEA" else "ANY",
        "origin": {"location": _location(*origin), "estimated_datetime": _dt(start)},
        "destination": {
            "location": _location(*destination),
            "estimated_datetime": _dt(start + dt.timedelta(hours=hours)),
        },
    }
    if mode == "AIR":
        leg |= {"airline_name": carrier, "flight_no": f"XX{leg_no}00", "airline_awb_code": "020"}
    elif mode == "SEA":
        leg |= {"vessel_name": carrier, "voyage_no": f"V{leg_no}", "imo_code": "9321483"}
    return leg


def handmade_documents(shipments: int, seed: int = 7) -> Documents:
    rng = random.Random(seed)
    docs = Documents("handmade")
    base = dt.datetime(2026, 1, 5, 8, 0, tzinfo=dt.UTC)
    for i in range(1, shipments + 1):
        shipment_id = 100_000 + i
        mode = ("SEA", "AIR", "RD", "RL")[i % 4]
        stops = rng.sample(PORTS[mode], 3)
        leg_count = 2 if i % 5 == 0 else 1
        carrier = rng.choice(VESSELS if mode == "SEA" else AIRLINES)
        start = base + dt.timedelta(hours=7 * i)
        legs = [
            _leg(mode, n + 1, stops[n], stops[n + 1], start + dt.timedelta(days=20 * n), carrier)
            for n in range(leg_count)
        ]
        doc: dict[str, Any] = {
            "id": shipment_id,
            "client": "C1",
            "direction": "E" if i % 2 else "I",
            "office": ("HAM", "FRA", "MUC")[i % 3],
            "shipment_number": f"SN{i:06d}",
            "mode_of_transport": mode,
            "total_packages": rng.randint(1, 40),
            "total_gross_weight": round(rng.uniform(100, 20_000), 2),
            "total_volume": round(rng.uniform(1, 60), 2),
            "chargeableWeight": round(rng.uniform(100, 25_000), 2),
            "shipment_closed": i % 3 == 0,
            "goods": [_good(rng, i * 100 + g, 1, dangerous=(i % 7 == 0 and g == 1)) for g in (1, 2)],
            "containers": (
                [{"id": i * 10 + c, "container_number": f"MSCU{i:05d}{c}", "containerAddresses": []} for c in (1, 2)]
                if mode == "SEA"
                else []
            ),
            "pre_carriage": {"carriage_legs": [{"leg_no": 1, "mot": "ANY", "haulage_type": "TRUCK"}]},
            "main_carriage": {"carriage_legs": legs},
            "last_modified_date_time": (start + dt.timedelta(days=1))
            .astimezone(dt.timezone(dt.timedelta(hours=1)))
            .isoformat(),
            "created_date_time": start.isoformat(),
        }
        # events: planned and (mostly) actual departure/arrival; delays spread around the tolerance
        departure, arrival = start, start + dt.timedelta(hours=(30 if mode == "AIR" else 400) * leg_count)
        departure_delay = dt.timedelta(minutes=rng.randint(-30, 240))
        arrival_delay = dt.timedelta(minutes=rng.choice([-45, 0, 30, 60, 61, 180, 1440]))
        events = [
            {"event": "PICKUP", "type": "ESTIMATED", "date_time": _dt(start - dt.timedelta(days=2))},
            {
                "event": "POL_DEPARTURE",
                "type": "ESTIMATED",
                "date_time": _dt(departure),
                "location": _location(*stops[0]),
            },
            {
                "event": "POD_ARRIVAL",
                "type": "ESTIMATED",
                "date_time": _dt(arrival),
                "location": _location(*stops[leg_count]),
            },
        ]
        if i % 10 != 0:  # every tenth shipment is still under way
            events += [
                {
                    "event": "POL_DEPARTURE",
                    "type": "ACTUAL",
                    "date_time": _dt(departure + departure_delay, "+08:00"),
                    "location": _location(*stops[0]),
                },
                {
                    "event": "POD_ARRIVAL",
                    "type": "ACTUAL",
                    "date_time": _dt(arrival + arrival_delay),
                    "location": _location(*stops[leg_count]),
                },
            ]
        air = legs if mode == "AIR" else []
        sea = legs if mode == "SEA" and i % 8 == 0 else []  # the other SEA shipments use the embedded legs
        docs.shipments.append((doc, events, air, sea))
    docs.memos = [
        {"id": n, "client": "C1", "memo": f"memo {n}", "shipment_number": f"SN{n:06d}", "running_number": 1}
        for n in range(1, min(shipments, 20) + 1)
    ]
    docs.conversions = [
        {
            "id": n,
            "partner": "P1",
            "direction": "I" if n % 2 else "O",
            "code_table": "UNIT",
            "code_type": "PKG",
            "source_code": f"S{n}",
            "target_code": f"T{n}",
            "valid_from": "2025-01-01",
            "last_modified_date_time": "2026-01-01T00:00:00+01:00",
        }
        for n in range(1, 11)
    ]
    return docs


# --- database ------------------------------------------------------------------------------------

DOCUMENT_SETS: tuple[tuple[str, ...], ...] = (
    ("Commercial invoice", "Bill of lading"),
    ("Commercial invoice", "Packing list", "Packing list"),
    ("Air waybill",),
    (),
)
"""The E-File documents of the shipments in turn (descriptions): every fourth has none."""


def documents(shipments: int, seed: int = 7) -> Documents:
    return simulator_documents(shipments, seed) or handmade_documents(shipments, seed)


def normalized_tables(docs: Documents) -> dict[str, pa.Table]:
    parts = []
    for doc, events, air, sea in docs.shipments:
        shipment_id = int(doc["id"])
        parts.append(normalize_shipment(doc))
        parts.append(normalize_events(shipment_id, events))
        parts.append(normalize_main_carriage(shipment_id, air, kind="air"))
        parts.append(normalize_main_carriage(shipment_id, sea, kind="sea"))
    key_of = {(r["client"], r["shipment_number"]): r["shipment_id"] for r in merge_rows(parts)["shipments"]}
    parts.append(normalize_memos(docs.memos, key_of))
    parts.append(normalize_code_conversions(docs.conversions))
    parts.append({"shipment_documents": [row for n, (doc, *_) in enumerate(docs.shipments)
                                         for row in samples.document_rows(int(doc["id"]), DOCUMENT_SETS[n % 4])]})
    rows = merge_rows(parts)
    for spec in FREIGHT_TABLES:
        rows.setdefault(spec.name, [])
    return to_arrow_batch(rows)


def _with_audit(table: pa.Table, synced_at: dt.datetime) -> pa.Table:
    n = table.num_rows
    table = table.append_column("_synced_at", pa.array([synced_at] * n, pa.timestamp("us", tz="UTC")))
    return table.append_column("_run_id", pa.array([RUN_ID] * n, pa.string()))


def build_freight_database(path: str | Path, shipments: int = 200, seed: int = 7) -> dict[str, Any]:
    """Create ``path`` with every ``freight`` table filled and the ``freight_history`` tables holding
    them as first versions; returns the source and row counts (of the ``freight`` tables)."""
    docs = documents(shipments, seed)
    tables = normalized_tables(docs)
    synced_at = dt.datetime.now(dt.UTC)
    con = duckdb.connect(str(path))
    try:
        con.execute("create schema if not exists freight")
        counts: dict[str, int] = {}
        for spec in FREIGHT_TABLES:
            con.execute(spec.ddl())
            data = _with_audit(tables[spec.name], synced_at)
            con.register("batch", data)
            con.execute(f"insert into {spec.qualified_name} by name select * from batch")
            con.unregister("batch")
            counts[spec.name] = data.num_rows
        ensure_history(con)
    finally:
        con.close()
    return {"source": docs.source, "counts": counts}


def build_working_database(data_dir: Path, shipments: int, seed: int = 7) -> Path:
    """The working database of the data directory ``data_dir`` (where a run's dbt worker builds), made by
    :func:`build_freight_database`; its path."""
    database = working_db_path(data_dir)
    database.parent.mkdir(parents=True)
    build_freight_database(database, shipments, seed)
    return database


# --- values the source controls, and a broken pipeline guarantee ---------------------------------

UNKNOWN_MODE = "SHIP"
UNKNOWN_TYPE = "PLANNED"
UNKNOWN_CODE = "BORDER_CROSSING"
UNKNOWN_DIRECTION = "X"
UNKNOWN_CONVERSION_DIRECTION = "B"


@dataclass(frozen=True)
class UnknownValues:
    """Where ``add_unknown_values`` put values outside the spec's lists."""

    mode_shipment: int  # mode_of_transport UNKNOWN_MODE; planned and actual POD_ARRIVAL, actual POL_DEPARTURE
    extra_type_shipment: int  # its POD_ARRIVAL got an UNKNOWN_TYPE event besides ESTIMATED and ACTUAL
    only_type_shipment: int  # the one event of (only_type_shipment, only_type_code) now has UNKNOWN_TYPE
    only_type_code: str
    code_shipment: int  # got an UNKNOWN_CODE event of type ACTUAL
    direction_shipment: int  # direction UNKNOWN_DIRECTION
    conversion_id: int  # direction UNKNOWN_CONVERSION_DIRECTION


def _one(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any] | None = None) -> tuple[Any, ...]:
    row = con.execute(sql, params or []).fetchone()
    assert row is not None, sql
    return tuple(row)


def add_unknown_values(path: str | Path) -> UnknownValues:
    """Put values the service controls but the spec does not list into a database made by
    ``build_freight_database``: a mode, an event type (next to known ones, and alone), an event
    code, a shipment direction, a code conversion direction. The pipeline loads such values as sent."""
    arrived = (  # shipments in fct_transit_times and fct_on_time_performance
        "select shipment_id from freight.shipment_events where event_at is not null group by shipment_id having "
        "count(*) filter (where event = 'POD_ARRIVAL' and type = 'ESTIMATED') > 0 "
        "and count(*) filter (where event = 'POD_ARRIVAL' and type = 'ACTUAL') > 0 "
        "and count(*) filter (where event = 'POL_DEPARTURE' and type = 'ACTUAL') > 0 order by shipment_id"
    )
    with duckdb.connect(str(path)) as con:
        ids = [shipment_id for (shipment_id,) in con.execute(arrived).fetchall()]
        assert len(ids) >= 2, "the database has too few arrived shipments"
        mode_shipment, extra_type_shipment = ids[0], ids[1]
        con.execute(
            "update freight.shipments set mode_of_transport = ? where shipment_id = ?", [UNKNOWN_MODE, mode_shipment]
        )
        con.execute(
            "insert into freight.shipment_events select * replace (? as type) from freight.shipment_events "
            "where shipment_id = ? and event = 'POD_ARRIVAL' and type = 'ESTIMATED'",
            [UNKNOWN_TYPE, extra_type_shipment],
        )
        only_type_shipment, only_type_code = _one(
            con,
            "select shipment_id, event from freight.shipment_events where shipment_id not in (?, ?) "
            "group by all having count(*) = 1 order by all limit 1",
            [mode_shipment, extra_type_shipment],
        )
        con.execute(
            "update freight.shipment_events set type = ? where shipment_id = ? and event = ?",
            [UNKNOWN_TYPE, only_type_shipment, only_type_code],
        )
        (code_shipment,) = _one(con, "select max(shipment_id) from freight.shipments")
        con.execute(
            "insert into freight.shipment_events select * replace (? as event, 'ACTUAL' as type) "
            "from freight.shipment_events where shipment_id = ? order by event, type limit 1",
            [UNKNOWN_CODE, code_shipment],
        )
        (direction_shipment,) = _one(
            con, "select min(shipment_id) from freight.shipments where shipment_id > ?", [extra_type_shipment]
        )
        con.execute(
            "update freight.shipments set direction = ? where shipment_id = ?", [UNKNOWN_DIRECTION, direction_shipment]
        )
        (conversion_id,) = _one(con, "select min(conversion_id) from freight.code_conversions")
        con.execute(
            "update freight.code_conversions set direction = ? where conversion_id = ?",
            [UNKNOWN_CONVERSION_DIRECTION, conversion_id],
        )
    return UnknownValues(
        mode_shipment, extra_type_shipment, only_type_shipment, only_type_code, code_shipment, direction_shipment,
        conversion_id,
    )


ORPHAN_SHIPMENT_ID = -1


def add_orphan_goods_line(path: str | Path) -> None:
    """Break a pipeline guarantee: a goods line of a shipment that does not exist (the sync writes
    goods only with their shipment, so ``relationships`` on ``stg_shipment_goods`` is an error)."""
    with duckdb.connect(str(path)) as con:
        con.execute(
            "insert into freight.shipment_goods (shipment_id, good_path, depth, position, _synced_at, _run_id) "
            "values (?, '1', 1, 1, now(), ?)",
            [ORPHAN_SHIPMENT_ID, RUN_ID],
        )
        record_change(con, ORPHAN_SHIPMENT_ID)


def record_change(con: duckdb.DuckDBPyConnection, shipment_id: int) -> None:
    """What the sync records with every shipment it writes (when the database has the table): the
    incremental marts rebuild it, and a build is due."""
    if con.execute("select count(*) from duckdb_tables() where schema_name = 'freight_meta' "
                   "and table_name = 'changed_shipments'").fetchone() == (1,):
        con.execute("insert or replace into freight_meta.changed_shipments values (?, ?, now())", [shipment_id, RUN_ID])


def iter_table_names() -> Iterator[str]:
    return (spec.name for spec in FREIGHT_TABLES)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: python -m freight_pipeline_tests.dbt.freight_db <path/warehouse.duckdb> [shipments]")
    target = Path(sys.argv[1])
    target.parent.mkdir(parents=True, exist_ok=True)
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    print(build_freight_database(target, n))
