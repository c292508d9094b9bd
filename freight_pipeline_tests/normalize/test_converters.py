"""A value kept whole in a JSON column (``converters.json_or_report``): what JSON or UTF-8 cannot carry is written
otherwise, and each such value is reported at its own path, never changed without a trace."""

from __future__ import annotations

import unicodedata
from typing import Any

import duckdb
import pyarrow as pa

from freight_pipeline.normalize.converters import SPACE_SEPARATORS, code_of, json_or_report
from freight_pipeline.normalize.flatten import normalize_shipment, to_arrow_batch
from freight_pipeline.normalize.problems import Problems
from freight_pipeline.normalize.records import normalize_code_conversions
from freight_pipeline_tests.normalize import samples


def test_a_lone_surrogate_in_a_json_value_is_written_as_a_replacement_character_and_reported() -> None:
    problems = Problems()
    text = json_or_report({"name": "Ann", "notes": ["ok", "Zoll\udc00"], "\ud800key": 1}, "contact", problems)
    assert text == '{"name":"Ann","notes":["ok","Zoll\ufffd"],"\ufffdkey":1}'
    assert [(p.path, p.value) for p in problems] == [("contact.notes[1]", "Zoll\udc00"),
                                                     ("contact.\ufffdkey", "\ud800key")]
    assert all("lone surrogate" in p.reason for p in problems)
    # the paths are stored too: text that UTF-8 carries
    pa.array([p.path for p in problems], pa.string())


def test_a_clean_json_value_reports_nothing_even_with_a_replacement_character_sent() -> None:
    problems = Problems()
    assert json_or_report({"name": "\ufffd", "none": None}, "contact", problems) == '{"name":"\ufffd","none":null}'
    assert problems == []


def test_a_contact_with_a_lone_surrogate_in_a_field_no_column_reads_is_reported_and_stored() -> None:
    doc: dict[str, Any] = samples.shipment()
    doc["addresses"][0]["contact"] = {"name": "Ann", "department": "Zoll\udc00"}
    problems = Problems()
    rows = normalize_shipment(doc, problems)
    con = duckdb.connect()
    con.register("addresses", to_arrow_batch(rows)["shipment_addresses"])
    assert con.sql("SELECT contact_name, contact_json FROM addresses WHERE position = 1").fetchall() == [
        ("Ann", '{"department":"Zoll\ufffd","name":"Ann"}')]
    assert [p.path for p in problems] == ["addresses[0].contact.department"]


def test_a_code_conversion_field_read_into_a_column_is_reported_once_for_it() -> None:
    record = {**samples.code_conversion(3), "description": "a\ud800", "extra": float("nan")}
    problems = Problems()
    (row,) = normalize_code_conversions([record], problems)["code_conversions"]
    assert row.get("description") is None and '"extra":null' in row["payload"]
    assert [(p.path, p.reason.endswith("(lone surrogate)")) for p in problems] == [("[0].description", True),
                                                                                  ("[0].extra", False)]


def test_an_integer_beyond_64_bits_kept_in_a_json_column_is_reported_at_its_path() -> None:
    """orjson reads it as a float: the JSON column keeps the float (its digits lost), said at the value's path."""
    problems = Problems()
    text = json_or_report({"reference": {"number": float(340123456789012345678901), "exact": 10**18}}, "refs",
                          problems)
    assert text == '{"reference":{"exact":1000000000000000000,"number":3.4012345678901235e+23}}'
    assert [(p.path, p.reason) for p in problems] == [
        ("refs.reference.number", "3.4012345678901235e+23 is a number beyond 64 bits, read as a float: its digits are "
                                  "lost in the JSON column")]
    clean = Problems()
    json_or_report({"note": "1e+23 is text", "weight": 1.5e+18}, "x", clean)  # a look-alike text, a float in range
    assert clean == []


def test_a_code_is_read_as_the_marts_read_it_whatever_spaces_pad_it() -> None:
    """``code_of`` trims what DuckDB's ``trim`` trims (Unicode's space separators, the ideographic space that pads a
    fixed-width field too; not a tab) and upper-cases, as the marts' ``upper(trim(...))``: a mode the sync read
    otherwise than the marts lost the shipment's legs the marts still counted."""
    separators = {chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) == "Zs"}
    assert set(SPACE_SEPARATORS) == separators
    spellings = [None, "", "SEA", "sea", " Sea ", "\tSEA", "SEA\n", *(f"{s}sea{s}" for s in sorted(separators)), "air"]
    with duckdb.connect() as con:
        marts = [con.execute("SELECT coalesce(upper(trim(?)), '')", [text]).fetchone()[0] for text in spellings]
    assert [code_of(text) for text in spellings] == marts
    assert marts.count("SEA") == 3 + len(separators)
