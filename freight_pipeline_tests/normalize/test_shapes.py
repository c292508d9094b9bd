"""Schema drift as plain values: the fields a run received against the declared ones and earlier runs."""

from __future__ import annotations

import datetime as dt

import pytest

from freight_pipeline.client._core import ReceivedArray, ReceivedObject
from freight_pipeline.normalize.converters import to_int
from freight_pipeline.normalize.documents import EFILE_SHAPE
from freight_pipeline.normalize.flatten import DOCUMENT_SHAPE, normalize_shipment
from freight_pipeline.normalize.groups import DATETIME
from freight_pipeline.normalize.nodes import NUMBER, SAME, Key, Node
from freight_pipeline.normalize.plain_fields import Field
from freight_pipeline.normalize.shapes import (
    CHANCE,
    CHANCE_IF_OPTIONAL,
    NEW,
    RECEIVED,
    RETYPED,
    VANISHED,
    FieldTally,
    KnownField,
    Shape,
    compare,
    fields_lost,
)
from freight_pipeline.normalize.specs.keys import RECORD_ID
from freight_pipeline.sync.drift import SOURCE_SHAPES
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


def test_a_field_vanishes_only_when_its_absence_is_no_accident() -> None:
    always = [{"id": i, "name": "n", "note": "x"} for i in range(3)]
    _, known = run(always, {}, "r1")
    changes, known = run([{"id": 1, "name": "n"}, {"id": 2, "name": "n"}], known, "r2")
    assert changes == [], "after 3 records that all had it, two without it: chance (1/5)**2 = 1/25"
    changes, known = run([{"id": 3, "name": "n"}], known, "r3")
    assert [(c.field, c.change) for c in changes] == [("note", VANISHED)], "a third in a row: 1/125"


def test_a_field_absent_from_some_records_before_vanishes_at_the_rate_it_came() -> None:
    """A field that came in a share of the records before is judged at Laplace's estimate of its absence,
    ``(N - W + 1) / (N + 2)``, against ``CHANCE_IF_OPTIONAL`` (one in a million: its presence varies by design,
    with that of other keys): a field in half of them is no change after 19 records without it (chance
    ``(6/12)**19``, 1.9e-6) and has vanished after 20 (9.5e-7); one in 1 of 20 is no change after 100 (chance
    ``(20/22)**100``, 7e-5) and has vanished after 150 (6e-7). A field that came in every record is judged
    against ``CHANCE``, as before."""
    assert CHANCE_IF_OPTIONAL == 1e-6 and CHANCE == 0.01
    half = [{"id": i, "name": "n", **({"note": "x"} if i % 2 else {})} for i in range(10)]
    _, known = run(half, {}, "r1")
    assert known["note"].share() == 0.5 and not known["note"].always_came()
    changes, after = run([{"id": i, "name": "n"} for i in range(19)], known, "r2")
    assert changes == [] and after["note"].state == RECEIVED and after["note"].records_since_seen == 19
    changes, after = run([{"id": 19, "name": "n"}], after, "r3")  # 20 in a row, over two runs
    assert [c.phrase() for c in changes] == ["note absent from all 1 read (present before)"]
    changes, after = run([{"id": i, "name": "n"} for i in range(50)], known, "r2")
    assert [(c.field, c.change) for c in changes] == [("note", VANISHED)]
    changes, healed = run(half, after, "r3")
    assert changes == [] and healed["note"].state == RECEIVED
    rare = [{"id": i, "name": "n", **({"note": "x"} if i == 0 else {})} for i in range(20)]
    _, known = run(rare, {}, "r1")
    changes, after = run([{"id": i, "name": "n"} for i in range(100)], known, "r2")
    assert changes == [] and after["note"].state == RECEIVED
    changes, _ = run([{"id": i, "name": "n"} for i in range(50)], after, "r3")
    assert [(c.field, c.change) for c in changes] == [("note", VANISHED)]
    # a rename where a key came in every object names at once only a key that came in every record before
    changes, _ = run([{"id": i, "name": "n", "remark": "x"} for i in range(3)], known, "r2")
    assert [(c.field, c.change) for c in changes] == [("remark", NEW)]


def test_objects_of_one_record_count_once_for_the_vanished_rule() -> None:
    """The objects of one record are alike (the simulator's DateTime objects carry ``until: null`` in one form
    and no ``until`` in the other, one form a document): 20 objects of one record are one record of evidence."""
    with_until = {"id": 1, "name": "n", "lines": [{"weight": 1.0, "note": "a", "sub": []}] * 20}
    _, known = nested_run([with_until], {}, "r1")
    assert known["lines[].note"].records_read_total == 1 and known["lines[].note"].records_read == 20
    without = [{"id": i, "name": "n", "lines": [{"weight": 1.0, "sub": []}] * 20} for i in (2, 3)]
    changes, _ = nested_run(without, known, "r2")
    assert changes == [], "after one record that had it, two records without it: (1/3)**2 = 1/9"


def test_a_run_that_read_no_record_changes_nothing() -> None:
    _, known = run([{"id": 1, "name": "n"}], {}, "r1")
    changes, states = compare("things", SHAPE, FieldTally(SHAPE), known, "r2", AT)
    assert changes == [] and states == list(known.values())


# --- every level: nested objects, arrays, kinds --------------------------------------------------------

PLACE = Key(("location", "place"), Node.of((Field("place_name", "VARCHAR", source="name"),)))
LINE = Node.of((Field("weight", "DOUBLE"), Field("quantity", "BIGINT"), Field("note", "VARCHAR")),
               Key("sub", SAME, array=True))
NESTED = Shape.of("orders", (Field("name", "VARCHAR"),), Key("lines", LINE, array=True), PLACE,
                  Key("when", DATETIME), known=("id",))


def nested_run(records: list[dict[str, object]], known: dict[str, KnownField], run_id: str) -> tuple[list, dict]:
    counted = FieldTally(NESTED)
    for record in records:
        counted.see(record, record["id"])
    changes, states = compare("orders", NESTED, counted, known, run_id, AT)
    return changes, {state.field: state for state in states}


def order(i: int, *, weight: str = "weight", quantity: object = 3, place: str = "location",
          time: object = "10:00:00") -> dict[str, object]:
    line = {weight: 1.5, "quantity": quantity, "note": None}
    return {"id": i, "name": "n", "lines": [{**line, "sub": [dict(line), {**line, "sub": [dict(line)]}]}],
            place: {"name": "Hamburg"}, "when": {"date": "2026-11-01", "time": time, "zone_offset": "+01:00"}}


def test_every_level_is_a_path_and_subgoods_are_the_same_kind_as_their_goods() -> None:
    assert set(NESTED.paths) == {"", "lines[]", "location", "when", "when.time", "when.zone_offset",
                                 "when.until"}
    counted = FieldTally(NESTED)
    counted.see(order(1), 1)
    assert counted.records == 1 and counted.records_at(NESTED.paths["lines[]"]) == 4  # a line and 3 sublines
    fields = counted.fields(NESTED.paths["lines[]"])
    assert fields["quantity"].kinds == {"number": 4} and fields["note"].kinds == {} and fields["note"].records == 4
    _, known = nested_run([order(i) for i in range(3)], {}, "r1")
    assert known["lines[].weight"].path == "lines[]" and known["lines[].weight"].key == "weight"
    assert known["lines[].weight"].kinds == ("number",) and known["lines[].note"].kinds is None  # null: no kind
    assert known["location.name"].records_read == 3 and known["when.date"].kinds == ("text",)


def test_a_value_leads_to_the_objects_under_it_only_when_it_is_of_its_key_s_kind() -> None:
    """Each way a record's value may or may not hold watched objects, for an array key (``lines``, ``sub``),
    an object key (``when``) and a key with two names (``location``/``place``): the objects counted at each path
    are exactly those a value of the declared kind holds, under the first name that is not null."""
    line = {"weight": 1.0}
    records = [
        {"id": 1, "lines": [line, 7, None, "x", {"sub": [line, [line]]}], "when": {"date": "2026-11-01"}},
        {"id": 2, "lines": {"weight": 2.0}, "when": [{"date": "2026-11-01"}], "location": {"name": "Bremen"}},
        {"id": 3, "lines": [], "when": {}, "location": None, "place": {"name": "Kiel"}},
        {"id": 4, "lines": None, "location": [{"name": "Lübeck"}], "place": {"name": "not read: location holds"}},
        {"id": 5, "lines": [{"sub": {"weight": 1.0}}, {"sub": None}], "location": {}},
    ]
    counted = FieldTally(NESTED)
    for record in records:
        counted.see(record, record["id"])
    at = {path: counted.records_at(watched) for path, watched in NESTED.paths.items()}
    # lines[]: two of record 1 and their sub line (a list in a list is not an object), two of record 5
    assert at == {"": 5, "lines[]": 5, "location": 3, "when": 2, "when.time": 0, "when.zone_offset": 0,
                  "when.until": 0}
    assert counted.holding_at(NESTED.paths["location"]) == (3, {"name": 2})  # {} of record 5: an object, no keys
    merged = FieldTally(NESTED)  # a worker's tally added, then more seen: the same counts as seen at once
    merged.add(counted)
    merged.see(records[0], 1)
    counted.see(records[0], 1)
    assert {path: merged.records_at(watched) for path, watched in NESTED.paths.items()} == {
        path: counted.records_at(watched) for path, watched in NESTED.paths.items()}
    assert merged.fields(NESTED.paths["lines[]"]).keys() == counted.fields(NESTED.paths["lines[]"]).keys()
    assert merged.holders == counted.holders


def test_a_record_that_is_no_object_counts_and_an_empty_one_after_it_is_walked() -> None:
    counted = FieldTally(NESTED)
    counted.see_all([7, {}], 1)
    counted.see_all([{"id": 2, "lines": [{"weight": 1.0}]}], 2)
    assert counted.records == 3 and counted.records_at(NESTED.top) == 3
    assert counted.records_at(NESTED.paths["lines[]"]) == 1


def test_a_nested_rename_is_named_by_its_path_with_counts_and_a_nested_alias_is_no_drift() -> None:
    _, known = nested_run([order(i) for i in range(3)], {}, "r1")
    changes, after = nested_run([order(i, weight="gross_kg", place="place") for i in range(3)], known, "r2")
    assert [c.phrase() for c in changes] == ["lines[].gross_kg new (in 12 of 12)",
                                             "lines[].weight absent from all 12 read (present before)"]
    assert after["location.name"].state == RECEIVED and after["location.name"].records_read == 3  # read via place
    assert after["place"].declared and after["location"].state == RECEIVED  # its other name came


def test_a_key_gone_where_a_new_one_came_in_every_object_is_named_however_few_the_records() -> None:
    _, known = nested_run([order(1)], {}, "r1")
    changes, _ = nested_run([order(2)], known, "r2")
    assert changes == []
    changes, _ = nested_run([order(2, weight="gross_kg")], known, "r2")
    assert [c.phrase() for c in changes] == ["lines[].gross_kg new (in 4 of 4)",
                                             "lines[].weight absent from all 4 read (present before)"]
    dropped = [{**order(2), "lines": [{"quantity": 3, "note": None, "sub": []}]}]
    changes, _ = nested_run(dropped, known, "r2")
    assert changes == [], "one record without it and nothing new in its place: (1/3) is no evidence"


def test_an_empty_array_or_a_null_object_says_nothing_of_the_keys_inside() -> None:
    _, known = nested_run([order(i) for i in range(3)], {}, "r1")
    empty = [{"id": i, "name": "n", "lines": [], "location": None, "when": None} for i in range(50)]
    changes, after = nested_run(empty, known, "r2")
    assert changes == [] and after["lines[].weight"].state == RECEIVED and after["lines[].weight"].records_read == 12


def test_a_number_sent_as_text_is_named_once_and_resolved_when_it_is_read() -> None:
    _, known = nested_run([order(i) for i in range(3)], {}, "r1")
    changes, after = nested_run([order(i, quantity="7") for i in range(3)], known, "r2")
    assert [c.phrase() for c in changes] == ["lines[].quantity number -> text in 12 of 12, all read"]
    assert after["lines[].quantity"].state == RETYPED and after["lines[].quantity"].unread == 0
    changes, later = nested_run([order(i, quantity="8") for i in range(3)], after, "r3")
    assert changes == [] and later["lines[].quantity"].state == RECEIVED
    assert later["lines[].quantity"].kinds == ("number", "text")  # taken in


def test_a_value_that_can_no_longer_be_read_keeps_its_change_open_until_it_can() -> None:
    _, known = nested_run([order(i) for i in range(3)], {}, "r1")
    changes, after = nested_run([order(i, quantity="7 pcs") for i in range(3)], known, "r2")
    assert [c.phrase() for c in changes] == [
        "lines[].quantity number -> text in 12 of 12, 12 not read (null, freight_meta.data_problems)"]
    changes, later = nested_run([order(i, quantity="7 pcs") for i in range(3)], after, "r3")
    assert changes == [] and later["lines[].quantity"].state == RETYPED and later["lines[].quantity"].kinds == (
        "number",)
    changes, healed = nested_run([order(i) for i in range(3)], later, "r4")
    assert changes == [] and healed["lines[].quantity"].state == RECEIVED


def test_a_kind_its_declaration_names_is_no_change_and_an_object_for_an_array_is() -> None:
    _, known = nested_run([order(i) for i in range(3)], {}, "r1")  # the time of day as text
    parts = {"hour": 10, "minute": 0, "second": 0, "nano": 0}
    changes, after = nested_run([order(i, time=parts) for i in range(3)], known, "r2")
    assert changes == [] and after["when.time.hour"].records_read == 3  # the other form the spec shows
    wrapped = [{**order(i), "lines": {"line": 1}} for i in range(3)]
    changes, _ = nested_run(wrapped, after, "r3")
    assert [c.phrase() for c in changes] == ["lines array -> object in 3 of 3, 3 not read (null, "
                                             "freight_meta.data_problems)"]


def test_the_elements_of_an_array_of_objects_sent_as_another_kind_are_named_by_its_path() -> None:
    """Elements of a watched array that are not objects are never read (a data problem each, no row): the path
    is named retyped with counts (the keys inside say nothing: no object came), once, open until objects come
    again. A null element is none; a record that is not an object is counted at the top as before."""
    line = {"weight": 1.0, "quantity": 3, "note": None, "sub": []}
    _, known = nested_run([order(i) for i in range(3)], {}, "r1")
    assert "lines[]" not in known  # objects only: no field kept for the path
    mixed = [{**order(i), "lines": [dict(line), "12 kg", None, {**line, "sub": [7, [line]]}]} for i in range(3)]
    counted = FieldTally(NESTED)
    for record in mixed:
        counted.see(record, record["id"])
    assert {path: dict(e.kinds) for path, e in counted.elements.items()} == {
        "lines[]": {"text": 3, "number": 3, "array": 3}}
    assert counted.records_at(NESTED.paths["lines[]"]) == 6  # the objects alone
    merged = FieldTally(NESTED)
    merged.add(counted)
    merged.add(counted)
    assert dict(merged.elements["lines[]"].kinds) == {"text": 6, "number": 6, "array": 6}
    changes, after = compare("orders", NESTED, counted, known, "r2", AT)
    after = {state.field: state for state in after}
    assert [c.phrase() for c in changes] == [
        "lines[] object -> array/number/text in 9 of 15, 9 not read (not objects, freight_meta.data_problems)"]
    state = after["lines[]"]
    assert (state.state, state.path, state.key, state.kinds, state.unread) == (RETYPED, "lines[]", "", ("object",), 9)
    assert state.kinds_read == {"object": 6, "text": 3, "number": 3, "array": 3} and state.example_record_key == "0"
    assert after["lines[].weight"].state == RECEIVED
    changes, later = nested_run([{**order(i), "lines": ["a", "b"]} for i in range(3)], after, "r3")
    assert changes == [] and later["lines[]"].state == RETYPED and later["lines[]"].changed_run_id == "r2"
    assert later["lines[].weight"].state == RECEIVED, "no object came: its keys say nothing"
    changes, healed = nested_run([order(i) for i in range(3)], later, "r4")
    assert changes == [] and healed["lines[]"].state == RECEIVED and healed["lines[]"].unread == 0
    changes, still = nested_run([{**order(i), "lines": []} for i in range(3)], healed, "r5")
    assert changes == [] and still["lines[]"] == healed["lines[]"]  # nothing there: kept as it was
    top = FieldTally(NESTED)
    top.see_all([7, "x", {"id": 1, "lines": [None]}], 1)
    assert top.elements == {} and top.records_at(NESTED.top) == 3


@pytest.mark.parametrize(("held", "read", "lost"), [
    # a shape changed: a key renamed, dropped or retyped where objects of its path still come
    ([{"event": "A", "location": {"name": "x"}}], [{"event": "A", "place": {"name": "x"}}], ["location"]),
    ([{"event": "A", "location": {"name": "x", "unloc": "DEHAM"}}], [{"event": "A", "location": {"name": "x"}}],
     ["location.unloc"]),
    ({"goods": [{"weight": 1, "subgoods": [{"weight": 2}]}]}, {"goods": [{"gross_weight": 1, "subgoods": [{}]}]},
     ["goods[].subgoods[].weight", "goods[].weight"]),
    ([{"memo": "x", "running_number": 1}], [{"memo": "x", "running_number": "1"}], ["running_number"]),
    ([{"a": 1}, {"a": 2, "b": "x"}], [{"a": 3}], ["b"]),
    # values changed, the shape kept: nothing lost
    ([{"event": "A", "at": "2026-01-01"}], [{"event": "A", "at": "2026-02-01"}, {"event": "B", "at": None}], []),
    ([{"memo": "x"}], [{"memo": None}], []),  # a value sent as null: present
    ([{"memo": "x"}], [], []),  # every line removed: no object left to lack a key
    ([], [{"memo": "x"}], []),
    ({"goods": [{"weight": 1}]}, {"goods": []}, []),
    ([{"a": 1}], [{"a": 1, "b": 2}], []),  # a key added
    ([{"a": 1.5}], [{"a": 2}], []),  # a number either way
    (None, [{"a": 1}], []),
])
def test_the_fields_an_answer_read_again_lost_are_a_change_of_its_shape_not_of_its_values(
    held: object, read: object, lost: list[str]
) -> None:
    assert fields_lost(held, read) == lost


def test_a_value_a_key_s_record_cannot_be_loaded_without_is_said_as_what_became_of_the_record() -> None:
    """A key declared with its fate (``Key.unread``: a record's identity) says it where a column's value says it was
    nulled into the data problems."""
    shape = Shape.of("records", (Field("name", "VARCHAR"),),
                     Key("id", kinds=frozenset({NUMBER}), reads=to_int, unread="the record quarantined, Q"))
    counted = FieldTally(shape)
    for number in range(3):
        counted.see({"id": number, "name": "a"}, number)
    _, known = compare("records", shape, counted, {}, "r1", AT)
    counted = FieldTally(shape)
    for number in range(3):
        counted.see({"id": f"n{number}", "name": "a"}, number)
    changes, _ = compare("records", shape, counted, {state.field: state for state in known}, "r2", AT)
    assert [c.phrase() for c in changes] == ["id number -> text in 3 of 3, 3 not read (the record quarantined, Q)"]


def test_every_source_says_what_becomes_of_a_record_whose_id_cannot_be_read() -> None:
    """Every record's ``id`` read as its identity (``RECORD_ID``; not a column of that name, nor a zone offset's) at
    every level of every source the runs watch declares its fate: a shipment's document or a code conversion
    quarantined, a memo line left out and reported, a reference's kept as sent."""
    fates: dict[tuple[str, str], str | None] = {}

    def walk(source: str, node: Node, path: str) -> None:
        for key in node.keys:
            if key.unread_as("") == RECORD_ID.unread_as(""):  # RECORD_ID, whatever fate it declares
                fates[(source, f"{path}.id" if path else "id")] = key.unread
            if isinstance(key.node, Node):
                walk(source, key.node, f"{path}.{key.name}" if path else key.name)

    for source, shape in SOURCE_SHAPES.items():
        walk(source, shape.root, "")
    assert {source for source, _ in fates} == {"shipments", "shipment_memos", "code_conversions", "documents"}
    assert all(fates.values()), [where for where, fate in fates.items() if not fate]


def _as_received(value: object) -> object:
    """``value`` with every object and array in the classes a decoded answer comes in (``client._core.received``)."""
    if isinstance(value, dict):
        return ReceivedObject({key: _as_received(inner) for key, inner in value.items()}, b"")
    if isinstance(value, list):
        return ReceivedArray([_as_received(inner) for inner in value], b"")
    return value


def _counts_by_path(shape: Shape, record: dict[str, object]) -> dict[str, dict[str, tuple[int, dict[str, int]]]]:
    counted = FieldTally(shape)
    counted.see(record, 1)
    return {path: {key: (c.records, c.kinds) for key, c in counted.fields(watched).items()}
            for path, watched in shape.paths.items()}


EFILE = {"id": 5, "file_name": "invoice.pdf", "mime_type": "application/pdf", "description": "Invoice",
         "created_date_time": "2026-11-03T10:00:00", "references": [{"id": 1, "type": "SHIPMENT", "value": "1001"}],
         "roles": [{"id": 2, "role": "CUSTOMER"}]}


@pytest.mark.parametrize(("shape", "record", "nested"), [
    (DOCUMENT_SHAPE, samples.shipment(), {"goods[]", "addresses[]", "containers[]"}),
    (EFILE_SHAPE, EFILE, {"references[]", "roles[]"}),
], ids=["shipment", "e-file"])
def test_a_tally_counts_every_path_alike_whatever_classes_hold_the_objects_and_arrays(
    shape: Shape, record: dict[str, object], nested: set[str]
) -> None:
    """The E-File records hold the references' and roles' answers as decoded (``ReceivedArray``, a list's
    subclass): looked up by their exact class they were no array, the watcher never walked into them, and a
    reference's ``value`` renamed went null unsaid."""
    plain = _counts_by_path(shape, record)
    assert nested <= {path for path, fields in plain.items() if fields}, sorted(plain)
    assert _counts_by_path(shape, _as_received(record)) == plain  # type: ignore[arg-type]
