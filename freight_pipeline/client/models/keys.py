"""The spec's lookup keys, match and order modes, and shipment event codes and types."""

from __future__ import annotations

from typing import Literal

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
