"""Every table of the ``freight`` schema, declared once: the table of contents.

Each spec drives DuckDB DDL, Arrow schemas, Parquet output and the dbt docs. The source-to-column
mappings (:class:`Field` tuples and column groups) are declared with their tables and reused by the
flatteners, so a column cannot be declared without its source or the other way round.

The declarations live in :mod:`freight_pipeline.normalize.specs`, one module per domain (keys,
shipments, goods, parties, legs, events and memos, code conversions). This module lists the tables
in declaration order (:data:`FREIGHT_TABLES`, which DDL, docs and tests follow) and names the tables
a shipment document fills (:data:`SHIPMENT_DOCUMENT_TABLES`). Import a declaration (a table spec, its
fields and column groups) from the ``specs`` module that declares it.

Naming conventions:

* snake_case source names are kept; camelCase sources become snake_case (``chargeableWeight`` ->
  ``chargeable_weight``, ``goodId`` -> ``good_id``, ``hsCode`` -> ``hs_code``); the goods field keeps
  the source spelling ``chargable_weight``. A record's own ``id`` becomes ``<entity>_id``
  (``shipment_id``, ``good_id``, ``container_id``, ``memo_id``, ...). SQL keyword ``order`` becomes
  ``address_order``.
* nested single objects are flattened with the object's name as prefix (``insurance_*``,
  ``credit_*``, ``customs_*``, ``contact_*``, ``printed_line_1..5``), without doubling a prefix the
  field already carries (``insurance_text``). Employee fields (``*_employee_matchcode``) are
  already unambiguous and kept as sent.
* DateTime objects -> ``<stem>_at`` (TIMESTAMPTZ, UTC) plus the raw parts ``<stem>_date`` (DATE),
  ``<stem>_time`` and ``<stem>_offset`` (VARCHAR), and ``<stem>_until`` / ``<stem>_until_time``
  where the source has ``until``.
* Locations -> ``<p>_location_name``, one column per code type (``<p>_service_code``, ``_unloc``,
  ``_iata``, ``_foreign_code``, ``_postal_code``, ``_un_country``; the first code of that type in the codes'
  canonical order, by code),
  ``<p>_latitude`` / ``<p>_longitude`` and every code as JSON in ``<p>_location_codes``.
* Positions (``position``, ``leg_position``, ``*_position``) are 1-based array positions as sent (a leg's in ``leg_no``
  order: ``specs.legs.LEG_ORDER``);
  ``good_path`` is the dotted path of positions through ``goods`` / ``subgoods``.
"""

from __future__ import annotations

from collections.abc import Mapping

from freight_pipeline.normalize.documents import SHIPMENT_DOCUMENTS
from freight_pipeline.normalize.schema import TableSpec
from freight_pipeline.normalize.specs.code_conversions import CODE_CONVERSIONS
from freight_pipeline.normalize.specs.events_memos import (
    SHIPMENT_AES,
    SHIPMENT_CUSTOM_FIELDS,
    SHIPMENT_EVENTS,
    SHIPMENT_MEMOS,
)
from freight_pipeline.normalize.specs.goods import (
    GOOD_CUSTOMS,
    GOOD_DANGEROUS_GOODS,
    GOOD_DESCRIPTIONS,
    GOOD_HS_CODES,
    GOOD_MARKS,
    GOOD_MEASUREMENTS,
    GOOD_MRNS,
    SHIPMENT_GOODS,
)
from freight_pipeline.normalize.specs.legs import AIR_MAIN_CARRIAGE_LEGS, CARRIAGE_LEGS, SEA_MAIN_CARRIAGE_LEGS
from freight_pipeline.normalize.specs.parties import (
    ADDRESS_REFERENCES,
    CONTAINER_ADDRESSES,
    SHIPMENT_ADDRESSES,
    SHIPMENT_CONTAINERS,
)
from freight_pipeline.normalize.specs.shipments import SHIPMENTS

# --- registry: every table, in declaration order ---------------------------------------------------

FREIGHT_TABLES: tuple[TableSpec, ...] = (
    SHIPMENTS,
    SHIPMENT_GOODS,
    GOOD_HS_CODES,
    GOOD_MEASUREMENTS,
    GOOD_CUSTOMS,
    GOOD_MRNS,
    GOOD_DANGEROUS_GOODS,
    GOOD_MARKS,
    GOOD_DESCRIPTIONS,
    SHIPMENT_ADDRESSES,
    ADDRESS_REFERENCES,
    SHIPMENT_CONTAINERS,
    CONTAINER_ADDRESSES,
    CARRIAGE_LEGS,
    AIR_MAIN_CARRIAGE_LEGS,
    SEA_MAIN_CARRIAGE_LEGS,
    SHIPMENT_EVENTS,
    SHIPMENT_MEMOS,
    SHIPMENT_AES,
    SHIPMENT_CUSTOM_FIELDS,
    SHIPMENT_DOCUMENTS,
    CODE_CONVERSIONS,
)
TABLES_BY_NAME: Mapping[str, TableSpec] = {t.name: t for t in FREIGHT_TABLES}

SHIPMENT_DOCUMENT_TABLES: tuple[str, ...] = tuple(
    spec.name
    for spec in FREIGHT_TABLES
    if spec not in (AIR_MAIN_CARRIAGE_LEGS, SEA_MAIN_CARRIAGE_LEGS, SHIPMENT_EVENTS, SHIPMENT_MEMOS,
                    SHIPMENT_DOCUMENTS, CODE_CONVERSIONS)
)
"""The tables one shipment document fills: every table but those read from endpoints of their own.
The document's ``events`` and ``memos`` arrays are not normalized, so each table has exactly one
source (``sync.streams`` says which)."""
