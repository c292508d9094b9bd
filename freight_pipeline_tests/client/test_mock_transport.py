"""Client behaviour against an ``httpx.MockTransport``: faults the simulator cannot produce."""

from __future__ import annotations

import asyncio
import base64
import email.utils
import json
import logging
import math
import pickle
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import unquote

import httpx
import jwt
import pytest

from freight_pipeline.client import (
    AsyncFreightClient,
    AuthenticationError,
    BadRequestError,
    Criterion,
    EFileRole,
    FreightClient,
    FreightConnectionError,
    FreightError,
    FreightTimeoutError,
    NotFoundError,
    ProtocolError,
    RateLimitedError,
    RetryPolicy,
    ServerError,
    _core,
)
from freight_pipeline.client import endpoints as ep
from freight_pipeline.client._core import Reply
from freight_pipeline.client.auth import make_token
from freight_pipeline.client.calls import Expect, by_id
from freight_pipeline.client.retry import RETRY_AFTER_JITTER
from freight_pipeline_tests.client.helpers import SyncView

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


def test_a_request_leaves_with_the_client_s_timeouts_and_no_cookie_and_a_redirect_is_not_followed() -> None:
    """Requests are built by the core, not by httpx's ``build_request``, and the async client sends them straight
    to its transport (``transport.DirectAsyncClient``): each carries the client's timeouts, a cookie the service
    set is never sent back, and a redirect is the answer (a failure), never followed."""

    def business(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/2"):
            return httpx.Response(302, headers={"location": f"{BASE}/service/shipment/1"})
        return httpx.Response(200, json={"id": 1, "client": "001"}, headers={"set-cookie": "session=abc; Path=/"})

    timeout = httpx.Timeout(7.0, connect=3.0)
    recorder = Recorder(business)
    with client_for(recorder, timeout=timeout) as client:
        assert [client.get_shipment_raw(1) for _ in range(2)] == [{"id": 1, "client": "001"}] * 2
        with pytest.raises(FreightError, match="302"):
            client.get_shipment_raw(2)

    async def twice() -> list[Any]:
        async with AsyncFreightClient(BASE, "demo", PASSWORD, transport=httpx.MockTransport(recorder),
                                      retry=FAST, timeout=timeout) as client:
            with pytest.raises(FreightError, match="302"):
                await client.get_shipment_raw(2)
            return [await client.get_shipment_raw(1) for _ in range(2)]

    assert asyncio.run(twice()) == [{"id": 1, "client": "001"}] * 2
    business_requests = [r for r in recorder.requests if r.url.path != "/auth/token"]
    assert [r.url.path[-1] for r in business_requests] == ["1", "1", "2", "2", "1", "1"]
    assert not any("cookie" in r.headers for r in business_requests)
    assert all(r.extensions["timeout"] == timeout.as_dict() for r in recorder.requests)


def test_token_without_usable_field_is_a_protocol_error_naming_fields() -> None:
    recorder = Recorder(ok_shipment, token_body=lambda t: {"bearer": t})
    with client_for(recorder) as client, pytest.raises(ProtocolError) as info:
        client.get_shipment(1)
    assert "bearer" in str(info.value) and recorder.tokens[0] not in str(info.value)
    assert recorder.count("/auth/token") == 1  # a whole answer without a token is not asked again


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


def test_persistent_401_fails_after_one_renewal(monkeypatch: pytest.MonkeyPatch) -> None:
    """A token renewed moments ago that the service still refuses may not be known to it yet: the call waits for
    it (never renewing it again) while it is fresh, then fails."""
    monkeypatch.setattr(_core, "FRESH_TOKEN_S", 0.3)
    recorder = Recorder(lambda r: httpx.Response(401, json={"message": "nope"}))
    with client_for(recorder) as client, pytest.raises(AuthenticationError) as info:
        client.get_shipment(1)
    assert "even after the token was renewed" in str(info.value)
    refused = recorder.count("/service/shipment/1")
    assert recorder.count("/auth/token") == 2 and refused > 1 + FAST.max_attempts  # waits are no attempts
    with client_for(recorder, retry=RetryPolicy.none()) as client, pytest.raises(AuthenticationError):
        client.get_shipment(1)
    assert recorder.count("/auth/token") == 4 and recorder.count("/service/shipment/1") == refused + 2


def test_expired_token_is_renewed_before_the_call() -> None:
    recorder = Recorder(ok_shipment, token_body=lambda t: {"access_token": make_jwt(lifetime=-10)})
    with client_for(recorder) as client:
        client.get_shipment(1)
        client.get_shipment(1)
    # The second call finds the cached token expired and fetches a new one before sending.
    assert recorder.count("/auth/token") == 2 and recorder.count("/service/shipment/1") == 2


def test_retry_after_http_date_is_honoured(client_waits: list[float]) -> None:
    calls = {"n": 0}

    def business(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        if calls["n"] == 1:
            when = email.utils.formatdate(time.time() + 3, usegmt=True)
            return httpx.Response(429, headers={"Retry-After": when}, json={"message": "slow down"})
        return ok_shipment(request)

    policy = RetryPolicy(max_attempts=3, base_delay=0.001, retry_after_cap=0.3)
    with client_for(Recorder(business), retry=policy) as client:
        client.get_shipment(1)
        assert client.stats.retries == 1 and client.stats.by_status[429] == 1
    assert len(client_waits) == 1 and 0.3 <= client_waits[0] <= 0.3 * (1 + RETRY_AFTER_JITTER)  # 2-3 s, capped


def test_a_429_without_retry_after_is_a_failed_attempt() -> None:
    recorder = Recorder(lambda r: httpx.Response(429, json={"message": "busy"}))
    with client_for(recorder) as client, pytest.raises(RateLimitedError) as info:
        client.get_shipment(1)
    assert info.value.retry_after is None and info.value.status_code == 429
    assert recorder.count("/service/shipment/1") == FAST.max_attempts


def test_a_service_that_always_refuses_ends_with_rate_limited_error_when_the_budget_is_spent(
    client_waits: list[float],
) -> None:
    """Refusals with Retry-After are not attempts: only the budget ends them, and never in a tight loop."""
    recorder = Recorder(lambda r: httpx.Response(429, headers={"Retry-After": "0"}, json={"message": "busy"}))
    policy = RetryPolicy(max_attempts=3, base_delay=0.02, max_delay=0.1, total_budget=0.6, retry_after_cap=0.05)
    with client_for(recorder, retry=policy) as client, pytest.raises(RateLimitedError) as info:
        client.get_shipment(1)
    assert info.value.retry_after == 0.0 and info.value.status_code == 429
    assert client_waits and sum(client_waits) <= policy.total_budget
    # more than max_attempts, yet the backoff from the 3rd refusal on keeps it to a few dozen, not thousands
    assert FAST.max_attempts < recorder.count("/service/shipment/1") < 60


@pytest.mark.parametrize("status", [429, 503])
def test_refusals_with_retry_after_do_not_use_up_attempts(status: int) -> None:
    calls = {"n": 0}

    def business(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        if calls["n"] <= 6:  # refused more often than max_attempts (4) allows failures
            return httpx.Response(status, headers={"Retry-After": "0"}, json={"message": "too many in flight"})
        if calls["n"] <= 9:  # then three failed attempts of its own: the fourth succeeds
            return httpx.Response(502, json={"message": "bad gateway"})
        return ok_shipment(request)

    recorder = Recorder(business)
    with client_for(recorder) as client:
        assert client.get_shipment(1).id == 1
        assert client.stats.by_status[status] == 6 and client.stats.retries == 9
    assert recorder.count("/service/shipment/1") == 10


def test_a_503_without_retry_after_is_a_failed_attempt() -> None:
    recorder = Recorder(lambda r: httpx.Response(503, json={"message": "down"}))
    with client_for(recorder) as client, pytest.raises(ServerError):
        client.get_shipment(1)
    assert recorder.count("/service/shipment/1") == FAST.max_attempts


def test_retry_policy_none_does_not_wait_out_a_refusal() -> None:
    recorder = Recorder(lambda r: httpx.Response(429, headers={"Retry-After": "0"}, json={"message": "busy"}))
    with client_for(recorder, retry=RetryPolicy.none()) as client, pytest.raises(RateLimitedError):
        client.get_shipment(1)
    assert recorder.count("/service/shipment/1") == 1


def test_a_refused_create_is_sent_again_past_max_attempts() -> None:
    """A create refused up front (429 + Retry-After) was not processed: it may be sent again, and the
    refusals do not count as its attempts."""
    calls = {"n": 0}

    def business(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        if calls["n"] <= 5:
            return httpx.Response(429, headers={"Retry-After": "0"}, json={})
        return httpx.Response(201, json={"type": "ACTUAL", "code": "ARR"})

    recorder = Recorder(business)
    with client_for(recorder) as client:
        client.create_shipment_event(1, {"type": "ACTUAL", "code": "ARR"})
    assert recorder.count("/service/shipment/1/event") == 6


def test_total_budget_stops_retrying(client_waits: list[float]) -> None:
    """A wait that would end beyond the budget is not started: the call fails at once."""
    recorder = Recorder(lambda r: httpx.Response(429, headers={"Retry-After": "5"}, json={}))
    policy = RetryPolicy(max_attempts=10, retry_after_cap=60, total_budget=1.0)
    with client_for(recorder, retry=policy) as client, pytest.raises(RateLimitedError):
        client.get_shipment(1)
    assert client_waits == [] and recorder.count("/service/shipment/1") == 1


def test_wrong_json_shape_is_a_protocol_error_and_not_retried() -> None:
    recorder = Recorder(lambda r: httpx.Response(200, json={"not": "a list"}))
    with client_for(recorder) as client, pytest.raises(ProtocolError, match="array") as info:
        client.get_shipment_events(1)
    assert (info.value.status_code, info.value.path) == (200, "/service/shipment/1/events")
    assert recorder.count("/service/shipment/1/events") == 1  # the same shape would come again


def test_an_unreadable_field_is_a_problem_not_an_error() -> None:
    recorder = Recorder(lambda r: httpx.Response(200, json={"id": "not-a-number", "client": "001"}))
    with client_for(recorder) as client:
        assert client.get_shipment_raw(1) == {"id": "not-a-number", "client": "001"}  # raw never validates
        shipment = client.get_shipment(1)
    assert shipment.id is None and shipment.client == "001" and shipment.raw["id"] == "not-a-number"
    assert [(p.path, p.value) for p in shipment.problems] == [("id", "not-a-number")]


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
        with pytest.raises(ValueError, match="mode"):
            client.lookup_shipments([{"key": "ID", "mode": "GE", "value": "1"}])  # a typo of match_mode
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


@pytest.mark.parametrize("content_type", ["application/json; charset=ISO-8859-1", "application/json",
                                          "text/plain; charset=windows-1252", "text/html"])
def test_a_non_ascii_password_echoed_in_another_charset_is_scrubbed(content_type: str) -> None:
    """A service answering in ISO-8859-1 (an older Java service) echoes the login's body in its 400: read as UTF-8
    with replacements, ``Zürich`` became ``Z\ufffdrich`` and the rest of the password escaped the redaction into
    the error, the run's output and ``sync_runs.error``. Declared or not, in JSON or text, it is scrubbed."""
    password = "Zürich-Geheimnis-2026"

    def echo(request: httpx.Request) -> httpx.Response:
        sent = json.loads(request.content)
        said = f"cannot read request {{'username':'{sent['username']}','password':'{sent['password']}'}}"
        body = json.dumps({"status": 400, "message": said}, ensure_ascii=False) if "json" in content_type \
            else f"<p>{said}</p>" if "html" in content_type else said
        return httpx.Response(400, content=body.encode("iso-8859-1"), headers={"content-type": content_type})

    with FreightClient(BASE, "demo", password, transport=httpx.MockTransport(echo), retry=FAST) as client, \
            pytest.raises(FreightError) as info:
        client.get_shipment(1)
    said = f"{info.value} {info.value!r} {getattr(info.value, 'detail', '')}"
    assert "cannot read request" in said and "***" in said, said
    assert "Geheimnis" not in said and "rich-" not in said, said


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


def test_page_items_with_unreadable_fields_are_read_with_problems_and_raw_is_kept() -> None:
    body = [{"id": "x", "shipment_closed": "J"}, {"id": 2, "employees": []}]
    recorder = Recorder(lambda r: httpx.Response(200, json=body, headers={"X-Page-Count": "1"}))
    with client_for(recorder) as client:
        page = client.lookup_shipments([])
    assert page.raw == body and page.is_last and page.row_count is None
    first, second = page.items
    assert (first.id, first.shipment_closed, second.id, second.employees) == (None, True, 2, None)
    assert [str(p) for p in first.problems + second.problems] == [
        "id: Input should be a valid integer, unable to parse string as an integer",
        "employees: Input should be a valid dictionary or instance of Employees",
    ]


def test_a_record_no_model_can_read_is_a_protocol_error_with_status_and_excerpt() -> None:
    """The lenient models read every JSON object; a strict one (Criterion) shows the error path."""
    core = client_for(Recorder(ok_shipment))._core
    call = by_id(ep.SHIPMENT_RETRIEVE, Expect.OBJECT, 7)
    content = json.dumps({"key": "ID", "mode": "GE", "secret": PASSWORD}).encode()
    reply = Reply(200, json.loads(content), httpx.Headers({"content-type": "application/json"}), content)
    with pytest.raises(ProtocolError, match="Criterion that cannot be read: mode") as info:
        core.one(Criterion, call, reply)
    err = info.value
    assert (err.status_code, err.method, err.path) == (200, "GET", "/service/shipment/7")
    assert err.body_excerpt.startswith('{"key": "ID"') and PASSWORD not in str(err) and "***" in err.body_excerpt


def test_iteration_stops_on_a_short_page_without_headers() -> None:
    pages = {0: [{"id": 1}, {"id": 2}], 1: [{"id": 3}]}

    def business(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=pages.get(int(request.url.params["page_no"]), []))

    recorder = Recorder(business)
    with client_for(recorder) as client:
        assert [m.id for m in client.iter_memo_pages(page_size=2) for m in m.items] == [1, 2, 3]
    assert recorder.count("/service/shipment/memo") == 2


# --- paging the simulator cannot fault (it enforces page_size <= 500 and honours page_no) --------


ROWS = [{"id": n} for n in range(1, 251)]


def paged_service(
    rows: list[dict[str, Any]],
    *,
    cap: int | None = None,
    headers: bool = True,
    ignore_page_no: bool = False,
    fixed: int | None = None,
) -> Handler:
    """A memo scroll over ``rows`` that may cap the page size, serve pages of a ``fixed`` size whatever is asked, omit
    headers or ignore page_no."""

    def handler(request: httpx.Request) -> httpx.Response:
        size = fixed or int(request.url.params["page_size"])
        size = min(size, cap) if cap else size
        start = 0 if ignore_page_no else int(request.url.params["page_no"]) * size
        counts = {"X-Page-Count": str(math.ceil(len(rows) / size)), "X-Row-Count": str(len(rows))}
        return httpx.Response(200, json=rows[start : start + size], headers=counts if headers else {})

    return handler


def view_of(kind: str, recorder: Recorder) -> SyncView:
    """The sync or the async client on ``recorder``, behind one blocking interface."""
    if kind == "sync":
        return SyncView(client_for(recorder))
    return SyncView.of_async(
        AsyncFreightClient(BASE, "demo", PASSWORD, transport=httpx.MockTransport(recorder), retry=FAST)
    )


def sent_paging(recorder: Recorder) -> list[tuple[str, str]]:
    return [
        (r.url.params["page_no"], r.url.params["page_size"]) for r in recorder.requests if "page_no" in r.url.params
    ]


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_capped_page_size_is_detected_and_paging_goes_on_with_it(kind: str) -> None:
    recorder = Recorder(paged_service(ROWS, cap=100))
    with view_of(kind, recorder) as client:
        pages = list(client.iter_memo_pages(page_size=500))
    assert [row["id"] for page in pages for row in page.raw] == [row["id"] for row in ROWS]
    assert sent_paging(recorder) == [("0", "500"), ("1", "100"), ("2", "100")]
    assert [len(page) for page in pages] == [100, 100, 50] and pages[-1].is_last


@pytest.mark.parametrize("kind", ["sync", "async"])
@pytest.mark.parametrize(("rows", "cap", "ignore_page_no", "sent"), [
    (ROWS, 100, False, [("0", "500"), ("1", "100"), ("2", "100")]),  # a cap: page 1 at the size served is full
    (ROWS[:200], None, False, [("0", "500"), ("1", "200")]),  # the end: page 1 at the size served is empty
    (ROWS[:200], None, True, [("0", "500"), ("1", "200")]),  # page_no ignored: page 1 repeats page 0, the end
])
def test_without_headers_a_short_first_page_is_told_from_a_cap_by_the_next(
    kind: str, rows: list[dict[str, Any]], cap: int | None, ignore_page_no: bool, sent: list[tuple[str, str]]
) -> None:
    """The spec promises X-Page-Count and X-Row-Count for lookups only, and no maximum page size: without them, a
    first page shorter than asked may be a cap. Every row comes once, whichever it was."""
    recorder = Recorder(paged_service(rows, cap=cap, headers=False, ignore_page_no=ignore_page_no))
    with view_of(kind, recorder) as client:
        pages = list(client.iter_code_conversion_pages(page_size=500))
    assert [row["id"] for page in pages for row in page.raw] == [row["id"] for row in rows]
    assert sent_paging(recorder) == sent


@pytest.mark.parametrize("kind", ["sync", "async"])
@pytest.mark.parametrize("headers", [True, False])
def test_a_service_ignoring_page_no_raises_instead_of_looping(kind: str, headers: bool) -> None:
    recorder = Recorder(paged_service(ROWS, headers=headers, ignore_page_no=True))
    with view_of(kind, recorder) as client, pytest.raises(ProtocolError, match="ignore page_no") as info:
        list(client.iter_shipments([], page_size=100))
    assert len(sent_paging(recorder)) == 2 and info.value.path == "/service/shipment/lookup"


def test_a_short_or_empty_page_while_the_headers_say_more_follow_raises() -> None:
    def short_second_page(request: httpx.Request) -> httpx.Response:
        page_no = int(request.url.params["page_no"])
        rows = ROWS[:100] if page_no == 0 else ROWS[100:130]
        return httpx.Response(200, json=rows, headers={"X-Page-Count": "3", "X-Row-Count": "250"})

    with client_for(Recorder(short_second_page)) as client, pytest.raises(ProtocolError, match="30 of 100 rows"):
        list(client.iter_memo_pages(page_size=100))

    empty = Recorder(lambda r: httpx.Response(200, json=[], headers={"X-Page-Count": "3", "X-Row-Count": "250"}))
    with client_for(empty) as client, pytest.raises(ProtocolError, match="0 of 100 rows"):
        list(client.iter_code_conversion_pages(page_size=100))
    assert empty.count("/service/basicdata/codeconverter") == 1


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_first_page_longer_than_asked_with_headers_sets_the_page_size(
    kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A service that ignores ``page_size`` and serves pages of its own size, its headers counting those pages: the
    walk goes on at the size served (asked at the size asked, page 2 was asked past the end and a ProtocolError)."""
    caplog.set_level(logging.INFO, logger="freight_pipeline.client")
    recorder = Recorder(paged_service(ROWS, fixed=200))
    with view_of(kind, recorder) as client:
        scrolled = list(client.iter_code_conversion_pages(page_size=100))
        looked_up = list(client.iter_code_conversion_lookup_pages([], page_size=100))
    for pages in (scrolled, looked_up):
        assert [row["id"] for page in pages for row in page.raw] == [row["id"] for row in ROWS]
        assert [len(page) for page in pages] == [200, 50] and pages[-1].is_last
    assert sent_paging(recorder) == [("0", "100"), ("1", "200")] * 2
    ignored = [r.getMessage() for r in caplog.records if "ignores the page size" in r.getMessage()]
    assert len(ignored) == 2 and "paging on with page_size 200" in ignored[0]  # once a walk


def test_headers_end_the_walk_without_asking_for_an_empty_page() -> None:
    with_headers = Recorder(paged_service(ROWS[:200]))
    with client_for(with_headers) as client:
        assert len(list(client.iter_efiles([], page_size=100))) == 200
    assert sent_paging(with_headers) == [("0", "100"), ("1", "100")]
    without = Recorder(paged_service(ROWS[:200], headers=False))
    with client_for(without) as client:  # A15: without headers only a short (here: empty) page ends it
        assert len(list(client.iter_efiles([], page_size=100))) == 200
    assert sent_paging(without) == [("0", "100"), ("1", "100"), ("2", "100")]


# --- bodies that cannot be decoded, token request shape, URL credentials, concurrency ------------


def broken_gzip(request: httpx.Request) -> httpx.Response:
    headers = {"content-encoding": "gzip", "content-type": "application/json"}
    status = 200 if request.method == "GET" else 201
    return httpx.Response(status, headers=headers, stream=httpx.ByteStream(b"not gzip at all"))


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_an_undecodable_body_is_a_protocol_error_retried_for_reads_only(kind: str) -> None:
    recorder = Recorder(broken_gzip)
    with view_of(kind, recorder) as client:
        with pytest.raises(ProtocolError, match="could not be decoded") as read:
            client.get_shipment(3)
        with pytest.raises(ProtocolError, match="did process the request") as store:
            client.store_efile({"file_name": "a.txt", "document": "YQ=="})
    err = read.value
    assert (err.status_code, err.method, err.path) == (200, "GET", "/service/shipment/3")
    assert "DecodingError" in str(err) and recorder.count("/service/shipment/3") == FAST.max_attempts
    assert (store.value.status_code, store.value.method, store.value.path) == (201, "POST", "/service/efile")
    assert recorder.count("/service/efile") == 1


def test_a_400_from_the_token_endpoint_names_assumption_a1_and_is_not_remembered() -> None:
    recorder = Recorder(ok_shipment, token_status=400)
    with client_for(recorder) as client:
        for _ in range(2):
            with pytest.raises(BadRequestError, match="assumption A1") as info:
                client.get_shipment(1)
    assert not isinstance(info.value, AuthenticationError) and info.value.path == "/auth/token"
    assert recorder.count("/auth/token") == 2 and PASSWORD not in str(info.value)


@pytest.mark.parametrize("status", [401, 403])
def test_refused_credentials_are_remembered(status: int) -> None:
    recorder = Recorder(ok_shipment, token_status=status)
    with client_for(recorder) as client:
        for _ in range(2):
            with pytest.raises(AuthenticationError, match="refused the credentials"):
                client.get_shipment(1)
    assert recorder.count("/auth/token") == 1


def test_credentials_in_the_base_url_never_show() -> None:
    url_password = "p%40ss-w0rd-secret"  # percent-encoded "p@ss-w0rd-secret"

    def echo_url(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/service/shipment/1":
            raise httpx.ConnectError("connection refused", request=request)
        return httpx.Response(400, json={"message": f"cannot serve {request.url} for {unquote(str(request.url))}"})

    url = f"http://gateway:{url_password}@freight.test"
    with FreightClient(url, "demo", PASSWORD, transport=httpx.MockTransport(echo_url), retry=FAST) as client:
        with pytest.raises(BadRequestError) as echoed:
            client.get_shipment(1)  # the token request: its 400 echoes the URL
        texts = [repr(client), str(echoed.value)]
        client._core.token = make_token("t0ken-value")
        with pytest.raises(FreightConnectionError) as refused:
            client.get_shipment(1)
        texts.append(str(refused.value))
    assert "http://gateway:***@freight.test" in repr(client) and "gateway:***@freight.test" in str(refused.value)
    with pytest.raises(ValueError) as bad:
        FreightClient(f"ftp://gateway:{url_password}@freight.test", "demo", PASSWORD)
    texts.append(str(bad.value))
    for text in texts:
        assert url_password not in text and unquote(url_password) not in text, text


def test_sync_client_bounds_requests_in_flight_across_threads() -> None:
    state = {"in_flight": 0, "max": 0}
    lock = threading.Lock()

    def business(request: httpx.Request) -> httpx.Response:
        with lock:
            state["in_flight"] += 1
            state["max"] = max(state["max"], state["in_flight"])
        time.sleep(0.01)
        with lock:
            state["in_flight"] -= 1
        return ok_shipment(request)

    with client_for(Recorder(business), max_concurrency=3) as client, ThreadPoolExecutor(10) as pool:
        client.authenticate()
        assert [s.id for s in pool.map(client.get_shipment, range(30))] == [1] * 30
    assert state["max"] == 3 and "max_concurrency=3" in repr(client)


RECORD_ARRAYS = [e for e in ep.ALL_ENDPOINTS if e.method == "GET" and re.fullmatch(r".*/\{id\}/\w+", e.path)]
"""Every endpoint answering an array of one record's sub-records (a shipment's events and legs, an E-File's
references and roles)."""


@pytest.mark.parametrize("endpoint", RECORD_ARRAYS, ids=[e.name for e in RECORD_ARRAYS])
def test_no_content_to_a_records_array_is_none_of_them_and_to_a_record_no_answer(endpoint: ep.Endpoint) -> None:
    """``204 No Content`` where a record has no sub-records (the spec shows no status code) is an empty array at
    once: it was "not valid JSON", retried, and the shipment quarantined every run. A 200 without a body stays no
    answer (a body lost on its way must not empty a shipment's events), as does a 204 to a record's retrieve."""
    assert len(RECORD_ARRAYS) == 5
    recorder = Recorder(lambda r: httpx.Response(204))
    with client_for(recorder) as client:
        assert client.get_records_raw(endpoint, 7) == []
        assert recorder.count(endpoint.path.replace("{id}", "7")) == 1 and client.stats.retries == 0
        with pytest.raises(ProtocolError, match="not valid JSON"):
            client.get_shipment_raw(7)
    empty = Recorder(lambda r: httpx.Response(200, content=b"", headers={"Content-Type": "application/json"}))
    with client_for(empty) as client, pytest.raises(ProtocolError, match="not valid JSON"):
        client.get_records_raw(endpoint, 7)
    assert empty.count(endpoint.path.replace("{id}", "7")) == FAST.max_attempts


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_no_content_to_page_0_of_a_lookup_is_a_query_without_rows(kind: str) -> None:
    """``204 No Content`` without counts (Spring's ``noContent()`` for an empty result) to page 0: the query holds
    no row, row_count 0 (it was None, and the sync's shipments walk failed on a lookup "answered without
    X-Row-Count"). To a later page it says nothing of the query's total; counts sent with it are taken as sent."""

    counts: dict[str, str] = {}
    recorder = Recorder(lambda r: httpx.Response(204, headers=counts))
    with view_of(kind, recorder) as client:
        page = client.lookup_shipments([Criterion(key="ID", value=7)])
        assert (page.raw, page.row_count, page.page_count, page.is_last) == ([], 0, 0, True)
        pages = list(client.iter_shipment_pages([Criterion(key="ID", value=7)], page_size=100))
        assert [(p.raw, p.row_count, p.page_count) for p in pages] == [([], 0, 0)]
        assert recorder.count("/service/shipment/lookup") == 2
        later = client.lookup_memos([Criterion(key="CLIENT", value="001")], page_no=1)
        assert (later.raw, later.row_count, later.page_count) == ([], None, None)
        for sent, read in (({"X-Row-Count": "0"}, (0, None)), ({"X-Page-Count": "1", "X-Row-Count": "0"}, (0, 1))):
            counts.clear()
            counts.update(sent)
            page = client.lookup_efiles([Criterion(key="SHIPMENT_ID", value=7)])
            assert (page.raw, page.row_count, page.page_count) == ([], *read)

ROLE_ANSWERS: dict[str, Any] = {
    "/service/efile/1/role": ["ACCOUNTING", "CUSTOMS"],
    "/service/efile/2/role": [{"id": 5, "role": "OPS"}, "FINANCE"],
    "/service/efile/3/role": ["OPS", 3],
    "/service/efile/1/reference": ["SHIPMENT"],
    "/service/shipment/1/events": ["ETD"],
    "/service/efile/1": {"id": 1, "roles": ["ACCOUNTING", {"id": 5, "role": "OPS"}]},
}


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_roles_answered_as_names_are_taken_as_received(kind: str) -> None:
    """The spec shows no field of an EFileRole and adds a role as a ``text/plain`` string: an E-File's roles
    answered as names (``["ACCOUNTING", "CUSTOMS"]``) are taken as received (they were a ProtocolError, and the
    documents stream failed for every record), objects among them as models; no other array takes strings."""
    recorder = Recorder(lambda r: httpx.Response(200, json=ROLE_ANSWERS[r.url.path]))
    with view_of(kind, recorder) as client:
        assert client.get_efile_roles_raw(1) == ["ACCOUNTING", "CUSTOMS"]
        assert client.get_records_raw(ep.EFILE_ROLES, 1) == ["ACCOUNTING", "CUSTOMS"]
        assert client.get_efile_roles(1) == ["ACCOUNTING", "CUSTOMS"]
        mixed = client.get_efile_roles(2)
        assert isinstance(mixed[0], EFileRole) and (mixed[0].id, mixed[0].role, mixed[1]) == (5, "OPS", "FINANCE")
        assert pickle.loads(pickle.dumps(client.get_efile_roles_raw(2))) == ROLE_ANSWERS["/service/efile/2/role"]
        cascaded = client.get_efile(1, cascade=True)
        assert cascaded.roles is not None and cascaded.roles[0] == "ACCOUNTING" and cascaded.problems == []
        with pytest.raises(ProtocolError, match="not a JSON array of strings or objects"):
            client.get_efile_roles_raw(3)
        with pytest.raises(ProtocolError, match="not a JSON array of objects"):
            client.get_efile_references_raw(1)
        with pytest.raises(ProtocolError, match="not a JSON array of objects"):
            client.get_records_raw(ep.SHIPMENT_EVENTS, 1)
