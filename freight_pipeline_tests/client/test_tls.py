"""The TLS context the clients of a process share."""

from __future__ import annotations

import ssl

from freight_pipeline.client.sync_client import FreightClient
from freight_pipeline.client.tls import default_ssl_context
from freight_pipeline.client.transport import AiohttpTransport
from freight_pipeline.config import ServiceSettings


def test_every_client_of_a_process_verifies_with_one_context() -> None:
    context = default_ssl_context()
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert context.cert_store_stats()["x509_ca"] > 0  # the CAs are loaded
    assert AiohttpTransport(4).ssl_context is AiohttpTransport(8).ssl_context is context
    settings = ServiceSettings("https://freight.example", "u", "p")
    with FreightClient.from_settings(settings) as one, FreightClient.from_settings(settings) as other:
        pools = [client._http._transport._pool for client in (one, other)]  # httpx's own transport
        assert all(pool._ssl_context is context for pool in pools)
