"""Normalization: the service's JSON documents -> rows of the ``freight`` tables -> Arrow.

Plain Python, no Dagster and no database. Table specs (``tables``) are declared once and drive
DDL, Arrow and Parquet; the flatteners read the same declarations.
"""

from freight_pipeline.normalize.errors import NormalizationError, RecordShapeError
from freight_pipeline.normalize.events import normalize_events
from freight_pipeline.normalize.flatten import merge_rows, normalize_shipment, to_arrow_batch
from freight_pipeline.normalize.legs import normalize_main_carriage
from freight_pipeline.normalize.problems import Problem, Problems, StrictProblems
from freight_pipeline.normalize.records import normalize_code_conversion, normalize_code_conversions, normalize_memos
from freight_pipeline.normalize.schema import AUDIT_COLUMNS, Column, TableSpec
from freight_pipeline.normalize.tables import FREIGHT_TABLES, TABLES_BY_NAME

__all__ = [
    "AUDIT_COLUMNS",
    "FREIGHT_TABLES",
    "TABLES_BY_NAME",
    "Column",
    "NormalizationError",
    "Problem",
    "Problems",
    "RecordShapeError",
    "StrictProblems",
    "TableSpec",
    "merge_rows",
    "normalize_code_conversion",
    "normalize_code_conversions",
    "normalize_events",
    "normalize_main_carriage",
    "normalize_memos",
    "normalize_shipment",
    "to_arrow_batch",
]
