"""The client against the real simulator over HTTP: every method, paging, auth and faults."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import math
import time
from typing import Any

import pytest

from freight_pipeline.client import (
    AsyncFreightClient,
    AuthenticationError,
    ConflictError,
    Criterion,
    EFile,
    FreightClient,
    FreightConnectionError,
    NotFoundError,
    PermissionDeniedError,
    RetryPolicy,
    ServerError,
    Shipment,
)
from freight_pipeline_tests.client.helpers import FAST_RETRY

ORDER = ["LAST_MODIFIED_DATE", "LAST_MODIFIED_TIME", "ID"]


def live_ids(sim: Any) -> list[int]:
    return sorted(int(row["ID"]) for row in sim.store.shipment_key_rows())


def same_json(a: Any, b: Any) -> bool:
    return json.loads(json.dumps(a)) == json.loads(json.dumps(b))


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
    rows = list(fresh_sim.store.shipment_key_rows())
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
        assert same_json(raw, store.get_shipment(shipment_id))
        full = client.get_shipment(shipment_id)
        assert full.id == shipment_id and full.raw == raw
        assert full.extra_fields == {}, f"fields the spec does not name: {sorted(full.extra_fields)}"
        assert same_json(client.get_shipment_events_raw(shipment_id), store.get_events(shipment_id))
        events = client.get_shipment_events(shipment_id)
        assert all(e.known for e in events)
        for e in events:  # every part may be null; an instant whenever date, time and offset are there
            d = e.date_time
            complete = d is not None and None not in (d.date, d.time, d.zone_offset)
            assert (e.instant is not None) == complete, e.raw
            assert d is None or d.parse_error is None
        air = client.get_air_main_carriage(shipment_id)
        sea = client.get_sea_main_carriage(shipment_id)
        assert same_json([leg.raw for leg in air], store.get_air_main_carriage(shipment_id))
        assert same_json(client.get_sea_main_carriage_raw(shipment_id), store.get_sea_main_carriage(shipment_id))
        if full.mode_of_transport == "AIR":
            assert sea == []
        if full.mode_of_transport == "SEA":
            assert air == []
    with pytest.raises(NotFoundError) as info:
        client.get_shipment(999_999_999)
    assert info.value.status_code == 404 and "/service/shipment/999999999" in str(info.value)


def test_create_and_update_event(client: FreightClient, fresh_sim: Any) -> None:
    shipment_id = live_ids(fresh_sim)[3]
    existing = {(e["event"], e["type"]) for e in fresh_sim.store.get_events(shipment_id)}
    code = next(c for c in ("VGM_CLOSING", "DIFF_BL_DATE", "GATE_OUT", "AVAILABLE") if (c, "ESTIMATED") not in existing)
    event = {
        "event": code,
        "type": "ESTIMATED",
        "shipment_id": shipment_id,
        "date_time": {"date": "2026-11-20", "time": "08:00:00", "zone_offset": "+01:00"},
    }
    created = client.create_shipment_event(shipment_id, event)
    assert created is not None and created.event == code
    with pytest.raises(ConflictError):
        client.create_shipment_event(shipment_id, event, event_type="ESTIMATED")
    assert fresh_sim.request_count("/service/shipment/{shipmentId}/event") == 2  # a 409 is not retried
    changed = {**event, "date_time": {"date": "2026-11-21", "time": "09:30:00", "zone_offset": "+01:00"}}
    updated = client.update_shipment_event(shipment_id, code, changed)
    assert updated is not None and updated.date_time is not None and updated.date_time.date == "2026-11-21"
    events = client.get_shipment_events(shipment_id)
    assert any(e.event == code and e.date_time and e.date_time.date == "2026-11-21" for e in events)
    if (code, "ACTUAL") not in existing:
        with pytest.raises(NotFoundError):
            client.update_shipment_event(shipment_id, code, {**changed, "type": "ACTUAL"})


# --- memos and code conversions -----------------------------------------------------------------


def test_memos_scroll_lookup_retrieve(client: FreightClient, fresh_sim: Any) -> None:
    expected = list(fresh_sim.store.memo_rows())
    pages = list(client.iter_memo_pages(page_size=30))
    scrolled = [row for page in pages for row in page.raw]
    assert same_json(scrolled, expected)
    assert pages[0].row_count == len(expected)
    assert expected, "the simulator should generate memo lines"
    first = expected[0]
    found = list(
        client.iter_memos(
            [
                Criterion(key="CLIENT", value=first["client"]),
                Criterion(key="SHIPMENT_NUMBER", value=first["shipment_number"]),
            ]
        )
    )
    assert first["id"] in {m.id for m in found}
    assert all(m.shipment_number == first["shipment_number"] for m in found)
    assert client.get_memo(first["id"]).memo == first["memo"]
    assert same_json(client.get_memo_raw(first["id"]), fresh_sim.store.get_memo(first["id"]))


def test_code_conversions_scroll_lookup_retrieve(client: FreightClient, fresh_sim: Any) -> None:
    expected = list(fresh_sim.store.code_conversion_rows())
    assert expected, "the simulator should generate code conversions"
    scrolled = [row for page in client.iter_code_conversion_pages(page_size=7) for row in page.raw]
    assert same_json(scrolled, expected)
    partner = expected[0]["partner"]
    found = list(client.iter_code_conversions([Criterion(key="PARTNER", value=partner)], page_size=3))
    assert sorted(c.id for c in found if c.id is not None) == sorted(
        r["id"] for r in expected if r["partner"] == partner
    )
    one = client.get_code_conversion(expected[0]["id"])
    assert one.raw == client.get_code_conversion_raw(expected[0]["id"]) and one.partner == partner
    page = client.lookup_code_conversions([Criterion(key="DIRECTION", value=expected[0]["direction"])], page_size=2)
    assert page.row_count is not None and page.row_count >= 1


# --- E-File -------------------------------------------------------------------------------------


def test_efile_group_end_to_end(client: FreightClient, fresh_sim: Any) -> None:
    shipment_id = live_ids(fresh_sim)[0]
    new = EFile.from_bytes(
        b"hello freight",
        file_name="note.txt",
        mime_type="text/plain",
        references=[{"type": "SHIPMENT", "value": shipment_id}],
        roles=["OPS"],
    )
    stored = client.store_efile(new)
    assert stored.id is not None and stored.file_name == "note.txt"
    efile_id = stored.id
    plain = client.get_efile(efile_id)
    assert plain.references is None and plain.roles is None and plain.content() == b"hello freight"
    full = client.get_efile(efile_id, cascade=True)
    assert full.references is not None and [r.value for r in full.references] == [str(shipment_id)]
    assert full.roles is not None and [r.role for r in full.roles] == ["OPS"]
    assert client.get_efile_raw(efile_id, cascade=True)["roles"][0]["role"] == "OPS"

    client.add_efile_reference(efile_id, {"type": "HBL", "value": "HBL-42"})
    refs = client.get_efile_references(efile_id)
    assert {(r.type, r.value) for r in refs} == {("SHIPMENT", str(shipment_id)), ("HBL", "HBL-42")}
    client.delete_efile_reference(efile_id, next(r for r in refs if r.type == "HBL"))
    assert [r["type"] for r in client.get_efile_references_raw(efile_id)] == ["SHIPMENT"]

    client.add_efile_role(efile_id, "FINANCE")
    assert sorted(r.role or "" for r in client.get_efile_roles(efile_id)) == ["FINANCE", "OPS"]
    client.delete_efile_role(efile_id, "OPS")
    assert [r["role"] for r in client.get_efile_roles_raw(efile_id)] == ["FINANCE"]

    by_shipment = client.lookup_efiles([Criterion(key="SHIPMENT_ID", value=shipment_id)])
    assert efile_id in {e.id for e in by_shipment.items}
    assert all(e.document is None for e in by_shipment.items)
    assert efile_id in {e.id for e in client.iter_efiles([Criterion(key="REFERENCE", value=str(shipment_id))])}

    deleted = client.delete_efile(efile_id)
    assert deleted is not None and deleted.id == efile_id
    with pytest.raises(NotFoundError):
        client.get_efile(efile_id)


def test_invalid_base64_is_a_bad_request_naming_the_problem(client: FreightClient) -> None:
    from freight_pipeline.client import BadRequestError

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


def test_retry_after_seconds_are_honoured_up_to_the_cap(fresh_sim: Any) -> None:
    fresh_sim.set_faults(retry_after_s=1)
    fresh_sim.script_fault("rate_limit", 2, path="/service/shipment/{id}")
    policy = RetryPolicy(max_attempts=5, base_delay=0.001, retry_after_cap=0.2)
    with FreightClient(fresh_sim.base_url, fresh_sim.username, fresh_sim.password, retry=policy) as client:
        client.authenticate()
        started = time.monotonic()
        client.get_shipment(live_ids(fresh_sim)[0])
        elapsed = time.monotonic() - started
    assert 0.4 <= elapsed < 1.5  # two waits of Retry-After 1 s capped at 0.2 s


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
    assert all(same_json(d, fresh_sim.store.get_shipment(d["id"])) for d in docs)
    assert stats.retries > 0 and stats.requests == fresh_sim.request_count()


def test_async_client_covers_every_read_method(fresh_sim: Any) -> None:
    shipment_id = live_ids(fresh_sim)[2]

    async def run() -> None:
        async with AsyncFreightClient(
            fresh_sim.base_url,
            fresh_sim.username,
            fresh_sim.password,
            webhook_username=fresh_sim.webhook_username,
            webhook_password=fresh_sim.webhook_password,
            retry=FAST_RETRY,
        ) as client:
            page = await client.lookup_shipments([Criterion(key="ID", value=shipment_id)])
            assert page.items[0].id == shipment_id and page.row_count == 1
            assert (await client.get_shipment(shipment_id)).id == shipment_id
            assert isinstance(await client.get_shipment_events_raw(shipment_id), list)
            assert isinstance(await client.get_air_main_carriage(shipment_id), list)
            assert isinstance(await client.get_sea_main_carriage_raw(shipment_id), list)
            memos = [m async for m in client.iter_memo_pages(page_size=500)]
            assert memos and memos[0].row_count == len(list(fresh_sim.store.memo_rows()))
            convs = [c async for c in client.iter_code_conversion_pages()]
            assert convs[0].raw
            stored = await client.store_efile(EFile.from_bytes(b"x", file_name="x.bin"))
            assert stored.id is not None
            await client.add_efile_role(stored.id, "OPS")
            assert [r.role for r in await client.get_efile_roles(stored.id)] == ["OPS"]
            assert (await client.delete_efile(stored.id)) is not None
            assert (await client.send_webhook({"a": 1})) is not None

    asyncio.run(run())


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
