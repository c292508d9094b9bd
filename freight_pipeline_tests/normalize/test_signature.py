"""The mapping's signature: the same in every process, every declaration written as data, and what a change
touches: the keys of a field whose sources changed, every record for anything else."""

from __future__ import annotations

import ast
import copy
import dataclasses
import hashlib
import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest

from freight_pipeline.config import REPO_ROOT
from freight_pipeline.normalize import flatten, signature
from freight_pipeline.normalize.converters import BIGINT, VARCHAR
from freight_pipeline.normalize.plain_fields import Field, compile_fields
from freight_pipeline.normalize.signature import EveryRecord, MappingSignature, current_signature, touched_keys
from freight_pipeline.normalize.specs import legs, shipments
from freight_pipeline.normalize.specs.shipments import SHIPMENT_FIELDS, SHIPMENT_TIMESTAMP_FIELDS

ZONE = "Europe/Berlin"


def _with_shipment_fields(monkeypatch: pytest.MonkeyPatch, change: dict[str, Field]) -> MappingSignature:
    """The signature once the shipments' fields named in ``change`` are declared (and compiled) as given."""
    fields = tuple(change.get(f.column, f) for f in SHIPMENT_FIELDS)
    monkeypatch.setattr(shipments, "SHIPMENT_FIELDS", fields)
    monkeypatch.setattr(flatten, "_SHIPMENT", compile_fields((*fields, *SHIPMENT_TIMESTAMP_FIELDS)))
    return current_signature(ZONE)


def test_the_signature_is_the_same_in_another_process_and_every_declaration_is_data() -> None:
    """No address, no order of a set or a hash seed: another process (another ``PYTHONHASHSEED``) signs the same
    mapping alike. A declaration the signature cannot write as data would make every rebuild re-derive every
    record: none is left."""
    here = current_signature(ZONE)
    assert here.declared is not None
    code = f"from freight_pipeline.normalize.signature import current_signature; print(current_signature({ZONE!r}).id)"
    there = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, check=True,
                           env={"PYTHONHASHSEED": "12345", "PATH": ""})
    assert there.stdout.strip() == here.id


def _written_out(sign: MappingSignature) -> str:
    text = json.dumps([sign.code, sign.declared], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def _leaves(value: object, path: tuple[object, ...] = ()) -> list[tuple[tuple[object, ...], object]]:
    """Every leaf of ``declared`` with its path (dict keys and list positions)."""
    if isinstance(value, dict):
        return [leaf for key, item in value.items() for leaf in _leaves(item, (*path, key))]
    if isinstance(value, list):
        return [leaf for index, item in enumerate(value) for leaf in _leaves(item, (*path, index))]
    return [(path, value)]


def _replaced(declared: object, path: tuple[object, ...], value: object) -> object:
    changed = copy.deepcopy(declared)
    inner = changed
    for step in path[:-1]:
        inner = inner[step]  # type: ignore[index]
    inner[path[-1]] = value  # type: ignore[index]
    return changed


def test_an_id_is_the_digest_of_what_it_signs_whether_or_not_the_last_one_is_reused() -> None:
    """The id of data equal to the last signature's is the last id: equal all through, types included. Each kind
    of leaf in the declarations is changed to a value ``==`` holds equal but JSON writes otherwise (``True`` and
    ``1``, ``0`` and ``False``, ``None`` and nothing), then to another value, and a signature equal to the first
    comes between each: every id is the digest of its own data."""
    fixed = current_signature(ZONE)
    assert fixed.id == _written_out(fixed)
    leaves = _leaves(fixed.declared)
    kinds = {type(value): (path, value) for path, value in reversed(leaves)}  # the first leaf of each kind
    look_alikes = {bool: lambda v: int(v), int: lambda v: bool(v) if v in (0, 1) else float(v),
                   str: lambda v: v + " ", type(None): lambda v: 0}
    assert {str, bool, type(None)} <= set(kinds) <= set(look_alikes), set(kinds)  # as _as_data writes them
    seen = {fixed.id}
    for kind, (path, value) in kinds.items():
        for other in (look_alikes[kind](value), [value]):
            changed = dataclasses.replace(fixed, declared=_replaced(fixed.declared, path, other))
            assert changed.id == _written_out(changed) and changed.id not in seen, (kind, path, other)
            seen.add(changed.id)
            again = dataclasses.replace(fixed, declared=copy.deepcopy(fixed.declared))  # equal, no object shared
            assert again.id == fixed.id
    reordered = dataclasses.replace(fixed, declared=dict(reversed(list(fixed.declared.items()))))
    assert reordered.id == fixed.id  # the keys are written sorted
    assert dataclasses.replace(fixed, code="another release").id == _written_out(
        dataclasses.replace(fixed, code="another release"))


def test_an_alias_added_or_removed_touches_only_its_new_key(monkeypatch: pytest.MonkeyPatch) -> None:
    fixed = current_signature(ZONE)
    before = _with_shipment_fields(monkeypatch, {"house_reference": Field("house_reference", VARCHAR)})
    assert touched_keys(fixed, before) == {"house_bill_number"}
    assert touched_keys(before, fixed) == {"house_bill_number"}
    assert touched_keys(fixed, fixed) == frozenset()


def test_keys_kept_in_another_order_touch_all_of_them(monkeypatch: pytest.MonkeyPatch) -> None:
    fixed = current_signature(ZONE)
    swapped = _with_shipment_fields(monkeypatch, {"house_reference": Field(
        "house_reference", VARCHAR, source=("house_bill_number", "house_reference"))})
    assert touched_keys(swapped, fixed) == {"house_reference", "house_bill_number"}


def test_a_description_touches_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    fixed = current_signature(ZONE)
    table = shipments.SHIPMENTS
    monkeypatch.setattr(shipments, "SHIPMENTS", dataclasses.replace(table, description="another", columns=tuple(
        dataclasses.replace(column, description="another") for column in table.columns)))
    described = _with_shipment_fields(monkeypatch, {"office": Field("office", VARCHAR, "where the shipment is run")})
    assert described.id == fixed.id
    assert touched_keys(described, fixed) == frozenset()


@pytest.mark.parametrize("change", ["a type", "a column", "the zone", "the zone's rules"])
def test_any_other_change_touches_every_record(monkeypatch: pytest.MonkeyPatch, change: str) -> None:
    fixed = current_signature(ZONE)
    if change == "a type":
        other = _with_shipment_fields(monkeypatch, {"office": Field("office", BIGINT)})
    elif change == "a column":
        other = _with_shipment_fields(monkeypatch, {"office": Field("office_name", VARCHAR, source="office")})
    elif change == "the zone":
        other = current_signature("America/New_York")
    else:  # an update of the zone database (the system's, or the tzdata package's)
        monkeypatch.setattr(signature, "_zone_rules", lambda name: "the rules of another year")
        other = current_signature(ZONE)
    touched = touched_keys(other, fixed)
    assert isinstance(touched, EveryRecord)
    because = "the code changed" if change.startswith("the zone") else "the declarations changed in more than"
    assert touched.why.startswith(because) and fixed.id in touched.why, touched.why


def test_a_declaration_made_of_a_lambda_cannot_be_signed_so_every_record_is_touched(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A lambda (or a nested function) is known by its name only, which does not say what it does."""
    fixed = current_signature(ZONE)
    monkeypatch.setattr(shipments, "SHIPMENT_FIELDS", (*SHIPMENT_FIELDS, lambda record: record.get("office")))
    unsigned = current_signature(ZONE)
    assert unsigned.declared is None
    assert touched_keys(fixed, unsigned) == EveryRecord(
        f"mapping {unsigned.id}, which derived rows held, declared a function its signature could not read")
    assert touched_keys(unsigned, fixed) == EveryRecord(
        "this version's declarations hold a function its signature cannot read (a lambda or a nested function)")


def test_the_declaration_modules_only_declare() -> None:
    """What a declaration module does at its top level is all in the signature: imports, assignments to names,
    functions and classes (their source is in ``code``). A statement that changes another module's state
    (``CONVERTERS[...] = ...``, a call) would change rows without changing the signature."""
    allowed = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef)
    for module in signature._declaration_modules():
        tree = ast.parse(Path(module.__file__ or "").read_text())
        for node in tree.body:
            docstring = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
            named = (isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets)) or (
                isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name))
            assert docstring or named or isinstance(node, allowed), (
                f"{module.__name__}:{node.lineno}: {ast.unparse(node)[:80]}")


def test_code_that_differs_or_a_declaration_not_written_as_data_touches_every_record() -> None:
    fixed = current_signature(ZONE)
    code_changed = touched_keys(dataclasses.replace(fixed, code="another release"), fixed)
    assert isinstance(code_changed, EveryRecord)
    assert code_changed.why.startswith(f"the code changed since mapping {fixed.id}")
    not_data = touched_keys(dataclasses.replace(fixed, declared=None), fixed)
    assert isinstance(not_data, EveryRecord) and not_data.why.startswith("this version's declarations hold a function")
    assert touched_keys(MappingSignature.from_json(fixed.as_json()), fixed) == frozenset()


@pytest.mark.parametrize("source", [name for name in inspect.signature(legs.LegEnd).parameters if name != "end"])
def test_an_alias_of_any_key_of_a_leg_end_declared_as_the_docs_say_touches_only_its_new_key(
    monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    """Each key a leg's end reads is given where the ends are declared (``LEG_ENDS``): an alias there is data, which
    narrows a rebuild to the shipments whose raw names it. Written in the class's body, it was a change of the code:
    every shipment re-derived, "the code changed" said of a mapping whose code had not."""
    fixed = current_signature(ZONE)
    key = inspect.signature(legs.LegEnd).parameters[source].default
    aliased = legs.LegEnd("origin", **{source: (key, "renamed_in_a_release")})
    monkeypatch.setattr(legs, "LEG_ENDS", (aliased, *legs.LEG_ENDS[1:]))
    assert touched_keys(current_signature(ZONE), fixed) == {"renamed_in_a_release"}
