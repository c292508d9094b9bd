"""The rules of staging: paths, code lists, renames, accepted values and parents of each freight table."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from freight_pipeline.client.models import EVENT_CODES, EVENT_TYPES  # noqa: E402
from freight_pipeline.normalize.schema import Column  # noqa: E402

STAGING_DIR = ROOT / "dbt_models" / "models" / "staging"
SOURCE_NAME = "freight"


@dataclass(frozen=True)
class Source:
    """A dbt source: one warehouse schema whose tables the staging views read."""

    name: str  # the schema, and the source's name
    description: str
    file: str  # the YAML file under models/staging
    freshness_field: str | None = None
    """The column ``dbt source freshness`` reads (on the tables of FRESHNESS_TABLES); None: none checked."""

    def asset_key(self, table: str) -> list[str]:
        """The Dagster asset key of a table of the source (``meta.dagster.asset_key``)."""
        return [self.name, table]


FREIGHT_SOURCE = Source(
    SOURCE_NAME,
    "Normalized tables of the freight service, written by the sync "
    "(freight_pipeline/normalize/tables.py declares them). Every row carries _synced_at and _run_id.",
    "_sources.yml",
    freshness_field="_synced_at",
)
HISTORY_SOURCE = Source(
    "freight_history",
    "Versioned history, written by the sync in the same transaction as each batch "
    "(freight_pipeline/warehouse/history.py declares it): one row per version of a shipment header, event or "
    "main-carriage leg, valid from valid_from until valid_to (null while current); a deleted version marks a subject "
    "that vanished. Append-only, except closing valid_to.",
    "_freight_history_sources.yml",
)

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
        ("pre", "main", "post"),
        "carriage of an embedded leg (lower case), written by the normalizer",
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
    # rows of a shipment that exists: a relationships test on shipment_id to stg_shipments (False for
    # history versions, which outlive a shipment deleted at the service)
    shipment_parent: bool = True


BOOLEAN_RENAMES = {
    "shipment_closed": Rename("is_closed", note="source column shipment_closed"),
    "colli": Rename("is_colli", note="source column colli"),
    "additional_mark": Rename("has_additional_mark", note="source column additional_mark"),
    "shippers_own": Rename("is_shippers_own", note="source column shippers_own"),
    "deleted": Rename("is_deleted", note="source column deleted"),
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
EVENT_RENAMES = {
    "event": Rename("event_code", UPPER_CODE, "source column event, trimmed, upper case"),
    "type": Rename("event_type", UPPER_CODE, "source column type, trimmed, upper case"),
    **EVENT_LOCATION_RENAMES,
}
EVENT_KEY_CASE = (
    "unique as stored, but staging upper-cases event and type: case variants sent by the service (ACTUAL, Actual) "
    "collapse"
)
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
        renames=EVENT_RENAMES,
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
        source_controlled_key=EVENT_KEY_CASE,
    ),
    "code_conversions": Staging(
        renames={"direction": Rename(expression=UPPER_CODE, note="trimmed, upper case")},
        accepted={"direction": Accepted("freight_conversion_directions")},
    ),
    # freight_history: cleaned like the current tables they version; codes are tested there (the
    # current rows), not again on every version; versions outlive a shipment deleted at the service
    "shipment_versions": Staging(
        renames={
            "mode_of_transport": Rename(expression=UPPER_CODE, note="trimmed, upper case"),
            "direction": Rename(expression=UPPER_CODE, note="trimmed, upper case"),
        },
        shipment_parent=False,
    ),
    "event_versions": Staging(renames=EVENT_RENAMES, source_controlled_key=EVENT_KEY_CASE, shipment_parent=False),
    "leg_versions": Staging(shipment_parent=False),
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
