"""The lookup engine without HTTP: nesting, None handling, 100k rows, the result cache."""

from __future__ import annotations

from typing import Any

import pytest

from freight_pipeline.simulator.lookup.match import run_lookup
from freight_pipeline.simulator.lookup.parse import parse_criteria, parse_page_request
from freight_pipeline.simulator.lookup.specs import SHIPMENT_SPEC, ResultCache, cached_lookup, equals_value
from freight_pipeline.simulator.lookup.types import MAX_NESTING, CriteriaError, PageRequest
from freight_pipeline.simulator.store_api import SHIPMENT_KEYS

SPEC = SHIPMENT_SPEC


def _row(i: int) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(SHIPMENT_KEYS, "x")
    row.update(
        ID=i,
        HBL=None if i % 3 == 0 else f"H{i % 50:03d}",
        CLIENT=f"C{i % 7}",
        RUNNING_SEQUENCE_NUMBER=i % 11,
        CUSTOMER_ADDRESS_NUMBER=i % 13,
        ADDRESS_REFERENCE=(f"R{i}", f"PO{i % 5}"),
        LAST_MODIFIED_DATE=f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}",
        LAST_MODIFIED_TIME=f"{i % 24:02d}:{i % 60:02d}:{(i * 7) % 60:02d}",
    )
    return row


def _ids(rows: list[dict[str, Any]], criteria: list[Any], order: tuple[tuple[str, bool], ...] = ()) -> list[int]:
    page = run_lookup(rows, parse_criteria(criteria, SPEC), PageRequest(0, 500, order), SPEC)
    return [r["ID"] for r in page.rows]


def test_nested_or_inside_and_group() -> None:
    rows = [_row(i) for i in range(1, 200)]
    criteria = [
        {
            "identifiers": [
                {"key": "CLIENT", "value": "C1"},
                {
                    "match_mode": "OR",
                    "identifiers": [
                        {"key": "ID", "match_mode": "LT", "value": 30},
                        {"key": "ID", "match_mode": "GT", "value": "180"},
                    ],
                },
            ]
        }
    ]
    expected = [r["ID"] for r in rows if r["CLIENT"] == "C1" and (r["ID"] < 30 or r["ID"] > 180)]
    assert _ids(rows, criteria) == expected


def test_none_never_matches_and_sorts_first_ascending() -> None:
    rows = [_row(i) for i in range(1, 30)]
    assert all(i % 3 for i in _ids(rows, [{"key": "HBL", "match_mode": "GE", "value": ""}]))
    ascending = _ids(rows, [], (("HBL", False),))
    assert ascending[: len([i for i in range(1, 30) if i % 3 == 0])] == [i for i in range(1, 30) if i % 3 == 0]
    descending = _ids(rows, [], (("HBL", True),))
    assert descending[-1] % 3 == 0


def test_criterion_with_own_value_joins_its_or_group() -> None:
    rows = [_row(i) for i in range(1, 50)]
    criteria = [{"key": "ID", "match_mode": "OR", "value": "3", "identifiers": [{"key": "ID", "value": 7}]}]
    assert _ids(rows, criteria) == [3, 7]


def test_nesting_depth_is_limited() -> None:
    criterion: dict[str, Any] = {"key": "ID", "value": "1"}
    for _ in range(MAX_NESTING + 2):
        criterion = {"match_mode": "OR", "identifiers": [criterion]}
    with pytest.raises(CriteriaError, match="nested deeper"):
        parse_criteria([criterion], SPEC)


def test_order_by_accepts_comma_separated_keys() -> None:
    request = parse_page_request(None, None, ["CLIENT,ID"], ["DESC,ASC"], SPEC)
    assert request.order == (("CLIENT", True), ("ID", False))


def test_100k_rows_page_of_a_full_scan_in_key_order() -> None:
    rows = [_row(i) for i in range(1, 100_001)]
    criteria = parse_criteria([{"key": "LAST_MODIFIED_DATE", "match_mode": "GE", "value": "2026-07-01"}], SPEC)
    order = (("LAST_MODIFIED_DATE", False), ("LAST_MODIFIED_TIME", False), ("ID", False))
    page = run_lookup(rows, criteria, PageRequest(10, 500, order), SPEC)
    def key(row: dict[str, Any]) -> tuple[str, str, int]:
        return row["LAST_MODIFIED_DATE"], row["LAST_MODIFIED_TIME"], row["ID"]

    expected = sorted(key(r) for r in rows if r["LAST_MODIFIED_DATE"] >= "2026-07-01")
    assert page.row_count == len(expected) < 100_000
    assert page.page_count == -(-len(expected) // 500)
    assert [key(r) for r in page.rows] == expected[5000:5500]


def test_result_cache_serves_pages_until_the_version_changes() -> None:
    rows = [_row(i) for i in range(1, 101)]
    calls: list[int] = []

    def source() -> list[dict[str, Any]]:
        calls.append(1)
        return rows

    cache = ResultCache()
    criteria = parse_criteria([{"key": "CLIENT", "value": "C1"}], SPEC)
    order = (("ID", True),)
    pages = [cached_lookup(source, criteria, PageRequest(n, 5, order), SPEC, cache, 1) for n in range(3)]
    assert len(calls) == 1  # one scan for three pages
    expected = sorted((r["ID"] for r in rows if r["CLIENT"] == "C1"), reverse=True)
    assert [r["ID"] for p in pages for r in p.rows] == expected[:15]
    rows.append({**_row(200), "CLIENT": "C1"})
    again = cached_lookup(source, criteria, PageRequest(0, 5, order), SPEC, cache, 2)
    assert len(calls) == 2
    assert again.rows[0]["ID"] == 200


def test_equals_value_finds_only_plain_top_level_equals() -> None:
    parsed = parse_criteria(
        [
            {"key": "CLIENT", "match_mode": "IN", "values": ["001"]},
            {"key": "SHIPMENT_NUMBER", "value": "S1"},
            {"match_mode": "OR", "identifiers": [{"key": "HBL", "value": "H1"}, {"key": "MBL", "value": "M1"}]},
        ],
        SPEC,
    )
    assert equals_value(parsed, "SHIPMENT_NUMBER") == "S1"
    assert equals_value(parsed, "CLIENT") is None
    assert equals_value(parsed, "HBL") is None
