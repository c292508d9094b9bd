"""dbt-duckdb plugin of the ``lake`` target: every dbt connection loads the packaged extensions,
creates the S3 secret and attaches the lake (``FREIGHT_LAKE_*``) before dbt runs a statement, on
:data:`DUCKDB_THREADS` of DuckDB's threads.

Named in ``dbt_models/profiles.yml``; it replaces dbt-duckdb's ``extensions`` and ``attach`` entries,
which would download the extensions and could not read the catalog URI's forms from one variable.

It runs in the dbt process the pipeline starts, not in the pipeline: there the environment the
pipeline passed on is the configuration, so this plugin reads ``FREIGHT_LAKE_*`` itself (the only
place below the Dagster definitions that does, as the top of its own process).
"""

from __future__ import annotations

from typing import Any

from dbt.adapters.duckdb.plugins import BasePlugin

from freight_pipeline.lake.connect import prepare
from freight_pipeline.lake.settings import LakeConfigError, LakeSettings

DUCKDB_THREADS = 1
"""DuckDB threads of each dbt connection to the lake (dbt's own threads are the profile's: one). DuckLake 1.5.5 reads
its catalog at every statement, and a build is hundreds of small statements: a first build of 60 shipments took
the dbt process 12.3-13.0 s of CPU on one thread against 17.0-17.7 s on two, 9.6-10.4 s of wall against 12.2-12.7 s;
of 2,000, 18.6 s against 25.4 s and 11.6 s of wall against 14.5 s (docs/lake.md). Set in the profile's
``settings`` instead, it changed nothing measurable; set here, on each connection, it does."""


class Plugin(BasePlugin):
    def initialize(self, plugin_config: dict[str, Any]) -> None:
        lake = LakeSettings.configured()
        if lake is None:
            raise LakeConfigError("the dbt target 'lake' needs FREIGHT_LAKE_CATALOG_URI and FREIGHT_LAKE_DATA_URI")
        self.lake = lake

    def configure_connection(self, conn: Any) -> None:
        prepare(conn, self.lake)
        conn.execute(f"SET threads = {DUCKDB_THREADS}")
