"""Client behaviour against an ``httpx.MockTransport``: faults the simulator cannot produce."""

from __future__ import annotations

import asyncio
import base64
import email.utils
import json
import logging
import time
from collections.abc import Callable
from typing import Any

import httpx
import jwt
import pytest

from freight_pipeline.client import (
    AsyncFreightClient,
    AuthenticationError,
    FreightClient,
    FreightConnectionError,
    FreightTimeoutError,
    NotFoundError,
    ProtocolError,
    RateLimitedError,
    RetryPolicy,
    ServerError,
)

BASE = "http://freight.test"
PASSWORD = "hunter2-very-secret"
FAST = RetryPolicy(max_attempts=4, base_delay=0.001, max_delay=0.005, total_budget=5.0, retry_after_cap=0.05)


def make_jwt(lifetime: float = 3600) -> str:
    return jwt.encode({"sub": "demo", "exp": int(time.time() + lifetime)}, "k" * 32, algorithm="HS256")


Handler = Callable[[httpx.Request], httpx.Response]


class Recorder:
    """A fake service: token endpoint plus a scripted business handler; records every request."""

    def __init__(self, business: Handler, token_body: Any = None, token_status: int = 200) -> None:
        self.business = business
        self.token_body = token_body
        self.token_status = token_status
        self.requests: list[httpx.Request] = []
        self.tokens: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if request.url.path == "/auth/token":
            if self.token_status != 200:
                return httpx.Response(self.token_status, json={"status": 401, "message": "bad credentials"})
            token = make_jwt()
            self.tokens.append(token)
            body = self.token_body(token) if callable(self.token_body) else {"access_token": token}
            if isinstance(body, str):
                return httpx.Response(200, text=body, headers={"content-type": "text/plain"})
            return httpx.Response(200, json=body)
        return self.business(request)

    def count(self, path: str) -> int:
        return sum(r.url.path == path for r in self.requests)


def client_for(recorder: Recorder, **kwargs: Any) -> FreightClient:
    kwargs.setdefault("retry", FAST)
    return FreightClient(BASE, "demo", PASSWORD, transport=httpx.MockTransport(recorder), **kwargs)


def ok_shipment(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, json={"id": 1, "client": "001"})


@pytest.mark.parametrize(
    "token_body",
    [
        lambda t: {"access_token": t},
        lambda t: {"token": t},
        lambda t: {"jwt": t},
        lambda t: {"id_token": t},
        lambda t: json.dumps(t),  # JSON string body
        lambda t: t,  # bare text body
    ],
)
def test_token_field_variants_end_to_end(token_body: Callable[[str], Any]) -> None:
    recorder = Recorder(ok_shipment, token_body=token_body)
    with client_for(recorder) as client:
        assert client.get_shipment(1).id == 1
        assert client.get_shipment_raw(1) == {"id": 1, "client": "001"}
    business = [r for r in recorder.requests if r.url.path != "/auth/token"]
    assert all(r.headers["authorization"] == f"Bearer {recorder.tokens[0]}" for r in business)
    assert recorder.count("/auth/token") == 1  # cached


def test_token_without_usable_field_is_a_protocol_error_naming_fields() -> None:
    recorder = Recorder(ok_shipment, token_body=lambda t: {"bearer": t})
    with client_for(recorder) as client, pytest.raises(ProtocolError) as info:
        client.get_shipment(1)
    assert "bearer" in str(info.value) and recorder.tokens[0] not in str(info.value)


def test_401_renews_token_and_repeats_once() -> None:
    calls = {"n": 0}

    def business(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        if calls["n"] == 1:
            return httpx.Response(401, json={"message": "token expired"})
        return ok_shipment(request)

    recorder = Recorder(business)
    with client_for(recorder) as client:
        assert client.get_shipment(1).id == 1
        assert client.stats.reauthentications == 1 and client.stats.retries == 0
    assert recorder.count("/auth/token") == 2
    assert recorder.requests[-1].headers["authorization"] == f"Bearer {recorder.tokens[1]}"


def test_persistent_401_fails_after_one_renewal() -> None:
    recorder = Recorder(lambda r: httpx.Response(401, json={"message": "nope"}))
    with client_for(recorder) as client, pytest.raises(AuthenticationError) as info:
        client.get_shipment(1)
    assert "even after the token was renewed" in str(info.value)
    assert recorder.count("/auth/token") == 2 and recorder.count("/service/shipment/1") == 2


def test_expired_token_is_renewed_before_the_call() -> None:
    recorder = Recorder(ok_shipment, token_body=lambda t: {"access_token": make_jwt(lifetime=-10)})
    with client_for(recorder) as client:
        client.get_shipment(1)
        client.get_shipment(1)
    # The second call finds the cached token expired and fetches a new one before sending.
    assert recorder.count("/auth/token") == 2 and recorder.count("/service/shipment/1") == 2


def test_retry_after_http_date_is_honoured() -> None:
    calls = {"n": 0}

    def business(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        if calls["n"] == 1:
            when = email.utils.formatdate(time.time() + 3, usegmt=True)
            return httpx.Response(429, headers={"Retry-After": when}, json={"message": "slow down"})
        return ok_shipment(request)

    policy = RetryPolicy(max_attempts=3, base_delay=0.001, retry_after_cap=0.3)
    with client_for(Recorder(business), retry=policy) as client:
        started = time.monotonic()
        client.get_shipment(1)
        assert 0.25 <= time.monotonic() - started < 2.0  # waited ~2-3 s, capped at 0.3 s
        assert client.stats.retries == 1 and client.stats.by_status[429] == 1


def test_rate_limited_error_after_attempts_carries_retry_after() -> None:
    recorder = Recorder(lambda r: httpx.Response(429, headers={"Retry-After": "0"}, json={"message": "busy"}))
    with client_for(recorder) as client, pytest.raises(RateLimitedError) as info:
        client.get_shipment(1)
    assert info.value.retry_after == 0.0 and info.value.status_code == 429
    assert recorder.count("/service/shipment/1") == FAST.max_attempts


def test_total_budget_stops_retrying() -> None:
    recorder = Recorder(lambda r: httpx.Response(429, headers={"Retry-After": "5"}, json={}))
    policy = RetryPolicy(max_attempts=10, retry_after_cap=60, total_budget=1.0)
    with client_for(recorder, retry=policy) as client, pytest.raises(RateLimitedError):
        started = time.monotonic()
        client.get_shipment(1)
    assert time.monotonic() - started < 0.5 and recorder.count("/service/shipment/1") == 1


def test_malformed_json_is_a_protocol_error_with_context() -> None:
    body = "{not json" + "x" * 500
    recorder = Recorder(lambda r: httpx.Response(200, text=body))
    with client_for(recorder) as client, pytest.raises(ProtocolError) as info:
        client.get_shipment(7)
    err = info.value
    assert err.status_code == 200 and err.method == "GET" and err.path == "/service/shipment/7"
    assert "GET /service/shipment/7" in str(err) and "{not json" in str(err)
    assert len(err.body_excerpt) <= 200
    assert recorder.count("/service/shipment/7") == 1  # not retried


def test_wrong_json_shape_is_a_protocol_error() -> None:
    recorder = Recorder(lambda r: httpx.Response(200, json={"not": "a list"}))
    with client_for(recorder) as client, pytest.raises(ProtocolError, match="array"):
        client.get_shipment_events(1)
    recorder = Recorder(lambda r: httpx.Response(200, json={"id": "not-a-number"}))
    with client_for(recorder) as client:
        assert client.get_shipment_raw(1) == {"id": "not-a-number"}  # raw never validates
        with pytest.raises(ProtocolError, match="Shipment"):
            client.get_shipment(1)


def test_timeouts_are_retried_then_raised_as_freight_timeout() -> None:
    def business(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("read timed out", request=request)

    recorder = Recorder(business)
    with client_for(recorder) as client, pytest.raises(FreightTimeoutError) as info:
        client.get_shipment(1)
    assert isinstance(info.value, TimeoutError)
    assert recorder.count("/service/shipment/1") == FAST.max_attempts
    assert client.stats.transport_errors == {"ReadTimeout": FAST.max_attempts}


def test_create_event_not_retried_after_read_timeout_but_after_connect_error() -> None:
    def timeout(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("read timed out", request=request)

    recorder = Recorder(timeout)
    event = {"event": "PICKUP", "type": "ACTUAL", "shipment_id": 1}
    with client_for(recorder) as client, pytest.raises(FreightTimeoutError):
        client.create_shipment_event(1, event)
    assert recorder.count("/service/shipment/1/event") == 1

    calls = {"n": 0}

    def refused_once(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        if calls["n"] == 1:
            raise httpx.ConnectError("connection refused", request=request)
        return httpx.Response(201, json=json.loads(request.content))

    recorder = Recorder(refused_once)
    with client_for(recorder) as client:
        created = client.create_shipment_event(1, event)
    assert created is not None and created.event == "PICKUP"
    assert recorder.count("/service/shipment/1/event") == 2
    sent = [r for r in recorder.requests if r.url.path.endswith("/event")][-1]
    assert sent.url.params["type"] == "ACTUAL"


def test_dropped_connection_on_webhook_is_not_repeated() -> None:
    def dropped(request: httpx.Request) -> httpx.Response:
        raise httpx.RemoteProtocolError("Server disconnected without sending a response.", request=request)

    recorder = Recorder(dropped)
    with (
        client_for(recorder, webhook_username="hook", webhook_password="hook-secret-pw") as client,
        pytest.raises(FreightConnectionError) as info,
    ):
        client.send_webhook({"a": 1})
    assert "may or may not have been processed" in str(info.value) and isinstance(info.value, ConnectionError)
    assert recorder.count("/external/webhook") == 1 and recorder.count("/auth/token") == 0
    assert recorder.requests[0].headers["authorization"].startswith("Basic ")


def test_500_on_store_efile_is_not_repeated_but_503_with_retry_after_is() -> None:
    statuses = iter([503, 201])

    def business(request: httpx.Request) -> httpx.Response:
        status = next(statuses)
        if status == 503:
            return httpx.Response(503, headers={"Retry-After": "0"}, text="<html>busy</html>")
        return httpx.Response(201, json={"id": 9, "file_name": "a.txt"})

    with client_for(Recorder(business)) as client:
        assert client.store_efile({"file_name": "a.txt", "document": "YQ=="}).id == 9

    recorder = Recorder(lambda r: httpx.Response(500, text="<html><body>Internal</body></html>"))
    with client_for(recorder) as client, pytest.raises(ServerError) as info:
        client.store_efile({"file_name": "a.txt", "document": "YQ=="})
    assert recorder.count("/service/efile") == 1 and "may or may not" in str(info.value)
    assert "<html>" not in str(info.value) and "Internal" in str(info.value)


def test_lookup_sends_paging_ordering_and_criteria() -> None:
    seen: list[httpx.Request] = []

    def business(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=[{"id": 1}], headers={"X-Page-Count": "3", "X-Row-Count": "101"})

    with client_for(Recorder(business)) as client:
        page = client.lookup_shipments(
            [{"key": "ID", "match_mode": "GE", "value": 1}],
            page_no=2,
            page_size=50,
            order_by=["LAST_MODIFIED_DATE", "ID"],
            order_mode=["DESC", "asc"],
        )
    assert (page.page_no, page.page_count, page.row_count, page.raw) == (2, 3, 101, [{"id": 1}])
    assert page.items[0].id == 1
    request = seen[0]
    assert request.url.params.get_list("order_by") == ["LAST_MODIFIED_DATE", "ID"]
    assert request.url.params.get_list("order_mode") == ["DESC", "ASC"]
    assert (request.url.params["page_no"], request.url.params["page_size"]) == ("2", "50")
    assert json.loads(request.content) == [{"key": "ID", "match_mode": "GE", "value": "1"}]


def test_misuse_is_rejected_before_any_request() -> None:
    recorder = Recorder(ok_shipment)
    with client_for(recorder) as client:
        with pytest.raises(TypeError):
            client.lookup_shipments({"key": "ID", "value": "1"})  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            client.lookup_shipments([], page_size=0)
        with pytest.raises(ValueError):
            client.lookup_shipments([], order_by=["ID"], order_mode=["UP"])
        with pytest.raises(ValueError):
            client.create_shipment_event(1, {"event": "PICKUP"})  # no type
        with pytest.raises(TypeError):
            client.get_shipment("abc")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="webhook"):
            client.send_webhook({"a": 1})
    assert recorder.requests == []
    with pytest.raises(ValueError):
        FreightClient(BASE, "demo", "")


def test_404_is_not_found_and_not_retried() -> None:
    recorder = Recorder(lambda r: httpx.Response(404, json={"status": 404, "message": "no shipment 5"}))
    with client_for(recorder) as client, pytest.raises(NotFoundError, match="no shipment 5"):
        client.get_shipment(5)
    assert recorder.count("/service/shipment/5") == 1


def test_async_client_bounds_concurrency_and_fetches_one_token() -> None:
    state = {"in_flight": 0, "max": 0, "tokens": 0}

    async def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/auth/token":
            state["tokens"] += 1
            await asyncio.sleep(0.01)
            return httpx.Response(200, json={"access_token": make_jwt()})
        state["in_flight"] += 1
        state["max"] = max(state["max"], state["in_flight"])
        await asyncio.sleep(0.01)
        state["in_flight"] -= 1
        return httpx.Response(200, json={"id": int(request.url.path.rsplit("/", 1)[-1])})

    async def run() -> list[int]:
        async with AsyncFreightClient(
            BASE, "demo", PASSWORD, transport=httpx.MockTransport(handler), max_concurrency=3, retry=FAST
        ) as client:
            docs = await asyncio.gather(*(client.get_shipment(i) for i in range(20)))
            return [d.id or 0 for d in docs]

    assert asyncio.run(run()) == list(range(20))
    assert state["max"] == 3 and state["tokens"] == 1


def test_async_wrong_password_makes_one_request_even_when_concurrent() -> None:
    recorder = Recorder(ok_shipment, token_status=401)

    async def run() -> list[BaseException | Any]:
        async with AsyncFreightClient(BASE, "demo", PASSWORD, transport=httpx.MockTransport(recorder)) as client:
            return await asyncio.gather(*(client.get_shipment(i) for i in range(5)), return_exceptions=True)

    results = asyncio.run(run())
    assert all(isinstance(r, AuthenticationError) for r in results)
    assert len(recorder.requests) == 1
    assert "'demo'" in str(results[0]) and PASSWORD not in str(results[0])


def test_secrets_echoed_by_the_service_are_scrubbed(caplog: pytest.LogCaptureFixture) -> None:
    def echo(request: httpx.Request) -> httpx.Response:
        echoed = f"{request.headers.get('authorization')} {request.content.decode()}"
        return httpx.Response(400, json={"message": f"bad request: {echoed}"})

    def echo_token_endpoint(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/auth/token":
            return httpx.Response(401, text=f"no such user, you sent {request.content.decode()}")
        return echo(request)

    caplog.set_level(logging.DEBUG)
    recorder = Recorder(echo)
    errors: list[Exception] = []
    with client_for(recorder, webhook_username="hook", webhook_password="hook-secret-pw") as client:
        for action in (lambda: client.get_shipment(1), lambda: client.send_webhook({"p": PASSWORD})):
            with pytest.raises(Exception) as info:
                action()
            errors.append(info.value)
        token = recorder.tokens[0]
        texts = [repr(client), str(client.stats), *(str(e) for e in errors), *(repr(e) for e in errors)]
    with FreightClient(BASE, "demo", PASSWORD, transport=httpx.MockTransport(echo_token_endpoint)) as bad:
        with pytest.raises(AuthenticationError) as info:
            bad.get_shipment(1)
        texts += [str(info.value), repr(bad), repr(bad._core.token_call())]
    texts += [r.getMessage() for r in caplog.records]
    for text in texts:
        assert PASSWORD not in text and token not in text and "hook-secret-pw" not in text
        assert base64.b64encode(b"hook:hook-secret-pw").decode() not in text
    assert "***" in str(errors[0])


def test_page_items_that_cannot_be_read_raise_protocol_error_but_raw_is_kept() -> None:
    recorder = Recorder(lambda r: httpx.Response(200, json=[{"id": "x"}], headers={"X-Page-Count": "1"}))
    with client_for(recorder) as client:
        page = client.lookup_shipments([])
    assert page.raw == [{"id": "x"}] and page.is_last and page.row_count is None
    with pytest.raises(ProtocolError, match="Shipment"):
        _ = page.items


def test_iteration_stops_on_a_short_page_without_headers() -> None:
    pages = {0: [{"id": 1}, {"id": 2}], 1: [{"id": 3}]}

    def business(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=pages.get(int(request.url.params["page_no"]), []))

    recorder = Recorder(business)
    with client_for(recorder) as client:
        assert [m.id for m in client.iter_memo_pages(page_size=2) for m in m.items] == [1, 2, 3]
    assert recorder.count("/service/shipment/memo") == 2
