"""The schema name and the key columns shared by the ``freight`` tables."""

from __future__ import annotations

from freight_pipeline.normalize.converters import BIGINT, INTEGER, VARCHAR, to_int
from freight_pipeline.normalize.nodes import NUMBER, Key
from freight_pipeline.normalize.schema import Column

SCHEMA = "freight"


def _key(name: str, type_: str, description: str) -> Column:
    return Column(name, type_, description, nullable=False)


SHIPMENT_ID = _key("shipment_id", BIGINT, "id of the shipment (the service's database id)")
SHIPMENT_ID_NULLABLE = Column("shipment_id", BIGINT, "id of the shipment; null when it could not be resolved")
POSITION = _key("position", INTEGER, "1-based position in the source array")
RECORD_ID = Key("id", kinds=frozenset({NUMBER}), reads=to_int)
"""A record's own required ``id`` (read by ``records.record_id``)."""
QUARANTINED = "the record quarantined, freight_meta.quarantine"
NOT_LOADED = "the record not loaded, freight_meta.data_problems"
"""What becomes of a record whose identity cannot be read (``Key.unread_as``): quarantined, whole (a shipment's
document, a code conversion), or left out of its answer and reported (a memo line, an event)."""
GOOD_PATH = _key("good_path", VARCHAR, "position path of the goods line: '1', '1.2', '1.2.1'")
