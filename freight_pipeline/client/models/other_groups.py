"""Models of the spec's smaller endpoint groups: EDI code conversions, E-Files, the webhook receipt."""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import Field, field_validator

from freight_pipeline.client.models.base import Flag, FreightModel, _as_text


class CodeConversion(FreightModel):
    """An EDI code conversion record (assumption A14 beyond ``id``)."""

    id: int | None = None
    partner: str | None = None
    direction: str | None = None  # I: partner code -> internal, O: internal -> partner
    code_table: str | None = None
    code_type: str | None = None
    source_code: str | None = None
    target_code: str | None = None
    description: str | None = None
    valid_from: str | None = None
    last_modified_date_time: str | None = None


class EFileReference(FreightModel):
    id: int | None = None
    type: str | None = None  # SHIPMENT, ADDRESS, HBL, MBL, OTHER (A18)
    value: str | None = None

    @field_validator("value", mode="before")
    @classmethod
    def _value_to_text(cls, value: Any) -> Any:
        return _as_text(value)


class EFileRole(FreightModel):
    id: int | None = None
    role: str | None = None


class EFile(FreightModel):
    """An E-File document (A18). ``references``/``roles`` are None unless retrieved with cascade; a role the service
    names by a string alone (the spec shows no field of an EFileRole) stays that string."""

    id: int | None = None
    file_name: str | None = None
    mime_type: str | None = None
    description: str | None = None
    document: str | None = Field(default=None, repr=False)  # base64
    created_date_time: str | None = None
    references: list[EFileReference] | None = None
    roles: list[EFileRole | str] | None = None

    @classmethod
    def from_bytes(
        cls,
        content: bytes,
        *,
        file_name: str,
        mime_type: str = "application/octet-stream",
        description: str | None = None,
        references: Sequence[EFileReference | Mapping[str, Any]] = (),
        roles: Sequence[EFileRole | Mapping[str, Any] | str] = (),
    ) -> EFile:
        """A new E-File to store; ``roles`` may be plain role names."""
        return cls(
            file_name=file_name,
            mime_type=mime_type,
            description=description,
            document=base64.b64encode(content).decode("ascii"),
            references=[r if isinstance(r, EFileReference) else EFileReference.model_validate(r) for r in references],
            roles=[
                r
                if isinstance(r, EFileRole)
                else EFileRole(role=r)
                if isinstance(r, str)
                else EFileRole.model_validate(r)
                for r in roles
            ],
        )

    def content(self) -> bytes | None:
        """The decoded document; None when the record carries none (lookups omit it)."""
        return base64.b64decode(self.document) if self.document is not None else None


class WebhookReceipt(FreightModel):
    """The webhook's answer (assumption A17: ``{"received": true, "id": n}``)."""

    received: Flag = None
    id: int | None = None
