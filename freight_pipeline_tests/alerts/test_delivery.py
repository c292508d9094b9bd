"""``delivery`` against webhooks on loopback ports: a destination that never answers ends its send at the
timeout, in words without the URL's secrets, and the messages behind it wait for the next run; one that answers
gets each message, each with its receipt."""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import apprise  # noqa: F401  (a process's first send imports it, 0.4 s or more: here, the timeout times the send)
import pytest

from freight_pipeline.alerts import delivery
from freight_pipeline.alerts.delivery import RECEIPTS_FILE, TIMED_OUT, Destination, Dispatch
from freight_pipeline.alerts.ledger import Outgoing
from freight_pipeline.simulator.server import LOCALHOST
from freight_pipeline_tests.alerts.receivers import webhook

SECRET = "s3cret-token"


def outgoing(destination: Destination, count: int) -> list[Outgoing]:
    return [Outgoing(f"m{i}", destination.fingerprint, "error", f"title {i}", f"body {i}") for i in range(count)]


def receipts_written(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_destination_that_never_answers_times_out_once_and_the_rest_waits_for_the_next_run(
    tmp_path: Path,
) -> None:
    with webhook(mode="hang") as hook:
        destination = Destination(f"json://user:{SECRET}@{LOCALHOST}:{hook.port}/hook")
        dispatch = Dispatch(outgoing(destination, 3), [destination], 2, tmp_path / RECEIPTS_FILE)
        assert dispatch.join(60)  # ended though the destination holds the first post (if it came in time)
        assert hook.posts <= 1 and not hook.release.is_set()
    (receipt,) = dispatch.receipts  # the messages behind the first were not sent
    assert (receipt.message_id, receipt.sent, receipt.error) == ("m0", False, f"{TIMED_OUT} after 2 s")
    assert receipts_written(tmp_path / RECEIPTS_FILE) == [receipt.__dict__]
    assert SECRET not in (tmp_path / RECEIPTS_FILE).read_text()


def test_a_destination_that_refuses_slowly_starts_no_send_once_the_timeout_passed_since_its_first(
    tmp_path: Path,
) -> None:
    """Each send fails within its timeout (a 503 after 0.6 s, the timeout 1 s): was every message sent one after the
    other, the run waiting 8 x 0.6 s (50 x 10 s at the defaults) before it exits."""
    with webhook(mode="refuse") as hook:
        hook.delay = 0.6
        destination = Destination(f"json://{LOCALHOST}:{hook.port}/hook")
        dispatch = Dispatch(outgoing(destination, 8), [destination], 1, tmp_path / RECEIPTS_FILE)
        assert dispatch.join(60)
    attempted = [r.message_id for r in dispatch.receipts]
    assert attempted == ["m0", "m1"][:len(attempted)] and hook.posts == len(attempted) >= 1
    assert not any(r.sent for r in dispatch.receipts)  # the rest unsent, for the next look


class LateWaker(threading.Thread):
    """A thread whose waiter wakes half a second after its timeout, as on a loaded machine."""

    def join(self, timeout: float | None = None) -> None:
        super().join(timeout)
        time.sleep(0.5)


def test_a_send_that_failed_at_its_timeout_timed_out_though_its_waiter_woke_late(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The socket's own timeout (Apprise's plugin then says only that it failed) ended the send before its waiter
    looked: still a time-out, and the messages behind it wait (was: "refused", and the next one sent)."""
    monkeypatch.setattr(delivery, "threading", SimpleNamespace(Thread=LateWaker, Lock=threading.Lock))
    with webhook(mode="hang") as hook:
        destination = Destination(f"json://{LOCALHOST}:{hook.port}/hook")
        dispatch = Dispatch(outgoing(destination, 3), [destination], 1, tmp_path / RECEIPTS_FILE)
        assert dispatch.join(60)
        assert hook.posts == 1
    assert [(r.message_id, r.sent, r.error) for r in dispatch.receipts] == [("m0", False, f"{TIMED_OUT} after 1 s")]


def test_a_destination_that_answers_gets_every_message_in_order_each_with_a_receipt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Its token in the URL's path (as a Slack or Teams webhook's) is in no log line, even with every logger at
    DEBUG (the HTTP library under Apprise logs each request's path)."""
    caplog.set_level(logging.DEBUG)
    with webhook() as hook:
        destination = Destination(f"json://{LOCALHOST}:{hook.port}/hook/{SECRET}")
        dispatch = Dispatch(outgoing(destination, 3), [destination], 30, tmp_path / RECEIPTS_FILE)
        assert dispatch.join(60)
        assert [m.title for m in hook.received] == ["title 0", "title 1", "title 2"]
    assert [(r.message_id, r.sent, r.error) for r in dispatch.receipts] == [
        ("m0", True, None), ("m1", True, None), ("m2", True, None)]
    assert receipts_written(tmp_path / RECEIPTS_FILE) == [r.__dict__ for r in dispatch.receipts]
    assert SECRET not in caplog.text  # without the quieting: urllib3's `"POST /hook/s3cret-token HTTP/1.1" 200`
