"""Every table of the ``freight`` schema, declared once: the table of contents.

Each spec drives DuckDB DDL, Arrow schemas, Parquet output and the dbt docs. The source-to-column
mappings (:class:`Field` tuples and column groups) are declared with their tables and reused by the
flatteners, so a column cannot be declared without its source or the other way round.

The declarations live in :mod:`freight_pipeline.normalize.specs`, one module per domain (keys,
shipments, goods, parties, legs, events and memos, code conversions). This module lists the tables
in declaration order (:data:`FREIGHT_TABLES`, which DDL, docs and tests follow), names the tables a
shipment document fills (:data:`SHIPMENT_DOCUMENT_TABLES`), and re-exports every declared name: import them from here.

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
  ``_iata``, ``_foreign_code``, ``_postal_code``, ``_un_country``; first code of that type),
  ``<p>_latitude`` / ``<p>_longitude`` and every code as JSON in ``<p>_location_codes``.
* Positions (``position``, ``leg_position``, ``*_position``) are 1-based array positions as sent;
  ``good_path`` is the dotted path of positions through ``goods`` / ``subgoods``.
"""

from __future__ import annotations

from collections.abc import Mapping

from freight_pipeline.normalize.documents import SHIPMENT_DOCUMENTS
from freight_pipeline.normalize.schema import TableSpec

# Every declaration of normalize/specs, re-exported (the flatteners read them as ``tables.X``).
from freight_pipeline.normalize.specs.code_conversions import CODE_CONVERSION_FIELDS, CODE_CONVERSIONS  # noqa: F401
from freight_pipeline.normalize.specs.events_memos import (  # noqa: F401
    AES_FIELDS,
    CUSTOM_FIELD_FIELDS,
    EVENT_DATETIME,
    EVENT_LOCATION,
    MEMO_FIELDS,
    SHIPMENT_AES,
    SHIPMENT_CUSTOM_FIELDS,
    SHIPMENT_EVENTS,
    SHIPMENT_MEMOS,
)
from freight_pipeline.normalize.specs.goods import (  # noqa: F401
    DANGEROUS_GOOD_CONTACT,
    DANGEROUS_GOOD_FIELDS,
    GOOD_CUSTOMS,
    GOOD_CUSTOMS_DATETIMES,
    GOOD_CUSTOMS_FIELDS,
    GOOD_DANGEROUS_GOODS,
    GOOD_DESCRIPTIONS,
    GOOD_FIELDS,
    GOOD_HS_CODES,
    GOOD_KEY,
    GOOD_KEY_NAMES,
    GOOD_MARKS,
    GOOD_MEASUREMENTS,
    GOOD_MRNS,
    HS_CODE_FIELDS,
    MEASUREMENT_FIELDS,
    MRN_FIELDS,
    SHIPMENT_GOODS,
)
from freight_pipeline.normalize.specs.keys import (  # noqa: F401
    GOOD_PATH,
    POSITION,
    SCHEMA,
    SHIPMENT_ID,
    SHIPMENT_ID_NULLABLE,
)
from freight_pipeline.normalize.specs.legs import (  # noqa: F401
    AIR_LEG_FIELDS,
    AIR_MAIN_CARRIAGE_LEGS,
    CARRIAGE_LEGS,
    HAULAGE_LEG_FIELDS,
    LEG_COMMON_FIELDS,
    LEG_END_COLUMNS,
    LEG_ENDS,
    SEA_LEG_FIELDS,
    SEA_MAIN_CARRIAGE_LEGS,
    LegEnd,
)
from freight_pipeline.normalize.specs.parties import (  # noqa: F401
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
from freight_pipeline.normalize.specs.shipments import (  # noqa: F401
    CREDIT_FIELDS,
    CUSTOMS_FIELDS,
    EMPLOYEE_FIELDS,
    INSURANCE_FIELDS,
    INSURER_FIELDS,
    SHIPMENT_FIELDS,
    SHIPMENT_LOCAL_CLOCK,
    SHIPMENT_TIMESTAMP_FIELDS,
    SHIPMENTS,
)

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
    for spec in (
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
        SHIPMENT_AES,
        SHIPMENT_CUSTOM_FIELDS,
    )
)
"""The tables one shipment document fills: everything embedded in it. Its ``events`` and ``memos``
arrays are not normalized (those tables come from their own endpoints), so each table has exactly one
source (``sync.streams`` says which)."""
