"""Generate the dbt sources and staging models from the ``freight`` table specs.

The table specs in ``freight_pipeline/normalize/tables.py`` are the one declaration of the
``freight`` schema (column names, types, descriptions). This script writes, from them:

* ``models/staging/_sources.yml``: the ``freight`` source with every table and column documented,
  the Dagster asset key of each table (``freight/<table>``) and ``_synced_at`` freshness;
* ``models/staging/stg_<table>.sql``: a view per table, CTEs ``source -> renamed -> final``,
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
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from freight_pipeline.client.models import EVENT_CODES, EVENT_TYPES  # noqa: E402
from freight_pipeline.normalize.schema import Column, TableSpec  # noqa: E402
from freight_pipeline.normalize.tables import FREIGHT_TABLES, LEG_ENDS, TABLE_STREAM  # noqa: E402

STAGING_DIR = ROOT / "dbt_models" / "models" / "staging"
SOURCE_NAME = "freight"

MACROS_DIR = ROOT / "dbt_models" / "macros"

# The modes of the spec (shipment.mode_of_transport); the client declares no list of them.
MODES_OF_TRANSPORT = ("SEA", "AIR", "RD", "RL")



class CodeList(NamedTuple):
    values: tuple[str, ...]
    description: str
    sent_by_service: bool
    """True: the service sends these values (an accepted_values test on them warns); False: the
    pipeline produces them (the test fails the build)."""

    @property
    def severity(self) -> str:
        return "warn" if self.sent_by_service else "error"


# Code lists of accepted_values tests, each written once to macros/code_lists.sql as a macro that
# returns the list; the staging and mart YAML files call the macro (``values: "{{ <macro>() }}"``).
# Event codes and types come from the client's declaration (freight_pipeline/client/models/keys.py).
CODE_LISTS: dict[str, CodeList] = {
    "freight_event_codes": CodeList(
        EVENT_CODES, "the 25 event codes of the spec (client.models.EVENT_CODES)", sent_by_service=True
    ),
    "freight_event_types": CodeList(EVENT_TYPES, "event types (client.models.EVENT_TYPES)", sent_by_service=True),
    "freight_modes_of_transport": CodeList(MODES_OF_TRANSPORT, "shipment modes of transport", sent_by_service=True),
    "freight_shipment_directions": CodeList(("I", "E"), "shipment directions: import, export", sent_by_service=True),
    "freight_conversion_directions": CodeList(
        ("I", "O"), "code conversion directions: inbound, outbound", sent_by_service=True
    ),
    "freight_carriages": CodeList(
        ("pre", "main", "post"), "carriage of an embedded leg (lower case), written by the normalizer",
        sent_by_service=False,
    ),
}

# Tables whose freshness is checked (``dbt source freshness``, Dagster freshness): the head table of
# each always-populated stream. Child tables are written only with their shipment and may be empty
# for good (no AES proposal in any shipment), so their newest ``_synced_at`` says nothing.
FRESHNESS_TABLES = frozenset({"shipments", "shipment_events", "code_conversions"})

UPPER_CODE = "upper(trim({col}))"
LOWER_CODE = "lower(trim({col}))"


@dataclass(frozen=True)
class Rename:
    """A staging column that differs from its source column (new name and/or an expression)."""

    name: str | None = None  # None: keep the source name
    expression: str | None = None  # "{col}" is the source column
    note: str = ""


@dataclass(frozen=True)
class Accepted:
    """An accepted_values test; its severity is the code list's (``CodeList.severity``)."""

    code_list: str  # a key of CODE_LISTS
    note: str = ""  # written as a comment above the test

    @property
    def severity(self) -> str:
        return CODE_LISTS[self.code_list].severity


@dataclass
class Staging:
    """How one freight table is staged."""

    renames: dict[str, Rename] = field(default_factory=dict)
    accepted: dict[str, Accepted] = field(default_factory=dict)
    # parent staging model and (child columns, parent columns) of a composite foreign key
    parents: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = field(default_factory=list)
    # why the key's uniqueness is the service's, not the pipeline's (the test then warns); empty:
    # the key is the table's primary key as stored, unique by construction (error)
    source_controlled_key: str = ""


BOOLEAN_RENAMES = {
    "shipment_closed": Rename("is_closed", note="source column shipment_closed"),
    "colli": Rename("is_colli", note="source column colli"),
    "additional_mark": Rename("has_additional_mark", note="source column additional_mark"),
    "shippers_own": Rename("is_shippers_own", note="source column shippers_own"),
}
EVENT_LOCATION_RENAMES = {
    col: Rename(f"location_{col}", note=f"source column {col}")
    for col in (
        "service_code",
        "unloc",
        "iata",
        "foreign_code",
        "postal_code",
        "un_country",
        "latitude",
        "longitude",
    )
}
GOOD_PARENT = ("stg_shipment_goods", ("shipment_id", "good_path"), ("shipment_id", "good_path"))

STAGING: dict[str, Staging] = {
    "shipments": Staging(
        renames={
            "mode_of_transport": Rename(expression=UPPER_CODE, note="trimmed, upper case"),
            "direction": Rename(expression=UPPER_CODE, note="trimmed, upper case"),
        },
        accepted={
            "mode_of_transport": Accepted("freight_modes_of_transport"),
            "direction": Accepted("freight_shipment_directions"),
        },
    ),
    "shipment_goods": Staging(
        parents=[
            (
                "stg_shipment_goods",
                ("shipment_id", "parent_good_path"),
                ("shipment_id", "good_path"),
            )
        ]
    ),
    "good_hs_codes": Staging(parents=[GOOD_PARENT]),
    "good_measurements": Staging(parents=[GOOD_PARENT]),
    "good_customs": Staging(parents=[GOOD_PARENT]),
    "good_mrns": Staging(parents=[GOOD_PARENT]),
    "good_dangerous_goods": Staging(parents=[GOOD_PARENT]),
    "good_marks": Staging(parents=[GOOD_PARENT]),
    "good_descriptions": Staging(parents=[GOOD_PARENT]),
    "address_references": Staging(
        parents=[("stg_shipment_addresses", ("shipment_id", "address_position"), ("shipment_id", "position"))]
    ),
    "container_addresses": Staging(
        parents=[("stg_shipment_containers", ("shipment_id", "container_position"), ("shipment_id", "position"))]
    ),
    "carriage_legs": Staging(
        renames={
            "carriage": Rename(expression=LOWER_CODE, note="trimmed, lower case"),
            "mot": Rename(expression=UPPER_CODE, note="trimmed, upper case"),
        },
        accepted={"carriage": Accepted("freight_carriages")},
    ),
    "air_main_carriage_legs": Staging(renames={"mot": Rename(expression=UPPER_CODE, note="trimmed, upper case")}),
    "sea_main_carriage_legs": Staging(renames={"mot": Rename(expression=UPPER_CODE, note="trimmed, upper case")}),
    "shipment_events": Staging(
        renames={
            "event": Rename("event_code", UPPER_CODE, "source column event, trimmed, upper case"),
            "type": Rename("event_type", UPPER_CODE, "source column type, trimmed, upper case"),
            **EVENT_LOCATION_RENAMES,
        },
        accepted={
            "event_code": Accepted(
                "freight_event_codes",
                note="the service may add codes; the normalizer keeps unknown ones as sent",
            ),
            "event_type": Accepted(
                "freight_event_types",
                note="the service may send another type; the milestones count it in unknown_type_events",
            ),
        },
        source_controlled_key="unique as stored, but staging upper-cases event and type: "
        "case variants sent by the service (ACTUAL, Actual) collapse",
    ),
    "code_conversions": Staging(
        renames={"direction": Rename(expression=UPPER_CODE, note="trimmed, upper case")},
        accepted={"direction": Accepted("freight_conversion_directions")},
    ),
}


def staged_name(column: Column, staging: Staging) -> str:
    rename = staging.renames.get(column.name) or BOOLEAN_RENAMES.get(column.name)
    return rename.name if rename and rename.name else column.name


def select_expression(column: Column, staging: Staging) -> str:
    rename = staging.renames.get(column.name) or BOOLEAN_RENAMES.get(column.name)
    target = staged_name(column, staging)
    if rename and rename.expression:
        return f"{rename.expression.format(col=column.name)} as {target}"
    if target != column.name:
        return f"{column.name} as {target}"
    return column.name


def column_note(column: Column, staging: Staging) -> str:
    rename = staging.renames.get(column.name) or BOOLEAN_RENAMES.get(column.name)
    return f" ({rename.note})" if rename and rename.note else ""


def quote(text: str) -> str:
    """A YAML double-quoted scalar."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def yaml_list(values: Iterable[str]) -> str:
    return "[" + ", ".join(quote(v) for v in values) + "]"


# --- SQL -----------------------------------------------------------------------------------------


def leg_end_suffixes() -> list[str]:
    """The columns of one end of a carriage leg, without the ``origin_`` / ``destination_`` prefix."""
    end = LEG_ENDS[0]
    return [c.name.removeprefix(f"{end.end}_") for c in end.columns()]


def select_expressions(cols: list[Column], staging: Staging) -> list[str]:
    """The select list of ``cols``; each run of one leg end's columns, staged as they are, is the
    ``leg_end_columns`` macro (the three leg tables share them: declared once, in the macro)."""
    names = [c.name for c in cols]
    out: list[str] = []
    index = 0
    while index < len(cols):
        for end in LEG_ENDS:
            run = [f"{end.end}_{suffix}" for suffix in leg_end_suffixes()]
            window = cols[index : index + len(run)]
            if names[index : index + len(run)] == run and all(select_expression(c, staging) == c.name for c in window):
                out.append(f"{{{{ leg_end_columns('{end.end}') }}}}")
                index += len(run)
                break
        else:
            out.append(select_expression(cols[index], staging))
            index += 1
    return out


def leg_columns_sql() -> str:
    """``macros/leg_columns.sql``: the columns of one leg end (a LocationDateTime), for the staging views."""
    columns = ",\n".join(f"    {{{{ end }}}}_{suffix}" for suffix in leg_end_suffixes())
    return "\n".join([
        "{# Generated by dbt_models/scripts/generate_staging.py from the table specs (normalize/tables.py,",
        "   LegEnd); do not edit by hand. The columns of one end (origin or destination) of a carriage leg,",
        "   staged as they are: the select list shared by stg_carriage_legs, stg_air_main_carriage_legs and",
        "   stg_sea_main_carriage_legs. #}",
        "{% macro leg_end_columns(end) -%}",
        columns,
        "{%- endmacro %}",
        "",
    ])


def staging_sql(spec: TableSpec, staging: Staging) -> str:
    key = set(spec.primary_key)
    keys = [c for c in spec.all_columns if c.name in key]
    audit = [c for c in spec.all_columns if c.name.startswith("_")]
    body = [c for c in spec.all_columns if c not in keys and c not in audit]
    lines = [
        f"-- Staging view of {SOURCE_NAME}.{spec.name}: one row per ({', '.join(spec.primary_key)}).",
        "-- Generated by dbt_models/scripts/generate_staging.py from the table spec; do not edit by hand.",
        "",
        "with",
        "",
        "source as (",
        "",
        f"    select * from {{{{ source('{SOURCE_NAME}', '{spec.name}') }}}}",
        "",
        "),",
        "",
        "renamed as (",
        "",
        "    select",
    ]
    groups = [("keys", keys), ("attributes", body), ("sync audit", audit)]
    exprs: list[str] = []
    for title, cols in groups:
        if not cols:
            continue
        exprs.append(f"        ---------- {title}")
        exprs.extend(f"        {expression}," for expression in select_expressions(cols, staging))
    # drop the trailing comma of the last expression
    last = max(i for i, e in enumerate(exprs) if not e.lstrip().startswith("--"))
    exprs[last] = exprs[last].rstrip(",")
    lines += exprs
    lines += [
        "",
        "    from source",
        "",
        "),",
        "",
        "final as (",
        "",
        "    select * from renamed",
        "",
        ")",
        "",
        "select * from final",
        "",
    ]
    return "\n".join(lines)


# --- YAML ----------------------------------------------------------------------------------------


def staging_yml(spec: TableSpec, staging: Staging) -> str:
    model = f"stg_{spec.name}"
    single_key = spec.primary_key[0] if len(spec.primary_key) == 1 else None
    staged_keys = [staged_name(spec.column_index[k], staging) for k in spec.primary_key]
    out = [
        "# Generated by dbt_models/scripts/generate_staging.py from the table spec; do not edit by hand.",
        "version: 2",
        "",
        "models:",
        f"  - name: {model}",
        f"    description: {quote(spec.description + ' Staging view of freight.' + spec.name + '.')}",
    ]
    model_tests: list[str] = []
    if single_key is None:
        model_tests += [
            "      - unique_combination_of_columns:",
            "          arguments:",
            f"            combination_of_columns: {yaml_list(staged_keys)}",
        ]
        if staging.source_controlled_key:
            model_tests += [
                f"          # warn: {staging.source_controlled_key}",
                "          config:",
                "            severity: warn",
            ]
    for parent, child_cols, parent_cols in staging.parents:
        model_tests += [
            "      - composite_relationships:",
            "          arguments:",
            f"            to: ref('{parent}')",
            f"            from_columns: {yaml_list(child_cols)}",
            f"            to_columns: {yaml_list(parent_cols)}",
        ]
    if model_tests:
        out += ["    data_tests:", *model_tests]
    out.append("    columns:")
    for column in spec.all_columns:
        name = staged_name(column, staging)
        description = (column.description or column.name) + column_note(column, staging)
        out += [
            f"      - name: {name}",
            f"        description: {quote(description)}",
            f"        data_type: {column.type.lower()}",
        ]
        tests: list[str] = []
        if name in staged_keys:
            tests.append("          - not_null")
        if name == single_key:
            tests.append("          - unique")
        if column.name == "shipment_id" and spec.name != "shipments":
            tests += [
                "          - relationships:",
                "              arguments:",
                "                to: ref('stg_shipments')",
                "                field: shipment_id",
            ]
            if TABLE_STREAM.get(spec.name) != "shipments":
                # written by another stream than the shipment itself (events, legs, memos): an
                # orphan is worth a warning, not a reason to stop building the marts
                tests += [
                    "              # warn: fetched apart from its shipment, so the service decides whether it has one",
                    "              config:",
                    "                severity: warn",
                ]
        accepted = staging.accepted.get(name)
        if accepted:
            tests += [
                "          - accepted_values:",
                "              arguments:",
                f"                values: {quote('{{ ' + accepted.code_list + '() }}')}",
            ]
            if accepted.severity != "error":
                why = "values sent by the service" + (f"; {accepted.note}" if accepted.note else "")
                tests += [
                    f"              # {accepted.severity}: {why}",
                    "              config:",
                    f"                severity: {accepted.severity}",
                ]
        if tests:
            out += ["        data_tests:", *tests]
    return "\n".join(out) + "\n"


def sources_yml(specs: Iterable[TableSpec]) -> str:
    out = [
        "# Generated by dbt_models/scripts/generate_staging.py from the table specs; do not edit by hand.",
        "version: 2",
        "",
        "sources:",
        f"  - name: {SOURCE_NAME}",
        '    description: "Normalized tables of the freight service, written by the sync '
        '(freight_pipeline/normalize/tables.py declares them). Every row carries _synced_at and _run_id."',
        f"    schema: {SOURCE_NAME}",
        "    config:",
        "      loaded_at_field: _synced_at",
        "      freshness:",
        "        warn_after: {count: 1, period: day}",
        "        error_after: {count: 3, period: day}",
        "    tables:",
    ]
    for spec in specs:
        out += [
            f"      - name: {spec.name}",
            f"        description: {quote(spec.description)}",
            "        config:",
            "          meta:",
            "            dagster:",
            f'              asset_key: ["{SOURCE_NAME}", "{spec.name}"]',
            *([] if spec.name in FRESHNESS_TABLES else ["          freshness: null"]),
            "        columns:",
        ]
        for column in spec.all_columns:
            out += [
                f"          - name: {column.name}",
                f"            description: {quote(column.description or column.name)}",
                f"            data_type: {column.type.lower()}",
            ]
    return "\n".join(out) + "\n"


def code_lists_sql(code_lists: dict[str, CodeList]) -> str:
    """``macros/code_lists.sql``: one macro per code list, returning the list (for accepted_values)."""
    out = [
        "{#",
        "    Code lists of the accepted_values tests, defined once: generated by",
        "    dbt_models/scripts/generate_staging.py (event codes and types from",
        "    freight_pipeline/client/models/keys.py); do not edit by hand. In a YAML test:",
        '    values: "{{ freight_event_codes() }}"',
        "    A test on a list sent by the service has severity warn, on one the pipeline produces error.",
        "    In SQL: {{ is_in_code_list('event_type', freight_event_types()) }} (macros/is_in_code_list.sql).",
        "#}",
    ]
    for name, (values, description, sent_by_service) in code_lists.items():
        items = ", ".join(quote(v) for v in values)
        owner = "sent by the service: tests warn" if sent_by_service else "made by the pipeline: tests fail"
        out += [
            "",
            f"{{#  {description}; {owner} #}}",
            f"{{% macro {name}() -%}}",
            f"    {{{{ return([{items}]) }}}}",
            "{%- endmacro %}",
        ]
    return "\n".join(out) + "\n"


def render() -> dict[Path, str]:
    """Every generated file and its content."""
    files: dict[Path, str] = {
        MACROS_DIR / "code_lists.sql": code_lists_sql(CODE_LISTS),
        MACROS_DIR / "leg_columns.sql": leg_columns_sql(),
        STAGING_DIR / "_sources.yml": sources_yml(FREIGHT_TABLES),
    }
    for spec in FREIGHT_TABLES:
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
