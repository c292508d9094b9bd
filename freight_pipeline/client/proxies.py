"""The proxy a client's requests to the service go through: the one the environment names for the service's URL, read
as curl and Python's ``urllib`` and ``requests`` read it, once, when the client is made.

``HTTPS_PROXY`` for an ``https`` service (``HTTP_PROXY`` for ``http``), else ``ALL_PROXY``; each also in lower case,
which wins, and set empty it names none. ``NO_PROXY`` lists the hosts reached directly (``host``, ``.domain``,
``host:port``, ``*``); this machine's own addresses (``localhost``, ``127.0.0.0/8``, ``::1``: a bundled simulator)
are always reached directly, as Go's clients reach them, for a proxy elsewhere would reach its own. A proxy URL may
carry ``user:password@`` (its password is one of the client's secrets) and without a scheme is an ``http://`` one.
Both clients send through the proxy this module names (the asyncio one over aiohttp, the blocking one over httpx):
neither library reads the environment on its own terms, and the alerts' webhooks (Apprise, over ``requests``) read
the same variables.
"""

from __future__ import annotations

import ipaddress
import os
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit, urlunsplit

import httpx

SCHEMES = ("http", "https")
"""The proxies both clients' libraries speak to (a SOCKS proxy needs a library of its own)."""


class ProxyError(ValueError):
    """A proxy variable the clients cannot use, naming the variable (never the proxy's password)."""


@dataclass(frozen=True)
class Proxy:
    """A proxy named by the environment: its URL without credentials, its credentials, and the variable that named
    it (for the texts that name the proxy)."""

    url: str
    username: str | None
    password: str | None
    variable: str

    def __str__(self) -> str:
        return f"the proxy {self.url} ({self.variable})"

    def for_httpx(self) -> httpx.Proxy:
        auth = (self.username, self.password or "") if self.username is not None else None
        return httpx.Proxy(self.url, auth=auth)


def proxy_for(url: str, environ: Mapping[str, str] | None = None) -> Proxy | None:
    """The proxy ``environ`` (the process's environment) names for requests to ``url``, or None (none named, or the
    host listed in ``NO_PROXY``). ProxyError for a variable naming what no client can use."""
    env = os.environ if environ is None else environ
    target = urlsplit(url)
    if _loopback(target.hostname or ""):
        return None
    for name in (f"{target.scheme}_proxy", "all_proxy"):
        variable, value = _variable(env, name)
        if value:
            break
    else:
        return None
    no_proxy = _variable(env, "no_proxy")[1]
    if no_proxy and urllib.request.proxy_bypass_environment(target.netloc.rsplit("@", 1)[-1], {"no": no_proxy}):
        return None
    return _parsed(value if "://" in value else f"http://{value}", variable)


def _loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _variable(env: Mapping[str, str], name: str) -> tuple[str, str]:
    """The variable that holds ``name`` (in lower case, which wins, or in upper case) and its value, stripped ("":
    none, or set empty)."""
    for variable in (name, name.upper()):
        if variable in env:
            return variable, env[variable].strip()
    return name, ""


def _parsed(value: str, variable: str) -> Proxy:
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError as exc:
        raise ProxyError(f"{variable} is no proxy URL ({exc})") from None
    if parts.scheme.lower() not in SCHEMES:
        raise ProxyError(f"{variable} names a {parts.scheme} proxy: only http:// and https:// proxies are supported")
    if not parts.hostname:
        raise ProxyError(f"{variable} names no proxy host")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    netloc = host if port is None else f"{host}:{port}"
    username = None if parts.username is None else unquote(parts.username)
    password = None if parts.password is None else unquote(parts.password)
    return Proxy(urlunsplit((parts.scheme.lower(), netloc, "", "", "")), username, password, variable)
