"""E-File documents linked to shipments: the table ``freight.shipment_documents`` and its rows.

One row per (shipment, E-File) for each E-File whose references name the shipment (type
``SHIPMENT``): what the E-File lookup lists, with the references and roles read for it. The content
columns are filled only when the pipeline copies document bytes (``FREIGHT_DOCUMENT_CONTENT``).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from freight_pipeline.datetimes import DateTimeParseError, parse_iso_datetime, to_utc
from freight_pipeline.normalize.converters import (
    BIGINT,
    JSON,
    TIMESTAMPTZ,
    VARCHAR,
    is_text,
    json_or_report,
    to_int,
    to_str,
)
from freight_pipeline.normalize.errors import Invalid, RecordShapeError, show
from freight_pipeline.normalize.nodes import NUMBER, TEXT, Key, Node
from freight_pipeline.normalize.problems import Problems
from freight_pipeline.normalize.schema import Column, TableSpec
from freight_pipeline.normalize.shapes import Shape
from freight_pipeline.normalize.specs.keys import RECORD_ID

SHIPMENT_DOCUMENTS = TableSpec(
    "freight",
    "shipment_documents",
    (
        Column("shipment_id", BIGINT, "the shipment an E-File reference (type SHIPMENT) names", nullable=False),
        Column("efile_id", BIGINT, "id of the E-File", nullable=False),
        Column("file_name", VARCHAR, "file name as stored in the service"),
        Column("safe_file_name", VARCHAR, "the file name made safe to save a copy under: its last path part, "
                                          "characters other than letters, digits, '.', '_', '-' as '_'"),
        Column("mime_type", VARCHAR, "MIME type as stored in the service"),
        Column("description", VARCHAR, "description as stored in the service"),
        Column("created_at", TIMESTAMPTZ, "when the E-File was stored (created_date_time, UTC)"),
        Column("created_date_time", VARCHAR, "created_date_time as sent"),
        Column("document_references", JSON, "every reference of the E-File: [{id, type, value}]"),
        Column("roles", JSON, "the E-File's authorization roles: [role, ...] in the order sent"),
        Column("content_sha256", VARCHAR, "SHA-256 of the decoded document (only when content is copied)"),
        Column("content_size_bytes", BIGINT, "size of the decoded document (only when content is copied)"),
        Column("content_path", VARCHAR, "where the copy lies, relative to the data directory "
                                        "(documents/<first two hex digits>/<sha256>), once per content"),
    ),
    ("shipment_id", "efile_id"),
    "E-File documents linked to shipments (E-File lookup by SHIPMENT_ID, references and roles per file); "
    "replaced per shipment.",
)

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")

_TEXT = frozenset({TEXT})
FILE_NAME_KEY = Key("file_name", kinds=_TEXT)
MIME_TYPE_KEY = Key("mime_type", kinds=_TEXT)
DESCRIPTION_KEY = Key("description", kinds=_TEXT)
CREATED_KEY = Key("created_date_time", kinds=_TEXT, reads=parse_iso_datetime)
REFERENCE_TYPE_KEY = Key(("type", "reference_key", "key", "referenceType"), kinds=_TEXT, reads=to_str)
"""What a reference names: ``SHIPMENT``, ``HBL`` (the spec shows no EFileReference field: the names other shapes
services send, :func:`shipment_ids_of`'s)."""
REFERENCE_VALUE_KEY = Key(("value", "reference", "referenceValue"), kinds=frozenset({TEXT, NUMBER}), reads=to_str)
ROLE_KEY = Key(("role", "name"), kinds=_TEXT)
"""A role's name (the spec shows no EFileRole field either)."""
KEPT_AS_SENT = "kept as sent in its JSON column"
"""What becomes of a reference's or a role's ``id`` of another kind: nothing reads it (``document_references``,
``roles``)."""
EFILE_NODE = Node.of(
    (), RECORD_ID.unread_as("the shipment's E-Files quarantined, freight_meta.quarantine"), FILE_NAME_KEY,
    MIME_TYPE_KEY, DESCRIPTION_KEY, CREATED_KEY,
    Key("references", Node.of((), RECORD_ID.unread_as(KEPT_AS_SENT), REFERENCE_TYPE_KEY, REFERENCE_VALUE_KEY),
        array=True),
    Key("roles", Node.of((), RECORD_ID.unread_as(KEPT_AS_SENT), ROLE_KEY), array=True),
    known=("document",),  # the document's bytes (copied when content is copied; never a column)
)
"""An E-File as the documents stream reads it: its lookup record, with the references and roles read for it."""
EFILE_SHAPE = Shape("E-Files", EFILE_NODE)


def safe_file_name(name: Any, limit: int = 120) -> str:
    """A file name safe on any file system: the last path part, other characters than letters,
    digits, ``.``, ``_`` and ``-`` as ``_``, no leading dots, at most ``limit`` characters."""
    text = str(name or "").replace("\\", "/").rsplit("/", 1)[-1]
    text = _UNSAFE.sub("_", text).lstrip(".")[:limit]
    return text or "document"


def shipment_ids_of(references: Sequence[Any]) -> list[int]:
    """Shipment ids named by the references, whatever their shape: a reference names a shipment when
    one of its text fields says so (``type: SHIPMENT``, ``reference_key: SHIPMENT_ID``, ``key:
    SHIPMENT_ID``, ...) and one of its other fields holds an id (an integer or a string of digits).
    The spec shows no EFileReference fields, so services differ; a reference that names no shipment
    this way leaves its file to be placed by a lookup of one shipment (``sync.documents``)."""
    ids: list[int] = []
    for reference in references:
        if not isinstance(reference, Mapping):
            continue
        kinds = [k for k, v in reference.items() if isinstance(v, str) and "SHIPMENT" in v.upper()]
        if not kinds:
            continue
        for name, value in reference.items():
            if name in kinds or name == "id" or isinstance(value, bool):
                continue
            text = str(value).strip() if isinstance(value, int | str) else ""
            if text.isdigit() and int(text) not in ids:
                ids.append(int(text))
    return ids


def document_row(
    shipment_id: int,
    efile: Mapping[str, Any],
    references: Sequence[Any],
    roles: Sequence[Any],
    found: Problems,
    content: tuple[str, int, str] | None = None,
) -> dict[str, Any]:
    """The row of one E-File under one shipment. ``content``: (sha256, size, path) of a copied document.

    Raises RecordShapeError when the E-File has no usable id; a value that cannot be converted (text that
    is not Unicode, a reference that is no object, what JSON cannot carry) is null and one problem in ``found``.
    """
    efile_id = RECORD_ID.of(efile)
    if isinstance(efile_id, bool) or not isinstance(efile_id, int):
        raise RecordShapeError(f"E-File without a usable id: {efile_id!r}")
    try:
        to_int(efile_id)
    except Invalid as exc:  # beyond 64 bits: no BIGINT holds it
        raise RecordShapeError(f"E-File without a usable id: {exc}") from None
    created_raw = CREATED_KEY.of(efile)
    created_at: dt.datetime | None = None
    try:
        created_at = to_utc(found.zone.parse(created_raw))
    except DateTimeParseError as exc:
        found.add(CREATED_KEY.name, created_raw, str(exc))
    file_name = FILE_NAME_KEY.of(efile)
    return {
        "shipment_id": shipment_id,
        "efile_id": efile_id,
        "file_name": _text(efile, FILE_NAME_KEY, found),
        "safe_file_name": safe_file_name(file_name) if isinstance(file_name, str) else None,
        "mime_type": _text(efile, MIME_TYPE_KEY, found),
        "description": _text(efile, DESCRIPTION_KEY, found),
        "created_at": created_at,
        "created_date_time": created_raw if isinstance(created_raw, str) and is_text(created_raw) else None,
        "document_references": _json(_references(references, found), "references", found),
        "roles": _json(_roles(roles, found), "roles", found, sort_keys=False),
        "content_sha256": content[0] if content else None,
        "content_size_bytes": content[1] if content else None,
        "content_path": content[2] if content else None,
    }


def _text(record: Mapping[str, Any], key: Key, found: Problems) -> str | None:
    value = key.of(record)
    if value is None or (isinstance(value, str) and is_text(value)):
        return value
    what = "is not valid Unicode text (lone surrogate)" if isinstance(value, str) else "is not a string"
    found.add(key.name, value, f"{key.name} {what}: left null")
    return None


def _references(references: Sequence[Any], found: Problems) -> list[dict[str, Any]]:
    """The ``document_references`` of the E-File's references: {id, type, value} of each object; any other
    element is left out and reported."""
    kept: list[dict[str, Any]] = []
    for index, reference in enumerate(references):
        if isinstance(reference, Mapping):
            kept.append({"id": RECORD_ID.of(reference), "type": REFERENCE_TYPE_KEY.of(reference),
                         "value": REFERENCE_VALUE_KEY.of(reference)})
            _unread(reference, (REFERENCE_TYPE_KEY, REFERENCE_VALUE_KEY), kept[-1], f"references[{index}]", found)
        elif reference is not None:
            reason = f"{show(reference)} is not an object: not in document_references"
            found.add(f"references[{index}]", reference, reason)
    return kept


def _roles(roles: Sequence[Any], found: Problems) -> list[Any]:
    """The ``roles`` column's names: each object's role name (anything else as sent)."""
    names: list[Any] = []
    for index, role in enumerate(roles):
        if isinstance(role, Mapping):
            names.append(ROLE_KEY.of(role))
            _unread(role, (ROLE_KEY,), {"role": names[-1]}, f"roles[{index}]", found)
        else:
            names.append(role)
    return names


def _unread(record: Mapping[str, Any], keys: Sequence[Key], read: Mapping[str, Any], path: str,
            found: Problems) -> None:
    """A reference or role from which none of ``keys`` read a value though it holds fields the mapping does not
    know (a service's own names): a data problem naming them (the spec shows none of these records' fields; left
    null in silence, the column said nothing while the raw answer held everything)."""
    if any(read.get(name) is not None for name in read if name != "id"):
        return
    known = {name for key in keys for name in key.keys} | {RECORD_ID.name}
    others = sorted(name for name, value in record.items() if name not in known and value is not None)
    if others:
        found.add(path, record, f"none of {', '.join(name for key in keys for name in key.keys)} in it: its "
                                f"fields {', '.join(others)} are not read (kept in the raw answer)")


def _json(value: list[Any], path: str, found: Problems, *, sort_keys: bool = True) -> str | None:
    """A JSON column's text as it has always been written (``json.dumps``, its keys sorted or not: what held rows are
    compared with), or, for what JSON cannot carry, as ``json_or_report`` writes it, each reported: a lone surrogate
    as U+FFFD, NaN and Infinity as null, a value nested too deeply as a null column. One encoding for a clean value
    (a surrogate escape in it, ``\\ud...``, is looked at again: a pair is text, a lone one is not)."""
    try:
        text = json.dumps(value, sort_keys=sort_keys, allow_nan=False)
        if "\\ud" not in text or is_text(json.dumps(value, ensure_ascii=False)):
            return text
    except (ValueError, RecursionError):  # NaN or Infinity, nesting too deep
        pass
    text = json_or_report(value, path, found)
    return None if text is None else json.dumps(json.loads(text), sort_keys=sort_keys)
