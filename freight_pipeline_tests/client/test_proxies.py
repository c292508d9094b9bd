"""Both clients reach the service through the proxy the environment names (``client.proxies``): every request of a
whole sync, the blocking client's too, with the proxy's credentials and never its password in a text; loopback
services directly; a proxy that refuses named as such."""

from __future__ import annotations

import asyncio
import base64
import http.client
import http.server
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from freight_pipeline.client.async_client import AsyncFreightClient
from freight_pipeline.client.errors import FreightConnectionError, FreightError
from freight_pipeline.client.proxies import Proxy, ProxyError, proxy_for
from freight_pipeline.client.retry import RetryPolicy
from freight_pipeline.client.sync_client import FreightClient
from freight_pipeline.config import ServiceSettings
from freight_pipeline.lake.backend import storage_from_env
from freight_pipeline.simulator.server import RunningSimulator, running_simulator
from freight_pipeline.sync.runner import sync_all
from freight_pipeline.sync.streams import STREAM_NAMES
from freight_pipeline_tests.client.helpers import FAST_RETRY
from freight_pipeline_tests.serving import serving
from freight_pipeline_tests.sync.settings import TEST_SETTINGS

SERVICE_HOST = "freight.test"
"""The service's name in these tests: no resolver knows it, the proxy alone maps it to the simulator, so a request
that did not go through the proxy cannot reach the service."""
PROXY_USER, PROXY_PASSWORD = "relay", "pr0xy-s3cret"
ONE_ATTEMPT = RetryPolicy(max_attempts=1, base_delay=0.001, max_delay=0.01, total_budget=10.0)


class ForwardProxy(http.server.ThreadingHTTPServer):
    """An HTTP forward proxy on loopback that asks for Basic credentials and forwards absolute-form requests, the
    host :data:`SERVICE_HOST` to ``127.0.0.1``; it keeps each request's method and path."""

    daemon_threads = True

    def __init__(self, target_port: int) -> None:
        super().__init__(("127.0.0.1", 0), _Forward)
        self.target_port = target_port
        self.forwarded: list[tuple[str, str]] = []
        self.refused = 0

    @property
    def url(self) -> str:
        return f"http://{PROXY_USER}:{PROXY_PASSWORD}@127.0.0.1:{self.server_address[1]}"


class _Forward(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: ForwardProxy

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _forward(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        expected = "Basic " + base64.b64encode(f"{PROXY_USER}:{PROXY_PASSWORD}".encode()).decode()
        if self.headers.get("Proxy-Authorization") != expected:
            self.server.refused += 1
            self.send_response(407)
            self.send_header("Proxy-Authenticate", 'Basic realm="proxy"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        target = urlsplit(self.path)
        assert target.hostname == SERVICE_HOST, self.path
        path = target.path + (f"?{target.query}" if target.query else "")
        self.server.forwarded.append((self.command, target.path))
        headers = {k: v for k, v in self.headers.items() if not k.lower().startswith("proxy-")}
        upstream = http.client.HTTPConnection("127.0.0.1", self.server.target_port, timeout=30)
        try:
            upstream.request(self.command, path, body=body or None, headers=headers)
            answer = upstream.getresponse()
            content = answer.read()
        finally:
            upstream.close()
        self.send_response(answer.status, answer.reason)
        for name, value in answer.getheaders():
            if name.lower() not in {"transfer-encoding", "connection", "content-length"}:
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(content)))
        self.end_headers()
        self.wfile.write(content)

    do_GET = do_POST = do_PUT = do_DELETE = _forward


@pytest.fixture(scope="module")
def sim() -> Iterator[RunningSimulator]:
    with running_simulator(shipments=25, seed=3) as running:
        yield running


@pytest.fixture
def proxy(sim: RunningSimulator) -> Iterator[ForwardProxy]:
    with serving(ForwardProxy(urlsplit(sim.base_url).port or 80)) as server:
        yield server


def _service_url(sim: RunningSimulator) -> str:
    return f"http://{SERVICE_HOST}:{urlsplit(sim.base_url).port}"


def _authenticate(sim: RunningSimulator, blocking: bool) -> None:
    """Fetch a token from the service at :data:`SERVICE_HOST` with the blocking client or the asyncio one, once."""
    if blocking:
        with FreightClient(_service_url(sim), sim.username, sim.password, retry=ONE_ATTEMPT) as client:
            client.authenticate()
        return

    async def authenticate() -> None:
        async with AsyncFreightClient(_service_url(sim), sim.username, sim.password, retry=ONE_ATTEMPT) as client:
            await client.authenticate()

    asyncio.run(authenticate())


def _clear_proxy_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)


@pytest.mark.parametrize(("url", "env", "expected"), [
    ("https://svc.example.com", {"HTTPS_PROXY": "http://p:3128"}, ("http://p:3128", "HTTPS_PROXY")),
    ("http://svc.example.com", {"HTTP_PROXY": "http://p:3128"}, ("http://p:3128", "HTTP_PROXY")),
    ("https://svc.example.com", {"HTTP_PROXY": "http://p:3128"}, None),  # another scheme's
    ("https://svc.example.com", {"ALL_PROXY": "p:3128"}, ("http://p:3128", "ALL_PROXY")),  # no scheme: http
    ("https://svc.example.com", {"https_proxy": "http://low:1", "HTTPS_PROXY": "http://up:2"},
     ("http://low:1", "https_proxy")),  # lower case wins
    ("https://svc.example.com", {"https_proxy": "", "HTTPS_PROXY": "http://up:2", "ALL_PROXY": "http://all:3"},
     ("http://all:3", "ALL_PROXY")),  # set empty: none, and the next variable's
    ("https://svc.example.com", {"HTTPS_PROXY": "https://P.example:443"}, ("https://p.example:443", "HTTPS_PROXY")),
    ("https://svc.example.com", {"HTTPS_PROXY": "http://[::2]:8080"}, ("http://[::2]:8080", "HTTPS_PROXY")),
    ("https://svc.example.com", {"HTTPS_PROXY": "http://p:3128", "NO_PROXY": "svc.example.com"}, None),
    ("https://svc.example.com", {"HTTPS_PROXY": "http://p:3128", "no_proxy": "other, .example.com"}, None),
    ("https://svc.example.com:8443", {"HTTPS_PROXY": "http://p:3128", "NO_PROXY": "svc.example.com:8443"}, None),
    ("https://svc.example.com", {"HTTPS_PROXY": "http://p:3128", "NO_PROXY": "*"}, None),
    ("https://svc.example.com", {"HTTPS_PROXY": "http://p:3128", "NO_PROXY": "example.org"},
     ("http://p:3128", "HTTPS_PROXY")),
    ("https://svc.example.com", {"HTTPS_PROXY": "http://p:3128", "NO_PROXY": "svc.example.com:443"}, None),  # its port
    ("https://svc.example.com", {"HTTPS_PROXY": "http://p:3128", "NO_PROXY": "svc.example.com:8443"},
     ("http://p:3128", "HTTPS_PROXY")),
    ("https://10.1.2.3/api", {"HTTPS_PROXY": "http://p:3128", "NO_PROXY": "10.0.0.0/8"}, None),  # a CIDR range
    ("https://10.1.2.3/api", {"HTTPS_PROXY": "http://p:3128", "NO_PROXY": "11.0.0.0/8"},
     ("http://p:3128", "HTTPS_PROXY")),
    ("https://10.1.2.3:8443/api", {"HTTPS_PROXY": "http://p:3128", "NO_PROXY": "10.1.2.3:8443"}, None),
    ("https://[2001:db8::5]/api", {"HTTPS_PROXY": "http://p:3128", "NO_PROXY": "2001:db8::5"}, None),  # bare IPv6
    ("https://[2001:db8::5]/api", {"HTTPS_PROXY": "http://p:3128", "NO_PROXY": "[2001:db8::5]"}, None),
    ("https://[2001:db8::5]/api", {"HTTPS_PROXY": "http://p:3128", "NO_PROXY": "2001:db8::/32"}, None),
    ("http://127.0.0.1:8080", {"HTTP_PROXY": "http://p:3128"}, None),  # this machine: always direct
    ("http://127.8.9.1:8080", {"ALL_PROXY": "http://p:3128"}, None),
    ("http://localhost:8080", {"HTTP_PROXY": "http://p:3128"}, None),
    ("http://[::1]:8080", {"HTTP_PROXY": "http://p:3128"}, None),
    ("https://svc.example.com", {}, None),
])
def test_the_proxy_is_the_one_the_environment_names_for_the_service(
    url: str, env: dict[str, str], expected: tuple[str, str] | None
) -> None:
    found = proxy_for(url, env)
    assert (None if found is None else (found.url, found.variable)) == expected


@pytest.mark.parametrize(("value", "user", "password"), [
    ("http://me%40corp:p%3Ass@p:3128", "me@corp", "p:ss"),  # percent-encoded
    ("http://etl:S3cret#pw@p:3128", "etl", "S3cret#pw"),  # not: the first # cut the URL, "S3cret" read as the port
    ("http://etl:4711/Sec?x@p:3128", "etl", "4711/Sec?x"),  # "etl:4711" read as the proxy, said in every text
    ("http://etl@p:3128", "etl", None),
])
def test_a_proxy_s_credentials_are_everything_before_its_last_at_and_never_said(
    value: str, user: str, password: str | None
) -> None:
    found = proxy_for("https://svc.example.com", {"HTTPS_PROXY": value})
    assert found == Proxy("http://p:3128", user, password, "HTTPS_PROXY")
    assert password is None or (password not in str(found) and password not in repr(found))


@pytest.mark.parametrize(("value", "said"), [
    ("socks5://p:1080", "ALL_PROXY names a socks5 proxy"),
    ("http://p:notaport", "ALL_PROXY names no proxy host and port that can be read"),
    ("http://:3128", "ALL_PROXY names no proxy host and port that can be read"),
])
def test_a_proxy_no_client_can_use_is_refused_naming_the_variable(value: str, said: str) -> None:
    with pytest.raises(ProxyError, match=said):
        proxy_for("https://svc.example.com", {"ALL_PROXY": value})
    with pytest.raises(ProxyError, match=said) as raised:
        proxy_for("https://svc.example.com", {"ALL_PROXY": value.replace("://", "://u:secret@")})
    assert "secret" not in str(raised.value)


def test_every_request_of_a_sync_goes_through_the_proxy_with_its_credentials(
    sim: RunningSimulator, proxy: ForwardProxy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _clear_proxy_variables(monkeypatch)
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    sim.reset_stats()
    results, published = sync_all(ServiceSettings(_service_url(sim), sim.username, sim.password), tmp_path,
                                  TEST_SETTINGS, backend=storage_from_env())
    assert {r.stream: r.status for r in results} == dict.fromkeys(STREAM_NAMES, "success")
    assert published is not None
    assert proxy.refused == 0
    assert len(proxy.forwarded) == sim.request_count() > 0  # every request the service answered came this way
    assert {path.split("/")[2] for _, path in proxy.forwarded if path.startswith("/service/")} == {
        "shipment", "basicdata", "efile"}  # the shipments with their parts, the code conversions, the documents
    texts = " ".join(str(r) for r in results)
    assert PROXY_PASSWORD not in texts


def test_the_blocking_client_goes_through_the_same_proxy(
    sim: RunningSimulator, proxy: ForwardProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    _clear_proxy_variables(monkeypatch)
    monkeypatch.setenv("http_proxy", proxy.url)
    with FreightClient(_service_url(sim), sim.username, sim.password, retry=FAST_RETRY) as client:
        client.authenticate()
        assert repr(client).count(PROXY_PASSWORD) == 0
    assert [method for method, _ in proxy.forwarded] == ["POST"] and proxy.refused == 0


def test_a_service_on_this_machine_is_reached_directly_whatever_proxy_is_named(
    sim: RunningSimulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The demo and a bundled simulator on a machine whose environment names a company's proxy."""
    _clear_proxy_variables(monkeypatch)
    monkeypatch.setenv("ALL_PROXY", "http://127.0.0.1:9")  # nothing listens there
    with FreightClient(sim.base_url, sim.username, sim.password, retry=ONE_ATTEMPT) as client:
        client.authenticate()


@pytest.mark.parametrize("blocking", [True, False], ids=["blocking", "asyncio"])
def test_a_proxy_that_refuses_the_credentials_is_named_not_taken_for_the_service(
    sim: RunningSimulator, proxy: ForwardProxy, monkeypatch: pytest.MonkeyPatch, blocking: bool
) -> None:
    """Was ``BadRequestError: POST /auth/token failed with HTTP 407``: the service's fault, it read."""
    _clear_proxy_variables(monkeypatch)
    monkeypatch.setenv("HTTP_PROXY", proxy.url.replace(PROXY_PASSWORD, "wrong-s3cret"))
    with pytest.raises(FreightError) as raised:
        _authenticate(sim, blocking)
    said = str(raised.value)
    assert f"the proxy http://127.0.0.1:{proxy.server_address[1]} (HTTP_PROXY) refused its credentials (HTTP 407" \
        in said and "check the user and password HTTP_PROXY gives it" in said, said
    assert "wrong-s3cret" not in said and proxy.refused >= 1 and proxy.forwarded == []


@pytest.mark.parametrize("blocking", [True, False], ids=["blocking", "asyncio"])
def test_a_proxy_that_refuses_the_connection_is_named_and_its_password_is_not(
    sim: RunningSimulator, monkeypatch: pytest.MonkeyPatch, blocking: bool
) -> None:
    _clear_proxy_variables(monkeypatch)
    monkeypatch.setenv("HTTP_PROXY", f"http://{PROXY_USER}:{PROXY_PASSWORD}@127.0.0.1:9")
    with pytest.raises(FreightConnectionError) as raised:
        _authenticate(sim, blocking)
    said = str(raised.value)
    assert "connection refused by the proxy http://127.0.0.1:9 (HTTP_PROXY)" in said, said
    assert PROXY_PASSWORD not in said and PROXY_USER not in said
