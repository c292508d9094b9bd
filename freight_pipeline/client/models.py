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

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import functools
import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

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

_reported: set[tuple[str, ...]] = set()
_report_lock = threading.Lock()


def _report_once(key: tuple[str, ...], message: str, *args: Any) -> None:
    """Log a warning the first time ``key`` is seen in this process (drift is reported, not repeated)."""
    with _report_lock:
        if key in _reported:
            return
        _reported.add(key)
    logger.warning(message, *args)


def _report_unknown_event_code(code: str) -> None:
    _report_once(("event", code), "unknown shipment event code %r kept as received (not in the spec's list)", code)


# --- lenient reading ----------------------------------------------------------------------------

_TRUE_TEXTS = frozenset({"J", "JA", "Y", "YES", "TRUE", "T", "1"})
_FALSE_TEXTS = frozenset({"N", "NEIN", "NO", "FALSE", "F", "0"})


def _flag(value: Any) -> Any:
    """``J``/``Y``/``true``/... and ``N``/``false``/... texts as booleans; an empty text as null."""
    if isinstance(value, str):
        text = value.strip().upper()
        if not text:
            return None
        if text in _TRUE_TEXTS:
            return True
        if text in _FALSE_TEXTS:
            return False
    return value


Flag = Annotated[bool | None, BeforeValidator(_flag)]


@dataclasses.dataclass(frozen=True)
class FieldProblem:
    """A field a model could not read: where (``goods[0].weight``), why, and the value as received."""

    path: str
    message: str
    value: Any = None

    def within(self, prefix: str) -> FieldProblem:
        return dataclasses.replace(self, path=f"{prefix}.{self.path}" if self.path else prefix)

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


@functools.cache
def _empty_when_null(cls: type[BaseModel]) -> frozenset[str]:
    """Input keys (names and aliases) of the array fields that default to an empty array."""
    found: set[str] = set()
    for name, info in cls.model_fields.items():
        if info.default_factory is list:
            found.update({name, info.alias or name})
    return frozenset(found)


def _nulls_as_empty(cls: type[BaseModel], data: dict[str, Any]) -> dict[str, Any]:
    """A20: a null array is an empty array (a new dict; the one received stays untouched)."""
    nulls = [key for key in _empty_when_null(cls) if key in data and data[key] is None]
    return {**data, **{key: [] for key in nulls}} if nulls else data


@dataclasses.dataclass
class _Readable:
    """What is left of a record after its unreadable parts are taken out."""

    data: dict[str, Any]
    problems: list[FieldProblem] = dataclasses.field(default_factory=list)
    kept: dict[str, list[int]] = dataclasses.field(default_factory=dict)  # array key -> indexes kept


def _without_unreadable(cls: type[BaseModel], data: dict[str, Any], error: ValidationError) -> _Readable:
    """``data`` without the fields and array items ``error`` names (null items are dropped silently)."""
    readable = _Readable(dict(data))
    dropped: dict[str, set[int]] = {}
    problems: dict[str, FieldProblem] = {}
    kinds: dict[tuple[str, str, str], FieldProblem] = {}  # (model, field, pydantic error type) -> first problem
    for detail in error.errors():
        loc = detail["loc"]
        if not loc or not isinstance(loc[0], str) or loc[0] not in data:
            raise error  # not about one field: the record as a whole cannot be read
        key, value = loc[0], data[loc[0]]
        if len(loc) > 1 and isinstance(loc[1], int) and isinstance(value, list):
            dropped.setdefault(key, set()).add(loc[1])
            path, value = f"{key}[{loc[1]}]", value[loc[1]]
            if value is None:
                continue
        else:
            readable.data.pop(key, None)
            path = key
        problem = problems.setdefault(path, FieldProblem(path, detail["msg"], value))
        kinds.setdefault((cls.__name__, key, detail["type"]), problem)
    for key, indexes in dropped.items():
        if key in readable.data:
            readable.kept[key] = [index for index in range(len(data[key])) if index not in indexes]
            readable.data[key] = [data[key][index] for index in readable.kept[key]]
    readable.problems = list(problems.values())
    for kind, problem in kinds.items():
        _report_once(
            kind,  # not the message: it may hold the value, and every distinct value would be reported
            "%s.%s cannot be read (%s); left out of the model, kept in .raw and .problems",
            cls.__name__,
            problem.path,
            problem.message,
        )
    return readable


def _nested_problems(prefix: str, value: Any, kept: list[int] | None = None) -> list[FieldProblem]:
    """Problems of nested models, with array indexes of the record as received."""
    if isinstance(value, FreightModel):
        return [p.within(prefix) for p in value.problems]
    if isinstance(value, list):
        found: list[FieldProblem] = []
        for index, item in enumerate(value):
            found.extend(_nested_problems(f"{prefix}[{kept[index] if kept else index}]", item))
        return found
    return []


class FreightModel(BaseModel):
    """Base of every resource model: lenient (see module docstring), keeps unknown fields and the raw dict."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, protected_namespaces=(), coerce_numbers_to_str=True)
    _lenient: ClassVar[bool] = True  # False: validation errors are raised (outgoing models)

    _raw: dict[str, Any] | None = PrivateAttr(default=None)
    _readable: _Readable | None = PrivateAttr(default=None)

    @model_validator(mode="wrap")
    @classmethod
    def _read(cls, data: Any, handler: Any) -> Any:
        if not isinstance(data, dict):
            return handler(data)
        readable: _Readable | None = None
        if cls._lenient:
            instance, readable = cls._read_leniently(data, handler)
        else:
            instance = handler(data)
        if isinstance(instance, FreightModel):
            instance._raw = data
            if readable is not None:  # a recursive model passes this validator twice: keep what the inner found
                instance._readable = readable
        return instance

    @classmethod
    def _read_leniently(cls, data: dict[str, Any], handler: Any) -> tuple[Any, _Readable | None]:
        """Validate; on errors once more without the unreadable parts (a second failure is raised)."""
        cleaned = _nulls_as_empty(cls, data)
        try:
            return handler(cleaned), None
        except ValidationError as exc:
            readable = _without_unreadable(cls, cleaned, exc)
        return handler(readable.data), readable

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

    @property
    def problems(self) -> list[FieldProblem]:
        """Fields that could not be read, here and in nested models (spec names, indexes as received)."""
        readable = self._readable or _Readable({})
        found = list(readable.problems)
        for name, info in type(self).model_fields.items():
            key = info.alias or name
            kept = readable.kept.get(key, readable.kept.get(name))
            found.extend(_nested_problems(key, getattr(self, name), kept))
        return found

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
    Outgoing only, so strict: an unknown field (``mode=`` for ``match_mode=``) raises.
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True, coerce_numbers_to_str=True)
    _lenient: ClassVar[bool] = False

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


def _bare_date(text: str) -> dt.date | None:
    """The date of an ISO 8601 text that is a date and nothing else; None for any other text."""
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        return None


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

    @model_validator(mode="before")
    @classmethod
    def _from_iso_text(cls, data: Any) -> Any:
        """One ISO 8601 string (``2026-11-01T10:15:30+01:00``) instead of the object: its parts.

        A date alone (``2026-11-20``) is that date without a time (never midnight).
        """
        if not isinstance(data, str):
            return data
        day = _bare_date(data)
        if day is not None:
            return {"date": day.isoformat(), "time": None, "zone_offset": None}
        try:
            parsed = parse_datetime_object(data)
        except DateTimeParseError as exc:
            raise ValueError(str(exc)) from None
        if parsed is None:
            return {}
        return {
            "date": parsed.date.isoformat() if parsed.date else None,
            "time": parsed.time.isoformat() if parsed.time else None,
            "zone_offset": parsed.offset_text,
        }

    def _read_parts(self) -> ParsedDateTime | None:
        return parse_datetime_object(
            {"date": self.date, "time": self.time, "zone_offset": self.zone_offset, "until": self.until_value}
        )

    def _parsed(self) -> ParsedDateTime | None:
        try:
            return self._read_parts()
        except DateTimeParseError:
            return None

    @property
    def parsed(self) -> ParsedDateTime | None:
        return self._parsed()

    @property
    def parse_error(self) -> str | None:
        try:
            self._read_parts()
        except DateTimeParseError as exc:
            return str(exc)
        return None

    @property
    def problems(self) -> list[FieldProblem]:
        """As for every model, plus a part that is present but cannot be read (``parse_error``)."""
        error = self.parse_error
        return super().problems + ([FieldProblem("", error, self.raw)] if error else [])

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
    waiver_customer: Flag = None
    insurable_value: float | None = None
    insurable_value_currency_matchcode: str | None = None
    value_of_goods: float | None = None
    value_of_goods_currency_matchcode: str | None = None
    insurance_text: str | None = None
    transport_insurance: Flag = None
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
    colli: Flag = None
    colli_number: int | None = None
    additional_mark: Flag = None
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
    shippers_own: Flag = None
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
    shipment_closed: Flag = None
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

    received: Flag = None
    id: int | None = None
