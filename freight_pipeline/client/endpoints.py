"""Every endpoint of the freight service, declared once.

An :class:`Endpoint` is the method, the path template (as the spec writes it), how it authenticates
and whether a request to it may be repeated blindly (``retry_safe``). The retry rules in
:mod:`freight_pipeline.client.retry` read ``retry_safe``; error messages name ``method`` and
``path``; :class:`~freight_pipeline.client.stats.ClientStats` counts requests per ``name``.

``retry_safe`` is True for reads (GET, and the POST lookups, which only read), for PUT (the update
of an event replaces it; repeating it leaves the same state) and for DELETE (repeating it leaves
the same state; a repeated delete whose first attempt did succeed answers 404, which the caller
sees). It is False for the POSTs that create something: event create, E-File store, reference and
role add, and the webhook.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any
from urllib.parse import quote


class AuthScheme(Enum):
    NONE = "none"  # the token endpoint itself
    BEARER = "bearer"  # every business endpoint
    BASIC = "basic"  # the webhook (separate credentials)


@dataclass(frozen=True)
class Endpoint:
    name: str
    method: str
    path: str
    retry_safe: bool
    auth: AuthScheme = AuthScheme.BEARER

    def format(self, **params: Any) -> str:
        """The concrete path, path parameters percent-encoded."""
        return self.path.format(**{key: quote(str(value), safe="") for key, value in params.items()})

    def __str__(self) -> str:
        return f"{self.method} {self.path}"


AUTH_TOKEN = Endpoint("auth.token", "POST", "/auth/token", retry_safe=True, auth=AuthScheme.NONE)

SHIPMENT_LOOKUP = Endpoint("shipment.lookup", "POST", "/service/shipment/lookup", retry_safe=True)
SHIPMENT_RETRIEVE = Endpoint("shipment.retrieve", "GET", "/service/shipment/{id}", retry_safe=True)
SHIPMENT_EVENTS = Endpoint("shipment.events", "GET", "/service/shipment/{id}/events", retry_safe=True)
SHIPMENT_AIR_MAIN_CARRIAGE = Endpoint(
    "shipment.air_main_carriage", "GET", "/service/shipment/{id}/airmaincarriage", retry_safe=True
)
SHIPMENT_SEA_MAIN_CARRIAGE = Endpoint(
    "shipment.sea_main_carriage", "GET", "/service/shipment/{id}/seamaincarriage", retry_safe=True
)
SHIPMENT_EVENT_CREATE = Endpoint(
    "shipment.event_create", "POST", "/service/shipment/{shipmentId}/event", retry_safe=False
)
SHIPMENT_EVENT_UPDATE = Endpoint(
    "shipment.event_update", "PUT", "/service/shipment/{shipmentId}/event/{id}", retry_safe=True
)

EFILE_STORE = Endpoint("efile.store", "POST", "/service/efile", retry_safe=False)
EFILE_RETRIEVE = Endpoint("efile.retrieve", "GET", "/service/efile/{id}", retry_safe=True)
EFILE_DELETE = Endpoint("efile.delete", "DELETE", "/service/efile/{id}", retry_safe=True)
EFILE_REFERENCES = Endpoint("efile.references", "GET", "/service/efile/{id}/reference", retry_safe=True)
EFILE_REFERENCE_ADD = Endpoint("efile.reference_add", "POST", "/service/efile/{id}/reference", retry_safe=False)
EFILE_REFERENCE_DELETE = Endpoint("efile.reference_delete", "DELETE", "/service/efile/{id}/reference", retry_safe=True)
EFILE_ROLES = Endpoint("efile.roles", "GET", "/service/efile/{id}/role", retry_safe=True)
EFILE_ROLE_ADD = Endpoint("efile.role_add", "POST", "/service/efile/{id}/role", retry_safe=False)
EFILE_ROLE_DELETE = Endpoint("efile.role_delete", "DELETE", "/service/efile/{id}/role", retry_safe=True)
EFILE_LOOKUP = Endpoint("efile.lookup", "POST", "/service/efile/lookup", retry_safe=True)

CODE_CONVERSION_LOOKUP = Endpoint(
    "codeconverter.lookup", "POST", "/service/basicdata/codeconverter/lookup", retry_safe=True
)
CODE_CONVERSION_SCROLL = Endpoint("codeconverter.scroll", "GET", "/service/basicdata/codeconverter", retry_safe=True)
CODE_CONVERSION_RETRIEVE = Endpoint(
    "codeconverter.retrieve", "GET", "/service/basicdata/codeconverter/{id}", retry_safe=True
)

MEMO_LOOKUP = Endpoint("memo.lookup", "POST", "/service/shipment/memo/lookup", retry_safe=True)
MEMO_SCROLL = Endpoint("memo.scroll", "GET", "/service/shipment/memo", retry_safe=True)
MEMO_RETRIEVE = Endpoint("memo.retrieve", "GET", "/service/shipment/memo/{id}", retry_safe=True)

WEBHOOK = Endpoint("webhook", "POST", "/external/webhook", retry_safe=False, auth=AuthScheme.BASIC)

ALL_ENDPOINTS: tuple[Endpoint, ...] = (
    AUTH_TOKEN,
    SHIPMENT_LOOKUP,
    SHIPMENT_RETRIEVE,
    SHIPMENT_EVENTS,
    SHIPMENT_AIR_MAIN_CARRIAGE,
    SHIPMENT_SEA_MAIN_CARRIAGE,
    SHIPMENT_EVENT_CREATE,
    SHIPMENT_EVENT_UPDATE,
    EFILE_STORE,
    EFILE_RETRIEVE,
    EFILE_DELETE,
    EFILE_REFERENCES,
    EFILE_REFERENCE_ADD,
    EFILE_REFERENCE_DELETE,
    EFILE_ROLES,
    EFILE_ROLE_ADD,
    EFILE_ROLE_DELETE,
    EFILE_LOOKUP,
    CODE_CONVERSION_LOOKUP,
    CODE_CONVERSION_SCROLL,
    CODE_CONVERSION_RETRIEVE,
    MEMO_LOOKUP,
    MEMO_SCROLL,
    MEMO_RETRIEVE,
    WEBHOOK,
)
