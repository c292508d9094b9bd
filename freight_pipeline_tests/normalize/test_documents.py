"""The rows of E-Files (``normalize.documents``): a value the service may send that no column can hold
(text with a lone surrogate, NaN, nesting too deep) is null or replaced and reported, never an error
that stops the documents of every shipment."""

from __future__ import annotations

import json
from typing import Any

import duckdb
import pytest

from freight_pipeline.normalize.documents import SHIPMENT_DOCUMENTS, document_row
from freight_pipeline.normalize.errors import RecordShapeError
from freight_pipeline.normalize.problems import Problems

EFILE: dict[str, Any] = {"id": 7, "file_name": "invoice.pdf", "mime_type": "application/pdf", "description": "Invoice",
                         "created_date_time": "2026-11-01T10:00:00+01:00"}
REFERENCES: list[Any] = [{"id": 1, "type": "SHIPMENT", "value": "10001"}, {"id": 2, "type": "HBL", "value": "X1"}]
ROLES: list[Any] = [{"id": 1, "role": "OPERATIONS"}]


def _deep(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


def stored(row: dict[str, Any]) -> tuple[Any, ...]:
    """``row`` as DuckDB holds it once written, the JSON columns as text."""
    con = duckdb.connect()
    con.execute("CREATE SCHEMA freight")
    con.execute(SHIPMENT_DOCUMENTS.ddl())
    con.register("new_rows", SHIPMENT_DOCUMENTS.to_arrow([row]))
    con.execute("INSERT INTO freight.shipment_documents SELECT *, now(), 'run' FROM new_rows")
    result = con.execute("SELECT file_name, mime_type, description, created_date_time, CAST(document_references AS "
                         "VARCHAR), CAST(roles AS VARCHAR) FROM freight.shipment_documents").fetchall()
    return result[0]


@pytest.mark.parametrize(
    ("efile", "references", "roles", "path", "held"),
    [
        ({**EFILE, "file_name": "bad\ud800.pdf"}, REFERENCES, ROLES, "file_name", {"file_name": None}),
        ({**EFILE, "description": "\udfff"}, REFERENCES, ROLES, "description", {"description": None}),
        ({**EFILE, "created_date_time": "2026-11-01T10:00:00Z\ud800"}, REFERENCES, ROLES, "created_date_time",
         {"created_date_time": None}),
        (EFILE, [*REFERENCES, {"id": 3, "type": "NOTE", "value": "x\udc00"}], ROLES, "references[2].value",
         {"document_references": [*REFERENCES, {"id": 3, "type": "NOTE", "value": "x\ufffd"}]}),
        (EFILE, [*REFERENCES, {"id": 3, "type": "NOTE", "value": float("nan")}], ROLES, "references[2].value",
         {"document_references": [*REFERENCES, {"id": 3, "type": "NOTE", "value": None}]}),
        (EFILE, [*REFERENCES, "HBL X1"], ROLES, "references[2]", {"document_references": REFERENCES}),
        (EFILE, REFERENCES, [*ROLES, {"id": 2, "role": _deep(5_000)}], "roles", {"roles": None}),
        (EFILE, REFERENCES, [*ROLES, {"id": 2, "role": float("inf")}], "roles[1]", {"roles": ["OPERATIONS", None]}),
    ],
    ids=["file_name-surrogate", "description-surrogate", "created-surrogate", "reference-surrogate",
         "reference-nan", "reference-not-an-object", "role-too-deep", "role-infinity"],
)
def test_a_value_no_column_can_hold_is_reported_and_the_row_is_written(
    efile: dict[str, Any], references: list[Any], roles: list[Any], path: str, held: dict[str, Any]
) -> None:
    found = Problems()
    row = document_row(10001, efile, references, roles, found)
    file_name, mime_type, description, created, document_references, role_text = stored(row)
    as_held = {"file_name": file_name, "mime_type": mime_type, "description": description,
               "created_date_time": created,
               "document_references": None if document_references is None else json.loads(document_references),
               "roles": None if role_text is None else json.loads(role_text)}
    clean = {**as_held, "file_name": EFILE["file_name"], "description": EFILE["description"],
             "created_date_time": EFILE["created_date_time"], "document_references": REFERENCES,
             "roles": ["OPERATIONS"], **held}
    assert as_held == clean
    assert [p.path for p in found] == [path]


def test_the_json_columns_of_a_clean_file_keep_the_text_always_written() -> None:
    """Held rows are compared with new ones as text: a clean file's JSON is written as before (json.dumps)."""
    found = Problems()
    row = document_row(10001, EFILE, [{"value": "Zürich", "type": "PLACE", "id": 5}], ["OPS", "ACC"], found)
    assert found == []
    assert row["document_references"] == '[{"id": 5, "type": "PLACE", "value": "Z\\u00fcrich"}]'
    assert row["roles"] == '["OPS", "ACC"]'
    # a role sent as an object keeps its keys' order, as json.dumps always wrote roles (unsorted)
    row = document_row(10001, EFILE, [], [{"id": 1, "role": {"name": "Operations", "code": "OPS"}}], found)
    assert found == [] and row["roles"] == '[{"name": "Operations", "code": "OPS"}]'


@pytest.mark.parametrize("efile_id", [2**63, -(2**63) - 1, True, 1.0, "5", None])
def test_an_efile_id_no_bigint_holds_is_refused_naming_the_file(efile_id: Any) -> None:
    with pytest.raises(RecordShapeError, match="E-File without a usable id"):
        document_row(10001, {**EFILE, "id": efile_id}, REFERENCES, ROLES, Problems())


@pytest.mark.parametrize(("references", "roles"), [
    ([{"id": 1, "type": "SHIPMENT", "value": "10001"}], [{"id": 1, "role": "CUSTOMS"}]),
    ([{"id": 1, "reference_key": "SHIPMENT", "reference": "10001"}], [{"id": 1, "name": "CUSTOMS"}]),
    ([{"id": 1, "key": "SHIPMENT", "value": "10001"}], [{"id": 1, "role": "CUSTOMS"}]),
    ([{"id": 1, "referenceType": "SHIPMENT", "referenceValue": "10001"}], [{"id": 1, "name": "CUSTOMS"}]),
], ids=["type-value", "reference_key", "key", "camelCase"])
def test_references_and_roles_of_the_shapes_services_send_are_read(references: list[Any], roles: list[Any]) -> None:
    """The spec shows no EFileReference nor EFileRole field: the shapes services send are read alike (a reference as
    ``{key, value}`` or ``{referenceType, referenceValue}``, a role as ``{name}`` were stored as nulls in silence)."""
    found = Problems()
    row = document_row(10001, EFILE, references, roles, found)
    assert json.loads(row["document_references"]) == [{"id": 1, "type": "SHIPMENT", "value": "10001"}]
    assert json.loads(row["roles"]) == ["CUSTOMS"] and list(found) == []


def test_a_reference_or_role_of_a_shape_no_name_reads_is_a_data_problem_naming_its_fields() -> None:
    found = Problems()
    row = document_row(10001, EFILE, [{"id": 1, "kind": "SHIPMENT", "ref": "10001"}], [{"id": 2, "title": "X"}],
                       found)
    assert json.loads(row["document_references"]) == [{"id": 1, "type": None, "value": None}]
    assert json.loads(row["roles"]) == [None]
    assert [(problem.path, problem.reason) for problem in found] == [
        ("references[0]", "none of type, reference_key, key, referenceType, value, reference, referenceValue in it: "
                          "its fields kind, ref are not read (kept in the raw answer)"),
        ("roles[0]", "none of role, name in it: its fields title are not read (kept in the raw answer)")]
