"""The end of a process this package runs as its own program (the ``freight-pipeline`` command, the dbt workers'
server): what the interpreter's exit does for the program, without its teardown of every module and object; and
its end when asked to stop (Ctrl-C's SIGINT, SIGTERM, or its terminal's SIGHUP), which it notes to say which, and the
exit code of each."""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import signal
import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import NoReturn


def exit_now(code: int) -> NoReturn:
    """End the process with ``code`` as the interpreter's exit would, in its order: the threads' end awaited
    (``threading._shutdown``, which ``Py_FinalizeEx`` calls first: the executors told to stop, every thread that is
    not a daemon joined), the ``atexit`` callbacks run (logging flushed, multiprocessing's children ended, weakref
    finalizers such as temporary directories'), the standard streams flushed. Left out is the teardown after that,
    the garbage collector's passes over every object the run loaded, measured at a slow hour: with Dagster's
    definitions imported (200,000 objects) 3.7-8.1 s of CPU after the work was done, a sync without Dagster 1.3-1.8 s,
    the dbt workers' server with dbt's parsed project 13-18 s (``bench/log.md``, twenty-eighth round)."""
    threading._shutdown()  # type: ignore[attr-defined]  # the interpreter's own first step of its exit
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def forked_children_ended() -> None:
    """The processes this one forked through ``multiprocessing`` (a sync's or a rebuild's normalizing workers, which
    leave a stop to it) killed, for a program a stop ended: one can be left waiting for work that will never come
    (its pool's shutdown cut short, by a second Ctrl-C in it), and the exit (:func:`exit_now`: ``concurrent.futures``'
    and ``multiprocessing``'s exit hooks) would wait for it forever. Nothing it was given is to be committed."""
    import multiprocessing

    for child in multiprocessing.active_children():
        with contextlib.suppress(OSError):
            child.kill()


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""The signals that ask a program to stop: Ctrl-C's, the one a service manager, ``kill`` or ``timeout`` sends, and
the one its terminal sends as it goes away (its window closed, the SSH session dropped)."""


def stop_signals_taken() -> tuple[int, ...]:
    """:data:`STOP_SIGNALS` a program handles as stops: SIGHUP not where it is ignored (``nohup``: the program was
    started to outlive its terminal)."""
    return tuple(s for s in STOP_SIGNALS if s != signal.SIGHUP or signal.getsignal(s) != signal.SIG_IGN)


_terminals: list[int] = []
"""The standard output and error that were a terminal as :func:`terminated_as_interrupted` began (a terminal hung
up is one no more to ``isatty``: it answers EIO)."""


def _terminal_gone() -> None:
    """After SIGHUP: the standard output and error that were a terminal (gone, it refuses every write: EIO) written
    to ``/dev/null`` instead, whoever writes them (a print, a log handler, the progress bars' thread), so that the
    program's stop goes on to its end (its lock let go, its run logged) instead of failing on its first line."""
    for fd in _terminals:
        with contextlib.suppress(OSError):
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, fd)
            os.close(null)


_received: list[int] = []
"""The stop signals this process received while it noted them (:func:`terminated_as_interrupted`,
:func:`signals_noted`), in the order they came."""


def query_interrupted(error: BaseException) -> bool:
    """Whether ``error`` is a DuckDB query's own error for a stop met inside it: Ctrl-C's KeyboardInterrupt (or
    SIGTERM's, handled as it) taken as ``RuntimeError: Query interrupted``, or the connection's ``interrupt()`` as
    ``InterruptException``. A block that falls back on a query's error (another way to the same end) must not take
    it for one: the run was asked to stop."""
    return type(error).__name__ == "InterruptException" or (
        isinstance(error, RuntimeError) and str(error).strip() == "Query interrupted")


def signal_exit_code(signum: int) -> int:
    """The exit code of a program a signal stopped, as a shell reports it: 128 + the signal's number (Ctrl-C's
    SIGINT 130, SIGTERM 143)."""
    return 128 + signum


def stop_signal() -> int | None:
    """The first stop signal this process received (noted), None when none was."""
    return _received[0] if _received else None


_handled_in: list[int] = []
"""The process that put in :func:`_as_interrupted` (a process forked from it inherits the handler)."""


def _as_interrupted(signum: int, frame: FrameType | None) -> None:
    """SIGTERM's and SIGHUP's handler: noted, then handled by SIGINT's handler in force (asyncio's cancels the
    running task, the interpreter's raises KeyboardInterrupt), or KeyboardInterrupt raised when SIGINT's is not a
    function (a block that set it so); after SIGHUP, what the terminal gone refuses to print is dropped. A process
    forked from this one (a sync's normalizing worker) leaves it to this one, as it leaves Ctrl-C: a stop sent to the
    whole group (systemd's, a terminal's) ends the run once, cleanly, and the workers with it (ended abruptly, they
    would fail the batch in their hands with a traceback of their own)."""
    if os.getpid() not in _handled_in:
        return
    _received.append(signum)
    if signum == signal.SIGHUP:
        _terminal_gone()
    interrupt = signal.getsignal(signal.SIGINT)
    if callable(interrupt):
        interrupt(signal.SIGINT, frame)
        return
    raise KeyboardInterrupt


@contextmanager
def terminated_as_interrupted() -> Iterator[None]:
    """For the block (in the main thread): SIGTERM, and SIGHUP unless ignored (``nohup``), stop the program as
    Ctrl-C does, through the same handlers, ``finally`` blocks and exit (the writer lock let go, the workers ended,
    one line said), noted as such (:func:`stop_signal`). Without it either ends the process where it stands, saying
    nothing.

    A program started with SIGINT ignored (a background job of a shell script) keeps Ctrl-C out by a mask instead
    (blocked in this thread and the threads and processes it starts): SIGINT's handler is then the interpreter's,
    which an event loop (``asyncio.Runner``) replaces by its own, that cancels its task; SIGTERM goes through it.
    Raised in the middle of the loop instead, KeyboardInterrupt leaves the sync's writer in a statement, and the
    run fails on that (``ResourceInUseException``, exit 1)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    ignored = signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    if ignored:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        signal.signal(signal.SIGINT, signal.default_int_handler)
    _received.clear()  # the stops of this block (a test runs commands one after the other in one process)
    _handled_in.append(os.getpid())
    taken = [s for s in stop_signals_taken() if s != signal.SIGINT]
    _terminals[:] = [fd for fd in (1, 2) if os.isatty(fd)]
    previous = {s: signal.signal(s, _as_interrupted) for s in taken}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        _handled_in.remove(os.getpid())
        if ignored:  # a Ctrl-C pending under the mask is discarded as it is ignored again
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


_noting: list[int] = []
"""The pipes :func:`signals_noted` reads its signals from (their write ends), while it does."""


def _forked() -> None:
    """In a process forked in :func:`signals_noted` (a rebuild's normalizing worker): the signals it catches are
    not written to its parent's pipe (a SIGTERM to the worker alone would read as one to the parent)."""
    if _noting:
        with contextlib.suppress(ValueError):  # not forked from the main thread: its wakeup fd is not settable
            signal.set_wakeup_fd(-1)


os.register_at_fork(after_in_child=_forked)


@contextmanager
def signals_noted() -> Iterator[list[int]]:
    """The stop signals that arrive in the block, in the list yielded once it ends (and noted: :func:`stop_signal`),
    whoever handled them: SIGTERM's handler here (:func:`terminated_as_interrupted`), or a handler the block puts in
    (a Dagster run handles SIGTERM as SIGINT, and leaves SIGTERM's handler as SIGINT's when it ends: put back
    after the block), or the interpreter's for Ctrl-C, whose KeyboardInterrupt a DuckDB query turns into an error
    of its own (``RuntimeError: Query interrupted``): from the bytes the interpreter writes to its wakeup file
    descriptor for each signal a Python handler catches (an event loop's own descriptor takes them while it runs;
    ``asyncio.Runner`` stops on Ctrl-C by itself).

    A noted stop's exception that code not ours meets on its way is not printed as a fault there: logged with its
    traceback (SQLAlchemy's pool, a connection's close interrupted: it logs, then raises it again) or printed as
    raised in a garbage collector's callback (:func:`stop_requested` finds that stop). The program says it once."""
    noted: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield noted
        return
    before = len(_received)
    term = signal.getsignal(signal.SIGTERM)
    read, write = os.pipe()
    os.set_blocking(read, False)
    os.set_blocking(write, False)
    previous = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    _noting.append(write)
    _noted_since.append((read, before))
    unraisable = sys.unraisablehook
    sys.unraisablehook = _printed_unless_a_noted_stop(unraisable)
    handlers = [h for h in (logging.lastResort, *logging.getLogger().handlers) if h is not None]
    for handler in handlers:
        handler.addFilter(_logged_unless_a_noted_stop)
    try:
        yield noted
    finally:
        for handler in handlers:
            handler.removeFilter(_logged_unless_a_noted_stop)
        sys.unraisablehook = unraisable
        signal.set_wakeup_fd(previous)
        _noting.remove(write)
        _noted_since.remove((read, before))
        if term is not None:  # None: a handler not installed from Python, which cannot be put back
            signal.signal(signal.SIGTERM, term)
        _take_in(read, before)
        os.close(read)
        os.close(write)
        noted.extend(_received[before:])


_noted_since: list[tuple[int, int]] = []
"""The read end of each :func:`signals_noted` block's pipe while it notes, and how many stops were noted before it."""


def _take_in(read: int, before: int) -> None:
    """The stop signals written to the pipe ``read`` so far, noted after the ``before`` first (each once)."""
    caught = bytearray()
    with contextlib.suppress(BlockingIOError):
        while chunk := os.read(read, 4096):  # a byte per signal caught, of every kind
            caught += chunk
    _received[before:] = dict.fromkeys([*_received[before:], *(s for s in caught if s in STOP_SIGNALS)])


_stops_asked: weakref.WeakSet[threading.Thread] = weakref.WeakSet()
"""The threads a stop was asked of (:func:`ask_stop`)."""
_stop_hooks: dict[threading.Thread, list[Callable[[], None]]] = {}
"""What ends the wait each thread is in that no signal reaches (:func:`on_stop`), by thread."""
_stops_lock = threading.Lock()


def ask_stop(thread: threading.Thread) -> None:
    """Stop what ``thread`` runs as a stop signal stops what the main thread runs (no signal reaches another
    thread): the stop noted for its steps to ask (:func:`stop_asked`), and the wait it is in ended at once, here,
    by what its block registered (:func:`on_stop`: its event loop's task cancelled, its dbt worker killed, its
    DuckDB statement interrupted)."""
    with _stops_lock:
        _stops_asked.add(thread)
        hooks = list(_stop_hooks.get(thread, ()))
    for hook in hooks:
        hook()


def stop_asked() -> bool:
    """Whether a stop was asked of the thread this runs in (:func:`ask_stop`)."""
    with _stops_lock:
        return threading.current_thread() in _stops_asked


def unless_stop_asked() -> None:
    """KeyboardInterrupt when a stop was asked of the thread this runs in (:func:`ask_stop`): where what it runs
    ends as the main thread's would on Ctrl-C (before a publish lets readers see it, say)."""
    if stop_asked():
        raise KeyboardInterrupt


@contextmanager
def on_stop(hook: Callable[[], None]) -> Iterator[None]:
    """While the block runs, a stop asked of this thread (:func:`ask_stop`) calls ``hook`` from the thread that asks:
    what ends a wait of this thread's that no signal reaches, after which the block raises KeyboardInterrupt, as
    the wait would in the main thread on Ctrl-C. KeyboardInterrupt at once, the block not begun, when a stop was
    asked before it."""
    thread = threading.current_thread()
    with _stops_lock:
        if thread in _stops_asked:
            raise KeyboardInterrupt
        _stop_hooks.setdefault(thread, []).append(hook)
    try:
        yield
    finally:
        with _stops_lock:
            hooks = _stop_hooks[thread]
            hooks.remove(hook)
            if not hooks:
                del _stop_hooks[thread]


def stop_requested() -> bool:
    """Whether a stop signal came since the innermost :func:`signals_noted` block began, whatever became of its
    handler's exception: one raised while the interpreter runs a garbage collector's callback is only printed
    (``Exception ignored in ...``) and the program goes on, and a DuckDB query takes Ctrl-C as an error of its own,
    which a block may take for another. A run asks before the steps that change what readers see (its build, its
    publish), so that a stop so lost never lets it publish. False outside such a block."""
    if not _noted_since:
        return False
    read, before = _noted_since[-1]
    _take_in(read, before)
    return len(_received) > before


def _a_noted_stop(kind: type[BaseException] | None) -> bool:
    """Whether an exception of ``kind`` is a stop's (not an ``Exception``: Ctrl-C's KeyboardInterrupt, Dagster's
    ``DagsterExecutionInterruptedError``) with a stop signal noted since the innermost :func:`signals_noted` block
    began: the program stops on it and says so itself."""
    return kind is not None and not issubclass(kind, Exception) and stop_requested()


def _logged_unless_a_noted_stop(record: logging.LogRecord) -> bool:
    """A handler's filter: a record is emitted unless it carries a noted stop's exception."""
    return not (record.exc_info and _a_noted_stop(record.exc_info[0]))


def _printed_unless_a_noted_stop(
    printing: Callable[[sys.UnraisableHookArgs], object],
) -> Callable[[sys.UnraisableHookArgs], None]:
    """``sys.unraisablehook`` that leaves out a noted stop's exception, and has ``printing`` print any other."""

    def hook(unraisable: sys.UnraisableHookArgs) -> None:
        if not _a_noted_stop(unraisable.exc_type):
            printing(unraisable)

    return hook
