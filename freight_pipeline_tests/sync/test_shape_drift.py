"""The service changes release between two syncs (over HTTP, the simulator's ``2026.2``): the first sync
after it reports the fields that vanished and the new ones with their counts, publishes everything else
exactly, and a rename the spec names (``house_reference``, then ``house_bill_number``) keeps its column
filled. With the spec as it was before that one line, the rename is reported as such."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from bench.before_the_fix import mapping_before_the_fix
from bench.expected_rows import expected_rows
from freight_pipeline.checks.warehouse import evaluate_checks, shape_check
from freight_pipeline.commands.report import read_report
from freight_pipeline.commands.status import render_status
from freight_pipeline.lake.backend import storage_from_env
from freight_pipeline.normalize import flatten
from freight_pipeline.normalize.tables import FREIGHT_TABLES
from freight_pipeline.simulator.releases import NESTED, NEXT
from freight_pipeline.simulator.server import RunningSimulator, running_simulator
from freight_pipeline.sync import drift
from freight_pipeline.sync.code_conversions import STREAM as CODE_CONVERSIONS
from freight_pipeline.sync.parts import AIR_LEGS, DOCUMENT, EVENTS, MEMOS, SEA_LEGS
from freight_pipeline.sync.shipments import STREAM as SHIPMENTS
from freight_pipeline_tests.sync.conftest import SMALL_SHIPMENTS, corrupt, query, syncer, work_db
from freight_pipeline_tests.sync.expected import rows_differences

CHANGED = 12
LOCATION_COLUMNS = ("location_name", "service_code", "unloc", "iata", "foreign_code", "postal_code", "un_country",
                    "latitude", "longitude", "location_codes")


@pytest.fixture
def release_sim() -> Iterator[RunningSimulator]:
    with running_simulator(shipments=SMALL_SHIPMENTS, seed=7) as running:
        yield running


def _changes(result: Any) -> dict[tuple[str, str], dict[str, Any]]:
    return {(c["source"], c["field"]): c for c in result.extra.get("shape_changes", [])}


def _next_release(sim: RunningSimulator) -> list[int]:
    """Switch the service to the next release and change some shipments (read again in the new shape)."""
    sim.set_release(NEXT)
    changed = sim.modify_shipments(CHANGED)
    sim.advance_clock(1)
    return changed


def _air_and_events(sim: RunningSimulator, ids: list[int]) -> tuple[int, int]:
    docs = [sim.store.reader.get_shipment(i) for i in ids]
    air = sum(len(sim.store.reader.get_air_main_carriage(d["id"])) for d in docs if d["mode_of_transport"] == "AIR")
    events = sum(len(sim.store.reader.get_events(i)) for i in ids)
    return air, events


def test_a_release_change_is_reported_once_and_everything_else_is_exact(
    release_sim: RunningSimulator, tmp_path: Path
) -> None:
    sync = syncer(release_sim, tmp_path)
    first = sync()
    assert not _changes(first[SHIPMENTS]) and not _changes(first[CODE_CONVERSIONS])
    assert query(work_db(tmp_path), "SELECT count(*) FROM freight_meta.source_fields WHERE state <> 'received'") \
        == [(0,)]

    _next_release(release_sim)
    second = sync()[SHIPMENTS]
    changed, written = _read_and_written(tmp_path, second)  # the changed shipments, and the overlap's re-read
    read = len(changed)
    assert read >= CHANGED
    air_legs, events = _air_and_events(release_sim, changed)
    assert air_legs and events
    changes = _changes(second)
    assert set(changes) == {
        (DOCUMENT, "aes"), (DOCUMENT, "emissions"), (EVENTS, "reported_by"),
        (AIR_LEGS, "flight_no"), (AIR_LEGS, "flight_number"),
    }, "the renamed house/master references are named in the spec: not drift"
    assert changes[(DOCUMENT, "aes")]["change"] == "vanished"
    assert changes[(DOCUMENT, "aes")]["records_read"] == second.extra["parts"][DOCUMENT]["read"] == read
    assert changes[(DOCUMENT, "aes")]["example_record_key"] in {str(i) for i in changed}
    assert changes[(DOCUMENT, "emissions")]["change"] == "new"
    assert changes[(DOCUMENT, "emissions")]["records_with"] == read
    assert (changes[(EVENTS, "reported_by")]["records_with"], changes[(EVENTS, "reported_by")]["records_read"]) \
        == (events, events)
    assert changes[(AIR_LEGS, "flight_no")]["change"] == "vanished"
    assert changes[(AIR_LEGS, "flight_number")]["records_with"] == air_legs
    lines = second.shape_changes()
    assert f"shipment documents changed shape: aes absent from all {read} read (present before), " \
        f"emissions new (in {read} of {read})" in lines
    assert f"shipment events changed shape: reported_by new (in {events} of {events})" in lines

    # every table exact, but what the release took away: the AES rows and the flight numbers of the
    # shipments read in the new shape; house_reference is filled from house_bill_number
    expected = expected_rows(release_sim.store)
    # (the overlap's, read again unchanged, are left as held: what the release before sent)
    expected["shipment_aes"] = [r for r in expected["shipment_aes"] if r["shipment_id"] not in written]
    for leg in expected["air_main_carriage_legs"]:
        if leg["shipment_id"] in written:
            leg.pop("flight_no", None)
    assert rows_differences(expected, work_db(tmp_path)) == {}
    filled = query(work_db(tmp_path), "SELECT count(*) FROM freight.shipments WHERE shipment_id IN "
                   f"({', '.join(map(str, written))}) AND house_reference IS NOT NULL AND master_reference IS NOT NULL")
    truth = [release_sim.store.reader.get_shipment(i) for i in written]
    assert filled == [(sum(d["house_reference"] is not None and d["master_reference"] is not None for d in truth),)]
    assert filled[0][0] > 0

    # status shows what is open; the next run reports nothing again
    status = render_status(read_report(tmp_path, storage_from_env()))
    assert "shape of the records (freight_meta.source_fields)" in status
    assert "emissions" in status and "flight_no" in status and "vanished" in status
    release_sim.modify_shipments(3)
    release_sim.advance_clock(1)
    third = sync()[SHIPMENTS]
    assert _changes(third) == {}
    open_now = query(work_db(tmp_path), "SELECT stream, field, state FROM freight_meta.source_fields "
                     "WHERE state <> 'received' ORDER BY ALL")
    assert sorted(open_now) == sorted([(AIR_LEGS, "flight_no", "vanished"), (AIR_LEGS, "flight_number", "new"),
                                       (DOCUMENT, "aes", "vanished"), (DOCUMENT, "emissions", "new"),
                                       (EVENTS, "reported_by", "new")])


def test_before_the_alias_a_rename_is_reported_as_vanished_and_new(
    release_sim: RunningSimulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shipments spec without its one-line alias: the issue's "house_reference absent from all 40 read
    (present before), house_bill_number new", and the column left null, as it was."""
    fields, shape = mapping_before_the_fix()
    monkeypatch.setattr(flatten, "_SHIPMENT", fields)
    monkeypatch.setitem(drift.SOURCE_SHAPES, DOCUMENT, shape)
    sync = syncer(release_sim, tmp_path)
    sync()
    _next_release(release_sim)
    second = sync()[SHIPMENTS]
    read_ids, written = _read_and_written(tmp_path, second)
    read = len(read_ids)
    changes = _changes(second)
    for old, new in (("house_reference", "house_bill_number"), ("master_reference", "master_bill_number")):
        assert changes[(DOCUMENT, old)]["change"] == "vanished"
        assert (changes[(DOCUMENT, old)]["records_read"], changes[(DOCUMENT, old)]["records_with"]) == (read, 0)
        assert changes[(DOCUMENT, new)]["change"] == "new"
        assert changes[(DOCUMENT, new)]["first_run_id"] == second.run_id
    line = next(line for line in second.shape_changes() if line.startswith("shipment documents"))
    assert f"house_reference absent from all {read} read (present before)" in line
    assert f"house_bill_number new (in {read} of {read})" in line
    ids = ", ".join(map(str, written))
    nulls = query(work_db(tmp_path), f"SELECT count(*) FROM freight.shipments WHERE shipment_id IN ({ids}) "
                  "AND house_reference IS NULL")
    assert nulls == [(len(written),)]


def _read_by(data_dir: Path, run_id: str) -> list[int]:
    """The shipments whose documents ``run_id`` read and wrote (and kept raw)."""
    rows = query(work_db(data_dir), "SELECT shipment_id FROM freight_meta.raw_shipments WHERE run_id = ?", [run_id])
    return sorted(int(r[0]) for r in rows)


def _read_and_written(data_dir: Path, result: Any) -> tuple[list[int], list[int]]:
    """The shipments the run ``result`` read (those it wrote, and those the release reshaped under the stamp held,
    left as held: ``extra.kept_as_held``), and those it wrote."""
    written = _read_by(data_dir, result.run_id)
    kept = result.extra.get("kept_as_held", {}).get("ids", [])
    return sorted({*written, *kept}), written


# --- 2026.3: renames and retypes inside goods (at every depth), addresses, containers, legs, events, memos --

def _objects(items: Any) -> list[dict[str, Any]]:
    return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []


def _goods(goods: Any) -> list[dict[str, Any]]:
    """Every goods line at every depth."""
    return [line for good in _objects(goods) for line in (good, *_goods(good.get("subgoods")))]


def _nested_truth(sim: RunningSimulator, ids: list[int]) -> dict[str, int]:
    """What the shipments ``ids`` hold, counted from the store's true documents (the release changes none)."""
    reader = sim.store.reader
    docs = [reader.get_shipment(i) for i in ids]
    lines = [line for d in docs for line in _goods(d.get("goods"))]
    counts = {
        "goods": len(lines),
        "quantities": sum(isinstance(line.get("quantity"), int) for line in lines),
        "measurements": sum(len(_objects(line.get("measurements"))) for line in lines),
        "lengths": sum(isinstance(m.get("length"), int) for line in lines for m in _objects(line.get("measurements"))),
        "addresses": sum(len(_objects(d.get("addresses"))) for d in docs),
        "containers": sum(len(_objects(d.get("containers"))) for d in docs),
        "events": sum(len(reader.get_events(i)) for i in ids),
        "air": sum(len(reader.get_air_main_carriage(d["id"])) for d in docs if d["mode_of_transport"] == "AIR"),
        "sea": sum(len(reader.get_sea_main_carriage(d["id"])) for d in docs if d["mode_of_transport"] == "SEA"),
        "memos": sum(len(reader.memo_rows_of(d["client"], d["shipment_number"])) for d in docs),
    }
    for carriage in ("pre", "main", "post"):
        counts[carriage] = sum(len(_objects((d.get(f"{carriage}_carriage") or {}).get("carriage_legs"))) for d in docs)
    return counts


def _nested_changes(truth: dict[str, int], read: int) -> dict[tuple[str, str], tuple[str, int, int]]:
    """Every change 2026.3 makes, as the first sync after it must name it: (change, objects read, with it)."""
    expected = {
        (DOCUMENT, "aes"): ("vanished", read, 0), (DOCUMENT, "emissions"): ("new", read, read),
        (DOCUMENT, "goods[].weight"): ("vanished", truth["goods"], 0),
        (DOCUMENT, "goods[].gross_weight"): ("new", truth["goods"], truth["goods"]),
        (DOCUMENT, "goods[].quantity"): ("retyped", truth["goods"], truth["goods"]),
        (DOCUMENT, "goods[].measurements[].length"): ("retyped", truth["measurements"], truth["measurements"]),
        (DOCUMENT, "addresses[].postal_code"): ("vanished", truth["addresses"], 0),
        (DOCUMENT, "addresses[].zip_code"): ("new", truth["addresses"], truth["addresses"]),
        (EVENTS, "reported_by"): ("new", truth["events"], truth["events"]),
        (EVENTS, "location"): ("vanished", truth["events"], 0),
        (EVENTS, "place"): ("new", truth["events"], truth["events"]),
        (AIR_LEGS, "flight_no"): ("vanished", truth["air"], 0),
        (AIR_LEGS, "flight_number"): ("new", truth["air"], truth["air"]),
    }
    if truth["memos"]:  # however few: the new name came in every memo line
        expected[(MEMOS, "memo")] = ("vanished", truth["memos"], 0)
        expected[(MEMOS, "text")] = ("new", truth["memos"], truth["memos"])
    if truth["containers"]:  # however few: the new name came in every container
        expected[(DOCUMENT, "containers[].container_iso_code")] = ("vanished", truth["containers"], 0)
        expected[(DOCUMENT, "containers[].iso_code")] = ("new", truth["containers"], truth["containers"])
    ends = [(DOCUMENT, f"{carriage}_carriage.carriage_legs[].", truth[carriage])
            for carriage in ("pre", "main", "post")]
    ends += [(AIR_LEGS, "", truth["air"]), (SEA_LEGS, "", truth["sea"])]
    for source, legs, count in ends:
        for end in ("origin", "destination"):
            if count:
                expected[(source, f"{legs}{end}.location")] = ("vanished", count, 0)
                expected[(source, f"{legs}{end}.place")] = ("new", count, count)
    return expected


NULLED_BY_NAMED: dict[tuple[str, str], tuple[str, str]] = {
    ("shipment_goods", "weight"): (DOCUMENT, "goods[].weight"),
    ("good_measurements", "length"): (DOCUMENT, "goods[].measurements[].length"),
    ("shipment_addresses", "postal_code"): (DOCUMENT, "addresses[].postal_code"),
    ("shipment_containers", "container_iso_code"): (DOCUMENT, "containers[].container_iso_code"),
    ("air_main_carriage_legs", "flight_no"): (AIR_LEGS, "flight_no"),
    ("shipment_memos", "memo"): (MEMOS, "memo"),
    **{("shipment_events", column): (EVENTS, "location") for column in LOCATION_COLUMNS},
    **{(table, f"{end}_{column}"): (source, f"{end}.location") for table, source in (
        ("air_main_carriage_legs", AIR_LEGS), ("sea_main_carriage_legs", SEA_LEGS))
       for end in ("origin", "destination") for column in LOCATION_COLUMNS},
    **{("carriage_legs", f"{end}_{column}"): (DOCUMENT, f"main_carriage.carriage_legs[].{end}.location")
       for end in ("origin", "destination") for column in LOCATION_COLUMNS},
}
"""Each column the 2026.3 release turns null, and the change the sync must name for it (the legs embedded in
the document: the main carriage's is named, as every carriage's end is)."""


def _nulled_columns(expected: dict[str, list[dict[str, Any]]], data_dir: Path, ids: list[int]) -> set[tuple[str, str]]:
    """(table, column) of every value of the shipments ``ids`` the store holds and the warehouse holds null."""
    found: set[tuple[str, str]] = set()
    with duckdb.connect(str(work_db(data_dir)), read_only=True) as con:
        for spec in FREIGHT_TABLES:
            if "shipment_id" not in spec.column_names:
                continue
            key = [c for c in spec.primary_key]
            held = {tuple(r[:len(key)]): r[len(key):] for r in con.execute(
                f"SELECT {', '.join(key)}, {', '.join(spec.column_names)} FROM {spec.qualified_name} "
                f"WHERE shipment_id IN ({', '.join(map(str, ids))})").fetchall()}
            for row in expected[spec.name]:
                if row["shipment_id"] not in ids:
                    continue
                values = held.get(tuple(row.get(k) for k in key))
                if values is None:
                    continue
                found |= {(spec.name, name) for name, value in zip(spec.column_names, values, strict=True)
                          if value is None and row.get(name) is not None}
    return found


def test_a_release_that_changes_the_records_inside_names_every_path_with_counts(
    release_sim: RunningSimulator, tmp_path: Path
) -> None:
    sync = syncer(release_sim, tmp_path)
    first = sync()
    assert not _changes(first[SHIPMENTS])
    assert not [c for r in first.values() for c in r.extra.get("null_jumps", [])]
    release_sim.set_release(NESTED)
    release_sim.modify_shipments(CHANGED)
    release_sim.advance_clock(1)
    second = sync()[SHIPMENTS]
    changed, written = _read_and_written(tmp_path, second)
    truth = _nested_truth(release_sim, changed)
    assert truth["goods"] > truth["quantities"] * 0.9 > 0 and truth["lengths"] == truth["measurements"] > 0
    expected = _nested_changes(truth, len(changed))
    changes = _changes(second)
    assert {key: (c["change"], c["records_read"], c["records_with"]) for key, c in changes.items()} == expected
    quantity, length = changes[(DOCUMENT, "goods[].quantity")], changes[(DOCUMENT, "goods[].measurements[].length")]
    assert (quantity["kinds_new"], quantity["unread"]) == ({"text": truth["quantities"]}, 0)
    assert (length["kinds_new"], length["unread"]) == ({"text": truth["lengths"]}, truth["lengths"])
    line = next(line for line in second.shape_changes() if line.startswith("shipment documents"))
    assert f"goods[].weight absent from all {truth['goods']} read (present before)" in line
    assert f"goods[].quantity number -> text in {truth['quantities']} of {truth['goods']}, all read" in line
    assert (f"goods[].measurements[].length number -> text in {truth['lengths']} of {truth['measurements']}, "
            f"{truth['lengths']} not read (null, freight_meta.data_problems)") in line

    # published, and no column turned null but those whose path the run named
    published = query(tmp_path / "warehouse.duckdb", "SELECT count(*) FROM freight.shipment_goods WHERE shipment_id "
                      f"IN ({', '.join(map(str, changed))}) AND weight IS NULL")
    assert published == [(_nested_truth(release_sim, written)["goods"],)]  # those left as held keep their weights
    nulled = _nulled_columns(expected_rows(release_sim.store), tmp_path, written)
    assert {("shipment_goods", "weight"), ("good_measurements", "length"), ("shipment_events", "location_name")} \
        <= nulled
    assert nulled <= set(NULLED_BY_NAMED), nulled - set(NULLED_BY_NAMED)
    assert {NULLED_BY_NAMED[column] for column in nulled} <= set(changes)

    # where its users look: status and the Dagster checks (WARN)
    status = render_status(read_report(tmp_path, storage_from_env()))
    for shown in ("goods[].weight", "goods[].gross_weight", "main_carriage.carriage_legs[].origin.place",
                  f"number -> text {truth['quantities']}, 0 not read", "retyped"):
        assert shown in status, shown
    with duckdb.connect(str(work_db(tmp_path)), read_only=True) as con:
        results = dict(evaluate_checks(con, [shape_check(DOCUMENT), shape_check(EVENTS)]))
    failing = {check.label: result.figures for check, result in results.items() if not result.passed}
    assert set(failing) == {"shipments.no_shape_changes", "shipment_events.no_shape_changes"}
    assert failing["shipments.no_shape_changes"]["retyped_fields"] == 2


def test_a_shipment_read_again_under_its_stamp_in_a_release_s_shape_is_left_as_held_and_exact_after_a_rollback(
    release_sim: RunningSimulator, tmp_path: Path
) -> None:
    """The walk reads the cursor's second again every run. Under 2026.3 those shipments, unchanged, answer in the new
    shape: written, their rows took nulls where the mapping does not read the new names yet (and data problems of
    values it reads otherwise), and a rollback of the release left them so until each changed again (closed ones:
    never). Left as held (``kept_as_held``), they are exact once the service is back on its release. (A shipment
    the release changed is written as it read then, nulls and all, until it changes again: real-services.md.)"""
    sync = syncer(release_sim, tmp_path, publish_after=False)
    sync()
    db = work_db(tmp_path)
    (second,) = query(db, "SELECT max(last_modified_key) FROM freight_meta.raw_shipments")[0]
    overlap = {i for (i,) in query(db, "SELECT shipment_id FROM freight_meta.raw_shipments WHERE last_modified_key = ?",
                                   [second])}
    release_sim.set_release(NESTED)
    changed = set(release_sim.modify_shipments(1))
    release_sim.advance_clock(900)
    result = sync()[SHIPMENTS]
    unchanged = sorted(overlap - changed)
    kept = result.extra["kept_as_held"]
    assert kept["shipments"] == len(unchanged) > 0 and kept["ids"] == unchanged, (kept, overlap, changed)
    assert {"shipment_events: location", "shipments: addresses[].postal_code"} <= set(kept["fields"]), kept
    others = [i for i in release_sim.store.reader.live_shipment_ids() if i not in unchanged]
    problems = query(db, "SELECT count(*) FROM freight_meta.data_problems WHERE shipment_id IN (SELECT unnest(?))",
                     [unchanged])[0][0]
    release_sim.set_release("2026.1")
    release_sim.advance_clock(900)
    sync()
    assert rows_differences(expected_rows(release_sim.store), db, except_shipments=others) == {}
    assert problems == 0


def test_a_change_in_the_stamp_s_own_second_that_also_leaves_a_field_out_is_written(tmp_path: Path) -> None:
    """A shipment edited again within its stamp's second, one value changed and one field cleared (a service that
    leaves null keys out leaves it out): its re-read lost a field under the stamp held, as a release's would, but a
    value it shares with the answer held changed: a change, written (it was left as held for good)."""
    with running_simulator(shipments=SMALL_SHIPMENTS, seed=7, control=True) as sim:
        sync = syncer(sim, tmp_path, publish_after=False)
        sync()
        db = work_db(tmp_path)
        (second,) = query(db, "SELECT max(last_modified_key) FROM freight_meta.raw_shipments")[0]
        (edited,) = query(db, "SELECT min(shipment_id) FROM freight_meta.raw_shipments WHERE last_modified_key = ?",
                          [second])[0]
        corrupt(sim, "shipment", edited, "set", path="total_packages", value=999)
        corrupt(sim, "shipment", edited, "remove", path="master_reference")
        result = sync()[SHIPMENTS]
    assert edited not in result.extra.get("kept_as_held", {}).get("ids", [])
    assert query(db, "SELECT total_packages, master_reference FROM freight.shipments WHERE shipment_id = ?",
                 [edited]) == [(999, None)]
