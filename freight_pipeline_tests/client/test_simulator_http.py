"""The client against the real simulator over HTTP: every method of both clients, paging, auth and faults.

Expectations come from the simulator's own store (``sim.store``), the truth behind its HTTP answers.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
import logging
import math
import pickle
import re
import time
from pathlib import Path
from typing import Any

import pytest

import freight_pipeline.client
from freight_pipeline.client import (
    AsyncFreightClient,
    AuthenticationError,
    BadRequestError,
    ConflictError,
    Criterion,
    EFile,
    EFileRole,
    FreightClient,
    FreightConnectionError,
    NotFoundError,
    PermissionDeniedError,
    ProtocolError,
    RetryPolicy,
    ServerError,
    Shipment,
)
from freight_pipeline.client import endpoints as ep
from freight_pipeline.client.retry import RETRY_AFTER_JITTER
from freight_pipeline.simulator.data_format import OBJECT_FORM, STRING_FORM
from freight_pipeline.simulator.data_identity import Identity
from freight_pipeline.simulator.generator import identity_of
from freight_pipeline_tests.client.helpers import FAST_RETRY, SyncView, drained, public_methods

ORDER = ["LAST_MODIFIED_DATE", "LAST_MODIFIED_TIME", "ID"]


def live_ids(sim: Any) -> list[int]:
    return sorted(int(row["ID"]) for row in sim.store.reader.shipment_key_rows())


def same_json(a: Any, b: Any) -> bool:
    return json.loads(json.dumps(a)) == json.loads(json.dumps(b))


def ids_in_lookup_order(sim: Any) -> list[int]:
    """Live ids ordered as ``ORDER`` (ascending, ``ID`` last) orders the shipment lookup."""
    rows = sim.store.reader.shipment_key_rows()
    return [
        int(r["ID"]) for r in sorted(rows, key=lambda r: (r["LAST_MODIFIED_DATE"], r["LAST_MODIFIED_TIME"], r["ID"]))
    ]


def new_event_code(sim: Any, shipment_id: int, event_type: str) -> str:
    """An event code the shipment has no event of that type for (creating it will not conflict)."""
    existing = {(e["event"], e["type"]) for e in sim.store.reader.get_events(shipment_id)}
    return next(c for c in ("VGM_CLOSING", "DIFF_BL_DATE", "GATE_OUT", "AVAILABLE") if (c, event_type) not in existing)


def one_shipment_per_client_kind(sim: Any, view: SyncView, index: int) -> int:
    """Tests that write run once per client kind: each kind writes to a shipment of its own."""
    return live_ids(sim)[index + (1 if view.is_async else 0)]


# --- shipments ----------------------------------------------------------------------------------


def test_iterates_all_pages_of_a_multi_page_lookup(client: FreightClient, fresh_sim: Any) -> None:
    ids = live_ids(fresh_sim)
    pages = list(client.iter_shipment_pages([], page_size=40, order_by=ORDER))
    assert len(pages) == math.ceil(len(ids) / 40) == pages[0].page_count
    assert all(p.row_count == len(ids) for p in pages)
    got = [s["id"] for p in pages for s in p.raw]
    assert sorted(got) == ids and len(got) == len(set(got))
    keys = [(s.last_modified_date_time, s.id) for p in pages for s in p.items]
    assert [k[1] for k in keys] == got
    assert fresh_sim.request_count("/service/shipment/lookup", status=200) == len(pages)
    assert client.stats.by_endpoint["shipment.lookup"] == len(pages)


def test_lookup_criteria_and_typed_items(client: FreightClient, fresh_sim: Any) -> None:
    rows = list(fresh_sim.store.reader.shipment_key_rows())
    pivot = sorted(r["LAST_MODIFIED_DATE"] for r in rows)[len(rows) // 2]
    expected = sorted(int(r["ID"]) for r in rows if r["LAST_MODIFIED_DATE"] >= pivot)
    crit = [Criterion(key="LAST_MODIFIED_DATE", match_mode="GE", value=pivot)]
    shipments = list(client.iter_shipments(crit, order_by=ORDER, page_size=25))
    assert sorted(s.id for s in shipments if s.id is not None) == expected
    assert all(isinstance(s, Shipment) for s in shipments)
    page = client.lookup_shipments(crit, page_no=0, page_size=5, order_by=ORDER, order_mode=["DESC"] * 3)
    assert page.row_count == len(expected) and len(page.raw) == min(5, len(expected))
    raw = list(client.iter_shipments_raw([{"key": "ID", "match_mode": "IN", "values": expected[:3]}]))
    assert sorted(r["id"] for r in raw) == expected[:3]


def test_retrieve_events_and_carriages_match_the_store(client: FreightClient, fresh_sim: Any) -> None:
    store = fresh_sim.store
    for shipment_id in live_ids(fresh_sim)[:25]:
        raw = client.get_shipment_raw(shipment_id)
        assert same_json(raw, store.reader.get_shipment(shipment_id))
        full = client.get_shipment(shipment_id)
        assert full.id == shipment_id and full.raw == raw
        assert full.extra_fields == {}, f"fields the spec does not name: {sorted(full.extra_fields)}"
        assert full.problems == [], f"fields the models cannot read: {full.problems}"
        assert same_json(client.get_shipment_events_raw(shipment_id), store.reader.get_events(shipment_id))
        events = client.get_shipment_events(shipment_id)
        assert all(e.known for e in events)
        for e in events:  # every part may be null; an instant whenever date, time and offset are there
            d = e.date_time
            complete = d is not None and None not in (d.date, d.time, d.zone_offset)
            assert (e.instant is not None) == complete, e.raw
            assert d is None or d.parse_error is None
        air = client.get_air_main_carriage(shipment_id)
        sea = client.get_sea_main_carriage(shipment_id)
        assert same_json([leg.raw for leg in air], store.reader.get_air_main_carriage(shipment_id))
        assert same_json(client.get_sea_main_carriage_raw(shipment_id), store.reader.get_sea_main_carriage(shipment_id))
        if full.mode_of_transport == "AIR":
            assert sea == []
        if full.mode_of_transport == "SEA":
            assert air == []
    with pytest.raises(NotFoundError) as info:
        client.get_shipment(999_999_999)
    assert info.value.status_code == 404 and "/service/shipment/999999999" in str(info.value)


def test_both_datetime_forms_parse_to_the_simulators_instants(any_client: SyncView, fresh_sim: Any) -> None:
    """Event instants read over HTTP equal the simulator's milestones, whichever DateTime form it sent."""
    store = fresh_sim.store
    checked = {OBJECT_FORM: 0, STRING_FORM: 0}
    for shipment_id in live_ids(fresh_sim)[20:80]:
        ident = identity_of(store.seed, store.reader.shipment_state(shipment_id))
        truth = milestone_truth(ident)
        for event in any_client.get_shipment_events(shipment_id):
            if (event.event, event.type) not in truth:  # revised estimates: drawn per version
                continue
            epoch, until, utc_minutes = truth[(event.event, event.type)]
            assert event.date_time is not None and event.date_time.parse_error is None
            if epoch is None:  # a date-only estimate: time null, so no instant
                assert event.instant is None and event.date_time.date is not None
                continue
            assert event.instant is not None and event.instant.timestamp() == epoch, event.raw
            assert event.instant.utcoffset() == dt.timedelta(minutes=utc_minutes)
            assert (event.date_time.until.timestamp() if event.date_time.until else None) == until, event.raw
            checked[ident.form] += 1
    assert checked[OBJECT_FORM] >= 100 and checked[STRING_FORM] >= 100, checked


def milestone_truth(ident: Identity) -> dict[tuple[str, str], tuple[int | None, int | None, int]]:
    """(event, type) -> (instant as epoch or None without a time, end of the window, UTC offset minutes)."""
    truth: dict[tuple[str, str], tuple[int | None, int | None, int]] = {}
    for m in ident.milestones:
        minutes = ident.place(m.role).utc_minutes
        truth[(m.code, "ESTIMATED")] = (m.planned if m.time_known else None, m.until, minutes)
        actual_until = m.actual + (m.until - m.planned) if m.until is not None else None
        truth[(m.code, "ACTUAL")] = (m.actual, actual_until, minutes)
    return truth


# --- every method of both clients ---------------------------------------------------------------


def test_both_clients_offer_the_same_methods() -> None:
    assert public_methods(FreightClient) == public_methods(AsyncFreightClient)


def test_the_client_readme_method_table_names_every_public_method() -> None:
    readme = (Path(freight_pipeline.client.__file__).parent / "README.md").read_text(encoding="utf-8")
    table = readme.split("\n## Methods", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`(\w+)\(", table)) | {"stats"}
    named |= {f"{name}_raw" for name in re.findall(r"`(\w+)\([^`]*\)` / `_raw`", table)}
    assert public_methods(FreightClient) - named == set()


def test_every_method_matches_the_store(any_client: SyncView, fresh_sim: Any) -> None:
    shipment_id = one_shipment_per_client_kind(fresh_sim, any_client, 3)
    any_client.authenticate()
    check_shipment_reads(any_client, fresh_sim, shipment_id)
    check_event_writes(any_client, fresh_sim, shipment_id)
    check_memos(any_client, fresh_sim)
    check_code_conversions(any_client, fresh_sim)
    check_efiles(any_client, fresh_sim, shipment_id)
    check_webhook(any_client, fresh_sim)
    assert any_client.called == public_methods(type(any_client.client))


def check_shipment_reads(client: SyncView, sim: Any, shipment_id: int) -> None:
    store = sim.store
    page = client.lookup_shipments([Criterion(key="ID", value=shipment_id)])
    assert (page.row_count, page.page_count) == (1, 1)
    assert same_json(page.raw, [store.reader.get_base_shipment(shipment_id)])
    assert page.items[0].id == shipment_id and page.is_last
    ordered = ids_in_lookup_order(sim)
    pages = list(client.iter_shipment_pages([], page_size=60, order_by=ORDER))
    assert [r["id"] for p in pages for r in p.raw] == ordered and len(pages) == math.ceil(len(ordered) / 60)
    assert [s.id for s in client.iter_shipments([], page_size=70, order_by=ORDER)] == ordered
    raw = list(client.iter_shipments_raw([], page_size=80, order_by=ORDER))
    assert same_json(raw, [store.reader.get_base_shipment(i) for i in ordered])
    assert same_json(client.get_shipment_raw(shipment_id), store.reader.get_shipment(shipment_id))
    full = client.get_shipment(shipment_id)
    assert same_json(full.raw, store.reader.get_shipment(shipment_id)) and full.problems == []
    events = store.reader.get_events(shipment_id)
    assert same_json(client.get_shipment_events_raw(shipment_id), events)
    assert same_json(client.get_records_raw(ep.SHIPMENT_EVENTS, shipment_id), events)
    assert same_json([e.raw for e in client.get_shipment_events(shipment_id)], events)
    air, sea = store.reader.get_air_main_carriage(shipment_id), store.reader.get_sea_main_carriage(shipment_id)
    assert same_json(client.get_air_main_carriage_raw(shipment_id), air)
    assert same_json([leg.raw for leg in client.get_air_main_carriage(shipment_id)], air)
    assert same_json(client.get_sea_main_carriage_raw(shipment_id), sea)
    assert same_json(client.get_records_raw(ep.SHIPMENT_SEA_MAIN_CARRIAGE, shipment_id), sea)
    assert same_json([leg.raw for leg in client.get_sea_main_carriage(shipment_id)], sea)


def check_event_writes(client: SyncView, sim: Any, shipment_id: int) -> None:
    store = sim.store
    code = new_event_code(sim, shipment_id, "ESTIMATED")
    when = {"date": "2026-11-20", "time": "08:00:00", "zone_offset": "+01:00"}
    event = {"event": code, "type": "ESTIMATED", "shipment_id": shipment_id, "date_time": when}
    created = client.create_shipment_event(shipment_id, event)
    stored = next(e for e in store.reader.get_events(shipment_id) if (e["event"], e["type"]) == (code, "ESTIMATED"))
    assert created is not None and same_json(created.raw, stored) and stored["date_time"] == when
    before = sim.request_count("/service/shipment/{shipmentId}/event")
    with pytest.raises(ConflictError):
        client.create_shipment_event(shipment_id, event, event_type="ESTIMATED")
    assert sim.request_count("/service/shipment/{shipmentId}/event") == before + 1  # a 409 is not retried
    later = {"date": "2026-11-21", "time": "09:30:00", "zone_offset": "+01:00"}
    updated = client.update_shipment_event(shipment_id, code, {**event, "date_time": later})
    stored = next(e for e in store.reader.get_events(shipment_id) if (e["event"], e["type"]) == (code, "ESTIMATED"))
    assert updated is not None and same_json(updated.raw, stored) and stored["date_time"] == later
    missing = new_event_code(sim, shipment_id, "ACTUAL")
    with pytest.raises(NotFoundError):
        client.update_shipment_event(shipment_id, missing, {**event, "type": "ACTUAL"})


def check_memos(client: SyncView, sim: Any) -> None:
    expected = list(sim.store.reader.memo_rows())
    assert len(expected) > 60, "the simulator should generate memo lines"
    pages = list(client.iter_memo_pages(page_size=30))
    assert same_json([row for page in pages for row in page.raw], expected) and pages[0].row_count == len(expected)
    assert same_json(client.scroll_memos_page(page_no=1, page_size=30).raw, expected[30:60])
    first = expected[0]
    criteria = [
        Criterion(key="CLIENT", value=first["client"]),
        Criterion(key="SHIPMENT_NUMBER", value=first["shipment_number"]),
    ]
    same_shipment = [
        m for m in expected if (m["client"], m["shipment_number"]) == (first["client"], first["shipment_number"])
    ]
    page = client.lookup_memos(criteria, page_size=1)
    assert page.row_count == len(same_shipment) and same_json(page.raw, same_shipment[:1])
    assert same_json([m.raw for m in client.iter_memos(criteria, page_size=1)], same_shipment)
    lookup_pages = list(client.iter_memo_lookup_pages(criteria, page_size=1))
    assert [p.page_no for p in lookup_pages] == list(range(len(same_shipment)))
    assert same_json([row for p in lookup_pages for row in p.raw], same_shipment)
    assert same_json(client.get_memo_raw(first["id"]), sim.store.reader.get_memo(first["id"]))
    assert client.get_memo(first["id"]).memo == first["memo"]


def check_code_conversions(client: SyncView, sim: Any) -> None:
    expected = list(sim.store.reader.code_conversion_rows())
    assert len(expected) > 21, "the simulator should generate code conversions"
    scrolled = [row for page in client.iter_code_conversion_pages(page_size=7) for row in page.raw]
    assert same_json(scrolled, expected)
    assert same_json(client.scroll_code_conversions_page(page_no=2, page_size=7).raw, expected[14:21])
    partner = expected[0]["partner"]
    of_partner = [r for r in expected if r["partner"] == partner]
    page = client.lookup_code_conversions([Criterion(key="PARTNER", value=partner)], page_size=3)
    assert page.row_count == len(of_partner) and same_json(page.raw, of_partner[:3])
    found = list(client.iter_code_conversions([Criterion(key="PARTNER", value=partner)], page_size=3))
    assert same_json([c.raw for c in found], of_partner)
    every = list(client.iter_code_conversion_lookup_pages([], page_size=100))  # the read when the scroll is not one
    assert [p.page_no for p in every] == list(range(-(-len(expected) // 100)))
    assert same_json([row for p in every for row in p.raw], expected)
    record = sim.store.reader.get_code_conversion(expected[0]["id"])
    assert same_json(client.get_code_conversion_raw(expected[0]["id"]), record)
    assert same_json(client.get_code_conversion(expected[0]["id"]).raw, record)


def check_efiles(client: SyncView, sim: Any, shipment_id: int) -> None:
    store = sim.store
    new = EFile.from_bytes(
        b"hello freight",
        file_name="note.txt",
        mime_type="text/plain",
        references=[{"type": "SHIPMENT", "value": shipment_id}],
        roles=["OPS"],
    )
    stored = client.store_efile(new)
    assert stored.id is not None and same_json(stored.raw, store.efiles.get(stored.id, cascade=True))
    efile_id = stored.id
    plain = client.get_efile(efile_id)
    assert same_json(plain.raw, store.efiles.get(efile_id)) and plain.references is None
    assert plain.content() == b"hello freight"
    assert same_json(client.get_efile_raw(efile_id, cascade=True), store.efiles.get(efile_id, cascade=True))

    client.add_efile_reference(efile_id, {"type": "HBL", "value": "HBL-42"})
    refs = client.get_efile_references(efile_id)
    assert {(r.type, r.value) for r in refs} == {("SHIPMENT", str(shipment_id)), ("HBL", "HBL-42")}
    assert same_json([r.raw for r in refs], store.efiles.references(efile_id))
    client.delete_efile_reference(efile_id, next(r for r in refs if r.type == "HBL"))
    assert same_json(client.get_efile_references_raw(efile_id), store.efiles.references(efile_id))
    assert [r["type"] for r in store.efiles.references(efile_id)] == ["SHIPMENT"]

    client.add_efile_role(efile_id, "FINANCE")
    roles = [role for role in client.get_efile_roles(efile_id) if isinstance(role, EFileRole)]  # objects here
    assert sorted(r.role or "" for r in roles) == ["FINANCE", "OPS"]
    assert same_json([r.raw for r in roles], store.efiles.roles(efile_id))
    assert same_json(client.get_records_raw(ep.EFILE_ROLES, efile_id), store.efiles.roles(efile_id))
    client.delete_efile_role(efile_id, "OPS")
    assert same_json(client.get_efile_roles_raw(efile_id), store.efiles.roles(efile_id))
    assert [r["role"] for r in store.efiles.roles(efile_id)] == ["FINANCE"]

    summary = {**{k: v for k, v in store.efiles.get(efile_id).items() if k != "document"}}
    linked = [e["id"] for e in store.efiles.rows([shipment_id])]  # the generated files of the shipment too
    by_shipment = client.lookup_efiles([Criterion(key="SHIPMENT_ID", value=shipment_id)], order_by=["SHIPMENT_ID"])
    assert by_shipment.row_count == len(linked) and sorted(e.id for e in by_shipment.items) == sorted(linked)
    assert same_json([r for r in by_shipment.raw if r["id"] == efile_id], [summary])
    by_reference = list(client.iter_efiles([Criterion(key="REFERENCE", value=str(shipment_id))]))
    assert sorted(e.id for e in by_reference) == sorted(linked)
    assert all(e.document is None for e in by_reference)
    pages = list(client.iter_efile_lookup_pages([Criterion(key="SHIPMENT_ID", values=[str(shipment_id)])],
                                                page_size=1, order_by=["SHIPMENT_ID"]))
    assert len(pages) == len(linked) and all(p.row_count == len(linked) for p in pages)
    assert sorted(r["id"] for p in pages for r in p.raw) == sorted(linked)

    deleted = client.delete_efile(efile_id)
    assert deleted is not None and deleted.id == efile_id
    assert efile_id not in {row["id"] for row in store.efiles.rows()}
    with pytest.raises(NotFoundError):
        client.get_efile(efile_id)


def check_webhook(client: SyncView, sim: Any) -> None:
    payload = {"kind": "test", "n": 1, "nested": {"ok": True}}
    receipt = client.send_webhook(payload)
    assert receipt is not None and receipt.received is True
    assert {"id": receipt.id, "payload": payload} in sim.store.webhooks.payloads()


# --- E-File ---------------------------------------------------------------------------------------


def test_invalid_base64_is_a_bad_request_naming_the_problem(client: FreightClient) -> None:
    with pytest.raises(BadRequestError, match="base64"):
        client.store_efile({"file_name": "x", "document": "%%%not base64%%%"})


# --- webhook ------------------------------------------------------------------------------------


def test_webhook_uses_basic_auth_with_webhook_credentials(client: FreightClient, fresh_sim: Any) -> None:
    receipt = client.send_webhook({"kind": "test", "n": 1})
    assert receipt is not None and receipt.received is True and receipt.id is not None
    assert fresh_sim.request_count("/auth/token") == 0  # no bearer token needed
    with (
        FreightClient(
            fresh_sim.base_url,
            fresh_sim.username,
            fresh_sim.password,
            webhook_username=fresh_sim.username,
            webhook_password=fresh_sim.password,
            retry=FAST_RETRY,
        ) as wrong_role,
        pytest.raises(PermissionDeniedError) as info,
    ):
        wrong_role.send_webhook({"kind": "test"})
    assert "POST /external/webhook" in str(info.value) and fresh_sim.username in str(info.value)
    with (
        FreightClient(
            fresh_sim.base_url,
            fresh_sim.username,
            fresh_sim.password,
            webhook_username=fresh_sim.webhook_username,
            webhook_password="wrong",
            retry=FAST_RETRY,
        ) as bad,
        pytest.raises(AuthenticationError, match="webhook credentials"),
    ):
        bad.send_webhook({"kind": "test"})


# --- auth ---------------------------------------------------------------------------------------


def test_wrong_password_fails_at_once_with_one_request(fresh_sim: Any) -> None:
    with FreightClient(fresh_sim.base_url, fresh_sim.username, "not-the-password", retry=FAST_RETRY) as bad:
        with pytest.raises(AuthenticationError) as info:
            bad.get_shipment(1)
        with pytest.raises(AuthenticationError):
            list(bad.iter_shipments([]))  # remembered: no further request
    assert fresh_sim.request_count() == 1 and fresh_sim.request_count("/auth/token", status=401) == 1
    message = str(info.value)
    assert repr(fresh_sim.username) in message and "not-the-password" not in message
    assert bad.stats.requests == 1


def test_a_token_answer_cut_short_is_retried_then_a_protocol_error(any_client: SyncView, fresh_sim: Any) -> None:
    token_path = "/auth/token"
    fresh_sim.script_fault("malformed", FAST_RETRY.max_attempts, path=token_path)
    with pytest.raises(ProtocolError) as info:
        any_client.authenticate()
    err = info.value
    assert (err.status_code, err.method, err.path) == (200, "POST", token_path)
    assert "without a usable token" in str(err) and "neither valid JSON nor a bare token" in str(err)
    assert err.body_excerpt == ""  # a cut-off token is still (part of) a secret
    assert fresh_sim.request_count(token_path, status=200) == FAST_RETRY.max_attempts

    fresh_sim.script_fault("malformed", 2, path=token_path)
    shipment_id = live_ids(fresh_sim)[0]
    assert any_client.get_shipment_raw(shipment_id)["id"] == shipment_id
    assert fresh_sim.request_count(token_path, status=200) == FAST_RETRY.max_attempts + 3  # 2 cut short, 1 whole
    assert fresh_sim.request_count("/service/shipment/{id}", status=401) == 0  # no cut-off body used as a token
    assert any_client.stats.token_requests == FAST_RETRY.max_attempts + 3


def test_token_expiry_in_the_middle_of_an_iteration(fresh_sim: Any) -> None:
    fresh_sim.set_token_lifetime(1.0)
    ids = live_ids(fresh_sim)
    with FreightClient(fresh_sim.base_url, fresh_sim.username, fresh_sim.password, retry=FAST_RETRY) as client:
        got = []
        for page in client.iter_shipment_pages([], page_size=math.ceil(len(ids) / 4), order_by=ORDER):
            got.extend(s["id"] for s in page.raw)
            # Tokens live 1 s (exp is rounded up to a whole second, so at most 2 s): the last page
            # comes 2.7 s after the first token and the client must have renewed in between.
            time.sleep(0.9)
        assert sorted(got) == ids
        assert client.stats.token_requests >= 2
        assert fresh_sim.request_count("/service/shipment/lookup", status=401) == 0


def test_revoked_token_mid_iteration_is_renewed_once_and_the_call_repeated(fresh_sim: Any) -> None:
    ids = live_ids(fresh_sim)
    with FreightClient(fresh_sim.base_url, fresh_sim.username, fresh_sim.password, retry=FAST_RETRY) as client:
        got = []
        for number, page in enumerate(client.iter_shipment_pages([], page_size=max(1, len(ids) // 4), order_by=ORDER)):
            got.extend(s["id"] for s in page.raw)
            if number == 1:
                fresh_sim.revoke_tokens()
        assert sorted(got) == ids
        assert client.stats.reauthentications == 1 and client.stats.token_requests == 2
    assert fresh_sim.request_count("/service/shipment/lookup", status=401) == 1


def test_403_names_the_endpoint_and_the_operator_support(fresh_sim: Any) -> None:
    from freight_pipeline.simulator.config import SimulatorConfig, UserConfig
    from freight_pipeline.simulator.server import running_simulator

    reader = UserConfig("reader", "reader-password-xyz", frozenset({"shipment:lookup"}))
    with (
        running_simulator(SimulatorConfig(users=(reader,), shipments=5, seed=1)) as small,
        FreightClient(small.base_url, "reader", "reader-password-xyz", retry=FAST_RETRY) as client,
    ):
        assert len(list(client.iter_shipments([]))) == len(live_ids(small))
        with pytest.raises(PermissionDeniedError) as info:
            client.get_shipment(1)
        assert small.request_count("/service/shipment/{id}") == 1  # not retried
    message = str(info.value)
    assert "GET /service/shipment/{id}" in message and "'reader'" in message
    assert "operator's support" in message and "reader-password-xyz" not in message


# --- faults -------------------------------------------------------------------------------------


def test_429_storm_with_retry_after_is_ridden_out(client: FreightClient, fresh_sim: Any) -> None:
    fresh_sim.set_faults(rate_limit_rate=0.5, retry_after_s=0, seed=11)
    ids = live_ids(fresh_sim)
    got = [s["id"] for s in client.iter_shipments_raw([], page_size=20, order_by=ORDER)]
    details = [client.get_shipment_raw(i)["id"] for i in ids[:15]]
    assert sorted(got) == ids and details == ids[:15]
    throttled = fresh_sim.request_count(status=429)
    assert throttled > 0 and client.stats.by_status[429] == throttled
    assert client.stats.retries == throttled


def test_retry_after_seconds_are_honoured_up_to_the_cap(fresh_sim: Any, client_waits: list[float]) -> None:
    fresh_sim.set_faults(retry_after_s=1)
    fresh_sim.script_fault("rate_limit", 2, path="/service/shipment/{id}")
    policy = RetryPolicy(max_attempts=5, base_delay=0.001, retry_after_cap=0.2)
    with FreightClient(fresh_sim.base_url, fresh_sim.username, fresh_sim.password, retry=policy) as client:
        client.authenticate()
        shipment_id = live_ids(fresh_sim)[0]
        started = time.monotonic()
        client.get_shipment(shipment_id)
        elapsed = time.monotonic() - started
    # two waits of Retry-After 1 s, each capped at 0.2 s (plus at most its 10 % of jitter), and waited for
    assert len(client_waits) == 2, client_waits
    assert all(0.2 <= wait <= 0.2 * (1 + RETRY_AFTER_JITTER) for wait in client_waits), client_waits
    assert elapsed >= sum(client_waits)


def test_503_bursts_with_html_bodies(client: FreightClient, fresh_sim: Any) -> None:
    shipment_id = live_ids(fresh_sim)[0]
    fresh_sim.script_fault("server_error", 3, path="/service/shipment/{id}", status=503)
    assert client.get_shipment(shipment_id).id == shipment_id
    assert fresh_sim.request_count("/service/shipment/{id}", status=503) == 3
    fresh_sim.script_fault("server_error", 20, path="/service/shipment/{id}", status=503)
    with (
        FreightClient(
            fresh_sim.base_url,
            fresh_sim.username,
            fresh_sim.password,
            retry=RetryPolicy(max_attempts=3, base_delay=0.001),
        ) as short,
        pytest.raises(ServerError) as info,
    ):
        short.get_shipment(shipment_id)
    err = info.value
    assert err.status_code == 503 and "HTTP 503" in str(err)
    assert "<html>" not in str(err) and err.detail is not None and len(err.detail) <= 200
    assert f"GET /service/shipment/{shipment_id}" in str(err)


def test_dropped_connections_are_retried_for_reads_not_for_creates(client: FreightClient, fresh_sim: Any) -> None:
    shipment_id = live_ids(fresh_sim)[1]
    fresh_sim.script_fault("drop", 2, path="/service/shipment/{id}")
    assert client.get_shipment_raw(shipment_id)["id"] == shipment_id
    assert sum(client.stats.transport_errors.values()) == 2
    fresh_sim.script_fault("drop", 1, path="/service/shipment/{shipmentId}/event")
    with pytest.raises(FreightConnectionError, match="may or may not have been processed"):
        client.create_shipment_event(shipment_id, {"event": "WAREHOUSE", "type": "ACTUAL"})
    assert fresh_sim.request_count("/service/shipment/{shipmentId}/event") == 1


def test_malformed_success_bodies_are_retried_for_reads_and_never_for_creates(
    any_client: SyncView, fresh_sim: Any
) -> None:
    store = fresh_sim.store
    shipment_id = one_shipment_per_client_kind(fresh_sim, any_client, 5)
    retrieve = "/service/shipment/{id}"
    fresh_sim.script_fault("malformed", 2, path=retrieve)
    assert same_json(any_client.get_shipment_raw(shipment_id), store.reader.get_shipment(shipment_id))
    assert fresh_sim.request_count(retrieve, status=200) == 3  # two cut short, then the whole one

    fresh_sim.script_fault("malformed", FAST_RETRY.max_attempts, path=retrieve)
    with pytest.raises(ProtocolError) as info:
        any_client.get_shipment(shipment_id)
    err = info.value
    assert (err.status_code, err.method, err.path) == (200, "GET", f"/service/shipment/{shipment_id}")
    assert f"GET /service/shipment/{shipment_id} answered HTTP 200" in str(err) and "not valid JSON" in str(err)
    whole = json.dumps(store.reader.get_shipment(shipment_id), ensure_ascii=False, separators=(",", ":"))
    assert len(err.body_excerpt) <= 200 and err.body_excerpt.endswith("…")
    assert whole.startswith(err.body_excerpt[:-1])
    assert fresh_sim.faults.pending_script() == 0

    code = new_event_code(fresh_sim, shipment_id, "ACTUAL")
    fresh_sim.script_fault("malformed", 1, path="/service/shipment/{shipmentId}/event")
    with pytest.raises(ProtocolError, match="did process the request") as created:
        any_client.create_shipment_event(shipment_id, {"event": code, "type": "ACTUAL"})
    assert created.value.status_code == 201 and created.value.method == "POST"
    drained(fresh_sim)  # the client read the cut answer before the simulator counted it (a CI of 7f20a0d: 0)
    assert fresh_sim.request_count("/service/shipment/{shipmentId}/event") == 1  # not repeated
    assert (code, "ACTUAL") in {(e["event"], e["type"]) for e in store.reader.get_events(shipment_id)}


def test_random_fault_mix_with_the_async_client(fresh_sim: Any) -> None:
    fresh_sim.set_faults(drop_rate=0.1, rate_limit_rate=0.1, server_error_rate=0.1, retry_after_s=0, seed=5)
    ids = live_ids(fresh_sim)

    async def run() -> tuple[list[int], list[dict[str, Any]], Any]:
        async with AsyncFreightClient(
            fresh_sim.base_url, fresh_sim.username, fresh_sim.password, retry=FAST_RETRY, max_concurrency=8
        ) as client:
            listed = [s.id async for s in client.iter_shipments([], page_size=25, order_by=ORDER) if s.id is not None]
            docs = await asyncio.gather(*(client.get_shipment_raw(i) for i in ids[:40]))
            return listed, list(docs), client.stats.snapshot()

    listed, docs, stats = asyncio.run(run())
    fresh_sim.reset_faults()
    assert sorted(listed) == ids
    assert [d["id"] for d in docs] == ids[:40]
    assert all(same_json(d, fresh_sim.store.reader.get_shipment(d["id"])) for d in docs)
    assert stats.retries > 0 and stats.requests == fresh_sim.request_count()


# --- secrets ------------------------------------------------------------------------------------


def test_secrets_never_in_repr_logs_or_errors(fresh_sim: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    texts: list[str] = []
    fresh_sim.script_fault("server_error", 2, path="/service/shipment/{id}", status=502)
    with FreightClient(
        fresh_sim.base_url,
        fresh_sim.username,
        fresh_sim.password,
        webhook_username=fresh_sim.webhook_username,
        webhook_password=fresh_sim.webhook_password,
        retry=FAST_RETRY,
    ) as client:
        client.get_shipment(live_ids(fresh_sim)[0])
        token = client._core.token.value if client._core.token else ""
        for action in (lambda: client.get_shipment(999_999_999), lambda: client.store_efile({"document": "!"})):
            with pytest.raises(Exception) as info:
                action()
            texts += [str(info.value), repr(info.value)]
        texts += [repr(client), repr(client.stats), repr(client._core.token)]
    with FreightClient(fresh_sim.base_url, fresh_sim.username, "wrong-password-123") as bad:
        with pytest.raises(AuthenticationError) as auth_info:
            bad.get_shipment(1)
        texts += [str(auth_info.value), repr(bad)]
    texts += [r.getMessage() for r in caplog.records]
    basic = base64.b64encode(f"{fresh_sim.webhook_username}:{fresh_sim.webhook_password}".encode()).decode()
    assert token
    for text in texts:
        for secret in (fresh_sim.password, fresh_sim.webhook_password, token, "wrong-password-123", basic):
            assert secret not in text, text


def test_a_service_writing_a_byte_order_mark_before_its_json_is_logged_in_to_and_read(
    any_client: Any, fresh_sim: Any
) -> None:
    fresh_sim.set_faults(json_bom=True)
    first = live_ids(fresh_sim)[0]
    assert any_client.get_shipment_raw(first)["id"] == first
    assert [s.id for s in any_client.lookup_shipments([], page_size=3, order_by="ID").items] == live_ids(fresh_sim)[:3]
    assert fresh_sim.request_count("/auth/token", status=200) == 1
    assert fresh_sim.request_count("/service/shipment/{id}", status=401) == 0


@pytest.mark.parametrize("password", ['s3cr"et\\pw', "pässwörd-ÄÖÜ", "tab\tand/slash", "per%cent & plus+"])
def test_a_password_the_token_endpoint_echoes_escaped_never_shows(
    fresh_sim: Any, password: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    fresh_sim.set_faults(token_echo=True)  # 422 with the request body echoed, as Python's json escapes it
    with (FreightClient(fresh_sim.base_url, fresh_sim.username, password, retry=FAST_RETRY) as client,
          pytest.raises(BadRequestError, match=r"HTTP 422.*assumption A1") as info):
        client.get_shipment(1)
    texts = [str(info.value), repr(info.value), str(info.value.detail), *(r.getMessage() for r in caplog.records)]
    assert '"password": "***"' in str(info.value)
    for form in (password, json.dumps(password)[1:-1], json.dumps(password, ensure_ascii=False)[1:-1]):
        for text in texts:
            assert form not in text, text


def test_a_scroll_that_ignores_paging_and_sends_no_headers_is_read_whole_once(any_client: Any, fresh_sim: Any) -> None:
    fresh_sim.set_faults(scroll_headers=False, scroll_paging=False)  # every record on every page, no headers
    expected = sorted(row["id"] for row in fresh_sim.store.reader.code_conversion_rows())
    assert len(expected) > 100
    pages = list(any_client.iter_code_conversion_pages(page_size=100))
    assert sorted(row["id"] for page in pages for row in page.raw) == expected
    assert fresh_sim.request_count("/service/basicdata/codeconverter") == 2  # page 0, and page 1 repeating it


def test_an_answer_in_the_latin1_its_content_type_declares_is_read_and_handed_on_in_utf8(
    any_client: Any, fresh_sim: Any
) -> None:
    shipment_id = live_ids(fresh_sim)[0]
    first = any_client.get_shipment_events_raw(shipment_id)[0]
    place = "Düsseldorf Lager Süd"
    any_client.update_shipment_event(shipment_id, first["event"], {**first, "location": {"name": place}})
    fresh_sim.set_faults(json_latin1=True)
    fresh_sim.reset_stats()
    events = any_client.get_shipment_events_raw(shipment_id)
    names = [event["location"]["name"] for event in events if event["event"] == first["event"]]
    assert place in names
    assert pickle.loads(pickle.dumps(events)) == events  # what the sync's normalizing worker decodes again
    assert fresh_sim.request_count("/service/shipment/{id}/events") == 1


def test_a_redirect_names_where_it_points_and_what_to_do(any_client: Any, fresh_sim: Any) -> None:
    fresh_sim.set_faults(redirect_to="https://freight.example.com/api")
    with pytest.raises(freight_pipeline.client.APIStatusError) as info:
        any_client.get_shipment_raw(live_ids(fresh_sim)[0])
    assert info.value.status_code == 308
    assert "to 'https://freight.example.com/api/auth/token'" in str(info.value)
    assert "give its new address as the base URL" in str(info.value)
    assert fresh_sim.request_count("/auth/token") == 1  # not retried, not followed


def test_a_service_answering_no_content_for_a_shipment_without_legs_gives_none_at_once(
    any_client: Any, fresh_sim: Any
) -> None:
    fresh_sim.set_faults(no_content_when_empty=True)  # 204 where a shipment has no records of the endpoint's
    legs = [(ep.SHIPMENT_AIR_MAIN_CARRIAGE, "airmaincarriage"), (ep.SHIPMENT_SEA_MAIN_CARRIAGE, "seamaincarriage")]
    for endpoint, path in legs:
        fresh_sim.reset_stats()
        empty = {one: fresh_sim.store.reader.record_json(path, one) == b"[]" for one in live_ids(fresh_sim)}
        without, with_legs = (next(one for one, none in empty.items() if none is wanted) for wanted in (True, False))
        assert any_client.get_records_raw(endpoint, without) == []
        assert len(any_client.get_records_raw(endpoint, with_legs)) > 0
        assert fresh_sim.request_count(endpoint.path, status=204) == 1
        assert fresh_sim.request_count(endpoint.path, status=200) == 1


def test_a_fresh_token_the_service_does_not_know_yet_is_waited_for_not_a_failure(
    any_client: Any, fresh_sim: Any
) -> None:
    fresh_sim.set_faults(token_activation_ms=300)  # every token refused (401) for its first 300 ms
    any_client._core.retry = RetryPolicy(max_attempts=1, base_delay=0.1, max_delay=0.2, jitter=False)
    first = live_ids(fresh_sim)[0]
    assert any_client.get_shipment_raw(first)["id"] == first  # waited for, though no attempt is left to fail
    assert fresh_sim.request_count("/auth/token", status=200) == 2  # the first 401 renews once, then it waits
    assert fresh_sim.request_count("/service/shipment/{id}", status=401) >= 2


def test_calls_waiting_for_a_renewed_token_the_service_does_not_know_yet_renew_it_no_further(
    fresh_sim: Any,
) -> None:
    """Tokens revoked while many calls run, and the one renewed refused for a while (a service whose nodes learn
    of a new token late): the calls that carried the revoked token repeat with the renewed one, the calls that
    take their slot meanwhile carry it first, and every one waits for it; none renews it again (which would
    refuse the calls still waiting for it) nor fails."""
    ids = live_ids(fresh_sim)[:24]
    retry = RetryPolicy(max_attempts=3, base_delay=0.05, max_delay=0.2, jitter=False, total_budget=30.0)

    async def run() -> list[dict[str, Any]]:
        async with AsyncFreightClient(fresh_sim.base_url, fresh_sim.username, fresh_sim.password, retry=retry,
                                      max_concurrency=4) as client:
            await client.get_shipment_raw(ids[0])  # the first token, accepted
            fresh_sim.set_faults(token_activation_ms=400)
            fresh_sim.revoke_tokens()
            return await asyncio.gather(*(client.get_shipment_raw(one) for one in ids))

    assert [shipment["id"] for shipment in asyncio.run(run())] == ids
    assert fresh_sim.request_count("/auth/token", status=200) == 2  # the first, and one renewal
    assert fresh_sim.request_count("/service/shipment/{id}", status=401) > 4  # the renewed token was waited for
