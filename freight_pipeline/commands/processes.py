"""Child processes of ``ui`` (and ``scripts/check_ui.py``): start, wait for HTTP, stop with their descendants."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

import httpx
import psutil

from freight_pipeline.client.tls import default_ssl_context
from freight_pipeline.process_end import STOP_SIGNALS

log = logging.getLogger(__name__)

LOCALHOST = "127.0.0.1"


class Stop(BaseException):  # like KeyboardInterrupt: no `except Exception` swallows it
    """SIGINT or SIGTERM arrived while the command ran its children (``raise_stop_on_signals``)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_stop(signum: int, frame: FrameType | None) -> None:
    raise Stop(signum)


def raise_stop_on_signals() -> dict[int, Any]:
    """From now on SIGINT and SIGTERM raise :class:`Stop`; the handlers they had, for ``restore_signals``. SIGHUP
    keeps its own: a terminal's hang-up reaches the children too (the terminal's foreground process group)."""
    return {s: signal.signal(s, _raise_stop) for s in STOP_SIGNALS if s != signal.SIGHUP}


def restore_signals(previous: Mapping[int, Any], cleanup: Callable[[], object]) -> None:
    """Run ``cleanup`` (stopping the children) with SIGINT and SIGTERM ignored, so a second Ctrl-C
    cannot cut it short, then put back the handlers of ``previous``."""
    for s in previous:
        signal.signal(s, signal.SIG_IGN)
    try:
        cleanup()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


class ChildExited(RuntimeError):
    pass


def free_port(host: str = LOCALHOST) -> int:
    """A port nobody listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def port_in_use(port: int, host: str = LOCALHOST) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


def start_child(
    argv: Sequence[str], env: Mapping[str, str], cwd: Path | None = None, *, quiet: bool = False,
    mute_stdout: bool = False,
) -> subprocess.Popen[bytes]:
    """Start ``argv`` with ``env``; its output goes to ours (stdout nowhere if ``mute_stdout``, all if ``quiet``)."""
    sink = subprocess.DEVNULL if quiet else None
    out = subprocess.DEVNULL if quiet or mute_stdout else None
    return subprocess.Popen(list(argv), env=dict(env), cwd=cwd, stdout=out, stderr=sink)


def wait_http(url: str, child: subprocess.Popen[bytes], name: str, timeout: float) -> float:
    """Poll ``url`` until it answers 200; seconds waited. ChildExited / TimeoutError otherwise."""
    started = time.monotonic()
    while True:
        if child.poll() is not None:
            raise ChildExited(f"{name} exited with status {child.returncode} before {url} answered")
        with contextlib.suppress(httpx.HTTPError):
            # a child of this machine's: never through a proxy the environment names for the service
            if httpx.get(url, timeout=2.0, verify=default_ssl_context(), trust_env=False).status_code == 200:
                return time.monotonic() - started
        if time.monotonic() - started > timeout:
            raise TimeoutError(f"{name} did not answer {url} within {timeout:.0f} s")
        time.sleep(0.25)


def stop_child(child: subprocess.Popen[bytes], *, grace: float = 0.0, timeout: float = 30.0) -> int | None:
    """Stop ``child`` and whatever it started: wait ``grace`` s, SIGTERM, wait ``timeout`` s, SIGKILL."""
    descendants = _descendants(child.pid)
    with contextlib.suppress(subprocess.TimeoutExpired):
        child.wait(grace)
    if child.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(signal.SIGTERM)
        try:
            child.wait(timeout)
        except subprocess.TimeoutExpired:
            log.warning("%s (pid %d) outlived its SIGTERM by %g s: killed", _program(child), child.pid, timeout)
            child.kill()
            child.wait(5)
    descendants += _descendants(child.pid)
    _stop_processes(descendants)
    return child.returncode


def _program(child: subprocess.Popen[bytes]) -> str:
    """The file name of what ``child`` runs (its arguments may name secrets)."""
    argv = child.args if isinstance(child.args, (list, tuple)) else [child.args]
    return Path(str(argv[0])).name


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def _stop_processes(processes: list[psutil.Process], timeout: float = 10.0) -> None:
    alive = [p for p in processes if p.pid != os.getpid() and _running(p)]
    for process in alive:
        with contextlib.suppress(psutil.Error):
            process.terminate()
    _, still = psutil.wait_procs(alive, timeout=timeout)
    for process in still:
        with contextlib.suppress(psutil.Error):
            process.kill()


def _running(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
