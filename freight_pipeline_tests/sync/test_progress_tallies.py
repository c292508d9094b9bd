"""The tallies a real run tells a listener (what the command line's progress bar shows), against the simulator over
HTTP: the total the change walk announces before the first batch is written, the shipments done up to it, the
requests and retries counted as the client made them, and each stream's last tally."""

from __future__ import annotations

import threading
from pathlib import Path

from freight_pipeline.simulator.config import FaultConfig
from freight_pipeline.simulator.server import running_simulator
from freight_pipeline.sync.progress import Tally, tallies_to
from freight_pipeline_tests.sync.conftest import syncer
from freight_pipeline_tests.sync.settings import TEST_SETTINGS


class Heard:
    """A thread-safe listener keeping every tally it hears."""

    def __init__(self) -> None:
        self.tallies: list[Tally] = []
        self._lock = threading.Lock()

    def __call__(self, tally: Tally) -> None:
        with self._lock:
            self.tallies.append(tally)

    def of(self, stream: str) -> list[Tally]:
        return [tally for tally in self.tallies if tally.stream == stream]


def test_a_full_then_an_incremental_run_tell_each_stream_s_progress(tmp_path: Path) -> None:
    # one request in 20 answered 500: the retries are counted as they happen
    faults = FaultConfig(seed=3, server_error_rate=0.05, paths=frozenset({"/service/shipment/{id}"}))
    with running_simulator(shipments=120, seed=9, faults=faults) as sim:
        run = syncer(sim, tmp_path)
        heard = Heard()
        with tallies_to(heard):
            results = run()
        again = Heard()
        with tallies_to(again):
            run()
        run()  # no listener: nothing is told

    shipments = heard.of("shipments")
    first = shipments[0]
    assert (first.done, first.total, first.total_final) == (0, 120, True)  # announced before any batch
    assert [t.done for t in shipments] == sorted(t.done for t in shipments)
    assert all(t.total == 120 for t in shipments)
    assert shipments[-1].ended and shipments[-1].done == 120 and not any(t.ended for t in shipments[:-1])
    assert len(shipments) >= 120 // TEST_SETTINGS.fetch_batch_size  # a tally per batch
    assert [t.requests for t in shipments] == sorted(t.requests for t in shipments)
    assert (shipments[-1].requests, shipments[-1].retries) == (results["shipments"].requests,
                                                               results["shipments"].retries)
    assert shipments[-1].retries > 0
    documents = heard.of("documents")
    assert (documents[0].done, documents[0].total) == (0, 120) and documents[-1].ended
    assert documents[-1].requests == results["documents"].requests
    (conversions,) = heard.of("code_conversions")
    assert conversions.ended and conversions.done == results["code_conversions"].rows_read > 0
    assert conversions.unit == "conversions"
    # nothing changed since: the walk re-reads only its overlap, whose held copies are current
    incremental = again.of("shipments")
    assert incremental[-1].ended and incremental[-1].done == incremental[-1].total < 120
