"""Every part of a shipment the sync reads is kept raw (``freight_meta.raw_parts``), compressed, in the
transaction of its rows: what the service answered, exactly; null where the part does not apply; gone
with a deleted shipment. The E-Files too (the documents stream's part): each shipment's files as listed,
with their references and roles, exactly one per row it holds."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

from freight_pipeline.simulator.server import RunningSimulator
from freight_pipeline.sync.documents import STREAM as DOCUMENTS
from freight_pipeline.sync.parts import AIR_LEGS, EVENTS, MEMOS, SEA_LEGS
from freight_pipeline_tests.sync.conftest import query, syncer, work_db
from freight_pipeline_tests.sync.settings import RECONCILE_SETTINGS


def _raw(data_dir: Path) -> dict[tuple[str, int], object]:
    rows = query(work_db(data_dir), "SELECT stream, shipment_id, answer, answer_bytes FROM freight_meta.raw_parts")
    found: dict[tuple[str, int], object] = {}
    for stream, shipment_id, answer, size in rows:
        text = zlib.decompress(answer) if answer is not None else None
        assert size == (len(text) if text is not None else None)
        found[(stream, shipment_id)] = json.loads(text) if text is not None else None
    return found


def test_every_part_is_kept_as_answered(small_sim: RunningSimulator, tmp_path: Path) -> None:
    sync = syncer(small_sim, tmp_path)
    sync()
    reader = small_sim.store.reader
    ids = sorted(reader.live_shipment_ids())  # type: ignore[attr-defined]
    raw = _raw(tmp_path)
    assert {stream for stream, _ in raw} == {EVENTS, AIR_LEGS, SEA_LEGS, MEMOS, DOCUMENTS}
    held_files: dict[int, list[int]] = {}
    for shipment_id, efile_id in query(work_db(tmp_path), "SELECT shipment_id, efile_id FROM "
                                       "freight.shipment_documents ORDER BY efile_id"):
        held_files.setdefault(shipment_id, []).append(efile_id)
    assert held_files, "the simulator's shipments have E-Files"
    for shipment_id in ids:
        doc = reader.get_shipment(shipment_id)
        mode = doc["mode_of_transport"]
        assert raw[(EVENTS, shipment_id)] == reader.get_events(shipment_id)
        assert raw[(AIR_LEGS, shipment_id)] == (reader.get_air_main_carriage(shipment_id) if mode == "AIR" else None)
        assert raw[(SEA_LEGS, shipment_id)] == (reader.get_sea_main_carriage(shipment_id) if mode == "SEA" else None)
        memos = reader.memo_rows_of(doc["client"], doc["shipment_number"])
        assert sorted(m["id"] for m in raw[(MEMOS, shipment_id)]) == sorted(m["id"] for m in memos)  # type: ignore[union-attr]
        files = raw[(DOCUMENTS, shipment_id)]
        assert isinstance(files, list)
        assert sorted(f["efile"]["id"] for f in files) == held_files.get(shipment_id, [])
        for file in files:
            assert file["roles"] == small_sim.store.efiles.roles(file["efile"]["id"])
            assert file["references"] == small_sim.store.efiles.references(file["efile"]["id"])
    stored, plain = query(work_db(tmp_path), "SELECT sum(octet_length(answer)), sum(answer_bytes) "
                          "FROM freight_meta.raw_parts")[0]
    assert stored < plain / 3, "compressed"

    deleted = small_sim.delete_shipments(2)
    small_sim.advance_clock(1)
    sync(RECONCILE_SETTINGS)  # the reconcile notices deletions
    after = _raw(tmp_path)
    assert not [key for key in after if key[1] in deleted]
    assert len(after) == 5 * (len(ids) - len(deleted))
