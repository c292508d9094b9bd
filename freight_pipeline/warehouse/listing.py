"""A listing of the source's live shipments, held in a temporary DuckDB table, diffed with the warehouse.

Used by the reconcile pass: pages of (id, last-modified second) go into the table as they come, so
the listing costs DuckDB memory (which spills) instead of a Python dict of every id; the diff with
``raw_shipments`` and the retry queue is one query each.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import duckdb
import pyarrow as pa

from freight_pipeline.warehouse import meta
from freight_pipeline.warehouse.ddl import arrow_input, qualified, run
from freight_pipeline.warehouse.stamps import same_instant, wall_clock

HELD_KEY = (
    "coalesce(r.last_modified_key, "
    "replace(substr(json_extract_string(r.document, '$.last_modified_date_time'), 1, 19), 'T', ' '))"
)
"""A held shipment's last-modified stamp: stored, or (rows written before it was stored) the wall-clock
second read from its document."""
LISTED_KEY = "l.last_modified_key"


class LiveListing:
    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        self.table = f"live_listing_{uuid.uuid4().hex[:8]}"
        run(con, f"CREATE TEMP TABLE {self.table} (shipment_id BIGINT, last_modified_key VARCHAR)")

    def add(self, ids: Sequence[int], keys: Sequence[str | None]) -> None:
        if not ids:
            return
        page = pa.table({"shipment_id": pa.array(ids, pa.int64()), "last_modified_key": pa.array(keys, pa.string())})
        with arrow_input(self.con, page, "_listing") as view:
            run(self.con, f"INSERT INTO {self.table} SELECT * FROM {view}")

    def differences(self, floor: str | None, waiting_stream: str) -> tuple[list[int], list[int], int]:
        """(vanished ids, stale ids, missing ids before ``floor``); ``floor`` a wall-clock second or None.
        Stale: missing, or held with another last-modified instant (``warehouse.stamps``).
        Shipments whose document waits in the retry queue under ``waiting_stream`` are never stale:
        the retry queue fetches them."""
        raw, quarantine = qualified(meta.RAW_SHIPMENTS), qualified(meta.QUARANTINE)
        vanished = run(
            self.con,
            f"SELECT shipment_id FROM {raw} WHERE shipment_id NOT IN (SELECT shipment_id FROM {self.table}) "
            f"UNION SELECT shipment_id FROM {quarantine} WHERE shipment_id IS NOT NULL "
            f"AND shipment_id NOT IN (SELECT shipment_id FROM {self.table}) ORDER BY 1",
        )
        wanted = "TRUE" if floor is None else f"({LISTED_KEY} IS NOT NULL AND {wall_clock(LISTED_KEY)} >= $floor)"
        params: dict[str, str] = {"waiting": waiting_stream}
        if floor is not None:
            params["floor"] = floor
        stale = run(
            self.con,
            f"SELECT l.shipment_id FROM {self.table} l LEFT JOIN {raw} r USING (shipment_id) "
            f"WHERE (r.shipment_id IS NULL OR {LISTED_KEY} IS NULL OR {HELD_KEY} IS NULL "
            f"OR NOT {same_instant(HELD_KEY, LISTED_KEY)}) "
            f"AND {wanted} AND l.shipment_id NOT IN (SELECT shipment_id FROM {quarantine} "
            "WHERE stream = $waiting AND shipment_id IS NOT NULL) ORDER BY 1",
            params,
        )
        before = (
            0 if floor is None else run(
                self.con,
                f"SELECT count(*) FROM {self.table} l WHERE l.shipment_id NOT IN (SELECT shipment_id FROM {raw}) "
                f"AND NOT ({LISTED_KEY} IS NOT NULL AND {wall_clock(LISTED_KEY)} >= $floor)",
                {"floor": floor},
            )[0][0]
        )
        return [int(r[0]) for r in vanished], [int(r[0]) for r in stale], int(before)

    def drop(self) -> None:
        run(self.con, f"DROP TABLE IF EXISTS {self.table}")
