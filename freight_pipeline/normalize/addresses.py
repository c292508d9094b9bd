"""Shipment addresses (with references) and containers (with their addresses)."""

from __future__ import annotations

from typing import Any

from freight_pipeline.normalize import tables as t
from freight_pipeline.normalize.fields import Row, Rows, as_items, as_object, compile_fields, copy_fields

_ADDRESS = compile_fields(t.ADDRESS_FIELDS)
_PRINTED = compile_fields(t.PRINTED_ADDRESS_FIELDS)
_REFERENCE = compile_fields(t.REFERENCE_FIELDS)
_CONTAINER = compile_fields(t.CONTAINER_FIELDS)
_CONTAINER_ADDRESS = compile_fields(t.CONTAINER_ADDRESS_FIELDS)


def add_addresses(out: Rows, shipment_id: int, addresses: Any, path: str = "addresses") -> None:
    target = out[t.SHIPMENT_ADDRESSES.name]
    references = out[t.ADDRESS_REFERENCES.name]
    for position, item_path, address in as_items(addresses, path):
        row: Row = {"shipment_id": shipment_id, "position": position}
        copy_fields(row, address, _ADDRESS, item_path)
        printed = as_object(address.get("printed_address"), f"{item_path}.printed_address")
        if printed:
            copy_fields(row, printed, _PRINTED, f"{item_path}.printed_address")
        t.ADDRESS_CONTACT.put(row, address.get("contact"), f"{item_path}.contact")
        target.append(row)
        for ref_position, ref_path, reference in as_items(
            address.get("references"), f"{item_path}.references"
        ):
            ref_row: Row = {
                "shipment_id": shipment_id,
                "address_position": position,
                "position": ref_position,
            }
            copy_fields(ref_row, reference, _REFERENCE, ref_path)
            t.REFERENCE_DATETIME.put(ref_row, reference.get("date_and_time"), f"{ref_path}.date_and_time")
            references.append(ref_row)


def add_containers(out: Rows, shipment_id: int, containers: Any, path: str = "containers") -> None:
    target = out[t.SHIPMENT_CONTAINERS.name]
    addresses = out[t.CONTAINER_ADDRESSES.name]
    for position, item_path, container in as_items(containers, path):
        row: Row = {"shipment_id": shipment_id, "position": position}
        copy_fields(row, container, _CONTAINER, item_path)
        target.append(row)
        addresses_path = f"{item_path}.containerAddresses"
        for addr_position, addr_path, address in as_items(
            container.get("containerAddresses"), addresses_path
        ):
            addr_row: Row = {
                "shipment_id": shipment_id,
                "container_position": position,
                "position": addr_position,
            }
            copy_fields(addr_row, address, _CONTAINER_ADDRESS, addr_path)
            t.APPOINTMENT_FROM.put(
                addr_row, address.get("from_date_and_time"), f"{addr_path}.from_date_and_time"
            )
            t.APPOINTMENT_TO.put(addr_row, address.get("to_date_and_time"), f"{addr_path}.to_date_and_time")
            t.CONTAINER_CONTACT.put(addr_row, address.get("contact"), f"{addr_path}.contact")
            addresses.append(addr_row)
