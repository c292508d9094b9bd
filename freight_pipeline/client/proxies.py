"""The proxy a client's requests to the service go through: the one the environment names for the service's URL, read
as curl and Python's ``requests`` read it, once, when the client is made.

``HTTPS_PROXY`` for an ``https`` service (``HTTP_PROXY`` for ``http``), else ``ALL_PROXY``; each also in lower case,
which wins, and set empty it names none. ``NO_PROXY`` lists the hosts reached directly (``host``, ``.domain``,
``host:port``, an IP address or a CIDR range, ``*``); this machine's own addresses (``localhost``, ``127.0.0.0/8``,
``::1``: a bundled simulator) are always reached directly, as Go's clients reach them, for a proxy elsewhere would
reach its own. A proxy URL may carry ``user:password@`` (its password is one of the client's secrets) and without a
scheme is an ``http://`` one. Both clients send through the proxy this module names (the asyncio one over aiohttp,
the blocking one over httpx): neither library reads the environment on its own terms, and the alerts' webhooks
(Apprise, over ``requests``) read the same variables.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit, urlunsplit

import httpx

DEFAULT_PORTS = {"http": 80, "https": 443}
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
    password: str | None = field(repr=False)
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
    if _bypassed(target.hostname or "", target.port or DEFAULT_PORTS.get(target.scheme), _variable(env, "no_proxy")[1]):
        return None
    return _parsed(value if "://" in value else f"http://{value}", variable)


def _bypassed(host: str, port: int | None, no_proxy: str) -> bool:
    """Whether ``NO_PROXY`` lists ``host`` (at ``port``), as curl and ``requests`` read its entries: ``*``, a domain
    (itself and its subdomains, a leading dot or not), ``host:port``, an IP address (an IPv6 one with or without its
    brackets) or a range of them in CIDR notation (``10.0.0.0/8``)."""
    host = host.lower().strip("[]")
    try:
        address: ipaddress.IPv4Address | ipaddress.IPv6Address | None = ipaddress.ip_address(host)
    except ValueError:
        address = None
    for entry in (part.strip().lower() for part in no_proxy.split(",")):
        if not entry:
            continue
        if entry == "*":
            return True
        if address is not None:
            with contextlib.suppress(ValueError):
                if address in ipaddress.ip_network(entry.strip("[]"), strict=False):
                    return True
                continue
        name, _, entry_port = entry.rpartition(":") if entry.count(":") == 1 else (entry, "", "")
        if entry_port and not (entry_port.isdigit() and int(entry_port) == port):
            continue
        name = name.lstrip(".")
        if name and (host == name or host.endswith(f".{name}")):
            return True
    return False


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
    """The proxy a variable's URL names. Its credentials are everything before the last ``@`` (a password holding
    ``#``, ``/`` or ``?`` unencoded cut the URL there: its start was read as the port, or the host, and said in every
    text), read before the rest is parsed; no error quotes the value."""
    scheme, _, rest = value.partition("://")
    credentials, at, address = rest.rpartition("@")
    username = password = None
    if at:
        user, colon, secret = credentials.partition(":")
        username, password = unquote(user), unquote(secret) if colon else None
    if scheme.lower() not in SCHEMES:
        raise ProxyError(f"{variable} names a {scheme[:20]} proxy: only http:// and https:// proxies are supported")
    try:
        parts = urlsplit(f"{scheme}://{address}")
        port = parts.port
    except ValueError:
        parts, port = None, None
    if parts is None or not parts.hostname:
        raise ProxyError(f"{variable} names no proxy host and port that can be read (write it "
                         "http://user:password@host:port, the user and password percent-encoded)")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    netloc = host if port is None else f"{host}:{port}"
    return Proxy(urlunsplit((scheme.lower(), netloc, "", "", "")), username, password, variable)
