"""Sending the outbox's messages, off the run's path: each destination on a thread of its own, each message
bounded by ``alert_timeout_seconds``, and no send of a destination started once that much passed since its first;
every attempt's outcome appended as a receipt to a file the next look folds into ``freight_meta.alert_messages``
(``ledger.fold_receipts``). A send that fails, hangs or finds nobody never raises: its message stays unsent and goes
again with the next run.

Apprise (one URL per destination) does the sending; its own log lines, which show parts of the URLs, are
kept out of every log: a failure is recorded in words of our own, the URL's secrets never in them.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from freight_pipeline.alerts.ledger import Outgoing
from freight_pipeline.config import masked_url

TIMED_OUT = "timed out"
RECEIPTS_FILE = "alert-receipts.jsonl"
"""In the working database's folder: the receipts of the sends since the last look."""


@dataclass(frozen=True)
class Destination:
    """One notification URL (a secret: never in a repr, a log or the warehouse)."""

    url: str = field(repr=False)

    @property
    def fingerprint(self) -> str:
        """What the warehouse keeps of it: a digest of the URL."""
        return hashlib.sha256(self.url.encode()).hexdigest()[:16]

    @property
    def shown(self) -> str:
        """``slack://*** (3f9c...)``: its scheme and fingerprint, for messages."""
        return f"{masked_url(self.url)} ({self.fingerprint})"


@dataclass
class Receipt:
    message_id: str
    destination: str
    sent: bool
    at: str
    error: str | None = None


class Dispatch:
    """The messages being sent (:meth:`join` waits for them; the run never does)."""

    def __init__(self, outgoing: Sequence[Outgoing], destinations: Sequence[Destination], timeout: float,
                 receipts: Path) -> None:
        self.timeout = timeout
        self.receipts_path = receipts
        self.receipts: list[Receipt] = []
        self._lock = threading.Lock()
        by_fingerprint = {d.fingerprint: d for d in destinations}
        batches: dict[str, list[Outgoing]] = {}
        for message in outgoing:
            if message.destination in by_fingerprint:
                batches.setdefault(message.destination, []).append(message)
        # not daemons (whatever started them: the Dagster op's engine thread is one): the process ends once
        # they did, each within the timeout of its message
        self._threads = [threading.Thread(target=self._send_all, args=(by_fingerprint[fp], messages),
                                          name=f"alerts-{fp}", daemon=False) for fp, messages in batches.items()]
        for thread in self._threads:
            thread.start()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for every send (each destination at most ``timeout`` seconds more); whether all ended."""
        for thread in self._threads:
            thread.join(timeout)
        return not any(thread.is_alive() for thread in self._threads)

    def _send_all(self, destination: Destination, messages: list[Outgoing]) -> None:
        """``messages`` one after the other; no send starts once ``timeout`` has passed since the first began (a
        destination answering slowly, each send failing just within its timeout), so a run waits for its sends
        about twice the timeout at most: the rest go with the next look."""
        began = time.monotonic()
        for index, message in enumerate(messages):
            if index and time.monotonic() - began >= self.timeout:
                return
            error = send(destination, message, self.timeout)
            receipt = Receipt(message.message_id, message.destination, error is None,
                              dt.datetime.now(dt.UTC).isoformat(), error)
            with self._lock:
                self.receipts.append(receipt)
                with self.receipts_path.open("a") as out:
                    out.write(json.dumps(receipt.__dict__) + "\n")
            if error is not None and error.startswith(TIMED_OUT):
                return  # a destination that hangs: the rest waits for the next run


def send(destination: Destination, message: Outgoing, timeout: float) -> str | None:
    """Send one message; None when the destination accepted it, else why not (without the URL's secrets).

    A send that failed once its timeout had passed timed out, whichever ended first: the socket's own timeout
    (Apprise's plugin says only that it failed) or the wait for the thread (late on a loaded machine)."""
    outcome: list[str | None] = []
    timed_out = f"{TIMED_OUT} after {timeout:g} s"
    started = time.monotonic()

    def attempt() -> None:
        error = _notify(destination, message, timeout)
        outcome.append(timed_out if error is not None and time.monotonic() - started >= timeout else error)

    worker = threading.Thread(target=attempt, daemon=True, name="alerts-send")
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        return timed_out
    return outcome[0] if outcome else "the send ended without an answer"


_UNKNOWN = "{} is not a notification URL Apprise knows (docs/operations.md#setting-it-up)"


def unknown_kinds(urls: Sequence[str]) -> list[str]:
    """What is said of each of ``urls`` no Apprise plugin takes (a misspelt scheme), checked without a send: the
    commands refuse them with the other bad settings, before a run whose every alert would fail."""
    import apprise

    _quiet_apprise()
    return [_UNKNOWN.format(masked_url(url)) for url in urls if not apprise.Apprise.instantiate(url)]


def _notify(destination: Destination, message: Outgoing, timeout: float) -> str | None:
    import apprise  # imported where an alert is sent: 0.4 s a process without alerts never spends

    _quiet_apprise()
    plugin = apprise.Apprise.instantiate(destination.url)
    if not plugin:
        return _UNKNOWN.format(masked_url(destination.url))
    plugin.socket_connect_timeout = plugin.socket_read_timeout = timeout
    kind = {"error": apprise.NotifyType.FAILURE, "warning": apprise.NotifyType.WARNING}.get(
        message.level, apprise.NotifyType.SUCCESS)
    try:
        accepted = plugin.notify(body=message.body, title=message.title, notify_type=kind,
                                 body_format=apprise.NotifyFormat.TEXT)
    except Exception as exc:  # a plugin's own fault: recorded, never raised into the run
        return f"the send raised {type(exc).__name__}"
    return None if accepted else "the destination refused the message or could not be reached"


QUIET_LOGGERS = ("apprise", "urllib3.connectionpool")
"""Loggers kept to themselves while alerts are sent: Apprise's lines show parts of the URLs (``s...w`` of a
password), and urllib3's (the HTTP library under Apprise's webhooks) the path of each request (a Slack or Teams
webhook's token) at DEBUG and in its retries' warnings."""


def _quiet_apprise() -> None:
    for name in QUIET_LOGGERS:
        logger = logging.getLogger(name)
        logger.setLevel(logging.CRITICAL + 1)
        logger.propagate = False
