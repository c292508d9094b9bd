"""E-Files and webhooks of the simulator store: each call under the store's lock, the E-Files
themselves kept by :class:`~.data_efile.EFileStore`."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from freight_pipeline.simulator.store_api import Invalid
from freight_pipeline.simulator.store_state import StoreState


class EFilesMixin(StoreState):
    """The E-File endpoints and the webhook recorder."""

    _webhooks: list[tuple[int, dict[str, Any]]]

    # ============================================================================================
    # E-File
    # ============================================================================================
    def store_efile(self, efile: Mapping[str, Any]) -> dict[str, Any]:
        with self._lock:
            return self._efiles.store(efile)

    def get_efile(self, efile_id: int, cascade: bool = False) -> dict[str, Any]:
        with self._lock:
            return self._efiles.get(efile_id, cascade)

    def delete_efile(self, efile_id: int) -> dict[str, Any]:
        with self._lock:
            return self._efiles.delete(efile_id)

    def efile_rows(self, shipment_ids: Iterable[int] | None = None) -> Iterator[dict[str, Any]]:
        """E-Files with ``references`` (for the lookup), without ``document``, ``roles`` null; with
        ``shipment_ids``, only (a superset of) those referencing one of them."""
        with self._lock:
            return self._efiles.rows(shipment_ids)

    def efile_count(self) -> int:
        with self._lock:
            return self._efiles.count()

    def get_efile_references(self, efile_id: int) -> list[dict[str, Any]]:
        with self._lock:
            return self._efiles.references(efile_id)

    def add_efile_reference(self, efile_id: int, reference: Mapping[str, Any]) -> None:
        with self._lock:
            self._efiles.add_reference(efile_id, reference)

    def delete_efile_reference(self, efile_id: int, reference: Mapping[str, Any]) -> None:
        with self._lock:
            self._efiles.delete_reference(efile_id, reference)

    def get_efile_roles(self, efile_id: int) -> list[dict[str, Any]]:
        with self._lock:
            return self._efiles.roles(efile_id)

    def add_efile_role(self, efile_id: int, role: str) -> None:
        with self._lock:
            self._efiles.add_role(efile_id, role)

    def delete_efile_role(self, efile_id: int, role: Mapping[str, Any]) -> None:
        with self._lock:
            self._efiles.delete_role(efile_id, role)

    # ============================================================================================
    # webhook
    # ============================================================================================
    def record_webhook(self, payload: Mapping[str, Any]) -> int:
        if not isinstance(payload, Mapping):
            raise Invalid("the webhook payload must be a JSON object")
        with self._lock:
            webhook_id = len(self._webhooks) + 1
            self._webhooks.append((webhook_id, copy.deepcopy(dict(payload))))
            return webhook_id

    def webhook_payloads(self) -> list[dict[str, Any]]:
        """Every recorded webhook payload, oldest first, as ``{"id": ..., "payload": ...}``."""
        with self._lock:
            return [{"id": i, "payload": copy.deepcopy(p)} for i, p in self._webhooks]
