"""A fork server of dbt workers: a process that has dbt imported and warmed up once and forks each worker
from itself.

A worker started as a new process (:meth:`~freight_pipeline.marts.worker.DbtWorker.for_run`) first spends
about 3 s of CPU importing dbt, then 1.6 s parsing the project (a partial parse), most of it dbt building
what it builds lazily on first use (its classes' serializers and JSON schemas). Where many workers start
on one machine (the test suite starts one per job run; a scheduler's runs), a server started once
(``python -m freight_pipeline.marts.worker_server --socket PATH``, until its input ends when that is a pipe, else
until SIGTERM) saves that: it
imports dbt and parses the project once (``marts.worker.warm_up``; a forked worker's own parse then
took 0.25 s where it took 1.6-1.7 s), and with :data:`DBT_WORKER_SERVER_ENV` naming its socket,
``DbtWorker.for_run`` asks it for the worker instead (:func:`forked_worker`), and gets a
:class:`ForkedWorker`, which the worker's handle uses as it would use a ``subprocess.Popen``.

The worker is the same ``main`` (of the module the request names: :data:`WORKER_MODULE`) with the same
arguments, environment, working folder, input (a pipe whose end ends it) and log; only the imports and
the warm-up are already done. The server forks with no other thread alive (it refuses to serve
otherwise). For each request it forks a waiter, which forks the worker, tells the client the worker's
pid, waits for it and tells its exit code (a worker is not the client's child, so the client could not
wait for it; a client gone meanwhile is not told).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import logging
import os
import random
import select
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Self

from freight_pipeline.process_end import exit_now

SERVER_MODULE = "freight_pipeline.marts.worker_server"
"""This module, as ``python -m`` runs it."""
WORKER_MODULE = "freight_pipeline.marts.worker"
"""The module whose ``main(argv)`` a forked worker runs (named, not imported: it imports this one)."""
PRELOAD = (WORKER_MODULE, "dbt.cli.main", "dbt.adapters.duckdb", "dbt.adapters.duckdb.connections",
           "dbt.adapters.duckdb.environments.local", "dbt.task.build", "dbt.parser.manifest", "dbt.version",
           "dbt_common.clients.agate_helper", "multiprocessing.dummy")
"""What the server imports before it forks anything: what every worker imports first."""
FORKED_WITHIN_S = 120.0
"""How long a run waits for the server to fork its worker (a server still warming up answers once warmed up: a few
seconds; one that takes longer is taken as wedged, and the run's worker is a process of its own)."""


class ForkedWorker:
    """A worker forked by the server, as much of a ``subprocess.Popen`` as the worker's handle uses:
    ``stdin`` (text; closing it ends the worker), ``wait``, ``kill``."""

    def __init__(self, stdin: IO[str], answers: socket.socket, pid: int) -> None:
        self.stdin = stdin
        self.pid = pid
        self.returncode: int | None = None
        self._answers = answers

    @classmethod
    def start(cls, server: str, argv: Sequence[str], env: Mapping[str, str], log: IO[str]) -> Self:
        """Have the server at socket ``server`` fork ``freight_pipeline.marts.worker.main(argv)`` with ``env``
        and this process's working folder, its output to ``log``. OSError when the server cannot be reached, or has not
        forked it within :data:`FORKED_WITHIN_S` (TimeoutError)."""
        reading, writing = os.pipe()
        answers = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        answers.settimeout(FORKED_WITHIN_S)
        try:
            answers.connect(server)
            socket.send_fds(answers, [b"W"], [reading, log.fileno()])
            request = {"module": WORKER_MODULE, "argv": list(argv), "env": dict(env), "cwd": os.getcwd()}
            answers.sendall(json.dumps(request).encode() + b"\n")
            pid = int(_line(answers))
            answers.settimeout(None)
        except BaseException:
            answers.close()
            os.close(writing)
            raise
        finally:
            os.close(reading)
        return cls(os.fdopen(writing, "w"), answers, pid)

    def wait(self, timeout: float | None = None) -> int:
        """The worker's exit code (negative: the signal that ended it), once it ended.
        ``subprocess.TimeoutExpired`` when it has not within ``timeout`` seconds."""
        if self.returncode is None:
            self._answers.settimeout(timeout)
            try:
                said = _line(self._answers)
            except TimeoutError:
                raise subprocess.TimeoutExpired(f"dbt worker {self.pid}", timeout or 0.0) from None
            self.returncode = int(said) if said else -signal.SIGKILL  # no word: its waiter was killed too
            self._answers.close()
        return self.returncode

    def poll(self) -> int | None:
        """The worker's exit code if it ended, else None."""
        if self.returncode is None and select.select([self._answers], [], [], 0)[0]:
            return self.wait()
        return self.returncode

    def kill(self) -> None:
        """SIGKILL the worker, unless it ended (its pid may be another process's by now)."""
        if self.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)


def forked_worker(argv: Sequence[str], env: Mapping[str, str], log: IO[str], server: str | None) -> ForkedWorker | None:
    """The worker ``argv`` forked by the server at the socket ``server`` (the setting ``dbt_worker_server``,
    :data:`DBT_WORKER_SERVER_ENV`); None when there is none, or it cannot be reached (the caller starts a process
    of its own)."""
    if not server:
        return None
    try:
        return ForkedWorker.start(server, argv, env, log)
    except (OSError, ValueError) as exc:  # said: a server that refused to serve leaves its reason in its own log only
        logging.getLogger(__name__).warning(
            "the fork server of dbt workers at %s did not answer (%s): this run's dbt worker is a process of its own, "
            "which imports dbt and parses the project itself", server, exc)
        return None


def start_server(socket_path: Path, env: Mapping[str, str] | None = None,
                 cwd: Path | None = None) -> tuple[subprocess.Popen[str], str]:
    """A server in a process of its own, listening at ``socket_path`` once this returns, and its first line
    (``ready (...)``: what its warm-up did); its input is the returned process's ``stdin`` (closing it ends
    the server). RuntimeError when it ended before it said it was ready."""
    process = subprocess.Popen([sys.executable, "-m", SERVER_MODULE, "--socket", str(socket_path)], env=env, cwd=cwd,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    said = process.stdout.readline()
    if not said.startswith("ready"):
        process.kill()
        process.wait()
        raise RuntimeError(f"the fork server of dbt workers did not start (it said {said!r})")
    return process, said.strip()


def _line(connection: socket.socket) -> str:
    """One line from ``connection`` (without its end); empty when the other side closed first."""
    said = bytearray()
    while not said.endswith(b"\n"):
        chunk = connection.recv(1)
        if not chunk:
            break
        said += chunk
    return said.decode().strip()


class _Stopped(Exception):
    """SIGTERM or SIGINT: the server ends (its socket file removed)."""


def _stop(signum: int, frame: object) -> None:
    raise _Stopped


def serve(path: Path) -> None:
    """Fork a worker for each request on the socket at ``path`` until this process's input ends, when it is a pipe (a
    parent that started it: closing it ends the server), or until SIGTERM or SIGINT (a service of its own: its input
    ``/dev/null``, a terminal); the socket file is removed as it ends. It listens before it imports and warms up: a
    worker asked for meanwhile waits in the socket's backlog for the warm-up (what a process of its own would spend
    the time on too) instead of finding no socket and importing dbt beside it."""
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        listener = _listening(path)
    except _Stopped:
        return
    try:
        for module in PRELOAD:
            __import__(module)
        warmed = _warm_up()
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the waiters are reaped as they end
        sys.stdout.write(f"ready ({warmed})\n")
        sys.stdout.flush()
        watched = [listener, sys.stdin] if stat.S_ISFIFO(os.fstat(sys.stdin.fileno()).st_mode) else [listener]
        while True:
            ready, _, _ = select.select(watched, [], [])
            if sys.stdin in ready and not os.read(sys.stdin.fileno(), 4096):
                return
            if listener in ready:
                connection, _ = listener.accept()
                if os.fork() == 0:
                    signal.signal(signal.SIGTERM, signal.SIG_DFL)
                    signal.signal(signal.SIGINT, signal.SIG_DFL)
                    listener.close()
                    _wait_on_worker(connection)
                connection.close()
    except _Stopped:
        return
    finally:
        listener.close()
        with contextlib.suppress(OSError):
            path.unlink()


def _listening(path: Path) -> socket.socket:
    """A socket listening at ``path``; a file left there by a server that ended without removing it (killed) is
    replaced. SystemExit naming the path when a server listens there."""
    if path.exists():
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            try:
                probe.connect(str(path))
            except ConnectionRefusedError:  # nothing listens: a server's leftover
                path.unlink()
            except OSError:
                pass  # not a socket, or not ours to probe: bind says why
            else:
                raise SystemExit(f"a fork server of dbt workers already listens at {path}")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(64)
    return listener


def _warm_up() -> str:
    """The workers' first step, done here once (``warm_up`` of :data:`WORKER_MODULE`, named like its ``main``:
    the project parsed); what it did. RuntimeError when it left a thread running (of Python's or a library's
    own): a fork copies only the thread that forks, so a lock another one holds would stay held in every
    worker (the server then ends, and each worker is a process of its own)."""
    started = time.monotonic()
    try:
        parsed = importlib.import_module(WORKER_MODULE).warm_up()
        done = f"project parsed in {time.monotonic() - started:.1f} s" if parsed else "the warm-up parse failed"
    except Exception as exc:  # the project does not parse: each worker parses, and its build says why
        done = f"no warm-up: {type(exc).__name__}: {exc}"
    threads = _threads()
    if threads > 1:
        threads = _without_duckdb_default_threads()
    if threads > 1:
        raise RuntimeError(f"{threads - 1} threads left running by the warm-up: forking would copy them stopped, "
                           "with any lock they hold; not serving")
    return done


def _without_duckdb_default_threads() -> int:
    """This process's threads once duckdb's default connection runs on this thread alone: duckdb 1.x opens that
    connection as it is imported (the lake environment's duckdb; 2.0 opens it when first asked), and its scheduler
    runs a thread for each other core, idle, holding no lock of ours. No worker uses that connection."""
    duckdb = sys.modules.get("duckdb")
    if duckdb is not None and duckdb.__version__.startswith("1."):
        duckdb.default_connection().execute("SET threads = 1")  # its scheduler's threads end before this returns
    return _threads()


def _threads() -> int:
    """This process's threads, those of native libraries included (Linux counts them in ``/proc``)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def _wait_on_worker(connection: socket.socket) -> None:
    """The waiter: read the request, fork the worker, say its pid, wait for it, say its exit code."""
    code = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        _, fds, _, _ = socket.recv_fds(connection, 1, 2)
        request = json.loads(_line(connection))
        pid = os.fork()
        if pid == 0:
            connection.close()
            _run_worker(request, fds)
        for fd in fds:
            os.close(fd)
        connection.sendall(f"{pid}\n".encode())
        _, status = os.waitpid(pid, 0)
        with contextlib.suppress(OSError):  # the client is gone (killed with its run): no one to tell
            connection.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())
        code = 0
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(code)


def _run_worker(request: dict[str, Any], fds: list[int]) -> None:
    """The worker: its own session, the request's input, log, folder and environment, then its main."""
    code = 1
    try:
        os.setsid()
        stdin, log = fds
        os.dup2(stdin, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(stdin)
        os.close(log)
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 (the process's own streams, open until it ends)
        sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        random.seed()
        code = importlib.import_module(request["module"]).main(request["argv"])
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--socket", type=Path, required=True, help="where to listen (a path for a Unix socket)")
    serve(parser.parse_args(argv).socket)
    return 0


if __name__ == "__main__":
    exit_now(main())  # its end without tearing down dbt's parsed project: 13-18 s of CPU
