"""The shipments stream's batches normalized in a worker process (``sync.workers``, its rows made into Arrow a
few shipments at a time) write what the sync's own process writes (a batch's rows made into Arrow at once):
every table's rows, the raw kept, the fields read, and each count a run records (the parts, the
data problems, the date-times read without a UTC offset), over HTTP against the simulator's clock without an
offset; a worker that dies fails the stream loudly with nothing of its batch written."""

from __future__ import annotations

import datetime as dt
import os
import signal
from pathlib import Path

import duckdb
import pytest

from freight_pipeline.normalize.tables import FREIGHT_TABLES
from freight_pipeline.simulator.server import running_simulator
from freight_pipeline.sync import assemble, shipments, workers
from freight_pipeline.sync.runner import naive_clock_notice
from freight_pipeline.sync.settings import SyncSettings
from freight_pipeline.warehouse import meta
from freight_pipeline.warehouse.ddl import quote
from freight_pipeline_tests.sync.conftest import syncer, work_db

BERLIN = "Europe/Berlin"
SETTINGS = SyncSettings(page_size=25, fetch_batch_size=13, concurrency=8, retry_after=dt.timedelta(0),
                        service_timezone=BERLIN)
KEPT: dict[str, tuple[str, ...]] = {
    meta.RAW_SHIPMENTS.qualified_name: ("shipment_id", "document", "last_modified_at", "last_modified_key",
                                        "content_hash"),
    meta.RAW_PARTS.qualified_name: ("stream", "shipment_id", "answer", "answer_bytes"),
    meta.DATA_PROBLEMS.qualified_name: ("stream", "record_key", "json_path", "raw_value", "reason"),
    meta.SOURCE_FIELDS.qualified_name: ("stream", "field", "declared", "state", "records_read", "records_with"),
}
"""The columns of the ``freight_meta`` tables a batch writes that do not name a run or an instant of it."""


def _rows(database: Path) -> dict[str, list[tuple]]:
    """Every freight table's rows (business columns) and the run-independent columns of :data:`KEPT`, sorted."""
    columns = {spec.qualified_name: tuple(c.name for c in spec.columns) for spec in FREIGHT_TABLES} | KEPT
    with duckdb.connect(str(database), read_only=True) as con:
        return {name: sorted(con.execute(f"SELECT {', '.join(map(quote, cols))} FROM {name}").fetchall(), key=repr)
                for name, cols in columns.items()}


def test_a_worker_process_writes_what_the_sync_writes_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with running_simulator(shipments=40, seed=9, naive_clock=BERLIN) as sim:
        here = syncer(sim, tmp_path / "here", publish_after=False)(SETTINGS.replaced(normalize_workers=0))
        monkeypatch.setattr(assemble, "ARROW_EVERY", 3)  # the worker's batches of 13 made into Arrow in 5 parts
        there = syncer(sim, tmp_path / "there", publish_after=False)(SETTINGS.replaced(normalize_workers=1))
    mine, theirs = here["shipments"], there["shipments"]
    assert (mine.extra["normalize_workers"], theirs.extra["normalize_workers"]) == (0, 1)
    assert mine.extra["naive_datetimes"]["read"] == theirs.extra["naive_datetimes"]["read"] > 40
    assert naive_clock_notice(BERLIN) in theirs.notices
    assert mine.extra["parts"] == theirs.extra["parts"] and theirs.extra["parts"]["shipments"]["loaded"] == 40
    assert (mine.rows_written, mine.data_problems) == (theirs.rows_written, theirs.data_problems)
    held, made = _rows(work_db(tmp_path / "here")), _rows(work_db(tmp_path / "there"))
    assert all(held[name] for name in KEPT if name != meta.DATA_PROBLEMS.qualified_name)
    for name in held:
        assert held[name] == made[name], name


def _dies(*_: object) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def test_a_worker_that_dies_fails_the_stream_and_writes_nothing_of_its_batch(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker killed (the kernel's OOM killer, an operator) is no record's fault: the stream fails, naming it,
    and nothing is written; the next run (here, in the sync's own process) reads everything."""
    monkeypatch.setattr(workers, "_assembled_there", _dies)  # forked after this: the worker runs it
    with running_simulator(shipments=20, seed=9) as sim:
        sync = syncer(sim, tmp_path, publish_after=False)
        with pytest.raises(workers.WorkerGone, match="FREIGHT_NORMALIZE_WORKERS=0"):
            sync(SETTINGS.replaced(normalize_workers=1))
        with duckdb.connect(str(work_db(tmp_path)), read_only=True) as con:
            assert con.execute("SELECT count(*) FROM freight.shipments").fetchall() == [(0,)]
        monkeypatch.undo()
        assert sync(SETTINGS.replaced(normalize_workers=0))["shipments"].extra["parts"]["shipments"]["loaded"] == 20


def test_the_default_worker_is_forked_once_a_run_passes_its_share_in_whichever_read_and_writes_the_same(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``normalize_workers`` unset: a run of at most :data:`workers.IN_PROCESS_UP_TO` shipments is normalized in
    the sync's own process; past that, the worker is forked, in the walk or in a read after it (here the sample
    of open shipments, which finds estimates moved without a stamp): as soon as the work listed passes it
    (``Assembler.foresee``), and else (a data directory whose runs foresee nothing) before the batch that does.
    Synced side by side from one simulator, twice, every data directory holds what the sync normalizing in its
    own process writes."""
    forks: list[tuple[str, int]] = []  # the data directory, and the shipments handed over before the fork
    start, foresee = workers.Assembler.start, workers.Assembler.foresee
    syncing = [""]

    def counted(self: workers.Assembler) -> None:
        if self.pool is None and self.workers:
            forks.append((syncing[0], self.shipments))
        start(self)

    monkeypatch.setattr(workers.Assembler, "start", counted)
    handed = "handed over in the walk"
    first_up_to = {"here": 0, "listed in the walk": 20, handed: 20, "after the walk": 100}

    def sync(name: str) -> dict:
        """``name``'s run: the default worker but ``here``; ``handed``'s runs foresee nothing."""
        syncing[0] = name
        monkeypatch.setattr(workers.Assembler, "foresee", (lambda self, listed: None) if name == handed else foresee)
        # a sample of every shipment held, so that it finds each one changed in the background whatever the order
        chosen = SETTINGS.replaced(normalize_workers=0 if name == "here" else None, freshness_sample=40)
        return syncer(sim, tmp_path / name, publish_after=False)(chosen)["shipments"].extra

    with running_simulator(shipments=40, seed=9) as sim:
        first: dict[str, dict] = {}
        for name, up_to in first_up_to.items():
            monkeypatch.setattr(shipments, "IN_PROCESS_UP_TO", up_to)
            first[name] = sync(name)
        # 40 listed at the walk's first page, before any fetch; else the second batch of 13 passes 20
        assert forks == [("listed in the walk", 0), (handed, 26)]
        assert [first[name]["normalize_workers"] for name in first_up_to] == [0, 1, 1, 0]
        sim.modify_shipments(2)
        sim.change_in_background(6)
        forks.clear()
        monkeypatch.setattr(shipments, "IN_PROCESS_UP_TO", 10)  # above the walk's few, below the sample's
        second = {name: sync(name) for name in first_up_to}
    walked = {second[name]["parts"]["shipments"]["loaded"] for name in first_up_to}
    sampled = {second[name]["freshness"]["sampled"] for name in first_up_to}
    assert len(walked) == len(sampled) == 1 and max(walked) <= 10 < max(walked) + max(sampled), (walked, sampled)
    (w,) = walked  # listed: before the sample's first fetch; handed over: before its first batch's write
    assert [name for name, _ in forks] == ["listed in the walk", handed, "after the walk"]
    assert forks[0][1] == forks[2][1] == w < forks[1][1] <= w + 13, (forks, walked)
    assert {second[name]["freshness"]["sample_differed"]["shipment_events"] for name in first_up_to} == {6}
    held = _rows(work_db(tmp_path / "here"))
    for name in list(first_up_to)[1:]:
        made = _rows(work_db(tmp_path / name))
        for table in held:
            assert held[table] == made[table], (name, table)
