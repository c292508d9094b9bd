"""``BatchWrite.joined``: the batch writes of consecutive chunks of shipments as one, every field carried."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pyarrow as pa

from freight_pipeline.warehouse.records import BatchWrite, DataProblem, Quarantined, RawDocument, RawPart, Reject


def _chunk(first: int) -> BatchWrite:
    """A chunk of two shipments from ``first`` with every field of a batch write set."""
    ids = [first, first + 1]
    now = dt.datetime(2026, 11, 27, tzinfo=dt.UTC)
    return BatchWrite(
        tables={"freight.shipments": pa.table({"shipment_id": pa.array(ids, pa.int64())})},
        replaced={"freight.shipments": ids}, loaded={"shipments": ids}, settled={"events": [first]},
        deleted_ids=[first + 100], raw_documents=[RawDocument(i, "{}", now, now) for i in ids],
        raw_parts=[RawPart("events", first, None, None, now)], rejects=[Reject("shipments", str(first), None, "bad")],
        quarantined=[Quarantined("shipments", str(first), first, "500")],
        problems=[DataProblem("shipments", str(first), first, "goods[0].weight", '"x"', "not a number")],
        cursor=None if first == 1 else ("rebuild", f"through {first + 1}"), fresh_ids=[first + 1])


def test_every_field_of_every_chunk_is_carried_in_order() -> None:
    whole = BatchWrite.joined([_chunk(1), _chunk(3)])
    assert whole.tables["freight.shipments"].column("shipment_id").to_pylist() == [1, 2, 3, 4]
    assert (whole.replaced, whole.loaded, whole.settled) == (
        {"freight.shipments": [1, 2, 3, 4]}, {"shipments": [1, 2, 3, 4]}, {"events": [1, 3]})
    assert whole.deleted_ids == [101, 103]
    assert [d.shipment_id for d in whole.raw_documents] == [1, 2, 3, 4]
    assert [r.source_key for r in whole.rejects] == ["1", "3"]
    assert [q.shipment_id for q in whole.quarantined] == [1, 3]
    assert [p.shipment_id for p in whole.raw_parts] == [p.shipment_id for p in whole.problems] == [1, 3]
    assert whole.cursor == ("rebuild", "through 4")
    assert whole.fresh_ids == [2, 4]
    # the chunks set every field, so a field added to BatchWrite is checked here once it is set above
    assert all(getattr(_chunk(3), f.name) for f in dataclasses.fields(BatchWrite))


def test_no_chunk_is_an_empty_write() -> None:
    assert BatchWrite.joined([]) == BatchWrite()
