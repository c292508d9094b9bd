"""Each kind of notice (``NoticeKind``, enumerated) met over HTTP against the simulator, then a second run against
the same service: a kind that lasts is said again by every stream that said it (its alert stays open), even when
nothing changed in between; an event or a finding is not (its alert resolves)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from freight_pipeline.simulator.config import FaultConfig
from freight_pipeline.simulator.server import running_simulator
from freight_pipeline.sync.result import NoticeKind, StreamResult
from freight_pipeline_tests.sync.conftest import syncer, work_db
from freight_pipeline_tests.sync.expected import assert_converged
from freight_pipeline_tests.sync.faulty_sources import RefusesIdIn, factory
from freight_pipeline_tests.sync.settings import TEST_SETTINGS

PROBED = TEST_SETTINGS.replaced(restore_probe=50)
"""The restore probe on, as by default."""
Results = dict[str, StreamResult]


def restore(data_dir: Path) -> tuple[Results, Results]:
    """The test server's nightly reset (its data goes back), then a run against it as it is."""
    with running_simulator(shipments=20, seed=5, control=True) as sim:
        sync = syncer(sim, data_dir, publish_after=False)
        sync(PROBED)
        sim.advance_clock(60)
        sim.modify_shipments(5)
        sim.advance_clock(60)
        sync(PROBED)
        sim.reset_to_snapshot()
        sim.advance_clock(60)
        met = sync(PROBED)
        sim.advance_clock(60)
        return met, sync(PROBED)


def restore_probe_refused(data_dir: Path) -> tuple[Results, Results]:
    """A service that refuses the probe's ``ID IN`` lookup, a run with changes and one without."""
    with running_simulator(shipments=20, seed=3) as sim:
        sync = syncer(sim, data_dir, publish_after=False)
        sync(PROBED)
        sim.modify_shipments(3)
        make, _ = factory(RefusesIdIn)
        met = sync(PROBED, source_factory=make)
        again = sync(PROBED, source_factory=make)
        assert_converged(sim.store, work_db(data_dir))  # the stream goes on without the probe
        shipments = met["shipments"]
        assert shipments.extra["restore_probe"]["refused"].startswith("BadRequestError: 400 Bad Request")
        assert any(n.startswith("the service refused the restore probe's ID IN lookup") for n in shipments.notices)
        return met, again


def clock_without_offset(data_dir: Path) -> tuple[Results, Results]:
    """Date-times without an offset, then a run where nothing changed (the documents stream reads none)."""
    with running_simulator(shipments=20, seed=9, naive_clock="Europe/Berlin") as sim:
        sync = syncer(sim, data_dir, publish_after=False)
        met = sync(PROBED)
        again = sync(PROBED)
        assert "naive_datetimes" not in again["documents"].extra  # it read no date-time: nothing to judge by
        return met, again


def changes_without_stamp(data_dir: Path) -> tuple[Results, Results]:
    """Estimates moved without the shipment's stamp, found by a sample of every open shipment, then moved again."""
    settings = PROBED.replaced(freshness_sample=50)
    with running_simulator(shipments=20, seed=9) as sim:
        sync = syncer(sim, data_dir, publish_after=False)
        sync(settings)
        assert sim.change_in_background(4)
        sim.advance_clock(900)
        met = sync(settings)
        assert sim.change_in_background(4)
        sim.advance_clock(900)
        return met, sync(settings)


def memo_batch_off(data_dir: Path) -> tuple[Results, Results]:
    """A memo lookup that refuses several shipment numbers, then a run where nothing changed."""
    with running_simulator(shipments=20, seed=11, faults=FaultConfig(memo_lookup_by_one=True)) as sim:
        sync = syncer(sim, data_dir, publish_after=False)
        return sync(PROBED), sync(PROBED)


MEETS: dict[NoticeKind, Callable[[Path], tuple[Results, Results]]] = {
    NoticeKind.RESTORE: restore,
    NoticeKind.RESTORE_PROBE_REFUSED: restore_probe_refused,
    NoticeKind.CLOCK_WITHOUT_OFFSET: clock_without_offset,
    NoticeKind.CHANGES_WITHOUT_STAMP: changes_without_stamp,
    NoticeKind.MEMO_BATCH_OFF: memo_batch_off,
}


def saying(results: Results, kind: NoticeKind) -> set[str]:
    """The streams whose run said a notice of ``kind``."""
    return {stream for stream, result in results.items() if kind in result.extra.get("notice_kinds", [])}


@pytest.mark.parametrize("kind", list(NoticeKind))
def test_a_kind_that_lasts_is_said_again_by_the_next_run_and_an_event_is_not(kind: NoticeKind, tmp_path: Path) -> None:
    met, again = MEETS[kind](tmp_path)
    said = saying(met, kind)
    assert said and all(result.status == "success" for result in (*met.values(), *again.values()))
    assert saying(again, kind) == (said if kind.lasts else set()), kind.said_by
