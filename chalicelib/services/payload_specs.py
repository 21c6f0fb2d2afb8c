"""Payload specs: JSON Schemas that job input is validated against.

A schema must be valid against its declared meta-schema (Draft 2020-12 when it declares
none): otherwise 422 INVALID_SCHEMA with the reason. DELETE is a soft delete (the row stays
for history, marked); creating the name again revives it with the new schema.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from chalicelib.db.connection import Row
from chalicelib.domain.payload_specs import check_schema
from chalicelib.errors import PayloadSpecNotFound
from chalicelib.services.catalogue import Kind, NamedValueService, Stamped


@dataclass(frozen=True, kw_only=True)
class PayloadSpecView(Stamped):
    """A payload spec: its JSON Schema."""

    schema: dict[str, Any]

    @classmethod
    def from_row(cls, row: Row) -> PayloadSpecView:
        return cls(**Stamped.stamps(row), schema=row["value"])


@dataclass(frozen=True)
class PayloadSpecService(NamedValueService[PayloadSpecView]):
    """Create, list, get, replace and delete-unless-used payload specs."""

    kind: ClassVar[Kind] = "payload_spec"
    label: ClassVar[str] = "Payload spec"
    tx_prefix: ClassVar[str] = "ps"

    def view(self, row: Row) -> PayloadSpecView:
        return PayloadSpecView.from_row(row)

    def not_found(self, name: str) -> PayloadSpecNotFound:
        return PayloadSpecNotFound(f"Payload spec '{name}' does not exist.")

    def stored(self, name: str, value: Any) -> Any:
        """422 INVALID_SCHEMA unless ``value`` is a valid schema for its meta-schema."""
        return check_schema(value)
