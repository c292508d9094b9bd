"""The TLS context every client of a process shares."""

from __future__ import annotations

import functools
import ssl

import httpx


@functools.cache
def default_ssl_context() -> ssl.SSLContext:
    """httpx's default TLS context (certifi's CAs, or ``SSL_CERT_FILE``/``SSL_CERT_DIR``), made once a process:
    loading the CAs takes 20-50 ms, which every client paid again."""
    return httpx.create_ssl_context()
