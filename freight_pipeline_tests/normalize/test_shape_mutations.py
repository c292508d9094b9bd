"""Every key the declarations read, at every level, mutated one at a time in documents the simulator generates
(renamed, sent in another JSON kind, dropped from every object of its path): each mutation is either read as
before (the rows are the same) or named by the shape watcher (the key vanished, a new key came, or it was
retyped). The keys are enumerated from the sources' shapes (``sync.drift.SOURCE_SHAPES``), so a key or a
spec added later is tried without editing this test; in-process, no sync per key."""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from freight_pipeline.normalize.documents import document_row
from freight_pipeline.normalize.events import normalize_events
from freight_pipeline.normalize.flatten import normalize_shipment
from freight_pipeline.normalize.legs import normalize_main_carriage
from freight_pipeline.normalize.problems import Problems
from freight_pipeline.normalize.records import normalize_code_conversions, normalize_memos
from freight_pipeline.normalize.shapes import (
    RECEIVED,
    RETYPED,
    FieldTally,
    KnownField,
    Shape,
    WatchedPath,
    compare,
    compare_path,
    field_name,
)
from freight_pipeline.simulator.store import SimulatorStore
from freight_pipeline.sync.code_conversions import STREAM as CODE_CONVERSIONS
from freight_pipeline.sync.documents import STREAM as DOCUMENTS
from freight_pipeline.sync.drift import SOURCE_SHAPES
from freight_pipeline.sync.parts import AIR_LEGS, DOCUMENT, EVENTS, MEMOS, SEA_LEGS

AT = dt.datetime(2026, 12, 1, 9, 0, tzinfo=dt.UTC)
SHIPMENTS = 60
ENOUGH = 3
"""Records holding the key a case is tried on, at least (where the generated ones hold so many): after the
``N`` generated records that all had it, 3 without it are no accident, ``(1 / (N + 2)) ** 3``
(``KnownField.absent_by_accident``)."""
LONGER = 10
"""A key dropped is dropped from a run of at least this many times ``N + 2`` records (the chosen ones again),
after a first run of ``N`` records with objects of its path, ``W >= 1`` of which had it: no accident however
few had it, ``((N - W + 1) / (N + 2)) ** (LONGER * (N + 2))`` is below ``e ** -LONGER``."""
RENAMED = "_renamed"


@dataclass(frozen=True)
class Source:
    """A watched source's records as the sync reads them: each one tallied as the sync tallies it, and its rows."""

    name: str
    records: list[Any]
    keys: list[Any]
    rows: Callable[[Any, Any], Any]
    each: bool = False
    """The record is an array answer, its items tallied (``see_all``)."""

    def tally(self, shape: Shape, records: list[tuple[Any, Any]]) -> FieldTally:
        counted = FieldTally(shape)
        for key, record in records:
            (counted.see_all if self.each else counted.see)(record, key)
        return counted


def _rows_or_error(source: Source, key: Any, record: Any) -> Any:
    try:
        return source.rows(key, record)
    except Exception as exc:  # a record the mutation made unreadable (no id): rows that differ
        return f"{type(exc).__name__}: {exc}"


@pytest.fixture(scope="module")
def sources() -> dict[str, Source]:
    store = SimulatorStore(shipments=SHIPMENTS, seed=11)
    reader = store.reader
    ids = reader.live_shipment_ids()
    docs = [reader.get_shipment(i) for i in ids]
    air = [d["id"] for d in docs if d["mode_of_transport"] == "AIR"]
    sea = [d["id"] for d in docs if d["mode_of_transport"] == "SEA"]
    memos = [reader.memo_rows_of(d["client"], d["shipment_number"]) for d in docs]
    files = [{**row, "references": store.efiles.references(row["id"]), "roles": store.efiles.roles(row["id"])}
             for row in store.efiles.rows()]
    conversions = list(reader.code_conversion_rows())
    return {
        DOCUMENT: Source(DOCUMENT, docs, ids, lambda key, doc: normalize_shipment(doc, Problems())),
        EVENTS: Source(EVENTS, [reader.get_events(i) for i in ids], ids,
                       lambda key, events: normalize_events(key, events, Problems()), each=True),
        AIR_LEGS: Source(AIR_LEGS, [reader.get_air_main_carriage(i) for i in air], air,
                         lambda key, legs: normalize_main_carriage(key, legs, "air", Problems()), each=True),
        SEA_LEGS: Source(SEA_LEGS, [reader.get_sea_main_carriage(i) for i in sea], sea,
                         lambda key, legs: normalize_main_carriage(key, legs, "sea", Problems()), each=True),
        MEMOS: Source(MEMOS, memos, ids, lambda key, lines: normalize_memos(lines, {}, Problems()), each=True),
        CODE_CONVERSIONS: Source(CODE_CONVERSIONS, [[c] for c in conversions], [c["id"] for c in conversions],
                                 lambda key, records: normalize_code_conversions(records, Problems()), each=True),
        DOCUMENTS: Source(DOCUMENTS, files, [f["id"] for f in files],
                          lambda key, f: document_row(0, f, f.get("references") or [], f.get("roles") or [],
                                                      Problems())),
    }


def objects_by_path(shape: Shape, record: Any, each: bool) -> dict[str, list[dict[str, Any]]]:
    """Every object of ``record`` at each path (subgoods at any depth under ``goods[]``), as the tally walks."""
    found: dict[str, list[dict[str, Any]]] = {}

    def walk(watched: WatchedPath, objects: list[Any]) -> None:
        objects = [o for o in objects if isinstance(o, dict)]
        if not objects:
            return
        found.setdefault(watched.path, []).extend(objects)
        for names, array, child in watched.children:
            values = [v for o in objects if (v := next((o[n] for n in names if o.get(n) is not None), None))]
            if array:
                walk(child, [item for value in values if isinstance(value, list) for item in value])
            else:
                walk(child, [value for value in values if isinstance(value, dict)])

    items = record if each else [record]
    walk(shape.top, items if isinstance(items, list) else [])
    return found


def retyped(value: Any) -> Any:
    """``value`` in another JSON kind: a number as text, text or a boolean as an array, an object as an
    array, an array as an object."""
    if isinstance(value, bool):
        return [value]
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [value]
    if isinstance(value, list):
        return {"items": value}
    return value


MUTATIONS: dict[str, Callable[[dict[str, Any], str], None]] = {
    "renamed": lambda obj, key: obj.__setitem__(key + RENAMED, obj.pop(key)),
    "retyped": lambda obj, key: obj.__setitem__(key, retyped(obj[key])) if obj.get(key) is not None else None,
    "dropped": lambda obj, key: obj.pop(key),
}


@pytest.fixture(scope="module")
def baselines(sources: dict[str, Source]) -> dict[str, dict[str, dict[str, KnownField]]]:
    """Per source, path -> key -> its state after a first run that read every generated record (so a key
    absent from some of them is known as such: it did not always come)."""
    found: dict[str, dict[str, dict[str, KnownField]]] = {}
    for name, source in sources.items():
        shape = SOURCE_SHAPES[name]
        _, states = compare(name, shape, source.tally(shape, list(zip(source.keys, source.records, strict=True))),
                            {}, "r1", AT)
        for state in states:
            found.setdefault(name, {}).setdefault(state.path, {})[state.key] = state
    return found


def repeated(tally: FieldTally, records: int) -> FieldTally:
    """A tally of the records of ``tally`` read over and over (as more records, each alike), until at least
    ``records`` were read (doubling: a few additions)."""
    total = tally
    while total.records < records:
        doubled = FieldTally(tally.shape)
        doubled.add(total)
        doubled.add(total)
        total = doubled
    return total


@dataclass(frozen=True)
class Case:
    source: str
    path: str
    key: str

    @property
    def field(self) -> str:
        return field_name(self.path, self.key)


def cases() -> Iterator[Case]:
    for source, shape in SOURCE_SHAPES.items():
        for watched in shape.paths.values():
            for key in sorted(watched.declared):
                yield Case(source, watched.path, key)


def test_every_key_read_at_every_level_is_read_as_before_or_named(
    sources: dict[str, Source], baselines: dict[str, dict[str, dict[str, KnownField]]],
) -> None:
    """The first run reads every generated record; the second only records that held the key, mutated. A key
    that did not come in every record is dropped from a run ``LONGER`` times as long as the first."""
    tried: dict[str, int] = {}
    optional: list[str] = []  # the keys tried that did not come in every record with objects of their path
    absent: list[str] = []
    silent: list[str] = []
    all_cases = list(cases())
    walked = {name: [objects_by_path(SOURCE_SHAPES[name], record, source.each) for record in source.records]
              for name, source in sources.items()}
    rows: dict[tuple[str, int], Any] = {}  # (source, record) -> its rows as generated
    for case in all_cases:
        source, shape = sources[case.source], SOURCE_SHAPES[case.source]
        watched = shape.paths[case.path]
        chosen, holding = [], 0  # the records holding the key at the path, until there is evidence enough
        for index, objects in enumerate(walked[case.source]):
            if any(case.key in o for o in objects.get(case.path, ())):
                chosen.append(index)
                holding += 1
            if holding >= ENOUGH:
                break
        if not chosen:
            absent.append(f"{case.source}: {case.field}")
            continue
        repeat = -(-ENOUGH // len(chosen))  # a key few generated records hold: those again, as more records
        records = [(source.keys[i], source.records[i]) for i in chosen] * repeat
        chosen = chosen * repeat
        known = {key: state for key, state in baselines[case.source][case.path].items() if key}
        before = known[case.key]
        if not before.always_came():
            optional.append(f"{case.source}: {case.field} in {before.share():.0%} of {before.records_read_total}")
        holders = [o for i in dict.fromkeys(chosen) for o in walked[case.source][i].get(case.path, ()) if case.key in o]
        for name, mutate in MUTATIONS.items():
            kept = [(obj, list(obj.items())) for obj in holders]  # mutated in place, then put back as they were
            for obj in holders:
                mutate(obj, case.key)
            counted = source.tally(shape, records)
            if name == "dropped":
                counted = repeated(counted, LONGER * (before.records_read_total + 2))
            changes, _ = compare_path(case.source, shape.label, watched, counted, known, "r2", AT)
            named = {change.field for change in changes}
            mutated = [] if named & {case.field, case.field + RENAMED} else [
                _rows_or_error(source, key, record) for key, record in records]
            for obj, items in kept:
                obj.clear()
                obj.update(items)
            tried[name] = tried.get(name, 0) + 1
            for i, (key, record), rows_after in zip(chosen, records, mutated, strict=False):  # not named: as before?
                if (case.source, i) not in rows:
                    rows[(case.source, i)] = _rows_or_error(source, key, record)
                if rows_after != rows[(case.source, i)]:
                    silent.append(f"{case.source}: {case.field} {name} (named: {sorted(named)})")
                    break
    print(f"\n{len(all_cases)} keys declared; tried {tried} ({len(optional)} that did not come in every record); "
          f"{len(absent)} not in the generated documents")
    assert silent == [], "a mutation changed rows and nothing named it:\n" + "\n".join(silent)
    assert sum(tried.values()) >= 3 * 700, tried
    assert len(optional) >= 20, optional  # the keys a first run of records that all held them never tried


def test_every_key_the_simulator_sends_is_declared_at_every_level(sources: dict[str, Source]) -> None:
    """What the declarations do not name would be kept in the raw records only, and no mutation above tries it:
    the generated records carry no such key, at any path."""
    for name, source in sources.items():
        shape = SOURCE_SHAPES[name]
        changes, _ = compare(name, shape, source.tally(shape, list(zip(source.keys, source.records, strict=True))),
                             {}, "r1", AT)
        assert [change.phrase() for change in changes] == [], name


# --- the elements of every array of objects, sent as something else --------------------------------------

ELEMENTS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "text": lambda obj: str(next((v for v in obj.values() if isinstance(v, str | int | float)), "x")),
    "number": lambda obj: 7,
    "array": lambda obj: [obj],
}
"""An object element of an array, as another JSON kind: text (one of its values), a number, an array."""


def arrays_by_path(shape: Shape, record: Any, each: bool) -> dict[str, list[list[Any]]]:
    """Every array of ``record`` whose elements are the objects of a watched path below the top (``goods[]``:
    the goods and every subgoods array), as the tally walks them."""
    found: dict[str, list[list[Any]]] = {}

    def walk(watched: WatchedPath, objects: list[Any]) -> None:
        objects = [o for o in objects if isinstance(o, dict)]
        if not objects:
            return
        for names, array, child in watched.children:
            values = [v for o in objects if (v := next((o[n] for n in names if o.get(n) is not None), None))
                      is not None]
            if array:
                arrays = [value for value in values if isinstance(value, list)]
                found.setdefault(child.path, []).extend(arrays)
                walk(child, [item for value in arrays for item in value])
            else:
                walk(child, [value for value in values if isinstance(value, dict)])

    items = record if each else [record]
    walk(shape.top, items if isinstance(items, list) else [])
    return found


def array_paths() -> Iterator[tuple[str, str]]:
    """(source, path) of every array of objects the declarations name below the top of a record."""
    for source, shape in SOURCE_SHAPES.items():
        for path in shape.paths:
            if path.endswith("[]"):
                yield source, path


def test_every_array_of_objects_whose_elements_come_as_another_kind_is_named(
    sources: dict[str, Source], baselines: dict[str, dict[str, dict[str, KnownField]]],
) -> None:
    """Each array of objects the declarations name (goods and subgoods, hs codes, addresses and their
    references, containers, legs, location codes, E-File references...; enumerated from the shapes): its
    object elements sent as text, a number or an array in every record that holds one are never read (no row,
    a data problem each), so the watcher names the path retyped with its counts, once, and a run of objects
    there again resolves it."""
    paths = list(array_paths())
    assert {"goods[]", "goods[].hs_codes[]", "addresses[]", "addresses[].references[]", "containers[]",
            "main_carriage.carriage_legs[]"} <= {path for source, path in paths if source == DOCUMENT}
    tried: list[str] = []
    retyped_paths: list[str] = []
    absent: list[str] = []
    silent: list[str] = []
    for source_name, path in paths:
        source, shape = sources[source_name], SOURCE_SHAPES[source_name]
        walked = [arrays_by_path(shape, record, source.each) for record in source.records]
        chosen = [i for i, arrays in enumerate(walked) if any(isinstance(item, dict)
                                                              for array in arrays.get(path, ()) for item in array)]
        if not chosen:
            absent.append(f"{source_name}: {path}")
            continue
        records = [(source.keys[i], source.records[i]) for i in chosen]
        known = {state.field: state for states in baselines[source_name].values() for state in states.values()}
        assert path not in known, "the generated records send objects only"
        for kind, other in ELEMENTS.items():
            kept = [(array, list(array)) for i in chosen for array in walked[i][path]]
            for array, _ in kept:
                array[:] = [other(item) if isinstance(item, dict) else item for item in array]
            try:  # the elements a walk still reaches (subgoods inside a goods line sent as text are not)
                sent = sum(1 for _, record in records for array in arrays_by_path(shape, record, source.each)[path]
                           for item in array if item is not None)
                changes, states = compare(source_name, shape, source.tally(shape, records), known, "r2", AT)
                after = {state.field: state for state in states}
                again, _ = compare(source_name, shape, source.tally(shape, records), after, "r3", AT)
                named = {change.field: change for change in changes}
                mutated = [] if path in named else [_rows_or_error(source, key, record) for key, record in records]
            finally:
                for array, items in kept:
                    array[:] = items
            tried.append(f"{source_name}: {path} {kind}")
            if path not in named:  # not named: read as before?
                if mutated != [_rows_or_error(source, key, record) for key, record in records]:
                    silent.append(f"{source_name}: {path} elements as {kind} (named: {sorted(named)})")
                continue
            retyped_paths.append(f"{source_name}: {path} {kind}")
            change = named[path]
            assert (change.change, change.kinds_before, dict(change.kinds_new), change.unread) == (
                RETYPED, ("object",), {kind: sent}, sent), change
            assert change.phrase().startswith(f"{path} object -> {kind} in {sent:,} of {change.records_with:,}, "
                                              f"{sent:,} not read"), change.phrase()
            assert path not in {c.field for c in again}, "said once: the next run alike is no change"
            assert after[path].state == RETYPED and after[path].path == path and after[path].key == ""
            _, healed = compare(source_name, shape, source.tally(shape, records), after, "r4", AT)
            assert [state.state for state in healed if state.field == path] == [RECEIVED], "objects again: resolved"
    print(f"\n{len(paths)} arrays of objects declared; {len(tried)} element kinds tried, {len(retyped_paths)} named; "
          f"{len(absent)} not in the generated records: {absent}")
    assert silent == [], "elements sent as another kind changed rows and nothing named it:\n" + "\n".join(silent)
    assert len(tried) >= 3 * 20, tried


def _codes_reversed(record: Any) -> int:
    """Reverse, in place, every location's ``codes`` array of two or more codes under ``record``; how many."""
    reversed_arrays = 0
    if isinstance(record, dict):
        codes = record.get("codes")
        if isinstance(codes, list) and len(codes) > 1 and codes != codes[::-1]:
            codes.reverse()
            reversed_arrays += 1
        values: Any = record.values()
    else:
        values = record if isinstance(record, list) else ()
    return reversed_arrays + sum(_codes_reversed(value) for value in values)


def test_a_location_s_codes_in_another_order_give_the_same_rows(sources: dict[str, Source]) -> None:
    """The spec promises no order of a location's codes (a service may answer them from a set): every location of
    every source, its codes reversed, gives the rows of the codes as sent, so a re-read that only reordered them is
    no change (it was a false change of every sampled shipment's events, said as the service changing them without
    the stamp)."""
    reordered: dict[str, int] = {}
    for name, source in sources.items():
        for key, record in zip(source.keys, source.records, strict=True):
            flipped = copy.deepcopy(record)
            if count := _codes_reversed(flipped):
                reordered[name] = reordered.get(name, 0) + count
                assert source.rows(key, flipped) == source.rows(key, record), (name, key)
    assert {DOCUMENT, EVENTS, AIR_LEGS, SEA_LEGS} <= set(reordered), reordered
