"""A call to the service (:class:`Call`: endpoint, path parameters, query, body and the answer
expected), the call of each endpoint group (``by_id``, ``lookup``, ``scroll``, the E-File calls, ...)
and the parts of their requests. Plain values: ``ClientCore.execute`` carries a call out."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from freight_pipeline.client import endpoints as ep
from freight_pipeline.client.endpoints import Endpoint
from freight_pipeline.client.models.base import FreightModel
from freight_pipeline.client.models.criterion import Criterion
from freight_pipeline.client.paging import validate_paging


class Expect(Enum):
    OBJECT = "a JSON object"
    ARRAY = "a JSON array of objects"
    NAMES_OR_OBJECTS = "a JSON array of strings or objects"
    OPTIONAL_JSON = "JSON or an empty body"
    NOTHING = "no body"
    TOKEN = "a token"


ARRAY_ELEMENTS: dict[Expect, tuple[type, ...]] = {Expect.ARRAY: (dict,), Expect.NAMES_OR_OBJECTS: (dict, str)}
"""The JSON arrays expected, and the types of their elements (a ``204 No Content`` is an empty one)."""

RECORD_ARRAYS: dict[Endpoint, Expect] = {ep.EFILE_ROLES: Expect.NAMES_OR_OBJECTS}
"""A record's arrays (``GET .../{id}/...``) that are not arrays of objects: an E-File's roles may be names (the spec
shows no field of an EFileRole and adds one as a ``text/plain`` string, the role)."""


@dataclass(frozen=True)
class Call:
    """One logical call: endpoint, path parameters, query, body and the expected response."""

    endpoint: Endpoint
    expect: Expect
    path_params: Mapping[str, Any] = field(default_factory=dict)
    params: Sequence[tuple[str, str]] = ()
    json_body: Any = field(default=None, repr=False)  # the token request carries the password
    has_json: bool = False
    text_body: str | None = field(default=None, repr=False)

    @property
    def path(self) -> str:
        return self.endpoint.format(**self.path_params)

    @property
    def where(self) -> str:
        return f"{self.endpoint.method} {self.path}"


# --- the call of each endpoint group ------------------------------------------------------------


def by_id(endpoint: Endpoint, expect: Expect, record_id: Any, params: Sequence[tuple[str, str]] = ()) -> Call:
    """A call without a body to ``endpoint`` with the path parameter ``{id}``."""
    return Call(endpoint, expect, path_params={"id": as_id(record_id)}, params=params)


def records(endpoint: Endpoint, record_id: Any) -> Call:
    """A record's array at ``endpoint`` (``GET .../{id}/...``), of objects unless :data:`RECORD_ARRAYS` says
    otherwise."""
    return by_id(endpoint, RECORD_ARRAYS.get(endpoint, Expect.ARRAY), record_id)


def send_json(
    endpoint: Endpoint, expect: Expect, body: Any, params: Sequence[tuple[str, str]] = (), **path: Any
) -> Call:
    """A call with ``body`` as its JSON body; ``path`` fills the endpoint's path parameters."""
    return Call(endpoint, expect, path_params=path, params=params, json_body=body, has_json=True)


def lookup(
    endpoint: Endpoint,
    criteria: Iterable[Criterion | Mapping[str, Any]],
    page_no: int,
    page_size: int,
    order_by: Sequence[str] | str | None,
    order_mode: Sequence[str] | str | None,
) -> Call:
    """One page of a lookup: the criteria as body, paging and ordering as query parameters."""
    validate_paging(page_no, page_size)
    body = criteria_payload(criteria)
    params = [("page_no", str(page_no)), ("page_size", str(page_size)), *ordering_params(order_by, order_mode)]
    return Call(endpoint, Expect.ARRAY, params=params, json_body=body, has_json=True)


def scroll(endpoint: Endpoint, page_no: int, page_size: int) -> Call:
    """One page of a scroll (every record, no criteria)."""
    validate_paging(page_no, page_size)
    return Call(endpoint, Expect.ARRAY, params=[("page_no", str(page_no)), ("page_size", str(page_size))])


def event_write(
    endpoint: Endpoint,
    shipment_id: Any,
    event: FreightModel | Mapping[str, Any],
    event_type: str | None,
    **path: Any,
) -> Call:
    """Create or update a shipment event: the event as body, its type as the ``type`` query parameter."""
    body = as_payload(event)
    params = event_type_param(event_type, body)
    return send_json(endpoint, Expect.OPTIONAL_JSON, body, params, shipmentId=as_id(shipment_id, "shipment_id"), **path)


def efile_retrieve(efile_id: Any, cascade: bool) -> Call:
    return by_id(ep.EFILE_RETRIEVE, Expect.OBJECT, efile_id, [("cascade", "true" if cascade else "false")])


def efile_reference(endpoint: Endpoint, efile_id: Any, reference: FreightModel | Mapping[str, Any]) -> Call:
    """Add or delete a reference: the EFileReference is the body."""
    return send_json(endpoint, Expect.NOTHING, as_payload(reference), id=as_id(efile_id))


def efile_role_add(efile_id: Any, role: str) -> Call:
    """Link a role; the spec sends it as a ``text/plain`` body."""
    if not isinstance(role, str) or not role.strip():
        raise ValueError(f"role must be a non-empty string, got {role!r}")
    return Call(ep.EFILE_ROLE_ADD, Expect.NOTHING, path_params={"id": as_id(efile_id)}, text_body=role)


def efile_role_delete(efile_id: Any, role: FreightModel | Mapping[str, Any] | str) -> Call:
    """Unlink a role; the body is an EFileRole (a plain name is sent as ``{"role": name}``)."""
    body = {"role": role} if isinstance(role, str) else as_payload(role)
    return send_json(ep.EFILE_ROLE_DELETE, Expect.NOTHING, body, id=as_id(efile_id))


def webhook(payload: Mapping[str, Any]) -> Call:
    if not isinstance(payload, Mapping):
        raise TypeError("the webhook payload must be a JSON object (a mapping)")
    return send_json(ep.WEBHOOK, Expect.OPTIONAL_JSON, dict(payload))


# --- parts of requests --------------------------------------------------------------------------


def criteria_payload(criteria: Iterable[Criterion | Mapping[str, Any]]) -> list[dict[str, Any]]:
    if isinstance(criteria, Criterion | Mapping | str):
        raise TypeError("criteria must be a list of Criterion (or dicts), not a single criterion")
    out = []
    for criterion in criteria:
        model = criterion if isinstance(criterion, Criterion) else Criterion.model_validate(dict(criterion))
        out.append(model.to_payload())
    return out


def ordering_params(
    order_by: Sequence[str] | str | None, order_mode: Sequence[str] | str | None
) -> list[tuple[str, str]]:
    keys = [order_by] if isinstance(order_by, str) else list(order_by or [])
    modes = [order_mode] if isinstance(order_mode, str) else list(order_mode or [])
    if any(not isinstance(k, str) or not k.strip() for k in keys):
        raise ValueError(f"order_by entries must be non-empty strings, got {keys!r}")
    modes = [m.upper() if isinstance(m, str) else m for m in modes]
    if any(m not in ("ASC", "DESC") for m in modes):
        raise ValueError(f"order_mode entries must be 'ASC' or 'DESC', got {modes!r}")
    if len(modes) > len(keys):
        raise ValueError(f"{len(modes)} order_mode entries for {len(keys)} order_by keys")
    return [("order_by", k) for k in keys] + [("order_mode", m) for m in modes]


def event_type_param(event_type: str | None, event: Mapping[str, Any]) -> list[tuple[str, str]]:
    value = event_type or event.get("type")
    if not isinstance(value, str) or value.upper() not in ("ESTIMATED", "ACTUAL"):
        raise ValueError(f"event_type must be 'ESTIMATED' or 'ACTUAL' (argument or the event's type), got {value!r}")
    return [("type", value.upper())]


def as_id(value: Any, name: str = "id") -> int:
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an integer id, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    raise TypeError(f"{name} must be an integer id, got {value!r}")


def as_payload(value: FreightModel | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(value, FreightModel):
        return value.to_payload()
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"expected a model or a dict, got {type(value).__name__}")
