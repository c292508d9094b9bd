"""Destinations on loopback ports for the alerts tests: a JSON webhook (Apprise's ``json://``) that accepts,
refuses, hangs or is gone, and a real SMTP server (aiosmtpd) for ``mailto://``."""

from __future__ import annotations

import email
import email.policy
import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

from aiosmtpd.controller import Controller

from freight_pipeline.simulator.server import LOCALHOST
from freight_pipeline_tests.serving import serving

Mode = Literal["accept", "refuse", "hang"]


@dataclass
class Received:
    """One message as it arrived: its title and text."""

    title: str
    body: str


@dataclass
class Webhook:
    """A JSON webhook receiver; ``mode`` says how it answers the next posts."""

    port: int
    mode: Mode = "accept"
    received: list[Received] = field(default_factory=list)
    posts: int = 0
    """Every post that reached it, answered or not."""
    release: threading.Event = field(default_factory=threading.Event)
    """Set to let hanging posts end (when the receiver stops)."""
    delay: float = 0.0
    """Seconds each post waits before its answer (a slow destination, or a proxy in front of it)."""

    @property
    def url(self) -> str:
        return f"json://{LOCALHOST}:{self.port}/hook"


def free_port() -> int:
    """A loopback port nothing listens on (now)."""
    with socket.socket() as probe:
        probe.bind((LOCALHOST, 0))
        return int(probe.getsockname()[1])


@contextmanager
def webhook(port: int = 0, mode: Mode = "accept") -> Iterator[Webhook]:
    """A webhook on ``port`` of the loopback (0: a free one), stopped after the block."""
    server = ThreadingHTTPServer((LOCALHOST, port), BaseHTTPRequestHandler)
    hook = Webhook(server.server_address[1], mode)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            hook.posts += 1
            if hook.delay:
                hook.release.wait(hook.delay)
            if hook.mode == "hang":
                hook.release.wait(60)
                return
            if hook.mode == "refuse":
                self.send_response(503)
                self.end_headers()
                return
            sent: dict[str, Any] = json.loads(body)
            hook.received.append(Received(sent.get("title", ""), sent.get("message", "")))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server.RequestHandlerClass = Handler
    server.daemon_threads = True
    with serving(server):
        try:
            yield hook
        finally:
            hook.release.set()  # before the shutdown: a handler held back by the test ends first


@dataclass
class Mailbox:
    """The mails an SMTP server on a loopback port received."""

    port: int
    received: list[Received] = field(default_factory=list)

    @property
    def url(self) -> str:
        return (f"mailto://localhost:{self.port}?smtp={LOCALHOST}&from=alerts@example.com&to=ops@example.com"
                "&mode=insecure")


@contextmanager
def smtp_server() -> Iterator[Mailbox]:
    """aiosmtpd on a free loopback port, stopped after the block."""
    box = Mailbox(free_port())

    class Handler:
        async def handle_DATA(self, server: object, session: object, envelope: Any) -> str:
            message = email.message_from_bytes(envelope.content, policy=email.policy.default)
            part = message.get_body(("plain", "html"))
            text = part.get_content() if part is not None else ""
            box.received.append(Received(str(message["subject"]), str(text).replace("\r\n", "\n")))
            return "250 OK"

    controller = Controller(Handler(), hostname=LOCALHOST, port=box.port)
    controller.start()
    try:
        yield box
    finally:
        controller.stop()
