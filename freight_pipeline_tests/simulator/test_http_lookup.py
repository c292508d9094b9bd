"""Shipment, memo and code-conversion lookups: match modes, ordering, paging, headers, 400s."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

import httpx
import pytest

from freight_pipeline.simulator.config import FaultConfig
from freight_pipeline.simulator.server import RunningSimulator
from freight_pipeline.simulator.store_api import SHIPMENT_KEYS
from freight_pipeline_tests.simulator.conftest import authed_client, lookup_all, reference_ids, reference_match

LOOKUP = "/service/shipment/lookup"


def _rows(sim: RunningSimulator) -> list[Mapping[str, Any]]:
    return sorted(sim.store.reader.shipment_key_rows(), key=lambda r: r["ID"])


def _ids(client: httpx.Client, criteria: list[Any], **params: Any) -> list[int]:
    return [s["id"] for s in lookup_all(client, LOOKUP, criteria, **params)]


def _sample_value(sim: RunningSimulator, key: str) -> Any:
    rows = _rows(sim)
    for row in rows[len(rows) // 2 :] + rows:
        value = row[key]
        if isinstance(value, tuple):
            value = value[0] if value else None
        if value is not None:
            return value
    pytest.fail(f"the seeded simulator has no value for {key}: the test has nothing to look up")


@pytest.mark.parametrize("key", SHIPMENT_KEYS)
def test_equals_on_every_shipment_key(shared_sim: RunningSimulator, shared_client: httpx.Client, key: str) -> None:
    value = _sample_value(shared_sim, key)
    expected = reference_ids(shared_sim.store, lambda r: reference_match(r, key, "EQUALS", [value]))
    assert expected
    assert _ids(shared_client, [{"key": key, "match_mode": "EQUALS", "value": str(value)}]) == expected
    # match_mode defaults to EQUALS
    assert _ids(shared_client, [{"key": key, "value": str(value)}]) == expected


@pytest.mark.parametrize("mode", ["GT", "LT", "GE", "LE"])
@pytest.mark.parametrize("key", ["ID", "LAST_MODIFIED_DATE", "CREATION_DATE", "RUNNING_SEQUENCE_NUMBER"])
def test_comparisons(shared_sim: RunningSimulator, shared_client: httpx.Client, key: str, mode: str) -> None:
    value = _sample_value(shared_sim, key)
    expected = reference_ids(shared_sim.store, lambda r: reference_match(r, key, mode, [value]))
    got = _ids(shared_client, [{"key": key, "match_mode": mode, "value": str(value)}])
    assert got == expected
    assert got != [r["ID"] for r in _rows(shared_sim)]  # the criterion was applied


def test_id_compares_as_integer(shared_sim: RunningSimulator, shared_client: httpx.Client) -> None:
    every = [r["ID"] for r in _rows(shared_sim)]
    assert max(every) < 100000  # five digits: as strings they would all sort after "100000"
    assert _ids(shared_client, [{"key": "ID", "match_mode": "LT", "value": "100000"}]) == every
    assert _ids(shared_client, [{"key": "ID", "match_mode": "GT", "value": "100000"}]) == []
    assert _ids(shared_client, [{"key": "ID", "match_mode": "GE", "value": "9"}]) == every


def test_contains_is_case_insensitive(shared_sim: RunningSimulator, shared_client: httpx.Client) -> None:
    number = str(_sample_value(shared_sim, "SHIPMENT_NUMBER"))
    part = number[1:-1].lower() if len(number) > 2 else number.lower()
    expected = reference_ids(shared_sim.store, lambda r: reference_match(r, "SHIPMENT_NUMBER", "CONTAINS", [part]))
    got = _ids(shared_client, [{"key": "SHIPMENT_NUMBER", "match_mode": "CONTAINS", "value": part}])
    assert got == expected
    assert len(got) >= 1


def test_address_reference_matches_any_reference(shared_sim: RunningSimulator, shared_client: httpx.Client) -> None:
    row = next(r for r in _rows(shared_sim) if len(r["ADDRESS_REFERENCE"]) >= 1)
    last = row["ADDRESS_REFERENCE"][-1]
    got = _ids(shared_client, [{"key": "ADDRESS_REFERENCE", "value": last}])
    assert row["ID"] in got
    assert got == reference_ids(shared_sim.store, lambda r: last in r["ADDRESS_REFERENCE"])


def test_in_values_and_comma_value(shared_sim: RunningSimulator, shared_client: httpx.Client) -> None:
    rows = _rows(shared_sim)
    numbers = [rows[1]["SHIPMENT_NUMBER"], rows[5]["SHIPMENT_NUMBER"], "NO-SUCH-NUMBER"]
    expected = reference_ids(shared_sim.store, lambda r: r["SHIPMENT_NUMBER"] in numbers)
    assert len(expected) >= 2
    assert _ids(shared_client, [{"key": "SHIPMENT_NUMBER", "match_mode": "IN", "values": numbers}]) == expected
    comma = ",".join(numbers)
    assert _ids(shared_client, [{"key": "SHIPMENT_NUMBER", "match_mode": "IN", "value": comma}]) == expected
    # values with EQUALS behaves as IN; OR without identifiers behaves as IN
    assert _ids(shared_client, [{"key": "SHIPMENT_NUMBER", "values": numbers}]) == expected
    assert _ids(shared_client, [{"key": "SHIPMENT_NUMBER", "match_mode": "OR", "values": numbers}]) == expected
    ids = [rows[0]["ID"], rows[3]["ID"]]
    assert _ids(shared_client, [{"key": "ID", "match_mode": "IN", "values": ids}]) == sorted(ids)


def test_or_identifiers_and_and_groups(shared_sim: RunningSimulator, shared_client: httpx.Client) -> None:
    rows = _rows(shared_sim)
    a, b = rows[2], rows[7]
    or_criterion = {
        "match_mode": "OR",
        "identifiers": [
            {"key": "ID", "value": str(a["ID"])},
            {"key": "SHIPMENT_NUMBER", "value": b["SHIPMENT_NUMBER"]},
        ],
    }
    expected = reference_ids(
        shared_sim.store, lambda r: r["ID"] == a["ID"] or r["SHIPMENT_NUMBER"] == b["SHIPMENT_NUMBER"]
    )
    assert _ids(shared_client, [or_criterion]) == expected
    # top-level criteria are AND-ed with the OR group
    direction = a["DIRECTION"]
    expected_and = [i for i in expected if i in reference_ids(shared_sim.store, lambda r: r["DIRECTION"] == direction)]
    assert _ids(shared_client, [or_criterion, {"key": "DIRECTION", "value": direction}]) == expected_and
    # identifiers on another match mode form an AND group
    group = {
        "match_mode": "EQUALS",
        "identifiers": [{"key": "DIRECTION", "value": direction}, {"key": "CLIENT", "value": a["CLIENT"]}],
    }
    expected_group = reference_ids(
        shared_sim.store, lambda r: r["DIRECTION"] == direction and r["CLIENT"] == a["CLIENT"]
    )
    assert _ids(shared_client, [group]) == expected_group


def _sort_key(row: Mapping[str, Any], key: str) -> tuple[int, Any]:
    value = row[key]
    return (0, 0) if value is None else (1, value)


@pytest.mark.parametrize(
    ("order_by", "order_mode"),
    [
        (["CLIENT", "LAST_MODIFIED_DATE", "LAST_MODIFIED_TIME"], ["ASC", "DESC", "DESC"]),
        (["MODE_OF_TRANSPORT", "ID"], ["DESC", "DESC"]),
        (["LAST_MODIFIED_DATE", "LAST_MODIFIED_TIME", "ID"], []),
        (["DIRECTION"], ["DESC"]),
    ],
)
def test_ordering(
    shared_sim: RunningSimulator, shared_client: httpx.Client, order_by: list[str], order_mode: list[str]
) -> None:
    rows = sorted(_rows(shared_sim), key=lambda r: r["ID"])
    for i in reversed(range(len(order_by))):
        descending = i < len(order_mode) and order_mode[i] == "DESC"
        rows.sort(key=lambda r, k=order_by[i]: _sort_key(r, k), reverse=descending)
    got = _ids(shared_client, [], order_by=order_by, order_mode=order_mode)
    assert got == [r["ID"] for r in rows]


def test_default_order_is_id_ascending(shared_sim: RunningSimulator, shared_client: httpx.Client) -> None:
    assert _ids(shared_client, []) == [r["ID"] for r in _rows(shared_sim)]


def test_page_headers_first_middle_last_and_beyond(shared_sim: RunningSimulator, shared_client: httpx.Client) -> None:
    total = len(_rows(shared_sim))
    size = 7
    pages = math.ceil(total / size)
    assert pages >= 3
    seen: list[int] = []
    for page_no in range(pages):
        response = shared_client.post(LOOKUP, json=[], params={"page_no": page_no, "page_size": size})
        assert response.status_code == 200
        assert response.headers["X-Page-Count"] == str(pages)
        assert response.headers["X-Row-Count"] == str(total)
        expected_len = size if page_no < pages - 1 else total - size * (pages - 1)
        assert len(response.json()) == expected_len
        seen += [s["id"] for s in response.json()]
    assert seen == [r["ID"] for r in _rows(shared_sim)]
    beyond = shared_client.post(LOOKUP, json=[], params={"page_no": pages, "page_size": size})
    assert beyond.json() == []
    assert beyond.headers["X-Page-Count"] == str(pages)
    assert beyond.headers["X-Row-Count"] == str(total)


def test_default_paging_is_50(shared_sim: RunningSimulator, shared_client: httpx.Client) -> None:
    response = shared_client.post(LOOKUP, json=[])
    total = len(_rows(shared_sim))
    assert len(response.json()) == min(50, total)
    assert response.headers["X-Page-Count"] == str(math.ceil(total / 50))


def test_empty_result_headers(shared_client: httpx.Client) -> None:
    response = shared_client.post(LOOKUP, json=[{"key": "HBL", "value": "NO-SUCH-HBL"}])
    assert response.status_code == 200
    assert response.json() == []
    assert response.headers["X-Page-Count"] == "0"
    assert response.headers["X-Row-Count"] == "0"


def test_lookup_returns_base_shipments(shared_sim: RunningSimulator, shared_client: httpx.Client) -> None:
    first = shared_client.post(LOOKUP, json=[], params={"page_size": 1}).json()[0]
    assert first == shared_sim.store.reader.get_base_shipment(first["id"])
    assert "goods" not in first


@pytest.mark.parametrize(
    ("params", "body", "fragment"),
    [
        ({}, b"[{", "malformed JSON"),
        ({}, b'{"key": "ID", "value": "1"}', "JSON array"),
        ({}, b'[{"key": "COLOUR", "value": "red"}]', "unknown key 'COLOUR'"),
        ({}, b'[{"key": "ID", "match_mode": "LIKE", "value": "1"}]', "unknown match_mode 'LIKE'"),
        ({}, b'[{"key": "ID", "match_mode": "EQUALS"}]', "missing value for key ID"),
        ({}, b'[{"key": "ID", "value": "abc"}]', "must be an integer"),
        ({}, b'[{"key": "ID", "values": "1"}]', "values must be a non-empty JSON array"),
        ({}, b'[{"key": "ID", "value": "1", "matchMode": "GT"}]', "unknown field"),
        ({}, b'["ID"]', "must be a JSON object"),
        ({}, b'[{"match_mode": "OR", "identifiers": [{"key": "NOPE", "value": "1"}]}]', "unknown key 'NOPE'"),
        ({"page_size": "0"}, b"[]", "page_size must be between 1 and 500"),
        ({"page_size": "501"}, b"[]", "page_size must be between 1 and 500"),
        ({"page_size": "ten"}, b"[]", "page_size must be an integer"),
        ({"page_no": "-1"}, b"[]", "page_no must be 0 or greater"),
        ({"order_by": "COLOUR"}, b"[]", "unknown order_by key 'COLOUR'"),
        ({"order_by": "ID", "order_mode": "UP"}, b"[]", "unknown order_mode 'UP'"),
        ({"order_by": "ID", "order_mode": ["ASC", "DESC"]}, b"[]", "2 order_mode values"),
    ],
)
def test_bad_lookup_requests(shared_client: httpx.Client, params: dict[str, Any], body: bytes, fragment: str) -> None:
    response = shared_client.post(LOOKUP, params=params, content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 400, response.text
    assert fragment in response.json()["message"]
    assert response.json()["error"] == "Bad Request"


MEMO_LOOKUP = "/service/shipment/memo/lookup"


@pytest.mark.parametrize(
    ("path", "criterion", "fragment"),
    [
        (LOOKUP, {"key": "LAST_MODIFIED_DATE", "value": "2026-11-1"},
         "'2026-11-1' for key LAST_MODIFIED_DATE must be a date YYYY-MM-DD"),
        (LOOKUP, {"key": "CREATION_DATE", "match_mode": "GE", "value": "2026-02-30"}, "must be a date YYYY-MM-DD"),
        (LOOKUP, {"key": "LAST_MODIFIED_TIME", "value": "9:00:00"},
         "'9:00:00' for key LAST_MODIFIED_TIME must be a time HH:MM:SS"),
        (LOOKUP, {"key": "LAST_MODIFIED_TIME", "match_mode": "GT", "value": "09:00"}, "must be a time HH:MM:SS"),
        (LOOKUP, {"key": "SHIPMENT_CLOSED", "value": "Y"}, "'Y' for key SHIPMENT_CLOSED must be one of J, N"),
        (LOOKUP, {"key": "DIRECTION", "value": "X"}, "'X' for key DIRECTION must be one of I, E"),
        (LOOKUP, {"key": "MODE_OF_TRANSPORT", "match_mode": "IN", "value": "SEA,TRUCK"},
         "'TRUCK' for key MODE_OF_TRANSPORT must be one of SEA, AIR, RD, RL"),
        (LOOKUP, {"key": "CUSTOMER_ADDRESS_TYPE", "values": ["K", "Z"]},
         "'Z' for key CUSTOMER_ADDRESS_TYPE must be one of D, K, G, P, A"),
        (LOOKUP, {"key": "MONTH_OF_SERVICE", "value": "2026-13"}, "must be a month YYYY-MM"),
        (LOOKUP, {"key": "CUSTOMER_ADDRESS_NUMBER", "value": "12a"},
         "'12a' for key CUSTOMER_ADDRESS_NUMBER must be an integer"),
        (LOOKUP, {"key": "RUNNING_SEQUENCE_NUMBER", "match_mode": "GT", "value": 1.5}, "must be an integer"),
        (LOOKUP, {"match_mode": "OR", "identifiers": [{"key": "DIRECTION", "value": "e"}]}, "must be one of I, E"),
        (LOOKUP, {"key": "ID", "value": "1", "values": ["2"]}, "give value or values, not both"),
        (MEMO_LOOKUP, {"key": "RUNNING_NUMBER", "value": "first"}, "must be an integer"),
        (MEMO_LOOKUP, {"key": "CLIENT", "value": "001", "values": ["002"]}, "not both"),
        ("/service/basicdata/codeconverter/lookup", {"key": "DIRECTION", "value": "E"},
         "'E' for key DIRECTION must be one of I, O"),
        ("/service/efile/lookup", {"key": "SHIPMENT_ID", "value": "abc"},
         "'abc' for key SHIPMENT_ID must be an integer"),
    ],
)
def test_lookup_values_are_checked(
    shared_client: httpx.Client, path: str, criterion: dict[str, Any], fragment: str
) -> None:
    response = shared_client.post(path, json=[criterion])
    assert response.status_code == 400, response.text
    assert fragment in response.json()["message"]


@pytest.mark.parametrize(("key", "needle"), [("LAST_MODIFIED_DATE", "-10-"), ("ID", "00"), ("DIRECTION", "x")])
def test_contains_is_free_text_on_every_key(
    shared_sim: RunningSimulator, shared_client: httpx.Client, key: str, needle: str
) -> None:
    expected = reference_ids(shared_sim.store, lambda r: needle.lower() in str(r[key]).lower())
    assert _ids(shared_client, [{"key": key, "match_mode": "CONTAINS", "value": needle}]) == expected
    assert bool(expected) == (key != "DIRECTION")


def test_page_size_500_is_allowed(shared_client: httpx.Client) -> None:
    assert shared_client.post(LOOKUP, json=[], params={"page_size": 500}).status_code == 200


# --- memos and code conversions ---------------------------------------------------------------------


def test_memo_lookup_scroll_and_retrieve(shared_sim: RunningSimulator, shared_client: httpx.Client) -> None:
    memos = list(shared_sim.store.reader.memo_rows())
    assert memos
    target = memos[len(memos) // 2]
    criteria = [
        {"key": "CLIENT", "value": target["client"]},
        {"key": "SHIPMENT_NUMBER", "value": target["shipment_number"]},
    ]
    found = lookup_all(shared_client, MEMO_LOOKUP, criteria)
    expected = [
        m for m in memos if m["client"] == target["client"] and m["shipment_number"] == target["shipment_number"]
    ]
    assert found == sorted(expected, key=lambda m: m["id"])
    by_running = lookup_all(
        shared_client,
        "/service/shipment/memo/lookup",
        [{"key": "RUNNING_NUMBER", "match_mode": "GE", "value": "2"}],
        order_by="RUNNING_NUMBER",
        order_mode="DESC",
    )
    assert [m["running_number"] for m in by_running] == sorted(
        (m["running_number"] for m in memos if m["running_number"] >= 2), reverse=True
    )
    scrolled: list[dict[str, Any]] = []
    page_no = 0
    while True:
        page = shared_client.get("/service/shipment/memo", params={"page_no": page_no, "page_size": 3})
        assert page.status_code == 200
        assert page.headers["X-Row-Count"] == str(len(memos))
        assert page.headers["X-Page-Count"] == str(math.ceil(len(memos) / 3))
        if not page.json():
            break
        scrolled += page.json()
        page_no += 1
    assert [m["id"] for m in scrolled] == sorted(m["id"] for m in memos)
    assert shared_client.get(f"/service/shipment/memo/{target['id']}").json() == target
    other_client = next(c for c in ("001", "002", "005", "010") if c != target["client"])
    elsewhere = [{"key": "CLIENT", "value": other_client}, criteria[1]]  # the number is unique per client only
    assert lookup_all(shared_client, MEMO_LOOKUP, elsewhere) == [
        m for m in memos if (m["client"], m["shipment_number"]) == (other_client, target["shipment_number"])
    ]
    assert shared_client.get("/service/shipment/memo/999999999").status_code == 404
    assert shared_client.get("/service/shipment/memo/x").status_code == 400
    bad = shared_client.post("/service/shipment/memo/lookup", json=[{"key": "HBL", "value": "1"}])
    assert "unknown key 'HBL'" in bad.json()["message"]
    assert shared_client.get("/service/shipment/memo", params={"order_by": "ID"}).status_code == 400


def test_memo_lookup_by_shipment_applies_every_criterion(sim: RunningSimulator, client: httpx.Client) -> None:
    sim.advance_clock(60)
    sim.modify_shipments(60)  # adds memo lines to some shipments
    created = sim.create_shipments(30)
    memos = list(sim.store.reader.memo_rows())
    per_shipment = Counter((m["client"], m["shipment_number"]) for m in memos)
    (client_code, number), lines = per_shipment.most_common(1)[0]
    assert lines >= 3
    criteria = [
        {"key": "SHIPMENT_NUMBER", "value": number},
        {"key": "RUNNING_NUMBER", "match_mode": "GE", "value": "2"},
        {"key": "CLIENT", "match_mode": "EQUALS", "value": client_code},
    ]
    found = lookup_all(client, MEMO_LOOKUP, criteria, order_by="RUNNING_NUMBER", order_mode="DESC")
    expected = [m for m in memos if (m["client"], m["shipment_number"]) == (client_code, number)]
    assert found == sorted((m for m in expected if m["running_number"] >= 2), key=lambda m: -m["running_number"])
    assert len(found) == lines - 1
    new_lines = [m for m in memos if m["shipment_number"] in {
        sim.store.reader.get_shipment(i)["shipment_number"] for i in created}]
    assert new_lines, "some created shipments have memo lines"
    first = new_lines[0]
    by_shipment = [{"key": "CLIENT", "value": first["client"]},
                   {"key": "SHIPMENT_NUMBER", "value": first["shipment_number"]}]
    assert first in lookup_all(client, MEMO_LOOKUP, by_shipment)
    owner = next(i for i in created if sim.store.reader.get_shipment(i)["shipment_number"] == first["shipment_number"])
    sim.store.changes.delete_shipment_ids([owner])
    assert lookup_all(client, MEMO_LOOKUP, by_shipment) == []


def test_code_converter_lookup_scroll_and_retrieve(shared_sim: RunningSimulator, shared_client: httpx.Client) -> None:
    records = list(shared_sim.store.reader.code_conversion_rows())
    assert records
    target = records[-1]
    criteria = [
        {"key": "DIRECTION", "value": target["direction"]},
        {"key": "PARTNER", "value": target["partner"]},
    ]
    found = lookup_all(shared_client, "/service/basicdata/codeconverter/lookup", criteria)
    expected = [r for r in records if r["direction"] == target["direction"] and r["partner"] == target["partner"]]
    assert [r["id"] for r in found] == sorted(r["id"] for r in expected)
    by_source = lookup_all(
        shared_client,
        "/service/basicdata/codeconverter/lookup",
        [{"key": "SOURCE_CODE", "value": target["source_code"]}, {"key": "ID", "value": target["id"]}],
    )
    assert by_source == [target]
    page = shared_client.get("/service/basicdata/codeconverter", params={"page_size": 500})
    assert [r["id"] for r in page.json()] == sorted(r["id"] for r in records)
    assert page.headers["X-Page-Count"] == "1"
    assert page.headers["X-Row-Count"] == str(len(records))
    empty = shared_client.get("/service/basicdata/codeconverter", params={"page_no": 5, "page_size": 500})
    assert empty.json() == []
    assert empty.headers["X-Row-Count"] == str(len(records))
    assert shared_client.get(f"/service/basicdata/codeconverter/{target['id']}").json() == target
    assert shared_client.get("/service/basicdata/codeconverter/999999999").status_code == 404
    bad_page = shared_client.get("/service/basicdata/codeconverter", params={"page_size": 0})
    assert bad_page.status_code == 400


def test_a_memo_lookup_reading_one_shipment_at_a_time_refuses_several_numbers(
    sim_factory: Callable[..., RunningSimulator]
) -> None:
    one_at_a_time = sim_factory(faults=FaultConfig(memo_lookup_by_one=True))
    docs = [d for d in one_at_a_time.store.reader.expected_documents() if d["memos"]]
    first, second = docs[0], next(d for d in docs[1:] if d["client"] == docs[0]["client"])
    client_is = {"key": "CLIENT", "match_mode": "EQUALS", "value": first["client"]}
    with authed_client(one_at_a_time) as api:
        for criterion in ({"key": "SHIPMENT_NUMBER", "match_mode": "EQUALS", "value": first["shipment_number"]},
                          {"key": "SHIPMENT_NUMBER", "match_mode": "IN", "values": [first["shipment_number"]]}):
            assert lookup_all(api, MEMO_LOOKUP, [client_is, criterion]) == sorted(first["memos"], key=lambda m: m["id"])
        several = {"key": "SHIPMENT_NUMBER", "match_mode": "IN",
                   "values": [first["shipment_number"], second["shipment_number"]]}
        refused = api.post(MEMO_LOOKUP, json=[client_is, several])
        assert refused.status_code == 400 and "SHIPMENT_NUMBER takes one value" in refused.json()["message"]
    with authed_client(sim_factory()) as api:  # the default service answers both shipments' lines
        assert len(lookup_all(api, MEMO_LOOKUP, [client_is, several])) == len(first["memos"]) + len(second["memos"])
