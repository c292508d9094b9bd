"""Carriage legs: embedded in the shipment document, and the air and sea main-carriage endpoints."""

from __future__ import annotations

from freight_pipeline.normalize.converters import BIGINT, INTEGER, VARCHAR
from freight_pipeline.normalize.groups import TIME_OR_DATETIME, DateTimeGroup, LocationGroup
from freight_pipeline.normalize.nodes import Key, Node
from freight_pipeline.normalize.plain_fields import Field, columns_of
from freight_pipeline.normalize.schema import Column, TableSpec
from freight_pipeline.normalize.specs.keys import SCHEMA, SHIPMENT_ID, _key

LEG_COMMON_FIELDS: tuple[Field, ...] = (
    Field("leg_no", BIGINT, "order of the leg as sent"),
    Field("mot", VARCHAR, "leg kind (mode of transport) discriminator: SEA, ANY, ..."),
)
AIR_LEG_FIELDS: tuple[Field, ...] = (
    Field("flight_no", VARCHAR, "flight number (air legs)"),
    Field("airline_awb_code", VARCHAR, "airline prefix of the air waybill"),
    Field("airline_name", VARCHAR, "airline name (air legs)"),
)
SEA_LEG_FIELDS: tuple[Field, ...] = (
    Field("voyage_no", VARCHAR, "voyage number (sea legs)"),
    Field("imo_code", VARCHAR, "IMO number of the vessel"),
    Field("vessel_name", VARCHAR, "vessel name (sea legs)"),
    Field("vessel_flag", VARCHAR, "flag of the vessel, as sent (sea legs)"),
    Field("call_sign", VARCHAR, "call sign of the vessel (sea legs)"),
)
HAULAGE_LEG_FIELDS: tuple[Field, ...] = (
    Field("haulage_type", VARCHAR, "haulage type, as sent (road/other legs of pre- and post-carriage)"),
    Field("haulage_reference", VARCHAR, "haulage reference, as sent (road/other legs of pre- and post-carriage)"),
)


Names = str | tuple[str, ...]
"""The key an object's value is read under, or the key and its aliases."""


class LegEnd:
    """Column groups of one end (origin or destination) of a leg (a LocationDateTime), reading its values under
    the keys given. A rename's alias goes where the end is declared (:data:`LEG_ENDS`, ``LegEnd("origin",
    location=("location", "place"))``): as data, a rebuild re-derives only the shipments whose raw names the key; an
    edit of this class's code is a change of the code, which re-derives every one."""

    def __init__(self, end: str, *, location: Names = "location", estimated: Names = "estimated_datetime",
                 estimated_until: Names = "estimated_datetime_until", actual: Names = "actual_datetime",
                 revised: Names = "revised_datetime") -> None:
        self.end = end
        self.location = LocationGroup(end, end, source=location)
        self.estimated = DateTimeGroup(f"{end}_estimated", f"{end} estimated", source=estimated, until=True)
        self.estimated_until = Key(estimated_until, TIME_OR_DATETIME)
        """A separate end of the estimated time range: a time of day's parts, or a whole DateTime."""
        self.actual = DateTimeGroup(f"{end}_actual", f"{end} actual", source=actual)
        self.revised = DateTimeGroup(f"{end}_revised", f"{end} revised", source=revised)
        self.key = Key(end, Node.of((), self.location.key, self.estimated.key, self.estimated_until,
                                    self.actual.key, self.revised.key))
        """The end's object (a LocationDateTime)."""

    def columns(self) -> list[Column]:
        return [
            *self.location.columns(),
            *self.estimated.columns(),
            *self.actual.columns(),
            *self.revised.columns(),
        ]


LEG_ENDS = (LegEnd("origin"), LegEnd("destination"))
LEG_END_COLUMNS = [c for end in LEG_ENDS for c in end.columns()]

LEG_ORDER = "1-based position in leg_no order (legs without a leg_no after them; ties in the array's order)"
LEG_POSITION = _key("position", INTEGER, LEG_ORDER)

CARRIAGE_LEGS = TableSpec(
    SCHEMA,
    "carriage_legs",
    columns_of(
        [
            SHIPMENT_ID,
            _key("carriage", VARCHAR, "pre, main or post (the shipment's pre_/main_/post_carriage)"),
            _key("leg_position", INTEGER, LEG_ORDER),
        ],
        LEG_COMMON_FIELDS,
        AIR_LEG_FIELDS,
        SEA_LEG_FIELDS,
        HAULAGE_LEG_FIELDS,
        LEG_END_COLUMNS,
    ),
    ("shipment_id", "carriage", "leg_position"),
    "Carriage legs embedded in the shipment document (pre-, main- and post-carriage).",
)
AIR_MAIN_CARRIAGE_LEGS = TableSpec(
    SCHEMA,
    "air_main_carriage_legs",
    columns_of([SHIPMENT_ID, LEG_POSITION], LEG_COMMON_FIELDS, AIR_LEG_FIELDS, LEG_END_COLUMNS),
    ("shipment_id", "position"),
    "Air main-carriage legs from GET /service/shipment/{id}/airmaincarriage.",
)
SEA_MAIN_CARRIAGE_LEGS = TableSpec(
    SCHEMA,
    "sea_main_carriage_legs",
    columns_of([SHIPMENT_ID, LEG_POSITION], LEG_COMMON_FIELDS, SEA_LEG_FIELDS, LEG_END_COLUMNS),
    ("shipment_id", "position"),
    "Sea main-carriage legs from GET /service/shipment/{id}/seamaincarriage.",
)

# --- legs as the normalizers read them (``normalize.nodes``) ------------------------------------------

LEG_END_KEYS = tuple(end.key for end in LEG_ENDS)
EMBEDDED_LEG_NODE = Node.of((*LEG_COMMON_FIELDS, *AIR_LEG_FIELDS, *SEA_LEG_FIELDS, *HAULAGE_LEG_FIELDS), *LEG_END_KEYS)
AIR_LEG_NODE = Node.of((*LEG_COMMON_FIELDS, *AIR_LEG_FIELDS), *LEG_END_KEYS)
SEA_LEG_NODE = Node.of((*LEG_COMMON_FIELDS, *SEA_LEG_FIELDS), *LEG_END_KEYS)
CARRIAGE_LEGS_KEY = Key("carriage_legs", EMBEDDED_LEG_NODE, array=True)
CARRIAGES: tuple[tuple[str, Key], ...] = tuple(
    (carriage, Key(f"{carriage}_carriage", Node.of((), CARRIAGE_LEGS_KEY))) for carriage in ("pre", "main", "post")
)
"""(carriage, its key): the shipment's pre_carriage, main_carriage and post_carriage (Transport objects)."""
