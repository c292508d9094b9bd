"""The upgrade that positions the legs a warehouse holds in ``leg_no`` order (``normalize.legs.in_leg_order``).

Releases before it positioned each leg at its place in the array the service sent. Re-read by this one, a shipment
whose legs came in another order than their ``leg_no`` would have them renumbered, and its history would record a
false revision of each leg that moved. So the schema's upgrade (``Warehouse.ensure_schema``) renumbers the rows held
once, as this release would write them: the legs of ``carriage_legs`` and the two main-carriage tables, and every
version of ``freight_history.leg_versions`` by the order of the current versions (the positions no current version
holds after them, in their order), each shipment renumbered recorded as changed for the incremental marts. It
touches only shipments whose legs are out of that order, so running it again changes nothing.
"""

from __future__ import annotations

from collections.abc import Collection

import duckdb

from freight_pipeline.normalize.schema import TableSpec
from freight_pipeline.normalize.specs.legs import AIR_MAIN_CARRIAGE_LEGS, CARRIAGE_LEGS, SEA_MAIN_CARRIAGE_LEGS
from freight_pipeline.warehouse import meta
from freight_pipeline.warehouse.ddl import qualified, run
from freight_pipeline.warehouse.history import LEG_VERSIONS

LEG_TABLES = ((CARRIAGE_LEGS, "leg_position", "shipment_id, carriage"),
              (AIR_MAIN_CARRIAGE_LEGS, "position", "shipment_id"), (SEA_MAIN_CARRIAGE_LEGS, "position", "shipment_id"))
"""Each table of legs, its position column, and what its positions count within."""
RENUMBERED = "_legs_renumbered"


def legs_in_leg_no_order(con: duckdb.DuckDBPyConnection, tables: Collection[TableSpec],
                         run_id: str = "upgrade") -> list[str]:
    """Renumber the legs held out of ``leg_no`` order (module doc) in those of the legs' ``tables`` the warehouse
    holds (and their history), inside the caller's transaction; the steps."""
    steps = []
    renumbered: set[int] = set()
    held = {spec.qualified_name for spec in tables}
    for spec, position, within in LEG_TABLES:
        if spec.qualified_name not in held:
            continue
        order = f"row_number() OVER (PARTITION BY {within} ORDER BY leg_no NULLS LAST, {position})"
        table = qualified(spec)
        run(con, f"CREATE OR REPLACE TEMP TABLE {RENUMBERED} AS SELECT * REPLACE ({order} AS {position}) "
                 f"FROM {table} WHERE shipment_id IN (SELECT shipment_id FROM (SELECT shipment_id, {position}, "
                 f"{order} AS wanted FROM {table}) WHERE wanted <> {position})")
        ids = [row[0] for row in run(con, f"SELECT DISTINCT shipment_id FROM {RENUMBERED}")]
        if ids:
            run(con, f"DELETE FROM {table} WHERE shipment_id IN (SELECT shipment_id FROM {RENUMBERED})")
            run(con, f"INSERT INTO {table} BY NAME SELECT * FROM {RENUMBERED}")
            steps.append(f"{spec.qualified_name}: the legs of {len(ids)} shipments positioned in leg_no order")
            renumbered.update(ids)
        run(con, f"DROP TABLE {RENUMBERED}")
    history = qualified(LEG_VERSIONS)
    run(con, f"""
        CREATE OR REPLACE TEMP TABLE {RENUMBERED} AS
        WITH cur AS (SELECT shipment_id, mode, position, leg_no FROM {history}
                     WHERE valid_to IS NULL AND NOT deleted),
        ranked AS (SELECT shipment_id, mode, position,
                          row_number() OVER (PARTITION BY shipment_id, mode ORDER BY leg_no NULLS LAST, position)
                          AS wanted FROM cur),
        affected AS (SELECT DISTINCT shipment_id, mode FROM ranked WHERE wanted <> position),
        held AS (SELECT shipment_id, mode, count(*) AS n FROM ranked GROUP BY ALL),
        others AS (SELECT DISTINCT v.shipment_id, v.mode, v.position FROM {history} v
                   JOIN affected a ON a.shipment_id = v.shipment_id AND a.mode = v.mode
                   ANTI JOIN ranked r ON r.shipment_id = v.shipment_id AND r.mode = v.mode
                                     AND r.position = v.position),
        moves AS (SELECT r.shipment_id, r.mode, r.position, r.wanted FROM ranked r
                  JOIN affected a ON a.shipment_id = r.shipment_id AND a.mode = r.mode
                  UNION ALL
                  SELECT o.shipment_id, o.mode, o.position,
                         h.n + row_number() OVER (PARTITION BY o.shipment_id, o.mode ORDER BY o.position)
                  FROM others o JOIN held h ON h.shipment_id = o.shipment_id AND h.mode = o.mode)
        SELECT v.* REPLACE (m.wanted AS position) FROM {history} v
        JOIN moves m ON m.shipment_id = v.shipment_id AND m.mode = v.mode AND m.position = v.position""")
    ids = [row[0] for row in run(con, f"SELECT DISTINCT shipment_id FROM {RENUMBERED}")]
    if ids:
        run(con, f"DELETE FROM {history} WHERE EXISTS (SELECT 1 FROM {RENUMBERED} r WHERE "
                 f"r.shipment_id = {history}.shipment_id AND r.mode = {history}.mode)")
        run(con, f"INSERT INTO {history} BY NAME SELECT * FROM {RENUMBERED}")
        steps.append(f"{LEG_VERSIONS.qualified_name}: the versions of {len(ids)} shipments' legs positioned in "
                     "leg_no order")
        renumbered.update(ids)
    run(con, f"DROP TABLE {RENUMBERED}")
    if renumbered and meta.CHANGED_SHIPMENTS.qualified_name in held:  # their marts' rows name legs by position
        changed = qualified(meta.CHANGED_SHIPMENTS)
        listed = ", ".join(str(i) for i in sorted(renumbered))
        run(con, f"DELETE FROM {changed} WHERE shipment_id IN ({listed})")
        run(con, f"INSERT INTO {changed} (shipment_id, run_id, changed_at) "
                 f"SELECT unnest([{listed}]), ?, now()", [run_id])
    return steps
