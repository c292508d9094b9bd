"""Pydantic v2 models of every resource of the spec, lenient by design.

* Field names are the spec's exactly; where the spec uses camelCase the Python name is snake_case
  with the camelCase alias (``chargeable_weight`` / ``chargeableWeight``, ``dangerous_goods`` /
  ``dangerousGoods``, ``container_addresses`` / ``containerAddresses``, ``good_id`` / ``goodId``,
  ``hs_code`` / ``hsCode``); both names are accepted on input (``populate_by_name``) and
  ``model_dump(by_alias=True)`` writes the spec's spelling.
* Unknown fields are kept (``extra="allow"``), every field is optional and may be null, arrays
  default to empty. Unknown event codes are kept as strings, logged once per code, and flagged by
  ``ShipmentEvent.known``.
* Every model keeps the exact dict it was built from at ``.raw`` (the warehouse stores documents
  as received); a model built from keyword arguments returns its own ``model_dump(by_alias=True)``.
"""

from __future__ import annotations

import base64
import datetime as dt
import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from freight_pipeline.datetimes import DateTimeParseError, ParsedDateTime, parse_datetime_object, parse_iso_datetime

logger = logging.getLogger("freight_pipeline.client")

MatchMode = Literal["EQUALS", "CONTAINS", "IN", "OR", "GT", "LT", "GE", "LE"]
OrderMode = Literal["ASC", "DESC"]
EventType = Literal["ESTIMATED", "ACTUAL"]

SHIPMENT_KEYS: tuple[str, ...] = (
    "ID",
    "HBL",
    "MBL",
    "FILENUMBER",
    "SHIPMENT_NUMBER",
    "SHIPMENT_ID",
    "ADDRESS_REFERENCE",
    "DIRECTION",
    "MODE_OF_TRANSPORT",
    "MONTH_OF_SERVICE",
    "CLIENT",
    "CREATION_DATE",
    "RUNNING_SEQUENCE_NUMBER",
    "CUSTOMER_ADDRESS_TYPE",
    "CUSTOMER_ADDRESS_NUMBER",
    "SHIPMENT_CLOSED",
    "LAST_MODIFIED_DATE",
    "LAST_MODIFIED_TIME",
)
EFILE_KEYS: tuple[str, ...] = ("REFERENCE", "SHIPMENT_ID")
# Assumptions A13 and A14 (the spec does not show these keys).
MEMO_KEYS: tuple[str, ...] = ("ID", "CLIENT", "SHIPMENT_NUMBER", "RUNNING_NUMBER")
CODE_CONVERSION_KEYS: tuple[str, ...] = (
    "ID",
    "PARTNER",
    "DIRECTION",
    "CODE_TABLE",
    "CODE_TYPE",
    "SOURCE_CODE",
    "TARGET_CODE",
)
EVENT_CODES: tuple[str, ...] = (
    "DISPATCH",
    "PICKUP",
    "WAREHOUSE",
    "POL_ARRIVAL",
    "LOADING_START",
    "LOADING_END",
    "POL_DEPARTURE",
    "POD_ARRIVAL",
    "CLEARANCE_START",
    "CLEARANCE_END",
    "CUSTOMS_CLEARANCE",
    "AVAILABLE",
    "ACCEPTANCE",
    "FINAL_DESTINATION",
    "TRANSSHIPMENT",
    "GATE_OUT",
    "POD_DEPARTURE",
    "CUSTOMS_RELEASE",
    "DELIVERY_DATE",
    "POL_DEPARTURE_REVISED",
    "POD_ARRIVAL_REVISED",
    "TRANSSHIPMENT_ARRIVAL",
    "TRANSSHIPMENT_DEPARTURE",
    "DIFF_BL_DATE",
    "VGM_CLOSING",
)
EVENT_TYPES: tuple[str, ...] = ("ESTIMATED", "ACTUAL")

_reported_event_codes: set[str] = set()
_report_lock = threading.Lock()


def _report_unknown_event_code(code: str) -> None:
    with _report_lock:
        if code in _reported_event_codes:
            return
        _reported_event_codes.add(code)
    logger.warning("unknown shipment event code %r kept as received (not in the spec's list)", code)


_LIST_KEYS: dict[type, frozenset[str]] = {}


def _list_field_keys(cls: type[BaseModel]) -> frozenset[str]:
    """Names and aliases of the fields that default to an empty list."""
    keys = _LIST_KEYS.get(cls)
    if keys is None:
        found: set[str] = set()
        for name, info in cls.model_fields.items():
            if info.default_factory is list:
                found.add(name)
                if info.alias:
                    found.add(info.alias)
        keys = _LIST_KEYS[cls] = frozenset(found)
    return keys


class FreightModel(BaseModel):
    """Base of every resource model: lenient, keeps unknown fields and the raw dict."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, protected_namespaces=())

    _raw: dict[str, Any] | None = PrivateAttr(default=None)

    @model_validator(mode="wrap")
    @classmethod
    def _keep_raw(cls, data: Any, handler: Any) -> Any:
        cleaned = data
        if isinstance(data, dict):
            nulls = [k for k in _list_field_keys(cls) if k in data and data[k] is None]
            if nulls:  # A20: a null array is an empty array (the raw dict stays untouched)
                cleaned = {**data, **{key: [] for key in nulls}}
        instance = handler(cleaned)
        if isinstance(data, dict) and isinstance(instance, FreightModel):
            instance._raw = data
        return instance

    @property
    def raw(self) -> dict[str, Any]:
        """The dict this model was built from, as received; else its own dump with the spec's names."""
        if self._raw is not None:
            return self._raw
        return self.model_dump(by_alias=True, exclude_none=True)

    @property
    def extra_fields(self) -> dict[str, Any]:
        """Fields the spec does not name (kept, never dropped)."""
        return dict(self.__pydantic_extra__ or {})

    @classmethod
    def from_raw(cls, data: Mapping[str, Any]) -> Any:
        return cls.model_validate(data)

    @classmethod
    def list_from_raw(cls, data: Sequence[Mapping[str, Any]]) -> list[Any]:
        return [cls.model_validate(item) for item in data]

    def to_payload(self) -> dict[str, Any]:
        """The JSON body to send: spec field names, nulls left out."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


# --- lookup -------------------------------------------------------------------------------------


class Criterion(FreightModel):
    """One lookup criterion; a lookup body is a list of them (AND-ed, assumption A5).

    ``value`` accepts str, int, date or time and is sent as a string (dates ``YYYY-MM-DD``).
    """

    key: str
    match_mode: MatchMode = "EQUALS"
    value: str | None = None
    values: list[str] | None = None
    identifiers: list[Criterion] | None = None

    @field_validator("value", mode="before")
    @classmethod
    def _value_to_text(cls, value: Any) -> Any:
        return _as_text(value)

    @field_validator("values", mode="before")
    @classmethod
    def _values_to_text(cls, value: Any) -> Any:
        if isinstance(value, list | tuple | set | frozenset):
            return [_as_text(v) for v in value]
        return value

    @field_validator("key")
    @classmethod
    def _key_not_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("criterion key must not be empty")
        return value


def _as_text(value: Any) -> Any:
    if isinstance(value, bool):
        return "J" if value else "N"
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, int | float):
        return str(value)
    return value


# --- DateTime and locations ---------------------------------------------------------------------


class DateTime(FreightModel):
    """The service's DateTime object in either of its forms (see :mod:`freight_pipeline.datetimes`).

    ``time`` and ``zone_offset`` keep what was received (a string or an object); ``instant`` is the
    one timezone-aware value, ``until`` the end of the range (PICKUP, FINAL_DESTINATION). Both are
    None when a part is missing or unreadable; ``parse_error`` then says why.
    """

    date: str | None = None
    time: str | dict[str, Any] | None = None
    zone_offset: str | dict[str, Any] | None = None
    until_value: str | dict[str, Any] | None = Field(default=None, alias="until")

    def _parsed(self) -> ParsedDateTime | None:
        try:
            return parse_datetime_object(
                {"date": self.date, "time": self.time, "zone_offset": self.zone_offset, "until": self.until_value}
            )
        except DateTimeParseError:
            return None

    @property
    def parsed(self) -> ParsedDateTime | None:
        return self._parsed()

    @property
    def parse_error(self) -> str | None:
        try:
            parse_datetime_object(
                {"date": self.date, "time": self.time, "zone_offset": self.zone_offset, "until": self.until_value}
            )
        except DateTimeParseError as exc:
            return str(exc)
        return None

    @property
    def instant(self) -> dt.datetime | None:
        parsed = self._parsed()
        return parsed.instant if parsed else None

    @property
    def until(self) -> dt.datetime | None:
        parsed = self._parsed()
        return parsed.until if parsed else None


class LocationCode(FreightModel):
    type: str | None = None  # SERVICE, UNLOC, IATA, FOREIGN, POSTAL_CODE, UN_COUNTRY
    code: str | None = None


class Location(FreightModel):
    codes: list[LocationCode] = Field(default_factory=list)
    name: str | None = None
    latitude: float | None = None
    longitude: float | None = None

    def code_of(self, code_type: str) -> str | None:
        return next((c.code for c in self.codes if c.type == code_type), None)


class LocationDateTime(FreightModel):
    location: Location | None = None
    estimated_datetime: DateTime | None = None
    actual_datetime: DateTime | None = None
    revised_datetime: DateTime | None = None
    estimated_datetime_until: DateTime | dict[str, Any] | None = None


class CarriageLeg(FreightModel):
    """A leg of pre-, main- or post-carriage; air, sea and road fields all optional."""

    origin: LocationDateTime | None = None
    destination: LocationDateTime | None = None
    leg_no: int | None = None
    mot: str | None = None  # required by the spec; values seen: SEA, ANY
    flight_no: str | None = None
    airline_awb_code: str | None = None
    airline_name: str | None = None
    voyage_no: str | None = None
    imo_code: str | None = None
    vessel_name: str | None = None
    vessel_flag: str | None = None
    call_sign: str | None = None
    haulage_type: str | None = None
    haulage_reference: str | None = None


class Transport(FreightModel):
    carriage_legs: list[CarriageLeg] = Field(default_factory=list)


# --- shipment parts -----------------------------------------------------------------------------


class Employees(FreightModel):
    closed_employee_matchcode: str | None = None
    last_modified_employee_matchcode: str | None = None
    created_employee_matchcode: str | None = None
    responsible_employee_matchcode: str | None = None


class MemoLine(FreightModel):
    """A shipment memo line (in ``Shipment.memos`` and from the memo endpoints)."""

    id: int | None = None
    client: str | None = None
    memo: str | None = None
    shipment_number: str | None = None
    running_number: int | None = None


class AesProposal(FreightModel):
    id: int | None = None
    client: str | None = None
    mrn: str | None = None
    shipment_number: str | None = None
    running_number: int | None = None


class CustomField(FreightModel):
    id: int | None = None
    client: str | None = None
    value: str | None = None
    shipment_number: str | None = None
    running_number: int | None = None


class Insurer(FreightModel):
    address_type: str | None = None
    address_number: int | None = None


class Insurance(FreightModel):
    waiver_customer: bool | None = None
    insurable_value: float | None = None
    insurable_value_currency_matchcode: str | None = None
    value_of_goods: float | None = None
    value_of_goods_currency_matchcode: str | None = None
    insurance_text: str | None = None
    transport_insurance: bool | None = None
    insurance_type: str | None = None
    insurer: Insurer | None = None


class CreditData(FreightModel):
    lc_number: str | None = None
    latest_shipment_date: str | None = None
    lc_expiry: str | None = None


class CustomsData(FreightModel):
    custom_clearance_date: str | None = None
    clearance: str | None = None
    book: str | None = None


class HsCode(FreightModel):
    id: int | None = None
    good_id: int | None = Field(default=None, alias="goodId")
    hs_code: str | None = Field(default=None, alias="hsCode")


class Measurement(FreightModel):
    id: int | None = None
    weight: float | None = None
    length: int | None = None
    width: int | None = None
    height: int | None = None
    quantity: int | None = None
    goods_id: int | None = None
    client: str | None = None
    shipment_number: str | None = None
    weight_unit: str | None = None
    volume_unit: str | None = None
    measurement_unit: str | None = None
    volume: float | None = None


class GoodCustoms(FreightModel):
    id: int | None = None
    invoice_number: str | None = None
    invoice_date_time: str | None = None
    amount: float | None = None
    currency_matchcode: str | None = None
    delivery_note: str | None = None
    delivery_date_time: str | None = None


class Mrn(FreightModel):
    id: int | None = None
    mrn: str | None = None


class DangerousGoodContact(FreightModel):
    name: str | None = None
    phone_number: str | None = None
    fax_number: str | None = None
    email: str | None = None


class DangerousGood(FreightModel):
    id: int | None = None
    dangerous_good_legislation: str | None = None  # IMDG, ADR or RID
    classification_code: str | None = None
    un_number: str | None = None
    release: str | None = None
    label_1: str | None = None
    label_2: str | None = None
    label_3: str | None = None
    label_4: str | None = None
    site: str | None = None
    flashpoint: str | None = None
    flashpoint_unit: str | None = None  # C or F
    ems_number_1: str | None = None
    ems_number_2: str | None = None
    mfag_number_1: str | None = None
    mfag_number_2: str | None = None
    remarks: list[str] = Field(default_factory=list)
    authorisation_number: str | None = None
    packaging_group: str | None = None
    technical_name_1: str | None = None
    technical_name_2: str | None = None
    causing_substance_1: str | None = None
    causing_substance_2: str | None = None
    issuer: str | None = None
    net_weight: float | None = None
    gross_weight: float | None = None
    weight_unit: str | None = None
    contact: DangerousGoodContact | None = None


class Good(FreightModel):
    """A goods line; ``subgoods`` repeats the structure recursively."""

    id: int | None = None
    client: str | None = None
    shipment_number: str | None = None
    identifier: str | None = None
    counter: int | None = None
    level: int | None = None
    level_number: int | None = None
    marks: list[str] = Field(default_factory=list)
    quantity: int | None = None
    packaging_matchcode: str | None = None
    commodity_matchcode: str | None = None
    description: list[str] = Field(default_factory=list)
    weight: float | None = None
    net_weight: float | None = None
    chargable_weight: float | None = None  # spelling as in the spec
    weight_unit: str | None = None
    volume: float | None = None
    volume_unit: str | None = None
    colli: bool | None = None
    colli_number: int | None = None
    additional_mark: bool | None = None
    container_number: str | None = None
    hs_codes: list[HsCode] = Field(default_factory=list)
    measurements: list[Measurement] = Field(default_factory=list)
    customs: list[GoodCustoms] = Field(default_factory=list)
    mrns: list[Mrn] = Field(default_factory=list)
    subgoods: list[Good] = Field(default_factory=list)
    dangerous_goods: list[DangerousGood] = Field(default_factory=list, alias="dangerousGoods")

    def walk(self) -> list[Good]:
        """This good and all its subgoods, depth first."""
        out: list[Good] = [self]
        for sub in self.subgoods:
            out.extend(sub.walk())
        return out


class PrintedAddress(FreightModel):
    line_1: str | None = None
    line_2: str | None = None
    line_3: str | None = None
    line_4: str | None = None
    line_5: str | None = None


class AddressReference(FreightModel):
    id: int | None = None
    matchcode: str | None = None
    value: str | None = None
    date_and_time: DateTime | None = None


class ShipmentAddress(FreightModel):
    qualifier: str | None = None
    address_type: str | None = None
    address_number: int | None = None
    printed_address: PrintedAddress | None = None
    street: str | None = None
    postal_code: str | None = None
    city: str | None = None
    state: str | None = None
    country_matchcode: str | None = None
    un_location_code: str | None = None
    contact: dict[str, Any] | None = None
    references: list[AddressReference] = Field(default_factory=list)


class ContainerAddress(FreightModel):
    id: int | None = None
    qualifier: str | None = None
    street: str | None = None
    city: str | None = None
    order: int | None = None
    references: list[AddressReference] = Field(default_factory=list)
    address_type: str | None = None
    address_number: int | None = None
    postal_code: str | None = None
    country_matchcode: str | None = None
    un_location_code: str | None = None
    from_date_and_time: DateTime | None = None
    to_date_and_time: DateTime | None = None
    contact: dict[str, Any] | None = None


class Container(FreightModel):
    id: int | None = None
    good_id: int | None = None
    client: str | None = None
    shipment_number: str | None = None
    container_number: str | None = None
    seal_number1: str | None = None
    seal_number2: str | None = None
    seal_number3: str | None = None
    container_iso_code: str | None = None
    shippers_own: bool | None = None
    container_addresses: list[ContainerAddress] = Field(default_factory=list, alias="containerAddresses")


class ShipmentEvent(FreightModel):
    """A status event. ``event`` keeps unknown codes as received; ``known`` says if it is in the spec."""

    event: str | None = None
    type: str | None = None  # ESTIMATED or ACTUAL
    shipment_id: int | None = None
    date_time: DateTime | None = None
    location: Location | None = None

    @field_validator("event")
    @classmethod
    def _report_unknown(cls, value: str | None) -> str | None:
        if value is not None and value not in EVENT_CODES:
            _report_unknown_event_code(value)
        return value

    @property
    def known(self) -> bool:
        return self.event in EVENT_CODES

    @property
    def instant(self) -> dt.datetime | None:
        return self.date_time.instant if self.date_time else None


class Shipment(FreightModel):
    """A shipment: the base shipment from a lookup (A9) or the full document from retrieve."""

    id: int | None = None
    client: str | None = None
    direction: str | None = None
    office: str | None = None
    employees: Employees | None = None
    memos: list[MemoLine] = Field(default_factory=list)
    aes: list[AesProposal] = Field(default_factory=list)
    shipment_number: str | None = None
    master_reference: str | None = None
    house_reference: str | None = None
    bl_type: str | None = None
    mode_of_transport: str | None = None
    month_of_service: str | None = None
    total_packages: int | None = None
    total_gross_weight: float | None = None
    self_pickup: str | None = None
    self_delivery: str | None = None
    goods: list[Good] = Field(default_factory=list)
    addresses: list[ShipmentAddress] = Field(default_factory=list)
    pre_carriage: Transport | None = None
    main_carriage: Transport | None = None
    post_carriage: Transport | None = None
    events: list[ShipmentEvent] = Field(default_factory=list)
    terms_of_delivery_matchcode: str | None = None
    terms_of_delivery_name: str | None = None
    total_volume: float | None = None
    chargeable_weight: float | None = Field(default=None, alias="chargeableWeight")
    original_shipment_number: str | None = None
    foreign_id: str | None = None
    movement_matchcode: str | None = None
    insurance: Insurance | None = None
    credit_data: CreditData | None = None
    customs_data: CustomsData | None = None
    containers: list[Container] = Field(default_factory=list)
    custom_fields: list[CustomField] = Field(default_factory=list)
    last_modified_date_time: str | None = None
    created_date_time: str | None = None
    order_date_time: str | None = None
    project_matchcode: str | None = None
    depot_matchcode: str | None = None
    shipment_closed: bool | None = None
    booking_party_address_qualifier: str | None = None

    @property
    def last_modified_at(self) -> dt.datetime | None:
        """``last_modified_date_time`` as a datetime (aware when the service sends an offset)."""
        try:
            return parse_iso_datetime(self.last_modified_date_time)
        except DateTimeParseError:
            return None

    @property
    def created_at(self) -> dt.datetime | None:
        try:
            return parse_iso_datetime(self.created_date_time)
        except DateTimeParseError:
            return None


# --- other groups -------------------------------------------------------------------------------


class CodeConversion(FreightModel):
    """An EDI code conversion record (assumption A14 beyond ``id``)."""

    id: int | None = None
    partner: str | None = None
    direction: str | None = None  # I: partner code -> internal, O: internal -> partner
    code_table: str | None = None
    code_type: str | None = None
    source_code: str | None = None
    target_code: str | None = None
    description: str | None = None
    valid_from: str | None = None
    last_modified_date_time: str | None = None


class EFileReference(FreightModel):
    id: int | None = None
    type: str | None = None  # SHIPMENT, ADDRESS, HBL, MBL, OTHER (A18)
    value: str | None = None

    @field_validator("value", mode="before")
    @classmethod
    def _value_to_text(cls, value: Any) -> Any:
        return _as_text(value)


class EFileRole(FreightModel):
    id: int | None = None
    role: str | None = None


class EFile(FreightModel):
    """An E-File document (A18). ``references``/``roles`` are None unless retrieved with cascade."""

    id: int | None = None
    file_name: str | None = None
    mime_type: str | None = None
    description: str | None = None
    document: str | None = Field(default=None, repr=False)  # base64
    created_date_time: str | None = None
    references: list[EFileReference] | None = None
    roles: list[EFileRole] | None = None

    @classmethod
    def from_bytes(
        cls,
        content: bytes,
        *,
        file_name: str,
        mime_type: str = "application/octet-stream",
        description: str | None = None,
        references: Sequence[EFileReference | Mapping[str, Any]] = (),
        roles: Sequence[EFileRole | Mapping[str, Any] | str] = (),
    ) -> EFile:
        """A new E-File to store; ``roles`` may be plain role names."""
        return cls(
            file_name=file_name,
            mime_type=mime_type,
            description=description,
            document=base64.b64encode(content).decode("ascii"),
            references=[r if isinstance(r, EFileReference) else EFileReference.model_validate(r) for r in references],
            roles=[
                r
                if isinstance(r, EFileRole)
                else EFileRole(role=r)
                if isinstance(r, str)
                else EFileRole.model_validate(r)
                for r in roles
            ],
        )

    def content(self) -> bytes | None:
        """The decoded document; None when the record carries none (lookups omit it)."""
        return base64.b64decode(self.document) if self.document is not None else None


class WebhookReceipt(FreightModel):
    """The webhook's answer (assumption A17: ``{"received": true, "id": n}``)."""

    received: bool | None = None
    id: int | None = None
