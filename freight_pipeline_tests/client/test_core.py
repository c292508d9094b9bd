"""``ClientCore.build_request`` puts each request's URL together from the base URL's parts (``_core.url_of``):
for every endpoint, base URL and query it must be the URL httpx makes of the same text, as the wire sees it."""

from __future__ import annotations

import string

import httpx
import pytest

from freight_pipeline.client import endpoints as ep
from freight_pipeline.client._core import ClientCore, in_utf8, int_header
from freight_pipeline.client.calls import Call, Expect

BASES = (
    "http://127.0.0.1:8765",
    "https://Freight.Example.com/api/v1/",
    "https://user:p%40ss@host.example:8443/tms/rest",
    "http://[::1]:9000/prefix%20one",
)
PATH_VALUES = (7, 2147483647, "FRA/SI 26 0001", "ü&?#%=+")
QUERIES: tuple[tuple[tuple[str, str], ...], ...] = (
    (),
    (("page_no", "0"), ("page_size", "500"), ("order_by", "ID"), ("order_mode", "ASC")),
    (("cascade", "true"), ("event_type", "a b&c=d+e/ü%20?#")),
)


def _placeholders(endpoint: ep.Endpoint) -> list[str]:
    return [name for _, name, _, _ in string.Formatter().parse(endpoint.path) if name]


@pytest.mark.parametrize("base", BASES)
def test_every_endpoint_s_request_url_is_the_url_httpx_makes_of_its_text(base: str) -> None:
    core = ClientCore(base_url=base, username="demo", password="secret-password",
                      webhook_username="hook", webhook_password="hook-password")
    checked = 0
    for endpoint in ep.ALL_ENDPOINTS:
        for value in PATH_VALUES:
            for params in QUERIES:
                call = Call(endpoint, Expect.OPTIONAL_JSON, {name: value for name in _placeholders(endpoint)}, params)
                made = core.build_request(call, "token").url
                parsed = httpx.Request(endpoint.method, base.rstrip("/") + call.path, params=list(params) or None).url
                assert (str(made), made.raw_path, made.host, made.port) == \
                    (str(parsed), parsed.raw_path, parsed.host, parsed.port), (endpoint.name, value, params)
                assert made == parsed and made.params == parsed.params
                checked += 1
    assert checked == len(ep.ALL_ENDPOINTS) * len(PATH_VALUES) * len(QUERIES)


@pytest.mark.parametrize(("base", "reason"), [
    ("http://user:s3cret-pass@host:abc/api", "is not a URL: Invalid port"),
    ("https://user:s3cret-pass@host/api?tenant=1", "has a query or fragment"),
    ("https://host/api#top", "has a query or fragment"),
])
def test_a_base_url_no_request_could_use_is_refused_naming_it_without_its_password(base: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason) as info:
        ClientCore(base_url=base, username="demo", password="secret-password")
    assert "base_url 'http" in str(info.value) and "s3cret-pass" not in str(info.value)


def test_a_body_is_read_in_its_declared_charset_only_when_it_is_not_utf8() -> None:
    latin1 = "Düsseldorf".encode("latin-1")
    assert in_utf8(latin1, "application/json; charset=ISO-8859-1") == "Düsseldorf".encode()
    assert in_utf8(latin1, 'application/json;charset="windows-1252"') == "Düsseldorf".encode()
    # valid UTF-8 stays as it is whatever is declared (no "DÃ¼sseldorf"); no charset, UTF-8 or an unknown one: None
    assert in_utf8("Düsseldorf".encode(), "application/json; charset=ISO-8859-1") is None
    for declared in (None, "application/json", "application/json; charset=UTF-8", "application/json; charset=nope"):
        assert in_utf8(latin1, declared) is None


@pytest.mark.parametrize(("written", "read"), [
    ("12", 12), (" 12 ", 12), ("+12", 12), ("0", 0), ("-1", None), ("unknown", None), ("1.5", None),
])
def test_a_count_header_is_a_count_or_nothing(written: str, read: int | None) -> None:
    """X-Page-Count and X-Row-Count: ``-1`` (a service's "unknown") is no count, as a text is not."""
    assert int_header(httpx.Headers({"x-row-count": written}), "x-row-count") == read
    assert int_header(httpx.Headers(), "x-row-count") is None
