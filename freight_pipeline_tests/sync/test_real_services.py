"""What a second, independent service did to the sync on first contact, each reproduced over HTTP by
the simulator's fault modes: a page-size cap, a strict reading of the lookup criteria, E-File
references in another shape, an account without the E-File permission, summer time ending.
Every table is exact afterwards (or, where a stream cannot be read, every other table)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from freight_pipeline.client.endpoints import ALL_ENDPOINTS, CODE_CONVERSION_SCROLL, MEMO_LOOKUP
from freight_pipeline.simulator.config import FaultConfig
from freight_pipeline.simulator.server import RunningSimulator, running_simulator
from freight_pipeline.sync.client_source import ClientSource
from freight_pipeline.sync.documents import STREAM as DOCUMENTS
from freight_pipeline.sync.isolation import StreamUnreachable
from freight_pipeline.sync.shipments import STREAM as SHIPMENTS
from freight_pipeline_tests.sync.conftest import SMALL_SHIPMENTS, assert_nothing_healed, query, syncer, work_db
from freight_pipeline_tests.sync.expected import assert_converged, differences
from freight_pipeline_tests.sync.settings import RECONCILE_SETTINGS, TEST_SETTINGS

EFILE_LOOKUP = "/service/efile/lookup"
WHOLE_PAGE = 500
"""A page size that fits each chunk's E-File listing on one page, for tests counting one lookup a chunk."""
SHIPMENT_LOOKUP = "/service/shipment/lookup"


SERVED_PAGES = {"capped": FaultConfig(max_page_size=10), "page_size ignored": FaultConfig(fixed_page_size=30)}
"""Services serving pages of another size than the sync asks (25): at most 10 rows, or 30 rows whatever is asked."""


def files_of_shipments(sim: RunningSimulator) -> set[tuple[int, int]]:
    """(shipment id, E-File id) of every file a SHIPMENT reference links to a live shipment."""
    live = set(sim.store.reader.live_shipment_ids())  # type: ignore[attr-defined]
    pairs = {(int(r["value"]), efile["id"]) for efile in sim.store.efiles.rows()
             for r in efile["references"] if r["type"] == "SHIPMENT" and int(r["value"]) in live}
    assert pairs, "the seed should give these shipments E-Files"
    return pairs


def placed(data_dir: Path) -> set[tuple[int, int]]:
    return set(query(work_db(data_dir), "SELECT shipment_id, efile_id FROM freight.shipment_documents"))


@pytest.mark.parametrize("served", SERVED_PAGES)
def test_the_page_size_served_is_adopted_by_the_walk_the_reconcile_and_every_paged_read(
    served: str, tmp_path: Path
) -> None:
    """A cap, or a service ignoring ``page_size`` (its pages longer than asked, its headers counting them): the walk,
    the reconcile's listing and the client's paged reads (code conversions, memo lines, E-Files) page on at the size
    served. Ignored, the walk took its first page for a count mismatch and the client asked past the end."""
    faults = SERVED_PAGES[served]
    size = faults.max_page_size or faults.fixed_page_size
    with running_simulator(shipments=SMALL_SHIPMENTS, seed=7, faults=faults) as sim:
        sync = syncer(sim, tmp_path)
        results = sync(RECONCILE_SETTINGS)
        assert {name: result.status for name, result in results.items()} == dict.fromkeys(results, "success")
        first = results[SHIPMENTS]
        assert_converged(sim.store, tmp_path / "warehouse.duckdb")
        assert first.extra["count_mismatches"] == 0
        changed = sim.modify_shipments(23)  # more than a capped page: the window spans pages
        sim.advance_clock(1)
        second = sync(RECONCILE_SETTINGS)[SHIPMENTS]
        assert second.rows_read >= len(changed)
        assert_nothing_healed(second)  # the reconcile listed every id through pages of the size served
        assert second.extra["reconcile_listed"] == SMALL_SHIPMENTS
        assert_converged(sim.store, tmp_path / "warehouse.duckdb")
        # the listing asked 25 once, then the size served a page: as many lookups as such pages at least
        assert second.extra["lookups"] >= math.ceil(SMALL_SHIPMENTS / size)


def test_a_lower_page_size_limit_is_kept_by_every_paged_read_when_the_page_size_setting_says_it(
    tmp_path: Path,
) -> None:
    """A service refusing (400) pages of more than 20 rows: ``page_size = 20`` sizes every paged read, the memo,
    E-File and code-conversion reads as the shipment walk (they asked 500 whatever the setting said)."""
    with running_simulator(shipments=SMALL_SHIPMENTS, seed=7, faults=FaultConfig(page_size_limit=20)) as sim:
        syncer(sim, tmp_path)(TEST_SETTINGS.replaced(page_size=20))
        assert sim.request_count(status=400) == 0
        paged = {e.path for e in ALL_ENDPOINTS if e.name.endswith((".lookup", ".scroll")) and sim.request_count(e.path)}
        assert paged >= {SHIPMENT_LOOKUP, EFILE_LOOKUP, MEMO_LOOKUP.path, CODE_CONVERSION_SCROLL.path}, paged
        assert_converged(sim.store, tmp_path / "warehouse.duckdb")


@pytest.fixture
def strict_sim() -> Iterator[RunningSimulator]:
    """A service that answers 400 to criterion forms the spec does not name (EQUALS with values)."""
    with running_simulator(shipments=SMALL_SHIPMENTS, seed=7, faults=FaultConfig(strict_criteria=True)) as running:
        yield running


def test_every_lookup_uses_criterion_forms_a_strict_service_accepts(strict_sim: RunningSimulator,
                                                                   tmp_path: Path) -> None:
    results = syncer(strict_sim, tmp_path)(RECONCILE_SETTINGS.replaced(page_size=WHOLE_PAGE))
    assert strict_sim.request_count(status=400) == 0
    assert_converged(strict_sim.store, tmp_path / "warehouse.duckdb")
    documents = results[DOCUMENTS]
    chunks = math.ceil(SMALL_SHIPMENTS / TEST_SETTINGS.documents_chunk)
    assert strict_sim.request_count(path=EFILE_LOOKUP) == chunks
    assert documents.extra["single_shipment_lookups"] == 0


def test_e_file_references_in_another_shape_are_placed_by_the_chunk_lookup(tmp_path: Path) -> None:
    faults = FaultConfig(efile_reference_shape="key")
    with running_simulator(shipments=SMALL_SHIPMENTS, seed=7, faults=faults) as sim:
        results = syncer(sim, tmp_path)(TEST_SETTINGS.replaced(page_size=WHOLE_PAGE))
        documents = results[DOCUMENTS]
        chunks = math.ceil(SMALL_SHIPMENTS / TEST_SETTINGS.documents_chunk)
        assert sim.request_count(path=EFILE_LOOKUP) == chunks
        assert documents.extra["unplaced_files"] == 0 and documents.extra["single_shipment_lookups"] == 0
        assert placed(tmp_path) == files_of_shipments(sim)


class OpaqueReferences(ClientSource):
    """References in a shape naming no shipment in words (``{"kind": "S", "ref": "10023"}``)."""

    async def get_efile_references(self, efile_id: int) -> list[dict[str, Any]]:
        return [{"id": r["id"], "kind": r["type"][0], "ref": r["value"]}
                for r in await super().get_efile_references(efile_id)]


def test_references_naming_no_shipment_are_placed_by_one_lookup_per_shipment_and_counted(tmp_path: Path) -> None:
    """A shape the sync cannot read at all still ends right: each shipment is asked on its own."""
    with running_simulator(shipments=12, seed=7) as sim:
        results = syncer(sim, tmp_path)(TEST_SETTINGS.replaced(documents_chunk=12, page_size=WHOLE_PAGE),
                                        source_factory=OpaqueReferences)
        documents = results[DOCUMENTS]
        assert documents.extra["unplaced_files"] > 0
        assert documents.extra["single_shipment_lookups"] == 12
        assert sim.request_count(path=EFILE_LOOKUP) == 1 + 12
        assert placed(tmp_path) == files_of_shipments(sim)
        assert set(differences(sim.store, work_db(tmp_path))) <= {"shipment_documents"}  # its references' shape


def test_an_account_without_the_e_file_permission_fails_the_documents_stream_alone(tmp_path: Path) -> None:
    faults = FaultConfig(forbidden_prefixes=frozenset({"/service/efile"}))
    with running_simulator(shipments=SMALL_SHIPMENTS, seed=7, faults=faults) as sim:
        sync = syncer(sim, tmp_path, publish_after=False)
        with pytest.raises(StreamUnreachable, match="FREIGHT_SYNC_DOCUMENTS=0") as raised:
            sync(TEST_SETTINGS)
        assert raised.value.stream == DOCUMENTS and raised.value.status == 403
        assert sim.request_count(path=EFILE_LOOKUP) == 1  # one refusal is enough: no per-shipment retries
        diff = differences(sim.store, work_db(tmp_path))
        assert set(diff) == {"shipment_documents"}, diff  # every other table exact
        failed = query(work_db(tmp_path), "SELECT status, error FROM freight_meta.sync_runs WHERE stream = ?",
                       [DOCUMENTS])
        assert failed[0][0] == "failed" and "cannot reach" in failed[0][1]
        assert freshness(tmp_path, "shipment_documents")[:2] == (None, "failed")
        synced, status, _ = freshness(tmp_path, "shipment_events")
        assert synced is not None and status == "success"
        # switched off, as the message says: the same account syncs cleanly
        results = sync(TEST_SETTINGS.replaced(documents=False))
        assert "FREIGHT_SYNC_DOCUMENTS=0" in results[DOCUMENTS].extra["skipped"]
        assert freshness(tmp_path, "shipment_documents") == (None, "switched off", None)
        assert freshness(tmp_path, "shipment_events")[0] > synced


def freshness(data_dir: Path, table: str) -> tuple[object, ...]:
    """(synced_through, last_status, last_error) of ``table`` in ``freight_meta.table_freshness``."""
    rows = query(work_db(data_dir), "SELECT synced_through, last_status, last_error FROM "
                 "freight_meta.table_freshness WHERE table_name = ?", [table])
    assert len(rows) == 1, rows
    return rows[0]
