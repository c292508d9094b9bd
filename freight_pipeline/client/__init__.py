"""Typed client of the freight service (plain Python, no Dagster). See ``README.md`` here.

::

    from freight_pipeline.client import FreightClient, Criterion

    with FreightClient(base_url, username, password) as client:
        for shipment in client.iter_shipments(
            [Criterion(key="LAST_MODIFIED_DATE", match_mode="GE", value="2026-11-01")],
            order_by=["LAST_MODIFIED_DATE", "LAST_MODIFIED_TIME", "ID"],
        ):
            document = client.get_shipment_raw(shipment.id)  # the JSON as received
"""

from freight_pipeline.client.async_client import AsyncFreightClient
from freight_pipeline.client.auth import DEFAULT_REFRESH_MARGIN_S, DEFAULT_TOKEN_LIFETIME_S, Token
from freight_pipeline.client.endpoints import ALL_ENDPOINTS, Endpoint
from freight_pipeline.client.errors import (
    APIStatusError,
    AuthenticationError,
    BadRequestError,
    ConflictError,
    FreightConnectionError,
    FreightError,
    FreightTimeoutError,
    NotFoundError,
    PermissionDeniedError,
    ProtocolError,
    RateLimitedError,
    ServerError,
)
from freight_pipeline.client.models.base import FieldProblem, FreightModel
from freight_pipeline.client.models.common import CarriageLeg, DateTime, Location, LocationDateTime, Transport
from freight_pipeline.client.models.criterion import Criterion
from freight_pipeline.client.models.keys import (
    CODE_CONVERSION_KEYS,
    EFILE_KEYS,
    EVENT_CODES,
    EVENT_TYPES,
    MEMO_KEYS,
    SHIPMENT_KEYS,
)
from freight_pipeline.client.models.other_groups import (
    CodeConversion,
    EFile,
    EFileReference,
    EFileRole,
    WebhookReceipt,
)
from freight_pipeline.client.models.shipment import (
    AddressReference,
    Container,
    ContainerAddress,
    DangerousGood,
    Good,
    MemoLine,
    Shipment,
    ShipmentAddress,
    ShipmentEvent,
)
from freight_pipeline.client.paging import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, Page
from freight_pipeline.client.retry import DEFAULT_RETRY_POLICY, RetryPolicy
from freight_pipeline.client.stats import ClientStats, StatsSnapshot
from freight_pipeline.client.sync_client import FreightClient

__all__ = [
    "ALL_ENDPOINTS",
    "CODE_CONVERSION_KEYS",
    "DEFAULT_PAGE_SIZE",
    "DEFAULT_REFRESH_MARGIN_S",
    "DEFAULT_RETRY_POLICY",
    "DEFAULT_TOKEN_LIFETIME_S",
    "EFILE_KEYS",
    "EVENT_CODES",
    "EVENT_TYPES",
    "MAX_PAGE_SIZE",
    "MEMO_KEYS",
    "SHIPMENT_KEYS",
    "APIStatusError",
    "AddressReference",
    "AsyncFreightClient",
    "AuthenticationError",
    "BadRequestError",
    "CarriageLeg",
    "ClientStats",
    "CodeConversion",
    "ConflictError",
    "Container",
    "ContainerAddress",
    "Criterion",
    "DangerousGood",
    "DateTime",
    "EFile",
    "EFileReference",
    "EFileRole",
    "Endpoint",
    "FieldProblem",
    "FreightClient",
    "FreightConnectionError",
    "FreightError",
    "FreightModel",
    "FreightTimeoutError",
    "Good",
    "Location",
    "LocationDateTime",
    "MemoLine",
    "NotFoundError",
    "Page",
    "PermissionDeniedError",
    "ProtocolError",
    "RateLimitedError",
    "RetryPolicy",
    "ServerError",
    "Shipment",
    "ShipmentAddress",
    "ShipmentEvent",
    "StatsSnapshot",
    "Token",
    "Transport",
    "WebhookReceipt",
]
