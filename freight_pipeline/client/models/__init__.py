"""Pydantic v2 models of every resource of the spec, lenient by design.

* Field names are the spec's exactly; where the spec uses camelCase the Python name is snake_case
  with the camelCase alias (``chargeable_weight`` / ``chargeableWeight``, ``dangerous_goods`` /
  ``dangerousGoods``, ``container_addresses`` / ``containerAddresses``, ``good_id`` / ``goodId``,
  ``hs_code`` / ``hsCode``); both names are accepted on input (``populate_by_name``) and
  ``model_dump(by_alias=True)`` writes the spec's spelling.
* Unknown fields are kept (``extra="allow"``), every field is optional and may be null, arrays
  default to empty. Unknown event codes are kept as strings, logged once per code, and flagged by
  ``ShipmentEvent.known``.
* Drift is tolerated: numbers are accepted where strings are expected, boolean fields accept
  ``J``/``N``, ``Y``/``N``, ``true``/``false`` texts, a DateTime may arrive as one ISO 8601 string,
  null items inside arrays are dropped. A field that still cannot be read (a wrong-typed value or
  container, e.g. ``"employees": []``) is left at its default (None, or an empty array; an
  unreadable array item is dropped) instead of failing the whole record; it is listed in
  ``.problems`` (path, reason, value as received; nested models included) and logged once per
  model, field and reason, and the value stays in ``.raw``.
* Every model keeps the exact dict it was built from at ``.raw`` (the warehouse stores documents
  as received); a model built from keyword arguments returns its own ``model_dump(by_alias=True)``.
* :class:`Criterion` is outgoing only and strict: an unknown field (a typo) raises.
"""

# The public models API (``from freight_pipeline.client.models import Shipment``); each model is defined in one
# module below, and the package's own modules import it from there.
from freight_pipeline.client.models.base import FieldProblem, Flag, FreightModel
from freight_pipeline.client.models.common import (
    CarriageLeg,
    DateTime,
    Location,
    LocationCode,
    LocationDateTime,
    Transport,
)
from freight_pipeline.client.models.criterion import Criterion
from freight_pipeline.client.models.keys import (
    CODE_CONVERSION_KEYS,
    EFILE_KEYS,
    EVENT_CODES,
    EVENT_TYPES,
    MEMO_KEYS,
    SHIPMENT_KEYS,
    EventType,
    MatchMode,
    OrderMode,
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
    AesProposal,
    Container,
    ContainerAddress,
    CreditData,
    CustomField,
    CustomsData,
    DangerousGood,
    DangerousGoodContact,
    Employees,
    Good,
    GoodCustoms,
    HsCode,
    Insurance,
    Insurer,
    Measurement,
    MemoLine,
    Mrn,
    PrintedAddress,
    Shipment,
    ShipmentAddress,
    ShipmentEvent,
)

__all__ = [
    "CODE_CONVERSION_KEYS",
    "EFILE_KEYS",
    "EVENT_CODES",
    "EVENT_TYPES",
    "MEMO_KEYS",
    "SHIPMENT_KEYS",
    "AddressReference",
    "AesProposal",
    "CarriageLeg",
    "CodeConversion",
    "Container",
    "ContainerAddress",
    "CreditData",
    "Criterion",
    "CustomField",
    "CustomsData",
    "DangerousGood",
    "DangerousGoodContact",
    "DateTime",
    "EFile",
    "EFileReference",
    "EFileRole",
    "Employees",
    "EventType",
    "FieldProblem",
    "Flag",
    "FreightModel",
    "Good",
    "GoodCustoms",
    "HsCode",
    "Insurance",
    "Insurer",
    "Location",
    "LocationCode",
    "LocationDateTime",
    "MatchMode",
    "Measurement",
    "MemoLine",
    "Mrn",
    "OrderMode",
    "PrintedAddress",
    "Shipment",
    "ShipmentAddress",
    "ShipmentEvent",
    "Transport",
    "WebhookReceipt",
]
