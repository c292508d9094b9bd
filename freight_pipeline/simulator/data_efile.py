"""In-memory E-File records (assumptions A18 and A19). Not locked: the store holds its lock."""

from __future__ import annotations

import base64
import binascii
import copy
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from freight_pipeline.simulator.store_api import Invalid, NotFound

REFERENCE_TYPES: tuple[str, ...] = ("SHIPMENT", "ADDRESS", "HBL", "MBL", "OTHER")


class EFileStore:
    def __init__(self, now_iso: Callable[[], str]) -> None:
        self._now_iso = now_iso
        self._files: dict[int, dict[str, Any]] = {}
        self._next_file = 1
        self._next_reference = 1
        self._next_role = 1

    # --- records -----------------------------------------------------------------------------
    def store(self, efile: Mapping[str, Any]) -> dict[str, Any]:
        if not isinstance(efile, Mapping):
            raise Invalid("an EFile must be a JSON object")
        document = efile.get("document")
        if not isinstance(document, str) or not document:
            raise Invalid("document must be a non-empty base64 string")
        try:
            base64.b64decode(document, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise Invalid(f"document is not valid base64: {exc}") from None
        for name in ("file_name", "mime_type", "description"):
            if efile.get(name) is not None and not isinstance(efile.get(name), str):
                raise Invalid(f"{name} must be a string")
        references = [self._new_reference(r) for r in _list(efile.get("references"), "references")]
        roles = [self._new_role(_role_name(r)) for r in _list(efile.get("roles"), "roles")]
        record = {
            "id": self._next_file,
            "file_name": efile.get("file_name"),
            "mime_type": efile.get("mime_type") or "application/octet-stream",
            "description": efile.get("description"),
            "document": document,
            "created_date_time": self._now_iso(),
            "references": references,
            "roles": roles,
        }
        self._next_file += 1
        self._files[record["id"]] = record
        return copy.deepcopy(record)

    def get(self, efile_id: int, cascade: bool = False) -> dict[str, Any]:
        record = copy.deepcopy(self._record(efile_id))
        if not cascade:
            record["references"] = None
            record["roles"] = None
        return record

    def delete(self, efile_id: int) -> dict[str, Any]:
        record = self._record(efile_id)
        del self._files[efile_id]
        return record

    def rows(self) -> Iterator[dict[str, Any]]:
        rows = []
        for efile_id in sorted(self._files):
            record = self._files[efile_id]
            row = {k: copy.deepcopy(v) for k, v in record.items() if k != "document"}
            row["roles"] = None
            rows.append(row)
        return iter(rows)

    # --- references and roles ----------------------------------------------------------------
    def references(self, efile_id: int) -> list[dict[str, Any]]:
        return copy.deepcopy(self._record(efile_id)["references"])

    def add_reference(self, efile_id: int, reference: Mapping[str, Any]) -> None:
        record = self._record(efile_id)
        record["references"].append(self._new_reference(reference))

    def delete_reference(self, efile_id: int, reference: Mapping[str, Any]) -> None:
        record = self._record(efile_id)
        if not isinstance(reference, Mapping):
            raise Invalid("an EFileReference must be a JSON object")
        kept = [r for r in record["references"] if not _same_reference(r, reference)]
        if len(kept) == len(record["references"]):
            raise NotFound(f"E-File {efile_id} has no such reference")
        record["references"] = kept

    def roles(self, efile_id: int) -> list[dict[str, Any]]:
        return copy.deepcopy(self._record(efile_id)["roles"])

    def add_role(self, efile_id: int, role: str) -> None:
        record = self._record(efile_id)
        record["roles"].append(self._new_role(role))

    def delete_role(self, efile_id: int, role: Mapping[str, Any]) -> None:
        record = self._record(efile_id)
        if not isinstance(role, Mapping):
            raise Invalid("an EFileRole must be a JSON object")
        if role.get("id") is None and not role.get("role"):
            raise Invalid("an EFileRole needs id or role")
        kept = [r for r in record["roles"] if not (
            (role.get("id") is not None and r["id"] == role.get("id"))
            or (role.get("id") is None and r["role"] == role.get("role")))]
        if len(kept) == len(record["roles"]):
            raise NotFound(f"E-File {efile_id} has no such role")
        record["roles"] = kept

    # --- helpers -----------------------------------------------------------------------------
    def _record(self, efile_id: int) -> dict[str, Any]:
        record = self._files.get(efile_id)
        if record is None:
            raise NotFound(f"E-File {efile_id} not found")
        return record

    def _new_reference(self, reference: Any) -> dict[str, Any]:
        if not isinstance(reference, Mapping):
            raise Invalid("an EFileReference must be a JSON object")
        kind = reference.get("type")
        if kind not in REFERENCE_TYPES:
            raise Invalid(f"reference type {kind!r} is not one of {', '.join(REFERENCE_TYPES)}")
        value = reference.get("value")
        if isinstance(value, bool) or not isinstance(value, str | int) or str(value).strip() == "":
            raise Invalid("reference value must be a non-empty string")
        if kind == "SHIPMENT" and not str(value).strip().isdigit():
            raise Invalid("a SHIPMENT reference value must be a shipment id")
        item = {"id": self._next_reference, "type": kind, "value": str(value)}
        self._next_reference += 1
        return item

    def _new_role(self, role: Any) -> dict[str, Any]:
        if not isinstance(role, str) or not role.strip():
            raise Invalid("a role must be a non-empty string")
        item = {"id": self._next_role, "role": role.strip()}
        self._next_role += 1
        return item


def _list(value: Any, name: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise Invalid(f"{name} must be a JSON array")
    return value


def _role_name(role: Any) -> Any:
    return role.get("role") if isinstance(role, Mapping) else role


def _same_reference(stored: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    if wanted.get("id") is not None:
        return stored["id"] == wanted.get("id")
    return stored["type"] == wanted.get("type") and stored["value"] == str(wanted.get("value"))
