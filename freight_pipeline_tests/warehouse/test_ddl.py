"""``warehouse.ddl``: cursors for other threads in the catalog their connection uses."""

from __future__ import annotations

import threading

import duckdb

from freight_pipeline.warehouse.ddl import catalog_cursors


def test_cursors_for_other_threads_use_the_catalog_their_connection_uses() -> None:
    """A connection whose catalog is an attached one (a lake's): a bare cursor starts in the instance's default
    catalog, each of ``catalog_cursors``' in the connection's, from any thread."""
    with duckdb.connect() as con:
        con.execute("ATTACH ':memory:' AS lake")
        con.execute("USE lake")
        con.execute("CREATE TABLE held AS SELECT 42 AS answer")
        bare = con.cursor()
        assert bare.execute("SELECT current_database()").fetchone() == ("memory",)
        bare.close()
        new_cursor = catalog_cursors(con)
        seen: list[tuple[str, int]] = []

        def read() -> None:
            cursor = new_cursor()
            (catalog,) = cursor.execute("SELECT current_database()").fetchone() or ("",)
            (answer,) = cursor.execute("SELECT answer FROM held").fetchone() or (0,)
            seen.append((catalog, answer))
            cursor.close()

        threads = [threading.Thread(target=read) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert seen == [("lake", 42)] * 3
