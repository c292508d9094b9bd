"""A sync process for the crash trials: :class:`CrashSync`.

Service from FREIGHT_BASE_URL / FREIGHT_USERNAME / FREIGHT_PASSWORD; reconciliation on every run
(deletions happen between trials). Tiny lookup pages, fetch batches and detail batches, so the run
the parent kills is many transactions. Says one line per progress message (``progress`` is called
right after each batch's transaction commits), ``publishing`` before the publish, then ``done``.
``FREIGHT_HEDGE_SHARE`` sets its hedged reads (``0``: none, so
a read in the simulator's latency tail stays a straggler). ``in_order``: one shipment fetched at a time, so its
batches commit in the walk's order (else a batch after the first may commit before it).
The parent kills it after a chosen line (``hold``: the child stops at the first line holding that text,
committing nothing more, so the kill lands right there however fast the machine); its reruns run in the
test's own process with ``RECONCILE_SETTINGS`` (the test suite's sizes, to finish quickly).
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from multiprocessing.connection import Connection
from pathlib import Path

from freight_pipeline.config import load_settings
from freight_pipeline.lake.backend import storage_from_env
from freight_pipeline.sync.runner import sync_all
from freight_pipeline_tests.sync.settings import RECONCILE_SETTINGS

CRASH_SETTINGS = RECONCILE_SETTINGS.replaced(page_size=10, fetch_batch_size=5)


def run(data_dir: Path, run_id: str, say: Callable[[str], None], in_order: bool = False) -> None:
    backend = storage_from_env()
    configured = load_settings()
    settings = CRASH_SETTINGS.replaced(hedge_share=configured.sync.hedge_share)
    if in_order:
        settings = settings.replaced(fetch_window=1)
    sync_all(configured.service, data_dir, settings, backend=backend, run_id=run_id, progress=say,
             publish_after=False)
    say("publishing")
    backend.publish(data_dir, run_id)
    say("done")


def _forked(env: Mapping[str, str], data_dir: str, run_id: str, log: str, lines: Connection, hold: str | None,
            in_order: bool) -> None:
    """The child's body: ``env`` as its environment, its stderr appended to ``log``, its lines sent; at the
    first line holding ``hold``, it waits for its kill."""
    os.environ.clear()
    os.environ.update(env)
    stderr = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    os.dup2(stderr, 2)

    def say(line: str) -> None:
        lines.send(line + "\n")
        if hold is not None and hold in line:
            threading.Event().wait()

    try:
        run(Path(data_dir), run_id, say, in_order)
    finally:
        lines.send(None)


class CrashSync:
    """:func:`run` in a child process forked from a fork server that imported this module once (a child
    of its own would spend about 2 s of CPU importing the sync): ``stdout`` yields its lines, as a
    ``subprocess.Popen``'s would; ``kill`` is a SIGKILL."""

    def __init__(self, env: Mapping[str, str], data_dir: Path, run_id: str, log: Path, *, hold: str | None = None,
                 in_order: bool = False) -> None:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload([__name__])  # once the server runs, it has them imported
        reader, writer = context.Pipe(duplex=False)
        self.process = context.Process(target=_forked, args=(dict(env), str(data_dir), run_id, str(log), writer, hold,
                                                                   in_order))
        self.process.start()
        writer.close()
        self.stdout = self._lines(reader)

    @staticmethod
    def _lines(reader: Connection) -> Iterator[str]:
        while True:
            try:
                line = reader.recv()
            except EOFError:  # killed: its end of the pipe closed
                return
            if line is None:
                return
            yield line

    def poll(self) -> int | None:
        return self.process.exitcode

    def kill(self) -> None:
        self.process.kill()

    def wait(self, timeout: float | None = None) -> int | None:
        self.process.join(timeout)
        return self.process.exitcode
