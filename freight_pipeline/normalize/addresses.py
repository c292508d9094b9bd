"""Shipment addresses (with references) and containers (with their addresses)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from freight_pipeline.normalize.converters import Row, Rows
from freight_pipeline.normalize.plain_fields import as_object, compile_fields, copy_fields, items_of
from freight_pipeline.normalize.problems import Problems
from freight_pipeline.normalize.specs.parties import (
    ADDRESS_CONTACT,
    ADDRESS_FIELDS,
    ADDRESS_REFERENCES,
    APPOINTMENT_FROM,
    APPOINTMENT_TO,
    CONTAINER_ADDRESS_FIELDS,
    CONTAINER_ADDRESSES,
    CONTAINER_CONTACT,
    CONTAINER_FIELDS,
    PRINTED_ADDRESS_FIELDS,
    REFERENCE_DATETIME,
    REFERENCE_FIELDS,
    SHIPMENT_ADDRESSES,
    SHIPMENT_CONTAINERS,
)

_ADDRESS = compile_fields(ADDRESS_FIELDS)
_PRINTED = compile_fields(PRINTED_ADDRESS_FIELDS)
_REFERENCE = compile_fields(REFERENCE_FIELDS)
_CONTAINER = compile_fields(CONTAINER_FIELDS)
_CONTAINER_ADDRESS = compile_fields(CONTAINER_ADDRESS_FIELDS)


def add_addresses(out: Rows, shipment_id: int, doc: Mapping[str, Any], problems: Problems) -> None:
    target = out[SHIPMENT_ADDRESSES.name]
    references = out[ADDRESS_REFERENCES.name]
    for position, item_path, address in items_of(doc, "addresses", "addresses", problems):
        row: Row = {"shipment_id": shipment_id, "position": position}
        copy_fields(row, address, _ADDRESS, item_path, problems)
        printed = as_object(address.get("printed_address"), f"{item_path}.printed_address", problems)
        if printed:
            copy_fields(row, printed, _PRINTED, f"{item_path}.printed_address", problems)
        ADDRESS_CONTACT.put(row, address.get("contact"), f"{item_path}.contact", problems)
        target.append(row)
        for ref_position, ref_path, reference in items_of(address, "references", f"{item_path}.references", problems):
            ref_row: Row = {
                "shipment_id": shipment_id,
                "address_position": position,
                "position": ref_position,
            }
            copy_fields(ref_row, reference, _REFERENCE, ref_path, problems)
            REFERENCE_DATETIME.put(ref_row, reference.get("date_and_time"), f"{ref_path}.date_and_time", problems)
            references.append(ref_row)


def add_containers(out: Rows, shipment_id: int, doc: Mapping[str, Any], problems: Problems) -> None:
    target = out[SHIPMENT_CONTAINERS.name]
    addresses = out[CONTAINER_ADDRESSES.name]
    for position, item_path, container in items_of(doc, "containers", "containers", problems):
        row: Row = {"shipment_id": shipment_id, "position": position}
        copy_fields(row, container, _CONTAINER, item_path, problems)
        target.append(row)
        addresses_path = f"{item_path}.containerAddresses"
        for addr_position, addr_path, address in items_of(container, "containerAddresses", addresses_path, problems):
            addr_row: Row = {
                "shipment_id": shipment_id,
                "container_position": position,
                "position": addr_position,
            }
            copy_fields(addr_row, address, _CONTAINER_ADDRESS, addr_path, problems)
            APPOINTMENT_FROM.put(
                addr_row, address.get("from_date_and_time"), f"{addr_path}.from_date_and_time", problems
            )
            APPOINTMENT_TO.put(addr_row, address.get("to_date_and_time"), f"{addr_path}.to_date_and_time", problems)
            CONTAINER_CONTACT.put(addr_row, address.get("contact"), f"{addr_path}.contact", problems)
            addresses.append(addr_row)
