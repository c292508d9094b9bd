"""dbt-duckdb plugin of the ``lake`` target: every dbt connection loads the packaged extensions,
creates the S3 secret and attaches the lake (``FREIGHT_LAKE_*``) before dbt runs a statement.

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


class Plugin(BasePlugin):
    def initialize(self, plugin_config: dict[str, Any]) -> None:
        lake = LakeSettings.configured()
        if lake is None:
            raise LakeConfigError("the dbt target 'lake' needs FREIGHT_LAKE_CATALOG_URI and FREIGHT_LAKE_DATA_URI")
        self.lake = lake

    def configure_connection(self, conn: Any) -> None:
        prepare(conn, self.lake)
