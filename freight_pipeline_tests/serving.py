"""A test's HTTP server on a loopback port, answering in a thread of its own for as long as a block runs."""

from __future__ import annotations

import contextlib
import socketserver
import threading
from collections.abc import Iterator
from typing import TypeVar

Server = TypeVar("Server", bound=socketserver.BaseServer)


@contextlib.contextmanager
def serving(server: Server) -> Iterator[Server]:
    """``server`` answering in a daemon thread until the block ends; then shut down, closed and its thread joined."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
