"""Pure parts: retry policy math, Retry-After parsing, retry rules, token extraction and expiry."""

from __future__ import annotations

import datetime as dt
import email.utils
import json
import random
import time

import httpx
import jwt
import pytest

from freight_pipeline.client import RetryPolicy
from freight_pipeline.client.auth import (
    DEFAULT_TOKEN_LIFETIME_S,
    TokenBodyBroken,
    TokenMissing,
    extract_token,
    jwt_expiry,
    make_token,
)
from freight_pipeline.client.retry import (
    parse_retry_after,
    refused_before_processing,
    status_is_retryable,
    transport_error_is_retryable,
)


def test_defaults_are_documented_values() -> None:
    policy = RetryPolicy()
    assert (policy.max_attempts, policy.base_delay, policy.max_delay) == (5, 0.5, 30.0)
    assert (policy.jitter, policy.total_budget, policy.retry_after_cap) == (True, 120.0, 60.0)
    with pytest.raises(ValueError):
        RetryPolicy(max_attempts=0)


def test_exponential_backoff_without_jitter_is_capped() -> None:
    policy = RetryPolicy(base_delay=0.5, max_delay=3.0, jitter=False)
    assert [policy.backoff(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]


def test_full_jitter_stays_within_zero_and_the_backoff() -> None:
    policy = RetryPolicy(base_delay=1.0, max_delay=8.0)
    rng = random.Random(7)
    for attempt in range(1, 8):
        samples = [policy.backoff(attempt, rng) for _ in range(200)]
        ceiling = min(8.0, 2 ** (attempt - 1))
        assert all(0.0 <= s <= ceiling for s in samples)
        assert max(samples) > ceiling * 0.8  # really spread, not a constant


def test_retry_after_replaces_backoff_and_is_capped() -> None:
    policy = RetryPolicy(retry_after_cap=10.0, jitter=False)
    assert policy.delay(1, 3.0) == 3.0
    assert policy.delay(1, 500.0) == 10.0
    assert policy.delay(1, None) == 0.5


def test_retry_after_gets_jitter_but_is_never_shortened() -> None:
    """Callers told the same Retry-After spread out over up to 10 % more, none comes back early."""
    policy = RetryPolicy(retry_after_cap=10.0)
    rng = random.Random(3)
    waits = [policy.delay(1, 4.0, rng) for _ in range(200)]
    assert all(4.0 <= w <= 4.4 for w in waits) and max(waits) - min(waits) > 0.3
    capped = [policy.delay(1, 500.0, rng) for _ in range(50)]
    assert all(10.0 <= w <= 11.0 for w in capped) and len(set(capped)) > 1
    assert policy.delay(1, 0.0, rng) == 0.0
    assert 0.0 <= policy.delay(1, None, rng) <= 0.5


def test_refused_before_processing_is_a_429_or_503_that_says_when_to_come_back() -> None:
    assert refused_before_processing(429, 1.0) and refused_before_processing(503, 0.0)
    assert not refused_before_processing(429, None)  # no Retry-After: an ordinary failed attempt
    assert not refused_before_processing(503, None) and not refused_before_processing(502, 1.0)


def test_refusals_wait_the_retry_after_then_at_least_the_backoff_beyond_max_attempts() -> None:
    policy = RetryPolicy(max_attempts=3, base_delay=0.5, max_delay=4.0, jitter=False, retry_after_cap=10.0)
    assert [policy.refusal_delay(n, 1.0) for n in range(1, 8)] == [1.0, 1.0, 1.0, 1.0, 2.0, 4.0, 4.0]
    assert [policy.refusal_delay(n, 0.0) for n in range(1, 5)] == [0.0, 0.0, 0.5, 1.0]  # never a tight loop
    assert policy.refusal_delay(1, 500.0) == 10.0  # capped like any Retry-After


def test_retry_policy_none_retries_nothing_not_even_a_refusal() -> None:
    policy = RetryPolicy.none()
    assert policy.max_attempts == 1 and policy.total_budget == 0.0


def test_parse_retry_after_seconds_and_http_date() -> None:
    assert parse_retry_after("2") == 2.0
    assert parse_retry_after(" 0 ") == 0.0
    assert parse_retry_after(None) is None and parse_retry_after("soon") is None
    now = dt.datetime(2026, 11, 1, 12, 0, 0, tzinfo=dt.UTC)
    later = email.utils.format_datetime(now + dt.timedelta(seconds=30), usegmt=True)
    assert parse_retry_after(later, now=now) == pytest.approx(30.0)
    earlier = email.utils.format_datetime(now - dt.timedelta(seconds=30), usegmt=True)
    assert parse_retry_after(earlier, now=now) == 0.0


@pytest.mark.parametrize(
    ("status", "safe", "retry_after", "expected"),
    [
        (503, True, None, True),
        (500, True, None, True),
        (408, True, None, True),
        (501, True, None, False),
        (404, True, None, False),
        (400, True, None, False),
        (429, False, None, True),  # a 429 was refused before processing
        (503, False, 1.0, True),  # 503 with Retry-After: refused up front
        (503, False, None, False),  # 503 without: outcome unknown
        (500, False, None, False),
        (502, False, 1.0, False),
    ],
)
def test_status_retry_rules(status: int, safe: bool, retry_after: float | None, expected: bool) -> None:
    assert status_is_retryable(status, safe, retry_after) is expected


def test_transport_retry_rules() -> None:
    request = httpx.Request("POST", "http://x/y")
    assert transport_error_is_retryable(httpx.ConnectError("refused", request=request), retry_safe=False)
    assert transport_error_is_retryable(httpx.ConnectTimeout("t", request=request), retry_safe=False)
    assert not transport_error_is_retryable(httpx.ReadTimeout("t", request=request), retry_safe=False)
    assert not transport_error_is_retryable(httpx.RemoteProtocolError("dropped", request=request), retry_safe=False)
    assert transport_error_is_retryable(httpx.RemoteProtocolError("dropped", request=request), retry_safe=True)
    assert transport_error_is_retryable(httpx.ReadError("reset", request=request), retry_safe=True)
    assert not transport_error_is_retryable(httpx.UnsupportedProtocol("ftp", request=request), retry_safe=True)


JWT = jwt.encode({"sub": "demo", "exp": 2_000_000_000}, "s" * 32, algorithm="HS256")


@pytest.mark.parametrize(
    "body",
    [
        json.dumps({"access_token": JWT, "token_type": "Bearer", "expires_in": 86400}),
        json.dumps({"token": JWT}),
        json.dumps({"jwt": JWT}),
        json.dumps({"id_token": JWT}),
        json.dumps(JWT),
        JWT,
        f"  {JWT}\n",
        "\ufeff" + json.dumps({"access_token": JWT}, separators=(",", ":")),  # a byte-order mark before the JSON
        "\ufeff" + json.dumps({"access_token": JWT}),
        f"\ufeff{JWT}",
        # the token with its scheme, as services that hand out the Authorization header's value send it
        json.dumps({"token": f"Bearer {JWT}", "expires_in": 86400}),
        json.dumps({"access_token": f"BEARER  {JWT}"}),
        json.dumps(f"bearer {JWT}"),
        f"Bearer {JWT}",
    ],
)
def test_token_extraction_variants(body: str) -> None:
    value, _ = extract_token(body.encode())
    assert value == JWT


def test_a_text_no_authorization_header_can_carry_is_no_bare_token() -> None:
    for bad in ("zugriff-verweigert-für-demo", "tok\x00en"):
        with pytest.raises(TokenMissing):
            extract_token(bad.encode())


def test_token_extraction_failures_never_echo_the_body() -> None:
    with pytest.raises(TokenMissing) as info:
        extract_token(json.dumps({"status": "ok", "secretish": "abc def"}).encode())
    assert "abc def" not in str(info.value) and "secretish" in str(info.value)
    for bad in (b"", b"<html>nope</html>", b"[1,2]", b'"two words"'):
        with pytest.raises(TokenMissing):
            extract_token(bad)


def test_a_token_field_holding_no_token_is_named_as_such_never_its_value() -> None:
    """A field the token is looked for in that holds something else: was "has none of the fields ... (fields present:
    ..., token)", naming as missing the field it listed as present."""
    for held in ("two words here", "Bearer", 12345):
        with pytest.raises(TokenMissing) as info:
            extract_token(json.dumps({"token": held, "expires_in": 60}).encode())
        assert str(info.value).startswith("the token response's field token holds no bearer token"), info.value
        assert str(held) not in str(info.value).replace("bearer token", "")


def test_a_json_body_cut_short_is_broken_not_a_bare_token() -> None:
    whole = json.dumps({"access_token": JWT}, separators=(",", ":")).encode()
    for cut in (whole[: len(whole) // 2], b"{", json.dumps(JWT).encode()[:-1], b"[{"):
        with pytest.raises(TokenBodyBroken):
            extract_token(cut)


def test_expiry_from_jwt_claim_else_expires_in_else_24h() -> None:
    assert jwt_expiry(JWT) == 2_000_000_000
    assert jwt_expiry("opaque-token") is None
    assert make_token(JWT, expires_in=5).expires_at == 2_000_000_000
    opaque = make_token("opaque-token", expires_in=120, clock=lambda: 1000.0)
    assert opaque.expires_at == 1120.0
    default = make_token("opaque-token", clock=lambda: 1000.0)
    assert default.expires_at == 1000.0 + DEFAULT_TOKEN_LIFETIME_S
    assert "opaque-token" not in repr(default)


def test_renewal_margin_is_60s_or_a_tenth_of_short_lifetimes() -> None:
    token = make_token("t0ken", expires_in=3600, clock=lambda: 0.0)
    assert not token.needs_renewal(60.0, now=3539.0)
    assert token.needs_renewal(60.0, now=3540.0)
    short = make_token("t0ken", expires_in=10, clock=lambda: 0.0)
    assert not short.needs_renewal(60.0, now=8.9) and short.needs_renewal(60.0, now=9.0)
    expired = make_token(jwt.encode({"exp": int(time.time()) - 5}, "k" * 32, algorithm="HS256"))
    assert expired.needs_renewal()
