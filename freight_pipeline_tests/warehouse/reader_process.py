"""A reader in another process: queries the published database in a loop until a stop file appears.

``python reader_process.py DB STOP hold|reopen``: ``hold`` keeps one read-only connection open for
the whole run (an analyst's session), ``reopen`` opens a new one for every query (a BI refresh).
Prints one JSON line per query: ``{"parents": n, "lines": m}`` or ``{"error": "..."}``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import duckdb

QUERY = "SELECT (SELECT count(*) FROM freight.parents), (SELECT count(*) FROM freight.lines)"


def main() -> None:
    db, stop, mode = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    con = duckdb.connect(db, read_only=True) if mode == "hold" else None
    while not stop.exists():
        try:
            if con is None:
                with duckdb.connect(db, read_only=True) as fresh:
                    parents, lines = fresh.execute(QUERY).fetchall()[0]
            else:
                parents, lines = con.execute(QUERY).fetchall()[0]
            print(json.dumps({"parents": parents, "lines": lines}), flush=True)
        except Exception as exc:  # report, keep going: the test asserts there were none
            print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
        time.sleep(0.01)


if __name__ == "__main__":
    main()
