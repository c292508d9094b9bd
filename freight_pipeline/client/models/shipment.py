"""The shipment document and its parts: goods, addresses, containers, events, memos, insurance."""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import Field, field_validator

from freight_pipeline.client.models.base import Flag, FreightModel, _report_unknown_event_code
from freight_pipeline.client.models.common import DateTime, Location, Transport
from freight_pipeline.client.models.keys import EVENT_CODES
from freight_pipeline.datetimes import DateTimeParseError, parse_iso_datetime


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
