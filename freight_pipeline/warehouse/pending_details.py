"""The upgrade that carries the work an earlier release left queued for its detail streams into the retry queue.

Releases before the shipments stream read each shipment's parts (events, main-carriage legs, memo lines) queued each
changed shipment in ``freight_meta.pending_details`` for streams of their own, which read it on: one that failed or
was cut off left its shipments there for the next run. This release reads a shipment's parts with it, and its walk
is past those shipments, so their parts would keep what was read before, for good (a closed shipment is never
sampled). The schema's upgrade (``Warehouse.ensure_schema``) moves each entry into ``freight_meta.quarantine``, due at
once, where the next run reads the part as a retry, and drops the old queue (a table no release writes any more).
Once it is gone, running it again changes nothing.
"""

from __future__ import annotations

import duckdb

from freight_pipeline.warehouse import meta
from freight_pipeline.warehouse.ddl import Catalog, qualified, quote, run

PENDING_DETAILS = (meta.META_SCHEMA, "pending_details")
"""The earlier releases' work queue of the detail streams: ``(stream, shipment_id)``, the shipment's client, number
and mode, when and by which run it was queued."""


def pending_details_into_retries(con: duckdb.DuckDBPyConnection, catalog: Catalog) -> list[str]:
    """Move the entries of :data:`PENDING_DETAILS` into the retry queue, due now, as the shipment's part they were
    queued for (a retired stream, ``meta.RETIRED_STREAMS``, has its part's name; an entry waiting there for the same
    part keeps its own), then drop the table, inside the caller's transaction; the steps."""
    if PENDING_DETAILS not in catalog.columns:
        return []
    pending = f"{quote(PENDING_DETAILS[0])}.{quote(PENDING_DETAILS[1])}"
    queue = qualified(meta.QUARANTINE)
    moved = run(con, f"""
        INSERT INTO {queue} BY NAME
        SELECT p.stream, CAST(p.shipment_id AS VARCHAR) AS record_key, p.shipment_id,
               'queued by an earlier release for its ' || p.stream || ' stream, not read yet' AS reason,
               json_object('client', p.client, 'shipment_number', p.shipment_number,
                           'mode_of_transport', p.mode_of_transport) AS context,
               coalesce(p.enqueued_at, now()) AS first_failed_at, coalesce(p.enqueued_at, now()) AS last_failed_at,
               0 AS attempts, coalesce(p.enqueued_at, now()) AS next_attempt_at, 'upgrade' AS run_id
        FROM {pending} p
        WHERE p.stream IN (SELECT unnest(?::VARCHAR[])) AND p.shipment_id IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM {queue} q
                          WHERE q.stream = p.stream AND q.record_key = CAST(p.shipment_id AS VARCHAR))
        """, [sorted(meta.RETIRED_STREAMS)])
    count = int(moved[0][0]) if moved else 0
    run(con, f"DROP TABLE {pending}")
    return [f"moved {count} entries of {PENDING_DETAILS[1]} into the retry queue and dropped it"]
