"""A reader in a process of its own: ``python -m bench.lake_reader EXPECTED_DIR`` (from the checkout).

Opens the lake named by ``FREIGHT_LAKE_*`` read-only (``--published``: as of its published snapshot),
compares every ``freight`` table with the expected rows in ``EXPECTED_DIR/<table>.parquet`` (``EXCEPT
ALL`` both ways: missing, extra and duplicate rows all count) and prints one JSON object:
``{"differences": {table: [missing, extra]}, "rows": {table: n}, "snapshot": id}``. ``--held-only``
compares only the shipments the lake holds, in the tables the shipments stream writes (after a killed
backfill writer: nothing half written). ``--and-published``: the latest state, then in the same process
the published snapshot, whose object is the first one's ``"published"``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

import duckdb

from freight_pipeline.lake.backend import connect_published, current_snapshot
from freight_pipeline.lake.connect import connect_lake
from freight_pipeline.lake.settings import LakeSettings
from freight_pipeline.normalize.tables import FREIGHT_TABLES
from freight_pipeline.sync.parts import PART_TABLES


def compare(con: duckdb.DuckDBPyConnection, expected_dir: Path, held_only: bool) -> dict[str, Any]:
    """What the reader prints for the lake ``con`` reads."""
    differences, rows = {}, {}
    for spec in FREIGHT_TABLES:
        cols = ", ".join(f'"{c.name}"' for c in spec.columns)
        expected = f"read_parquet('{expected_dir / (spec.name + '.parquet')}')"
        where = ""
        if held_only and spec.name not in PART_TABLES:
            continue  # code conversions and documents: their streams run after the backfill
        if held_only:
            where = " WHERE shipment_id IN (SELECT shipment_id FROM freight.shipments)"
        actual = f"SELECT {cols} FROM {spec.schema}.{spec.name}{where}"
        wanted = f"SELECT {cols} FROM {expected}{where}"
        missing = con.execute(f"SELECT count(*) FROM ({wanted} EXCEPT ALL {actual})").fetchone()[0]
        extra = con.execute(f"SELECT count(*) FROM ({actual} EXCEPT ALL {wanted})").fetchone()[0]
        rows[spec.name] = con.execute(f"SELECT count(*) FROM {spec.schema}.{spec.name}").fetchone()[0]
        if missing or extra:
            differences[spec.name] = [missing, extra]
    return {"differences": differences, "rows": rows, "snapshot": current_snapshot(con)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("expected", type=Path)
    parser.add_argument("--published", action="store_true")
    parser.add_argument("--and-published", action="store_true")
    parser.add_argument("--held-only", action="store_true")
    args = parser.parse_args()
    lake = LakeSettings.configured()
    assert lake is not None, "FREIGHT_LAKE_* not set"
    with tempfile.TemporaryDirectory(prefix="lake-reader-") as folder:
        scratch = Path(folder)
        with (connect_published(lake, scratch) if args.published
              else connect_lake(lake, scratch, "512MB", read_only=True)) as con:
            found = compare(con, args.expected, args.held_only)
        if args.and_published:
            with connect_published(lake, scratch) as con:
                found["published"] = compare(con, args.expected, args.held_only)
    print(json.dumps(found))


if __name__ == "__main__":
    main()
