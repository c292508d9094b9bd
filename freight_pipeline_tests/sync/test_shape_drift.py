"""The service changes release between two syncs (over HTTP, the simulator's ``2026.2``): the first sync
after it reports the fields that vanished and the new ones with their counts, publishes everything else
exactly, and a rename the spec names (``house_reference``, then ``house_bill_number``) keeps its column
filled. With the spec as it was before that one line, the rename is reported as such."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.before_the_fix import mapping_before_the_fix
from bench.expected_rows import expected_rows
from freight_pipeline.commands.report import read_report
from freight_pipeline.commands.status import render_status
from freight_pipeline.lake.backend import storage_from_env
from freight_pipeline.normalize import flatten
from freight_pipeline.simulator.releases import NEXT
from freight_pipeline.simulator.server import RunningSimulator, running_simulator
from freight_pipeline.sync import drift
from freight_pipeline.sync.code_conversions import STREAM as CODE_CONVERSIONS
from freight_pipeline.sync.parts import AIR_LEGS, DOCUMENT, EVENTS
from freight_pipeline.sync.shipments import STREAM as SHIPMENTS
from freight_pipeline_tests.sync.conftest import SMALL_SHIPMENTS, query, syncer, work_db
from freight_pipeline_tests.sync.expected import rows_differences

CHANGED = 12


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
    changed = _read_by(tmp_path, second.run_id)  # the changed shipments, and the overlap's re-read
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
    expected["shipment_aes"] = [r for r in expected["shipment_aes"] if r["shipment_id"] not in changed]
    for leg in expected["air_main_carriage_legs"]:
        if leg["shipment_id"] in changed:
            leg.pop("flight_no", None)
    assert rows_differences(expected, work_db(tmp_path)) == {}
    filled = query(work_db(tmp_path), "SELECT count(*) FROM freight.shipments WHERE shipment_id IN "
                   f"({', '.join(map(str, changed))}) AND house_reference IS NOT NULL AND master_reference IS NOT NULL")
    truth = [release_sim.store.reader.get_shipment(i) for i in changed]
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
    read = len(_read_by(tmp_path, second.run_id))
    changes = _changes(second)
    for old, new in (("house_reference", "house_bill_number"), ("master_reference", "master_bill_number")):
        assert changes[(DOCUMENT, old)]["change"] == "vanished"
        assert (changes[(DOCUMENT, old)]["records_read"], changes[(DOCUMENT, old)]["records_with"]) == (read, 0)
        assert changes[(DOCUMENT, new)]["change"] == "new"
        assert changes[(DOCUMENT, new)]["first_run_id"] == second.run_id
    line = next(line for line in second.shape_changes() if line.startswith("shipment documents"))
    assert f"house_reference absent from all {read} read (present before)" in line
    assert f"house_bill_number new (in {read} of {read})" in line
    ids = ", ".join(map(str, _read_by(tmp_path, second.run_id)))
    nulls = query(work_db(tmp_path), f"SELECT count(*) FROM freight.shipments WHERE shipment_id IN ({ids}) "
                  "AND house_reference IS NULL")
    assert nulls == [(read,)]


def _read_by(data_dir: Path, run_id: str) -> list[int]:
    """The shipments whose documents ``run_id`` read (and kept raw)."""
    rows = query(work_db(data_dir), "SELECT shipment_id FROM freight_meta.raw_shipments WHERE run_id = ?", [run_id])
    return sorted(int(r[0]) for r in rows)
