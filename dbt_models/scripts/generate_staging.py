"""Generate the dbt sources and staging models from the ``freight`` and ``freight_history`` table specs.

The table specs in ``freight_pipeline/normalize/tables.py`` are the one declaration of the
``freight`` schema (column names, types, descriptions), those in
``freight_pipeline/warehouse/history.py`` of the ``freight_history`` schema. This script writes, from them:

* ``models/staging/_sources.yml``: the ``freight`` source with every table and column documented,
  the Dagster asset key of each table (``freight/<table>``) and ``_synced_at`` freshness;
* ``models/staging/_freight_history_sources.yml``: the ``freight_history`` source likewise (asset key
  ``freight_history/<table>``, no freshness: the history grows only when something changes);
* ``models/staging/stg_<table>.sql``: a view per table of both, CTEs ``source -> renamed -> final``,
  light cleaning (code columns trimmed and upper-cased, a few boolean and key renames);
* ``models/staging/stg_<table>.yml``: docs of every column and the data tests of the table
  (keys, relationships to parents, accepted values);
* ``macros/leg_columns.sql``: the columns of one end of a carriage leg, which the three leg staging
  views select twice each (origin, destination);
* ``macros/code_lists.sql``: the code lists of the accepted_values tests (event codes and types
  imported from ``freight_pipeline/client/models/keys.py``, modes, directions, carriages), one macro
  each, called by the staging YAML above and by the marts' YAML (``values: "{{ freight_event_codes() }}"``).

Test severity follows who controls the values (see dbt_models/README.md, "Test severity"): a test
on values the service sends (codes, types, modes, directions; orphans of separately fetched
streams) is ``warn``, so a new value never stops the build and the marts carry it; a test on what
the pipeline guarantees (keys, its own carriage values, relationships within one stream) is
``error``.

Run it after a table spec changes, from the repository root::

    .venv/bin/python dbt_models/scripts/generate_staging.py

The generated files are committed; ``freight_pipeline_tests/dbt`` checks that they still match the
specs, so drift fails the test suite instead of a production dbt run.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __name__ == "__main__":
    # run as a script: its sibling modules are imported, write no __pycache__ next to them (the test
    # imports them the same way)
    sys.dont_write_bytecode = True

# the rules, SQL and YAML live in sibling modules (dbt_models/scripts is on sys.path: the folder of
# the script, or put there by freight_pipeline_tests/dbt); their names stay reachable from here
from staging_rules import (
    BOOLEAN_RENAMES,
    CODE_LISTS,
    EVENT_CODES,
    EVENT_LOCATION_RENAMES,
    EVENT_TYPES,
    FREIGHT_SOURCE,
    FRESHNESS_TABLES,
    GOOD_PARENT,
    HISTORY_SOURCE,
    LOWER_CODE,
    MACROS_DIR,
    MODES_OF_TRANSPORT,
    ROOT,
    SOURCE_NAME,
    STAGING,
    STAGING_DIR,
    UPPER_CODE,
    Accepted,
    CodeList,
    Rename,
    Staging,
    column_note,
    quote,
    select_expression,
    staged_name,
    yaml_list,
)
from staging_sql import (
    code_lists_sql,
    leg_columns_sql,
    leg_end_suffixes,
    select_expressions,
    staging_sql,
)
from staging_yml import sources_yml, staging_yml

from freight_pipeline.normalize.schema import Column, TableSpec
from freight_pipeline.normalize.specs.legs import LEG_ENDS
from freight_pipeline.normalize.tables import FREIGHT_TABLES
from freight_pipeline.warehouse.history import HISTORY_TABLES

__all__ = [
    "BOOLEAN_RENAMES",
    "CODE_LISTS",
    "EVENT_CODES",
    "EVENT_LOCATION_RENAMES",
    "EVENT_TYPES",
    "FREIGHT_SOURCE",
    "FREIGHT_TABLES",
    "FRESHNESS_TABLES",
    "GOOD_PARENT",
    "HISTORY_SOURCE",
    "HISTORY_TABLES",
    "LEG_ENDS",
    "LOWER_CODE",
    "MACROS_DIR",
    "MODES_OF_TRANSPORT",
    "ROOT",
    "SOURCE_NAME",
    "STAGING",
    "STAGING_DIR",
    "UPPER_CODE",
    "Accepted",
    "CodeList",
    "Column",
    "Rename",
    "Staging",
    "TableSpec",
    "code_lists_sql",
    "column_note",
    "leg_columns_sql",
    "leg_end_suffixes",
    "main",
    "quote",
    "render",
    "select_expression",
    "select_expressions",
    "sources_yml",
    "staged_name",
    "staging_sql",
    "staging_yml",
    "yaml_list",
]


def render() -> dict[Path, str]:
    """Every generated file and its content."""
    files: dict[Path, str] = {
        MACROS_DIR / "code_lists.sql": code_lists_sql(CODE_LISTS),
        MACROS_DIR / "leg_columns.sql": leg_columns_sql(),
        STAGING_DIR / FREIGHT_SOURCE.file: sources_yml(FREIGHT_SOURCE, FREIGHT_TABLES),
        STAGING_DIR / HISTORY_SOURCE.file: sources_yml(HISTORY_SOURCE, HISTORY_TABLES),
    }
    for spec in (*FREIGHT_TABLES, *HISTORY_TABLES):
        staging = STAGING.get(spec.name, Staging())
        files[STAGING_DIR / f"stg_{spec.name}.sql"] = staging_sql(spec, staging)
        files[STAGING_DIR / f"stg_{spec.name}.yml"] = staging_yml(spec, staging)
    return files


def main() -> None:
    for path, text in render().items():
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
