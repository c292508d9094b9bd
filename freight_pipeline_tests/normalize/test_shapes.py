"""Schema drift as plain values: the fields a run received against the declared ones and earlier runs."""

from __future__ import annotations

import datetime as dt

from freight_pipeline.normalize.flatten import DOCUMENT_SHAPE, normalize_shipment
from freight_pipeline.normalize.plain_fields import Field
from freight_pipeline.normalize.shapes import NEW, RECEIVED, VANISHED, FieldTally, KnownField, Shape, compare
from freight_pipeline_tests.normalize import samples

AT = dt.datetime(2026, 11, 27, 9, 0, tzinfo=dt.UTC)
SHAPE = Shape.of("things", (Field("name", "VARCHAR"), Field("ref", "VARCHAR", source=("ref", "reference")),
                            Field("note", "VARCHAR")), known=("id",))


def tally(*records: dict[str, object]) -> FieldTally:
    counted = FieldTally(SHAPE)
    for position, record in enumerate(records):
        counted.see(record, record.get("id", position))
    return counted


def run(records: list[dict[str, object]], known: dict[str, KnownField], run_id: str) -> tuple[list, dict]:
    changes, states = compare("things", SHAPE, tally(*records), known, run_id, AT)
    return changes, {state.field: state for state in states}


def test_every_field_of_a_sample_document_is_declared_but_its_future_one() -> None:
    assert set(samples.shipment()) - DOCUMENT_SHAPE.declared == {"someFutureField"}
    assert {"house_bill_number", "master_bill_number"} <= DOCUMENT_SHAPE.declared  # the aliases
    assert DOCUMENT_SHAPE.names_of("house_bill_number") == ("house_reference", "house_bill_number")
    assert normalize_shipment(samples.shipment())  # the shape is of the normalizer that reads the document


def test_a_tally_counts_records_per_key_set_and_keeps_an_example() -> None:
    counted = tally({"id": 1, "name": "a"}, {"id": 2, "name": None}, {"id": 3, "name": "c", "extra": 1})
    assert counted.records == 3
    assert {key: (c.records, c.example) for key, c in counted.fields().items()} == {
        "id": (3, "1"), "name": (3, "1"), "extra": (1, "3")}
    assert counted.example_without(("extra",)) == "1"
    more = tally({"id": 9, "extra": 2})
    counted.add(more)
    assert (counted.fields()["extra"].records, counted.fields()["extra"].example) == (2, "3")
    assert counted.records == 4


def test_new_vanished_and_what_is_not_drift() -> None:
    first = [{"id": i, "name": "n", "ref": "r", "note": "x"} for i in range(5)]
    changes, known = run(first, {}, "r1")
    assert changes == [] and {s.state for s in known.values()} == {RECEIVED}
    # null is presence; an alias coming instead of its column's first name is no drift
    nulls = [{"id": i, "name": None, "reference": "r", "note": None} for i in range(5)]
    changes, known = run(nulls, known, "r2")
    assert changes == [] and known["ref"].state == RECEIVED and known["reference"].declared
    # a field dropped and one added
    dropped = [{"id": i, "name": "n", "ref": "r", "extra": {"a": 1}} for i in range(5)]
    changes, after = run(dropped, known, "r3")
    assert [(c.field, c.change, c.records_read, c.records_with) for c in changes] == [
        ("extra", NEW, 5, 5), ("note", VANISHED, 5, 0)]
    assert [c.phrase() for c in changes] == ["extra new (in 5 of 5)", "note absent from all 5 read (present before)"]
    assert after["note"].first_run_id == "r1" and after["note"].changed_run_id == "r3"
    assert after["extra"].first_run_id == "r3" and after["extra"].example_record_key == "0"
    # reported once: the next run with the same shape changes nothing, the states stay open
    changes, later = run(dropped, after, "r4")
    assert changes == [] and (later["note"].state, later["extra"].state) == (VANISHED, NEW)
    assert later["note"].changed_run_id == "r3"
    # received again: resolved
    changes, healed = run(first, later, "r5")
    assert changes == [] and healed["note"].state == RECEIVED and healed["extra"].state == RECEIVED


def test_a_field_that_was_often_absent_vanishes_only_when_its_absence_is_no_accident() -> None:
    half = [{"id": i, "name": "n", **({"note": "x"} if i % 2 else {})} for i in range(10)]
    _, known = run(half, {}, "r1")
    assert known["note"].share() == 0.5
    changes, known = run([{"id": 1, "name": "n"}, {"id": 2, "name": "n"}], known, "r2")
    assert changes == [], "two records without a field found in half of them: chance 1/4"
    changes, _ = run([{"id": i, "name": "n"} for i in range(8)], known, "r3")
    assert [(c.field, c.change) for c in changes] == [("note", VANISHED)], "ten in a row: chance 1/1024"


def test_a_run_that_read_no_record_changes_nothing() -> None:
    _, known = run([{"id": 1, "name": "n"}], {}, "r1")
    changes, states = compare("things", SHAPE, FieldTally(SHAPE), known, "r2", AT)
    assert changes == [] and states == list(known.values())
