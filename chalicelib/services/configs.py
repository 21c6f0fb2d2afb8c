"""Configs: named key-value objects endpoints reference as ``{{config.*}}``.

Updates take effect for future executions; an execution keeps the snapshot its first
attempt resolved. DELETE is a soft delete (the row stays for history, marked); creating the
name again revives it with the new values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from chalicelib.db.connection import Row
from chalicelib.errors import ConfigNotFound
from chalicelib.services.catalogue import Kind, NamedValueService, Stamped


@dataclass(frozen=True, kw_only=True)
class ConfigView(Stamped):
    """A config: its values (any JSON object)."""

    values: dict[str, Any]

    @classmethod
    def from_row(cls, row: Row) -> ConfigView:
        return cls(**Stamped.stamps(row), values=row["value"])


@dataclass(frozen=True)
class ConfigService(NamedValueService[ConfigView]):
    """Create, list, get, replace and delete-unless-used configs."""

    kind: ClassVar[Kind] = "config"
    label: ClassVar[str] = "Config"
    tx_prefix: ClassVar[str] = "config"

    def view(self, row: Row) -> ConfigView:
        return ConfigView.from_row(row)

    def not_found(self, name: str) -> ConfigNotFound:
        return ConfigNotFound(f"Config '{name}' does not exist.")
