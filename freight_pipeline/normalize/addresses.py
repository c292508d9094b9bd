"""Shipment addresses (with references) and containers (with their addresses)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from freight_pipeline.normalize.converters import Row, Rows
from freight_pipeline.normalize.plain_fields import as_object, compile_fields, copy_fields
from freight_pipeline.normalize.problems import Problems
from freight_pipeline.normalize.specs.parties import (
    ADDRESS_CONTACT,
    ADDRESS_FIELDS,
    ADDRESS_REFERENCES,
    ADDRESSES_KEY,
    APPOINTMENT_FROM,
    APPOINTMENT_TO,
    CONTAINER_ADDRESS_FIELDS,
    CONTAINER_ADDRESSES,
    CONTAINER_ADDRESSES_KEY,
    CONTAINER_CONTACT,
    CONTAINER_FIELDS,
    CONTAINERS_KEY,
    PRINTED_ADDRESS_FIELDS,
    PRINTED_ADDRESS_KEY,
    REFERENCE_DATETIME,
    REFERENCE_FIELDS,
    REFERENCES_KEY,
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
    for position, item_path, address in ADDRESSES_KEY.items_in(doc, ADDRESSES_KEY.name, problems):
        row: Row = {"shipment_id": shipment_id, "position": position}
        copy_fields(row, address, _ADDRESS, item_path, problems)
        printed_path = f"{item_path}.{PRINTED_ADDRESS_KEY.name}"
        printed = as_object(PRINTED_ADDRESS_KEY.of(address), printed_path, problems)
        if printed:
            copy_fields(row, printed, _PRINTED, printed_path, problems)
        ADDRESS_CONTACT.put_in(row, address, item_path, problems)
        target.append(row)
        references_path = f"{item_path}.{REFERENCES_KEY.name}"
        for ref_position, ref_path, reference in REFERENCES_KEY.items_in(address, references_path, problems):
            ref_row: Row = {
                "shipment_id": shipment_id,
                "address_position": position,
                "position": ref_position,
            }
            copy_fields(ref_row, reference, _REFERENCE, ref_path, problems)
            REFERENCE_DATETIME.put_in(ref_row, reference, ref_path, problems)
            references.append(ref_row)


def add_containers(out: Rows, shipment_id: int, doc: Mapping[str, Any], problems: Problems) -> None:
    target = out[SHIPMENT_CONTAINERS.name]
    addresses = out[CONTAINER_ADDRESSES.name]
    for position, item_path, container in CONTAINERS_KEY.items_in(doc, CONTAINERS_KEY.name, problems):
        row: Row = {"shipment_id": shipment_id, "position": position}
        copy_fields(row, container, _CONTAINER, item_path, problems)
        target.append(row)
        addresses_path = f"{item_path}.{CONTAINER_ADDRESSES_KEY.name}"
        for addr_position, addr_path, address in CONTAINER_ADDRESSES_KEY.items_in(container, addresses_path,
                                                           problems):
            addr_row: Row = {
                "shipment_id": shipment_id,
                "container_position": position,
                "position": addr_position,
            }
            copy_fields(addr_row, address, _CONTAINER_ADDRESS, addr_path, problems)
            APPOINTMENT_FROM.put_in(addr_row, address, addr_path, problems)
            APPOINTMENT_TO.put_in(addr_row, address, addr_path, problems)
            CONTAINER_CONTACT.put_in(addr_row, address, addr_path, problems)
            addresses.append(addr_row)
