"""The documents stream against the simulator's E-Files, over HTTP: equal to the source after a full
sync, an E-File stored or deleted without moving the shipment's last-modified found by the
re-listing, one failing E-File isolated to its shipment, document bytes copied once by hash."""

from __future__ import annotations

import base64
import datetime as dt
import errno
import hashlib
import json
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from freight_pipeline.normalize.documents import safe_file_name
from freight_pipeline.simulator.server import RunningSimulator, running_simulator
from freight_pipeline.sync.changes import LookupResult
from freight_pipeline.sync.client_source import ClientSource
from freight_pipeline.sync.documents import PART_PREFIX, STREAM
from freight_pipeline.sync.isolation import CircuitOpen, StreamUnreachable
from freight_pipeline_tests.sync.conftest import SMALL_SHIPMENTS, SyncFn, query, syncer, work_db
from freight_pipeline_tests.sync.faulty_sources import EfileDeletedAfterItsLookup, OverlappingEfilePages, factory
from freight_pipeline_tests.sync.settings import TEST_SETTINGS
from freight_pipeline_tests.sync.test_bad_data import corrupt, heal

COLUMNS = "shipment_id, efile_id, file_name, mime_type, description, CAST(roles AS VARCHAR), " \
          "CAST(document_references AS VARCHAR)"
NO_RELIST = TEST_SETTINGS.replaced(documents_relist_interval=None)
RELIST = TEST_SETTINGS.replaced(documents_relist_interval=dt.timedelta(0))
WHOLE_PAGES = NO_RELIST.replaced(page_size=500)
"""Pages that hold each chunk's E-File listing whole (smaller ones halve a chunk until its listing fits one)."""


def expected(sim: RunningSimulator) -> set[tuple[Any, ...]]:
    """The simulator's E-Files as rows: one per live shipment a SHIPMENT reference names."""
    store = sim.store
    live = set(store.reader.live_shipment_ids())  # type: ignore[attr-defined]
    rows = set()
    for efile in store.efiles.rows():
        roles = [r["role"] for r in store.efiles.roles(efile["id"])]
        references = sorted(({"id": r["id"], "type": r["type"], "value": r["value"]} for r in efile["references"]),
                            key=lambda r: r["id"])
        for reference in efile["references"]:
            if reference["type"] == "SHIPMENT" and int(reference["value"]) in live:
                rows.add((int(reference["value"]), efile["id"], efile["file_name"], efile["mime_type"],
                          efile["description"], json.dumps(roles), json.dumps(references, sort_keys=True)))
    return rows


def held(data_dir: Path) -> set[tuple[Any, ...]]:
    rows = query(work_db(data_dir), f"SELECT {COLUMNS} FROM freight.shipment_documents")
    return {(*r[:6], json.dumps(sorted(json.loads(r[6]), key=lambda x: x["id"]), sort_keys=True)) for r in rows}


def api(sim: RunningSimulator) -> httpx.Client:
    token = httpx.post(f"{sim.base_url}/auth/token", json={"username": sim.username, "password": sim.password},
                       timeout=10).json()["access_token"]
    return httpx.Client(base_url=sim.base_url, headers={"Authorization": f"Bearer {token}"}, timeout=10)


def test_full_sync_holds_every_efile_of_every_shipment(small_sim: RunningSimulator, work_sync: SyncFn,
                                                       tmp_path: Path) -> None:
    results = work_sync(WHOLE_PAGES)
    want = expected(small_sim)
    assert len(want) > 40, "the simulator gives most shipments documents"
    assert held(tmp_path) == want
    documents = results[STREAM]
    assert documents.extra["relisted"] is True  # the first run lists every held shipment
    assert documents.extra["failed"] == 0 and documents.quarantined == 0
    files = len({r[1] for r in want})
    lookups = -(-documents.extra["shipments"] // TEST_SETTINGS.documents_chunk)
    assert documents.requests == lookups + 2 * files  # one lookup per chunk, references + roles per file

    again = work_sync(WHOLE_PAGES)[STREAM]
    assert again.extra["shipments"] == 0 and again.requests == 0  # nothing written since: nothing to list


def test_changes_without_a_last_modified_move_are_found_by_the_relisting(
    small_sim: RunningSimulator, work_sync: SyncFn, tmp_path: Path
) -> None:
    work_sync(NO_RELIST)
    shipment_id = min(small_sim.store.reader.live_shipment_ids())  # type: ignore[attr-defined]
    with api(small_sim) as client:
        before = client.get(f"/service/shipment/{shipment_id}").json()["last_modified_date_time"]
        stored = client.post("/service/efile", json={
            "file_name": "../../etc/Dangerous Goods Note.pdf", "mime_type": "application/pdf",
            "description": "Dangerous goods note", "document": base64.b64encode(b"%PDF-1.4 DGN").decode(),
            "references": [{"type": "SHIPMENT", "value": str(shipment_id)}], "roles": ["OPERATIONS"]}).json()
        gone = next(r for r in expected(small_sim) if r[0] != shipment_id)
        assert client.delete(f"/service/efile/{gone[1]}").status_code == 200
        assert client.get(f"/service/shipment/{shipment_id}").json()["last_modified_date_time"] == before

    incremental = work_sync(NO_RELIST)[STREAM]
    assert incremental.extra["shipments"] == 0
    assert stored["id"] not in {r[1] for r in held(tmp_path)}  # unseen until the re-listing

    relisted = work_sync(RELIST)[STREAM]
    assert relisted.extra["relisted"] is True
    assert relisted.extra["changed"] == 2  # the shipment that got a file and the one that lost one
    assert held(tmp_path) == expected(small_sim)
    changed = {r[0] for r in query(work_db(tmp_path), "SELECT shipment_id FROM freight_meta.changed_shipments")}
    assert {shipment_id, gone[0]} <= changed  # logged for the incremental marts


def test_a_changed_shipment_lists_its_efiles_again(small_sim: RunningSimulator, work_sync: SyncFn,
                                                   tmp_path: Path) -> None:
    work_sync(NO_RELIST)
    ids = small_sim.store.changes.modify_shipments(5)  # type: ignore[attr-defined]
    results = work_sync(NO_RELIST)[STREAM]
    assert results.extra["shipments"] == len(ids)
    assert held(tmp_path) == expected(small_sim)


def test_an_efile_two_shipments_share_is_listed_in_both_when_one_is_read(small_sim: RunningSimulator,
                                                                         work_sync: SyncFn, tmp_path: Path) -> None:
    """An E-File is a row of each shipment it names: the read of the one whose change is stamped finds it changed
    (or gone), and each other shipment's row is listed in the same run, one that held it or one it now names, not
    left as it was (or missing) until the re-listing."""
    work_sync(NO_RELIST)
    store = small_sim.store
    ids = store.reader.live_shipment_ids()  # type: ignore[attr-defined]
    owner = next(i for i in ids if list(store.efiles.rows([i])))
    efile = next(iter(store.efiles.rows([owner])))["id"]
    other = next(i for i in ids if i != owner and not list(store.efiles.rows([i])))
    store.clock.advance(60)
    store.efiles.add_reference(efile, {"type": "SHIPMENT", "value": str(other)})  # now both shipments' file
    store.changes.touch_shipments([other])  # only its change stamped
    shared = work_sync(NO_RELIST)[STREAM]
    assert held(tmp_path) == expected(small_sim)
    assert {r[0] for r in held(tmp_path) if r[1] == efile} == {owner, other}
    assert shared.extra["shipments"] == 2 and shared.extra["sharing_an_efile"] == 1

    third = next(i for i in ids if i not in (owner, other) and not list(store.efiles.rows([i])))
    store.clock.advance(60)
    store.efiles.add_reference(efile, {"type": "SHIPMENT", "value": str(third)})  # a shipment holding none of it yet
    store.changes.touch_shipments([owner])  # only a shipment that held it stamped
    gained = work_sync(NO_RELIST)[STREAM]
    assert held(tmp_path) == expected(small_sim)
    assert {r[0] for r in held(tmp_path) if r[1] == efile} == {owner, other, third}
    assert gained.extra["sharing_an_efile"] == 2

    store.clock.advance(60)
    store.efiles.delete(efile)  # gone from all; only one of them stamped
    store.changes.touch_shipments([owner])
    gone = work_sync(NO_RELIST)[STREAM]
    assert held(tmp_path) == expected(small_sim)
    assert efile not in {r[1] for r in held(tmp_path)}
    assert gone.extra["sharing_an_efile"] == 2


@pytest.fixture
def control_sim() -> Iterator[RunningSimulator]:
    """A small simulator whose ``/_control`` routes plant corruptions."""
    with running_simulator(shipments=SMALL_SHIPMENTS, seed=7, control=True) as running:
        yield running


@pytest.fixture
def control_sync(control_sim: RunningSimulator, tmp_path: Path) -> SyncFn:
    return syncer(control_sim, tmp_path, publish_after=False)


def test_one_failing_efile_quarantines_its_shipment_only(control_sim: RunningSimulator, control_sync: SyncFn,
                                                         tmp_path: Path) -> None:
    small_sim, work_sync = control_sim, control_sync
    want = expected(small_sim)
    bad_file = sorted(want)[5][1]
    bad_shipment = next(r[0] for r in want if r[1] == bad_file)
    corrupt(small_sim, "efileroles", bad_file, "status", status=500)
    documents = work_sync(NO_RELIST)[STREAM]
    assert documents.extra["failed"] == 1
    assert held(tmp_path) == {r for r in want if r[0] != bad_shipment}
    (reason,) = query(work_db(tmp_path), "SELECT reason FROM freight_meta.quarantine WHERE stream = ? "
                      "AND shipment_id = ?", [STREAM, bad_shipment])[0]
    assert f"E-File {bad_file}" in reason

    heal(small_sim)
    retried = work_sync(NO_RELIST)[STREAM]
    assert retried.extra["shipments"] == 1  # only the shipment from the retry queue
    assert held(tmp_path) == want
    assert query(work_db(tmp_path), "SELECT count(*) FROM freight_meta.quarantine WHERE stream = ?",
                 [STREAM]) == [(0,)]


@pytest.mark.parametrize("endpoint", ["efileroles", "efilereferences"])
def test_an_efile_whose_roles_or_references_answer_404_while_it_is_there_is_kept(
    control_sim: RunningSimulator, control_sync: SyncFn, tmp_path: Path, endpoint: str
) -> None:
    """A 404 of an E-File's sub-resource is confirmed by the E-File's own read: there, it keeps its row (as that
    read lists its references and roles); gone too, it is deleted. Was: dropped as deleted, silently."""
    want = expected(control_sim)
    control_sync(RELIST)
    assert held(tmp_path) == want
    efile = sorted(want)[5][1]
    corrupt(control_sim, endpoint, efile, "status", status=404)
    documents = control_sync(RELIST)[STREAM]
    assert (documents.status, documents.extra["failed"], documents.quarantined) == ("success", 0, 0)
    assert held(tmp_path) == want
    api(control_sim).delete(f"/service/efile/{efile}").raise_for_status()
    control_sync(RELIST)
    assert held(tmp_path) == expected(control_sim) == {row for row in want if row[1] != efile}


@pytest.mark.parametrize(("content", "status"), [(False, 403), (False, 404), (True, 403), (True, 404)])
def test_an_efile_listed_but_refused_or_not_found_quarantines_its_shipment_with_its_rows_kept(
    control_sim: RunningSimulator, control_sync: SyncFn, tmp_path: Path, content: bool, status: int
) -> None:
    """An E-File the lookup lists whose reads answer 403 (a role the account lacks) or 404 (the E-File's own read
    too, and listed again by a second lookup: a node behind) fails its shipment alone: quarantined, its rows kept,
    read again once it answers. Was: a 403 failed the whole stream every run ("403 on every call"); a 404 deleted
    the row, silently, until the daily re-listing."""
    settings = RELIST.replaced(document_content=content)
    want = expected(control_sim)
    control_sync(settings)
    assert held(tmp_path) == want
    efile = sorted(want)[5][1]
    shipments = sorted(r[0] for r in want if r[1] == efile)
    for endpoint in ["efile"] if content else ["efilereferences", "efile"] if status == 404 else ["efileroles"]:
        corrupt(control_sim, endpoint, efile, "status", status=status)
    documents = control_sync(settings, streams=[STREAM])[STREAM]
    assert (documents.status, documents.extra["failed"]) == ("success", len(shipments))
    assert held(tmp_path) == want  # nothing of it deleted
    waiting = query(work_db(tmp_path), "SELECT shipment_id, reason, status_code FROM freight_meta.quarantine "
                    "WHERE stream = ? ORDER BY shipment_id", [STREAM])
    assert [(i, code) for i, _, code in waiting] == [(i, status) for i in shipments]
    assert all(reason.startswith(f"E-File {efile}: ") for _, reason, _ in waiting)
    heal(control_sim)
    control_sync(settings.replaced(documents_relist_interval=None), streams=[STREAM])  # the retry queue's
    assert held(tmp_path) == want
    assert query(work_db(tmp_path), "SELECT count(*) FROM freight_meta.quarantine WHERE stream = ?", [STREAM]) == [(0,)]


def test_an_account_whose_efile_reads_are_all_refused_fails_the_stream_without_quarantining_a_shipment(
    control_sim: RunningSimulator, control_sync: SyncFn, tmp_path: Path
) -> None:
    """The lookup answers, every E-File's reads 403: the account lacks that endpoint's permission (the spec's are
    per endpoint), the stream's failure, named, not one shipment's after another."""
    want = expected(control_sim)
    control_sync(RELIST)
    control_sim.set_faults(forbidden_prefixes=frozenset(f"/service/efile/{efile}/" for _, efile, *_ in want))
    with pytest.raises(StreamUnreachable, match=r"\(403 on every call, e\.g\. GET /service/efile/\d+/(role|reference)"):
        control_sync(RELIST, streams=[STREAM])
    assert held(tmp_path) == want
    assert query(work_db(tmp_path), "SELECT count(*) FROM freight_meta.quarantine WHERE stream = ?", [STREAM]) == [(0,)]


def test_an_efile_deleted_between_its_lookup_and_its_reads_is_gone_once_a_second_lookup_lists_it_no_more(
    control_sim: RunningSimulator, control_sync: SyncFn, tmp_path: Path
) -> None:
    source = type("Once", (EfileDeletedAfterItsLookup,), {})
    documents = control_sync(RELIST, source_factory=source)[STREAM]
    assert source.listed == 1
    assert (documents.status, documents.extra["failed"], documents.quarantined) == ("success", 0, 0)
    assert held(tmp_path) == expected(control_sim)


def test_one_shipments_efile_pages_that_overlap_quarantine_it_and_keep_its_rows(
    control_sim: RunningSimulator, control_sync: SyncFn, tmp_path: Path
) -> None:
    """Its lookup orders by SHIPMENT_ID only: a service whose ties come in another order on the next page's query
    lists a file twice and another on no page. That shipment is quarantined with its rows kept (was: the file
    listed on no page deleted, silently, another each run); the others are exact, and the next clean read heals."""
    want = expected(control_sim)
    control_sync(RELIST)
    by_shipment = Counter(row[0] for row in want)
    many = sorted(shipment for shipment, files in by_shipment.items() if files >= 3)[:2]
    assert many, "the simulator's data must hold a shipment with three files or more"
    control_sim.set_faults(max_page_size=2)
    make, _ = factory(OverlappingEfilePages, only=set(many))
    documents = control_sync(RELIST, source_factory=make)[STREAM]
    assert documents.status == "success" and documents.extra["failed"] == len(many)
    assert held(tmp_path) == want  # every row kept: nothing of it was deleted
    waiting = query(work_db(tmp_path), "SELECT shipment_id, reason FROM freight_meta.quarantine WHERE stream = ? "
                    "ORDER BY shipment_id", [STREAM])
    assert [shipment for shipment, _ in waiting] == many
    assert all("the pages overlapped" in reason for _, reason in waiting)
    control_sync(RELIST)
    assert held(tmp_path) == want
    assert query(work_db(tmp_path), "SELECT count(*) FROM freight_meta.quarantine WHERE stream = ?", [STREAM]) == [(0,)]


def test_an_outage_of_one_endpoint_trips_the_breaker_instead_of_quarantining_every_shipment(
    control_sim: RunningSimulator, control_sync: SyncFn, tmp_path: Path
) -> None:
    files = sorted({(r[0], r[1]) for r in expected(control_sim)})
    failing = {shipment: efile for shipment, efile in files}  # one file of every shipment that has one
    for efile in list(failing.values())[:12]:
        corrupt(control_sim, "efileroles", efile, "status", status=500)
    with pytest.raises(CircuitOpen, match=r"documents: 12 of \d+ records failed"):
        control_sync(NO_RELIST, streams=["shipments", STREAM])
    assert held(tmp_path) == set()  # the chunk that tipped it is not written
    assert query(work_db(tmp_path), "SELECT count(*) FROM freight_meta.quarantine WHERE stream = ?", [STREAM]) == [(0,)]
    assert query(work_db(tmp_path), "SELECT count(*) FROM freight_meta.sync_state WHERE stream = ?", [STREAM]) == [(0,)]


def test_document_content_is_copied_once_by_hash_and_bad_base64_is_quarantined(
    control_sim: RunningSimulator, control_sync: SyncFn, tmp_path: Path
) -> None:
    small_sim, work_sync = control_sim, control_sync
    settings = NO_RELIST.replaced(document_content=True)
    want = expected(small_sim)
    bad_file = sorted(want)[3][1]
    bad_shipment = next(r[0] for r in want if r[1] == bad_file)
    corrupt(small_sim, "efile", bad_file, "set", path="document", value="not base64!!")
    documents = work_sync(settings)[STREAM]
    assert held(tmp_path) == want  # every row, the bad one without content
    rows = query(work_db(tmp_path), "SELECT efile_id, content_sha256, content_size_bytes, content_path "
                                    "FROM freight.shipment_documents")
    for efile_id, sha, size, path in rows:
        if efile_id == bad_file:
            assert (sha, size, path) == (None, None, None)
            continue
        data = base64.b64decode(small_sim.store.efiles.get(efile_id)["document"])  # type: ignore[attr-defined]
        assert (sha, size) == (hashlib.sha256(data).hexdigest(), len(data))
        assert (tmp_path / path).read_bytes() == data
    stored = [p for p in (tmp_path / "documents").rglob("*") if p.is_file()]
    assert len(stored) == len({r[1] for r in rows if r[1]})  # one file per distinct content
    assert documents.quarantined == 1
    assert query(work_db(tmp_path), "SELECT shipment_id FROM freight_meta.quarantine WHERE stream = ?",
                 [STREAM]) == [(bad_shipment,)]

    heal(small_sim)
    work_sync(settings)
    (sha,) = query(work_db(tmp_path), "SELECT content_sha256 FROM freight.shipment_documents WHERE efile_id = ?",
                   [bad_file])[0]
    assert sha is not None
    assert quarantine_of(tmp_path) == []  # loaded: it left the retry queue


def test_a_copy_the_machine_cannot_write_fails_the_stream_not_its_record_and_leaves_no_part(
    control_sim: RunningSimulator, control_sync: SyncFn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A copy of an E-File's bytes the machine cannot write (its folder a file, the disk full as the copy is renamed,
    no file descriptor left) is the machine's failure, not the record's: it was quarantined as a bad record, the run
    said it succeeded, and each failed copy left its ``.part-`` file for good. The stream fails naming it, nothing is
    put aside, and the next run writes what waited; the parts of copies a killed run left are swept."""
    settings = NO_RELIST.replaced(document_content=True)
    want = expected(control_sim)
    (tmp_path / "documents").write_text("a file where the copies' folder goes")
    with pytest.raises(NotADirectoryError):
        control_sync(settings)
    assert last_run(tmp_path)[:2] == ("failed", "NotADirectoryError") and quarantine_of(tmp_path) == []
    (tmp_path / "documents").unlink()

    replace = os.replace

    def disk_full_for_copies(source: str, target: str) -> None:  # the disk full as a copy is renamed whole
        if PART_PREFIX in Path(source).name:
            raise OSError(errno.ENOSPC, "No space left on device")
        replace(source, target)

    with monkeypatch.context() as patched, pytest.raises(OSError, match="No space left on device"):
        patched.setattr(os, "replace", disk_full_for_copies)
        control_sync(settings)
    assert last_run(tmp_path)[0] == "failed" and quarantine_of(tmp_path) == []
    assert [p.name for p in (tmp_path / "documents").rglob("*") if p.is_file()] == []  # no part left
    (tmp_path / "documents" / "aa").mkdir(exist_ok=True)
    (tmp_path / "documents" / "aa" / f"{PART_PREFIX}killed").write_bytes(b"half a copy")  # a killed run's
    written = control_sync(settings)[STREAM]
    assert written.status == "success" and held(tmp_path) == want
    assert not list((tmp_path / "documents").rglob(f"{PART_PREFIX}*"))


def test_switching_document_content_on_or_off_relists_every_shipment_once(
    small_sim: RunningSimulator, work_sync: SyncFn, tmp_path: Path
) -> None:
    """Content switched on for a warehouse synced without it: only the shipments rewritten in that run had their files
    copied, the others none until the next daily re-listing (never with ``relist=never``). The switch re-lists every
    shipment once, each way (off: the rows hold no copy, as a warehouse synced without it)."""
    copies = "SELECT count(*), count(content_sha256) FROM freight.shipment_documents"
    work_sync(NO_RELIST)
    files = len(expected(small_sim))
    assert query(work_db(tmp_path), copies) == [(files, 0)]
    on = work_sync(NO_RELIST.replaced(document_content=True))[STREAM]
    assert on.extra["relisted"] is True and on.extra["content_switched"] == "on"
    assert query(work_db(tmp_path), copies) == [(files, files)]
    again = work_sync(NO_RELIST.replaced(document_content=True))[STREAM]
    assert again.extra["relisted"] is False and again.extra["shipments"] == 0 and "content_switched" not in again.extra
    off = work_sync(NO_RELIST)[STREAM]
    assert off.extra["relisted"] is True and off.extra["content_switched"] == "off"
    assert query(work_db(tmp_path), copies) == [(files, 0)]


@pytest.mark.parametrize("separator", ["\r\n", "\n"])
def test_document_content_in_lines_of_76_as_mime_encodes_it_is_read(
    control_sim: RunningSimulator, control_sync: SyncFn, tmp_path: Path, separator: str
) -> None:
    """The spec says base64 and no more: a service that encodes as MIME does (Java's ``getMimeEncoder``: lines of
    76 characters) sends the same bytes. Was: quarantined on every run, the row without its content."""
    efile = sorted(expected(control_sim))[3][1]
    encoded = control_sim.store.efiles.get(efile)["document"]  # type: ignore[attr-defined]
    wrapped = separator.join(encoded[i:i + 76] for i in range(0, len(encoded), 76))
    assert wrapped != encoded, "the test needs a document of more than 76 characters"
    corrupt(control_sim, "efile", efile, "set", path="document", value=wrapped)
    documents = control_sync(NO_RELIST.replaced(document_content=True))[STREAM]
    assert documents.quarantined == 0
    (sha,) = query(work_db(tmp_path), "SELECT content_sha256 FROM freight.shipment_documents WHERE efile_id = ?",
                   [efile])[0]
    assert sha == hashlib.sha256(base64.b64decode(encoded)).hexdigest()


def test_bytes_that_go_bad_keep_the_held_copy_and_their_retries_back_off(
    control_sim: RunningSimulator, control_sync: SyncFn, tmp_path: Path
) -> None:
    settings = RELIST.replaced(document_content=True)
    control_sync(settings)
    bad_shipment, bad_file = sorted(expected(control_sim))[3][:2]
    sql = "SELECT content_sha256, content_path FROM freight.shipment_documents WHERE efile_id = ?"
    good = query(work_db(tmp_path), sql, [bad_file])
    assert good[0][0] is not None
    corrupt(control_sim, "efile", bad_file, "set", path="document", value="not base64!!")
    control_sync(settings)
    assert query(work_db(tmp_path), sql, [bad_file]) == good  # the good copy stays
    ((shipment, attempts, first),) = quarantine_of(tmp_path)
    assert (shipment, attempts) == (bad_shipment, 1)
    control_sync(settings)
    assert quarantine_of(tmp_path) == [(bad_shipment, 2, first)]  # attempts count on, first failure kept


def test_the_stream_can_be_turned_off(small_sim: RunningSimulator, work_sync: SyncFn, tmp_path: Path) -> None:
    documents = work_sync(NO_RELIST.replaced(documents=False))[STREAM]
    assert documents.requests == 0 and "skipped" in documents.extra
    assert held(tmp_path) == set()


@pytest.mark.parametrize(("name", "safe"), [
    ("invoice.PDF", "invoice.PDF"),
    ("../../etc/passwd", "passwd"),
    ("C:\\Users\\x\\Bill of lading #7.pdf", "Bill_of_lading_7.pdf"),
    ("...hidden", "hidden"),
    ("", "document"),
    (None, "document"),
    ("x" * 300 + ".pdf", "x" * 120),
])
def test_file_names_are_sanitized(name: Any, safe: str) -> None:
    assert safe_file_name(name) == safe


def last_run(data_dir: Path) -> tuple[str, str]:
    """The documents stream's latest run in ``sync_runs``: its status, and its error's exception name."""
    ((status, error),) = query(work_db(data_dir), "SELECT status, error FROM freight_meta.sync_runs WHERE stream = ? "
                               "ORDER BY rowid DESC LIMIT 1", [STREAM])
    return status, (error or "").split(":")[0]


def quarantine_of(data_dir: Path) -> list[tuple[Any, ...]]:
    return query(work_db(data_dir), "SELECT shipment_id, attempts, first_failed_at FROM freight_meta.quarantine "
                                    "WHERE stream = ? ORDER BY shipment_id", [STREAM])


def test_a_value_that_cannot_be_read_stays_reported_while_the_file_stays_the_same(
    small_sim: RunningSimulator, work_sync: SyncFn, tmp_path: Path
) -> None:
    bad = sorted(expected(small_sim))[2][1]

    class BadInstant(ClientSource):  # the simulator always sends a good created_date_time
        async def efile_pages(self, shipment_ids: list[int], page_size: int) -> Any:
            async for page in super().efile_pages(shipment_ids, page_size):
                items = [{**i, "created_date_time": "yesterday"} if i.get("id") == bad else i for i in page.items]
                yield LookupResult(items, page.row_count)

    problems = ("SELECT json_path, raw_value FROM freight_meta.data_problems WHERE stream = ?", [STREAM])
    work_sync(NO_RELIST, source_factory=BadInstant)
    assert query(work_db(tmp_path), *problems) == [(f"efile[{bad}].created_date_time", '"yesterday"')]
    again = work_sync(RELIST, source_factory=BadInstant)[STREAM]
    assert again.extra["changed"] == 0  # read again, the same rows: nothing rewritten ...
    assert query(work_db(tmp_path), *problems) == [(f"efile[{bad}].created_date_time", '"yesterday"')]  # ... still said
    work_sync(RELIST)
    assert query(work_db(tmp_path), *problems) == []  # healed at the source: the problem goes with it


def test_a_file_listed_for_a_chunk_whose_references_name_none_of_it_is_placed_by_a_lookup_of_its_own(
    control_sim: RunningSimulator, control_sync: SyncFn, tmp_path: Path
) -> None:
    want = expected(control_sim)
    shipment, efile = sorted(want)[4][:2]
    corrupt(control_sim, "efilereferences", efile, "set", path="[0].type", value="OTHER")
    documents = control_sync(NO_RELIST)[STREAM]
    assert documents.extra["failed"] == 0 and documents.quarantined == 0
    assert {(r[0], r[1]) for r in held(tmp_path)} == {(r[0], r[1]) for r in want}
    assert (shipment, efile) in {(r[0], r[1]) for r in held(tmp_path)}
