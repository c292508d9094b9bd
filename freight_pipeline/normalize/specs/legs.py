"""Carriage legs: embedded in the shipment document, and the air and sea main-carriage endpoints."""

from __future__ import annotations

from freight_pipeline.normalize.converters import BIGINT, INTEGER, VARCHAR
from freight_pipeline.normalize.groups import DateTimeGroup, LocationGroup
from freight_pipeline.normalize.plain_fields import Field, columns_of
from freight_pipeline.normalize.schema import Column, TableSpec
from freight_pipeline.normalize.specs.keys import POSITION, SCHEMA, SHIPMENT_ID, _key

LEG_COMMON_FIELDS: tuple[Field, ...] = (
    Field("leg_no", BIGINT, "order of the leg as sent"),
    Field("mot", VARCHAR, "leg kind (mode of transport) discriminator: SEA, ANY, ..."),
)
AIR_LEG_FIELDS: tuple[Field, ...] = (
    Field("flight_no", VARCHAR),
    Field("airline_awb_code", VARCHAR, "airline prefix of the air waybill"),
    Field("airline_name", VARCHAR),
)
SEA_LEG_FIELDS: tuple[Field, ...] = (
    Field("voyage_no", VARCHAR),
    Field("imo_code", VARCHAR, "IMO number of the vessel"),
    Field("vessel_name", VARCHAR),
    Field("vessel_flag", VARCHAR),
    Field("call_sign", VARCHAR),
)
HAULAGE_LEG_FIELDS: tuple[Field, ...] = (
    Field("haulage_type", VARCHAR, "road/other legs of pre- and post-carriage"),
    Field("haulage_reference", VARCHAR),
)


class LegEnd:
    """Column groups of one end (origin or destination) of a leg (a LocationDateTime)."""

    def __init__(self, end: str) -> None:
        self.end = end
        self.location = LocationGroup(end, end)
        self.estimated = DateTimeGroup(f"{end}_estimated", f"{end} estimated", until=True)
        self.actual = DateTimeGroup(f"{end}_actual", f"{end} actual")
        self.revised = DateTimeGroup(f"{end}_revised", f"{end} revised")

    def columns(self) -> list[Column]:
        return [
            *self.location.columns(),
            *self.estimated.columns(),
            *self.actual.columns(),
            *self.revised.columns(),
        ]


LEG_ENDS = (LegEnd("origin"), LegEnd("destination"))
LEG_END_COLUMNS = [c for end in LEG_ENDS for c in end.columns()]

CARRIAGE_LEGS = TableSpec(
    SCHEMA,
    "carriage_legs",
    columns_of(
        [
            SHIPMENT_ID,
            _key("carriage", VARCHAR, "pre, main or post (the shipment's pre_/main_/post_carriage)"),
            _key("leg_position", INTEGER, "1-based position in carriage_legs"),
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
    columns_of([SHIPMENT_ID, POSITION], LEG_COMMON_FIELDS, AIR_LEG_FIELDS, LEG_END_COLUMNS),
    ("shipment_id", "position"),
    "Air main-carriage legs from GET /service/shipment/{id}/airmaincarriage.",
)
SEA_MAIN_CARRIAGE_LEGS = TableSpec(
    SCHEMA,
    "sea_main_carriage_legs",
    columns_of([SHIPMENT_ID, POSITION], LEG_COMMON_FIELDS, SEA_LEG_FIELDS, LEG_END_COLUMNS),
    ("shipment_id", "position"),
    "Sea main-carriage legs from GET /service/shipment/{id}/seamaincarriage.",
)
