"""``process_end.exit_now``: a program's end as the interpreter's exit, without its teardown."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

PROGRAM = textwrap.dedent("""
    import atexit, sys, tempfile, threading, time
    from concurrent.futures import ThreadPoolExecutor
    from pathlib import Path
    from freight_pipeline.process_end import exit_now

    out = Path(sys.argv[1])
    atexit.register(lambda: (out / "atexit").write_text("ran"))
    def late() -> None:
        time.sleep(0.5)
        (out / "thread").write_text("joined")
    threading.Thread(target=late).start()  # not a daemon: awaited, as the interpreter's exit awaits it
    idle = ThreadPoolExecutor(2)  # never shut down: its workers are told to stop, or the exit would hang
    idle.submit(lambda: None).result()
    kept = tempfile.TemporaryDirectory(dir=out)  # never cleaned up: its finalizer runs at exit
    (out / "temporary").write_text(kept.name)

    class Cycle:
        def __del__(self) -> None:  # the teardown's garbage collection would call it
            (out / "collected").write_text("torn down")
    cycle = Cycle()
    cycle.me = cycle
    print("the last line, never flushed", end="")
    sys.stderr.write("said on stderr")
    exit_now(3)
""")


def test_exit_now_ends_as_the_interpreter_would_but_without_its_teardown(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", PROGRAM, str(tmp_path)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 3, done.stderr
    assert (done.stdout, done.stderr) == ("the last line, never flushed", "said on stderr")
    assert (tmp_path / "atexit").read_text() == "ran" and (tmp_path / "thread").read_text() == "joined"
    assert not Path((tmp_path / "temporary").read_text()).exists()
    assert not (tmp_path / "collected").exists()  # the teardown left out; a plain exit writes it (below)


def test_without_it_the_same_program_is_torn_down(tmp_path: Path) -> None:
    """The control of the test above: the cycle's ``__del__`` is the teardown's work, which ``exit_now`` skips."""
    program = PROGRAM.replace("exit_now(3)", "sys.exit(3)")
    done = subprocess.run([sys.executable, "-c", program, str(tmp_path)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 3, done.stderr
    assert (tmp_path / "collected").read_text() == "torn down"


STOPPING = textwrap.dedent("""
    import json, os, signal, time
    from freight_pipeline.process_end import signals_noted, stop_signal, terminated_as_interrupted

    said = {}
    with terminated_as_interrupted():
        ours = signal.getsignal(signal.SIGTERM)
        with signals_noted() as noted:  # a block that puts in handlers of its own, as a Dagster run does
            signal.signal(signal.SIGTERM, lambda signum, frame: None)
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.1)
        said["noted"], said["first"] = noted, stop_signal()
        said["put back"] = signal.getsignal(signal.SIGTERM) is ours

        with signals_noted() as noted_by_the_worker:
            worker = os.fork()  # a forked worker inherits the handler: SIGTERM is its parent's to handle
            if worker == 0:
                time.sleep(0.5)
                os._exit(7)
            time.sleep(0.1)
            os.kill(worker, signal.SIGTERM)  # to it alone: not one to its parent
            said["worker"] = os.waitstatus_to_exitcode(os.waitpid(worker, 0)[1])
        said["worker's noted"] = noted_by_the_worker

        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(10)
        except KeyboardInterrupt:  # as Ctrl-C would
            said["interrupted"] = True
    said["after"] = signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    print(json.dumps(said))
""")


def _as_a_terminal_starts_it() -> None:
    """Ctrl-C and SIGTERM at their defaults, whatever the test process was started with (a background job of a
    script ignores SIGINT; a CI runner may ignore more)."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_DFL)


def test_sigterm_stops_as_ctrl_c_does_noted_even_under_handlers_of_a_block_and_not_in_a_forked_worker() -> None:
    done = subprocess.run([sys.executable, "-c", STOPPING], capture_output=True, text=True, timeout=60, check=False,
                          preexec_fn=_as_a_terminal_starts_it)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"noted": [signal.SIGTERM], "first": signal.SIGTERM, "put back": True,
                                       "worker": 7, "worker's noted": [], "interrupted": True, "after": True}


IGNORING_CTRL_C = textwrap.dedent("""
    import asyncio, json, os, signal
    from freight_pipeline.process_end import terminated_as_interrupted

    said = {"ignored before": signal.getsignal(signal.SIGINT) == signal.SIG_IGN}

    async def run() -> None:
        loop = asyncio.get_running_loop()
        loop.call_later(0.1, os.kill, os.getpid(), signal.SIGINT)  # Ctrl-C: still not for this process
        loop.call_later(0.3, os.kill, os.getpid(), signal.SIGTERM)
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:  # the event loop's way: its task cancelled, its blocks left in order
            said["cancelled"] = True
            raise

    with terminated_as_interrupted(), asyncio.Runner() as runner:
        try:
            runner.run(run())
        except KeyboardInterrupt:  # once its task ended (raised amid the loop, before: its tasks cancelled after)
            said["interrupted once cancelled"] = said.get("cancelled", False)
    said["ignored after"] = signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    print(json.dumps(said))
""")


def test_sigterm_cancels_an_event_loop_s_task_in_a_program_started_with_ctrl_c_ignored() -> None:
    """A background job of a shell script starts with SIGINT ignored: Ctrl-C stays ignored, and SIGTERM still
    stops it as an event loop stops on Ctrl-C (its task cancelled), not by a KeyboardInterrupt amid the loop."""
    done = subprocess.run([sys.executable, "-c", IGNORING_CTRL_C], capture_output=True, text=True, timeout=60,
                          check=False, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"ignored before": True, "cancelled": True, "interrupted once cancelled": True,
                                       "ignored after": True}


LEFT_WAITING = textwrap.dedent("""
    import argparse, multiprocessing, signal, sys, time
    from freight_pipeline import cli

    def wait_for_work() -> None:  # a forked worker whose pool's shutdown a second Ctrl-C cut short
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        time.sleep(300)

    def add_arguments(parser: argparse.ArgumentParser) -> None:
        pass

    def run(args: argparse.Namespace) -> int:
        multiprocessing.get_context("fork").Process(target=wait_for_work).start()
        raise KeyboardInterrupt  # the stop

    cli.SUBCOMMANDS["stopped"] = ("__main__", "a command a stop ends with a worker left waiting")
    sys.argv[1:] = ["stopped"]
    cli.entry()
""")


def test_a_stopped_command_ends_without_waiting_for_a_forked_worker_left_waiting_for_work() -> None:
    """The exit waits for every process ``multiprocessing`` forked (its exit hook joins them): a worker left waiting
    for work after a stop held the command's end forever (seen after a few Ctrl-C in a sync's shipments)."""
    program = subprocess.Popen([sys.executable, "-c", LEFT_WAITING], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, start_new_session=True)
    try:
        _, err = program.communicate(timeout=30)
    finally:  # the worker too, whatever happened
        with contextlib.suppress(ProcessLookupError):
            os.killpg(program.pid, signal.SIGKILL)
        program.wait()
    assert program.returncode == 130, err
    assert err == "freight-pipeline stopped: interrupted (Ctrl-C); exit 130\n"


STOP_MET_ELSEWHERE = textwrap.dedent("""
    import gc, json, os, signal, sqlite3, sys
    import sqlalchemy
    from freight_pipeline.process_end import signals_noted, stop_requested

    class Interrupted(BaseException):  # as Dagster's DagsterExecutionInterruptedError, raised by its handler
        pass

    def interrupt(signum, frame):
        raise Interrupted()

    class StoppedWhileClosing(sqlite3.Connection):
        def close(self) -> None:
            os.kill(os.getpid(), signal.SIGTERM)  # the handler raises here, inside the pool's close
            super().close()

    class FailingToClose(sqlite3.Connection):
        def close(self) -> None:
            super().close()
            raise ValueError("a fault of its own")

    def closed_by_the_pool(factory) -> str:
        engine = sqlalchemy.create_engine("sqlite://", poolclass=sqlalchemy.pool.NullPool,
                                          creator=lambda: sqlite3.connect(":memory:", factory=factory))
        try:
            with engine.connect() as connection:
                connection.exec_driver_sql("select 1")
        except BaseException as exc:
            return type(exc).__name__
        return "none"

    class RaisingWhenCollected:
        def __init__(self, kind) -> None:
            self.kind, self.me = kind, self  # a cycle: collected by the garbage collector
        def __del__(self) -> None:
            raise self.kind()

    said = {}
    which = sys.argv[1]
    with signals_noted():
        signal.signal(signal.SIGTERM, interrupt)  # a block's own handler, as a Dagster run's
        if which == "stop in a close":
            said["raised"] = closed_by_the_pool(StoppedWhileClosing)
        elif which == "fault in a close":
            said["raised"] = closed_by_the_pool(FailingToClose)
        else:
            if which == "stop in a collection":
                signal.signal(signal.SIGTERM, lambda signum, frame: None)
                os.kill(os.getpid(), signal.SIGTERM)
            RaisingWhenCollected(KeyboardInterrupt)
            gc.collect()
        said["stop requested"] = stop_requested()
    sys.stdout.write(json.dumps(said))
""")


def test_a_noted_stop_met_by_other_code_is_not_printed_as_a_fault_there_and_anything_else_still_is() -> None:
    """SQLAlchemy's pool logs an exception met closing a connection, with its traceback, before raising it again:
    a SIGTERM'd Dagster run printed one for its stop (CI, once in many runs), and a stop raised in a garbage
    collector's callback is printed by the interpreter. Noted as a stop, neither is printed; a fault, or a
    KeyboardInterrupt with no stop noted, still is."""
    said = {}
    for which in ("stop in a close", "fault in a close", "stop in a collection", "interrupt without a stop"):
        done = subprocess.run([sys.executable, "-c", STOP_MET_ELSEWHERE, which], capture_output=True, text=True,
                              timeout=60, check=False, preexec_fn=_as_a_terminal_starts_it)
        assert done.returncode == 0, done.stderr
        said[which] = (json.loads(done.stdout), done.stderr)
    assert said["stop in a close"] == ({"raised": "Interrupted", "stop requested": True}, "")
    assert said["stop in a collection"] == ({"stop requested": True}, "")
    closed, logged = said["fault in a close"]
    assert closed == {"raised": "none", "stop requested": False}
    assert logged.startswith("Exception closing connection") and "ValueError: a fault of its own" in logged
    collected, printed = said["interrupt without a stop"]
    assert collected == {"stop requested": False}
    assert printed.startswith("Exception ignored in") and "KeyboardInterrupt" in printed
