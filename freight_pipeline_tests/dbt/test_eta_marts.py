"""The ETA marts (``fct_eta_accuracy``, ``fct_eta_accuracy_monthly``, ``fct_estimate_revisions``) give
hand-computed figures from versions written into ``freight_history`` by hand.

A real ``dbt build`` (dbt-duckdb) on a small DuckDB file: the ``freight`` tables from the table
specs with four shipments (their modes, lanes and carriers), the ``freight_history`` tables from
theirs holding the versions below (of five shipments, one deleted at the service), designed so that
every error, share and revision count is worked out in the comments. Then one version more, logged
as a changed shipment, and an incremental build that must give what a full rebuild gives.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pytest

from freight_pipeline.normalize.tables import FREIGHT_TABLES
from freight_pipeline.warehouse import meta
from freight_pipeline.warehouse.history import HISTORY_TABLES
from freight_pipeline_tests.dbt.dbt_cli import run_dbt_in_worker

RUN = "test-run"
HORIZONS = (14, 7, 3, 1)  # dbt_project.yml's default of eta_horizons_days


def utc(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC)


# --- versions, written by hand --------------------------------------------------------------------


@dataclass(frozen=True)
class Version:
    """One version of an event (``event``/``type``) or of a leg (``mode``/``position``)."""

    shipment_id: int
    valid_from: str
    valid_to: str | None
    at: str | None = None  # the event's event_at, or the leg's destination_estimated_at
    actual: str | None = None  # the leg's destination_actual_at
    event: str | None = None
    type: str | None = None
    mode: str | None = None
    position: int | None = None
    deleted: bool = False
    unloc: str | None = None

    def row(self) -> dict[str, Any]:
        version = {
            "shipment_id": self.shipment_id,
            "valid_from": utc(self.valid_from),
            "valid_to": utc(self.valid_to) if self.valid_to else None,
            "deleted": self.deleted,
            "run_id": RUN,
            "recorded_at": utc(self.valid_from) + dt.timedelta(minutes=5),
        }
        at = None if self.deleted or self.at is None else utc(self.at)
        if self.event is not None:
            return {**version, "event": self.event, "type": self.type, "event_at": at,
                    "unloc": None if self.deleted else self.unloc}
        actual = None if self.deleted or self.actual is None else utc(self.actual)
        return {**version, "mode": self.mode, "position": self.position, "destination_estimated_at": at,
                "destination_actual_at": actual}


def estimated(shipment_id: int, valid_from: str, valid_to: str | None, at: str | None, *, event: str = "POD_ARRIVAL",
              deleted: bool = False, unloc: str | None = None) -> Version:
    return Version(shipment_id, valid_from, valid_to, at, event=event, type="ESTIMATED", deleted=deleted, unloc=unloc)


def actual(shipment_id: int, valid_from: str, valid_to: str | None, at: str | None, *, event: str = "POD_ARRIVAL",
           deleted: bool = False) -> Version:
    return Version(shipment_id, valid_from, valid_to, at, event=event, type="ACTUAL", deleted=deleted)


def leg(shipment_id: int, position: int, valid_from: str, valid_to: str | None, estimate: str | None,
        actual_at: str | None = None) -> Version:
    return Version(shipment_id, valid_from, valid_to, estimate, actual=actual_at, mode="AIR", position=position)


SEA, AIR, SHIP = 101, 103, 105  # shipment ids (102: SEA too, 104: deleted at the service)

VERSIONS = (
    # 101 SEA CNSHA-NLRTM "EVER GIVEN": arrival A = 03-20 12:00, four estimate versions
    estimated(101, "2026-03-01 00:00", "2026-03-10 00:00", "2026-03-18 12:00"),  # -48 h
    estimated(101, "2026-03-10 00:00", "2026-03-15 06:00", "2026-03-21 00:00"),  # +12 h
    # the location changed, the estimate did not: a version, no revision
    estimated(101, "2026-03-15 06:00", "2026-03-17 12:00", "2026-03-21 00:00", unloc="NLRTM"),
    estimated(101, "2026-03-17 12:00", None, "2026-03-20 10:00"),  # -2 h, valid from exactly A - 3 d
    actual(101, "2026-03-20 13:00", None, "2026-03-20 12:00"),
    # 102 SEA, same lane and carrier: arrival A = 03-25 00:00; the estimate vanished at 03-23
    estimated(102, "2026-03-12 00:00", "2026-03-20 00:00", "2026-03-24 00:00"),  # -24 h: within 24 h, just
    estimated(102, "2026-03-20 00:00", "2026-03-23 00:00", "2026-03-26 06:00"),  # +30 h
    estimated(102, "2026-03-23 00:00", None, None, deleted=True),
    actual(102, "2026-03-25 01:00", None, "2026-03-25 00:00"),
    # 102's delivery: estimated twice, not delivered yet (no actual: revisions only)
    estimated(102, "2026-03-12 00:00", "2026-03-24 00:00", "2026-03-27 00:00", event="DELIVERY_DATE"),
    estimated(102, "2026-03-24 00:00", None, "2026-03-28 00:00", event="DELIVERY_DATE"),
    # 103 AIR DEFRA-USORD "Lufthansa Cargo": two legs of the air endpoint, and an arrival never estimated
    leg(103, 1, "2026-04-01 00:00", "2026-04-05 00:00", "2026-04-10 08:00"),  # -1.5 h
    leg(103, 1, "2026-04-05 00:00", "2026-04-10 09:00", "2026-04-10 12:00"),  # +2.5 h
    leg(103, 1, "2026-04-10 09:00", None, "2026-04-10 12:00", "2026-04-10 09:30"),  # A = 04-10 09:30
    leg(103, 2, "2026-04-01 00:00", "2026-04-12 04:00", "2026-04-12 00:00"),  # -3 h
    leg(103, 2, "2026-04-12 04:00", None, "2026-04-12 00:00", "2026-04-12 03:00"),  # A = 04-12 03:00
    actual(103, "2026-04-12 10:00", None, "2026-04-12 09:00"),
    # 104: estimated and arrived, then deleted at the service (03-06): no current actual
    estimated(104, "2026-03-01 00:00", "2026-03-06 00:00", "2026-03-05 00:00"),
    estimated(104, "2026-03-06 00:00", None, None, deleted=True),
    actual(104, "2026-03-05 02:00", "2026-03-06 00:00", "2026-03-05 01:00"),
    actual(104, "2026-03-06 00:00", None, None, deleted=True),
    # 105 of a mode the spec does not list (SHIP), no legs: a date-only estimate (no instant) first
    estimated(105, "2026-03-10 00:00", "2026-03-20 00:00", None),
    estimated(105, "2026-03-20 00:00", None, "2026-04-02 00:00"),  # -11 h against the corrected actual
    actual(105, "2026-04-02 12:00", "2026-04-03 00:00", "2026-04-02 10:00"),
    actual(105, "2026-04-03 00:00", None, "2026-04-02 11:00"),  # the actual corrected: A = 04-02 11:00
    # 106 AIR HKHKG-DEFRA, created 04-20 under an id the service reused (its data went back): before, another
    # shipment of the id, whose arrival estimate is replaced by this one's with no deletion between, and whose leg
    # was deleted with it (04-16): neither is this shipment's estimate, in force before it existed or a revision
    estimated(106, "2026-04-01 00:00", "2026-04-21 00:00", "2026-04-15 00:00"),
    estimated(106, "2026-04-21 00:00", None, "2026-04-30 00:00"),  # -6 h
    actual(106, "2026-05-01 00:00", None, "2026-04-30 06:00"),
    leg(106, 1, "2026-04-01 00:00", "2026-04-16 00:00", "2026-04-14 00:00"),
    Version(106, "2026-04-16 00:00", "2026-04-21 00:00", mode="AIR", position=1, deleted=True),
    leg(106, 1, "2026-04-21 00:00", None, "2026-04-29 12:00", "2026-04-29 18:00"),  # -6 h
)

SHIPMENTS = {101: "SEA", 102: "SEA", 103: "AIR", 105: "SHIP", 106: "AIR"}  # 104 is gone from freight.shipments
CREATED = {106: "2026-04-20 00:00"}  # the others' created_at unknown (null): every version theirs
SEA_LEGS = ((101, 1, "CNSHA", "NLRTM", "EVER GIVEN"), (102, 1, "CNSHA", "NLRTM", "EVER GIVEN"))
AIR_LEGS = ((103, 1, "DEFRA", "AEDXB", "Lufthansa Cargo"), (103, 2, "AEDXB", "USORD", None),
            (106, 1, "HKHKG", "DEFRA", "Cathay Cargo"))


def _insert(con: duckdb.DuckDBPyConnection, table: str, rows: list[dict[str, Any]]) -> None:
    for row in rows:
        columns = ", ".join(row)
        con.execute(f"INSERT INTO {table} ({columns}) VALUES ({', '.join('?' for _ in row)})", list(row.values()))


def build_database(path: Path) -> None:
    synced = {"_synced_at": dt.datetime.now(dt.UTC), "_run_id": RUN}
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE SCHEMA freight")
        for spec in FREIGHT_TABLES:
            con.execute(spec.ddl())
        _insert(con, "freight.shipments", [{"shipment_id": i, "client": "C1", "shipment_number": f"SN{i}",
                                            "mode_of_transport": mode, "created_at": utc(CREATED[i]) if i in CREATED
                                            else None, **synced} for i, mode in SHIPMENTS.items()])
        for table, legs, carrier in (("sea_main_carriage_legs", SEA_LEGS, "vessel_name"),
                                     ("air_main_carriage_legs", AIR_LEGS, "airline_name")):
            _insert(con, f"freight.{table}", [
                {"shipment_id": s, "position": p, "leg_no": p, "origin_unloc": o, "destination_unloc": d,
                 carrier: name, **synced} for s, p, o, d, name in legs])
        for spec in HISTORY_TABLES:  # the tables as the warehouse declares them; their rows by hand
            con.execute(f"CREATE SCHEMA IF NOT EXISTS {spec.schema}")
            con.execute(spec.ddl())
        _insert(con, "freight_history.event_versions", [v.row() for v in VERSIONS if v.event])
        _insert(con, "freight_history.leg_versions", [v.row() for v in VERSIONS if v.mode])


@dataclass
class Built:
    database: Path
    target: Path

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        with duckdb.connect(str(self.database), read_only=True) as con:
            con.execute("SET TimeZone = 'UTC'")
            return con.execute(sql).fetchall()

    def results(self) -> dict[str, str]:
        run_results = json.loads((self.target / "run_results.json").read_text())
        return {r["unique_id"]: r["status"] for r in run_results["results"]}


def _build(tmp: Path, database: Path, *args: str) -> Built:
    result, target = run_dbt_in_worker(["build", "--exclude-resource-type", "unit_test", *args], tmp, database)
    assert result.returncode == 0, result.stdout[-3000:]
    return Built(database, target)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    tmp = tmp_path_factory.mktemp("eta_marts")
    database = tmp / "warehouse.duckdb"
    build_database(database)
    return _build(tmp, database)


def test_the_build_passes_every_test(built: Built) -> None:
    statuses = built.results()
    # only the mode the spec does not list (shipment 105) warns
    assert {uid.split(".")[2]: status for uid, status in statuses.items() if status not in ("success", "pass")} == {
        "accepted_values_stg_shipments_mode_of_transport___freight_modes_of_transport_": "warn",
        "accepted_values_fct_shipments_mode_of_transport___freight_modes_of_transport_": "warn",
    }
    for model in ("fct_eta_accuracy", "fct_eta_accuracy_monthly", "fct_estimate_revisions"):
        assert statuses[f"model.freight_marts.{model}"] == "success"


# (shipment, milestone, leg position) -> {horizon: error_hours, None when not scored}
EXPECTED_ERRORS: dict[tuple[int, str, int | None], dict[int, float | None]] = {
    # A = 03-20 12:00. 14 d: A - 14 d = 03-06 12:00, in 03-01..03-10: 03-18 12:00 - A = -48 h.
    # 7 d: 03-13 12:00, in 03-10..03-15 06:00: 03-21 00:00 - A = +12 h. 3 d: 03-17 12:00 = the end of
    # the third version (excluded) and the start of the fourth (included): 03-20 10:00 - A = -2 h; 1 d too.
    (101, "arrival", None): {14: -48.0, 7: 12.0, 3: -2.0, 1: -2.0},
    # A = 03-25 00:00. 14 d: 03-11 00:00, before the first version: not scored. 7 d: 03-18 00:00:
    # 03-24 00:00 - A = -24 h. 3 d: 03-22 00:00: 03-26 06:00 - A = +30 h. 1 d: 03-24 00:00, the
    # deleted version: not scored.
    (102, "arrival", None): {14: None, 7: -24.0, 3: 30.0, 1: None},
    # A = 04-10 09:30. 14 d: 03-27 09:30, before 04-01: not scored. 7 d: 04-03 09:30: 08:00 - 09:30 =
    # -1.5 h. 3 d: 04-07 09:30 and 1 d: 04-09 09:30, in 04-05..04-10 09:00: 12:00 - 09:30 = +2.5 h.
    (103, "leg_arrival", 1): {14: None, 7: -1.5, 3: 2.5, 1: 2.5},
    # A = 04-12 03:00. 14 d: 03-29 03:00: not scored. 7, 3, 1 d: the first version: 00:00 - 03:00 = -3 h.
    (103, "leg_arrival", 2): {14: None, 7: -3.0, 3: -3.0, 1: -3.0},
    # arrived (04-12 09:00) without ever being estimated: four rows, none scored
    (103, "arrival", None): {14: None, 7: None, 3: None, 1: None},
    # A = 04-02 11:00 (the corrected actual). 14 d: 03-19 11:00, the version without an instant: not
    # scored. 7, 3, 1 d: 04-02 00:00 - 11:00 = -11 h.
    (105, "arrival", None): {14: None, 7: -11.0, 3: -11.0, 1: -11.0},
    # A = 04-30 06:00 (arrival) and 04-29 18:00 (its leg): 14 d falls before 04-20, when the shipment was created
    # (the earlier shipment's estimates of 04-15 and 04-14 were in force then: not this one's); 7, 3, 1 d: -6 h
    (106, "arrival", None): {14: None, 7: -6.0, 3: -6.0, 1: -6.0},
    (106, "leg_arrival", 1): {14: None, 7: -6.0, 3: -6.0, 1: -6.0},
    # 104 was deleted (its actual too), 102's delivery has not happened: no rows
}


def test_eta_accuracy_scores_the_estimate_in_force_at_each_horizon(built: Built) -> None:
    rows = built.query(
        "SELECT shipment_id, milestone, leg_position, horizon_days, error_hours, abs_error_hours, is_scored, "
        "estimated_at IS NULL, horizon_at = actual_at - to_hours(24 * horizon_days) FROM analytics.fct_eta_accuracy"
    )
    got: dict[tuple[int, str, int | None], dict[int, float | None]] = {}
    for shipment_id, milestone, position, horizon, error, absolute, scored, no_estimate, horizon_ok in rows:
        got.setdefault((shipment_id, milestone, position), {})[horizon] = error
        assert absolute == (None if error is None else abs(error))
        assert scored is (error is not None) and no_estimate is (not scored) and horizon_ok
    assert got == EXPECTED_ERRORS


def test_eta_accuracy_carries_the_shipment_and_the_estimate_version(built: Built) -> None:
    rows = built.query(
        "SELECT DISTINCT shipment_id, mode_of_transport, lane, carrier_name, is_known_mode_of_transport "
        "FROM analytics.fct_eta_accuracy ORDER BY shipment_id"
    )
    assert rows == [
        (101, "SEA", "CNSHA-NLRTM", "EVER GIVEN", True),
        (102, "SEA", "CNSHA-NLRTM", "EVER GIVEN", True),
        (103, "AIR", "DEFRA-USORD", "Lufthansa Cargo", True),
        (105, "SHIP", None, None, False),
        (106, "AIR", "HKHKG-DEFRA", "Cathay Cargo", True),
    ]
    # 101 at 3 days: the version that began at 03-17 12:00, the horizon itself
    assert built.query(
        "SELECT actual_at, horizon_at, estimated_at, estimate_valid_from, event_code, leg_mode "
        "FROM analytics.fct_eta_accuracy WHERE shipment_id = 101 AND horizon_days = 3"
    ) == [(utc("2026-03-20 12:00"), utc("2026-03-17 12:00"), utc("2026-03-20 10:00"), utc("2026-03-17 12:00"),
           "POD_ARRIVAL", None)]
    assert built.query(
        "SELECT DISTINCT event_code, leg_mode FROM analytics.fct_eta_accuracy WHERE milestone = 'leg_arrival'"
    ) == [(None, "AIR")]


# (month, milestone, horizon, mode, lane, carrier) -> (happened, scored, shipments scored, within 24 h,
# share, mean absolute error, mean error)
EXPECTED_MONTHLY: dict[tuple[Any, ...], tuple[Any, ...]] = {
    # March, SEA: 101 and 102. 14 d: only 101 (-48): 48 off, not within.
    ("2026-03-01", "arrival", 14, "SEA", "CNSHA-NLRTM", "EVER GIVEN"): (2, 1, 1, 0, 0.0, 48.0, -48.0),
    # 7 d: +12 and -24 (exactly 24 h counts as within): |12| + |-24| = 36 / 2 = 18; (12 - 24) / 2 = -6
    ("2026-03-01", "arrival", 7, "SEA", "CNSHA-NLRTM", "EVER GIVEN"): (2, 2, 2, 2, 1.0, 18.0, -6.0),
    # 3 d: -2 and +30: within 1 of 2; (2 + 30) / 2 = 16; (-2 + 30) / 2 = 14
    ("2026-03-01", "arrival", 3, "SEA", "CNSHA-NLRTM", "EVER GIVEN"): (2, 2, 2, 1, 0.5, 16.0, 14.0),
    # 1 d: 101 only (-2), 102's estimate had vanished
    ("2026-03-01", "arrival", 1, "SEA", "CNSHA-NLRTM", "EVER GIVEN"): (2, 1, 1, 1, 1.0, 2.0, -2.0),
    # April, AIR, legs of 103: 14 d none scored; 7 d: -1.5 and -3: 4.5 / 2 = 2.25, one shipment
    ("2026-04-01", "leg_arrival", 14, "AIR", "DEFRA-USORD", "Lufthansa Cargo"): (2, 0, 0, 0, None, None, None),
    ("2026-04-01", "leg_arrival", 7, "AIR", "DEFRA-USORD", "Lufthansa Cargo"): (2, 2, 1, 2, 1.0, 2.25, -2.25),
    # 3 d and 1 d: +2.5 and -3: 5.5 / 2 = 2.75; -0.5 / 2 = -0.25
    ("2026-04-01", "leg_arrival", 3, "AIR", "DEFRA-USORD", "Lufthansa Cargo"): (2, 2, 1, 2, 1.0, 2.75, -0.25),
    ("2026-04-01", "leg_arrival", 1, "AIR", "DEFRA-USORD", "Lufthansa Cargo"): (2, 2, 1, 2, 1.0, 2.75, -0.25),
    # 103's arrival: happened, never scored
    **{("2026-04-01", "arrival", h, "AIR", "DEFRA-USORD", "Lufthansa Cargo"): (1, 0, 0, 0, None, None, None)
       for h in HORIZONS},
    # 105 (SHIP) in the UNKNOWN bucket: -11 h from 7 days on
    ("2026-04-01", "arrival", 14, "UNKNOWN", None, None): (1, 0, 0, 0, None, None, None),
    **{("2026-04-01", "arrival", h, "UNKNOWN", None, None): (1, 1, 1, 1, 1.0, 11.0, -11.0) for h in (7, 3, 1)},
    # 106: -6 h from 7 days on, its arrival and its leg's
    **{("2026-04-01", milestone, 14, "AIR", "HKHKG-DEFRA", "Cathay Cargo"): (1, 0, 0, 0, None, None, None)
       for milestone in ("arrival", "leg_arrival")},
    **{("2026-04-01", milestone, h, "AIR", "HKHKG-DEFRA", "Cathay Cargo"): (1, 1, 1, 1, 1.0, 6.0, -6.0)
       for milestone in ("arrival", "leg_arrival") for h in (7, 3, 1)},
}


def test_monthly_accuracy_by_month_milestone_horizon_mode_lane_and_carrier(built: Built) -> None:
    rows = built.query(
        "SELECT strftime(actual_month, '%Y-%m-%d'), milestone, horizon_days, mode_of_transport, lane, carrier_name, "
        "milestones_happened, milestones_scored, shipments_scored, milestones_within_24h, within_24h_share, "
        "mean_abs_error_hours, mean_error_hours FROM analytics.fct_eta_accuracy_monthly"
    )
    def numbers(values: tuple[Any, ...]) -> tuple[float | None, ...]:
        return tuple(None if v is None else float(v) for v in values)

    assert {tuple(row[:6]): numbers(row[6:]) for row in rows} == {
        key: numbers(value) for key, value in EXPECTED_MONTHLY.items()
    }
    assert built.query(
        "SELECT DISTINCT unknown_modes_of_transport FROM analytics.fct_eta_accuracy_monthly "
        "WHERE mode_of_transport = 'UNKNOWN'"
    ) == [("SHIP",)]


# (shipment, milestone, leg position) -> (estimate versions, revisions, first, last, slip hours, last revised,
# actual)
EXPECTED_REVISIONS: dict[tuple[int, str, int | None], tuple[Any, ...]] = {
    # 03-18 12:00 -> 03-21 00:00 -> (same, the location moved) -> 03-20 10:00: two moves;
    # slip = 03-20 10:00 - 03-18 12:00 = 46 h; last moved at 03-17 12:00
    (101, "arrival", None): (4, 1 + 1, "2026-03-18 12:00", "2026-03-20 10:00", 46.0, "2026-03-17 12:00",
                             "2026-03-20 12:00"),
    # 03-24 00:00 -> 03-26 06:00, then deleted (no estimate, left out): one move, +54 h
    (102, "arrival", None): (2, 1, "2026-03-24 00:00", "2026-03-26 06:00", 54.0, "2026-03-20 00:00",
                             "2026-03-25 00:00"),
    # 03-27 -> 03-28: one move, +24 h, not delivered
    (102, "delivery", None): (2, 1, "2026-03-27 00:00", "2026-03-28 00:00", 24.0, "2026-03-24 00:00", None),
    # 08:00 -> 12:00 -> 12:00 (the actual came, the estimate stayed): one move, +4 h
    (103, "leg_arrival", 1): (3, 1, "2026-04-10 08:00", "2026-04-10 12:00", 4.0, "2026-04-05 00:00",
                              "2026-04-10 09:30"),
    (103, "leg_arrival", 2): (2, 0, "2026-04-12 00:00", "2026-04-12 00:00", 0.0, None, "2026-04-12 03:00"),
    # the version without an instant is no estimate: one estimate, no move
    (105, "arrival", None): (1, 0, "2026-04-02 00:00", "2026-04-02 00:00", 0.0, None, "2026-04-02 11:00"),
    # the earlier shipment's estimates (04-15, and 04-14 of its leg) are no version of 106's: one estimate each
    (106, "arrival", None): (1, 0, "2026-04-30 00:00", "2026-04-30 00:00", 0.0, None, "2026-04-30 06:00"),
    (106, "leg_arrival", 1): (1, 0, "2026-04-29 12:00", "2026-04-29 12:00", 0.0, None, "2026-04-29 18:00"),
    # 103's arrival was never estimated: no row; 104 was deleted at the service: no row (as in every mart)
}


def test_estimate_revisions_count_the_moves_and_the_slip(built: Built) -> None:
    rows = built.query(
        "SELECT shipment_id, milestone, leg_position, estimate_versions, revisions, first_estimated_at, "
        "last_estimated_at, total_slip_hours, last_revised_at, actual_at FROM analytics.fct_estimate_revisions"
    )
    got = {tuple(row[:3]): tuple(row[3:]) for row in rows}

    def instant(text: str | None) -> dt.datetime | None:
        return None if text is None else utc(text)

    assert got == {
        key: (versions, revisions, utc(first), utc(last), slip, instant(revised), instant(arrived))
        for key, (versions, revisions, first, last, slip, revised, arrived) in EXPECTED_REVISIONS.items()
    }
    assert built.query(
        "SELECT shipment_id, mode_of_transport, lane, carrier_name FROM analytics.fct_estimate_revisions "
        "WHERE milestone = 'arrival' ORDER BY shipment_id"
    ) == [
        (101, "SEA", "CNSHA-NLRTM", "EVER GIVEN"), (102, "SEA", "CNSHA-NLRTM", "EVER GIVEN"), (105, "SHIP", None, None),
        (106, "AIR", "HKHKG-DEFRA", "Cathay Cargo"),
    ]
    # 104's versions are still in the history
    assert built.query("SELECT count(*) FROM freight_history.event_versions WHERE shipment_id = 104") == [(4,)]


# --- incremental ---------------------------------------------------------------------------------

DELIVERED = (
    # 102 is delivered at 03-28 06:00 (the version of 03-24 closes at 03-28 07:00, when the actual came)
    actual(102, "2026-03-28 07:00", None, "2026-03-28 06:00", event="DELIVERY_DATE"),
)


def _marts(database: Path) -> dict[str, list[tuple[Any, ...]]]:
    with duckdb.connect(str(database), read_only=True) as con:
        return {mart: sorted(con.execute(f"SELECT * FROM analytics.{mart}").fetchall(), key=repr)
                for mart in ("fct_eta_accuracy", "fct_eta_accuracy_monthly", "fct_estimate_revisions")}


def test_an_incremental_build_rebuilds_the_changed_shipment_as_a_full_build_would(
    built: Built, tmp_path: Path
) -> None:
    database = tmp_path / "warehouse.duckdb"
    shutil.copy(built.database, database)
    before = _marts(database)
    with duckdb.connect(str(database)) as con:
        con.execute("CREATE SCHEMA freight_meta")
        con.execute(meta.CHANGED_SHIPMENTS.ddl())
        # what the sync writes with 102's new version: the version closed and the new one, the change logged
        con.execute("UPDATE freight_history.event_versions SET valid_to = ? WHERE shipment_id = 102 "
                    "AND event = 'DELIVERY_DATE' AND valid_to IS NULL", [utc("2026-03-28 07:00")])
        _insert(con, "freight_history.event_versions", [v.row() for v in DELIVERED])
        con.execute("INSERT INTO freight_meta.changed_shipments VALUES (102, ?, now())", [RUN])
    incremental = _build(tmp_path / "incremental", database)
    after = _marts(database)
    # the delivery is scored: A = 03-28 06:00; 14 d (03-14 06:00) and 7 d (03-21 06:00): 03-27 00:00,
    # -30 h; 3 d (03-25 06:00) and 1 d (03-27 06:00): 03-28 00:00, -6 h
    assert incremental.query(
        "SELECT horizon_days, error_hours FROM analytics.fct_eta_accuracy WHERE milestone = 'delivery' "
        "ORDER BY horizon_days"
    ) == [(1, -6.0), (3, -6.0), (7, -30.0), (14, -30.0)]
    assert incremental.query(
        "SELECT revisions, actual_at FROM analytics.fct_estimate_revisions WHERE milestone = 'delivery'"
    ) == [(1, utc("2026-03-28 06:00"))]
    # the other shipments' rows are those of the first build
    for mart in ("fct_eta_accuracy", "fct_estimate_revisions"):
        assert [r for r in after[mart] if r[0] != 102] == [r for r in before[mart] if r[0] != 102], mart

    full = tmp_path / "full.duckdb"
    shutil.copy(database, full)
    _build(tmp_path / "full", full, "--full-refresh")
    assert _marts(full) == after
