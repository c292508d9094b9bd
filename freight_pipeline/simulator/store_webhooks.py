"""The simulator store's webhook recorder: every payload posted to ``/external/webhook``, kept."""

from __future__ import annotations

import copy
import threading
from collections.abc import Mapping
from typing import Any

from freight_pipeline.simulator.store_api import Invalid


class WebhookRecorder:
    """Received webhook payloads, numbered from 1; each call under ``lock`` (the store's)."""

    def __init__(self, lock: threading.RLock) -> None:
        self._lock = lock
        self._webhooks: list[tuple[int, dict[str, Any]]] = []

    def record(self, payload: Mapping[str, Any]) -> int:
        if not isinstance(payload, Mapping):
            raise Invalid("the webhook payload must be a JSON object")
        with self._lock:
            webhook_id = len(self._webhooks) + 1
            self._webhooks.append((webhook_id, copy.deepcopy(dict(payload))))
            return webhook_id

    def payloads(self) -> list[dict[str, Any]]:
        """Every recorded webhook payload, oldest first, as ``{"id": ..., "payload": ...}``."""
        with self._lock:
            return [{"id": i, "payload": copy.deepcopy(p)} for i, p in self._webhooks]
