"""The marts as dbt's manifest declares them, so that no test keeps a list of its own that can drift.

A mart is a model of the ``analytics`` schema (``models/marts/``); an incremental mart is one
materialized ``incremental`` (rebuilt from ``freight_meta.changed_shipments``). The manifest is
``dbt parse``'s, made or refreshed by :func:`freight_pipeline.defs.dbt.ensure_manifest`.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from freight_pipeline.defs.dbt import ensure_manifest

MART_SCHEMA = "analytics"


@cache
def _marts() -> tuple[dict[str, Any], ...]:
    nodes = json.loads(ensure_manifest().read_text())["nodes"].values()
    found = tuple(sorted((n for n in nodes if n["resource_type"] == "model" and n["config"]["schema"] == MART_SCHEMA),
                         key=lambda n: n["name"]))
    if not found:
        raise AssertionError(f"dbt's manifest declares no model in schema {MART_SCHEMA}")
    return found


def marts() -> tuple[str, ...]:
    """Every mart, by name, sorted."""
    return tuple(n["name"] for n in _marts())


def incremental_marts() -> tuple[str, ...]:
    """The marts materialized incrementally, by name, sorted."""
    return tuple(n["name"] for n in _marts() if n["config"]["materialized"] == "incremental")
