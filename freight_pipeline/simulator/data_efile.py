"""In-memory E-File records (assumptions A18, A19, A38), each call under the lock they are given
(the store's, shared with the shipments the E-Files refer to).

Two kinds of record: those stored through the interface (full dicts) and those the generator
gives the shipments it makes (:class:`GeneratedFile`, a few small fields; rendered on demand, so a
store of 100,000 shipments holds its E-Files in tens of MB). A generated record becomes a stored
one the first time it is changed (a reference or role added or removed).

References are kept in the ``type`` shape (``{"id", "type": "SHIPMENT", "value": "10023"}``);
:func:`efile_in_shape` and :func:`reference_in_shape` render them in the ``key`` shape
(``{"id", "reference_key": "SHIPMENT_ID", "reference": 10023}``) of ``FaultConfig.efile_reference_shape``,
and :func:`reference_from_shape` reads a reference body sent in that shape.
"""

from __future__ import annotations

import base64
import binascii
import copy
import random
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from freight_pipeline.simulator.store_api import Invalid, NotFound

REFERENCE_TYPES: tuple[str, ...] = ("SHIPMENT", "ADDRESS", "HBL", "MBL", "OTHER")
SHIPMENT_REFERENCE_KEY = "SHIPMENT_ID"  # the ``key`` shape's name of a SHIPMENT reference


def reference_in_shape(reference: Mapping[str, Any], shape: str) -> dict[str, Any]:
    """An EFileReference as answered in ``shape``: ``type`` as kept, or ``key`` (a shipment id as an integer)."""
    if shape == "type":
        return dict(reference)
    kind, value = reference.get("type"), reference.get("value")
    if kind == "SHIPMENT":
        kind = SHIPMENT_REFERENCE_KEY
        text = str(value).strip()
        value = int(text) if text.isdigit() else value
    return {"id": reference.get("id"), "reference_key": kind, "reference": value}


def references_in_shape(references: list[dict[str, Any]], shape: str) -> list[dict[str, Any]]:
    return references if shape == "type" else [reference_in_shape(r, shape) for r in references]


def efile_in_shape(record: dict[str, Any], shape: str) -> dict[str, Any]:
    """An EFile with its references (if it carries them) answered in ``shape``."""
    if shape == "type" or not isinstance(record.get("references"), list):
        return record
    return {**record, "references": references_in_shape(record["references"], shape)}


def reference_from_shape(body: Any) -> Any:
    """A reference body sent in the ``key`` shape, as the store takes it (``type`` shape); others unchanged."""
    if not isinstance(body, Mapping) or "reference_key" not in body or "type" in body:
        return body
    item = {k: v for k, v in body.items() if k not in ("reference_key", "reference")}
    key = body.get("reference_key")
    item["type"] = "SHIPMENT" if key == SHIPMENT_REFERENCE_KEY else key
    item["value"] = body.get("reference")
    return item


@dataclass(frozen=True)
class DocumentKind:
    """A kind of document a forwarder files with a shipment, and how often one is there."""

    description: str
    file_stem: str
    suffix: str
    mime_type: str
    roles: tuple[str, ...]
    share: float
    modes: tuple[str, ...] = ("SEA", "AIR", "RD", "RL")


DOCUMENT_KINDS: tuple[DocumentKind, ...] = (
    DocumentKind("Commercial invoice", "commercial_invoice", ".pdf", "application/pdf", ("ACCOUNTING", "CUSTOMS"),
                 0.72),
    DocumentKind("Packing list", "packing_list", ".pdf", "application/pdf", ("OPERATIONS",), 0.55),
    DocumentKind("Bill of lading", "bill_of_lading", ".pdf", "application/pdf", ("OPERATIONS", "CUSTOMER"), 0.8,
                 ("SEA",)),
    DocumentKind("Air waybill", "air_waybill", ".pdf", "application/pdf", ("OPERATIONS", "CUSTOMER"), 0.8, ("AIR",)),
    DocumentKind("CMR consignment note", "cmr", ".pdf", "application/pdf", ("OPERATIONS",), 0.7, ("RD",)),
    DocumentKind("Rail consignment note (CIM)", "cim", ".pdf", "application/pdf", ("OPERATIONS",), 0.7, ("RL",)),
    DocumentKind("Certificate of origin", "certificate_of_origin", ".pdf", "application/pdf", ("CUSTOMS",), 0.18),
    DocumentKind("Export declaration", "export_declaration", ".xml", "application/xml", ("CUSTOMS",), 0.3),
    DocumentKind("Photo of the cargo", "cargo_photo", ".jpg", "image/jpeg", ("OPERATIONS",), 0.04),
)


class GeneratedFile(NamedTuple):
    """An E-File the generator gave a shipment: enough to render it whole, again and again."""

    shipment_id: int
    kind: int
    """Index into DOCUMENT_KINDS."""
    created: int
    """POSIX seconds."""
    shipment_number: str
    house_reference: str | None
    first_reference: int
    """The id of its first reference (the next, if any, is one more)."""
    first_role: int


@dataclass(frozen=True)
class EFileState:
    """What an :class:`EFileStore` holds at one moment (:meth:`EFileStore.state`), to go back to."""

    files: dict[int, dict[str, Any]]
    generated: dict[int, GeneratedFile]
    by_shipment: dict[int, tuple[int, ...]]
    next_file: int
    next_reference: int
    next_role: int


def documents_for(rng: random.Random, mode: str) -> list[int]:
    """The kinds of document (indexes into DOCUMENT_KINDS) a new shipment of ``mode`` gets."""
    return [i for i, kind in enumerate(DOCUMENT_KINDS) if mode in kind.modes and rng.random() < kind.share]


def _content(kind: DocumentKind, file: GeneratedFile) -> bytes:
    """Small, deterministic bytes that look like the kind of file (the start of a PDF, XML, JPEG)."""
    text = f"{kind.description} for shipment {file.shipment_number} ({file.shipment_id})"
    if kind.suffix == ".pdf":
        return f"%PDF-1.4\n% {text}\n%%EOF\n".encode()
    if kind.suffix == ".xml":
        return f'<?xml version="1.0"?><declaration shipment="{file.shipment_id}">{text}</declaration>'.encode()
    return b"\xff\xd8\xff\xe0" + text.encode() + b"\xff\xd9"


class EFileStore:
    """The E-Files of a store, stored and generated; thread-safe through ``lock``.

    Args:
        lock: held by every call (the store's lock: re-entrant, so the store's parts may call in
            while they hold it).
        now_iso: the current instant as the service stamps it (``created_date_time`` of a stored file).
        iso: an epoch second as the service stamps it (that of a generated file).
    """

    def __init__(
        self, lock: threading.RLock, now_iso: Callable[[], str], iso: Callable[[int], str] | None = None
    ) -> None:
        self._lock = lock
        self._now_iso = now_iso
        self._iso = iso or (lambda epoch: now_iso())
        self._files: dict[int, dict[str, Any]] = {}
        self._generated: dict[int, GeneratedFile] = {}
        self._by_shipment: dict[int, tuple[int, ...]] = {}
        """Shipment id -> E-File ids that referenced it at some point: a superset (the lookup still
        applies its criteria), so a removed reference or a deleted file need not be taken out.
        Its tuples are replaced, never changed (so a snapshot copies the dict alone)."""
        self._next_file = 1
        self._next_reference = 1
        self._next_role = 1

    # --- generated records -------------------------------------------------------------------
    def generate(self, shipment_id: int, kind: int, created: int, shipment_number: str,
                 house_reference: str | None) -> int:
        """Give a shipment a generated E-File (a SHIPMENT reference, an HBL one when it has a house
        bill, the kind's roles); its id."""
        with self._lock:
            roles = len(DOCUMENT_KINDS[kind].roles)
            file = GeneratedFile(shipment_id, kind, created, shipment_number, house_reference or None,
                                 self._next_reference, self._next_role)
            efile_id = self._next_file
            self._next_file += 1
            self._next_reference += 2 if file.house_reference else 1
            self._next_role += roles
            self._generated[efile_id] = file
            self._index(efile_id, [shipment_id])
            return efile_id

    def _render(self, efile_id: int, file: GeneratedFile) -> dict[str, Any]:
        kind = DOCUMENT_KINDS[file.kind]
        references = [{"id": file.first_reference, "type": "SHIPMENT", "value": str(file.shipment_id)}]
        if file.house_reference:
            references.append({"id": file.first_reference + 1, "type": "HBL", "value": file.house_reference})
        return {
            "id": efile_id,
            "file_name": f"{kind.file_stem}_{file.shipment_number}{kind.suffix}",
            "mime_type": kind.mime_type,
            "description": f"{kind.description} {file.shipment_number}",
            "document": base64.b64encode(_content(kind, file)).decode("ascii"),
            "created_date_time": self._iso(file.created),
            "references": references,
            "roles": [{"id": file.first_role + i, "role": role} for i, role in enumerate(kind.roles)],
        }

    def _index(self, efile_id: int, shipment_ids: Iterable[int]) -> None:
        for shipment_id in shipment_ids:
            self._by_shipment[shipment_id] = (*self._by_shipment.get(shipment_id, ()), efile_id)

    def count(self) -> int:
        with self._lock:
            return len(self._files) + len(self._generated)

    # --- back to an earlier state (a reset of the service's data) -----------------------------
    def state(self) -> EFileState:
        """A copy of everything held now, the id counters included (generated records and the index's
        tuples are immutable, stored records are copied with their lists)."""
        with self._lock:
            return EFileState(
                {i: _record_copy(r) for i, r in self._files.items()}, dict(self._generated),
                dict(self._by_shipment),
                self._next_file, self._next_reference, self._next_role,
            )

    def restore(self, state: EFileState) -> None:
        """Hold exactly what ``state`` held (it stays usable for another restore); ids issued after it
        are issued again."""
        with self._lock:
            self._files = {i: _record_copy(r) for i, r in state.files.items()}
            self._generated = dict(state.generated)
            self._by_shipment = dict(state.by_shipment)
            self._next_file, self._next_reference, self._next_role = (
                state.next_file, state.next_reference, state.next_role
            )

    # --- records -----------------------------------------------------------------------------
    def store(self, efile: Mapping[str, Any]) -> dict[str, Any]:
        with self._lock:
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
            self._index(record["id"], _shipment_ids(references))
            return copy.deepcopy(record)

    def get(self, efile_id: int, cascade: bool = False) -> dict[str, Any]:
        with self._lock:
            record = self._view(efile_id)
            if not cascade:
                record["references"] = None
                record["roles"] = None
            return record

    def delete(self, efile_id: int) -> dict[str, Any]:
        with self._lock:
            record = self._view(efile_id)
            self._files.pop(efile_id, None)
            self._generated.pop(efile_id, None)
            return record

    def rows(self, shipment_ids: Iterable[int] | None = None) -> Iterator[dict[str, Any]]:
        """Every E-File without its document (roles null), by id; with ``shipment_ids``, a superset
        of those referencing one of them (from the index), for a lookup to narrow its scan."""
        with self._lock:
            if shipment_ids is None:
                ids: Iterable[int] = [*self._files, *self._generated]
            else:
                ids = {i for s in shipment_ids for i in self._by_shipment.get(s, ())}
            rows = []
            for efile_id in sorted(ids):
                if efile_id in self._files or efile_id in self._generated:
                    row = self._view(efile_id)
                    del row["document"]
                    row["roles"] = None
                    rows.append(row)
            return iter(rows)

    # --- references and roles ----------------------------------------------------------------
    def references(self, efile_id: int) -> list[dict[str, Any]]:
        with self._lock:
            return self._view(efile_id)["references"]

    def add_reference(self, efile_id: int, reference: Mapping[str, Any]) -> None:
        with self._lock:
            record = self._record(efile_id)
            added = self._new_reference(reference)
            record["references"].append(added)
            self._index(efile_id, _shipment_ids([added]))

    def delete_reference(self, efile_id: int, reference: Mapping[str, Any]) -> None:
        with self._lock:
            record = self._record(efile_id)
            if not isinstance(reference, Mapping):
                raise Invalid("an EFileReference must be a JSON object")
            kept = [r for r in record["references"] if not _same_reference(r, reference)]
            if len(kept) == len(record["references"]):
                raise NotFound(f"E-File {efile_id} has no such reference")
            record["references"] = kept

    def roles(self, efile_id: int) -> list[dict[str, Any]]:
        with self._lock:
            return self._view(efile_id)["roles"]

    def add_role(self, efile_id: int, role: str) -> None:
        with self._lock:
            record = self._record(efile_id)
            record["roles"].append(self._new_role(role))

    def delete_role(self, efile_id: int, role: Mapping[str, Any]) -> None:
        with self._lock:
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
    def _view(self, efile_id: int) -> dict[str, Any]:
        """A fresh copy of the record, to answer with."""
        generated = self._generated.get(efile_id)
        if generated is not None:
            return self._render(efile_id, generated)
        record = self._files.get(efile_id)
        if record is None:
            raise NotFound(f"E-File {efile_id} not found")
        return copy.deepcopy(record)

    def _record(self, efile_id: int) -> dict[str, Any]:
        """The stored record, to change in place (a generated one is stored from now on)."""
        generated = self._generated.pop(efile_id, None)
        if generated is not None:
            self._files[efile_id] = self._render(efile_id, generated)
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


def _record_copy(record: dict[str, Any]) -> dict[str, Any]:
    """A stored record's copy that its changes (references and roles added, removed) do not reach:
    they replace or append to its lists, never change an item."""
    return {**record, "references": list(record["references"]), "roles": list(record["roles"])}


def _list(value: Any, name: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise Invalid(f"{name} must be a JSON array")
    return value


def _shipment_ids(references: Iterable[Mapping[str, Any]]) -> list[int]:
    return [int(r["value"]) for r in references if r["type"] == "SHIPMENT" and str(r["value"]).strip().isdigit()]


def _role_name(role: Any) -> Any:
    return role.get("role") if isinstance(role, Mapping) else role


def _same_reference(stored: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    if wanted.get("id") is not None:
        return stored["id"] == wanted.get("id")
    return stored["type"] == wanted.get("type") and stored["value"] == str(wanted.get("value"))
