"""The revised departure / arrival dates in a shipment's documents (the ``*_REVISED`` events, the main
carriage's ``revised_datetime``): the same in every version until the simulator revises that
estimate, then at the new estimate."""

from __future__ import annotations

import datetime as dt
from typing import Any

from freight_pipeline.datetimes import parse_datetime_object
from freight_pipeline.simulator.data_estimates import REVISED_DATE_CODES
from freight_pipeline.simulator.store import SimulatorStore

DAY = 86400


def instant(date_time: dict[str, Any] | None) -> dt.datetime | None:
    parsed = parse_datetime_object(date_time)
    return None if parsed is None else parsed.instant


def revised_fields(doc: dict[str, Any]) -> dict[str, Any]:
    """Every revised date of a document, as sent: per code its ``<code>_REVISED`` event's date_time
    (None: no such event), and each main-carriage leg's origin and destination ``revised_datetime``."""
    events = {(e["event"], e["type"]): e["date_time"] for e in doc["events"]}
    return {
        "events": {code: events.get((f"{code}_REVISED", "ESTIMATED")) for code in REVISED_DATE_CODES},
        "legs": [(leg["origin"]["revised_datetime"], leg["destination"]["revised_datetime"])
                 for leg in doc["main_carriage"]["carriage_legs"]],
    }


def estimate(doc: dict[str, Any], code: str) -> dict[str, Any] | None:
    return next((e["date_time"] for e in doc["events"] if (e["event"], e["type"]) == (code, "ESTIMATED")), None)


def leg_end_revised(doc: dict[str, Any], code: str) -> dt.datetime | None:
    """The leg end carrying ``code``'s revised date: the first leg's origin (departure), the last leg's
    destination (arrival)."""
    legs = doc["main_carriage"]["carriage_legs"]
    end = legs[0]["origin"] if code == "POL_DEPARTURE" else legs[-1]["destination"]
    return instant(end["revised_datetime"])


def test_versions_that_revise_nothing_keep_the_revised_dates() -> None:
    store = SimulatorStore(shipments=300, seed=11)
    docs = {doc["id"]: doc for doc in store.reader.expected_documents()}
    with_dates = sorted(i for i, doc in docs.items()
                        if any(revised_fields(doc)["events"].values()) and not doc["shipment_closed"])
    assert len(with_dates) >= 15, len(with_dates)
    first = {i: revised_fields(docs[i]) for i in with_dates}
    versions = {i: store.reader.shipment_state(i).version for i in with_dates}
    for step in range(3):  # three new versions of each, nothing revised (an hour apart)
        store.clock.advance(3600)
        store.changes.touch_shipments(with_dates)
        for shipment_id in with_dates:
            doc = store.reader.get_shipment(shipment_id)
            assert doc["last_modified_date_time"] != docs[shipment_id]["last_modified_date_time"]
            assert store.reader.shipment_state(shipment_id).version == versions[shipment_id] + step + 1
            assert revised_fields(doc) == first[shipment_id], (step, shipment_id)


def test_a_revised_date_moves_with_its_estimate_and_only_then() -> None:
    store = SimulatorStore(shipments=300, seed=11)
    store.clock.advance(3 * DAY)  # as the demo does between its syncs
    before = {doc["id"]: doc for doc in store.reader.expected_documents()}
    progressed = store.changes.progress_shipments()
    assert len(progressed) >= 30, len(progressed)
    moved = kept = appeared = 0
    for shipment_id in progressed:
        old, new = before[shipment_id], store.reader.get_shipment(shipment_id)
        assert new["last_modified_date_time"] != old["last_modified_date_time"]
        old_fields, new_fields = revised_fields(old), revised_fields(new)
        for code in REVISED_DATE_CODES:
            was, now = estimate(old, code), estimate(new, code)
            if now is None:
                continue
            if now != was:  # the simulator revised this estimate: its revised date is the new estimate
                moved += 1
                appeared += old_fields["events"][code] is None
                assert instant(new_fields["events"][code]) == instant(now), (shipment_id, code)
                assert leg_end_revised(new, code) == instant(now), (shipment_id, code)
            else:  # not revised: the revised date as it was (or still none)
                kept += 1
                assert new_fields["events"][code] == old_fields["events"][code], (shipment_id, code)
                assert leg_end_revised(new, code) == leg_end_revised(old, code), (shipment_id, code)
    assert moved >= 10 and kept >= 10 and appeared >= 1, (moved, kept, appeared)
